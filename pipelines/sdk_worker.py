"""Beam's SDK worker process (`python -m apache_beam.runners.worker.sdk_worker_main`),
quiet on stderr; also what a worker forked from the runner's process runs (`forked`).

Importing Beam logs through the `logging` module functions before any handler exists,
which makes Python install a stderr handler on the root logger; every later start-up
line of the worker then lands on the user's terminal. A root handler that drops
records, added before Beam is imported (`quiet`), prevents that; a forked worker drops
the handlers it copied from the submitting process the same way. The worker adds its
own handler that sends the records to the runner, which logs them in the submitting
process. A failed instruction's traceback is not printed (`_no_print`), Ctrl-C is left
to the runner, and when the harness is done the process exits at once (see `serve`).
A worker also ends, at once and without a word, when the runner's process is gone
(`follow`): killed outright (SIGKILL, the out-of-memory killer), it cannot stop its
workers, whose channels to it then break.

Nothing here runs on import (the runner imports `forked` from it): each entry point
calls `quiet` first.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from typing import NoReturn

ORPHANED = 1
"""A worker's exit status when its runner is gone (no one waits for it)."""
GRACE = 1.0
"""Seconds a worker's broken channel waits to learn whether the runner is gone: its
process closes its sockets just before the kernel reports it exited."""


def quiet() -> None:
    """Logs to the runner only, and Ctrl-C to the runner: it reaches the whole foreground
    process group, and the runner that started this worker stops it (or its channel
    closes when the runner is gone), with no traceback of its own."""
    root = logging.getLogger()
    for handler in root.handlers[:]:  # a forked worker's copies of the runner's
        root.removeHandler(handler)
    root.addHandler(logging.NullHandler())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _Runner:
    """The runner process this worker serves, watched through a pidfd (Linux 5.3+;
    elsewhere by whether this process was handed to another parent)."""

    def __init__(self, pid: int):
        self.pid, self.fd = pid, None
        try:
            self.fd = os.pidfd_open(pid)
        except ProcessLookupError:
            os._exit(ORPHANED)  # gone before this worker started
        except (AttributeError, OSError):  # no pidfd here
            pass
        if os.getppid() != pid:  # gone, or the pid is another's by now
            os._exit(ORPHANED)

    def gone(self, timeout: float | None) -> bool:
        """Whether the runner exits within `timeout` seconds (None: wait for it)."""
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], timeout)[0])
        deadline = None if timeout is None else time.monotonic() + timeout
        while os.getppid() == self.pid:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.1)  # no pidfd: poll the parent
        return True


_runner: _Runner | None = None


def follow(pid: int | None) -> None:
    """Exit with the runner `pid`. Killed outright, the runner cannot stop its workers:
    each one's control, data and logging streams break (gRPC's `UNAVAILABLE "Stream
    removed"`), and Beam printed every broken thread's traceback, its log client's
    `Logging client failed ... resetting` and the harness's own traceback on the user's
    terminal, ~100 lines, while the bundle at hand ran on. A thread now exits the
    process as the runner goes, and what would print a failure first waits to learn
    whether the runner is gone (`_orphaned`): its sockets close just before its exit is
    reported. A failure while the runner lives prints as before."""
    global _runner
    if pid is None:  # started by hand: no runner to follow
        return
    _runner = _Runner(pid)
    threading.Thread(target=_exit_with_runner, name="runner_watch", daemon=True).start()
    previous = threading.excepthook

    def hook(args) -> None:
        _orphaned()
        previous(args)

    threading.excepthook = hook


def _exit_with_runner() -> NoReturn:
    _runner.gone(None)
    os._exit(ORPHANED)


def _orphaned() -> None:
    """Exit quietly if the runner is gone or going (within `GRACE`): what failed is
    only its channels breaking."""
    if _runner is not None and _runner.gone(GRACE):
        os._exit(ORPHANED)


