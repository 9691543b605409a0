"""A thread pool that a stop does not wait for.

`concurrent.futures.ThreadPoolExecutor` leaving its block on an interrupt waits for the
jobs running (and runs the queued ones), and its threads are joined again when the
interpreter exits: a Ctrl-C of `export` waited for the tokenizer job in progress (up to
7 s, found 2026-12-06), one of `doctor` for every check still to run. Here the threads
are daemons: a block that ends with an exception cancels what has not started and leaves
at once; a running job is dropped with the process (a tokenizer call, a program's
`--version`: nothing of ours is half-written by them). A block that ends normally waits
for its jobs, as the executor does.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    """`workers` daemon threads named `name_N` running submitted calls in order."""

    def __init__(self, workers: int, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """`fn` of each item, in order (all submitted first, as the executor's `map`)."""
        futures = [self.submit(fn, item) for item in items]
        return (f.result() for f in futures)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # the caller's to see, through its future
                future.set_exception(exc)

    def close(self, wait: bool = True) -> None:
        """End the threads once their jobs are done (`wait`), or at once: jobs not
        started are cancelled, running ones left to the daemon threads."""
        if not wait:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join()

    def __enter__(self) -> DaemonPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(wait=exc_type is None)
