"""The command line's last word on failures of the machine under a command.

A full disk, a missing permission or a locked or broken jobs.db is not a bug in the
command: it ends with one line naming the path and exit status 1, never a traceback.
An error message of several lines (a driver's hint on a line of its own, DuckDB's caret
under the statement) is printed as one line (`joined`). A reader that closed stdout
(`worldtrace stats | head -1`) ends the command quietly with 141 (`EXIT_CLOSED_PIPE`),
also under PYTHONUNBUFFERED (`_WholeWrites`). Anything else propagates as before.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from types import FrameType
from typing import Any

EXIT_MACHINE = 1
EXIT_CLOSED_PIPE = 128 + 13
"""The reader of stdout closed it before the output ended (`| head -1`): 128 + SIGPIPE,
the status of a program the signal ends (`yes | head -1`), as 130 is Ctrl-C's."""
EXIT_INTERRUPTED = 128 + signal.SIGINT
"""Ctrl-C (SIGINT) stopped the command (`interrupts`): 130, as a shell reports it."""
EXIT_TERMINATED = 128 + signal.SIGTERM
"""SIGTERM (`kill PID`, `timeout`, a supervisor) stopped the command: 143."""
STOP_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C raises KeyboardInterrupt: what an
    interrupt cleans up (a shard in progress, worker processes, a staging directory, a
    run directory) is cleaned up alike, and what catches an interrupt catches it."""


@contextlib.contextmanager
def interrupts(
    kept: Callable[[], str],
    hold: Callable[[], bool] | None = None,
    signals: tuple[int, ...] = tuple(STOP_NAMES),
) -> Iterator[None]:
    """Ctrl-C or SIGTERM ends the block as an interrupt, then one line on stderr,
    `interrupted (Ctrl-C): <kept()>` (what the store holds now: a writing command's
    files appear whole or not at all), and exit 130, or 143 after SIGTERM: never click's
    `Aborted!` and 1, the status of a failure. Whatever the block ends with once a
    signal came is the stop (DuckDB turns the interrupt into `RuntimeError: Query
    interrupted` or an `Invalid Input Error`, Beam into its own errors). While `hold()`
    is true a signal waits (a publish between its renames, which an exception would
    leave half done): the block goes on, and the line and the status come when it ends.
    A second signal while the first is cleaned up exits at once. `signals`: those it
    takes (the other stop signals keep their default action in the block: `import`
    ends at once on SIGTERM); one ignored when the block starts (by whoever started the
    command: `cli_stops` leaves it so) stays ignored through it and after. After the
    block `kept()` stays what a stop says (`stop_says`): a SIGTERM just after `process`
    published says so."""
    stop_says(kept)
    taken: list[int] = []  # the signal that stopped the block, if any
    raised: list[bool] = []

    def handler(signum: int, frame: Any) -> None:
        if raised:  # the cleanup of the first one takes too long for the user
            click.echo(f"{STOP_NAMES[signum]} again: stopping at once", err=True)
            raise SystemExit(128 + signum)
        taken[:] = taken or [signum]
        if hold is not None and hold():
            return
        raised.append(True)
        _raise_stop(taken[0], frame)

    import click

    # a signal ignored by whoever started us (nohup, a shell's background job) stays
    # ignored here, as `cli_stops` keeps it (until 2026-12-06 the block took it: a Ctrl-C
    # the command ignored before and after its block stopped `process` inside it, 130)
    ignored = {s for s in STOP_NAMES if signal.getsignal(s) is signal.SIG_IGN}
    signals = tuple(s for s in signals if s not in ignored)
    old = {s: signal.signal(s, handler) for s in signals}
    for s in set(STOP_NAMES) - set(old) - ignored:  # not ours here: its default, not the CLI's
        old[s] = signal.signal(s, signal.SIG_DFL)
    try:
        try:
            with main_thread_woken(signals):
                yield
        except KeyboardInterrupt as exc:
            taken[:] = taken or [signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT]
            raised.append(True)
        except SystemExit:
            raise
        except BaseException:
            if not taken:
                raise
            raised.append(True)  # the stop, as DuckDB or Beam re-raised it
        if taken:
            _flush_stdout(128 + taken[0])
            click.echo(f"interrupted ({STOP_NAMES[taken[0]]}): {kept()}", err=True)
            sys.exit(128 + taken[0])
    finally:
        for s, h in old.items():
            signal.signal(s, h)


_KEPT: list[Callable[[], str]] = []
"""What a stop now leaves (`stop_says`): the latest declared, or `NOT_STARTED`."""
NOT_STARTED = "the command had not started its work"
_STOPS: list[int] = []
"""The stop signals `cli_stops`'s handler took, the first first (empty: none)."""
_SAID: list[int] = []
"""The status of the interrupt line said (`_stopped_exit`), once said."""


