"""Jobs hunt 1206x: workers, the job store and schedules. Found:

1. a worker said `requeued JOB/EP a3: process ... is gone` of an episode lost its third
   time (`MAX_LOST`), which is not queued again (nor is one of a cancelled job);
3. `stats` under `$WORLDTRACE_JOBS=postgresql://...` said `jobs: no queued job` while
   that store held queued jobs, and `doctor` checked the store's jobs.db alone;
5. a worker ran a job whose repository is its own store (checked at submit against the
   submitter's store only): its raw data became the episode's observations;
6. after a worker was killed, `doctor` and `gc` offered two commands for its journal, one
   of them a `collect --resume` that `collect` refuses for a queued job;
7. cron items of other dialects (`L`, `W`, `#`, `?`) were taken, as R and H are not;
9. `schedule: {every: 15}` said `Input should be a valid string`.

Real CLI processes, real SQLite and PostgreSQL job stores, real containers where a job
runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import MAX_LOST, open_job_store
from worldtrace.schemas import Store

from ..conftest import wait_until
from .conftest import fresh_schema
from .test_workers import mid_episode_job, running_mid_episode, start_worker, submit

ONE = {"name": "once", "sandbox": "terminal", "tasks": [{"id": "t", "actions": ["ls\n"]}]}
"""A job of one episode (never run here: its attempts are claimed by ghosts)."""
SECRET = "Hunter2Secret"


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def worker_once(env: dict[str, str], jobs_url: str) -> subprocess.CompletedProcess:
    """A worker that ends the ghosts' attempts at its start and exits: nothing queued."""
    return wt(env, "worker", "--jobs", jobs_url, "--poll", "0.5")


def lost_by_ghosts(js, job_id: str, times: int) -> None:
    """`times` attempts of `job_id`'s episode claimed by workers that never beat (their
    leases expired at once), all ended as lost but the last, which stays running."""
    for n in range(1, times + 1):
        js.claim(f"ghost{n}", -1.0)  # expired already (SQLite's clock ticks in ms)
        if n < times:
            [lease] = js.running()
            assert js.expire(lease, "test", only_if_expired=True)


# -- 1 --------------------------------------------------------------------------------
def test_an_episode_lost_its_last_time_is_not_said_requeued(js, jobs_url, wt_env):
    job_id = js.submit(JobSpec.from_dict(ONE))
    lost_by_ghosts(js, job_id, MAX_LOST)
    r = worker_once(wt_env, jobs_url)
    assert r.returncode == 0, r.stdout + r.stderr
    why = f"the lease of ghost{MAX_LOST} expired; lost {MAX_LOST} times: not queued again"
    said = [line.split(" ", 1)[1] for line in r.stdout.splitlines() if job_id in line]
    assert said == [f"ended     {job_id}/t-e0 a{MAX_LOST}: {why}"], r.stdout
    rows = js.job(job_id)["episode_rows"]
    assert [(e["attempt"], e["status"]) for e in rows] == [(n, "failed") for n in (1, 2, 3)]
    assert rows[-1]["error"] == f"worker lost: {why}"
    assert js.job(job_id)["status"] == "failed"


@pytest.mark.parametrize("jobs_url", ["sqlite"], indirect=True)  # the SQL is the same
def test_a_lost_attempt_of_a_cancelled_job_is_not_said_requeued(js, jobs_url, wt_env):
    job_id = js.submit(JobSpec.from_dict(ONE))
    lost_by_ghosts(js, job_id, 1)
    js.cancel(job_id)  # the running attempt is left to end
    r = worker_once(wt_env, jobs_url)
    assert r.returncode == 0, r.stdout + r.stderr
    why = "the lease of ghost1 expired; its job is cancelled: not queued again"
    assert f"ended     {job_id}/t-e0 a1: {why}" in r.stdout, r.stdout
    assert "requeued" not in r.stdout
    assert [e["attempt"] for e in js.job(job_id)["episode_rows"]] == [1]


