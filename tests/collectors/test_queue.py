"""The job store and in-process workers: retries, cancel, leases, ownership, priorities,
lost attempts, worker failures; on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from click.testing import CliRunner
from worldtrace.collectors.episode import attempt_episode
from worldtrace.collectors.jobs import JobSpec, journal_path
from worldtrace.collectors.jobstore import MAX_LOST, open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig
from worldtrace.schemas import read_records
from worldtrace.schemas.views import connect

from worldtrace.cli import cli

from ..conftest import wait_until

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


def slow_job(repo, episodes: int = 1, steps: int = 1, command: str = "sleep 2") -> dict:
    """Episodes of `sleep 2` steps in the lightest sandbox (busybox, one-shot commands)."""
    step = {"tool": "bash", "arguments": {"command": command}}
    return {
        "name": "slow",
        "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"image": "worldtrace/busybox:latest", "warm": 2}},
        "episodes": episodes,
        "tasks": [{"id": "t", "actions": [step] * steps}],
    }  # fmt: skip


def statuses(js, job_id):
    return sorted(
        (e["episode_id"], e["attempt"], e["status"]) for e in js.job(job_id)["episode_rows"]
    )


def published(store, job_id):
    return sorted((store.raw / "collect" / job_id).glob("*.parquet"))


@pytest.mark.docker
def test_worker_runs_retries_and_records_everything(docker_engine, store, js, jobs_url):
    job_id = js.submit(JobSpec.from_dict(JOB))
    stats = Worker(js, store.raw, WorkerConfig(concurrency=2)).run()
    assert (stats.run, stats.failed, stats.errors) == (6, 4, [])
    assert statuses(js, job_id) == [
        ("broken-e0", 1, "failed"), ("broken-e0", 2, "failed"), ("broken-e1", 1, "failed"), ("broken-e1", 2, "failed"),
        ("ok-e0", 1, "succeeded"), ("ok-e1", 1, "succeeded"),
    ]  # fmt: skip
    job = js.job(job_id)
    assert (job["status"], job["succeeded"], job["failed"]) == ("partial", 2, 2)
    rows = job["episode_rows"]  # in the job file's order
    assert [r["episode_id"] for r in rows] == ["ok-e0", "ok-e1"] + ["broken-e0"] * 2 + [
        "broken-e1"
    ] * 2
    assert "task setup failed (4)" in rows[2]["error"]
    trajs = list(read_records(store.raw))
    assert len(trajs) == 6  # every attempt, one file each
    assert [p.name for p in published(store, job_id)][:2] == [
        "broken-e0-a1.parquet",
        "broken-e0-a2.parquet",
    ]
    assert {t.source.job_id for t in trajs} == {job_id}
    assert js.retry(job_id) == 2
    assert Worker(js, store.raw).run().run == 2
    assert [s for s in statuses(js, job_id) if s[1] == 3] == [
        ("broken-e0", 3, "failed"),
        ("broken-e1", 3, "failed"),
    ]
    if jobs_url.endswith("jobs.db"):  # the DuckDB views read the SQLite store
        con = connect(store)
        assert con.execute("SELECT status, episodes, succeeded, failed FROM jobs").fetchall() == [
            ("partial", 4, 2, 2)
        ]
        joined = "SELECT count(*) FROM episodes e JOIN raw_trajectories r USING (trajectory_id)"
        assert con.execute(joined).fetchone()[0] >= 8


@pytest.mark.docker
def test_a_retry_with_nothing_to_retry_changes_nothing(docker_engine, store, js, repo):
    """Found: `jobs retry` of a finished job with no failed episode said "nothing to
    retry" and moved the job's finished_at to now (the job's status was recomputed)."""
    job_id = js.submit(JobSpec.from_dict(slow_job(repo, command="true")))
    assert Worker(js, store.raw).run().run == 1
    before = js.job(job_id)
    assert before["status"] == "succeeded" and before["finished_at"]
    assert js.retry(job_id) == 0
    after = js.job(job_id)
    assert (after["status"], after["finished_at"]) == ("succeeded", before["finished_at"])


def test_cancel_keeps_queued_episodes_from_running(store, js):
    job_id = js.submit(JobSpec.from_dict(JOB))
    assert js.cancel(job_id) == 4
    assert Worker(js, store.raw).run().run == 0
    assert js.job(job_id)["status"] == "cancelled"
    assert {s for _, _, s in statuses(js, job_id)} == {"cancelled"}


def test_claims_follow_priority_then_age(js):
    low = js.submit(JobSpec.from_dict({**JOB, "name": "low"}))
    high = js.submit(JobSpec.from_dict({**JOB, "name": "high", "priority": 5}))
    order = [js.claim("w", 60) for _ in range(8)]
    assert [c.job_id for c in order] == [high] * 4 + [low] * 4
    assert [c.episode_id for c in order[:4]] == ["ok-e0", "ok-e1", "broken-e0", "broken-e1"]
    assert js.claim("w", 60) is None


