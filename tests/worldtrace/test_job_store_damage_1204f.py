"""A `jobs.db` that does not read says what to do, and a locked one and a damaged one
say different things: SQLite's `file is not a database` or `database is locked` alone
named no way on, from `jobs list`, `jobs submit`, `scheduler` or the `jobs` view."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store

JOB = """\
name: once
sandbox:
  kind: terminal
  docker: {image: worldtrace/busybox:latest}
tasks:
  - id: t
    actions: ["ls\\n"]
"""
DAMAGED = "the job store is damaged: its jobs and schedules cannot be read"
LOCKED = "another process holds a lock on it"


def wt(env, *args, check_rc=None):
    r = subprocess.run(["worldtrace", *args], env=env, capture_output=True, text=True)
    if check_rc is not None:
        assert r.returncode == check_rc, (r.stdout, r.stderr)
    return r


@pytest.fixture
def damaged(tmp_path, wt_env) -> Path:
    """A store whose jobs.db was overwritten (a bad copy, a disk fault)."""
    (tmp_path / "job.yaml").write_text(JOB)
    wt(wt_env, "jobs", "submit", str(tmp_path / "job.yaml"), check_rc=0)
    db = Path(wt_env["WORLDTRACE_STORE"]) / "jobs.db"
    db.write_bytes(b"\x17not sqlite at all\n" * 400)
    return db


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (["jobs", "list"], "Error: cannot read the job store {db}: file is not a database; "),
        (["jobs", "show", "once"], "Error: cannot read the job store {db}: file is not a database; "),
        (["jobs", "submit", "JOB"], "Error: cannot open the job store {db}: file is not a database; "),
        (["jobs", "cancel", "once"], "Error: cannot read the job store {db}: file is not a database; "),
        (["scheduler", "--once"], "Error: cannot open the job store {db}: file is not a database; "),
    ],
)  # fmt: skip
def test_a_damaged_job_store_says_how_to_start_again(tmp_path, wt_env, damaged, args, prefix):
    args = [str(tmp_path / "job.yaml") if a == "JOB" else a for a in args]
    r = wt(wt_env, *args, check_rc=1)
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(prefix.format(db=damaged)), line
    assert DAMAGED in line and LOCKED not in line
    assert f"`cd {shlex.quote(str(damaged.parent))} && mkdir jobs-damaged && mv jobs.db* " in line
    assert line.count(str(damaged)) == 1  # named once
    assert "submit the job files again" in line


def test_the_way_on_works(tmp_path, wt_env, damaged):
    """Doing what the line says (move it aside, submit again) gives a working store."""
    line = wt(wt_env, "jobs", "list", check_rc=1).stderr
    command = line[line.index("`cd ") + 1 : line.index("`:")]
    subprocess.run(command, shell=True, check=True)
    aside = damaged.parent / "jobs-damaged"
    assert sorted(p.name for p in aside.iterdir()) == ["jobs.db"]
    assert not damaged.exists()
    job_id = wt(wt_env, "jobs", "submit", str(tmp_path / "job.yaml"), check_rc=0).stdout.strip()
    assert job_id.startswith("once-")
    assert job_id in wt(wt_env, "jobs", "list", check_rc=0).stdout


def test_the_jobs_view_names_the_damage_and_the_way_on(wt_env, damaged):
    r = wt(wt_env, "query", "SELECT count(*) AS n FROM jobs", "--format", "csv", check_rc=0)
    assert r.stdout == "n\n0\n"
    [warning] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warning.startswith(f"warning: skipped {damaged}: file is not a database; {DAMAGED}")


def test_a_job_store_without_its_tables_says_so(wt_env):
    """An empty `jobs.db` (or another program's database): no job store tables."""
    db = Path(wt_env["WORLDTRACE_STORE"]) / "jobs.db"
    sqlite3.connect(db).close()
    db.touch()
    line = wt(wt_env, "jobs", "list", check_rc=1).stderr.strip()
    assert line.startswith(f"Error: cannot read the job store {db}: no such table: ")
    assert "it holds no job store tables" in line and DAMAGED not in line


@pytest.fixture
def locked(store):
    """A job store another connection holds an exclusive lock on until released."""
    js = open_job_store(store.jobs_db)
    js.submit(JobSpec.from_dict({"name": "once", "tasks": [{"id": "t", "actions": ["ls\n"]}]}))
    c = sqlite3.connect(store.jobs_db, isolation_level=None, check_same_thread=False)
    c.execute("PRAGMA locking_mode = EXCLUSIVE")
    c.execute("BEGIN EXCLUSIVE")
    c.execute("UPDATE jobs SET name = name")
    yield store
    c.execute("ROLLBACK")
    c.close()


def test_a_locked_job_store_says_to_wait_not_that_it_is_damaged(locked):
    """The `jobs` view waits SQLite's 5 s, then leaves the job store out with a line
    that says nothing is damaged and what to do."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    r = CliRunner().invoke(
        cli, ["--store", str(locked.root), "query", "SELECT count(*) FROM jobs", "--format", "csv"]
    )
    assert r.exit_code == 0, r.output
    [warning] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warning.startswith(f"warning: skipped {locked.jobs_db}: database is locked; {LOCKED}")
    assert "nothing is damaged: run the command again when it ends" in warning
    assert DAMAGED not in warning


def test_stats_does_not_say_no_job_of_a_job_store_it_could_not_read(wt_env, damaged):
    """`stats` said `jobs: no queued job (jobs submit)` under the warning that the job
    store did not read: it may hold many."""
    r = wt(wt_env, "stats", check_rc=0)
    assert r.stdout.splitlines()[-1] == (
        "jobs: the job store did not read (the warning above says why and what to do): its "
        "jobs are not counted"
    )
    assert f"warning: skipped {damaged}: file is not a database; {DAMAGED}" in r.stderr
    doc = json.loads(wt(wt_env, "stats", "--json", check_rc=0).stdout)
    assert doc["sections"]["jobs"] == []
    assert doc["notes"][-1] == (
        "jobs: the job store did not read (the warning on stderr says why and what to do): "
        "its jobs are not counted"
    )
    damaged.unlink()
    assert (
        wt(wt_env, "stats", check_rc=0)
        .stdout.splitlines()[-1]
        .startswith("jobs: no queued job (`jobs submit`)")
    )


def test_a_job_store_named_with_jobs_is_the_file_named(tmp_path, wt_env, damaged):
    """`jobs list --jobs OTHER.db` of a damaged job store named the store's own jobs.db
    (which may be fine, or not be there) as the file at fault."""
    other = Path(wt_env["WORLDTRACE_STORE"]).parent / "elsewhere"
    other.mkdir()
    env = {**wt_env, "WORLDTRACE_STORE": str(other)}
    for args in (["jobs", "list"], ["jobs", "show", "x"], ["jobs", "retry", "x"]):
        line = wt(env, *args, "--jobs", str(damaged), check_rc=1).stderr.strip()
        assert line.startswith(f"Error: cannot read the job store {damaged}: file is not a "), line
        assert str(other) not in line
