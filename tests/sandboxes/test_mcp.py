"""The mcp kind against the real servers set-up installs: PyPI (git, time, fetch, sqlite),
npm (filesystem, memory, everything) and our search server; stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import TaskSpec, ToolSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas import validate_dict
from worldtrace.schemas.parsing import ConfigError, parse

from ..conftest import serving

PROJECT = Path(__file__).resolve().parents[2]
NOTES = str(PROJECT / "examples" / "data" / "notes")
GIT_DOC = "/usr/share/doc/git-doc"
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    **{f"GIT_{who}_{what}": v for who in ("AUTHOR", "COMMITTER") for what, v in (("NAME", "wt"), ("EMAIL", "wt@example.com"))},
}  # fmt: skip
GIT_SETUP = ["git init -q -b main", "git add -A", "git commit -qm 'Initial notes'"]
FS = {"command": ["mcp-server-filesystem", "{workdir}"], "workdir": {"copy": NOTES}}
EVERYTHING = {
    "command": ["mcp-server-everything", "stdio"],
    "set_env": {"GZIP_ALLOWED_DOMAINS": "127.0.0.1"},  # its gzip tool stays on loopback
}


def tool(name: str, **arguments) -> dict:
    return {"tool": name, "arguments": arguments}


def collect(store, sandbox: dict, tasks: list[dict], policy="scripted", job_id=None, **opts):
    job = {"name": "mcp", "sandbox": {"kind": "mcp", **sandbox}, "policy": policy, "tasks": tasks}
    return run_job(JobSpec.from_dict({"retries": 0, **job, **opts}), store.raw, job_id)


def state(observation) -> dict:
    return json.loads(observation.state_json or "{}")


def texts(t) -> list[str]:
    return [x.observation.text for x in t.turns]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A small static site on loopback (for the fetch server)."""
    root = tmp_path_factory.mktemp("site")
    (root / "page.html").write_text(
        "<html><head><title>Loopback page</title></head><body><h1>Field notes</h1>"
        "<p>The heron waits in the shallows.</p><a href='/other.html'>other</a></body></html>"
    )
    handler = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
    with serving(server) as url:
        yield url


# -- stdio servers: the tool list is the action space; state; errors ------------------
def test_filesystem_write_read_back_in_a_fresh_workdir(store):
    actions = [
        tool("list_directory", path="."),
        tool("write_file", path="done.txt", content="- install the servers\n"),
        tool("read_text_file", path="done.txt"),
        tool("read_text_file", path="/etc/hostname"),
        tool("no_such_tool", path="."),
    ]
    r = collect(
        store, FS, [{"id": "fs", "instruction": "Write, read.", "actions": actions}], episodes=2
    )
    first, second = r.trajectories
    for t in (first, second):
        assert validate_dict(t.to_dict()) == [] and t.outcome.status == "success"
        # a fresh copy per episode: the first episode's file is not there in the second
        assert texts(t)[0] == "[FILE] README.md\n[FILE] todo.txt"
        assert texts(t)[2] == "- install the servers\n"
        assert [x.observation.is_error for x in t.turns] == [False, False, False, True, True]
    assert "Access denied" in texts(first)[3]
    assert texts(first)[4] == "MCP error -32602: Tool no_such_tool not found"  # the server's words
    space = {s["name"]: s for s in json.loads(first.system.action_space)}
    assert {"read_text_file", "write_file", "list_directory", "directory_tree"} <= set(space)
    assert space["read_text_file"]["annotations"]["readOnlyHint"] is True
    assert space["write_file"]["input_schema"]["required"] == ["path", "content"]
    assert first.environment.backend == "mcp" and "filesystem" in first.environment.server
    assert first.system.initial_state.startswith("MCP server: secure-filesystem-server")
    assert not (Path(NOTES) / "done.txt").exists()  # the host folder never changes


def test_git_commit_shows_in_the_log(store):
    sandbox = {
        "command": ["mcp-server-git", "--repository", "{workdir}"],
        "workdir": {"copy": NOTES},
        "set_env": GIT_ENV,
    }
    actions = [
        tool("git_status", repo_path="."),
        tool("git_add", repo_path=".", files=["todo.txt"]),
        tool("git_commit", repo_path=".", message="Record the new todo"),
        tool("git_log", repo_path=".", max_count=3),
        tool("git_show", repo_path=".", revision="no-such-ref"),
    ]  # fmt: skip
    setup = [*GIT_SETUP, "echo '- commit through MCP' >> todo.txt"]
    [t] = collect(store, sandbox, [{"id": "git", "setup": setup, "actions": actions}]).trajectories
    assert t.outcome.status == "success" and validate_dict(t.to_dict()) == []
    assert "modified:   todo.txt" in texts(t)[0]
    assert texts(t)[2].startswith("Changes committed successfully with hash")
    log = texts(t)[3]
    assert log.index("Record the new todo") < log.index("Initial notes") and "Author: wt" in log
    assert t.turns[4].observation.is_error and "no-such-ref" in texts(t)[4]
    assert not (Path(NOTES) / ".git").exists()


