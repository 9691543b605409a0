"""Found (tester, 2026-12-05): structured content was dropped when its values merely
appeared somewhere in the text. A tool answering the text `ok: 3 of 30` with the structured
content `{"done": 3, "total": 30, "failed": 3}` was recorded as `ok: 3 of 30`: `3` and `30`
occur in it, so the failures count was lost, while the SDK's own `call_tool` shows it.

Structured content is left out only where the text says it by a convention servers follow:
the SDK's MCPServer writes a returned dict as its JSON, and a `str`, `int` or `list`
return as its text under `{"result": ...}`. A real server built with the SDK, on stdio;
its answers are compared with what the SDK's `call_tool` gives for the same calls.
"""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from worldtrace.sandboxes.mcp_client import canonical

from .test_mcp import collect, tool
from .test_mcp_hunt_1204d import tmpdir_root  # noqa: F401  (the fixture)

SERVER = """
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

app = MCPServer("structured")


@app.tool()
def progress() -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text="ok: 3 of 30")],
        structured_content={"done": 3, "total": 30, "failed": 3},
    )


@app.tool()
def stats() -> dict[str, int]:
    return {"done": 3, "total": 30}


@app.tool()
def word() -> str:
    return "3 of 30"


@app.tool()
def count() -> int:
    return 30


@app.tool()
def names() -> list[str]:
    return ["ann", "bob"]


app.run("stdio")
"""
TOOLS = ["progress", "stats", "word", "count", "names"]


@pytest.fixture
def server(tmp_path) -> list[str]:
    path = tmp_path / "structured.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


def sdk_results(argv: list[str]) -> dict:
    """What the SDK's own client gets for each tool: (text parts, structured content)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main() -> dict:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        # errlog given: its default is the `sys.stderr` of the SDK's first import, which
        # in a test worker may be a CliRunner's stream since closed (fresh-clone CI, 1205g)
        async with Client(stdio_client(params, errlog=sys.__stderr__)) as client:
            results = {name: await client.call_tool(name, {}) for name in TOOLS}
        return {k: ([p.text for p in r.content], r.structured_content) for k, r in results.items()}

    return anyio.run(main)


def test_structured_content_the_text_does_not_carry_is_recorded(store, server, tmpdir_root):  # noqa: F811
    sdk = sdk_results(server)
    assert sdk["progress"] == (["ok: 3 of 30"], {"done": 3, "total": 30, "failed": 3})
    [t] = collect(
        store, {"command": server}, [{"id": "s", "actions": [tool(n) for n in TOOLS]}]
    ).trajectories
    got = dict(zip(TOOLS, (x.observation.text for x in t.turns), strict=True))
    parts, structured = sdk["progress"]
    assert got["progress"] == "\n".join([*parts, canonical(structured)])
    # the SDK's conventions: the text already says the structured content, once
    assert json.loads(got["stats"]) == sdk["stats"][1] == {"done": 3, "total": 30}
    assert sdk["word"][1] == {"result": "3 of 30"} and got["word"] == "3 of 30"
    assert sdk["count"][1] == {"result": 30} and got["count"] == "30"
    assert sdk["names"] == (["ann", "bob"], {"result": ["ann", "bob"]})
    assert got["names"] == "ann\nbob"
