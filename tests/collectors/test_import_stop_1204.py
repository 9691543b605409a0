"""Stopping an import's worker processes (`importers._stop_workers`, run on Ctrl-C) while
one of them is writing its result: the pool still shuts down, and the process can exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import multiprocessing, os, struct, threading
    from concurrent.futures.process import BrokenProcessPool
    from worldtrace.collectors.importers import _pool, _stop_workers

    WROTE = multiprocessing.get_context("fork").Event()  # inherited by the forked workers

    def half_a_result(fd):
        # what a worker killed in the middle of sending a large result leaves behind:
        # a message's length, then only part of its bytes
        os.write(fd, struct.pack("!i", 1 << 20) + b"x" * 100)
        WROTE.set()
        threading.Event().wait()  # still busy when the stop comes

    pool = _pool(2)
    future = pool.submit(half_a_result, pool._result_queue._writer.fileno())
    assert WROTE.wait(60), "the worker never wrote"
    _stop_workers(pool)
    t = threading.Thread(target=pool.shutdown, kwargs={"cancel_futures": True}, daemon=True)
    t.start()
    t.join(60)
    print("hung" if t.is_alive() else "shut down", type(future.exception(0)).__name__
          if not t.is_alive() else "", flush=True)
    os._exit(1 if t.is_alive() else 0)  # a hung pool's thread would hold a normal exit
    """
)


def test_workers_stopped_in_the_middle_of_a_result_let_the_pool_shut_down():
    """Found (CI and 1 run in 24 under load, 12-04): Ctrl-C during `import --workers 2`
    killed a worker while it sent a result; the pool's manager thread waited for the rest
    of the message for ever, and the import with it (py-spy: `shutdown` joining it, it
    in `Connection._recv`). The import never ended."""
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=180)
    assert (r.returncode, r.stdout.split()) == (0, ["shut", "down", "BrokenProcessPool"]), (
        r.stdout + r.stderr
    )


DIES_MID_RESULT = textwrap.dedent(
    """
    import os, signal, struct, threading
    from concurrent.futures.process import BrokenProcessPool
    from worldtrace.collectors.importers import _pool, result_of

    def killed_mid_result(fd):
        # the out-of-memory killer, in the middle of a large result's write
        os.write(fd, struct.pack("!i", 1 << 20) + b"x" * 100)
        os.kill(os.getpid(), signal.SIGKILL)

    pool = _pool(2)
    future = pool.submit(killed_mid_result, pool._result_queue._writer.fileno())
    outcome = []

    def wait():
        try:
            outcome.append(result_of(pool, future))
        except BrokenProcessPool as exc:
            outcome.append(type(exc).__name__)
        pool.shutdown(cancel_futures=True)
        outcome.append("shut down")

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(60)
    print(*outcome, flush=True)
    os._exit(1 if t.is_alive() else 0)
    """
)


def test_a_worker_killed_mid_result_ends_the_wait_as_a_lost_worker():
    """Found (signal audit, 12-04): `import --workers 2` whose worker the kernel killed
    while it wrote a result hung for good (main thread in `Future.result`, the pool's
    manager in `Connection._recv` on the half message, the other worker on the pipe's
    lock); `ImportWorkerLost` and exit 1 were due."""
    r = subprocess.run(
        [sys.executable, "-c", DIES_MID_RESULT], capture_output=True, text=True, timeout=180
    )
    assert (r.returncode, r.stdout.split()) == (0, ["BrokenProcessPool", "shut", "down"]), (
        r.stdout + r.stderr
    )
