"""MCP defects a user hits: a huge one-line answer read in quadratic time, injected
latency counted against `call_timeout`, a server command that is not installed retried
on every attempt, a slow start or hang that does not say which timeout or what the server
wrote, and an explorer stopped by a schema pattern Python's `re` cannot read."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.sandboxes.mcp_proxy import FaultConfig, FaultPlan
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import parse

from ..conftest import VENV_BIN, wait_until
from .test_mcp import collect, tool

SERVER = """
import os, sys, time
from typing import Annotated
from pydantic import Field
from mcp.server.mcpserver import MCPServer

time.sleep(float(os.environ.get("SLOW_START", "0")))  # a server slow to come up
app = MCPServer("hunt")


@app.tool(annotations={"readOnlyHint": True})
def echo(message: str) -> str:
    return message


@app.tool(annotations={"readOnlyHint": True})
def huge(n: int) -> str:
    return "x" * n


@app.tool(annotations={"readOnlyHint": True})
def stuck() -> str:
    print("stuck: waiting for the lock on db.sqlite", file=sys.stderr, flush=True)
    time.sleep(600)
    return "never"


@app.tool(annotations={"readOnlyHint": True})
def greet(name: Annotated[str, Field(pattern=r"^\\p{L}+$")]) -> str:
    return f"hello {name}"


app.run("stdio")
"""


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch) -> Path:
    """A private temp dir, so episode folders of other tests and sessions stay apart."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"worldtrace-mcp-{os.getuid()}"


@pytest.fixture
def server(tmp_path) -> list[str]:
    path = tmp_path / "hunt.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


def test_a_huge_one_line_answer_is_read_in_linear_time(server, tmpdir_root):
    """Found: a 30 MB answer took 26 s (10 MB 2.9 s, 20 MB 12 s): the SDK's stdout reader
    joins and splits its whole pending line at every 64 KiB chunk, so a 40 MB answer ran
    past the default call_timeout and failed as `the server hangs`."""
    n = 40_000_000
    config = {"command": server, "call_timeout": 20, "output_cap": 1 << 20}
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        box.reset(TaskSpec("big"))
        obs = box.step(tool_call("huge", {"n": n}))
        after = box.step(tool_call("echo", {"message": "next"}))
    finally:
        box.close()
    assert obs.truncated and obs.text == "x" * (1 << 20)
    assert after.text == "next"  # the stream is in step: the next answer is its own


def test_injected_latency_is_not_counted_against_call_timeout(server, tmpdir_root):
    """Found: `faults: {latency_ms: 6000}` with `call_timeout: 2` failed every attempt
    alike (the draw is seeded) as `no answer within 2 s (the server hangs ...)`: our own
    delay blamed on the server, and the episode never collected."""
    faults = {"seed": 3, "latency_ms": 2500}
    plan = FaultPlan(parse(FaultConfig, faults))
    message = next(
        m for m in (f"m{i}" for i in range(100))
        if plan.decide("slow", 0, "echo", {"message": m}).latency_ms > 1500
    )  # fmt: skip
    config = {"command": server, "call_timeout": 1, "faults": faults}
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        box.reset(TaskSpec("slow"))
        obs = box.step(tool_call("echo", {"message": message}))
    finally:
        box.close()
    assert obs.text == message and not obs.is_error
    assert '"kind": "latency"' in (obs.state_json or "")


def test_a_call_past_call_timeout_still_fails_with_injected_latency(server, tmpdir_root):
    """The latency is added to the wait, not the wait dropped: a hung server still fails."""
    config = {"command": server, "call_timeout": 1, "faults": {"seed": 1, "latency_ms": 200}}
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        box.reset(TaskSpec("hang"))
        with pytest.raises(SandboxError, match="no answer within 1 s"):
            box.step(tool_call("stuck", {}))
    finally:
        box.close()


def test_a_server_command_not_installed_is_not_retried(store, tmpdir_root):
    """Found: `command: [mcp-server-nonexistent]` with `retries: 2` ran three attempts,
    each failing alike (`... not found on PATH ...`); a worker would queue it again."""
    missing = {"command": ["mcp-server-that-is-not-installed", "--flag"]}
    r = collect(store, missing, [{"id": "m", "actions": [tool("x")]}], retries=2)
    [t] = r.trajectories  # one attempt: no retry can install the server
    assert t.outcome.status == "error"
    assert t.outcome.error.startswith("SandboxConfigError: "), t.outcome.error
    assert "'mcp-server-that-is-not-installed' not found" in t.outcome.error
    absent = {"command": ["/nonexistent/bin/server"]}
    [t] = collect(store, absent, [{"id": "a", "actions": [tool("x")]}], retries=2).trajectories
    assert t.outcome.error.startswith("SandboxConfigError: "), t.outcome.error