# -- 3 --------------------------------------------------------------------------------
def test_stats_and_doctor_say_the_postgresql_job_store_they_do_not_read(
    pg_server, wt_env, tmp_path
):
    url = fresh_schema(pg_server).replace("postgres@", f"postgres:{SECRET}@", 1)  # trust: ignored
    job_id = open_job_store(url).submit(JobSpec.from_dict(ONE))
    env = dict(wt_env, WORLDTRACE_JOBS=url)
    shown = url.replace(SECRET, "***")
    jobs_db = Path(wt_env["WORLDTRACE_STORE"]) / "jobs.db"
    listed = json.loads(wt(env, "jobs", "list", "--json").stdout)["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]

    r = wt(env, "stats")
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.startswith("jobs:")]
    assert line == (
        f"jobs: none in {jobs_db}; the job store $WORLDTRACE_JOBS names, {shown}, is not "
        "read here: `worldtrace jobs list` lists its jobs"
    )
    notes = json.loads(wt(env, "stats", "--json").stdout)["notes"]
    assert f"jobs: from {jobs_db} only; the job store $WORLDTRACE_JOBS names, {shown}, is " \
        "not read here: `worldtrace jobs list` lists its jobs" in notes  # fmt: skip

    r = wt(env, "doctor", "--store-only", "--json")
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "job store"]
    assert check["ok"] and check["detail"] == f"{shown} ($WORLDTRACE_JOBS): answers, 1 job(s)"
    assert SECRET not in r.stdout + r.stderr
    port = pg_server.rsplit(":", 1)[1]
    down = url.replace(f":{port}/", ":1/", 1)  # port 1: nothing answers
    r = wt(dict(wt_env, WORLDTRACE_JOBS=down), "doctor", "--store-only", "--json")
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "job store"]
    assert r.returncode == 1 and check["problem"] and "Connection refused" in check["detail"]
    assert SECRET not in r.stdout + r.stderr


# -- 5 --------------------------------------------------------------------------------
@pytest.mark.docker
def test_a_worker_refuses_a_job_whose_repository_is_its_own_store(docker_engine, wt_env, tmp_path):
    """One job store, two stores: the job was checked against s7 at submit; a worker of
    s11 fails its attempt as the job's mistake (not retried), and runs nothing."""
    jobs = str(tmp_path / "jobs.db")
    s7, s11 = Store.at(tmp_path / "s7"), Store.at(tmp_path / "s11")
    s11.raw.mkdir(parents=True)
    (s11.raw / "notes.txt").write_text("the store's own data\n")
    job = {
        "name": "over", "retries": 2,
        "sandbox": {"kind": "swe", "repo": str(s11.raw), "docker": {"image": "worldtrace/busybox:latest"}},
        "tasks": [{"id": "t", "actions": [{"tool": "bash", "arguments": {"command": "ls"}}]}],
    }  # fmt: skip
    f = tmp_path / "over.yaml"
    f.write_text(yaml.safe_dump(job))
    r = wt(wt_env, "--store", str(s7.root), "--create", "jobs", "submit", "--jobs", jobs, str(f))
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    r = wt(wt_env, "--store", str(s11.root), "worker", "--jobs", jobs, "--poll", "0.5")
    assert r.returncode == 0, r.stdout + r.stderr
    why = (
        f"SandboxConfigError: the job does not hold on this host ({os.uname().nodename}): "
        f"sandbox.repo: {s11.raw} overlaps the store {s11.root}: refused"
    )
    [row] = open_job_store(jobs).job(job_id)["episode_rows"]  # not retried
    assert (row["status"], row["error"]) == ("failed", why)
    assert f"finished  {job_id}/t-e0 a1: failed" in r.stdout and why in r.stdout, r.stdout
    assert not (s11.raw / "collect").exists()  # nothing ran, nothing was recorded


