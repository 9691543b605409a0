"""A configuration mistake no retry can mend (12-04b): a terminal job naming a `shell:`
the image lacks failed each attempt alike and spent all its retries (a worker queued
every one of them again). Now its one attempt fails with the reason and the episode
ends there; a failure of the environment (a task setup that fails) is retried as before."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.worker import Worker, WorkerConfig

IMAGE = "worldtrace/busybox:latest"


def zsh_job(name: str = "zsh") -> dict:
    return {
        "name": name,
        "sandbox": {
            "kind": "terminal",
            "shell": ["/bin/zsh", "-i"],
            "docker": {"image": IMAGE, "step_timeout": 20},
        },
        "retries": 2,
        "tasks": [{"id": "a", "instruction": "print the directory", "actions": ["pwd\n"]}],
    }


def setup_fails_job(name: str = "setup") -> dict:
    return {
        "name": name,
        "sandbox": {"kind": "terminal", "docker": {"image": IMAGE, "step_timeout": 20}},
        "retries": 1,
        "tasks": [{"id": "b", "setup": ["exit 3"], "actions": ["ls\n"]}],
    }


def outcomes(store, job_id: str) -> list[tuple[str, str, str]]:
    """(file name, outcome status, error) of every published attempt of the job."""
    out = []
    for f in sorted((store.raw / "collect" / job_id).glob("*.parquet")):
        [o] = pq.read_table(f, columns=["outcome"]).column("outcome").to_pylist()
        out.append((f.name, o["status"], o["error"]))
    return out


@pytest.mark.docker
def test_a_missing_shell_fails_its_episode_once_and_a_setup_failure_is_retried(
    docker_engine, store
):
    events = []
    result = run_job(
        JobSpec.from_dict(zsh_job()), store.raw, job_id="zsh-00000001",
        on_event=lambda event, **info: events.append((event, info)),
    )  # fmt: skip
    [t] = result.trajectories
    assert result.failed_attempts == 1 and t.outcome.status == "error", t.outcome
    assert "shell /bin/zsh is not in the image" in t.outcome.error, t.outcome.error
    [(name, status, error)] = outcomes(store, "zsh-00000001")  # recorded, never dropped
    assert (name, status, error) == ("a-e0-a1.parquet", "error", t.outcome.error)
    finished = [info for event, info in events if event == "finished"]
    assert [(i["attempt"], i["final"]) for i in finished] == [(1, True)]

    result = run_job(JobSpec.from_dict(setup_fails_job()), store.raw, job_id="setup-00000001")
    assert [(t.source.attempt, t.outcome.status) for t in result.trajectories] == [
        (1, "error"),
        (2, "error"),
    ]  # retries: 1, as before
    assert "task setup failed (3)" in result.trajectories[1].outcome.error


@pytest.mark.docker
def test_a_worker_does_not_queue_a_missing_shell_again(docker_engine, store, js):
    zsh = js.submit(JobSpec.from_dict(zsh_job()))
    setup = js.submit(JobSpec.from_dict(setup_fails_job()))
    stats = Worker(js, store.raw, WorkerConfig()).run()
    assert stats.errors == []
    rows = js.job(zsh)["episode_rows"]
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "failed")]
    assert "shell /bin/zsh is not in the image" in rows[0]["error"], rows[0]["error"]
    assert js.job(zsh)["status"] == "failed"
    [(name, status, error)] = outcomes(store, zsh)
    assert (name, status, error) == ("a-e0-a1.parquet", "error", rows[0]["error"])
    rows = js.job(setup)["episode_rows"]
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "failed"), (2, "failed")]
    assert (stats.run, stats.failed) == (3, 3)
