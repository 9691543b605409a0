"""Worker processes (`worldtrace worker`) sharing a job store, on SQLite and PostgreSQL:
two at once, one killed with SIGKILL, one stopped with SIGTERM. Every episode is done
once and raw/ holds exactly one published trajectory per episode."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter

import pytest
import yaml
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.owners import owned_containers
from worldtrace.schemas import read_records

from ..conftest import wait_until
from .test_queue import slow_job

pytestmark = pytest.mark.docker


def start_worker(wt_env, jobs_url, *args):
    return subprocess.Popen(
        ["worldtrace", "worker", "--jobs", jobs_url, "--poll", "0.5", *args],
        env=wt_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def submit(wt_env, jobs_url, tmp_path, job) -> str:
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(job))
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", "--jobs", jobs_url, str(f)],
        env=wt_env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return r.stdout.strip()


def running_mid_episode(js, store, job_id):
    """A running attempt whose journal already holds a finished step (mid-episode)."""
    for lease in js.running():
        j = (
            store.raw
            / "collect"
            / job_id
            / ".journals"
            / f"{lease.episode_id}-a{lease.attempt}.journal.jsonl"
        )
        if j.exists() and '"kind": "turn"' in j.read_text():
            return lease
    return None


def mid_episode_job(repo, episodes: int) -> dict:
    """`slow_job`'s episodes of three steps, the first and the last done at once (`true`),
    the second a `sleep 2`: an attempt is mid-episode (a finished step in its journal,
    still running, a step left to play) for the two seconds of the second."""
    job = slow_job(repo, episodes=episodes, steps=3)
    job["tasks"][0]["actions"][0] = {"tool": "bash", "arguments": {"command": "true"}}
    job["tasks"][0]["actions"][2] = {"tool": "bash", "arguments": {"command": "true"}}
    return job  # a third step, done at once: a stop in the last step ends a finished episode


def one_trajectory_per_episode(store, job_id, episodes):
    trajs = [t for t in read_records(store.raw) if t.source.job_id == job_id]
    assert Counter(t.source.episode_id for t in trajs) == {f"t-e{i}": 1 for i in range(episodes)}
    assert {t.outcome.status for t in trajs} == {"success"}
    assert not list(store.raw.rglob("*.journal.jsonl"))
    return trajs


def test_two_workers_do_every_episode_once(docker_engine, store, wt_env, jobs_url, tmp_path, repo):
    js = open_job_store(jobs_url)
    # both workers are up and polling before the job exists, so both take part whatever
    # the machine's load (a worker starting late could otherwise find the queue drained)
    a = start_worker(wt_env, jobs_url, "--concurrency", "2", "--forever")
    b = start_worker(wt_env, jobs_url, "--concurrency", "2", "--forever")
    wait_until(lambda: len(js.workers(60)) == 2, timeout=60, what="both workers registered")
    # steps of `sleep 1`: the episodes still overlap on both workers' four slots
    job_id = submit(wt_env, jobs_url, tmp_path, slow_job(repo, episodes=10, command="sleep 1"))
    wait_until(
        lambda: js.job(job_id)["status"] == "succeeded", timeout=120, what="the job to finish"
    )
    for w in (a, b):
        w.send_signal(signal.SIGTERM)
    out_a, err_a = a.communicate(timeout=60)
    out_b, err_b = b.communicate(timeout=60)
    assert (a.returncode, b.returncode) == (0, 0), err_a + err_b
    rows = js.job(job_id)["episode_rows"]
    assert [(r["attempt"], r["status"], r["error"]) for r in rows] == [(1, "succeeded", None)] * 10
    job = js.job(job_id)  # counters stay right when workers finish the last episodes at once
    assert (job["status"], job["succeeded"], job["failed"]) == ("succeeded", 10, 0)
    assert "succeeded" in out_a and "succeeded" in out_b  # both took part
    one_trajectory_per_episode(store, job_id, 10)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_stopped_worker_is_replaced(docker_engine, store, wt_env, jobs_url, tmp_path, repo, sig):
    """SIGKILL: the next worker removes A's containers and redoes the lost attempt.
    SIGTERM: A gives its episode back and removes its containers itself."""
    js = open_job_store(jobs_url)
    job_id = submit(wt_env, jobs_url, tmp_path, mid_episode_job(repo, episodes=2))
    a = start_worker(wt_env, jobs_url, "--lease", "60")  # expiry is not what saves us here
    lease = wait_until(lambda: running_mid_episode(js, store, job_id), what="A mid-episode")
    containers = owned_containers(lease.worker, docker_engine)
    assert containers, "A's sandbox container should be known"
    a.send_signal(sig)
    out_a, _ = a.communicate(timeout=30)
    if sig == signal.SIGTERM:
        assert a.returncode == 0 and f"released  {job_id}/{lease.episode_id} a1" in out_a
        assert owned_containers(lease.worker, docker_engine) == []  # A cleaned up itself
    b = start_worker(wt_env, jobs_url, "--lease", "60", "--concurrency", "2")
    wait_until(
        lambda: not set(containers) & {c["Id"] for c in docker_engine.api.containers(all=True)},
        what="A's containers removed",
    )
    out_b, err_b = b.communicate(timeout=90)
    assert b.returncode == 0, err_b
    rows = [(r["episode_id"], r["attempt"], r["status"]) for r in js.job(job_id)["episode_rows"]]
    said = [(r["episode_id"], r["attempt"], r["error"]) for r in js.job(job_id)["episode_rows"]]
    said += [out_a, out_b]  # why an attempt failed, on failure
    if sig == signal.SIGKILL:  # the lost attempt is recorded, redone as attempt 2
        assert (lease.episode_id, 1, "failed") in rows and (
            lease.episode_id,
            2,
            "succeeded",
        ) in rows, said
        [lost] = [r for r in js.job(job_id)["episode_rows"] if r["status"] == "failed"]
        assert lost["error"].startswith(f"worker lost: process {a.pid} of {lease.worker}")
        assert f"requeued  {job_id}/{lease.episode_id} a1" in out_b
        assert len(rows) == 3
    else:  # released: the same attempt runs again
        assert sorted(rows) == [(f"t-e{i}", 1, "succeeded") for i in range(2)], said
    assert js.job(job_id)["status"] == "succeeded"
    trajs = one_trajectory_per_episode(store, job_id, 2)
    assert all(len(t.turns) == 3 for t in trajs)  # `mid_episode_job`: three steps


def test_a_bad_journal_is_set_aside_and_the_queue_goes_on(
    docker_engine, store, wt_env, jobs_url, tmp_path, repo
):
    """A finished attempt's journal truncated to nothing (or holding a line without a
    kind) is set aside by the next worker with one warning, and the queue goes on."""
    js = open_job_store(jobs_url)
    first = submit(wt_env, jobs_url, tmp_path, slow_job(repo, episodes=2, command="true"))
    w = start_worker(wt_env, jobs_url)
    _, err = w.communicate(timeout=90)
    assert w.returncode == 0, err
    journals = store.raw / "collect" / first / ".journals"
    empty = journals / "t-e0-a1.journal.jsonl"
    no_kind = journals / "t-e1-a1.journal.jsonl"
    empty.write_text("")  # `: > journal`
    no_kind.write_text('{"episode_id": "t-e1"}\n')
    second = submit(wt_env, jobs_url, tmp_path, slow_job(repo, command="true"))
    w = start_worker(wt_env, jobs_url)
    _, err = w.communicate(timeout=90)
    assert w.returncode == 0, err
    assert "Traceback" not in err
    assert js.job(second)["status"] == "succeeded"
    for bad in (empty, no_kind):
        assert not bad.exists()
        aside = bad.with_name(bad.name + ".bad")
        assert aside.exists()  # kept: it may be the only record
        [line] = [x for x in err.splitlines() if str(bad) in x]
        assert "warning" in line and "set aside" in line
    assert "no header" in err and "kind" in err
    assert js.job(first)["status"] == "succeeded"  # published before: the attempts stand
    doc = subprocess.run(
        ["worldtrace", "doctor", "--store-only"], env=wt_env, capture_output=True, text=True
    )
    assert str(empty) + ".bad" in doc.stdout + doc.stderr


def test_a_journal_left_after_its_trajectory_was_published_is_said_so(
    docker_engine, store, wt_env, jobs_url, tmp_path, repo
):
    """A crash between publishing a trajectory and removing its journal: the next worker
    removes the journal and keeps the shard, and said it had "published" it."""
    import json

    from worldtrace.schemas.records import record_to_dict, to_jsonable

    job = submit(wt_env, jobs_url, tmp_path, slow_job(repo, command="true"))
    w = start_worker(wt_env, jobs_url)
    _, err = w.communicate(timeout=90)
    assert w.returncode == 0, err
    [shard] = (store.raw / "collect" / job).glob("*.parquet")
    before = shard.read_bytes()
    [t] = read_records(shard)
    d = to_jsonable(record_to_dict(t))
    end = {"kind": "end", "outcome": d.pop("outcome"), "ended_at": d.pop("ended_at")}
    turns = [{"kind": "turn", **turn} for turn in d.pop("turns")]
    lines = [{"kind": "header", **d}, *turns, end]
    journal = store.raw / "collect" / job / ".journals" / "t-e0-a1.journal.jsonl"
    journal.write_text("".join(json.dumps(x) + "\n" for x in lines))
    w = start_worker(wt_env, jobs_url)
    out, err = w.communicate(timeout=90)
    assert w.returncode == 0, err
    assert not journal.exists() and shard.read_bytes() == before
    assert f"removed the journal of {job}/t-e0 a1: its trajectory was published already" in out
    assert "from its journal" not in out
