"""Found (jobs hunt 1204f): a damaged `jobs.db` made every `jobs` command fail and
`stats` leave the job store out, while `worldtrace doctor` said every check passed: it
did not look at the job store. It now checks that it reads (its tables and SQLite's
`quick_check`), naming the fix a damaged or locked one needs (`views.job_store_fix`).

Real parts: a real SQLite job store (`open_job_store`), the real CLI in process."""

from __future__ import annotations

import json

from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store

from .test_job_store_damage_1204f import DAMAGED, LOCKED, locked  # noqa: F401  (fixture)
from .test_query import run_cli


def job_checks(store) -> list[dict]:
    r = run_cli(store, "doctor", "--store-only", "--json")
    return [c for c in json.loads(r.stdout)["checks"] if c["name"] == "job store"]


def test_doctor_checks_the_job_store(store):
    assert job_checks(store) == []  # no job store: nothing to check
    js = open_job_store(store.jobs_db)
    js.submit(JobSpec.from_dict({"name": "once", "tasks": [{"id": "t", "actions": ["ls\n"]}]}))
    del js
    [ok] = job_checks(store)
    assert ok["ok"] and ok["detail"] == f"{store.jobs_db}: reads"
    data = bytearray(store.jobs_db.read_bytes())
    data[100:4096] = b"x" * 3996  # the first page's cells: a disk fault, a bad copy
    store.jobs_db.write_bytes(bytes(data))
    [bad] = job_checks(store)
    assert not bad["ok"] and bad["detail"].startswith(f"{store.jobs_db}: ")
    assert bad["fix"].startswith(DAMAGED)


def test_doctor_says_a_locked_job_store_is_waited_for(locked):  # noqa: F811
    [check] = job_checks(locked)
    assert not check["ok"] and "locked" in check["detail"] and check["fix"].startswith(LOCKED)
