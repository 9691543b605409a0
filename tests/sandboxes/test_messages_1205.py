"""Found (hunt 12-05): two failure reasons that sent a user the wrong way.

- A task set-up command (or a condition's) that outlasted the step timeout failed as
  `task setup failed (137): sleep 100`, an exit status that reads as an OOM kill; now it
  says which timeout ended it and its value, as the MCP kind's `ran past start_timeout`.
- An MCP call past `call_timeout` quoted the tail of the server's whole stderr log: a
  traceback an earlier, unrelated call printed was given as the reason the later call
  hung. Now a call's reason quotes only what the server wrote while that call ran.

Real parts: docker sandboxes, an MCP server on the real SDK (MCPServer, 2.x's FastMCP),
the `worldtrace collect` command a user runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

IMAGE = "worldtrace/busybox:latest"


def collect(tmp_path: Path, wt_env: dict, job: dict) -> str:
    """The line of `worldtrace collect` saying how the job's one attempt ended."""
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump({"retries": 0, **job}))
    r = subprocess.run(
        ["worldtrace", "collect", str(f)], capture_output=True, text=True, env=wt_env, timeout=120
    )
    [line] = [ln for ln in r.stdout.splitlines() if " attempt 1: " in ln]
    return line


@pytest.mark.docker
def test_a_task_setup_past_the_step_timeout_says_so(docker_engine, tmp_path, wt_env):
    line = collect(tmp_path, wt_env, {
        "name": "slow-setup",
        "sandbox": {"kind": "terminal", "docker": {"image": IMAGE, "step_timeout": 1}},
        "tasks": [{"id": "s", "setup": ["echo begun; sleep 100"], "actions": ["ls\n"]}],
    })  # fmt: skip
    assert (
        "error (0 turns): SandboxError: task setup ran past step_timeout (1s) and was "
        "killed: echo begun; sleep 100: begun  ["
    ) in line, line


@pytest.mark.docker
def test_a_condition_setup_past_the_step_timeout_says_so(docker_engine, tmp_path, wt_env):
    line = collect(tmp_path, wt_env, {
        "name": "slow-condition",
        "sandbox": {"kind": "terminal", "docker": {"image": IMAGE, "step_timeout": 1}},
        "conditions": [{"setup": {"commands": ["sleep 100"], "description": "a slow stage"}}],
        "tasks": [{"id": "s", "actions": ["ls\n"]}],
    })  # fmt: skip
    assert (
        "error (0 turns): SandboxError: condition set-up ran past step_timeout (1s) and was "
        "killed: cd /root && sleep 100  ["
    ) in line, line


@pytest.mark.docker
def test_a_setup_that_fails_in_time_keeps_its_exit_status(docker_engine, tmp_path, wt_env):
    line = collect(tmp_path, wt_env, {
        "name": "bad-setup",
        "sandbox": {"kind": "terminal", "docker": {"image": IMAGE, "step_timeout": 5}},
        "tasks": [{"id": "s", "setup": ["kill -9 $$"], "actions": ["ls\n"]}],
    })  # fmt: skip
    assert "error (0 turns): SandboxError: task setup failed (137): kill -9 $$  [" in line, line


SERVER = """
import os
import sys
import threading

from mcp.server.mcpserver import MCPServer

app = MCPServer("stderr")


@app.tool()
def boom() -> str:
    print("Traceback (most recent call last):", file=sys.stderr, flush=True)
    print("ValueError: boom", file=sys.stderr, flush=True)
    return "boom logged"


@app.tool()
def crash_after() -> str:  # answers, then dies on a thread of its own: between two calls

    def die():
        print("Fatal: the cache file is corrupt", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Timer(0.2, die).start()
    return "answered"


@app.tool()
def hang(say: str = "") -> str:
    if say:
        print(say, file=sys.stderr, flush=True)
    threading.Event().wait()
    return "never"


app.run("stdio")
"""


@pytest.mark.parametrize(
    "say, reason_ends",
    [
        (
            "hang: waiting for a lock nobody holds",
            "call_timeout); server stderr: hang: waiting for a lock nobody holds",
        ),
        ("", "call_timeout)"),
    ],
)
def test_a_hung_call_quotes_only_what_the_server_said_during_it(tmp_path, wt_env, say, reason_ends):
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    line = collect(tmp_path, wt_env, {
        "name": "hang",
        "sandbox": {"kind": "mcp", "command": [sys.executable, str(server)], "call_timeout": 2},
        "tasks": [{"id": "s", "actions": [
            {"tool": "boom"}, {"tool": "hang", "arguments": {"say": say}},
        ]}],
    })  # fmt: skip
    reason = line.split(": error (1 turns): ", 1)[1].rsplit("  [", 1)[0]
    assert reason.startswith("SandboxError: tools/call hang: no answer within 2 s "), line
    assert reason.endswith(reason_ends), line  # the boom traceback is not this call's


def test_a_server_that_died_between_calls_is_quoted_with_what_it_said(tmp_path, wt_env):
    """What a server wrote after the last call returned, a crash's last words, is the next
    call's reason (only an earlier call's own stderr is left out)."""
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    line = collect(tmp_path, wt_env, {
        "name": "crash",
        "sandbox": {"kind": "mcp", "command": [sys.executable, str(server)], "call_timeout": 5},
        "tasks": [{"id": "s", "actions": [
            {"tool": "boom"}, {"tool": "crash_after"}, {"tool": "hang", "arguments": {"say": ""}},
        ]}],
    })  # fmt: skip
    reason = line.split(": error (2 turns): ", 1)[1].rsplit("  [", 1)[0]
    assert reason.startswith("SandboxError: tools/call hang: "), line
    assert reason.endswith("server stderr: Fatal: the cache file is corrupt"), line
