"""Found (hunt 1206q, each reproduced with the real CLI and tiny real stdio servers):

1. With `keep_server: true`, a server that died right after answering an episode's last
   call failed the next episode at its first call (`SandboxError: tools/call talk: the
   server closed the connection ...`) with no stderr: the reset kept a server it only
   knew to be healthy, not alive, and moved the stderr marks past its last words. The
   reset now sees it gone, says so (a warning, and `kept_server_died` in the record's
   `environment.config`, with its last words) and starts a new one; a kept server's marks
   stay at its last answered call, so one found dead by the next call is quoted.
2. Log notifications were bounded in number, not size: 10 notes of 2 MiB each made a
   20 MB `state_json` under `output_cap: 1024`. Each note's data is cut, all of them
   together too, and the cut flagged (`logs_truncated`; `progress_truncated` likewise).
3. `protocol: auto` with a server that ignores `server/discover` failed its start saying
   it waited for `initialize`, which it never sent, without a word of `protocol: legacy`.
4. Our refusing proxy's random port showed in what a tool prints of its environment
   (server-everything's `get-env`): replays differed in it. It listens at a port of the
   episode folder, so it repeats as the folder's path does.
5. `set_env: {"A=B": x}` passed the job check and failed every attempt, retried, naming no
   variable; a named pipe in `workdir.copy` failed each attempt, retried, with shutil's raw
   list of tuples.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import socket
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from worldtrace.sandboxes import mcp as mcp_module
from worldtrace.sandboxes.base import SandboxConfigError, SandboxError, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas.parsing import ConfigError, parse

from ..conftest import wait_until
from .test_mcp import collect, tool
from .test_mcp_hunt_1206 import call, cli_env, wt  # noqa: F401  (cli_env: the fixture)

RAW = r"""
import json, os, sys, time
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def say(text):
    sys.stderr.write(text + "\n"); sys.stderr.flush()
TOOLS = ["talk", "crash_after", "fade", "pid", "biglog", "bigprogress"]
for line in sys.stdin:
    m = json.loads(line); i = m.get("id"); meth = m.get("method"); p = m.get("params") or {}
    if i is None:
        continue
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": p["protocolVersion"],
              "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}})
    elif meth == "tools/call":
        name, a = p["name"], p.get("arguments") or {}
        def ok(text):
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": text}]}})
        if name == "talk":
            say("stderr says: " + a.get("text", "")); ok("talked")
        elif name == "crash_after":  # answers, says its last words, and dies at once
            ok("bye"); say("dying after answer"); os._exit(4)
        elif name == "fade":  # answers, says its last words, and dies a second later
            ok("fading"); say("going away: fade"); time.sleep(1.0); os._exit(5)
        elif name == "pid":
            ok(str(os.getpid()))
        elif name == "biglog":
            for n in range(a.get("count", 1)):
                data = a.get("data") or str(n) + "x" * a.get("chars", 10)
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "error", "logger": "raw", "data": data}})
            ok("logged")
        elif name == "bigprogress":
            token = (p.get("_meta") or {}).get("progressToken")
            for n in range(a.get("count", 1)):
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": n, "message": "m" * a.get("chars", 10)}})
            ok("progressed")
    else:
        send({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "Method not found"}})
"""

SILENT = r"""
import json, sys
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line); i = m.get("id"); meth = m.get("method"); p = m.get("params") or {}
    sys.stderr.write(f"got {meth}\n"); sys.stderr.flush()
    if i is None:
        continue
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": p.get("protocolVersion"),
              "capabilities": {"tools": {}}, "serverInfo": {"name": "silent", "version": "1"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}})
    elif meth == "tools/call":
        send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "hello"}]}})
    # any other method (server/discover): no answer at all, not even an error
"""


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch) -> Path:
    """A private temp dir: the episode folders of this test alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"worldtrace-mcp-{os.getuid()}"


def script(tmp_path: Path, name: str, text: str) -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    return [sys.executable, str(path)]