def test_sqlite_and_time_servers(store):
    db = {"command": ["mcp-server-sqlite", "--db-path", "{workdir}/t.db"], "protocol": "legacy"}
    actions = [
        tool("create_table", query="CREATE TABLE t (id INTEGER, name TEXT)"),
        tool("write_query", query="INSERT INTO t VALUES (1, 'heron')"),
        tool("read_query", query="SELECT name FROM t"),
    ]
    [t] = collect(store, db, [{"id": "db", "actions": actions}]).trajectories
    assert texts(t) == [
        "Table created successfully",
        "[{'affected_rows': 1}]",
        "[{'name': 'heron'}]",
    ]
    clock = {"command": ["mcp-server-time", "--local-timezone", "Etc/UTC"]}
    actions = [
        tool(
            "convert_time",
            source_timezone="Europe/Paris",
            time="09:30",
            target_timezone="Asia/Tokyo",
        ),
        tool("get_current_time", timezone="Mars/Olympus_Mons"),
    ]
    [t] = collect(store, clock, [{"id": "tz", "actions": actions}]).trajectories
    answer = json.loads(texts(t)[0])
    assert (
        answer["target"]["datetime"].endswith("T17:30:00+09:00")
        and not t.turns[0].observation.is_error
    )
    assert t.turns[1].observation.is_error and "Invalid timezone" in texts(t)[1]


def test_memory_file_is_fresh_per_episode(store):
    sandbox = {
        "command": ["mcp-server-memory"],
        "set_env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"},
    }
    ada = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    actions = [
        tool("read_graph"),
        tool("create_entities", entities=[ada]),
        tool("open_nodes", names=["Ada"]),
    ]
    r = collect(store, sandbox, [{"id": "m", "actions": actions}], episodes=2)
    for t in r.trajectories:
        assert json.loads(texts(t)[0]) == {"entities": [], "relations": []}
        assert json.loads(texts(t)[2])["entities"][0]["observations"] == ["wrote the first program"]


def test_fetch_server_reads_a_loopback_site(store, site):
    sandbox = {"command": ["mcp-server-fetch", "--allow-private-ips", "--ignore-robots-txt"]}
    actions = [tool("fetch", url=f"{site}/page.html"), tool("fetch", url=f"{site}/missing.html")]
    [t] = collect(store, sandbox, [{"id": "f", "actions": actions}]).trajectories
    assert "The heron waits in the shallows." in texts(t)[0] and "Field notes" in texts(t)[0]
    assert t.turns[1].observation.is_error and "404" in texts(t)[1]


