"""Async clients (the MCP SDK, Playwright's async API) behind the synchronous protocol.

`AsyncRunner` owns one event loop on a daemon thread. `run(coro, timeout)` waits for a
coroutine from synchronous code and cancels it past the timeout, so a hung server or
page never hangs the collector. `hold(factory)` enters an async context manager inside
one long-lived task and keeps it open until `release()`: anyio (used by the MCP SDK)
requires a context to be exited by the task that entered it, which a sequence of
separate `run` calls cannot guarantee.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


CANCEL_WAIT = 10.0
"""Seconds a cancelled `hold` task gets to run its context's exit (the MCP SDK's
shielded shutdown: stop the server, close its pipes) before its caller goes on."""


class AsyncTimeout(TimeoutError):
    """A coroutine run through `AsyncRunner.run` took longer than its timeout."""


class AsyncAborted(RuntimeError):
    """Entering a `hold` context was aborted (its `abort_with` callback was called)."""


class AsyncRunner:
    def __init__(self, name: str = "worldtrace-async"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._held: list[tuple[asyncio.Event, concurrent.futures.Future]] = []

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """The coroutine's result; raises AsyncTimeout (after cancelling it) past `timeout`."""
        if self.loop.is_closed():
            raise RuntimeError("AsyncRunner is closed")
        fut = asyncio.run_coroutine_threadsafe(_as_coro(coro), self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise AsyncTimeout(f"no answer within {timeout:g} s") from None

    def hold(
        self,
        factory: Callable[[], AbstractAsyncContextManager[T]],
        timeout: float | None = None,
        abort_with: Callable[[Callable[[], None]], None] | None = None,
    ) -> tuple[T, Callable[[], None]]:
        """Enter `factory()` in its own task; returns (value, release). `release()` exits it
        in that same task and waits (bounded by `timeout`). `abort_with` is handed a
        function that, called on the loop's thread while the context is being entered,
        cancels the entering: `hold` then raises AsyncAborted once the context's exit ran
        (a server whose output broke need not be waited for until `timeout`)."""
        entered: concurrent.futures.Future = concurrent.futures.Future()
        ended = threading.Event()  # keep() returned, its context exited (or never entered)
        stop_holder: dict[str, asyncio.Event] = {}
        aborted: list[bool] = []

        def abort() -> None:
            keeper = stop_holder.get("task")
            if keeper is not None and not entered.done():
                aborted.append(True)
                keeper.cancel()

        if abort_with is not None:
            abort_with(abort)

        async def keep() -> None:
            stop_holder["task"] = asyncio.current_task()
            stop = stop_holder["event"] = asyncio.Event()
            try:
                async with factory() as value:
                    entered.set_result(value)
                    await stop.wait()
            except BaseException as exc:
                if not entered.done():
                    entered.set_exception(exc)
                    return
                raise
            finally:
                ended.set()

        task = asyncio.run_coroutine_threadsafe(keep(), self.loop)
        try:
            value = entered.result(timeout)
        except concurrent.futures.TimeoutError:
            # The cancel reaches the task later (call_soon_threadsafe) and its context's
            # exit then stops the server: wait for it. Returning at once let `close()`
            # cancel that exit again and close the loop under a live subprocess
            # transport, whose __del__ later raised `Event loop is closed` from the GC
            # (inside another thread's or test's ast.parse: CPython 3.11's
            # "AST constructor recursion depth mismatch").
            task.cancel()
            ended.wait(CANCEL_WAIT)
            raise AsyncTimeout(f"could not start within {timeout:g} s") from None
        except asyncio.CancelledError:
            if not aborted:
                raise
            ended.wait(CANCEL_WAIT)
            raise AsyncAborted("entering was aborted") from None

        def release() -> None:
            event = stop_holder.get("event")
            if event is not None and not self.loop.is_closed():
                self.loop.call_soon_threadsafe(event.set)
            try:
                task.result(timeout)
            except concurrent.futures.TimeoutError:
                task.cancel()
                ended.wait(CANCEL_WAIT)  # its exit runs now: see above
            except (Exception, concurrent.futures.CancelledError):
                pass  # the context failed while closing: nothing is left to free

        return value, release

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs, stop the loop and join its thread."""
        if self.loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

    def __enter__(self) -> AsyncRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def _as_coro(aw: Awaitable[T]) -> T:
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(_retrieve)
    return await aw


def _retrieve(task: asyncio.Task) -> None:
    """Read the ending task's exception. A caller gone at its timeout (`run` cancelled the
    future) never reads it, and a task whose clean-up failed after the cancel (a page
    closed under it) would be printed by asyncio as `Task exception was never retrieved`;
    the caller already raised AsyncTimeout, so it is only logged at debug."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("abandoned task ended with %r", task.exception())
