"""A worker that exits at once claims nothing more. Found: the CLI's second SIGTERM can
come before the first one's `stop()` reached the worker (its "stopping" line is printed
first); `_abandon` requeued the running attempts, the slots, never stopped, claimed them
again and started their containers while the process exited: those were left running."""

from __future__ import annotations

import threading

from worldtrace.collectors.jobs import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig

JOB = {
    "name": "q",
    "sandbox": "terminal",
    "episodes": 1,
    "tasks": [{"id": "t", "actions": ["ls\n"]}],
}


def test_an_abandoned_worker_that_was_never_stopped_claims_nothing(tmp_path):
    js = open_job_store(tmp_path / "jobs.db")
    js.submit(JobSpec.from_dict(JOB))
    w = Worker(js, tmp_path / "raw", WorkerConfig(poll=0.1))
    w._abandon()  # the second signal, while `stop()` has not run yet
    slot = threading.Thread(target=w._slot, daemon=True)
    slot.start()  # before the fix it claimed the attempt, ran it and waited on its row
    slot.join(timeout=20)
    assert not slot.is_alive(), "the abandoned worker's slot claimed the queued attempt"
    assert js.pending() and not js.running()  # the queued attempt waits for the next worker
    assert not list((tmp_path / "raw").rglob("*.journal.jsonl"))