def stop_says(kept: Callable[[], str]) -> None:
    """What a Ctrl-C or SIGTERM that comes from now on says the store holds (the line
    `interrupted (Ctrl-C): <kept()>`), until a command or an `interrupts` block says
    otherwise. A command that only reads says `nothing was written`."""
    _KEPT[:] = [kept]


def stop_taken() -> int | None:
    """The stop signal the CLI's own handler took (`cli_stops`), or None."""
    return _STOPS[0] if _STOPS else None


def stop_answered() -> None:
    """The command answered the stop itself (`jobs list --watch` ends on Ctrl-C, exit
    0): it is not said as an interrupt."""
    _STOPS.clear()


def _cli_stop(signum: int, frame: Any) -> None:
    """The CLI's handler of Ctrl-C and SIGTERM outside the blocks that take them: an
    interrupt raised where the main thread is (as Python's own for Ctrl-C), and the
    signal remembered, so whatever the command then ends with (click's `Abort`, DuckDB's
    `Query interrupted`, a `ClickException` made of DuckDB's error) is said as the stop."""
    if _STOPS:  # the unwinding of the first one takes too long for the user
        import click

        click.echo(f"{STOP_NAMES[signum]} again: stopping at once", err=True)
        raise SystemExit(128 + signum)
    _STOPS.append(signum)
    _raise_stop(signum, frame)


IMPORT_MACHINERY = "<frozen importlib._bootstrap"
"""How the import system's own frames are named (`_bootstrap`, `_bootstrap_external`)."""


def importer(frame: FrameType | None) -> str | None:
    """The module whose code runs the import under `frame`: the first frame outside the
    import machinery (`__name__` of its globals), or None."""
    while frame is not None and frame.f_code.co_filename.startswith(IMPORT_MACHINERY):
        frame = frame.f_back
    return None if frame is None else frame.f_globals.get("__name__")


