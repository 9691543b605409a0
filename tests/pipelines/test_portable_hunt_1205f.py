"""The PortableRunner with an embedded job service and SDK workers from a worker pool in
its own process, as infra/runners.md runs it: a worker that dies, and a run stopped
with Ctrl-C.

Found (hunt 12-05): a worker killed while it started left the run waiting for it for
ever (`0/6 unit steps` every 5 s for 10 min), and Ctrl-C then printed the interrupt
line but left the process alive (the embedded job's thread kept the interpreter
waiting); killed once connected, the run ended in ~340 lines of `Channel closed
prematurely` tracebacks; Ctrl-C mid-run removed the run directory while the pool's
worker went on running stages, writing into it after the command had exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ..conftest import wait_until
from .test_process import big, cli_process, copy_big, free_port, raw_store, wait_listening  # noqa: F401


@pytest.fixture
def pool():
    """One SDK worker pool in its own process (stopped after, by pid): its port and
    its process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "worldtrace.pipelines.worker_pool", f"--service_port={port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        # the pool starts SDK workers as `python` from PATH: this venv's
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )  # fmt: skip
    try:
        wait_listening(port, proc)
        yield port, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def portable(port: int, *more: str) -> list[str]:
    return [
        "--runner", "PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
        f"--environment_config=localhost:{port}", *more,
    ]  # fmt: skip


def live_workers(pool: psutil.Process, before: set[int] = frozenset()) -> list[psutil.Process]:
    """The SDK workers the pool runs now (its children, but those that have exited and
    the ones in `before`)."""
    out = []
    for child in pool.children():
        try:
            if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


@contextlib.contextmanager
def killed_at_end(cli):
    """`cli` (a `worldtrace` we started) killed, by pid, if it still runs at the end."""
    try:
        yield
    finally:
        if cli.poll() is None:
            cli.kill()


def said(err: str) -> list[str]:
    """stderr without the progress lines."""
    return [x for x in err.splitlines() if x.strip() and " process: " not in x]


def no_run_left(store) -> None:
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".run-")]
    assert not (store.processed / "trajectories").exists()


START_TIMEOUT = 3.0
"""`--worker_start_timeout` of the run whose worker is killed while it starts: waited out
in full (the worker is killed as soon as the pool has started it, a poll after, long
before it could connect: ~2-3 s here), so short."""


def test_a_worker_that_dies_while_starting_fails_the_run_in_one_line(store, wt_env, pool):
    port, pool_proc = pool
    raw_store(store)
    before = {p.pid for p in pool_proc.children()}
    cli = cli_process(store, wt_env, *portable(port, f"--worker_start_timeout={START_TIMEOUT:g}"))
    with killed_at_end(cli):
        worker = wait_until(lambda: live_workers(pool_proc, before), 120, "the run's worker")
        for w in worker:
            w.kill()  # the worker the pool started for our run, by pid
        out, err = cli.communicate(timeout=120)
    assert cli.returncode == 1, out + err
    assert "Traceback" not in err
    assert said(err) == [
        f"Error: a pipeline worker that the worker pool at localhost:{port} started did not "
        f"connect within {START_TIMEOUT:g} s (it died while starting, or cannot reach this host; "
        "--worker_start_timeout sets the wait); the run failed and published nothing (the "
        "processed tables are as they were)"
    ], err
    no_run_left(store)


def test_a_worker_killed_mid_run_fails_the_run_in_one_line(store, wt_env, pool, big):  # noqa: F811
    port, pool_proc = pool
    copy_big(store, big)
    before = {p.pid for p in pool_proc.children()}
    cli = cli_process(store, wt_env, *portable(port))
    with killed_at_end(cli):
        at_work = wait_until(
            lambda: list(store.processed.glob(".run-*/_index/segments/*.parquet")),
            120,
            "the run's worker at work",
        )
        assert at_work
        for w in live_workers(pool_proc, before):
            w.kill()  # the worker the pool started for our run, by pid
        out, err = cli.communicate(timeout=120)
    assert cli.returncode == 1, out + err
    assert "Traceback" not in err and "Channel closed" not in err, err
    assert said(err) == [lost_line(port)], err
    no_run_left(store)


