"""MCP domain: tool calls against a real MCP server, whose tool list is the action space.

```yaml
sandbox:
  kind: mcp
  command: [mcp-server-git, --repository, "{workdir}"]   # stdio; or url: http://127.0.0.1:PORT/mcp
  workdir: {copy: ./fixtures/repo}                      # a fresh copy per episode
```

The official `mcp` SDK client runs on the sandbox's `AsyncRunner` (the client context is
held open with `hold()`; see `mcp_client.py`). `describe()` gives the server's
`tools/list` (every page) as `ToolSpec`s. An action is `{tool, arguments}`; the
observation is the result as text (`mcp_client.render`), `is_error` from the result.

State: each episode gets a fresh server process and a fresh `{workdir}` (seeded by
copying `workdir.copy`, then the task's `setup` commands run in it; by default
`$TMPDIR/worldtrace-mcp-UID/N/work`, the lowest free numbered folder, so one collector
shows the server the same path in every episode: `take_slot`); `keep_server: true`
keeps one process across episodes for stateless servers (one found dead at a reset is
replaced, and said: `_kept_died`). Every process the episode
starts carries its folder in `WORLDTRACE_MCP_EPISODE` and is killed when it ends, with
what it started (`mcp_client.end_processes`): a set-up's `setsid ... &` wrote into the
next episode's workdir and outlived the collector. `{workdir}`, `{port}` (a free loopback port) and `{python}` (this
interpreter) expand in `command`, `url`, `cwd` and `set_env` values. A bare command name
is looked up on PATH, beside this interpreter (the `mcp-servers` extra) and in the
set-up's server folder (`.mcp-servers/bin`, `.mcp-servers/node_modules/.bin`, or
`$WORLDTRACE_MCP_SERVERS`).

Errors have owners. What the server answers is an observation: an `isError` result,
and a JSON-RPC error such as the answer to a tool it does not list (forwarded, so the
agent sees the server's own words), rendered `MCP error CODE: MESSAGE`. A server that
does not start, exits, closes the connection, loses our HTTP session (restarted), writes
bytes that are not UTF-8 on stdout or gives no answer within `call_timeout` is
infrastructure: the step raises and the attempt fails with the reason and the tail
of the server's stderr (of a call: what it wrote since its last answer came; of a server
that died: since the last answered call was sent); the next reset starts a new server.

Under `loopback_only` the server's proxy variables name a proxy of ours that refuses every
connection (`mcp_proxy.EgressRefuser`); an observation whose call met such a refusal is
flagged `refused` in its state (kept out of the loss) and lists the targets
(`egress_refused`).

Server log notifications and progress notifications go to the observation's
`state_json` (`{"logs": [...], "progress": [...]}`, bounded by `mcp_client.NoteList`:
a cut flagged `logs_truncated`, `progress_truncated`), never into its text (those of the
reset: the initial observation's, which the Recorder keeps in the record's metadata);
so do a stdio
server's stdout lines that are not JSON-RPC (`stdout: {lines, first}`; a server that
writes only those fails to start with a reason quoting them); an injected
fault (`faults:`, see `mcp_proxy.py`) is reported there as `{"perturbation": {kind,...}}`,
which the Recorder moves onto the turn (`Turn.perturbation`).

The client (`mcp_client.py`), the fault plan (`mcp_proxy.py`), the explorer and the
search server live beside it; what stays here (~400 lines) is the config, one class
with its lifecycle and the step, which read best together.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationInfo
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass, to_mapping
from worldtrace.schemas.tempfiles import lock_holder, try_lock
from worldtrace.schemas.validate import LONE_SURROGATE, lone_surrogates, storable

from .aio import AsyncRunner
from .base import SandboxConfigError, SandboxError, TaskSpec, Unpicklable, hold_lock
from .docker import FORBIDDEN_HOST_PATHS, _env_name
from .mcp_client import (
    EPISODE_ENV,
    SETUP_ENV,
    NoteList,
    ServerSpec,
    cap_log,
    connect,
    end_processes,
    episode_tags,
    expand,
    find_command,
    free_port,
    invalid_answer,
    log_size,
    render,
    root_cause,
    stderr_tail,
    tool_spec,
)
from .mcp_proxy import FAULT_TASK_ID, EgressRefuser, Fault, FaultConfig, is_transport_failure

PLACEHOLDERS = ("{workdir}", "{port}", "{python}")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
EGRESS_PORT_BASE = 20000
"""Our refusing proxy (`loopback_only`) listens at 127.0.0.1:(this + N) for episode folder
N (`take_slot`), else (that port taken: another user's sandbox, a service) at a port the
system picks. Folders are locked, so two sandboxes of this user never want one port; a
random port per sandbox showed in the proxy variables a tool prints (get-env), and a
replay's observation differed from its recording's in it."""


def no_egress_env(proxy: str) -> dict[str, str]:
    """Proxy variables naming our refusing proxy (`EgressRefuser`), loopback exempt:
    proxy-honouring clients in the server reach nothing beyond this machine."""
    return {
        **{k: proxy for k in PROXY_VARS},
        **{k.lower(): proxy for k in PROXY_VARS},
        "NO_PROXY": "localhost,127.0.0.1,::1",
        "no_proxy": "localhost,127.0.0.1,::1",
    }


PARENT_DEATH = ("setpriv", "--pdeathsig", "KILL", "--") if shutil.which("setpriv") else ()
"""Servers run under util-linux's setpriv so that they die with a collector killed by
SIGKILL (its exit hooks never run, and not every server exits when its stdin closes)."""
GONE_HOPS = 10
"""Loop turns a reset gives a kept server's closed stdout to reach the client's read
stream (the SDK's reader, its drain, the stream: a few task hops) before it checks it."""
STOP_TIMEOUT = 10.0
"""Seconds to close a session and stop its server (stdin, SIGTERM, SIGKILL)."""

SLOTS_ROOT = "worldtrace-mcp-{uid}"
"""Folder (in the temp dir) of the episode folders `SLOT/` (server log, `work/`), each
locked by `SLOT.lock` while a sandbox uses it."""
MAX_SLOTS = 1024

log = logging.getLogger(__name__)


def slots_root() -> Path:
    return Path(tempfile.gettempdir()) / SLOTS_ROOT.format(uid=os.getuid())


def _own_root(root: Path) -> Path:
    """`root`, made private to this user (the temp dir is shared: a folder someone else
    made, or a symlink, is refused rather than written into)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = root.lstat()
    if not root.is_dir() or root.is_symlink() or st.st_uid != os.getuid():
        raise SandboxError(f"{root} is not a folder of this user: remove it or set TMPDIR")
    return root


def take_slot(root: Path | None = None) -> tuple[Path, Any]:
    """The lowest free episode folder `root/N`, empty, and its held lock (closed: free).

    Numbered slots rather than random temp names: the default `{workdir}` is then the same
    path in every episode of a collector (`/tmp/worldtrace-mcp-UID/0/work`), so the paths
    the server shows repeat across episodes (dedup, replays); and a collector killed with
    SIGKILL leaves a folder whose lock nobody holds, which the next sandbox (or `gc`,
    `sweep_workdirs`) empties."""
    root = _own_root(root or slots_root())
    sweep_workdirs(root)
    for n in range(MAX_SLOTS):
        lock = try_lock(root / f"{n}.lock")
        if lock is None:
            continue
        path = root / str(n)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(mode=0o700)
        return path, lock
    raise SandboxError(f"all {MAX_SLOTS} MCP episode folders in {root} are in use")


def sweep_workdirs(root: Path | None = None, dry_run: bool = False) -> list[dict[str, Any]]:
    """Episode folders no live sandbox holds (their owner died), and the processes their
    episode left running (a collector killed with SIGKILL: `setpriv --pdeathsig` reaches
    its children only, not what they started in sessions of their own): killed and
    removed under the folder's lock, so never a sandbox's that is taking it. Returns
    `{path, size, reason}` for each."""
    root = root or slots_root()
    found: list[dict[str, Any]] = []
    try:
        slots = {p.name for p in root.iterdir() if p.name.isdigit() and p.is_dir()}
    except (FileNotFoundError, NotADirectoryError):
        return found
    running = {  # one scan of /proc: the episodes of this root that still run something
        Path(tag).name: n for tag, n in episode_tags(f"{root}{os.sep}").items()
        if Path(tag).parent == root and Path(tag).name.isdigit()
    }  # fmt: skip
    for name in sorted(slots | running.keys(), key=int):
        path = root / name
        lock = try_lock(root / f"{name}.lock")
        if lock is None:
            continue  # in use
        try:
            if not dry_run and name in running:
                end_processes(str(path))  # before the folder: they may write into it
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            if not dry_run:
                shutil.rmtree(path, ignore_errors=True)
        finally:
            lock.close()
        reason = "MCP episode folder of a sandbox that stopped (its lock is free)"
        if name in running:
            reason += f"; {running[name]} process(es) of its episode still ran"
        found.append({"path": str(path), "size": size, "reason": reason})
    return found


def _abs_host_path(value: str | None) -> str | None:
    if value is not None:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path, got {value!r}")
        if os.path.normpath(value) in FORBIDDEN_HOST_PATHS:
            raise ValueError(f"{value} cannot be a work directory")
    return value


def _host_dir(value: str) -> str:
    """An existing host directory as an absolute path; a relative one starts at the current
    directory (where `worldtrace` runs), so the queued job never depends on a worker's."""
    real = os.path.abspath(os.path.expanduser(value))
    shown = value if real == value else f"{value} ({real})"
    if not os.path.exists(real):
        raise ValueError(f"{shown} does not exist")
    if not os.path.isdir(real):
        raise ValueError(f"{shown} is not a directory")
    return real


def _copy_dir(value: str | None) -> str | None:
    if value is None:
        return None
    real = _host_dir(value)
    if real in FORBIDDEN_HOST_PATHS:
        raise ValueError(f"{real} cannot be copied into a work directory")
    return real


def _cwd_dir(value: str | None) -> str | None:
    """Placeholders ({workdir}/sub) expand per episode; any other path is the host's."""
    if value is None or any(x in value for x in PLACEHOLDERS):
        return value
    return _host_dir(value)


def _loopback_url(value: str | None, info: ValidationInfo) -> str | None:
    """A field's own check, so a refusal names `sandbox.url` and its line (from
    `__post_init__` it named the `sandbox:` line)."""
    if value is not None:
        parts = urlsplit(value.replace("{port}", "1"))
        if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK_HOSTS:
            raise ValueError(f"must be http(s) on loopback (127.0.0.1), got {value!r}")
        if "{port}" in value and not info.data.get("command"):
            raise ValueError("{port} in the url needs a command that starts the server")
    return value


def _env_names(value: dict[str, str]) -> dict[str, str]:
    """`set_env` whose names a process environment can hold: not empty, no `=` and no NUL
    (`A=B`: the server's start failed on it, `illegal environment variable name`, naming
    none, at every attempt). Names a shell would not take (`a.b`, `A-B`) still reach the
    server, as they did."""
    bad = [k for k in value if not k or "=" in k or "\0" in k]
    if bad:
        raise ValueError(f"not an environment variable name: {', '.join(map(repr, bad))}")
    return value


def _one_workdir(value: bool, info: ValidationInfo) -> bool:
    workdir = info.data.get("workdir")
    if value and workdir is not None and (workdir.copy or workdir.at):
        raise ValueError("keeps one workdir; drop it to get a fresh one per episode")
    return value


HOST_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE}
)
"""Failures of a `workdir.copy` that are the host's (a full disk), which a retry may not
meet; any other is the folder's (a named pipe, a file this user may not read), met by
every attempt alike."""


