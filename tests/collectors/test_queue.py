"""The job store and worker: submit, run, retry, cancel, resume; the jobs views."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from worldtrace.collectors.jobs import JobSpec
from worldtrace.collectors.queue import JobStore, Worker
from worldtrace.schemas import read_records
from worldtrace.schemas.views import connect

pytestmark = pytest.mark.docker

JOB = {
    "name": "q",
    "sandbox": "terminal",
    "episodes": 2,
    "retries": 1,
    "tasks": [
        {"id": "ok", "instruction": "say hi", "actions": ["echo hi\n", "pwd\n"]},
        {"id": "broken", "setup": ["exit 4"], "actions": ["ls\n"]},
    ],
}


def statuses(js, job_id):
    return sorted(
        (e["episode_id"], e["attempt"], e["status"]) for e in js.job(job_id)["episode_rows"]
    )


def test_worker_runs_retries_and_records_everything(docker_engine, store):
    js = JobStore(store.jobs_db)
    job_id = js.submit(JobSpec.from_dict(JOB))
    assert Worker(js, store.raw, concurrency=2).run() == 6
    assert statuses(js, job_id) == [
        ("broken-e0", 1, "failed"), ("broken-e0", 2, "failed"), ("broken-e1", 1, "failed"), ("broken-e1", 2, "failed"),
        ("ok-e0", 1, "succeeded"), ("ok-e1", 1, "succeeded"),
    ]  # fmt: skip
    job = js.job(job_id)
    assert (job["status"], job["succeeded"], job["failed"]) == ("partial", 2, 2)
    assert "task setup failed (4)" in job["episode_rows"][0]["error"]
    trajs = list(read_records(store.raw))
    assert len(trajs) == 6  # every attempt is in a raw shard
    assert {t.source.job_id for t in trajs} == {job_id}
    con = connect(store)
    assert con.execute("SELECT status, episodes, succeeded, failed FROM jobs").fetchall() == [
        ("partial", 4, 2, 2)
    ]
    assert con.execute("SELECT count(*) FROM episodes WHERE status = 'failed'").fetchone()[0] == 4
    assert (
        con.execute(
            "SELECT count(*) FROM episodes e JOIN raw_trajectories r USING (trajectory_id)"
        ).fetchone()[0]
        >= 6
    )

    assert js.retry(job_id) == 2
    assert Worker(js, store.raw).run() == 2
    assert [s for s in statuses(js, job_id) if s[1] == 3] == [
        ("broken-e0", 3, "failed"),
        ("broken-e1", 3, "failed"),
    ]


def test_cancel_keeps_queued_episodes_from_running(docker_engine, store):
    js = JobStore(store.jobs_db)
    job_id = js.submit(JobSpec.from_dict(JOB))
    assert js.cancel(job_id) == 4
    assert Worker(js, store.raw).run() == 0
    assert js.job(job_id)["status"] == "cancelled"
    assert {s for _, _, s in statuses(js, job_id)} == {"cancelled"}


def test_resume_episodes_of_a_dead_worker(docker_engine, store):
    js = JobStore(store.jobs_db)
    job_id = js.submit(JobSpec.from_dict({**JOB, "episodes": 1, "tasks": JOB["tasks"][:1]}))
    claim = js.claim("worker-that-died")
    assert claim["episode_id"] == "ok-e0"
    assert Worker(js, store.raw, lease_s=3600).run() == 0  # its lease is still valid
    assert Worker(js, store.raw, lease_s=0).run() == 1  # expired: requeued and run
    assert statuses(js, job_id) == [("ok-e0", 1, "succeeded")]


def test_jobs_cli(docker_engine, tmp_path, wt_env):
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump({**JOB, "episodes": 1, "tasks": JOB["tasks"][:1]}))
    run = lambda *a: subprocess.run(["worldtrace", *a], capture_output=True, text=True, env=wt_env)  # noqa: E731
    job_id = run("jobs", "submit", str(f)).stdout.strip()
    assert job_id.startswith("q-")
    assert "queued" in run("jobs", "list").stdout
    r = run("worker", "--concurrency", "2")
    assert r.returncode == 0 and "1 episode(s) run" in r.stdout
    assert "succeeded" in run("jobs", "show", job_id).stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntasks: []\n")
    r = run("jobs", "submit", str(bad))
    assert r.returncode == 1 and "at least one task" in r.stderr