def import_from_c(frame: FrameType | None) -> FrameType | None:
    """The outermost frame of an import under `frame` that C code started (an extension's
    `PyImport_ImportModule`), or None. An `import` statement (its frame at IMPORT_NAME)
    or `importlib.import_module` hands an exception raised inside the import on to its
    caller; C code may drop it."""
    import dis
    import importlib

    statement, api = dis.opmap["IMPORT_NAME"], importlib.__file__
    outermost = None
    while frame is not None:
        caller = frame.f_back
        if frame.f_code.co_filename.startswith(IMPORT_MACHINERY) and (
            caller is None or not caller.f_code.co_filename.startswith(IMPORT_MACHINERY)
        ):  # the first frame of an import: who started it
            by_python = caller is not None and (
                caller.f_code.co_filename == api
                or (caller.f_lasti >= 0 and caller.f_code.co_code[caller.f_lasti] == statement)
            )
            if not by_python:
                outermost = frame
        frame = caller
    return outermost


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    """Raise the stop of `signum` (KeyboardInterrupt, `Terminated`) where the main thread
    is, or, while it runs an import C code started, as soon as that import has ended.
    pyarrow imports pandas on its first use from C++ that takes any failure of that
    import, the interrupt raised inside it included, for "no pandas" and drops it: a
    Ctrl-C in those ~0.2 s of `export` (`ChunkedArray.to_numpy`) was lost, and the export
    went on to its end, hours on a large store (found 2026-12-06). An import statement's
    own imports are not waited for (Beam's, 1-3 s of `process`' start): the interrupt
    leaves them as it leaves any code. Deferred by a profile function (the main
    thread's only): cheap while it waits for the import's outermost frame to return, it
    raises at the next call or return outside such an import; one that another tool set
    (a profiler) is left alone, and the stop raised at once."""
    # with its name as argument: Beam re-raises an exception inside a DoFn as
    # `type(exn)(exn.args[0] + step)`, and one without arguments as a RuntimeError
    name = STOP_NAMES[signum]
    stop = Terminated(name) if signum == signal.SIGTERM else KeyboardInterrupt(name)
    importing = import_from_c(frame)
    if importing is None or sys.getprofile() is not None:
        raise stop
    waiting = [importing]

    def when_imported(frame: FrameType, event: str, arg: Any) -> None:
        if waiting[0] is not None:  # inside the import: only its end is looked for
            if event == "return" and frame is waiting[0]:
                waiting[0] = None
            return
        waiting[0] = import_from_c(frame)  # another one may have started meanwhile
        if waiting[0] is None:
            sys.setprofile(None)
            raise stop

    sys.setprofile(when_imported)