class _CopyFailed(Exception):
    """A file of `workdir.copy` that could not be copied (not an OSError: `copytree`
    collects those and goes on, to raise them all as one list at the end)."""

    def __init__(self, path: str, error: OSError) -> None:
        super().__init__(path)
        self.path, self.error = path, error


def _copy_file(src: str, dst: str) -> str:
    try:
        return shutil.copy2(src, dst)
    except OSError as exc:  # shutil.SpecialFileError (a named pipe) is one
        raise _CopyFailed(src, exc) from None


def _copy_tree(src: str, dst: Path) -> None:
    """`workdir.copy` into the episode's folder, failing on one line that names the path
    it could not copy: SandboxConfigError (not retried) when the folder is to blame (a
    named pipe, a socket, a file or folder this user may not read), SandboxError (retried)
    when the host is (`HOST_ERRNOS`). A named pipe in it failed each attempt, retried, with
    shutil's raw list of (source, destination, reason) tuples."""
    try:
        shutil.copytree(src, dst, symlinks=True, copy_function=_copy_file)
        return
    except _CopyFailed as exc:
        path, err = exc.path, exc.error
        code = getattr(err, "errno", None)
        if isinstance(err, shutil.SpecialFileError):
            why = "it is a named pipe (a FIFO), which a copy cannot hold"
        elif code == errno.ENXIO:
            why = "it is a socket or a device, which a copy cannot hold"
        else:
            why = err.strerror or str(err)
    except shutil.Error as exc:  # a folder it could not read or make (scandir, mkdir)
        found = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        path, _, reason = found[0] if found else (src, None, str(exc))
        m = re.match(r"\[Errno (\d+)\] ([^:]+)", reason)  # str(OSError): its errno is gone
        code, why = (int(m.group(1)), m.group(2)) if m else (None, reason)
        if len(found) > 1:
            why += f" (and {len(found) - 1} more)"
    said = f"workdir.copy: cannot copy {path}: {why}"
    if code in HOST_ERRNOS:
        raise SandboxError(said + " (the host's: the attempt is retried)")
    raise SandboxConfigError(said + "; every attempt would fail alike: not retried")


