"""Found (a new user's walk through the docs, 2026-12-04 night): a `workdir.at` folder
that already held the user's files failed every attempt alike (`refusing to empty it`)
and each was retried, as if the server were down. It is a configuration the host cannot
serve: the attempt fails once (SandboxConfigError) and says the way on. The same for a
`workdir.copy` folder removed after the job was checked."""

from __future__ import annotations

import pytest

from .test_mcp import collect, tool
from .test_mcp_hunt_1204d import server, tmpdir_root  # noqa: F401  (fixtures)


def test_a_fixed_workdir_holding_the_users_files_fails_once_and_is_kept(
    store,
    server,  # noqa: F811
    tmpdir_root,  # noqa: F811
    tmp_path,
):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("months of work")
    sandbox = {"command": server, "workdir": {"at": str(mine)}}
    r = collect(store, sandbox, [{"id": "e", "actions": [tool("echo", message="hi")]}], retries=2)
    [t] = r.trajectories  # one attempt: no retry empties the folder for it
    assert t.outcome.status == "error" and not t.turns
    assert t.outcome.error == (
        f"SandboxConfigError: sandbox.workdir.at: {mine} holds files but no "
        "mine.worldtrace-lock (no sandbox of worldtrace has used it): refusing to empty it; "
        "name an empty or new folder, or empty this one"
    )
    assert (mine / "thesis.tex").read_text() == "months of work"


def test_a_fixed_workdir_used_before_is_emptied_for_each_episode(
    store,
    server,  # noqa: F811
    tmpdir_root,  # noqa: F811
    tmp_path,
):
    """What the check must leave working: a folder our sandbox used (its lock file beside
    it) is emptied at every reset, episode after episode and run after run."""
    at = tmp_path / "work"
    tasks = [{"id": f"e{i}", "actions": [tool("echo", message="hi")]} for i in range(2)]
    for _ in range(2):
        r = collect(store, {"command": server, "workdir": {"at": str(at)}}, tasks, retries=0)
        assert [t.outcome.status for t in r.trajectories] == ["success", "success"]
        (at / "left.txt").write_text("an episode's file")  # what an episode leaves
    assert (tmp_path / "work.worldtrace-lock").exists()


@pytest.mark.parametrize("retries", [2])
def test_a_copy_folder_gone_since_the_job_was_checked_fails_once(
    store,
    server,  # noqa: F811
    tmpdir_root,  # noqa: F811
    tmp_path,
    retries,
):
    from worldtrace.collectors.jobs import JobSpec, run_job

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    job = JobSpec.from_dict(
        {"name": "mcp", "sandbox": {"kind": "mcp", "command": server, "workdir": {"copy": str(src)}},
         "policy": "scripted", "retries": retries,
         "tasks": [{"id": "e", "actions": [tool("echo", message="hi")]}]}
    )  # fmt: skip
    (src / "a.txt").unlink()
    src.rmdir()  # after the job was checked, before it ran
    [t] = run_job(job, store.raw).trajectories
    assert t.outcome.error == f"SandboxConfigError: workdir.copy: {src} does not exist on this host"