def test_a_slow_start_names_start_timeout_and_what_it_waited_for(server, tmpdir_root):
    """Found: a server slower than start_timeout failed with `MCP server did not start:
    no answer in time`: neither the setting to raise nor what it was waiting for."""
    config = {"command": server, "set_env": {"SLOW_START": "30"}, "start_timeout": 1}
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        with pytest.raises(SandboxError) as failed:
            box.reset(TaskSpec("slow"))
    finally:
        box.close()
    reason = str(failed.value)
    # under `protocol: auto` the first request is the 2026 probe (it said `initialize`,
    # a request the server never got, until 12-06)
    assert "waited start_timeout (1 s) for its answer to server/discover" in reason, reason


def test_a_started_http_server_on_another_port_names_the_port(tmpdir_root):
    """The command runs but serves another port than the URL's: the reason says which
    port was waited for, not `no answer in time`."""
    config = {
        "command": ["mcp-server-everything", "streamableHttp"],  # no PORT: it takes 3001
        "url": "http://127.0.0.1:{port}/mcp",
        "start_timeout": 2,
    }
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        with pytest.raises(SandboxError) as failed:
            box.reset(TaskSpec("port"))
    finally:
        box.close()
    reason = str(failed.value)
    assert "waited start_timeout (2 s) for 127.0.0.1:" in reason, reason
    assert "accept connections" in reason, reason


def test_a_hung_call_says_what_the_server_wrote_to_stderr(server, tmpdir_root):
    """Found: a tool stuck on a lock failed with `no answer within N s` alone, while the
    server's stderr said why; a start failure and a crash already carried that tail."""
    box = MCPSandbox(parse(MCPConfig, {"command": server, "call_timeout": 1}))
    try:
        box.reset(TaskSpec("stuck"))
        with pytest.raises(SandboxError) as failed:
            box.step(tool_call("stuck", {}))
    finally:
        box.close()
    reason = str(failed.value)
    assert "no answer within 1 s" in reason
    assert "waiting for the lock on db.sqlite" in reason, reason


def test_explorer_sets_aside_a_tool_whose_pattern_python_cannot_read(
    store, server, tmpdir_root, caplog
):
    """Found: a tool whose input schema has an ECMA-262 pattern (`^\\p{L}+$`, as zod and
    pydantic write them) failed every attempt with `error: bad escape \\p at position 1`,
    naming neither tool nor field, and no other tool of the server was ever called."""
    caplog.set_level(logging.WARNING)
    r = collect(
        store,
        {"command": server},
        [{"id": "explore", "instruction": "Greet someone."}],
        policy={"kind": "explorer", "steps": 3, "exclude": ["stuck", "huge"]},
        retries=0,
    )
    [t] = r.trajectories
    assert t.outcome.status == "success", t.outcome.error
    assert [x.action.name for x in t.turns] == ["echo"] * 3
    warned = [x.getMessage() for x in caplog.records if "greet" in x.getMessage()]
    assert warned and "pattern" in warned[0], warned


def test_a_named_env_variable_this_host_lacks_fails_without_retries(
    store, server, tmpdir_root, monkeypatch
):
    """Found: `env: [HUNT_TOKEN]` with HUNT_TOKEN unset started the server without it, so
    its answers (`bad token`, `401`) were recorded as the environment's; the docker kind
    refuses such a job."""
    monkeypatch.delenv("WT_HUNT_1204D_UNSET", raising=False)
    sandbox = {"command": server, "env": ["WT_HUNT_1204D_UNSET"]}
    r = collect(store, sandbox, [{"id": "e", "actions": [tool("echo", message="hi")]}], retries=2)
    [t] = r.trajectories  # one attempt: no retry sets the variable
    assert t.outcome.status == "error" and not t.turns
    assert t.outcome.error.startswith("SandboxConfigError: "), t.outcome.error
    assert "WT_HUNT_1204D_UNSET" in t.outcome.error and "not set on this host" in t.outcome.error


