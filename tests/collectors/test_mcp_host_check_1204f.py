"""Found (a new user's walk through the docs, 2026-12-04 night): an mcp job naming an
`env:` variable this host does not set, or a `workdir.at` folder holding the user's
files, passed `jobs submit --dry-run` and started collecting; every attempt then failed
alike. The docker kind refused its unset `env:` with the job file; the mcp kind now does
too, for both, naming the line and the key (`MCPConfig.host_problems`)."""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas.parsing import ConfigError


def test_what_this_host_lacks_for_an_mcp_job_is_refused_with_the_job_file(tmp_path, monkeypatch):
    monkeypatch.delenv("WT_MCP_1204F_UNSET", raising=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: m\nsandbox:\n  kind: mcp\n  command: [mcp-server-time]\n"
        f"  env: [WT_MCP_1204F_UNSET]\n  workdir: {{at: {mine}}}\n"
        "tasks: [{id: t, actions: [{tool: get_current_time, arguments: {}}]}]\n"
    )
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(job).check_store(tmp_path / "store")
    assert exc.value.render().splitlines() == [
        f"{job}:5: sandbox.env: variables not set on this host: WT_MCP_1204F_UNSET",
        f"{job}:6: sandbox.workdir.at: {mine} holds files but no mine.worldtrace-lock (no "
        "sandbox of worldtrace has used it): refusing to empty it; name an empty or new "
        "folder, or empty this one",
    ]
    monkeypatch.setenv("WT_MCP_1204F_UNSET", "x")
    (mine / "notes.txt").unlink()
    JobSpec.load(job).check_store(tmp_path / "store")  # all there: the job loads