def _marker(path: Path) -> Path:
    """The lock file beside a fixed `workdir.at` folder: a sandbox of ours uses it."""
    return Path(f"{path}.worldtrace-lock")


@dataclass
class WorkdirLock:
    """A hold on a fixed `workdir.at` folder, from `hold_workdir` until `release()`."""

    key: str
    file: IO[str] | None
    thread: int
    """The thread that took it: a reset in that thread cannot wait for it."""
    waited: float
    """Seconds `hold_workdir` waited for another sandbox to let the folder go."""

    def release(self) -> None:
        with _HOLDERS_LOCK:
            if _HOLDERS.get(self.key) is self:
                del _HOLDERS[self.key]
        fh, self.file = self.file, None
        if fh is not None:
            fh.close()  # releases the flock


_HOLDERS: dict[str, WorkdirLock] = {}
"""The `workdir.at` folders this process holds, by path."""
_HOLDERS_LOCK = threading.Lock()


def hold_workdir(path: Path, timeout: float, stop: threading.Event | None = None) -> WorkdirLock:
    """The fixed `workdir.at` folder to ourselves: its lock file (`_marker`) held. While
    another sandbox uses the folder (another thread, a worker's other slot, another
    process of this host: flock) this waits up to `timeout` seconds, then raises
    SandboxError naming the holder; a holder that died holds nothing (the kernel drops
    its flock). `stop` set while waiting (the collector is stopping) ends the wait with
    StopRequested: the episode goes back to the queue, nothing counted. A sandbox of this
    very thread holding it fails at once: this thread is the one that would let it go.

    A busy folder is a wait, not a failure: two episodes of one job that fixes its folder
    (`worker --concurrency 2`, two workers on one store) failed at once, and the retry of
    the one that lost fired at once too, so it used up its retries while the other ran."""
    marker, key = _marker(path), os.path.abspath(path)
    with _HOLDERS_LOCK:
        mine = _HOLDERS.get(key)
    if mine is not None and mine.thread == threading.get_ident():
        raise SandboxError(
            f"{path} is in use by another sandbox of this thread (not closed since its "
            "episode), which waiting would never free: close it first"
        )
    fh, waited = hold_lock(
        marker, timeout, stop, f"pid {os.getpid()} on {socket.gethostname()}\n",
        f"stop requested while waiting for the workdir {path}",
        lambda: f"{path} is in use by another sandbox ({lock_holder(marker)}); waited "
        f"{timeout:g} s (workdir.lock_timeout)",
    )  # fmt: skip
    lock = WorkdirLock(key, fh, threading.get_ident(), waited)
    with _HOLDERS_LOCK:
        _HOLDERS[key] = lock
    return lock