def test_arguments_that_are_not_text_fail_the_call_naming_them(server, tmpdir_root):
    """Found: an argument holding a lone surrogate (a model's JSON `"\\ud800"`) broke our
    client's stdin writer, and the attempt failed as `the server closed the connection (it
    exited, crashed ...)`: the server was blamed, and it had not even been asked."""
    box = MCPSandbox(parse(MCPConfig, {"command": server}))
    try:
        box.reset(TaskSpec("surrogate"))
        with pytest.raises(SandboxError) as failed:
            box.step(tool_call("echo", {"message": "a\ud800b"}))
        after = box.step(tool_call("echo", {"message": "still here"}))
    finally:
        box.close()
    reason = str(failed.value)
    assert "server closed" not in reason, reason
    assert "argument message" in reason and "lone surrogate '\\ud800'" in reason, reason
    assert after.text == "still here"  # nothing was sent: the connection is as it was


def _dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_setup_past_start_timeout_leaves_no_process_behind(server, tmp_path, tmpdir_root):
    """Found: a task setup that ran past start_timeout failed the attempt, but only its
    `sh` was killed: what it started (`sleep 20; true` forks its sleep) ran on."""
    pid_file = tmp_path / "child.pid"
    setup = f"sleep 60 & echo $! > {pid_file}; wait"
    box = MCPSandbox(parse(MCPConfig, {"command": server, "start_timeout": 1}))
    try:
        with pytest.raises(SandboxError, match="ran past start_timeout"):
            box.reset(TaskSpec("setup", setup=(setup,)))
    finally:
        box.close()
    child = int(pid_file.read_text())
    alive = not _dead(child)
    if alive:
        os.kill(child, 9)  # ours: a leftover of this test
    assert not alive, f"the setup's child {child} still runs"


def test_ctrl_c_at_a_terminal_during_setup_is_a_stop_not_a_failed_setup(server, tmp_path):
    """Found: Ctrl-C at a terminal (SIGINT to the foreground process group) killed the
    task's setup command with the collector's group, and the attempt was recorded as
    failed with `task setup 'sleep 8' exited -2`: our stop blamed on the task."""
    ready, store = tmp_path / "ready", tmp_path / "store"
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: ctrl-c\n"
        f"sandbox: {{kind: mcp, command: [{server[0]}, {server[1]}]}}\n"
        "policy: scripted\n"
        "tasks:\n"
        f"  - id: t\n    setup: ['touch {ready}; sleep 2; true']\n"
        "    actions: [{tool: echo, arguments: {message: hi}}]\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    cmd = [str(VENV_BIN / "worldtrace"), "--store", str(store), "--create", "collect", str(job)]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # a terminal's foreground group, as Ctrl-C reaches it
    )  # fmt: skip
    try:
        wait_until(ready.exists, 60, "the task's setup to start")
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "exited -2" not in out and "failed attempts" not in out.replace("0 failed", ""), out


def test_an_explorer_that_may_call_no_tool_says_why(store, tmp_path, tmpdir_root):
    """Found: the explorer on a server whose tools carry no annotations (destructive, per
    the MCP spec) recorded `success (0 turns)`, which `process` then filters, and nowhere
    said that every tool was skipped as destructive, or how to allow them."""
    path = tmp_path / "plain.py"
    path.write_text(SERVER.replace('annotations={"readOnlyHint": True}', ""))
    r = collect(
        store,
        {"command": [sys.executable, str(path)]},
        [{"id": "explore", "instruction": "Explore."}],
        policy={"kind": "explorer", "exclude": ["stuck"]},
        retries=2,
    )
    [t] = r.trajectories  # one attempt: every attempt would skip the same tools
    assert t.outcome.status == "error", (t.outcome.status, len(t.turns))
    assert t.outcome.error.startswith("SandboxConfigError: explorer"), t.outcome.error
    assert "destructive" in t.outcome.error and "allow_destructive" in t.outcome.error
    assert "excluded: stuck" in t.outcome.error, t.outcome.error


def test_an_image_mirrored_in_structured_content_stays_a_placeholder(tmp_path, tmpdir_root):
    """Found: server-filesystem's `read_media_file` sends the image as a content part and
    again as structured content (`{"content": [{"type": "image", "data": ...}]}`); the
    observation read `[image: image/png, 2568 bytes]` and then the image's base64, so a
    photo filled the observation to output_cap with base64 instead of one bracketed line."""
    data = tmp_path / "data"
    data.mkdir()
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
    (data / "pic.png").write_bytes(png)
    config = {"command": ["mcp-server-filesystem", "{workdir}"], "workdir": {"copy": str(data)}}
    box = MCPSandbox(parse(MCPConfig, config))
    try:
        box.reset(TaskSpec("media"))
        obs = box.step(tool_call("read_media_file", {"path": "pic.png"}))
    finally:
        box.close()
    assert obs.text == f"[image: image/png, {len(png)} bytes]", obs.text[:300]
