"""Worker processes forked from this one, for CPU-bound work of a command: `import`'s
record conversion, and the passes of a local `process` run (`pipelines.runner`).

A fork costs milliseconds: the child starts with everything imported and warmed. The
workers are forked at once, with SIGINT and SIGTERM blocked until each has its own
handling (`worker_start`), and they end with this process however it ends (`kill -9`
and the out-of-memory killer included). `result_of` finds a worker that died while its
result was awaited, which CPython's pool alone can miss for ever.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when the thread that forked it ends (Linux)."""
RESULT_WAKE = 0.5
"""Seconds between looks at the workers while a result is awaited (`result_of`)."""


def fork_safe(thread: threading.Thread) -> bool:
    """The forking thread, or one that says a fork may copy it (`fork_safe`: the CLI's
    signal relay, `errors.main_thread_woken`, holds no lock while it waits)."""
    return thread is threading.current_thread() or getattr(thread, "fork_safe", False)


def fork_pool(workers: int, warm: Callable[[], None] | None = None) -> ProcessPoolExecutor | None:
    """`workers` processes forked from this one, or None for one worker or while another
    thread runs here (a program that embeds the command): a fork copies its locks but
    not the thread that would release them, and a new interpreter would run that
    program's main module again; the work is then done in this process instead.
    `warm` runs first, once here instead of in every worker (what each would build on
    its first task)."""
    pools = _forked([workers], warm) if workers > 1 else None
    return pools[0] if pools else None


def fork_lanes(n: int, warm: Callable[[], None] | None = None) -> list[ProcessPoolExecutor] | None:
    """`n` pools of one worker each (`fork_pool`'s rules): work handed to a lane runs on
    its own worker, in the order given, each task's result as soon as it is done. A
    pool of n workers hands each task to whichever is free, which undoes a split made
    to give each worker the same work (`units.deal`)."""
    return _forked([1] * n, warm) if n > 1 else None


def _forked(sizes: list[int], warm: Callable[[], None] | None) -> list[ProcessPoolExecutor] | None:
    if any(not fork_safe(t) for t in threading.enumerate()):
        return None
    if warm is not None:
        warm()
    ctx = multiprocessing.get_context("fork")
    pools = [
        ProcessPoolExecutor(n, mp_context=ctx, initializer=worker_start, initargs=(os.getpid(),))
        for n in sizes
    ]
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    # what exists now lives as long as the workers: their full collections need not walk
    # it, and walking it would write to every object, copying the pages a worker shares
    # with this process (as Beam's standby workers freeze theirs: `sdk_worker._standby`)
    frozen = not gc.get_freeze_count()
    if frozen:
        gc.freeze()
    try:
        for pool in pools:
            pool.submit(int)  # the first task forks every worker (a fork pool starts them all)
    except BaseException:
        for pool in pools:
            pool.shutdown(wait=False)
        raise
    finally:
        if frozen:  # here it is collected as before
            gc.unfreeze()
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return pools


def submit(pool: ProcessPoolExecutor, fn: Callable[..., Any], *args: Any) -> Future:
    """`pool.submit(fn, *args)`, whose error comes back as it was raised when it can: an
    exception that does not rebuild from its pickle (a custom `__init__`, as
    `tempfiles.DamagedFile` had) broke the pool's result thread, and the run then
    reported a worker that died instead of the error."""
    return pool.submit(_guarded, fn, *args)


def _guarded(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            raise RuntimeError(f"{type(exc).__name__}: {exc}") from None
        raise


def worker_start(parent: int) -> None:
    """In each worker process, before its first task: die with the parent. Killed or
    stopped (`kill PID`, a supervisor's SIGTERM, `kill -9`, the OOM killer), the command
    leaves no worker behind: they were re-parented to init and hung forever, blocked
    on their pipe to it (~90 MB each, the input file open). Ctrl-C reaches the whole
    process group: the parent decides (it stops them, `stop_workers`); a SIGTERM of
    their own ends them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(ValueError):  # the parent's relay socket is not this one's
        signal.set_wakeup_fd(-1)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the check below only
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request: no signal comes
        os._exit(1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def stop_workers(pool: ProcessPoolExecutor | list[ProcessPoolExecutor]) -> None:
    """End the worker processes now (an interrupt, a failed run): their tasks' results
    are not wanted, and a worker in the middle of a large task would hold the stop up.

    A worker killed while it writes a result leaves half a message in the result pipe;
    the pool's manager thread then waits for the rest for ever, and the pool's shutdown
    and this interpreter's exit wait for that thread (CPython's ProcessPoolExecutor; seen
    as an import that Ctrl-C left hanging). This process's copy of the pipe's write end
    is closed too: once the workers are dead nobody holds it, so that wait ends at
    end-of-file and the pool shuts down as broken."""
    for proc in workers_of(pool):
        with contextlib.suppress(OSError, ValueError):
            proc.kill()
    for one in pool if isinstance(pool, list) else [pool]:
        writer = getattr(getattr(one, "_result_queue", None), "_writer", None)
        with contextlib.suppress(OSError, AttributeError):  # only workers write to it
            writer.close()


def release(pools: list[ProcessPoolExecutor]) -> list[threading.Thread]:
    """Let the pools' workers exit once their tasks are done, without waiting for them
    (a worker's exit takes ~7 ms, its memory handed back): returns what
    `await_released` joins. Their results stay readable."""
    threads = [getattr(pool, "_executor_manager_thread", None) for pool in pools]
    for pool in pools:
        pool.shutdown(wait=False)
    return [t for t in threads if t is not None]


def await_released(threads: list[threading.Thread]) -> None:
    """Wait until released pools (`release`) have stopped their workers: each pool's
    manager thread (private, as `_processes`) ends once its workers are joined. A run
    returns with none left: a thread of it still alive would keep the next run in this
    process from forking (`fork_safe`)."""
    for thread in threads:
        thread.join()


def workers_of(pool: ProcessPoolExecutor | list[ProcessPoolExecutor]) -> list:
    """The worker processes of a pool, or of lanes (its private `_processes`: no public
    way lists them)."""
    pools = pool if isinstance(pool, list) else [pool]
    return [p for x in pools for p in (getattr(x, "_processes", None) or {}).values()]


def dead_worker(pool: ProcessPoolExecutor | list[ProcessPoolExecutor]) -> int | None:
    """The exit status of a worker that ended (negative: the signal that killed it), or
    None while all live."""
    return next((p.exitcode for p in workers_of(pool) if p.exitcode is not None), None)


def result_of(pool: ProcessPoolExecutor | list[ProcessPoolExecutor], work: Future) -> Any:
    """`work`'s result, looking at the workers (of a pool, or of lanes) every
    `RESULT_WAKE` seconds. A worker killed while it wrote a result (the out-of-memory
    killer) leaves half a message that the pool waits on for ever, and the lock of the
    result pipe held, so the pool never finds its own breakage: a dead worker is then
    BrokenProcessPool here, and the rest are stopped. The timed wait also lets a stop
    signal that another thread took run its handler."""
    while True:
        try:
            return work.result(RESULT_WAKE)
        except FutureTimeout:
            if dead_worker(pool) is not None:
                stop_workers(pool)
                raise BrokenProcessPool(
                    "a worker process died while its result was awaited"
                ) from None
