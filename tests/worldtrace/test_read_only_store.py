"""A store on a read-only mount (a dataset shared with a training team, a snapshot):
every command that only looks works on it, and sees what is there."""

from __future__ import annotations

import json
import subprocess

from ..conftest import SUDO
from .test_interrupts_1203b import wt


def test_a_read_only_store_lists_its_jobs_and_the_views_see_them(tmpfs, tmp_path, wt_env):
    """Found: `jobs list` on a read-only store failed (`cannot open the job store
        .../jobs.db: unable to open database file`: the job store was opened to be made and
        migrated), and the views' `jobs` table read empty with a warning: a WAL database
        opened `mode=ro` needs its `-shm` file made beside it. `redact --check` called
        the job store unreadable for the same reason; `jobs cancel` said only SQLite's "unable
    to open database file"."""
    env = dict(wt_env, WORLDTRACE_STORE=str(tmpfs / "store"))
    job = tmp_path / "job.yaml"
    job.write_text("name: shared\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    r = wt(env, "--create", "jobs", "submit", str(job))
    assert r.returncode == 0, r.stderr
    job_id = json.loads(wt(env, "jobs", "list", "--json").stdout)["jobs"][0]["job_id"]
    # a look leaves the job store as it found it: no -wal or -shm file beside it (one
    # opened `mode=ro` left both), so here SQLite would have to make them
    assert [p.name for p in (tmpfs / "store").glob("jobs.db*")] == ["jobs.db"]
    subprocess.run([*SUDO, "mount", "-o", "remount,ro", str(tmpfs)], check=True)

    r = wt(env, "jobs", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert [j["job_id"] for j in json.loads(r.stdout)["jobs"]] == [job_id]
    r = wt(env, "jobs", "show", "shared", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["job_id"] == job_id
    r = wt(env, "query", "SELECT job_id, episodes FROM jobs", "--format", "json")
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert json.loads(r.stdout) == [{"job_id": job_id, "episodes": 1}]
    r = wt(env, "jobs", "cancel", "shared")  # a change: refused, with the reason
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"Error: cannot open the job store {tmpfs / 'store' / 'jobs.db'}: "
        f"{tmpfs / 'store'} is not writable (Read-only file system)"
    ], r.stderr
    r = wt(env, "redact", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.splitlines() == ["0 secret(s) found in 1 file(s)"]  # the job store


def test_looking_at_the_jobs_of_a_store_without_any_makes_no_job_store(wt_env, tmp_path):
    """`jobs list` is a look: on a store that never queued a job it says so and leaves
    no `jobs.db` behind (it made an empty one)."""
    r = wt(wt_env, "jobs", "list")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no jobs"
    assert not (tmp_path / "store" / "jobs.db").exists()
    r = wt(wt_env, "jobs", "show", "nothing")
    assert r.returncode == 1
    assert "no job matches 'nothing'" in r.stderr
    assert not (tmp_path / "store" / "jobs.db").exists()
