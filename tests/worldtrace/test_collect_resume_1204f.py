"""Found (a new user's walk through the docs, 2026-12-04 night): `collect JOB --resume ID`
of a job whose episodes had all ended said `0 trajectories (0 failed attempts) -> -`, as
if the resume had lost them; it says nothing was left to run, and an episode that failed
for good in an earlier run is still named (exit 3).

Real parts: the real CLI in process (CliRunner), a real MCP server (a Python script)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from click.testing import CliRunner

from worldtrace.cli import cli

SERVER = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("resume")

@app.tool(annotations={"readOnlyHint": True})
def echo(message: str) -> str:
    return message

app.run("stdio")
"""


def job(tmp_path: Path, server: str) -> Path:
    """A job of one episode on `server` (a missing command: every attempt fails)."""
    (tmp_path / "srv.py").write_text(SERVER)
    spec = {
        "name": "res", "retries": 0,
        "sandbox": {"kind": "mcp", "command": [sys.executable, str(tmp_path / "srv.py")]
                    if server == "echo" else [server]},
        "tasks": [{"id": "t", "instruction": "echo",
                   "actions": [{"tool": "echo", "arguments": {"message": m}} for m in "ab"]}],
    }  # fmt: skip
    f = tmp_path / "res.yaml"
    f.write_text(json.dumps(spec))
    return f


def run(store: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), *args])


def test_resuming_a_finished_job_says_nothing_was_left_to_run(tmp_path):
    store, f = tmp_path / "s", job(tmp_path, "echo")
    r = run(store, "--create", "collect", str(f))
    assert r.exit_code == 0, r.output
    job_id = re.search(r"job (res-[0-9a-f]{8})", r.output).group(1)
    r = run(store, "collect", str(f), "--resume", job_id)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == (
        f"nothing left to run: the 1 episode(s) of job {job_id} ended in earlier runs"
    )
    assert "0 trajectories" not in r.output


def test_resuming_a_job_whose_episode_failed_for_good_still_names_it(tmp_path):
    store, f = tmp_path / "s", job(tmp_path, "mcp-server-doesnotexist")
    r = run(store, "--create", "collect", str(f))
    assert r.exit_code == 3, r.output
    job_id = re.search(r"job (res-[0-9a-f]{8})", r.output).group(1)
    r = run(store, "collect", str(f), "--resume", job_id)
    assert r.exit_code == 3, r.output
    assert (
        f"nothing left to run: the 1 episode(s) of job {job_id} ended in earlier runs" in r.stdout
    )
    assert "1 episode(s) failed for good" in r.stderr and "t-e0" in r.stderr