def test_everything_content_parts_progress_and_errors(store):
    actions = [
        tool("get-structured-content", location="Chicago"),
        tool("get-tiny-image"),
        tool("get-resource-reference", resourceType="Text", resourceId=2),
        tool("trigger-long-running-operation", duration=0.3, steps=3),
        tool("get-sum", a="one", b=2),
    ]
    [t] = collect(store, EVERYTHING, [{"id": "e", "actions": actions}]).trajectories
    structured = texts(t)[0]
    assert json.loads(structured)["humidity"] == 82 and structured.count("humidity") == 1  # once
    assert "[image: image/png," in texts(t)[1]
    assert "[resource: demo://resource/dynamic/text/2]" in texts(t)[2]
    progress = state(t.turns[3].observation)["progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3] and progress[0]["total"] == 3
    assert texts(t)[3] == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
    assert (
        t.turns[4].observation.is_error
        and "MCP error -32602: Input validation error" in texts(t)[4]
    )


def test_streamable_http_server_started_on_loopback(store):
    sandbox = {
        "command": ["mcp-server-everything", "streamableHttp"],
        "set_env": {"PORT": "{port}", "GZIP_ALLOWED_DOMAINS": "127.0.0.1"},
        "url": "http://127.0.0.1:{port}/mcp",
    }
    actions = [
        tool("echo", message="over HTTP"),
        tool("trigger-long-running-operation", duration=0.2, steps=2),
    ]
    [t] = collect(store, sandbox, [{"id": "h", "actions": actions}]).trajectories
    assert texts(t)[0] == "Echo: over HTTP"
    assert len(state(t.turns[1].observation)["progress"]) == 2
    assert t.environment.url.startswith("http://127.0.0.1:") and t.environment.url.endswith("/mcp")
    assert json.loads(t.environment.config)["transport"] == "http"


# -- infrastructure failures: failed attempts with the reason, never a hang -----------
def _children(marker: str) -> list[int]:
    """Our own child processes whose command line holds `marker`."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == os.getpid() and marker in cmd:
                out.append(int(d.name))
    return out


def _signal_after_first_turn(journals: Path, marker: str, sig: int) -> threading.Thread:
    """Signal the server once the episode's journal holds its first turn."""

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            journal = next(journals.glob("*.journal.jsonl"), None) if journals.exists() else None
            if journal and '"kind": "turn"' in journal.read_text():
                for pid in _children(marker):
                    os.kill(pid, sig)
                return
            time.sleep(0.01)  # polling the journal until the deadline

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "sig,reason",
    [(signal.SIGKILL, "closed the connection"), (signal.SIGSTOP, "no answer within 1.5 s")],
    ids=["killed", "hung"],
)
def test_dead_or_hung_server_fails_the_attempt(store, sig, reason):
    actions = [
        tool("echo", message="one"),
        tool("trigger-long-running-operation", duration=20, steps=20),
    ]
    journals = store.raw / "collect" / f"dies-{sig}" / ".journals"
    watcher = _signal_after_first_turn(journals, "mcp-server-everything", sig)
    started = time.monotonic()
    r = collect(
        store,
        {**EVERYTHING, "call_timeout": 1.5},
        [{"id": "d", "actions": actions}],
        job_id=f"dies-{sig}",
    )
    watcher.join()
    [t] = r.trajectories
    assert t.outcome.status == "error" and reason in t.outcome.error
    assert "trigger-long-running-operation" in t.outcome.error
    assert texts(t) == ["Echo: one"]  # the turn before the failure is kept
    assert time.monotonic() - started < 15  # the 20 s tool was not waited for
    assert not _children("mcp-server-everything")  # and the server is gone


DIES_MID_STREAM = """
import asyncio, os, sys
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("dies")


@app.tool()
def echo(message: str) -> str:
    return message


@app.tool()
async def die(ctx: Context) -> str:
    await ctx.info("about to go")  # the answer streams (SSE) from here on
    await asyncio.sleep(0.3)
    os._exit(4)


app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


def test_a_streamable_http_server_dying_mid_stream_fails_the_attempt(store, tmp_path):
    """Found: over streamable HTTP the SDK answers a request whose stream ended with an
    error of its own ("SSE stream ended without a response", -32000), which was recorded
    as the server's answer in a successful attempt. An MCP server made with the SDK."""
    server = tmp_path / "dies.py"
    server.write_text(DIES_MID_STREAM)
    http = {
        "command": [sys.executable, str(server), "{port}"],
        "url": "http://127.0.0.1:{port}/mcp",
        "call_timeout": 15,
    }
    actions = [tool("echo", message="one"), tool("die")]
    [t] = collect(store, http, [{"id": "d", "actions": actions}]).trajectories
    assert t.outcome.status == "error", [x.observation.text for x in t.turns]
    assert "closed the connection" in t.outcome.error and "die" in t.outcome.error
    assert texts(t) == ["one"]


def test_server_that_cannot_start_is_a_failed_attempt_with_its_stderr(store):
    bad = {"command": ["mcp-server-filesystem", "/nonexistent/folder"]}
    r = collect(store, bad, [{"id": "s", "actions": [tool("list_allowed_directories")]}], retries=1)
    assert [t.outcome.status for t in r.trajectories] == [
        "error",
        "error",
    ] and r.failed_attempts == 2
    error = r.trajectories[0].outcome.error
    assert "MCP server did not start" in error and "/nonexistent/folder" in error
    missing = {"command": ["mcp-server-that-is-not-installed"]}
    [t] = collect(store, missing, [{"id": "m", "actions": [tool("x")]}]).trajectories
    assert "'mcp-server-that-is-not-installed' not found" in t.outcome.error


# -- configuration ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "config,message",
    [
        ({}, "needs a command"),
        ({"url": "http://example.com/mcp"}, "on loopback"),
        ({"url": "http://127.0.0.1:{port}/mcp"}, "needs a command"),
        ({"command": ["x"], "keep_server": True, "workdir": {"copy": "/tmp"}}, "keep_server"),
        ({"command": ["x"], "workdir": {"at": "/etc"}}, "cannot be a work directory"),
        ({"command": ["x"], "faults": {"error_rate": 0.6, "truncate_rate": 0.6}}, "add up to 1.2"),
        ({"command": ["x"], "env": ["NOT-A-NAME"]}, "not an environment variable name"),
    ],
)
def test_config_is_checked(config, message):
    with pytest.raises(ConfigError, match=message):
        parse(MCPConfig, config)


