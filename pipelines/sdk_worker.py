"""Beam's SDK worker process (`python -m apache_beam.runners.worker.sdk_worker_main`),
quiet on stderr.

Importing Beam logs through the `logging` module functions before any handler exists,
which makes Python install a stderr handler on the root logger; every later start-up
line of the worker then lands on the user's terminal. A root handler that drops
records, added before Beam is imported, prevents that. The worker adds its own handler
that sends the records to the runner, which logs them in the submitting process.
A failed instruction's traceback is not printed (`_no_print`), Ctrl-C is left to the
runner, and when the harness is done the process exits at once (see the end).
"""

import logging
import os
import signal
import sys

logging.getLogger().addHandler(logging.NullHandler())
# Ctrl-C reaches the whole foreground process group; the runner that started this worker
# stops it (or its channel closes when the runner is gone): no traceback of its own
signal.signal(signal.SIGINT, signal.SIG_IGN)

from apache_beam.runners.worker import sdk_worker, sdk_worker_main  # noqa: E402


def _no_print(*args, **kwargs) -> None:
    """The harness prints a failed instruction's traceback on stderr and also sends it to
    the runner (its response and its log), which raises it in the submitting process:
    there, `worldtrace.errors` makes a machine failure one line and shows a bug whole.
    The printed copy would only repeat it on the user's terminal."""


sdk_worker.print = _no_print  # the module's one print (a failed instruction's traceback)


def _standby() -> None:
    """Start warm (`runner.STANDBY`): import what the work needs, then wait on stdin for
    the environment (one JSON line) the runner hands a worker it starts
    (`runner._WorkerProcess`)."""
    import json

    from worldtrace.pipelines import process  # noqa: F401  (every stage's module)
    from worldtrace.schemas.redact import redactor

    redactor()  # compiles the detectors pass 1 redacts with
    line = sys.stdin.readline()
    if not line:  # the runner did not need this worker (or is gone)
        os._exit(0)
    os.environ.update(json.loads(line))


if __name__ == "__main__":
    from worldtrace.pipelines.runner import STANDBY  # the standby imports it anyway
    from worldtrace.pipelines.tuning import tune_beam

    tune_beam()
    if STANDBY in sys.argv[1:]:
        _standby()
    sdk_worker_main.main(sys.argv)
    # Done: every bundle is reported and the log handler flushed. Skip the interpreter's
    # teardown (gRPC, pyarrow, Beam: ~0.3 s), which the runner waits for one worker
    # after another when it stops them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
