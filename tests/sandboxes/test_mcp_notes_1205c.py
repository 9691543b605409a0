"""Found (hunt 1205c): the warning for a server's stdout that is not JSON-RPC named the
server as a tuple of its unexpanded command (`MCP server ('{python}',) wrote to stdout
...`); it names the server that ran: the script, for an interpreter's command (hunt
1205d: the interpreter's path named every Python server alike). A real stdio server
(the MCP SDK's)."""

from __future__ import annotations

import logging

from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas.parsing import parse

from .test_mcp_defects import ECHO_SERVER, tmpdir_root  # noqa: F401  (a fixture)


def test_the_noise_warning_names_the_program_that_ran(caplog, tmp_path, tmpdir_root):  # noqa: F811
    caplog.set_level(logging.WARNING, logger="worldtrace.sandboxes.mcp")
    server = tmp_path / "banner.py"
    server.write_text("print('Secure MCP Server running on stdio', flush=True)\n" + ECHO_SERVER)
    box = MCPSandbox(parse(MCPConfig, {"command": ["{python}", str(server)]}))
    try:
        box.reset(TaskSpec("a"))
    finally:
        box.close()
    [said] = [r.getMessage() for r in caplog.records if r.name == "worldtrace.sandboxes.mcp"]
    assert said.startswith(f"MCP server {server} wrote to stdout what is not JSON-RPC")
    assert "'Secure MCP Server running on stdio'" in said and "{python}" not in said
