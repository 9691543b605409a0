"""Found (12-04 MCP hunt, left then): a server's stderr log (`server.log` in the episode's
private folder) had no size cap; a chatty server, kept across episodes (`keep_server`),
grew it without bound in the temp dir."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.sandboxes.mcp_client import SERVER_LOG_CAP
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import parse

SERVER = """
import sys, time
from mcp.server.mcpserver import MCPServer

app = MCPServer("chatty")


@app.tool(annotations={"readOnlyHint": True})
def chatty(mb: int) -> str:
    line = "debug: " + "x" * 1000 + "\\n"
    for _ in range(mb * 1024):
        sys.stderr.write(line)
    sys.stderr.flush()
    return "ok"


@app.tool(annotations={"readOnlyHint": True})
def stuck() -> str:
    print("stuck: waiting for the lock on db.sqlite", file=sys.stderr, flush=True)
    time.sleep(600)
    return "never"


app.run("stdio")
"""


@pytest.fixture
def box(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # episode folders of our own
    server = tmp_path / "chatty.py"
    server.write_text(SERVER)
    config = {"command": [sys.executable, str(server)], "keep_server": True, "call_timeout": 2}
    b = MCPSandbox(parse(MCPConfig, config))
    yield b
    b.close()


def logs(root: Path) -> list[Path]:
    return list(root.glob(f"worldtrace-mcp-{os.getuid()}/*/server.log"))


def test_a_chatty_servers_log_stays_under_its_cap_and_keeps_its_tail(box, tmp_path):
    box.reset(TaskSpec("t1"))
    for _ in range(2):  # 24 MiB over two calls, past the 8 MiB cap
        assert box.step(tool_call("chatty", {"mb": 12})).text == "ok"
    box.reset(TaskSpec("t2"))  # the same server (keep_server)
    [log] = logs(tmp_path)
    assert log.stat().st_size <= SERVER_LOG_CAP
    with pytest.raises(SandboxError) as failed:  # the tail is still what it said last
        box.step(tool_call("stuck", {}))
    assert "waiting for the lock on db.sqlite" in str(failed.value)