def test_a_worker_that_stops_answering_fails_the_run_in_one_line(store, wt_env, pool, big):  # noqa: F811
    """A worker stopped (SIGSTOP: as a host or network gone, it closes nothing) left the
    run waiting for ever: its connection looked open. The run pings a silent one."""
    port, pool_proc = pool
    copy_big(store, big)
    before = {p.pid for p in pool_proc.children()}
    cli = cli_process(store, wt_env, *portable(port, "--worker_keepalive=2"))
    stopped = []
    with killed_at_end(cli):
        wait_until(
            lambda: list(store.processed.glob(".run-*/_index/segments/*.parquet")),
            120,
            "the run's worker at work",
        )
        stopped = live_workers(pool_proc, before)
        for w in stopped:
            w.suspend()  # the worker the pool started for our run, by pid
        out, err = cli.communicate(timeout=120)
        # the pool was told to end it: nothing of the run is left (Beam's pool waits
        # 10 s after SIGTERM, which a stopped process does not take, then kills it)
        assert not live_workers(pool_proc, before)
        for w in stopped:
            with contextlib.suppress(psutil.NoSuchProcess):
                w.kill()
    assert cli.returncode == 1, out + err
    assert "Traceback" not in err
    assert said(err) == [lost_line(port)], err
    no_run_left(store)


def lost_line(port: int) -> str:
    return (
        f"Error: a pipeline worker that the worker pool at localhost:{port} started lost its "
        "connection to the run before the run was over (the worker died or stopped "
        "answering: a crash, the out-of-memory killer (`dmesg` on its host), or its host or "
        "network gone); the run failed and published nothing (the processed tables are as "
        "they were)"
    )


def test_ctrl_c_ends_a_run_waiting_for_a_worker_that_died(store, wt_env, pool):
    """The interrupt line was said, and the process stayed (a second Ctrl-C did
    nothing)."""
    port, pool_proc = pool
    raw_store(store)
    before = {p.pid for p in pool_proc.children()}
    # its own process group, as a terminal gives a command (the pool is elsewhere)
    cli = cli_process(store, wt_env, *portable(port), start_new_session=True)
    try:
        for w in wait_until(lambda: live_workers(pool_proc, before), 120, "the run's worker"):
            w.kill()  # the worker the pool started for our run, by pid
        # the run now waits for it (60 s by default): a Ctrl-C ends it all the same
        os.killpg(cli.pid, signal.SIGINT)  # the group of the command we started
        _, err = cli.communicate(timeout=40)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert cli.returncode == 130, err
    assert said(err) == [
        f"interrupted (Ctrl-C): nothing was published: {store.processed} is as it was "
        "before this run (no table is half-written); run the same command again"
    ], err
    no_run_left(store)


def test_ctrl_c_mid_run_leaves_no_run_directory_and_no_worker_at_work(store, wt_env, pool, big):  # noqa: F811
    """The run directory was removed while the pool's worker went on running the run's
    stages, which wrote into it again after the command had exited."""
    port, pool_proc = pool
    copy_big(store, big)
    before = {p.pid for p in pool_proc.children()}
    cli = cli_process(store, wt_env, *portable(port), start_new_session=True)
    try:
        wait_until(lambda: live_workers(pool_proc, before), 120, "the run's worker")
        os.killpg(cli.pid, signal.SIGINT)  # the group of the command we started
        _, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    # the command has exited: no worker of its run is left to write anything, and its
    # run directory is gone
    assert not live_workers(pool_proc, before)
    no_run_left(store)
    assert cli.returncode == 130, err
    assert said(err) == [
        f"interrupted (Ctrl-C): nothing was published: {store.processed} is as it was "
        "before this run (no table is half-written); run the same command again"
    ], err
