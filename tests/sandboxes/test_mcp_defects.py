"""MCP defects a reviewer found: stdout that is not JSON-RPC, episode folders a killed
collector leaves behind."""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import parse

from .test_mcp import HOLDING_COLLECTOR

PROJECT = Path(__file__).resolve().parents[2]
NOTES = str(PROJECT / "examples" / "data" / "notes")
FS = {"command": ["mcp-server-filesystem", "{workdir}"], "workdir": {"copy": NOTES}}
ECHO_SERVER = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("echo")


@app.tool()
def echo(message: str) -> str:
    return message


app.run("stdio")
"""


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch) -> Path:
    """A private temp dir, so episode folders of other tests and sessions stay apart."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"worldtrace-mcp-{os.getuid()}"


def _sdk_parse_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("mcp.") and r.levelno >= logging.ERROR]


def test_a_server_writing_only_garbage_fails_naming_what_it_wrote(caplog, capfd, tmpdir_root):
    """Found: `yes garbage` as a server printed one pydantic traceback per line (100,000+
    lines in 5 s) and failed with just `no answer in time`."""
    caplog.set_level(logging.DEBUG)
    box = MCPSandbox(parse(MCPConfig, {"command": ["sh", "-c", "yes garbage"], "start_timeout": 2}))
    try:
        with pytest.raises(SandboxError) as failed:
            box.reset(TaskSpec("a"))
    finally:
        box.close()
    reason = str(failed.value)
    assert "no answer in time" in reason
    assert "not JSON-RPC" in reason and "'garbage'" in reason, reason
    assert not _sdk_parse_errors(caplog)  # counted, not logged
    assert "Traceback" not in capfd.readouterr().err


def test_a_banner_before_a_working_server_is_harmless_and_noted(caplog, tmp_path, tmpdir_root):
    caplog.set_level(logging.DEBUG)
    server = tmp_path / "echo.py"
    server.write_text(ECHO_SERVER)
    banner = f"echo 'Secure MCP Server running on stdio'; exec {sys.executable} {server}"
    box = MCPSandbox(parse(MCPConfig, {"command": ["sh", "-c", banner]}))
    try:
        first = box.reset(TaskSpec("a"))
        obs = box.step(tool_call("echo", {"message": "hi"}))
        noted = box.describe()["config"]["server_stdout_not_json"]
    finally:
        box.close()
    assert obs.text == "hi" and not obs.is_error
    assert noted == {"lines": 1, "first": ["Secure MCP Server running on stdio"]}
    assert json.loads(first.state_json)["stdout"]["lines"] == 1
    assert not _sdk_parse_errors(caplog)
    assert [r.levelname for r in caplog.records if r.name == "worldtrace.sandboxes.mcp"] == [
        "WARNING"
    ]


def test_default_workdir_is_a_stable_slot_freed_at_close(tmpdir_root):
    """Found: a random `/tmp/worldtrace-mcp-XXXX/work` per episode, in every observation
    that shows a path (training data, dedup)."""
    config = parse(MCPConfig, FS)
    one, two = MCPSandbox(config), MCPSandbox(config)
    try:
        a = one.reset(TaskSpec("a")).text
        b = one.reset(TaskSpec("b")).text
        c = two.reset(TaskSpec("c")).text  # while `one` holds slot 0
    finally:
        one.close()
        two.close()
    assert f"Working directory: {tmpdir_root}/0/work" in a and a == b
    assert f"Working directory: {tmpdir_root}/1/work" in c
    assert not [p for p in tmpdir_root.iterdir() if p.is_dir()]  # emptied at close


def test_a_sigkilled_collectors_workdir_is_swept(tmp_path, tmpdir_root):
    """Found: the episode folder (a copy of workdir.copy) stayed in /tmp for good after
    the collector was SIGKILLed, and nothing knew it."""
    from worldtrace.sandboxes.mcp import sweep_workdirs

    script = HOLDING_COLLECTOR
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(FS)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert select.select([proc.stdout], [], [], 60)[0] and proc.stdout.readline() == b"ready\n"
        assert sweep_workdirs(tmpdir_root, dry_run=True) == []  # held by a live sandbox
    finally:
        proc.kill()  # no exit hook runs
        proc.wait()
    left = tmpdir_root / "0" / "work" / "todo.txt"
    assert left.exists()
    [found] = sweep_workdirs(tmpdir_root, dry_run=True)
    assert found["path"] == str(tmpdir_root / "0") and found["size"] > 0 and left.exists()
    (tmpdir_root / "7").mkdir()  # another dead owner's, in a slot nobody takes next
    box = MCPSandbox(parse(MCPConfig, FS))
    try:
        box.reset(TaskSpec("n"))
        assert not (tmpdir_root / "7").exists()  # swept when a sandbox starts
    finally:
        box.close()
    assert not (tmpdir_root / "0").exists()


RAW_SERVER = r"""
import json, sys
TOOL = {"name": "count", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call" and msg["params"]["name"] == "half":  # a lone surrogate
        print('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":'
              '"half \\ud83d"}]}}' % mid, flush=True)
        continue
    elif method == "tools/call":  # against its own output schema: n is no integer
        result = {"content": [{"type": "text", "text": "n is abc"}], "structuredContent": {"n": "abc"}}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
"""


def test_an_answer_against_the_servers_own_output_schema_is_its_answer(tmp_path, tmpdir_root):
    """Found: a tool whose structured content broke its declared output schema failed
    every attempt (`SandboxError: ... Invalid structured content returned by tool`): the
    SDK's check made the server's real, buggy answer our failure."""
    server = tmp_path / "raw.py"
    server.write_text(RAW_SERVER)
    box = MCPSandbox(parse(MCPConfig, {"command": [sys.executable, str(server)]}))
    try:
        box.reset(TaskSpec("a"))
        obs = box.step(tool_call("count", {}))
    finally:
        box.close()
    assert obs.text.startswith("n is abc") and not obs.is_error, obs.text


@pytest.mark.parametrize("n", [1025, 1026, 1027, 4033])
def test_an_image_is_said_with_the_bytes_it_holds(n):
    """Found: everything's tiny image (4033 bytes) was `[image: image/png, 4035 bytes]`:
    the size counted base64's `=` padding as data."""
    import base64

    import mcp_types as types
    from worldtrace.sandboxes.mcp_client import render_part

    data = base64.b64encode((bytes(range(256)) * 17)[:n]).decode()
    image = types.ImageContent(type="image", data=data, mime_type="image/png")
    assert render_part(image) == f"[image: image/png, {n} bytes]"


def test_an_answer_with_a_lone_surrogate_is_the_observation(tmp_path, tmpdir_root):
    """Found: an answer holding a lone surrogate (`"\\ud83d"`) is dropped as stdout noise,
    and the attempt failed `no answer within 4 s (the server hangs ...)`: it had answered.
    Then (1205f) the timeout named the line; now (1205g) the answer is read, the lone
    surrogate shown as U+FFFD (what a Node server writes for a string cut in an emoji)."""
    server = tmp_path / "raw.py"
    server.write_text(RAW_SERVER)
    box = MCPSandbox(
        parse(MCPConfig, {"command": [sys.executable, str(server)], "call_timeout": 1})
    )
    try:
        box.reset(TaskSpec("a"))
        obs = box.step(tool_call("half", {}))
    finally:
        box.close()
    assert obs.text == "half \ufffd" and not obs.is_error