def test_fixed_workdir_is_stable_emptied_and_locked(tmp_path):
    at = tmp_path / "work"
    config = parse(MCPConfig, {**FS, "workdir": {"copy": NOTES, "at": str(at)}})
    one = MCPSandbox(config)
    try:
        first = one.reset(TaskSpec("a"))
        assert f"Working directory: {at}" in first.text
        (at / "left-over.txt").write_text("x")
        assert f"Working directory: {at}" in one.reset(TaskSpec("b")).text
        assert sorted(p.name for p in at.iterdir()) == ["README.md", "todo.txt"]  # emptied
        other = MCPSandbox(config)
        with pytest.raises(Exception, match="in use by another sandbox"):
            other.reset(TaskSpec("c"))
        other.close()
    finally:
        one.close()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep")
    owned = MCPSandbox(parse(MCPConfig, {**FS, "workdir": {"at": str(tmp_path / "mine")}}))
    with pytest.raises(Exception, match="refusing to empty it"):
        owned.reset(TaskSpec("d"))
    owned.close()
    assert (tmp_path / "mine" / "precious.txt").read_text() == "keep"


def test_tool_spec_from_a_server_listing():
    import mcp_types as types
    from worldtrace.sandboxes.mcp_client import tool_spec

    t = types.Tool(
        name="get",
        description="d",
        input_schema={"type": "object", "properties": {"k": {"type": "string"}}},
        output_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    spec = tool_spec(t)
    assert spec == ToolSpec("get", "d", t.input_schema, {"type": "object"}, {"readOnlyHint": True})


HOLDING_COLLECTOR = (
    "import json, sys, time\n"
    "from worldtrace.sandboxes.base import TaskSpec\n"
    "from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox\n"
    "from worldtrace.schemas.parsing import parse\n"
    "box = MCPSandbox(parse(MCPConfig, json.loads(sys.argv[1])))\n"
    "box.reset(TaskSpec('k'))\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)
"""A collector process (python -c, the config as JSON in argv[1]) that starts its MCP
sandbox, says `ready` and holds it until it is killed."""


def test_servers_die_with_a_collector_killed_by_sigkill(tmp_path):
    import select
    import subprocess
    import sys

    script = HOLDING_COLLECTOR
    http = {  # a server started for HTTP never sees its stdin close
        "command": ["mcp-server-everything", "streamableHttp"],
        "set_env": {"PORT": "{port}"},
        "url": "http://127.0.0.1:{port}/mcp",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(http)], stdout=subprocess.PIPE
    )
    try:
        assert select.select([proc.stdout], [], [], 60)[0] and proc.stdout.readline() == b"ready\n"
        [server] = [
            int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and _ppid(d) == proc.pid and b"mcp-server-everything" in _cmdline(d)
        ]  # fmt: skip
    finally:
        proc.kill()  # no exit hook runs
        proc.wait()
    deadline = time.monotonic() + 10
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.02)  # polling the orphan until the deadline
    assert not _alive(server)


def _ppid(d: Path) -> int | None:
    try:
        return int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(d: Path) -> bytes:
    try:
        return (d / "cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_replay_of_a_collected_trajectory_is_checked_at_submit_and_repeats(store):
    """A replay job resolves its prefix in the store before it runs: a terminal job
    cannot replay an MCP trajectory, the MCP job can, and again after its first replay
    (which came out identical: one id, two raw records)."""
    echo = [tool("echo", message="replayed")]
    [orig] = collect(
        store, EVERYTHING, [{"id": "e", "instruction": "Echo.", "actions": echo}]
    ).trajectories
    assert orig.outcome.status == "success"
    prefix = orig.trajectory_id[:8]
    terminal = JobSpec.from_dict(
        {"name": "r", "sandbox": "terminal", "policy": "replay",
         "tasks": [{"id": "r", "replay": prefix}]}
    )  # fmt: skip
    with pytest.raises(ConfigError, match=f"tasks\\[0\\].replay: {orig.trajectory_id} was "
                       "recorded in domain mcp; this job \\(sandbox kind terminal\\)"):  # fmt: skip
        terminal.check_store(store.root)
    job = {"name": "r", "sandbox": {"kind": "mcp", **EVERYTHING}, "policy": "replay",
           "tasks": [{"id": "r", "instruction": "Echo.", "replay": prefix}], "retries": 0}  # fmt: skip
    for _ in range(2):
        spec = JobSpec.from_dict(job)
        spec.check_store(store.root)
        [again] = run_job(spec, store.raw).trajectories
        assert again.outcome.status == "success", again.outcome.error
        assert again.trajectory_id == orig.trajectory_id
