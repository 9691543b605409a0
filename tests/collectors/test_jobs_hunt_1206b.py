"""Hunt 1206g, job queue and scheduler: what a user met with the real CLI.

1. `--jobs sqlite://missing.db` (two slashes) or `Sqlite:///x.db` escaped the "no job
   store at ..." check: `scheduler --once` exited 0 making a new, empty job store.
2. `scheduler --grace 1e14` overflowed the scheduler's date arithmetic, and it blamed the
   schedule ("has no next run ... submit its job file again"), enqueueing nothing.
3. The reading commands failed on a job store of an older layout (`no such column:
   priority`; "it holds no job store tables" for one before `schedules`/`workers`).
4. A live `worker --lease 600` (a heartbeat every 150 s) vanished from `jobs list`, which
   judged every worker by a lease of 120 s; a worker with a shorter lease took it for dead
   and dropped the journal of its ended attempt.
5. A `docker.env` variable unset on the worker's host spent every retry in a fraction of a
   second: a configuration mistake, now one attempt, not retried.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import journal_path
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.scheduler import Scheduler, SchedulerConfig
from worldtrace.schemas.parsing import ConfigError
from worldtrace.schemas.views import job_store_fix

from ..conftest import wait_until
from .conftest import fresh_schema

JOB = Path(__file__).resolve().parents[2] / "examples" / "terminal-basics.yaml"


def wt(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)  # fmt: skip


def test_every_sqlite_address_is_checked_before_a_reading_command_makes_a_store(tmp_path, wt_env):
    cwd = tmp_path / "here"
    cwd.mkdir()
    for address, command in [
        ("sqlite://missing.db", ["scheduler", "--once"]),
        ("Sqlite:///missing.db", ["jobs", "list"]),
    ]:
        r = wt(wt_env, cwd, *command, "--jobs", address)
        assert r.returncode == 1, (address, r.stdout, r.stderr)
        assert "no job store at missing.db: check --jobs" in r.stderr, r.stderr
        assert "no jobs" not in r.stdout
    assert list(cwd.iterdir()) == []  # no new, empty job store
    open_job_store(cwd / "there.db").submit(JobSpec.load(JOB))
    r = wt(wt_env, cwd, "jobs", "list", "--json", "--jobs", "SQLITE://there.db")
    assert r.returncode == 0 and len(json.loads(r.stdout)["jobs"]) == 1, r.stderr


def test_a_huge_grace_or_poll_is_a_usage_error_naming_the_maximum(tmp_path, store, wt_env):
    for option, value, most in [("--grace", "1e14", "31622400"), ("--poll", "1e9", "3600")]:
        r = wt(wt_env, tmp_path, "scheduler", "--once", option, value)
        assert r.returncode == 2, (option, r.stdout, r.stderr)
        assert f"{option}: Input should be less than or equal to {most}" in r.stderr, r.stderr
        assert "has no next run" not in r.stderr
    with pytest.raises(ConfigError):  # a config built in Python is checked as well
        Scheduler(open_job_store(store.jobs_db), config=SchedulerConfig(grace=1e14))


OLD_LAYOUT = """
CREATE TABLE jobs (job_id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_json TEXT NOT NULL,
    status TEXT NOT NULL, episodes INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT);
CREATE TABLE episodes (job_id TEXT NOT NULL, episode_id TEXT NOT NULL, task_id TEXT NOT NULL,
    attempt INTEGER NOT NULL, status TEXT NOT NULL, error TEXT, trajectory_id TEXT, worker TEXT,
    heartbeat DOUBLE PRECISION, started_at TEXT, ended_at TEXT,
    PRIMARY KEY (job_id, episode_id, attempt));
INSERT INTO jobs VALUES ('old-12345678', 'old', '{}', 'failed', 1, 0, 1,
    '2024-01-01T00:00:00+00:00', NULL, '2024-01-01T00:01:00+00:00');
INSERT INTO episodes VALUES ('old-12345678', 'a-e0', 'a', 1, 'failed', 'boom', NULL, NULL,
    NULL, NULL, NULL);