def exited(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")


def gone(pid: int, timeout: float = 5.0) -> None:
    """Until process `pid` has exited."""
    wait_until(lambda: exited(pid), timeout, f"process {pid} to exit")


def state(observation) -> dict:
    return json.loads(observation.state_json or "{}")


# -- 1. a kept server that died between episodes ------------------------------------------
def test_a_kept_server_dead_after_the_last_episode_is_replaced_and_its_last_words_said(
    tmp_path, tmpdir_root, caplog
):
    caplog.set_level(logging.WARNING, logger="worldtrace.sandboxes.mcp")
    box = MCPSandbox(
        parse(MCPConfig, {"command": script(tmp_path, "raw.py", RAW), "keep_server": True})
    )
    try:
        box.reset(TaskSpec("first"))
        first = int(call(box, "pid").text)
        assert call(box, "crash_after").text == "bye"
        gone(first)
        box.reset(TaskSpec("second"))  # the dead server is noticed: a new one runs
        assert call(box, "talk", text="b").text == "talked"
        assert int(call(box, "pid").text) != first
        died = box.describe()["config"]["kept_server_died"]
        assert died == (
            "the server closed the connection (it exited, crashed or closed its stdout); "
            "its stderr: dying after answer"
        ), died
        [warned] = [r.getMessage() for r in caplog.records if "keep_server" in r.getMessage()]
        assert warned == (
            f"MCP server {tmp_path / 'raw.py'} (keep_server) died between episodes, after "
            f"the last one's last call: {died}; a new one is started"
        )
        box.reset(TaskSpec("third"))  # alive: kept, and nothing said of a death
        assert "kept_server_died" not in box.describe()["config"]
        assert len(caplog.records) == 1
    finally:
        box.close()


def test_a_job_goes_on_past_a_kept_server_that_died_after_answering(store, tmpdir_root, tmp_path):
    """The hunt's job (`keep_server`, `retries: 0`): its second episode failed."""
    sandbox = {"command": script(tmp_path, "raw.py", RAW), "keep_server": True}
    tasks = [
        {"id": "first", "actions": [tool("talk", text="a"), tool("crash_after")]},
        {"id": "second", "actions": [tool("talk", text="b"), tool("talk", text="c")]},
    ]
    r = collect(store, sandbox, tasks)
    by_task = {t.task.task_id: t for t in r.trajectories}
    assert [by_task[k].outcome.status for k in ("first", "second")] == ["success", "success"]
    second = json.loads(by_task["second"].environment.config)
    assert second["kept_server_died"].endswith("its stderr: dying after answer"), second
    assert "kept_server_died" not in json.loads(by_task["first"].environment.config)


def test_a_kept_http_server_we_started_that_exited_is_replaced(tmpdir_root):
    """Over HTTP the process we started for the URL is watched (its exit code said)."""
    config = {
        "command": ["mcp-server-everything", "streamableHttp"],
        "url": "http://127.0.0.1:{port}/mcp",
        "set_env": {"PORT": "{port}"},
        "keep_server": True,
    }
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        box.reset(TaskSpec("first"))
        assert call(box, "echo", message="a").text == "Echo: a"
        first = box._conn.process.pid
        os.killpg(first, signal.SIGKILL)  # it runs in a process group of its own
        gone(first)
        # its exit is reaped on the sandbox's loop: the code the reset reads
        wait_until(lambda: box._conn.process.returncode is not None, 5, "the exit reaped")
        box.reset(TaskSpec("second"))
        assert box.describe()["config"]["kept_server_died"].startswith(
            "the server exited with code -9"
        )
        assert call(box, "echo", message="b").text == "Echo: b"
        assert box._conn.process.pid != first
    finally:
        box.close()


def test_a_kept_server_found_dead_by_the_next_call_is_quoted_from_its_last_call(
    tmp_path, tmpdir_root
):
    """It said its last words before the reset and died after it: the reset moved the
    stderr marks to the log's end, past them, and the failure quoted nothing."""
    box = MCPSandbox(
        parse(MCPConfig, {"command": script(tmp_path, "raw.py", RAW), "keep_server": True})
    )
    try:
        box.reset(TaskSpec("first"))
        pid = int(call(box, "pid").text)
        assert call(box, "fade").text == "fading"
        log = next(tmpdir_root.glob("*/server.log"))
        wait_until(lambda: "going away" in log.read_text(), 5, "its last words")
        box.reset(TaskSpec("second"))  # it still runs: kept
        gone(pid)
        with pytest.raises(SandboxError) as failed:
            call(box, "talk", text="b")
    finally:
        box.close()
    said = str(failed.value)
    assert "the server closed the connection" in said and "going away: fade" in said, said


# -- 2. log and progress notifications are bounded in size --------------------------------
def test_big_log_notifications_are_cut_and_the_cut_flagged(tmp_path, tmpdir_root):
    box = MCPSandbox(
        parse(MCPConfig, {"command": script(tmp_path, "raw.py", RAW), "output_cap": 1024})
    )
    try:
        box.reset(TaskSpec("a"))
        big = call(box, "biglog", count=10, chars=2 << 20)  # the hunt's 10 notes of 2 MiB
        assert big.text == "logged"
        assert len(big.state_json) < 100_000, len(big.state_json)  # it was 20,972,030
        logs = state(big)
        assert logs["logs_truncated"] is True
        assert len(logs["logs"]) == 10 and all(
            n["data"].startswith(str(k)) for k, n in enumerate(logs["logs"])
        )
        assert {len(n["data"]) for n in logs["logs"]} == {2000}
        assert "logs_truncated" not in state(call(box, "talk", text="x"))  # per observation

        total = state(call(box, "biglog", count=60, chars=1990))  # each fits, not all
        assert total["logs_truncated"] is True
        assert sum(len(n["data"]) for n in total["logs"]) == 64 << 10
        assert len(total["logs"]) < 60

        many = state(call(box, "biglog", count=205, chars=1))  # past the count
        assert many["logs_truncated"] is True and len(many["logs"]) == 200

        small = state(call(box, "biglog", count=3, data={"k": [1, 2]}))  # as it was sent
        assert small["logs"][0]["data"] == {"k": [1, 2]} and "logs_truncated" not in small

        shaped = state(call(box, "biglog", count=1, data={"k": "v" * 5000}))  # JSON, cut
        assert shaped["logs"][0]["data"] == ('{"k":"' + "v" * 5000)[:2000]
        assert shaped["logs_truncated"] is True

        progress = state(call(box, "bigprogress", count=3, chars=1 << 20))
        assert progress["progress_truncated"] is True
        assert [len(p["message"]) for p in progress["progress"]] == [2000, 2000, 2000]
    finally:
        box.close()


# -- 3. a server that ignores server/discover ---------------------------------------------
def test_an_unanswered_probe_is_named_and_protocol_legacy_suggested(tmp_path, tmpdir_root):
    silent = script(tmp_path, "silent.py", SILENT)
    box = MCPSandbox(parse(MCPConfig, {"command": silent, "start_timeout": 2}))
    try:
        with pytest.raises(SandboxError) as failed:
            box.reset(TaskSpec("a"))
    finally:
        box.close()
    assert str(failed.value) == (
        "MCP server did not start: no answer in time: waited start_timeout (2 s) for its "
        "answer to server/discover (stdio), the probe of `protocol: auto` for the 2026 "
        "protocol (the SDK waits 10 s for it, then falls back to initialize); a server that "
        "does not answer it (not even with an error) starts with `protocol: legacy`; its "
        "stderr: got server/discover"
    )
    legacy = MCPSandbox(
        parse(MCPConfig, {"command": silent, "start_timeout": 2, "protocol": "legacy"})
    )
    try:
        legacy.reset(TaskSpec("a"))
        assert call(legacy, "hi").text == "hello"
    finally:
        legacy.close()


def test_a_start_the_unanswered_probe_delayed_is_warned_about_once(
    tmp_path, tmpdir_root, caplog, monkeypatch
):
    """Past the SDK's probe wait (10 s; 1 s here) it falls back to initialize: the start
    works, but each one waits that long; the warning says how to skip it."""
    from mcp.client import session

    monkeypatch.setattr(session, "DISCOVER_TIMEOUT_SECONDS", 1.0)
    caplog.set_level(logging.WARNING, logger="worldtrace.sandboxes.mcp")
    silent = script(tmp_path, "silent.py", SILENT)
    box = MCPSandbox(parse(MCPConfig, {"command": silent, "start_timeout": 5}))
    try:
        box.reset(TaskSpec("a"))
        assert call(box, "hi").text == "hello"
        box.reset(TaskSpec("b"))  # a new server, the same wait: said once
    finally:
        box.close()
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith(
        f"MCP server {tmp_path / 'silent.py'} gave no answer to server/discover, the probe "
        "of `protocol: auto`, and started with the initialize handshake after 1."
    ), said
    assert said.endswith(" s: every start waits for it; `protocol: legacy` skips the probe")


# -- 4. the proxy variables a tool prints repeat ------------------------------------------
@pytest.fixture
def egress_base(monkeypatch) -> int:
    """A base with its next ports free now, below the kernel's ephemeral range.

    Tests run side by side: 20000 may be another's, and a base the kernel handed out
    (CI, 2026-12-06) had its neighbour taken a moment later by some test's connection.
    """
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for base in random.Random().sample(range(10000, low - 8), 200):
        if all(_free(base + i) for i in range(4)):
            break
    else:
        pytest.fail(f"no four free ports in a row below {low}")
    monkeypatch.setattr(mcp_module, "EGRESS_PORT_BASE", base, raising=False)
    return base


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def get_env() -> str:
    box = MCPSandbox(parse(MCPConfig, {"command": ["mcp-server-everything", "stdio"]}))
    try:
        box.reset(TaskSpec("a"))
        return call(box, "get-env").text
    finally:
        box.close()


def test_what_get_env_prints_repeats_across_sandboxes(tmpdir_root, egress_base):
    """A replay in a fresh sandbox printed another proxy port than its recording."""
    first, second = get_env(), get_env()
    assert first == second
    env = json.loads(first)
    assert env["HTTP_PROXY"] == f"http://127.0.0.1:{egress_base}"  # folder 0's port
    assert env["WORLDTRACE_MCP_EPISODE"] == str(tmpdir_root / "0")


def test_sandboxes_at_once_listen_apart_and_a_taken_port_is_passed_by(
    tmp_path, tmpdir_root, egress_base
):
    boxes = [
        MCPSandbox(parse(MCPConfig, {"command": script(tmp_path, "raw.py", RAW)})) for _ in range(3)
    ]
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", egress_base + 2))  # a service holds folder 2's port
        taken.listen()
        for box in boxes:
            box.reset(TaskSpec("a"))
        ports = [int(box._env["HTTP_PROXY"].rsplit(":", 1)[1]) for box in boxes]
        assert ports[:2] == [egress_base, egress_base + 1]
        assert ports[2] not in (egress_base, egress_base + 1, egress_base + 2)
        with socket.create_connection(("127.0.0.1", ports[2])) as c:  # it refuses, as ever
            c.sendall(b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
            assert c.recv(100).startswith(b"HTTP/1.1 403")
    finally:
        taken.close()
        for box in boxes:
            box.close()


# -- 5. a job's mistakes said once, at the right time -------------------------------------
def test_a_set_env_name_that_is_no_variable_is_refused_with_the_job(tmp_path, cli_env):  # noqa: F811
    with pytest.raises(ConfigError, match=r"set_env: not an environment variable name: 'A=B'"):
        parse(MCPConfig, {"command": ["x"], "set_env": {"A=B": "x", "OK": "y"}})
    # a name a shell would not take, which a process environment holds, still passes
    assert parse(MCPConfig, {"command": ["x"], "set_env": {"a.b": "1"}}).set_env == {"a.b": "1"}
    job = textwrap.dedent("""\
        name: setenv
        sandbox:
          kind: mcp
          command: [x]
          set_env: {"A=B": x}
        tasks:
          - id: a
            actions: [{tool: x, arguments: {}}, {tool: x, arguments: {}}]
        """)
    (tmp_path / "job.yaml").write_text(job)
    r = wt(cli_env, tmp_path, "--store", "S", "--create", "collect", "job.yaml")
    assert r.returncode != 0
    assert "job.yaml:5: sandbox.set_env: not an environment variable name: 'A=B'" in r.stderr, (
        r.stderr
    )


def test_a_named_pipe_in_the_copied_folder_fails_once_naming_it(store, tmpdir_root, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    os.mkfifo(src / "pipe")
    sandbox = {"command": script(tmp_path, "raw.py", RAW), "workdir": {"copy": str(src)}}
    r = collect(store, sandbox, [{"id": "a", "actions": [tool("talk"), tool("talk")]}], retries=2)
    [t] = r.trajectories  # one attempt: no retry removes the pipe
    assert t.outcome.error == (
        f"SandboxConfigError: workdir.copy: cannot copy {src / 'pipe'}: it is a named pipe "
        "(a FIFO), which a copy cannot hold; every attempt would fail alike: not retried"
    )


def test_a_copy_the_host_fails_is_retried(tmp_path, tmpdir_root, monkeypatch):
    """A full disk is the host's: the attempt is retried (SandboxError, not its Config)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")

    def full(src_file, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mcp_module.shutil, "copy2", full)
    box = MCPSandbox(parse(MCPConfig, {"command": ["x"], "workdir": {"copy": str(src)}}))
    try:
        with pytest.raises(SandboxError) as failed:
            box.reset(TaskSpec("a"))
    finally:
        with contextlib.suppress(Exception):
            box.close()
    assert not isinstance(failed.value, SandboxConfigError)
    assert str(failed.value) == (
        f"workdir.copy: cannot copy {src / 'a.txt'}: No space left on device (the host's: "
        "the attempt is retried)"
    )
