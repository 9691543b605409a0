"""A stop signal another thread takes reaches the main thread at once
(`errors.main_thread_woken`): the kernel hands a process's signal to any thread that does
not block it, and Python runs handlers only in the main thread, when it next runs
bytecode. Real processes, real signals sent to a chosen thread by its id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil

from ..conftest import takers, wait_until

BLOCKED_MAIN = textwrap.dedent(
    """
    import sys, threading
    from worldtrace.errors import interrupts

    threading.Thread(target=threading.Event().wait, daemon=True).start()  # takes signals
    with interrupts(lambda: "nothing written"):
        print("waiting", flush=True)
        threading.Event().wait()  # untimed: a lock the main thread blocks on in C
    """
)


def test_interrupts_stop_a_main_thread_blocked_in_c_when_another_thread_takes_the_signal():
    """Found (signal audit, 12-04): `process` blocked in an untimed Future.result saw a
    SIGTERM another thread took only when its Beam stage ended (2.4 s of a 20k-trajectory
    run, 12-04; a longer stage, longer); `export` and `import` wait the same way. Here the
    main thread waits on a lock that nothing releases: without the relay, for ever."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BLOCKED_MAIN],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "waiting\n"
        [tid, *_] = takers(proc.pid, signal.SIGTERM) or [None]
        assert tid, "no thread but the main one takes SIGTERM"
        os.kill(tid, signal.SIGTERM)  # a thread's id: that thread takes the signal
        _, err = proc.communicate(timeout=60)  # a deadline: the wait has none
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.splitlines() == ["interrupted (SIGTERM): nothing written"], err


LONG_QUERY = "select count(*) from range(1000000000000) t(i) where i % 7 = 3"


def test_a_ctrl_c_a_duckdb_worker_takes_stops_the_query(wt_env):
    """Found (CI, 12-04, and 4 of 8 runs by hand): Ctrl-C during a long query was ignored
    for the query's length when a DuckDB worker thread took it. DuckDB answers Python's
    signal check by cancelling only what the main thread runs, then waits for its
    workers, one of which may hold a whole task; the relay now interrupts the query
    (`con.interrupt()`, as --timeout does). Three queries: each hung before about half of
    the time."""
    for _ in range(3):
        proc = subprocess.Popen(
            ["worldtrace", "query", LONG_QUERY, "--timeout", "0"], env=wt_env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            busy = psutil.Process(proc.pid)
            wait_until(lambda b=busy: b.cpu_times().user > 2, timeout=120, what="the query running")
            [tid, *_] = takers(proc.pid, signal.SIGINT) or [None]
            assert tid, "no thread but the main one takes SIGINT"
            os.kill(tid, signal.SIGINT)
            _, err = proc.communicate(timeout=60)  # a deadline: the query runs for hours
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        assert err.splitlines() == [
            "interrupted (Ctrl-C): the query was stopped; nothing was written"
        ], err