def test_a_lost_lease_cannot_finish_and_a_poison_episode_stops(js):
    job_id = js.submit(JobSpec.from_dict({**JOB, "episodes": 1, "tasks": JOB["tasks"][:1]}))
    for n in range(1, MAX_LOST + 1):
        claim = js.claim(f"w{n}", -1.0)  # expired already (SQLite's clock ticks in ms)
        assert claim.attempt == n
        [lease] = js.running()
        assert lease.expired and lease.token == claim.token
        assert js.expire(lease, "test", only_if_expired=True)
        assert not js.finish(claim, "succeeded", "t", None, 0)  # the old owner is fenced off
        assert not js.release(claim) and js.renew([claim.token], 60) == set()
    assert js.claim("w", 60) is None  # lost MAX_LOST times: not queued again
    rows = js.job(job_id)["episode_rows"]
    assert [(r["attempt"], r["status"]) for r in rows] == [(n, "failed") for n in range(1, 4)]
    assert [r["error"] for r in rows] == ["worker lost: test"] * 2 + [
        "worker lost: test; lost 3 times: not queued again"
    ]
    assert js.job(job_id)["status"] == "failed"


@pytest.mark.docker
def test_an_expired_lease_is_requeued_while_the_worker_runs(docker_engine, store, js, repo):
    job_id = js.submit(JobSpec.from_dict(slow_job(repo, command="true")))
    ghost = js.claim("ghost-on-another-host", 1.5)  # no heartbeat will ever come
    stats = Worker(js, store.raw, WorkerConfig(lease=2.0, heartbeat=0.25)).run()
    rows = js.job(job_id)["episode_rows"]
    assert stats.run == 1, rows  # a CI run (12-07) ran 2, one failed: its error, next time
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "failed"), (2, "succeeded")]
    assert rows[0]["error"] == "worker lost: the lease of ghost-on-another-host expired"
    assert ghost.attempt == 1
    assert [p.name for p in published(store, job_id)] == ["t-e0-a2.parquet"]


@pytest.mark.docker
@pytest.mark.parametrize("jobs_url", ["sqlite"], indirect=True)  # the SQL is the same
def test_a_worker_that_lost_its_lease_does_not_publish(docker_engine, store, js, repo):
    """A stalls (no heartbeat within its lease); B takes the episode over and redoes it;
    A's late result is discarded: one published trajectory."""
    job_id = js.submit(JobSpec.from_dict(slow_job(repo)))
    a = Worker(js, store.raw, WorkerConfig(lease=1.0, heartbeat=100.0))
    ta = threading.Thread(target=a.run)
    ta.start()
    wait_until(lambda: js.running(), what="A's claim")
    b = Worker(js, store.raw, WorkerConfig(lease=5.0, heartbeat=0.25))
    b.run()
    ta.join(timeout=60)
    assert (a.stats.lost, a.stats.run, b.stats.run) == (1, 0, 1)
    assert statuses(js, job_id) == [("t-e0", 1, "failed"), ("t-e0", 2, "succeeded")]
    [t] = read_records(store.raw)
    assert (t.source.attempt, t.outcome.status) == (2, "success")
    assert not list(store.raw.rglob("*.journal.jsonl"))


@pytest.mark.docker
def test_a_sandbox_whose_image_is_missing_fails_its_attempt_once(docker_engine, store, js):
    """Queued without the image check (`JobSpec.from_dict`, no `check_store`): the worker
    fails the attempt as the job's mistake, not retried, and goes on."""
    job = {**JOB, "sandbox": {"kind": "terminal", "docker": {"image": "worldtrace/absent:1"}}}
    job_id = js.submit(JobSpec.from_dict({**job, "episodes": 1, "tasks": JOB["tasks"][:1]}))
    stats = Worker(js, store.raw).run()
    assert (stats.run, stats.failed, stats.errors) == (1, 1, [])
    rows = js.job(job_id)["episode_rows"]
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "failed")]
    assert rows[0]["error"].startswith(
        "SandboxConfigError: cannot create the sandbox: image 'worldtrace/absent:1'"
    ), rows[0]["error"]
    assert [t.outcome.status for t in read_records(store.raw)] == ["error"]


