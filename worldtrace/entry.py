"""The `worldtrace` console script's entry: Ctrl-C or SIGTERM while the CLI still loads.

Loading `worldtrace.cli` (click, the command modules, `errors`) takes a tenth of a second
or more, before `errors.cli_stops` takes the stop signals: a Ctrl-C then ended the
command with Python's `KeyboardInterrupt` traceback (and SIGTERM silently), where a stop
a moment later says one line and exits 130 (143). This module is the first of ours the
console script loads after the package's two lines, so it takes them first, at import:
only the console script imports it (the CLI's own tests import `worldtrace.cli`, whose
import changes no signal handler).
"""

from __future__ import annotations

import _signal  # the interpreter's own: `signal` builds its enums first (~1 ms unguarded)
import contextlib
import os

from .stopping import stop_status

NOT_STARTED = "the command had not started its work"
"""What a stop while loading says the store holds: `errors.NOT_STARTED` (that module
takes a large part of the time this covers to load)."""
STOP_NAMES = {_signal.SIGINT: "Ctrl-C", _signal.SIGTERM: "SIGTERM"}
"""The stop signals `errors.cli_stops` takes, as it names them."""


def _stopped_loading(signum: int, frame: object) -> None:
    """Nothing has started (no file written, nothing on stdout): the line, and the
    process ends at once, as a handler may run inside any module being loaded, where an
    exception could be caught or half-initialise it."""
    with contextlib.suppress(OSError):  # no stderr to say it on: the status says it
        os.write(2, f"interrupted ({STOP_NAMES[signum]}): {NOT_STARTED}\n".encode())
    os._exit(stop_status(signum))


def _take_stops() -> None:
    """Until `cli_stops` replaces it; a signal ignored by whoever started us (nohup)
    stays ignored, as `cli_stops` leaves it."""
    for s in STOP_NAMES:
        if _signal.getsignal(s) is not _signal.SIG_IGN:
            _signal.signal(s, _stopped_loading)


_take_stops()


def main() -> None:
    """The console script's `main`: the CLI, loaded under `_stopped_loading`."""
    from .cli import main as cli_main

    cli_main()