def _foreign_folder(path: Path) -> str | None:
    """Why a fixed `workdir.at` folder must not be emptied at a reset: it holds files and
    no sandbox of ours ever used it (no lock file beside it). Each attempt failed alike on
    it, retried (a user's folder named by mistake; the lock is what tells ours)."""
    marker = _marker(path)
    try:
        if not path.is_dir() or not any(path.iterdir()) or marker.exists():
            return None
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror or exc})"
    return (
        f"{path} holds files but no {marker.name} (no sandbox of worldtrace has used it): "
        "refusing to empty it; name an empty or new folder, or empty this one"
    )


@configclass
class WorkdirConfig:
    """The per-episode directory `{workdir}` expands to (by default `work/` in the lowest
    free numbered folder of `$TMPDIR/worldtrace-mcp-UID/`, emptied at every reset)."""

    copy: Annotated[str | None, AfterValidator(_copy_dir)] = None
    """Host directory copied into it at every reset (a git repository, data files); it
    must exist, and a relative path starts at the directory `worldtrace` runs in (the job
    keeps the absolute path)."""
    at: Annotated[str | None, AfterValidator(_abs_host_path)] = None
    """A fixed absolute path instead of the numbered folder, so paths in actions stay the same
    across episodes and replays; emptied at each reset and locked while in use (from the
    reset to the end of the episode)."""
    lock_timeout: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 600.0
    """Seconds a reset waits while another sandbox (a thread or a process of this host)
    uses the `at` folder; then the attempt fails saying so (0: fail at once)."""


@configclass
class MCPConfig:
    """One MCP server: `command` (stdio), `url` (streamable HTTP), or both (we start the
    command, then reach it at the URL)."""

    command: tuple[str, ...] = ()
    """The server's argv; placeholders {workdir}, {port}, {python} expand."""
    url: Annotated[str | None, AfterValidator(_loopback_url)] = None
    """A streamable HTTP endpoint on loopback, e.g. http://127.0.0.1:{port}/mcp."""
    env: tuple[Annotated[str, AfterValidator(_env_name)], ...] = ()
    """Names of variables passed from the collector's environment (values never stored);
    one this host does not set fails the attempt, not retried (SandboxConfigError)."""
    set_env: Annotated[dict[str, str], AfterValidator(_env_names)] = field(default_factory=dict)
    """Variables set for the server (stored in the job as written: a secret belongs in
    `env`; what the server prints of them is redacted but for `env_keep`'s names),
    placeholders expand. A name that is no variable's (`A=B`) is refused
    with the job, naming it (every attempt failed on it, retried, naming none)."""
    cwd: Annotated[str | None, AfterValidator(_cwd_dir)] = None
    """Working directory of the server process (placeholders expand); default {workdir},
    so relative paths land in the episode's directory. Without a placeholder it is an
    existing host directory (relative: from where `worldtrace` runs; kept absolute)."""
    workdir: WorkdirConfig = field(default_factory=WorkdirConfig)
    keep_server: Annotated[bool, AfterValidator(_one_workdir)] = False
    """Keep one server process (and its workdir) across episodes: stateless servers only."""
    protocol: Literal["auto", "legacy"] = "auto"
    """`auto` probes for the 2026 protocol and falls back to the initialize handshake."""
    start_timeout: Annotated[float, Field(gt=0, le=600)] = 30.0
    """Seconds for the server to start, initialize and list its tools."""
    call_timeout: Annotated[float, Field(gt=0, le=3600)] = 30.0
    """Seconds one tool call may take; past it the attempt fails (a hung server)."""
    output_cap: Annotated[int, Field(ge=1024, le=256 << 20)] = 1 << 20
    """Characters of observation text kept per call; the rest is cut and flagged."""
    loopback_only: bool = True
    """Point the server's proxy variables at a closed loopback port (loopback exempt):
    servers whose HTTP clients honour them cannot reach beyond this machine."""
    faults: FaultConfig | None = None
    """Injected faults (see mcp_proxy.py); None: the server's answers untouched."""

    def host_problems(self) -> list[tuple[tuple[str, ...], str]]:
        """(key path under `sandbox`, why) of what this host lacks for the job, every
        attempt alike (`SandboxConfigError`): a variable `env` names that is not set, a
        `workdir.at` folder holding files no sandbox of ours left. Checked when a job
        loads (`JobSpec.check_store`) and again at each reset."""
        out = []
        unset = [n for n in self.env if n not in os.environ]
        if unset:  # the server would run without them, and its answers pass for real ones
            out.append((("env",), f"variables not set on this host: {', '.join(unset)}"))
        at = self.workdir.at
        if at is not None and (why := _foreign_folder(Path(at))):
            out.append((("workdir", "at"), why))
        return out

    def __post_init__(self) -> None:
        if not self.command and not self.url:
            raise ValueError("an mcp sandbox needs a command (stdio) or a url (streamable HTTP)")


@dataclass(frozen=True)
class FaultDraw:
    """A replay's fault draw (`MCPSandbox.replay_params`, its `TaskSpec.params`): the task
    id the recording's draw was keyed on, and the recording's faults, used when the job
    gives no `faults:` of its own. Keyed on the replay task's id, the replay drew other
    faults than the episode it replays (docs/mcp.md promises the same)."""

    task_id: str
    faults: FaultConfig | None = None


