"""Web defects a reviewer found: a step abandoned at its timeout."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from worldtrace.sandboxes.aio import AsyncRunner, AsyncTimeout


def test_a_task_abandoned_at_its_timeout_has_its_exception_retrieved(caplog):
    """Found: a web step cancelled at its timeout while reading the tree still un-marks the
    frames (a `finally`), which fails once the sandbox is closed; the abandoned task ended
    with SandboxError('the browser is gone'), printed by asyncio on stderr as `Task
    exception was never retrieved` with its traceback (jobs web2.yaml: task `ext`)."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    ended = asyncio.Event()

    async def step() -> None:
        try:
            await asyncio.sleep(30)  # the page does not answer in time
        finally:
            ended.set()
            raise RuntimeError("the browser is gone")  # the clean-up fails after the cancel

    with AsyncRunner("test-abandoned") as runner:
        with pytest.raises(AsyncTimeout):
            runner.run(step(), 0.2)
        runner.run(ended.wait(), 5)
        runner.run(asyncio.sleep(0.05), 5)  # the abandoned task's done callbacks ran
        gc.collect()  # its traceback holds a cycle: a collection reports it, if unread
    assert not [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]