# -- 6 --------------------------------------------------------------------------------
@pytest.mark.docker
def test_a_killed_workers_journal_is_given_the_one_command_that_works(
    docker_engine, store, wt_env, tmp_path, repo
):
    jobs_url = str(store.jobs_db)
    js = open_job_store(jobs_url)
    job_id = submit(wt_env, jobs_url, tmp_path, mid_episode_job(repo, episodes=1))
    a = start_worker(wt_env, jobs_url, "--lease", "60")
    try:
        lease = wait_until(lambda: running_mid_episode(js, store, job_id), what="A mid-episode")
    finally:
        a.send_signal(signal.SIGKILL)
        a.communicate(timeout=30)
    journal = store.raw / "collect" / job_id / ".journals" / f"{lease.episode_id}-a1.journal.jsonl"
    assert journal.exists()

    [line] = [x for x in wt(wt_env, "gc", "--dry-run", "--no-containers").stdout.splitlines()
              if str(journal) in x]  # fmt: skip
    assert line.startswith("kept") and "its job is a queued job: the next `worldtrace worker` " \
        "publishes it or drops it, as its attempt ended" in line, line  # fmt: skip
    assert "collect" not in line.split(str(journal), 1)[1], line  # `collect` refuses it
    doc = wt(wt_env, "doctor", "--store-only").stdout.splitlines()
    [at] = [i for i, x in enumerate(doc) if str(journal) in x]
    fix = doc[at + 1].split("-> ", 1)[1]
    assert fix == "worldtrace worker (publishes or drops it, as its attempt ended)", doc
    # the command, as printed, does it: the lost attempt ends, its episode runs again
    r = subprocess.run(shlex.split(fix.split(" (")[0]), capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not journal.exists()
    assert js.job(job_id)["status"] == "succeeded"


# -- 7, 9 -----------------------------------------------------------------------------
def dry_run(wt_env: dict[str, str], tmp_path: Path, schedule: dict) -> subprocess.CompletedProcess:
    f = tmp_path / "sch.yaml"
    f.write_text(yaml.safe_dump({**ONE, "schedule": schedule}))
    return wt(wt_env, "jobs", "submit", "--dry-run", str(f))


OTHER_ITEMS = "write the field with numbers, names, ranges (a-b), steps (/n) and lists (a,b)"


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("0 0 L * *", f"day-of-month L is croniter's last day or weekday (L), an item standard cron has not: {OTHER_ITEMS}"),
        ("0 0 * * 5L", f"day-of-week 5L is croniter's last day or weekday (L), an item standard cron has not: {OTHER_ITEMS}"),
        ("0 0 15W * *", f"day-of-month 15W is the nearest weekday (W) of Quartz, an item standard cron has not: {OTHER_ITEMS}"),
        ("0 0 * * 1#2", f"day-of-week 1#2 is croniter's Nth weekday of the month (#), an item standard cron has not: {OTHER_ITEMS}"),
        # croniter said this one `never matches`: its # does not mix with a day of month
        ("0 0 15 * 1#2", f"day-of-week 1#2 is croniter's Nth weekday of the month (#), an item standard cron has not: {OTHER_ITEMS}"),
        ("0 0 ? * *", "day-of-month ? is Quartz's no specific value (?), an item standard cron has not: write *"),
    ],
)  # fmt: skip
def test_cron_items_standard_cron_has_not_are_refused(wt_env, tmp_path, cron, said):
    r = dry_run(wt_env, tmp_path, {"cron": cron})
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines() == [f"{tmp_path / 'sch.yaml'}:4: schedule.cron: {cron!r}: {said}"]


def test_cron_names_are_not_taken_for_other_items(wt_env, tmp_path):
    """`jul` holds an L and `wed` a W: names stay names."""
    r = dry_run(wt_env, tmp_path, {"cron": "0 0 * jul-aug wed/2"})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("every", "said"),
    [
        (15, "15 has no unit: write a whole number and its unit, as 15m (or 15s, 15h, 15d)"),
        (1.5, "1.5 has no unit: write a whole number and its unit, e.g. 30s, 15m, 2h, 1d"),
    ],
)
def test_an_interval_without_its_unit_says_how_to_write_it(wt_env, tmp_path, every, said):
    r = dry_run(wt_env, tmp_path, {"every": every})
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"{tmp_path / 'sch.yaml'}:4: schedule.every: {said}"]


def test_worker_help_says_the_most_concurrency(wt_env):
    from worldtrace.collectors.worker import MAX_CONCURRENCY

    text = " ".join(wt(wt_env, "worker", "--help").stdout.split())
    assert f"own sandboxes (at most {MAX_CONCURRENCY})." in text