@pytest.mark.docker
def test_a_finished_attempt_left_unpublished_is_published_once(docker_engine, store, js):
    """A worker crashed between recording the outcome and publishing: the next worker
    publishes the journal under the attempt's key and does not run the episode again."""
    spec = JobSpec.from_dict({**JOB, "episodes": 1, "tasks": JOB["tasks"][:1]})
    job_id = js.submit(spec)
    claim = js.claim("crashed-after-finish", 60)
    journal = journal_path(store.raw, job_id, claim.episode_id, claim.attempt)
    sandbox = spec.build_sandbox()
    try:
        t = attempt_episode(
            spec, spec.episode(claim.episode_id), sandbox, journal.parent, job_id, 1, store.raw
        )
    finally:
        sandbox.close()
    assert js.finish(claim, "succeeded", t.trajectory_id, None, 0)  # ...and then it died
    assert Worker(js, store.raw).run().run == 0
    assert [p.name for p in published(store, job_id)] == ["ok-e0-a1.parquet"]
    assert [x.trajectory_id for x in read_records(store.raw)] == [t.trajectory_id]
    assert not journal.exists()


# -- the command line -------------------------------------------------------------------
def invoke(store, *args):
    return CliRunner().invoke(cli, ["--store", str(store.root), *args])


BAD = {
    "sandbox: nonexistent": "job.yaml:2: sandbox.kind: unknown sandbox kind 'nonexistent'",
    "sandbox: {kind: terminal, docker: {bogus: 1}}": "job.yaml:2: sandbox.docker.bogus: unknown key",
    "sandbox: {kind: terminal, docker: {step_timeout: -5}}": "job.yaml:2: sandbox.docker.step_timeout: Input should be greater than 0",
    "max_turns: -1": "job.yaml:2: max_turns: Input should be greater than or equal to 1",
    "sandbox: {kind: terminal, docker: {pids_limit: -1}}": "job.yaml:2: sandbox.docker.pids_limit: Input should be greater than or equal to 16",
    'sandbox: {kind: terminal, docker: {memory: "0"}}': "job.yaml:2: sandbox.docker.memory: memory '0' is below the floor of 16m",
    "sandbox: {kind: terminal, docker: {cpus: 0}}": "job.yaml:2: sandbox.docker.cpus: Input should be greater than 0",
    "sandbox: {kind: swe, repo: /var/run}": "job.yaml:2: sandbox.repo: '/var/run' resolves to /run, under /run: refused",
}


@pytest.mark.parametrize("line", list(BAD))
@pytest.mark.parametrize("dry_run", [False, True])
def test_jobs_submit_refuses_bad_files_naming_line_and_key(store, tmp_path, line, dry_run):
    f = tmp_path / "job.yaml"
    f.write_text(f"name: x\n{line}\ntasks: [{{id: t, actions: ['ls\\n']}}]\n")
    r = invoke(store, "jobs", "submit", *(["--dry-run"] if dry_run else []), str(f))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"{f.parent}/{BAD[line]}" in r.stderr
    assert r.stdout == ""  # nothing queued, nothing listed
    assert invoke(store, "jobs", "list").stdout.startswith("no jobs")


def test_jobs_submit_refuses_a_repository_inside_the_store(store, tmp_path):
    inside = store.root / "repo"
    inside.mkdir(parents=True)
    f = tmp_path / "job.yaml"
    bash = "{tool: bash, arguments: {command: ls}}"
    f.write_text(
        f"name: x\nsandbox: {{kind: swe, repo: {inside}}}\ntasks: [{{id: t, actions: [{bash}]}}]\n"
    )
    r = invoke(store, "jobs", "submit", "--dry-run", str(f))
    assert r.exit_code == 1, r.output
    assert r.stderr == f"{f}:2: sandbox.repo: {inside} overlaps the store {store.root}: refused\n"