def cli_stops() -> None:
    """From the CLI's start, Ctrl-C and SIGTERM stop any command with the one line and
    130 or 143 (`run_guarded`), before its own `interrupts` block starts (imports, the
    store opened), in commands with none (`stats`, `explain`, `report`) and after its
    block ended; a block or handler of a command takes them while it runs. Only from
    the main thread; a signal ignored by whoever started us stays ignored (nohup)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if not _KEPT:
        stop_says(lambda: NOT_STARTED)
    for s in STOP_NAMES:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _cli_stop)


def _stop_of(exc: BaseException | None) -> int | None:
    """The stop behind `exc`: the signal `cli_stops` took, else an interrupt in its
    chain (click's `Abort` of a KeyboardInterrupt raised elsewhere)."""
    if _STOPS:
        return _STOPS[0]
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _kept_now() -> str:
    try:
        return (_KEPT or [lambda: NOT_STARTED])[0]()
    except Exception:  # what it reads may be what failed: the stop is said anyway
        return NOT_STARTED


def _stopped_exit(signum: int) -> None:
    """The stop `signum` said as every command says it: one line, exit 128 + signum."""
    import click

    from .stopping import stop_status

    code = stop_status(signum)  # 0 for a worker, whose stop is its ordinary end
    _flush_stdout(code)
    click.echo(f"interrupted ({STOP_NAMES[signum]}): {_kept_now()}", err=True)
    _SAID[:] = [code]
    sys.exit(code)


def _late_stop(signum: int, frame: Any) -> None:
    """A stop after the command ended (its output flushed, the interpreter ending): the
    line, unless one was said, and the process ends at once, as SIGTERM's default would
    end it, rather than an interrupt raised into the interpreter's shutdown."""
    if not _SAID and not _STOPS:
        with contextlib.suppress(Exception):
            text = f"interrupted ({STOP_NAMES[signum]}): {_kept_now()}\n"
            os.write(sys.stderr.fileno(), text.encode(errors="replace"))
    os._exit(_SAID[0] if _SAID else 128 + signum)


WAKE_SIGNAL = signal.SIGURG
"""What `main_thread_woken` sends the main thread: ignored by default, so one arriving
after the block (or from elsewhere) does nothing."""


@contextlib.contextmanager
def main_thread_woken(
    signals: Iterable[int], also: Callable[[int], None] | None = None
) -> Iterator[None]:
    """A signal of `signals` that another thread takes wakes the main thread at once.

    The kernel hands a process's signal to any thread that does not block it (DuckDB's
    workers, OpenBLAS's, gRPC's and Beam's threads do not). The C handler only marks it;
    Python runs the handler in the main thread when that thread next runs bytecode, and a
    main thread blocked in a wait of C code (DuckDB waiting for its workers' tasks, an
    untimed lock, a select) saw it when the wait ended: a query of hours never stopped,
    `process` stopped when its stage did. Here the C handler also writes the signal's
    number to a socket (`signal.set_wakeup_fd`, the standard library's way out of this);
    a relay thread reading it sends `WAKE_SIGNAL` to the main thread, whose wait then
    ends with EINTR and runs the handlers. `also(signum)` runs in the relay thread first,
    whichever thread took the signal (`query` interrupts DuckDB's workers with it). Only
    from the main thread (elsewhere the block runs as it is: no handler of ours is there
    to wake)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    watched = {int(s) for s in signals}
    main = threading.main_thread().ident
    reader, writer = socket.socketpair()
    writer.setblocking(False)

    def relay() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # the kernel hands them elsewhere
        while data := reader.recv(64):
            for signum in watched.intersection(data):
                if also is not None:
                    also(signum)
                signal.pthread_kill(main, WAKE_SIGNAL)

    old_wake = signal.signal(WAKE_SIGNAL, _woken)  # a handler: an ignored signal wakes no wait
    old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    thread = threading.Thread(target=relay, name="signal relay", daemon=True)
    thread.fork_safe = True  # type: ignore[attr-defined]  # waits in recv, holding no lock
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        writer.close()  # the relay reads the end of the stream and returns
        thread.join()
        reader.close()
        signal.signal(WAKE_SIGNAL, old_wake)


def _woken(signum: int, frame: Any) -> None:
    """`WAKE_SIGNAL`'s handler: its arrival ended the main thread's wait; nothing to do."""


def _os_error_names() -> frozenset[str]:
    out, todo = set(), [OSError]
    while todo:
        cls = todo.pop()
        out.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    # ours, whose modules may load after this one (a worker's traceback names them)
    return frozenset(out | {"IOError", "StoreWriteError", "DamagedFile"})


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
    if m and last.group(1) == "DamagedFile":  # it names the file and what to do, and the
        return m.group(1)  # step that read it, after the remedy, read as part of it
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
    if isinstance(exc, OSError) and exc.errno == errno.EROFS and exc.filename:
        return read_only(exc.filename)
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        return f"{exc.filename}: {text}"
    return text


def read_only(path: str | os.PathLike) -> str:
    """A write to `path` on a read-only mount, as `import` and `jobs` say it: the path and
    the directory that is not writable (`collect` and `process` said Python's `[Errno
    30] Read-only file system: '.../processed'`)."""
    from pathlib import Path

    where = next((d for d in Path(path).parents if d.is_dir()), Path(path).parent)
    return f"cannot write {path}: {where} is not writable ({os.strerror(errno.EROFS)})"


_CARET = re.compile(r"^\s*\^+\s*$")
_LINE = re.compile(r"^LINE (\d+): ?(.*)$")
_ENDS_SENTENCE = (".", "!", "?", ":", ";", ",")


def joined(text: str) -> str:
    """A message of several lines as one: its lines in order, after a line that ends a
    sentence with a space, else with `; `; DuckDB's `LINE N: SQL` and the caret under it
    become `(LINE N, column C: SQL)`; blank lines go."""
    lines = [x.rstrip() for x in str(text).splitlines()]
    out = ""
    for i, line in enumerate(lines):
        if not line.strip() or _CARET.match(line):
            continue
        m = _LINE.match(line)
        caret = lines[i + 1] if i + 1 < len(lines) and _CARET.match(lines[i + 1]) else None
        if m and out:
            prefix = len(line) - len(m.group(2))
            column = f", column {caret.index('^') - prefix + 1}" if caret else ""
            out += f" (LINE {m.group(1)}{column}: {m.group(2).strip()})"
            continue
        part = line.strip()
        out = f"{out}{' ' if out.endswith(_ENDS_SENTENCE) else '; '}{part}" if out else part
    return out


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it)."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _stdout_id() -> tuple[int, int] | None:
    try:
        st = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return st.st_dev, st.st_ino


_STDOUT_AT_START: list[tuple[int, int] | None] = []
"""What stdout was when the command started: rich answers a closed pipe by pointing
stdout at /dev/null and raising SystemExit(1) (`Console.on_broken_pipe`)."""


def _closed_pipe(exc: BaseException | None) -> bool:
    """Whether `exc` (or what caused it) is a write into a stdout its reader closed
    (or that rich replaced by /dev/null after one)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
            replaced = bool(_STDOUT_AT_START) and _STDOUT_AT_START[:1] != [_stdout_id()]
            return _stdout_closed() or replaced
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _click_closed_pipe() -> bool:
    """Whether click ended the command on a closed stdout: it wraps the streams so they
    flush quietly and exits 1, in standalone mode or not (click 8.5)."""
    wrapped = type(sys.stdout).__name__ == "_PacifyFlushWrapper"
    return wrapped and (_stdout_closed() or _STDOUT_AT_START[:1] != [_stdout_id()])


class _WholeWrites(io.FileIO):
    """stdout's file descriptor, every write made whole (or failed).

    Under PYTHONUNBUFFERED (or `python -u`) stdout is a text layer writing straight into
    the raw file, and a raw write may take only part of the data: a large write into a
    pipe whose reader closes it mid-way (`query ... | head -1`) wrote 64 KiB, was cut by
    SIGPIPE, and the text layer dropped the rest in silence, so the command exited 0
    with its output cut (and any signal arriving mid-write would cut output the same
    way). Here the rest is written too, so a closed pipe fails as EPIPE (exit 141) as
    with Python's buffered stdout, which already writes in a loop."""

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            n = super().write(view[done:])
            if n is None:  # a non-blocking stdout that is full: wait until it takes more
                import select

                select.select([], [self], [])
                continue
            done += n
        return done


def _whole_stdout() -> None:
    """Make stdout write whole when it is an unbuffered text layer over the raw file
    (PYTHONUNBUFFERED); stays unbuffered (every write goes out at once)."""
    out = sys.stdout
    if type(out) is not io.TextIOWrapper or type(getattr(out, "buffer", None)) is not io.FileIO:
        return
    try:
        raw = _WholeWrites(out.fileno(), "w", closefd=False)
    except (OSError, ValueError):
        return
    out.flush()
    sys.stdout = io.TextIOWrapper(
        raw,
        encoding=out.encoding,
        errors=out.errors,
        newline="\n",
        line_buffering=out.line_buffering,
        write_through=True,
    )


def _end_quietly(code: int = EXIT_CLOSED_PIPE) -> None:
    """Exit without a word after the reader closed stdout: what is still buffered goes
    to /dev/null, so Python's flush at exit cannot fail again ('Exception ignored ...
    BrokenPipeError', Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(code)


def _flush_stdout(code: int) -> None:
    """Flush stdout before exiting with `code`; a reader that closed it ends quietly
    (with `code` when the command failed anyway)."""
    try:
        sys.stdout.flush()
    except BaseException as exc:
        if not _closed_pipe(exc):
            raise
        _end_quietly(code or EXIT_CLOSED_PIPE)


def _quiet_unraisable(unraisable: Any) -> None:
    """Writers that a failure left behind try to flush when collected; on a full disk
    that fails again and Python would print a traceback after our one line."""
    if isinstance(unraisable.exc_value, OSError):
        return
    sys.__unraisablehook__(unraisable)


class _DropMachineErrors(logging.Filter):
    """Beam logs a worker's exception with its traceback before re-raising it; for an
    OSError the one line below says it all, and for a stop (Ctrl-C, SIGTERM) the line
    of `interrupts`; for a worker lane that died, the runner's `WorkerLost`. A pipeline
    step's exception, logged as Beam re-raises it with the step's name (`[while
    running 'STEP']`), is said by whoever catches it: one line for the command's own
    errors (a ValueError came after Beam's 20-line traceback), Python's traceback for
    a bug, which holds the same frames."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record.msg, "_tagged_with_step", False):  # `DoFnRunner._reraise_augmented`
            return False
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, OSError) or str(record.msg).startswith("OSError"):
            return False
        if isinstance(exc, KeyboardInterrupt) or isinstance(record.msg, KeyboardInterrupt):
            return False  # our stop, re-raised by Beam: `interrupts` says it in one line
        if isinstance(exc, BrokenProcessPool):
            return False  # a worker lane died: the runner says how, in one line (WorkerLost)
        # a worker process's log of the same failure, relayed by the runner
        return not (record.levelno >= logging.ERROR and _worker_failure(record.getMessage()))


def run_guarded(cli: Any) -> None:
    """Run the click group; a machine failure ends it with one line on stderr, an error
    message of several lines is printed as one, a closed stdout ends it quietly (141),
    and a Ctrl-C or SIGTERM is said as one line (`interrupted (Ctrl-C): ...`) with 130
    or 143 whatever the command ended with (`cli_stops`), never click's `Aborted!` and 1.

    Click's standalone mode is done here (`standalone_mode=False`): it would end a
    closed pipe with a silent 1, and print a message of several lines as it is."""
    for name in ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service"):
        logging.getLogger(name).addFilter(_DropMachineErrors())
    cli_stops()
    try:
        _run(cli)
    except KeyboardInterrupt as exc:  # a stop in our own code, around the command
        _stopped_exit(_stop_of(exc) or signal.SIGINT)
    finally:  # the status is decided: a stop from now on ends the process at once
        if threading.current_thread() is threading.main_thread():
            for s in STOP_NAMES:
                if signal.getsignal(s) is not signal.SIG_IGN:
                    signal.signal(s, _late_stop)


def _run(cli: Any) -> None:
    import click

    obj: dict[str, Any] = {}
    _whole_stdout()
    _STDOUT_AT_START[:] = [_stdout_id()]
    try:
        rv = cli.main(obj=obj, standalone_mode=False)
        # without standalone mode click returns an Exit's code (`--help`: 0), else what
        # the command returned (None)
        code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except SystemExit as exc:
        if _closed_pipe(exc.__context__) or _click_closed_pipe():
            _end_quietly()
        if _STOPS and exc.code not in {128 + s for s in STOP_NAMES}:
            _stopped_exit(_STOPS[0])  # a command's exit on the way out of the stop
        _flush_stdout(0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1)
        raise
    except click.ClickException as exc:
        if _closed_pipe(exc):
            _end_quietly()
        if _STOPS:  # DuckDB's error of the interrupt, said as a ClickException
            _stopped_exit(_STOPS[0])
        exc.message = joined(exc.message)
        _flush_stdout(exc.exit_code)
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort as exc:  # click's answer to an interrupt (or to EOF at a prompt)
        stop = _stop_of(exc)
        if stop is not None:
            _stopped_exit(stop)
        _flush_stdout(1)
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if _closed_pipe(exc):
            _end_quietly()
        if _STOPS:  # DuckDB's `Query interrupted`, Beam's re-raised interrupt, ...
            _stopped_exit(_STOPS[0])
        found = _machine_error(exc)
        if found is None:
            raise
        sys.unraisablehook = _quiet_unraisable
        from worldtrace.schemas import Store

        st = Store.at(obj.get("store"))
        click.echo(f"error: {one_line(found, str(st.jobs_db), str(st.root))}", err=True)
        sys.exit(EXIT_MACHINE)
    if _STOPS:  # the command went on after the stop (an interrupt caught and dropped)
        _stopped_exit(_STOPS[0])
    _flush_stdout(0)
    sys.exit(code)
