"""`jobs cancel|retry|unschedule` of a name that matches nothing, on a store without a
job store: found (hunt of 12-04): each said `no job matches` (or `no schedule named`)
and left a new, empty `jobs.db` behind, which a look (`jobs list`, the views) never
makes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store

from worldtrace.cli import cli


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["jobs", "cancel", "abc"], "Error: no job matches 'abc' (`worldtrace jobs list` shows the ids)"),
        (["jobs", "retry", "abc"], "Error: no job matches 'abc' (`worldtrace jobs list` shows the ids)"),
        (["jobs", "unschedule", "abc"],
         "Error: no schedule named 'abc' (`worldtrace jobs list` shows the schedules)"),
    ],
)  # fmt: skip
def test_nothing_matched_makes_no_job_store(store, args, said):
    r = CliRunner().invoke(cli, ["--store", str(store.root), *args])
    assert (r.exit_code, r.stderr.strip()) == (1, said)
    assert sorted(p.name for p in store.root.iterdir()) == []


def test_what_matches_is_still_cancelled_retried_and_unscheduled(store):
    js = open_job_store(store.jobs_db)
    tasks = [{"id": "t", "actions": ["ls\n"]}]
    job_id = js.submit(JobSpec.from_dict({"name": "once", "tasks": tasks}))
    js.save_schedule(
        JobSpec.from_dict({"name": "nightly", "schedule": {"every": "1h"}, "tasks": tasks}), 0.0
    )
    run = CliRunner().invoke
    r = run(cli, ["--store", str(store.root), "jobs", "cancel", "once"])
    assert (r.exit_code, r.stdout.strip()) == (
        0,
        f"{job_id}: cancelled (queued before); 1 queued episode(s) dropped",
    )
    assert js.job(job_id)["status"] == "cancelled"
    r = run(cli, ["--store", str(store.root), "jobs", "retry", "once"])
    assert (r.exit_code, r.stdout.strip()) == (0, f"{job_id}: 1 episode(s) queued again")
    assert js.job(job_id)["status"] == "queued"
    r = run(cli, ["--store", str(store.root), "jobs", "unschedule", "nightly"])
    assert (r.exit_code, r.stdout.strip()) == (0, "schedule nightly: removed")
    assert js.schedules() == []