class MCPSandbox(Unpicklable):
    kind = "mcp"
    domain = "mcp"
    config_class = MCPConfig
    action_kinds = ("tool_call",)
    explorer = "worldtrace.sandboxes.mcp_explorer:SchemaExplorer"
    accepts_stop = True  # its reset may wait for a fixed workdir (`reset_sandbox`)

    @property
    def close_between_episodes(self) -> bool:
        """A fixed `workdir.at` folder is let go at the end of each episode (the collector
        closes the sandbox then), so an episode that waits for it gets it; an idle sandbox
        kept for the job's next episode held it, with its server, until its next reset."""
        return self.config.workdir.at is not None

    @classmethod
    def static_action_space(cls, config: MCPConfig) -> None:
        return None  # only the live server knows its tools

    @classmethod
    def replay_params(cls, recorded: Any, config: dict[str, Any], params: Any) -> FaultDraw:
        """What a replay of `recorded` (a Trajectory; `config` its `environment.config`)
        draws its faults from (`policies.replay_task`; an MCP task has no keys of its own,
        `params`): the recorded draw key (`fault_task_id`, kept since 12-06; before, the
        recording's own task id, which its draw used) and the recorded faults."""
        from worldtrace.schemas.parsing import ConfigError, parse

        faults = config.get("faults")
        try:
            given = parse(FaultConfig, faults) if isinstance(faults, dict) else None
        except ConfigError as exc:
            raise SandboxConfigError(
                f"replay of {recorded.trajectory_id}: its recorded faults do not check: {exc}"
            ) from None
        key = config.get(FAULT_TASK_ID)
        task_id = recorded.task.task_id if recorded.task else None
        return FaultDraw(key if isinstance(key, str) else task_id or "", given)

    @classmethod
    def host_paths(cls, config: MCPConfig) -> list[str]:
        paths = [config.workdir.copy, config.workdir.at, config.cwd]
        return [p for p in paths if p and not any(x in p for x in PLACEHOLDERS)]

    def __init__(self, config: MCPConfig):
        self.config = config
        self._runner: AsyncRunner | None = None
        self._conn = None
        self._release = None
        self._healthy = False
        self._private: Path | None = None
        self._workdir: Path | None = None
        self._lock = None
        self._slot_lock = None
        self._waited = 0.0
        """Seconds the last reset waited for its `workdir.at` folder."""
        self._task_id = ""
        """What this episode's fault draw is keyed on (the task id; a replay's: the
        recording's, `FaultDraw`)."""
        self._faults = config.faults
        """This episode's faults: the job's, else a replay's recorded ones (`FaultDraw`)."""
        self._calls = 0
        self._said = 0
        """The stderr log's size when the last answer came (or the episode began)."""
        self._asked = 0
        """Its size when the last answered call was sent (or the episode began)."""
        self._initial = ""
        self._spec: ServerSpec | None = None
        self._values: dict[str, str] = {}
        self._env: dict[str, str] = {}
        self._warned = False
        """Whether the server's non-JSON stdout was warned about (once per sandbox)."""
        self._probe_warned = False
        """Whether a start's unanswered server/discover was warned about (once)."""
        self._died: str | None = None
        """Why the kept server died after the last episode (`_kept_died`), this reset."""
        self._egress: EgressRefuser | None = None
        """The proxy the server's proxy variables name (`loopback_only`): refuses all."""

    # -- lifecycle ---------------------------------------------------------------
    def reset(self, task: TaskSpec, stop: threading.Event | None = None) -> Observation:
        draw = task.params if isinstance(task.params, FaultDraw) else None
        self._faults = self.config.faults or (draw.faults if draw is not None else None)
        self._task_id = draw.task_id if draw is not None else task.task_id
        kept = self._conn is not None and self.config.keep_server and self._healthy
        self._died = self._kept_died() if kept else None
        kept = kept and self._died is None
        if not kept:
            self._stop()  # the last server, workdir and lock (also those of a failed start)
            self._prepare(stop)
            self._run_setup(task.setup)
            self._start()
        else:  # the last episode's set-up left running is its own; the server's is kept
            end_processes(str(self._private), setup_only=True)
            self._run_setup(task.setup)
        self._conn.proxy.use(self._faults)  # a kept server's proxy: this episode's faults
        self._calls = 0
        # a kept server's marks stay where its last answered call left them: what it says
        # as it dies now (a crash the check above missed) is quoted by the call that finds
        # it dead; moved to the log's end here, its last words were behind them
        if cap_log(self._spec.stderr_path) or not kept:  # what a kept server wrote between
            self._said = self._asked = log_size(self._spec.stderr_path)  # episodes: cut
        state = _state(**self._runner.run(self._take_notes(), STOP_TIMEOUT))
        return Observation(self._initial, state_json=state)

    def _kept_died(self) -> str | None:
        """Whether the server kept across episodes (`keep_server`) died since the last
        one's last call (it exited, crashed or closed its stdout just after answering it):
        why, with the tail of its stderr since that call was sent (its last words), said as
        a warning and kept for the record's `environment.config` (`kept_server_died`); the
        reset then starts a new one. Unnoticed, the next episode failed at its first call
        (`the server closed the connection`) with no stderr. A server someone else runs at
        its URL is not seen here: a call that finds it restarted fails, as before."""

        async def gone() -> str | None:
            import anyio

            for _ in range(GONE_HOPS):  # a stdout the server closed reaches the stream's end
                await anyio.sleep(0)
            return self._conn.gone()

        why = self._runner.run(gone(), STOP_TIMEOUT)
        if why is None:
            return None
        tail = self._said_since(died=True)
        said = why + (f"; its stderr: {tail}" if tail else "")
        log.warning(
            "MCP server %s (keep_server) died between episodes, after the last one's last "
            "call: %s; a new one is started",
            server_name(self._spec.argv[len(PARENT_DEATH) :]) or self._spec.url,
            said,
        )
        return said

    async def _take_notes(self) -> dict[str, Any]:
        """Logs (`logs_truncated` when `NoteList` cut or dropped some), non-JSON stdout
        lines and connections our proxy refused since the last observation, as parts of
        its `state_json`; on the loop, where the logging callback, the SDK's stdout reader
        and the proxy add them."""
        stdout = self._spec.stdout_noise.take()
        if stdout and not self._warned:
            self._warned = True
            log.warning(
                "MCP server %s wrote to stdout what is not JSON-RPC (ignored, kept in the "
                "observation's state_json as `stdout`): %r",
                server_name(self._spec.argv[len(PARENT_DEATH) :]) or self._spec.url,
                stdout["first"][0],
            )
        egress = self._egress.take() if self._egress is not None else []
        logs, cut = self._conn.take_logs()
        return {"logs": logs, "logs_truncated": cut, "stdout": stdout, "egress_refused": egress}

    def _prepare(self, stop: threading.Event | None = None) -> None:
        """A private folder (server log) and a fresh workdir; placeholders and env fixed."""
        c = self.config
        if problems := c.host_problems():
            said = (f"sandbox.{'.'.join(key)}: {why}" for key, why in problems)
            raise SandboxConfigError("; ".join(said))
        self._private, self._slot_lock = take_slot()
        self._workdir = self._fresh_workdir(stop)
        values = {"{workdir}": str(self._workdir), "{python}": sys.executable}
        if any("{port}" in x for x in (*c.command, c.url or "", *c.set_env.values())):
            values["{port}"] = str(free_port())
        self._values = values
        self._runner = self._runner or AsyncRunner("worldtrace-mcp")
        self._env = {}
        if c.loopback_only:  # for the set-up commands and a server we start
            self._egress = self._egress or EgressRefuser()
            # at the port of this episode folder, so the proxy variables, which a tool may
            # print (server-everything's get-env), repeat as the folder's path does
            port = EGRESS_PORT_BASE + int(self._private.name)
            self._env.update(no_egress_env(self._runner.run(self._egress.url(port), STOP_TIMEOUT)))
        self._env.update({n: os.environ[n] for n in c.env})
        self._env.update({k: expand(v, values) for k, v in c.set_env.items()})
        # what the episode starts carries its folder, so it all ends with it (`_stop`)
        self._env[EPISODE_ENV] = str(self._private)

    def _run_setup(self, commands: tuple[str, ...]) -> None:
        """The task's set-up commands (`sh -c`) in the workdir, before the episode.

        Each runs in a session of its own, as the server does: a Ctrl-C at the terminal
        (SIGINT to the collector's process group) asks the collector to stop after the
        current step, and it killed the command, so the attempt failed as `exited -2`.
        Past start_timeout the whole group is killed, not just `sh` (what it started
        ran on); what it leaves running ends with the episode (`end_processes`)."""
        from mcp.client.stdio import get_default_environment

        env = {**get_default_environment(), **self._env, SETUP_ENV: "1"}
        for cmd in commands:
            proc = subprocess.Popen(
                [*PARENT_DEATH, "sh", "-c", cmd],
                cwd=self._workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
            )
            try:
                out, err = proc.communicate(timeout=self.config.start_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()  # the group is gone: its pipes close
                raise SandboxError(f"task setup {cmd!r} ran past start_timeout") from None
            if proc.returncode != 0:
                tail = (err or out).strip()[-400:]
                raise SandboxError(f"task setup {cmd!r} exited {proc.returncode}: {tail}")

    def _start(self) -> None:
        c, values = self.config, self._values
        self._runner = self._runner or AsyncRunner("worldtrace-mcp")
        argv = [expand(a, values) for a in c.command]
        if argv:
            argv = [*PARENT_DEATH, find_command(argv[0]), *argv[1:]]
        spec = ServerSpec(
            argv=tuple(argv),
            url=expand(c.url, values) if c.url else None,
            env=self._env,
            cwd=expand(c.cwd, values) if c.cwd else str(self._workdir),
            protocol=c.protocol,
            stderr_path=self._private / "server.log",
            start_timeout=c.start_timeout,
            faults=self._faults,
        )
        self._spec = spec
        noise = spec.stdout_noise  # bytes that are not UTF-8 end the start at once
        try:
            self._conn, self._release = self._runner.hold(
                lambda: connect(spec),
                c.start_timeout,
                abort_with=lambda abort: setattr(noise, "on_break", abort),
            )
        except Exception as exc:
            cause = root_cause(exc)
            reason = spec.stdout_noise.broken or _reason(cause, bool(spec.url))
            if isinstance(cause, TimeoutError) and not spec.stdout_noise.broken:
                reason = (
                    f"no answer in time: waited start_timeout ({c.start_timeout:g} s) for "
                    f"{spec.stage.now}"
                )
            if spec.stdout_noise.total:
                reason += f"; {spec.stdout_noise.summary()}"
            tail = stderr_tail(spec.stderr_path)
            self._stop()
            raise SandboxError(
                f"MCP server did not start: {reason}" + (f"; its stderr: {tail}" if tail else "")
            ) from None
        finally:
            noise.on_break = None  # a call sets its own
        self._healthy = True
        self._initial = self._initial_state()
        waited = spec.stage.probe_unanswered
        if waited is not None and not self._probe_warned:  # every start waits as long
            self._probe_warned = True
            log.warning(
                "MCP server %s gave no answer to server/discover, the probe of `protocol: "
                "auto`, and started with the initialize handshake after %g s: every start "
                "waits for it; `protocol: legacy` skips the probe",
                server_name(spec.argv[len(PARENT_DEATH) :]) or spec.url,
                waited,
            )

    def _fresh_workdir(self, stop: threading.Event | None = None) -> Path:
        w = self.config.workdir
        at, copy = w.at, w.copy
        self._waited = 0.0
        if at is None:
            path = self._private / "work"
        else:
            path = Path(at)
            self._lock = hold_workdir(path, w.lock_timeout, stop)  # _stop releases it
            self._waited = self._lock.waited
            shutil.rmtree(path, ignore_errors=True)
        if copy:
            if not os.path.isdir(copy):  # removed since the job was checked: no retry mends it
                raise SandboxConfigError(f"workdir.copy: {copy} does not exist on this host")
            _copy_tree(copy, path)
        else:
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _initial_state(self) -> str:
        conn, c = self._conn, self.config
        lines = [f"MCP server: {conn.server or 'unnamed'} (protocol {conn.protocol_version})"]
        uses = " ".join((*c.command, c.cwd or "", *c.set_env.values()))
        if "{workdir}" in uses:
            lines.append(f"Working directory: {self._workdir}")
        if conn.instructions:
            lines.append(f"Instructions: {conn.instructions.strip()}")
        return "\n".join(lines)

    def _stop(self) -> None:
        if self._release is not None:
            self._release()
        self._conn = self._release = None
        self._healthy = False
        if self._private is not None:
            # what the episode started and left running (a set-up's `setsid ... &`, a
            # tool's daemon), before its folder goes: it wrote into the next episode's
            end_processes(str(self._private))
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None
        if self._slot_lock is not None:
            self._slot_lock.close()  # emptied above: free for the next sandbox
            self._slot_lock = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def close(self) -> None:
        self._stop()
        if self._runner is not None:
            if self._egress is not None:
                with contextlib.suppress(Exception):
                    self._runner.run(self._egress.close(), STOP_TIMEOUT)
                self._egress = None
            self._runner.close()
            self._runner = None

    # -- steps -------------------------------------------------------------------
    def _said_since(self, died: bool = False) -> str:
        """The server's stderr since its last answer came (or the episode began): a failure
        quotes what was said since, never an earlier call's own traceback. A server that
        died (`died`): since the last answered call was sent, its own lines included. Its
        last words, written just after that answer, were mostly in the log before we read
        the answer (a third of the time even at a bare read of the pipe), so no mark taken
        on our side of the pipe falls between the two; what it said while answering comes
        before them in the tail."""
        since = self._asked if died else self._said
        return stderr_tail(self._spec.stderr_path, since=since)

    def step(self, action: Action) -> Observation:
        if self._conn is None:
            raise SandboxError("step before reset")
        if action.kind != "tool_call" or not action.name:
            raise SandboxError(f"an mcp sandbox takes tool calls, not {action.kind} actions")
        arguments = json.loads(action.arguments_json or "{}")
        why = _not_text(action.name, "the tool name") or _not_text(arguments, "argument")
        if why:  # nothing sent: the SDK's writer would die on it and blame the server
            raise SandboxError(
                f"tools/call {storable(action.name)}: {why}: it cannot be sent as UTF-8"
            )
        index, self._calls = self._calls, self._calls + 1
        fault = self._conn.proxy.decide(action.name, arguments, (self._task_id, index))
        timeout = self.config.call_timeout
        noise = self._spec.stdout_noise
        before = noise.total
        asked = log_size(self._spec.stderr_path)
        try:  # past the timeout the call is cancelled (the SDK tells the server so); an
            # injected latency is ours, not the server's: it is waited for on top
            answer, flag, refused, notes = self._runner.run(
                self._call(action.name, arguments, fault), timeout + fault.latency_ms / 1000
            )
        except TimeoutError:
            self._healthy = False
            # an answer that is no JSON-RPC (a print, a line cut short) is dropped as noise:
            # then the server did answer, and the reason says what it wrote (a lone
            # surrogate escape is mended by our codec, `mend_surrogates`: an answer)
            meanwhile = f"; meanwhile {noise.summary()}" if noise.total > before else ""
            tail = self._said_since()  # what it waits for, if it says
            raise SandboxError(
                f"tools/call {action.name}: no answer within {timeout:g} s (the server hangs "
                f"or the tool outlasts call_timeout){meanwhile}"
                + (f"; server stderr: {tail}" if tail else "")
            ) from None
        except Exception as exc:
            self._healthy = False
            cause = root_cause(exc)
            tail = self._said_since(died=_closed(cause))
            raise SandboxError(
                f"tools/call {action.name}: {_reason(cause, bool(self._spec.url))}"
                + (f"; server stderr: {tail}" if tail else "")
            ) from None
        if cap_log(self._spec.stderr_path):  # a chatty server kept across episodes
            self._said = asked = log_size(self._spec.stderr_path)  # the marks are gone
        self._asked = asked
        text, is_error, truncated = render(answer, self.config.output_cap)
        return Observation(
            text,
            is_error=is_error,
            truncated=truncated or bool(flag and flag["kind"] == "truncate"),
            state_json=_state(perturbation=flag, refused=refused, **notes),
        )

    async def _call(self, name: str, arguments: dict[str, Any], fault: Fault):
        import anyio
        from mcp.shared.exceptions import MCPError

        conn, noise = self._conn, self._spec.stdout_noise
        progress = NoteList("message")  # bounded as logs are
        refusals = self._egress.total if self._egress is not None else 0

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.add({"progress": value, "total": total, "message": message})

        with anyio.CancelScope() as scope:
            noise.on_break = scope.cancel  # a stdout that broke will never carry the answer
            try:
                if noise.broken is None:
                    answer, flag = await conn.proxy.call(name, arguments, fault, on_progress)
            except MCPError as exc:
                if is_transport_failure(exc.code, exc.message):
                    raise
                answer, flag = exc.error, None  # the server's JSON-RPC error answer
            finally:
                noise.on_break = None
        if noise.broken is not None:
            raise SandboxError(noise.broken)
        self._said = log_size(self._spec.stderr_path)  # as the answer came, not once returned
        # our proxy refused the server a connection while it answered: the answer is
        # (or holds) our refusal, not the world's (`refused`: kept out of the loss)
        refused = self._egress is not None and self._egress.total > refusals
        notes = await self._take_notes()
        notes["progress"], notes["progress_truncated"] = progress.take()
        return answer, flag, refused, notes

    def describe(self) -> dict[str, Any]:
        c, conn = self.config, self._conn
        config: dict[str, Any] = {
            "transport": "http" if c.url else "stdio",
            "command": list(c.command),
            "protocol": conn.protocol_version if conn else None,
            "keep_server": c.keep_server,
            "call_timeout": c.call_timeout,
            "output_cap": c.output_cap,
            "faults": to_mapping(self._faults) if self._faults else None,
        }
        if self._faults and self._task_id:  # what the draw is keyed on: a replay's too
            config[FAULT_TASK_ID] = self._task_id
        if c.workdir.at is not None:  # another sandbox held the folder that long
            config["workdir_wait_s"] = round(self._waited, 3)
        noise = self._spec.stdout_noise if self._spec else None
        if noise is not None and noise.total:  # a banner: harmless, but worth a look
            config["server_stdout_not_json"] = {"lines": noise.total, "first": noise.first}
        if self._died:  # the kept server this episode's replaced, and its last words
            config["kept_server_died"] = self._died
        d: dict[str, Any] = {"backend": "mcp", "config": config, "initial_state": self._initial}
        if conn is not None:
            d["server"] = conn.server
            d["action_space"] = [tool_spec(t).to_dict() for t in conn.tools]
        if conn is not None and self._spec.url:
            d["url"] = self._spec.url
        return d


INTERPRETER_RE = re.compile(r"(python|pypy|node|nodejs|bun|deno|ruby|perl|php|sh|bash|dash)[\d.]*")
"""Programs whose first argument is the server (`{python} server.py`: `server.py`)."""


def server_name(argv: Sequence[str]) -> str | None:
    """The server a command runs, for a message: the script (or `-m module`, `-c`) an
    interpreter is given, else the program. `{python} rawserver.py` was named by the
    interpreter's path, the same for every Python server."""
    if not argv:
        return None
    program, rest = argv[0], list(argv[1:])
    if INTERPRETER_RE.fullmatch(os.path.basename(program)):
        for i, arg in enumerate(rest):
            if arg in ("-m", "-c") and i + 1 < len(rest):
                return f"{os.path.basename(program)} {arg} {rest[i + 1]}"
            if not arg.startswith("-"):
                return arg
    return program


def _state(**parts: Any) -> str | None:
    """The observation's state_json: only the parts that carry something."""
    kept = {k: v for k, v in parts.items() if v}
    return json.dumps(kept, sort_keys=True, default=str) if kept else None


def _not_text(value: Any, where: str) -> str | None:
    """Where a tool call holds a string that is no UTF-8 text (a lone surrogate, from a
    JSON `"\\ud800"`), or None. The SDK's stdio writer dies encoding it and the
    connection closes, which read as the server's crash."""
    for path, text, key in lone_surrogates(value):
        shown = [storable(x) if isinstance(x, str) else str(x) for x in path]
        named = f"{where} {'/'.join(shown)}" if shown else where
        half = LONE_SURROGATE.search(text).group()
        return f"{'the name of ' if key else ''}{named} is not text (a lone surrogate {half!r})"
    return None


def _closed(exc: BaseException) -> bool:
    """Whether `exc` says the server closed the connection (it exited or crashed)."""
    from mcp.shared.exceptions import MCPError

    return isinstance(exc, MCPError) and is_transport_failure(exc.code, exc.message)


def _reason(exc: BaseException, http: bool = False) -> str:
    """What went wrong, in one phrase; `http`: the server is reached by its URL (a closed
    connection is then no stdout of ours)."""
    if _closed(exc):
        how = "ended its HTTP stream" if http else "closed its stdout"
        return f"the server closed the connection (it exited, crashed or {how})"
    if isinstance(exc, SandboxError):  # ours, saying what broke (a lost session, stdout)
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if invalid := invalid_answer(exc):  # pydantic's own names no field
        return invalid
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
