"""Found (hunt 12-06, each reproduced with the real CLI and real servers):

- An MCP episode's background processes outlived it and the collector: a setup command's
  `setsid ... &` loop wrote into the next episode's fresh `{workdir}` (episode b listed
  `leak.txt` and read `from-episode-a`), and went on after `collect` exited, at
  `/tmp/worldtrace-mcp-UID/0/work`, a path the next MCP job reuses. The setup's session
  was killed past its timeout only, stopping the server killed its process group only,
  `setpriv --pdeathsig` covers the direct child only and `sweep_workdirs` removed
  folders, not processes. Now every process the episode started carries its episode
  folder in `WORLDTRACE_MCP_EPISODE` and is killed when the episode ends, with what it
  started (setsid, double fork, nohup, a cleared environment under a tagged parent); a
  collector killed with SIGKILL leaves them to the next sandbox's (or `gc`'s) sweep.
- A refused `url:` was reported at `job.yaml:2: sandbox:` (the `sandbox` line): now at
  the url's line, as `sandbox.url`.
- With `loopback_only`, a server's fetch of `http://example.com/` answered
  `ConnectError('All connection attempts failed')`, our closed proxy port's doing, and
  `process` kept it in the loss (category expansion). Our proxy port now listens, refuses
  with a 403 that names the sandbox, and flags the observation `refused` (the web
  kind's flag), so the mask keeps it out of the loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox, sweep_workdirs
from worldtrace.schemas import Action
from worldtrace.schemas.parsing import parse

from ..conftest import VENV_BIN
from .test_mcp import NOTES, site  # noqa: F401  (the fixture)

PROJECT = Path(__file__).resolve().parents[2]
FETCH = ["mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"]
"""--allow-private-ips: it resolves no name itself (its check of public addresses asks
the host's resolver, beyond loopback): the names reach our proxy only."""
LOOP = "while :; do sleep 1; done"
"""A process that runs until it is killed (its `$0`, the token, names it in /proc)."""
SPAWNER = """
import os, subprocess
from mcp.server.mcpserver import MCPServer

app = MCPServer("spawner")


@app.tool()
def spawn(token: str) -> str:
    "Start a loop in a session of its own (a daemon), named by the token."
    subprocess.Popen(["sh", "-c", "while :; do sleep 1; done", token], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return "started"


@app.tool()
def pid() -> str:
    return str(os.getpid())


app.run("stdio")
"""


def alive(token: str) -> list[int]:
    """Pids of live processes (not zombies) whose command line holds `token`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and stat.rsplit(b")", 1)[1].split()[0] != b"Z":
            found.append(int(name))
    return found


@pytest.fixture
def tokens():
    """A fresh token maker; whatever still runs with one of them at the end is killed (by
    pid: the processes this test started), so a failing run leaves nothing behind."""
    made: list[str] = []

    def make(label: str) -> str:
        made.append(f"wt-hunt-{label}-{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    for token in made:
        for pid in alive(token):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch) -> Path:
    """A private temp dir: the episode folders (and their tags) of this test alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"worldtrace-mcp-{os.getuid()}"


def wt(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """The installed `worldtrace` with a private temp dir (its own episode folders)."""
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path / "tmp")
    env.pop("WORLDTRACE_STORE", None)
    return env


def spawner(tmp_path: Path) -> list[str]:
    path = tmp_path / "spawner.py"
    path.write_text(SPAWNER)
    return [sys.executable, str(path)]


def call(box: MCPSandbox, tool: str, **arguments):
    return box.step(Action(kind="tool_call", name=tool, arguments_json=json.dumps(arguments)))


# -- 1. processes of an episode end with it ----------------------------------------------
def test_a_setup_loop_never_reaches_the_next_episode_nor_outlives_collect(
    tmp_path, cli_env, tokens
):
    """The hunt's reproduction, through the CLI a user runs."""
    token = tokens("cli")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("todo\n")
    loop = f'while :; do echo {token} >> "$0/leak.txt"; sleep 0.3; done'
    job = {
        "name": "mcpleak",
        "sandbox": {"kind": "mcp", "command": ["mcp-server-filesystem", "{workdir}"],
                    "workdir": {"copy": "notes"}},
        "retries": 0,
        "tasks": [
            {"id": "a", "setup": [f"setsid sh -c '{loop}' \"$PWD\" >/dev/null 2>&1 &"],
             "actions": [{"tool": "list_directory", "arguments": {"path": "."}},
                         {"tool": "list_directory", "arguments": {"path": "."}}]},
            {"id": "b",
             "actions": [{"tool": "list_directory", "arguments": {"path": "."}},
                         {"tool": "read_text_file", "arguments": {"path": "leak.txt", "head": 2}}]},
        ],
    }  # fmt: skip
    (tmp_path / "m.yaml").write_text(json.dumps(job))
    r = wt(cli_env, tmp_path, "--store", "S", "--create", "collect", "m.yaml")
    assert r.returncode == 0, r.stderr
    assert alive(token) == []  # nothing of episode a runs once collect is done
    sql = (
        "select t.task_id, r.turn_index, r.observation_text, r.is_error from raw_turns r "
        "join raw_trajectories t using (trajectory_id) order by t.task_id, r.turn_index"
    )
    q = wt(cli_env, tmp_path, "--store", "S", "query", "--format", "json", sql)
    assert q.returncode == 0, q.stderr
    b = [row for row in json.loads(q.stdout) if row["task_id"] == "b"]
    assert b[0]["observation_text"] == "[FILE] todo.txt"  # the copy, and only it
    assert b[1]["is_error"] and token not in b[1]["observation_text"]


ESCAPES = {
    "setsid": "setsid sh -c '{loop}' {token} >/dev/null 2>&1 &",
    "nohup": "nohup sh -c '{loop}' {token} >/dev/null 2>&1 &",
    "double-fork": "(sh -c '{loop}' {token} >/dev/null 2>&1 &) &",
    # a cleared environment carries no tag: found as the child of a tagged process
    "env-i": "setsid sh -c 'env -i sh -c \"{loop}\" {token}; :' >/dev/null 2>&1 &",
}


def test_every_process_an_episode_started_is_gone_when_it_ends(tmp_path, tmpdir_root, tokens):
    marks = {kind: tokens(kind) for kind in ESCAPES}
    setup = tuple(ESCAPES[k].format(loop=LOOP, token=marks[k]) for k in ESCAPES)
    box = MCPSandbox(parse(MCPConfig, {"command": spawner(tmp_path)}))
    try:
        box.reset(TaskSpec("a", setup=setup))
        by_server = tokens("server")
        assert call(box, "spawn", token=by_server).text == "started"
        marks["server"] = by_server
        assert all(alive(t) for t in marks.values())  # each one runs during the episode
        box.reset(TaskSpec("b"))  # the end of episode a
        assert {k: alive(t) for k, t in marks.items()} == {k: [] for k in marks}
        box.reset(
            TaskSpec("c", setup=(ESCAPES["setsid"].format(loop=LOOP, token=marks["setsid"]),))
        )
        assert alive(marks["setsid"])
    finally:
        box.close()  # the end of the last one
    assert alive(marks["setsid"]) == []


def test_only_the_ending_episodes_processes_are_killed(tmp_path, tmpdir_root, tokens):
    """Another sandbox's episode, and a process of ours that carries another episode's tag
    (a sandbox of another temp dir), live on."""
    one, two, bystander = tokens("one"), tokens("two"), tokens("bystander")
    other = {**os.environ, "WORLDTRACE_MCP_EPISODE": str(tmp_path / "elsewhere" / "0")}
    outside = subprocess.Popen(["sh", "-c", LOOP, bystander], env=other, start_new_session=True)
    a = MCPSandbox(parse(MCPConfig, {"command": spawner(tmp_path)}))
    b = MCPSandbox(parse(MCPConfig, {"command": spawner(tmp_path)}))
    try:
        a.reset(TaskSpec("a", setup=(ESCAPES["setsid"].format(loop=LOOP, token=one),)))
        b.reset(TaskSpec("b", setup=(ESCAPES["setsid"].format(loop=LOOP, token=two),)))
        a.close()
        assert alive(one) == [] and alive(two) and alive(bystander)
    finally:
        a.close()
        b.close()
    assert alive(two) == [] and alive(bystander) == [outside.pid]
    outside.kill()
    outside.wait()


def test_a_kept_server_lives_on_and_the_setup_it_did_not_start_ends(tmp_path, tmpdir_root, tokens):
    setup, served = tokens("setup"), tokens("served")
    box = MCPSandbox(parse(MCPConfig, {"command": spawner(tmp_path), "keep_server": True}))
    try:
        box.reset(TaskSpec("a", setup=(ESCAPES["setsid"].format(loop=LOOP, token=setup),)))
        pid = call(box, "pid").text
        call(box, "spawn", token=served)
        box.reset(TaskSpec("b"))
        assert call(box, "pid").text == pid  # the same server process
        assert alive(setup) == [] and alive(served)  # the server's own: its state, kept
    finally:
        box.close()
    assert alive(served) == []


KILLED_COLLECTOR = """
import sys
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas.parsing import parse

box = MCPSandbox(parse(MCPConfig, {"command": sys.argv[1:]}))
box.reset(TaskSpec("a", setup=(sys.stdin.readline(),)))
print("ready", flush=True)
sys.stdin.read()  # until it is killed
"""


def test_what_a_collector_killed_with_sigkill_left_is_swept(tmp_path, tmpdir_root, tokens):
    """Its exit hooks never run and pdeathsig reaches its children only: a setsid loop
    lives on, until the next sandbox (or `gc`) sweeps the episode folders nobody holds."""
    token = tokens("orphan")
    script = tmp_path / "collector.py"
    script.write_text(KILLED_COLLECTOR)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, str(script), *spawner(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=PROJECT,
    )  # fmt: skip
    proc.stdin.write(ESCAPES["setsid"].format(loop=LOOP, token=token) + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    proc.wait()
    assert alive(token)  # the collector's exit ran nothing
    found = sweep_workdirs(tmpdir_root)
    assert alive(token) == []
    assert [f["path"] for f in found] == [str(tmpdir_root / "0")]
    assert "process(es) of its episode still ran" in found[0]["reason"]


# -- 2. a refused url names its key and line ---------------------------------------------
@pytest.mark.parametrize(
    "sandbox,said",
    [
        ("  url: http://192.0.2.2:8123/mcp\n",
         "job.yaml:4: sandbox.url: must be http(s) on loopback (127.0.0.1), got "
         "'http://192.0.2.2:8123/mcp'"),
        ("  url: http://127.0.0.1:{port}/mcp\n",
         "job.yaml:4: sandbox.url: {port} in the url needs a command that starts the server"),
        ("  command: [x]\n  workdir: {copy: /tmp}\n  keep_server: true\n",
         "job.yaml:6: sandbox.keep_server: keeps one workdir"),
    ],
)  # fmt: skip
def test_a_refused_url_names_its_key_and_line(tmp_path, cli_env, sandbox, said):
    job = "name: mcpurl\nsandbox:\n  kind: mcp\n" + sandbox + textwrap.dedent("""\
        tasks:
          - id: a
            actions: [{tool: x, arguments: {}}, {tool: x, arguments: {}}]
        """)  # fmt: skip
    (tmp_path / "job.yaml").write_text(job)
    r = wt(cli_env, tmp_path, "--store", "S", "--create", "collect", "job.yaml")
    assert r.returncode != 0 and said in r.stderr, r.stderr


# -- 3. our refusal of a connection is flagged and kept out of the loss ------------------
def test_a_connection_the_sandbox_refused_flags_the_observation(tmpdir_root, site):  # noqa: F811
    box = MCPSandbox(parse(MCPConfig, {"command": FETCH}))
    try:
        box.reset(TaskSpec("a"))
        out = call(box, "fetch", url="http://worldtrace-hunt.invalid/page")
        state = json.loads(out.state_json or "{}")
        assert state.get("refused") is True, out
        assert state["egress_refused"] == ["http://worldtrace-hunt.invalid/page"]
        assert out.is_error and "403" in out.text  # the proxy's answer, as fetch words it
        https = call(box, "fetch", url="https://worldtrace-hunt.invalid/x")
        assert json.loads(https.state_json)["egress_refused"] == [
            "https://worldtrace-hunt.invalid:443"
        ]
        assert "loopback_only" in https.text  # a client that shows the reason: whose it was
        near = call(box, "fetch", url=f"{site}/page.html")  # loopback: exempt, the site's answer
        assert "heron" in near.text and "refused" not in (near.state_json or "")
    finally:
        box.close()


def test_process_keeps_the_refused_fetch_out_of_the_loss(tmp_path, cli_env):
    job = {
        "name": "mcpfetch",
        "sandbox": {"kind": "mcp", "command": FETCH},
        "retries": 0,
        "tasks": [{"id": "a", "actions": [
            {"tool": "fetch", "arguments": {"url": "http://worldtrace-hunt.invalid/"}},
            {"tool": "fetch", "arguments": {"url": "https://worldtrace-hunt.invalid/x", "max_length": 100}},
        ]}],
    }  # fmt: skip
    (tmp_path / "f.yaml").write_text(json.dumps(job))
    r = wt(cli_env, tmp_path, "--store", "S", "--create", "collect", "f.yaml")
    assert r.returncode == 0, r.stderr
    p = wt(cli_env, tmp_path, "--store", "S", "process")
    assert p.returncode == 0, p.stderr
    sql = "select turn_index, category, rule, in_loss from turns order by turn_index"
    q = wt(cli_env, tmp_path, "--store", "S", "query", "--format", "json", sql)
    rows = json.loads(q.stdout)
    assert len(rows) == 2 and not any(row["in_loss"] for row in rows), rows
    assert all("refused" in row["rule"] for row in rows), rows