def _unless_orphaned(*args, **kwargs) -> None:
    """Beam's log client prints that its stream broke (then retries every 0.5 s); an
    orphan's stream breaks with its runner."""
    _orphaned()
    print(*args, **kwargs)


def _no_print(*args, **kwargs) -> None:
    """The harness prints a failed instruction's traceback on stderr and also sends it to
    the runner (its response and its log), which raises it in the submitting process:
    there, `worldtrace.errors` makes a machine failure one line and shows a bug whole.
    The printed copy would only repeat it on the user's terminal."""


def warm() -> None:
    """Ready a standby for the harness it becomes: gRPC's channels (imported when the
    harness connects) and the harness itself, then the work (`warm_work`)."""
    import grpc._channel  # noqa: F401
    from apache_beam.runners.worker import sdk_worker_main  # noqa: F401

    warm_work()


def warm_work() -> None:
    """Import what the work needs (in a standby, or in the run's process before it forks
    its worker lanes: `runner.LocalRunner`), build the redactor pass 1 redacts with (its
    detector regexes compile on first search: `redact_rules.LazyPattern`) and load its
    batch screen (from the user's cache; ~60 ms of compiling the first time). Some
    imports happen only when first used: the MinHash libraries in the first unit (~7 ms
    a worker, on the run's critical path), and the LSH bands and rows of the default
    threshold (~8 ms)."""
    import rensa  # noqa: F401  (its thread pool starts on first use, not on import)
    import xxhash  # noqa: F401
    from worldtrace.pipelines import process  # noqa: F401  (every stage's module)
    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.schemas.redact import redactor

    redactor().screen  # noqa: B018  (compiled on first use)
    DedupConfig().band_rows()  # remembered (`minhash.lsh_params`)


def serve(env: dict[str, str]) -> NoReturn:
    """Be the SDK worker `env` (what the runner puts in a worker's environment) names."""
    from apache_beam.runners.worker import log_handler, sdk_worker, sdk_worker_main

    sdk_worker.print = _no_print  # the module's one print (a failed instruction's traceback)
    log_handler.print = _unless_orphaned  # the module's one print (its stream broke)
    os.environ.update(env)
    try:
        sdk_worker_main.main(sys.argv)
    except BaseException:
        _orphaned()  # the control stream broke with the runner: no traceback
        raise
    # Done: every bundle is reported and the log handler flushed. Skip the interpreter's
    # teardown (gRPC, pyarrow, Beam: ~0.3 s), which the runner waits for one worker
    # after another when it stops them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _standby(env_file) -> NoReturn:
    """Warm up, then wait for the environment (one JSON line) the runner hands a worker
    it starts (`runner._WorkerProcess`); no line: the runner did not need this worker
    (or is gone)."""
    warm()
    # what is loaded now lives as long as the worker: full collections need not walk it
    # (a forked worker's would also write to it, copying the pages it shares with the
    # runner's process)
    gc.freeze()
    line = env_file.readline()
    if not line:
        os._exit(0)
    serve(json.loads(line))


def forked(env_fd: int, runner_end: int, runner: int) -> NoReturn:
    """A standby forked from the runner's process (`runner._ForkedStandby`): everything
    is imported already; the environment comes on `env_fd`."""
    os.close(runner_end)
    quiet()
    follow(runner)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked across the fork
    with os.fdopen(env_fd, "rb") as env_file:
        _standby(env_file)


if __name__ == "__main__":
    quiet()
    from worldtrace.pipelines.runner import RUNNER_PID, STANDBY  # the standby imports it anyway
    from worldtrace.pipelines.tuning import tune_beam

    flag = [a for a in sys.argv[1:] if a.startswith(RUNNER_PID + "=")]
    follow(int(flag[0].partition("=")[2]) if flag else None)
    tune_beam()
    if STANDBY in sys.argv[1:]:
        _standby(sys.stdin)
    serve({})