"""


def test_reading_commands_read_an_older_job_store_as_it_stands(tmp_path, store, wt_env):
    db = store.jobs_db
    with sqlite3.connect(db) as c:
        c.executescript(OLD_LAYOUT)
    before = db.read_bytes()
    r = wt(wt_env, tmp_path, "jobs", "list", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(j["job_id"], j["priority"]) for j in doc["jobs"]] == [("old-12345678", 0)]
    assert doc["schedules"] == [] and doc["workers"] == []
    r = wt(wt_env, tmp_path, "jobs", "show", "old-1", "--json")
    assert r.returncode == 0, r.stderr
    [attempt] = json.loads(r.stdout)["attempts"]
    assert (attempt["attempt"], attempt["status"], attempt["error"]) == (1, "failed", "boom")
    assert db.read_bytes() == before  # a command that only looks changed nothing
    r = wt(wt_env, tmp_path, "jobs", "unschedule", "nightly")
    assert r.returncode == 1 and "no schedule named 'nightly'" in r.stderr, r.stderr
    r = wt(wt_env, tmp_path, "jobs", "retry", "old-1")  # writes: the store is migrated
    assert r.returncode == 0 and "1 episode(s) queued again" in r.stdout, r.stderr
    # what SQLite says of such a file is an older layout, not another program's database
    with sqlite3.connect(tmp_path / "older.db") as c:
        c.executescript(OLD_LAYOUT)
    fix = job_store_fix(tmp_path / "older.db", "no such table: schedules")
    assert "older layout" in fix and "another program" not in fix, fix


def test_a_worker_is_judged_by_its_own_lease(tmp_path, store, wt_env):
    """A live worker with a long lease, whose last beat is 200 s old (it beats every 150
    s): listed by `jobs list`, and alive to a worker with a 30 s lease, which keeps the
    journal of its ended attempt (its owner publishes or drops it)."""
    js = open_job_store(store.jobs_db)
    job = js.submit(JobSpec.load(JOB))  # ended before the worker starts: it claims nothing
    claim = js.claim("placeholder", 600)
    assert claim is not None and js.finish(claim, "failed", None, "boom", 0)
    long = subprocess.Popen(
        ["worldtrace", "worker", "--forever", "--lease", "600", "--poll", "3600"],
        env=wt_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        [w] = wait_until(lambda: js.workers(600), timeout=60, what="the worker registered")
        name = w["worker"]
        with sqlite3.connect(store.jobs_db) as c:  # the live worker's ended attempt
            c.execute("UPDATE episodes SET worker = ? WHERE job_id = ?", (name, job))
            # its last beat, 200 s ago
            c.execute("UPDATE workers SET heartbeat = heartbeat - 200 WHERE worker = ?", (name,))
        journal = journal_path(store.raw, job, claim.episode_id, claim.attempt)
        journal.parent.mkdir(parents=True)
        journal.write_text('{"kind": "header"}\n')
        r = wt(wt_env, tmp_path, "jobs", "list", "--json")
        assert r.returncode == 0, r.stderr
        assert [x["worker"] for x in json.loads(r.stdout)["workers"]] == [name]
        r = wt(wt_env, tmp_path, "worker", "--lease", "30")
        assert r.returncode == 0, r.stderr
        assert journal.exists(), r.stdout + r.stderr
    finally:
        long.send_signal(signal.SIGTERM)
        out, err = long.communicate(timeout=60)
    assert long.returncode == 0, out + err


VAR = "WT_HUNT_1206B_UNSET_HERE"


@pytest.mark.docker
def test_a_docker_env_variable_unset_on_the_worker_host_is_not_retried(
    tmp_path, wt_env, docker_engine
):
    job = tmp_path / "env.yaml"
    job.write_text(
        json.dumps(
            {
                "name": "envj",
                "sandbox": {
                    "kind": "terminal",
                    "docker": {"image": "worldtrace/busybox:latest", "env": [VAR]},
                },
                "retries": 2,
                "tasks": [{"id": "a", "actions": [f"echo ${VAR}\n"]}],
            }
        )
    )
    r = wt({**wt_env, VAR: "set where it was submitted"}, tmp_path, "jobs", "submit", str(job))
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.split()[0]
    here = {k: v for k, v in wt_env.items() if k != VAR}
    r = wt(here, tmp_path, "worker")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 episode attempt(s) run (1 failed)" in r.stdout, r.stdout
    r = wt(here, tmp_path, "jobs", "show", job_id, "--json")
    [attempt] = json.loads(r.stdout)["attempts"]
    assert attempt["status"] == "failed"
    assert attempt["error"] == (
        f"SandboxConfigError: docker.env names variables not set on this host: {VAR}"
    )
    assert os.environ.get(VAR) is None


def test_a_postgresql_store_without_the_workers_lease_gains_it(pg_server):
    """The lease each worker records is a column newer than a PostgreSQL store of the
    layout before it: added when the store opens, as SQLite's are."""
    import psycopg

    url = fresh_schema(pg_server)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "CREATE TABLE workers (worker TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER"
            " NOT NULL, process_start BIGINT, status TEXT NOT NULL, started_at TEXT NOT NULL,"
            " heartbeat DOUBLE PRECISION, stopped_at TEXT)"
        )
    js = open_job_store(url)
    js.register_worker("w", "elsewhere", 1, None, lease_s=600)
    [w] = js.workers(1)
    assert (w["worker"], w["lease"], w["gone"]) == ("w", 600, 0)
