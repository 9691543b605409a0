"""A `process` run killed outright (SIGKILL, the out-of-memory killer) takes its worker
processes with it, quietly.

Found (fault-injection review, 2026-12-04): after `kill -9` of a run mid-way, its two
orphaned workers printed ~100 lines on the user's terminal (`Exception in thread
read_grpc_client_inputs`, `Logging client failed ... resetting`, the harness's own
traceback: gRPC's `StatusCode.UNAVAILABLE "Stream removed"`) as their channels to the
dead runner broke, and worked on for ~0.5 s more.

Found (2026-12-05): each killed run left a `beam-pipeline-temp*` directory in /tmp (Beam
makes one for every pipeline and removes it only when the run ends).
"""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
from worldtrace.collectors.synthetic import near_duplicate_corpus
from worldtrace.schemas import ShardWriter

from ..conftest import wait_until


def _alive(proc: psutil.Process) -> bool:
    """An orphan's zombie waits for whoever adopted it to reap it: it is gone."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_workers_of_a_killed_run_exit_at_once_without_a_word(store, wt_env, tmp_path):
    data, _ = near_duplicate_corpus(n_unique=3000, n_groups=30, group_size=3, seed=8)
    with ShardWriter(store.raw / "c", row_group_rows=500) as w:
        w.write(data)
    log = tmp_path / "terminal.txt"  # what the user's terminal shows, workers' writes included
    tmp = tmp_path / "tmp"  # the run's /tmp
    tmp.mkdir()
    with open(log, "wb") as out:
        cli = subprocess.Popen(
            ["worldtrace", "process", "--store", str(store.root), "--workers", "2"],
            stdout=out, stderr=out, env={**wt_env, "TMPDIR": str(tmp)}, start_new_session=True,
        )  # fmt: skip
    workers: list[psutil.Process] = []
    try:

        def at_work() -> list[psutil.Process] | None:
            """Both workers exist and pass 1 writes segments: they serve the runner."""
            found = psutil.Process(cli.pid).children()
            busy = list(store.processed.glob(".run-*/_index/segments/*"))
            return found if len(found) == 2 and busy else None

        workers = wait_until(at_work, timeout=60, what="the run's workers at work")
        os.kill(cli.pid, signal.SIGKILL)  # the run's process alone, as `kill -9 PID`
        assert cli.wait(timeout=10) == -signal.SIGKILL
        wait_until(
            lambda: not any(map(_alive, workers)), timeout=3, what="the orphaned workers to exit"
        )
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        for w in workers:  # processes this test started, by pid
            if _alive(w):
                w.kill()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Logging client failed" not in text, text
    assert "UNAVAILABLE" not in text, text
    assert list(tmp.iterdir()) == []
