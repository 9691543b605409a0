"""The command line's last word on failures of the machine under a command.

A full disk, a missing permission or a locked or broken jobs.db is not a bug in the
command: it ends with one line naming the path and exit status 1, never a traceback.
Anything else propagates as before.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

EXIT_MACHINE = 1


def _os_error_names() -> frozenset[str]:
    out, todo = set(), [OSError]
    while todo:
        cls = todo.pop()
        out.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(out | {"IOError", "StoreWriteError"})


_OS_ERRORS = _os_error_names()
_EXCEPTION_LINE = re.compile(r"^(?:RuntimeError: )?(?:[\w.]+\.)?(\w+): (.+)$")


def _worker_failure(text: str) -> str | None:
    """The machine failure a pipeline worker process reported, as one line, or None.

    A worker in another process sends its traceback as text; the runner raises it as a
    RuntimeError and logs it. Its last exception line says what happened: an OSError
    (or our StoreWriteError) is the machine's, anything else is a bug to show whole.
    """
    lines = text.replace("\\n", "\n").splitlines()
    last = next((m for m in map(_EXCEPTION_LINE.match, reversed(lines)) if m), None)
    if last is None or last.group(1) not in _OS_ERRORS:
        return None
    message = last.group(2).rstrip('" ')
    m = re.match(r"^(.*?) \[while running '(.*)'\]$", message.replace("\\'", "'"))
    return f"{m.group(1)} (pipeline step {m.group(2)})" if m else message


def _machine_error(exc: BaseException) -> BaseException | None:
    """The OSError or sqlite3.Error behind `exc`, following causes and contexts; Beam
    re-raises a worker's OSError as a RuntimeError whose message starts with its name
    (in-process) or ends with it (a worker process's traceback)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, (OSError, sqlite3.Error)):
            return e
        if isinstance(e, RuntimeError) and (
            str(e).startswith(("OSError: ", "IOError: ")) or _worker_failure(str(e))
        ):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


_BEAM_WRAPPED = re.compile(
    r"^(?:OSError|IOError): (?:\[Errno \d+\] )?(.*?)(?: \[while running '(.*)'\])?$"
)


def one_line(exc: BaseException, jobs_db: str | None = None, root: str | None = None) -> str:
    """`exc` as one line; sqlite errors name the job store's file, a pipeline worker's
    OSError the store it was writing into."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    remote = _worker_failure(str(exc)) if isinstance(exc, RuntimeError) else None
    if remote:
        return remote
    if isinstance(exc, sqlite3.Error) and jobs_db:
        return f"{jobs_db}: {text}"
    m = _BEAM_WRAPPED.match(text) if isinstance(exc, RuntimeError) else None
    if m:
        step = f" (pipeline step {m.group(2)})" if m.group(2) else ""
        return f"cannot write under {root}: {m.group(1)}{step}"
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        return f"{exc.filename}: {text}"
    return text


def _quiet_unraisable(unraisable: Any) -> None:
    """Writers that a failure left behind try to flush when collected; on a full disk
    that fails again and Python would print a traceback after our one line."""
    if isinstance(unraisable.exc_value, OSError):
        return
    sys.__unraisablehook__(unraisable)


class _DropMachineErrors(logging.Filter):
    """Beam logs a worker's exception with its traceback before re-raising it; for an
    OSError the one line below says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, OSError) or str(record.msg).startswith("OSError"):
            return False
        # a worker process's log of the same failure, relayed by the runner
        return not (record.levelno >= logging.ERROR and _worker_failure(record.getMessage()))


def run_guarded(cli: Callable[..., Any]) -> None:
    """Run the click group; a machine failure ends it with one line on stderr."""
    import click

    for name in ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service"):
        logging.getLogger(name).addFilter(_DropMachineErrors())
    obj: dict[str, Any] = {}
    try:
        cli(obj=obj)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        found = _machine_error(exc)
        if found is None:
            raise
        sys.unraisablehook = _quiet_unraisable
        from worldtrace.schemas import Store

        st = Store.at(obj.get("store"))
        click.echo(f"error: {one_line(found, str(st.jobs_db), str(st.root))}", err=True)
        sys.exit(EXIT_MACHINE)