def test_jobs_submit_dry_run_lists_episodes_and_queues_nothing(store, tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("name: d\nepisodes: 2\nseed: 7\ntasks: [{id: t, actions: ['ls\\n', 'pwd\\n']}]\n")
    r = invoke(store, "jobs", "submit", "--dry-run", str(f))
    assert r.exit_code == 0, r.output
    spec = JobSpec.load(f)
    rows = [line.replace("│", " ").split() for line in r.stdout.splitlines() if "│" in line]
    assert rows == [["t", e.episode_id, str(e.seed), "2"] for e in spec.expand()]
    assert "d: 2 episode(s)" in r.stdout
    assert invoke(store, "jobs", "list").stdout.startswith("no jobs")


def test_worker_refuses_concurrency_zero(store):
    r = invoke(store, "worker", "--concurrency", "0")
    assert r.exit_code == 2
    assert "concurrency: Input should be greater than or equal to 1" in r.stderr


@pytest.mark.docker
def test_a_worker_failure_ends_its_claim_and_the_exit_status(docker_engine, store, tmp_path):
    """A job this worker cannot run (its sandbox kind is not installed on this host): the
    attempt fails with the reason, the worker exits 1 with one line and no traceback."""
    f = tmp_path / "job.yaml"
    f.write_text("name: k\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    job_id = invoke(store, "jobs", "submit", str(f)).stdout.strip()
    with sqlite3.connect(store.jobs_db) as c:
        c.execute("UPDATE jobs SET spec_json = replace(spec_json, '\"terminal\"', '\"gone\"')")
    r = invoke(store, "worker")
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    line = f"error: {job_id}/t-e0 a1: worker error: ConfigError: sandbox.kind: unknown sandbox kind 'gone'"
    assert line in r.stderr
    [row] = open_job_store(store.jobs_db).job(job_id)["episode_rows"]
    assert row["status"] == "failed" and "unknown sandbox kind 'gone'" in row["error"]


@pytest.mark.docker
def test_jobs_cli(docker_engine, store, tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("name: q\ntasks: [{id: ok, actions: ['echo hi\\n']}]\n")
    job_id = invoke(store, "jobs", "submit", str(f)).stdout.strip()
    assert job_id.startswith("q-")
    assert "queued" in invoke(store, "jobs", "list").stdout
    r = invoke(store, "worker", "--concurrency", "2")
    assert r.exit_code == 0, r.output
    assert f"started   {job_id}/ok-e0 a1" in r.stdout
    assert f"finished  {job_id}/ok-e0 a1: succeeded (1 turns" in r.stdout
    assert "1 episode attempt(s) run (0 failed)" in r.stdout
    assert "succeeded" in invoke(store, "jobs", "show", job_id).stdout


@pytest.mark.docker
def test_a_queued_job_that_no_longer_holds_fails_its_attempt_and_the_worker_goes_on(
    docker_engine, store, js, tmp_path
):
    """Found (review of 12-04): a queued SWE job whose repository was moved away ended
    the worker (`worker error: ConfigError: sandbox.repo ...`, exit 1, even with
    --forever); the next job stayed queued. Now the attempt fails with the reason and
    the queue goes on; not retried (hunt 1205d): the retry, first in line, was claimed at
    once by this same worker and failed alike, as a SandboxConfigError at reset is not."""
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    for r in (gone, kept):
        (r / "pkg").mkdir(parents=True)
    first = js.submit(JobSpec.from_dict({**slow_job(gone, command="true"), "name": "first"}))
    second = js.submit(JobSpec.from_dict({**slow_job(kept, command="true"), "name": "second"}))
    gone.rename(tmp_path / "elsewhere")
    stats = Worker(js, store.raw, WorkerConfig()).run()
    assert stats.errors == []
    [row] = js.job(first)["episode_rows"]  # retries: 1, none used
    assert row["status"] == "failed" and row["error"].startswith("SandboxConfigError: ")
    assert "does not hold on this host" in row["error"] and "is not a directory" in row["error"]
    assert statuses(js, second) == [("t-e0", 1, "succeeded")]


def test_a_job_id_prefix_is_text_not_a_pattern(js):
    """Found (review of 12-04): prefixes were matched with LIKE: `jobs cancel data_`
    cancelled `data-1-...` (`_` is any character) and `NIGHTLY` matched `Nightly-...`
    (SQLite's LIKE ignores case); with `data-1-...` and `data_1-...` both there,
    `jobs show data_1` was refused as ambiguous."""
    tasks = [{"id": "t", "actions": ["ls\n"]}]
    dash = js.submit(JobSpec.from_dict({"name": "data-1", "tasks": tasks}))
    under = js.submit(JobSpec.from_dict({"name": "data_1", "tasks": tasks}))
    nightly = js.submit(JobSpec.from_dict({"name": "Nightly", "tasks": tasks}))
    assert js.job("data_")["job_id"] == under and js.job("data_1")["job_id"] == under
    assert js.job("data-")["job_id"] == dash
    assert js.job("data") is None  # both: ambiguous
    assert js.job("NIGHTLY") is None and js.job("Night")["job_id"] == nightly
    assert js.job(dash)["job_id"] == dash


def test_a_job_cancelled_while_an_episode_runs_keeps_when_it_was_cancelled(js):
    """Found (review of 12-04): `jobs cancel` during a run set `finished_at`; when the
    running episode then ended, `jobs list` showed it blank."""
    job_id = js.submit(JobSpec.from_dict({**JOB, "episodes": 1, "tasks": JOB["tasks"][:1]}))
    claim = js.claim("w", 60)
    js.cancel(job_id)
    cancelled = js.job(job_id)
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"]
    assert js.finish(claim, "succeeded", "t", None, 0)
    after = js.job(job_id)
    assert (after["status"], after["finished_at"]) == ("cancelled", cancelled["finished_at"])
