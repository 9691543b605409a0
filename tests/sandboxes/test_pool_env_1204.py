"""A warm container keeps the environment values it was started with: sandboxes pooled
by their configuration alone handed a job run after a value changed a container holding
the old one."""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job

OLD, NEW = "tok-old-" + "a1b2c3d4" * 3, "tok-new-" + "e5f6g7h8" * 3


def job(repo) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "envjob",
            "sandbox": {
                "kind": "swe",
                "repo": str(repo),
                "docker": {
                    "image": "worldtrace/busybox:latest",
                    "warm": 1,
                    "env": ["MY_POOL_TOKEN"],
                },
            },
            "retries": 0,
            "tasks": [
                {
                    "id": "t",
                    "actions": [{"tool": "bash", "arguments": {"command": "echo $MY_POOL_TOKEN"}}],
                }
            ],
        }
    )


@pytest.mark.docker
def test_a_changed_value_reaches_the_next_job_and_the_old_one_none(
    docker_engine, store, repo, monkeypatch
):
    """Found (a CI run of 12-04, two tests in one worker process): the second job's
    observation held the first job's value, unredacted (its redaction knew the new one)."""
    monkeypatch.setenv("MY_POOL_TOKEN", OLD)
    [first] = run_job(job(repo), store.raw).trajectories
    monkeypatch.setenv("MY_POOL_TOKEN", NEW)
    [second] = run_job(job(repo), store.raw).trajectories
    texts = [t.turns[0].observation.text for t in (first, second)]
    assert texts == ["<secret:env_value>\n"] * 2, texts
    assert OLD[:12] not in texts[1]
