"""Fresh-clone CI on e2495c3 (load 16): a worker lane killed mid-run ended `process` with
the BrokenProcessPool traceback (126 lines) instead of one line: the pool failed its
futures before reaping the worker, and the runner, finding no exit status, re-raised.
A broken pool anywhere in the error's chain is a worker of ours that died (`WorkerLost`,
`LANE_GONE` when its status is not known). Real pools, real exceptions."""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest
from worldtrace.pipelines.runner import broken_pool
from worldtrace.schemas import forkpool


def _as_beam_reraises(exc: BaseException) -> BaseException:
    """Beam's `_reraise_augmented`: the same type, `[while running ...]`, from the first."""
    try:
        try:
            raise exc
        except BaseException as first:
            raise type(first)(f"{first} [while running 'Process/Pass1/ParDo(_Pass1)']") from first
    except BaseException as again:
        return again


def test_a_real_broken_pool_is_told_through_beams_wrapping():
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    try:
        assert pool.submit(int).result() == 0  # the worker is started
        [victim] = forkpool.workers_of(pool)
        os.kill(victim.pid, signal.SIGKILL)  # a process this test's pool started, by pid
        with pytest.raises(BrokenProcessPool) as caught:
            forkpool.result_of([pool], forkpool.submit(pool, sum, [1, 2]))
        assert broken_pool(_as_beam_reraises(caught.value))
        try:
            raise RuntimeError("the stage's own error") from caught.value
        except RuntimeError as chained:
            assert broken_pool(chained)
    finally:
        forkpool.stop_workers([pool])
        pool.shutdown(wait=True, cancel_futures=True)


def test_other_errors_are_not_taken_for_a_lost_worker():
    assert not broken_pool(_as_beam_reraises(ValueError("a bad record")))
    assert not broken_pool(None)
