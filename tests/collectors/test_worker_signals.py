"""A worker stopped at once (a second SIGTERM) while its episodes step: the exit removes
their containers, and that is our shutdown, never the environment's answer. The running
attempts end as lost and are queued again; nothing of them is finished or published."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import LOST_PREFIX, open_job_store
from worldtrace.collectors.owners import owned_containers
from worldtrace.collectors.scheduler import register
from worldtrace.collectors.worker import ABANDONED
from worldtrace.schemas import read_records

from ..conftest import takers, wait_until
from .test_queue import slow_job
from .test_workers import running_mid_episode, start_worker, submit

pytestmark = pytest.mark.docker

SLOW_TERMINAL = {
    "name": "slow",
    "sandbox": {"kind": "terminal", "docker": {"warm": 0, "step_timeout": 30}},
    "episodes": 2,
    "retries": 1,
    "tasks": [
        {
            "id": "t",
            "actions": [
                "echo start\n",
                {"keystrokes": "sleep 3; echo one\n", "duration": 5},
                {"keystrokes": "sleep 3; echo two\n", "duration": 5},
            ],
        }
    ],
}


def test_a_second_sigterm_loses_the_running_attempts_and_records_no_failure(
    docker_engine, store, wt_env, tmp_path
):
    jobs_url = str(store.jobs_db)
    js = open_job_store(jobs_url)
    job_id = submit(wt_env, jobs_url, tmp_path, SLOW_TERMINAL)
    a = start_worker(wt_env, jobs_url, "--concurrency", "2")
    lease = wait_until(lambda: running_mid_episode(js, store, job_id), what="A mid-episode")
    a.send_signal(signal.SIGTERM)
    for line in a.stderr:  # until the first one was handled
        if "stopping" in line:
            break
    a.send_signal(signal.SIGTERM)  # while the steps still run: exit at once
    out_a, _ = a.communicate(timeout=60)
    assert a.returncode == 143  # SIGTERM's status (130 before 12-06, as after Ctrl-C)
    rows = js.job(job_id)["episode_rows"]
    ended = [r for r in rows if r["status"] not in ("queued", "running")]
    assert ended, rows
    for r in ended:  # lost (queued again without using a retry), never an environment failure
        assert r["status"] == "failed" and r["error"] == LOST_PREFIX + ABANDONED, r
        assert r["trajectory_id"] is None
    assert not list((store.raw / "collect" / job_id).glob("*.parquet"))
    assert owned_containers(lease.worker, docker_engine) == []
    assert f"requeued  {job_id}/{lease.episode_id} a1: {ABANDONED}" in out_a

    b = start_worker(wt_env, jobs_url, "--concurrency", "2")
    _, err_b = b.communicate(timeout=120)
    assert b.returncode == 0, err_b
    assert js.job(job_id)["status"] == "succeeded"
    trajs = [t for t in read_records(store.raw) if t.source.job_id == job_id]
    assert sorted(t.source.episode_id for t in trajs) == ["t-e0", "t-e1"]  # no error shard
    assert {t.outcome.status for t in trajs} == {"success"}
    assert not list(store.raw.rglob("*.journal.jsonl"))


def test_a_sigterm_while_the_worker_starts_stops_it_cleanly(wt_env, tmp_path):
    """Found: SIGTERM in a worker's first second (its imports, opening the job store)
    killed it with status 143 where the docs promise a clean stop and 0."""
    db = tmp_path / "jobs.db"
    w = start_worker(wt_env, str(db))
    wait_until(db.exists, what="the worker opening its job store")
    w.send_signal(signal.SIGTERM)
    out, err = w.communicate(timeout=60)
    assert w.returncode == 0, err
    assert "0 episode attempt(s) run" in out and "SIGTERM: stopping" in err


def test_a_sigterm_the_kernel_hands_to_another_thread_gives_the_episode_back(
    docker_engine, store, wt_env, tmp_path, repo
):
    """Found (a CI run, 12-04): the kernel may deliver a process's SIGTERM to any of its
    threads, and Python runs the handler only in the main thread, which was blocked
    joining the slots: the worker ran the queue dry, released nothing and exited 0. Here
    the signal goes to a thread other than the main one, by its id, as the kernel may."""
    jobs_url = str(store.jobs_db)
    js = open_job_store(jobs_url)
    job_id = submit(wt_env, jobs_url, tmp_path, slow_job(repo, episodes=2, steps=3))
    a = start_worker(wt_env, jobs_url)
    lease = wait_until(lambda: running_mid_episode(js, store, job_id), what="A mid-episode")
    [tid, *_] = takers(a.pid, signal.SIGTERM) or [None]
    assert tid, "no thread of the worker but the main one takes SIGTERM"
    os.kill(tid, signal.SIGTERM)  # a thread's id: that thread takes the signal
    out, err = a.communicate(timeout=60)
    assert a.returncode == 0, err
    assert f"released  {job_id}/{lease.episode_id} a1" in out, out
    assert "0 episode attempt(s) run" in out, out
    assert owned_containers(lease.worker, docker_engine) == []


def test_a_sigterm_another_thread_of_the_scheduler_takes_stops_it_at_once(wt_env, tmp_path):
    """Found (signal audit, 12-04): a SIGTERM taken by another thread (numpy's OpenBLAS
    thread is in every command) stopped `scheduler` only when its wait of up to `--poll`
    seconds ended (24.5 s of the default 30 here)."""
    db = tmp_path / "jobs.db"
    tasks = [{"id": "t", "actions": ["ls\n"]}]
    register(
        open_job_store(db),
        JobSpec.from_dict({"name": "hourly", "schedule": {"every": "1h"}, "tasks": tasks}),
    )
    s = subprocess.Popen(
        ["worldtrace", "scheduler", "--jobs", str(db), "--poll", "600"], env=wt_env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert s.stdout.readline().startswith("enqueued hourly-")  # in its loop: it waits now
        os.kill(takers(s.pid, signal.SIGTERM)[0], signal.SIGTERM)
        _, err = s.communicate(timeout=60)  # a deadline: the poll is 600 s
        assert s.returncode == 0 and "SIGTERM: stopping" in err, err
    finally:
        if s.poll() is None:
            s.kill()
            s.wait()
