"""The `worldtrace` command line (docs/cli.md): the root group and `main`.

Commands live in `worldtrace.commands`, one module per group, each listing its commands
in COMMANDS: a new group is one module there plus one entry in COMMAND_MODULES. Heavy
modules (and options generated from config dataclasses) load when a command runs, so
`worldtrace --help` stays instant. The global options (`--store`, `--create`) are added
here to the root and to every command, so they may come before or after the command.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading

import click

from .commands import (
    collect,
    data,
    export,
    gc,
    global_options,
    jobs,
    process,
    query,
    redact,
    system,
)
from .options import ConfigCommand
from .stopping import ENDS_ON_A_STOP

COMMAND_MODULES = (data, collect, jobs, process, export, query, redact, gc, system)
REDACT_CONFIG_ENV = "WORLDTRACE_REDACT_CONFIG"
"""`schemas.redact_rules.CONFIG_ENV`, named here so that a command run without it does not
load that module to learn its name (`check_redact_config`; a test ties the two)."""
_AS_MAIN: list[bool] = []
"""Set by `main`: this process is the `worldtrace` command, its signal handling the CLI's
(a test's CliRunner runs commands in a process whose handling is the test's)."""

EPILOG = """\b
Example:
  worldtrace --store runs/ stats       (the same as: worldtrace stats --store runs/)
  worldtrace import --create ~/runs/   (a new store needs --create; reading commands fail)
"""


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """worldtrace: collect, process, query and export trajectories for language world models."""
    ctx.ensure_object(dict)
    from .errors import stop_says

    named = _invoked(ctx)  # its options not yet read
    stop_says(lambda: f"{named} had not started its work: nothing was written")
    if ctx.invoked_subcommand != "doctor":  # doctor reports a bad file among its checks
        check_redact_config()
    if _AS_MAIN:
        pyarrow_without_pandas()


def pyarrow_without_pandas() -> None:
    """pyarrow loads no pandas in the console script's process: `import pandas` started
    by C code is refused (`_NoPandasFromC`) for the command's lifetime.

    pyarrow imports pandas (0.2-0.3 s of CPU: a third of `query` on a small store) on
    the first array it makes from Python values or converts to numpy, to tell pandas
    objects among them or to know pandas' own null values; the command hands it none.
    It takes the failed import for "no pandas" and asks no more. Beam's optional probe
    is refused too (`OPTIONAL_PANDAS`: 0.3-0.4 s of `process`' ~2 s start on a small
    store); any other `import pandas` statement or `importlib` still loads it. This
    process only: a library user's `pa.array(series)` must still see a Series
    (`_AS_MAIN`)."""
    if "pandas" not in sys.modules and _NO_PANDAS not in sys.meta_path:
        sys.meta_path.insert(0, _NO_PANDAS)


OPTIONAL_PANDAS = frozenset({"apache_beam.typehints", "apache_beam.io.textio"})
"""Modules whose `import pandas` is a probe in `try: ... except ImportError`: Beam's
typehints package registers pandas batch converters, which no DoFn of ours declares,
and textio defines its CSV and JSON DataFrame transforms, which we do not use (Beam's
DataFrame API and interactive runner import pandas themselves)."""


class _NoPandasFromC:
    """An import finder that refuses `import pandas` when C code started it (pyarrow's
    Cython and C++ do; `errors.import_from_c`) or a module of `OPTIONAL_PANDAS` asks."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name != "pandas":
            return None
        from .errors import import_from_c, importer

        caller = sys._getframe(1)
        if importer(caller) in OPTIONAL_PANDAS or import_from_c(caller) is not None:
            raise ModuleNotFoundError(
                "pandas is not loaded for pyarrow's and Beam's own checks in a worldtrace command",
                name=name,
            )
        return None


_NO_PANDAS = _NoPandasFromC()


def _invoked(ctx: click.Context) -> str:
    """The command about to run, as typed: `worldtrace jobs submit`, not the group alone
    (`worldtrace jobs had not started its work`). Click reads a group's subcommand after
    this callback, so it is looked up among the arguments: the first after the group's
    name that names one of its commands (as `jobs._subcommand_first` finds it)."""
    name = ctx.invoked_subcommand
    named = f"{ctx.command_path} {name}"
    group = ctx.command.get_command(ctx, name) if name else None
    if isinstance(group, click.Group):
        args = sys.argv[1:]
        after = args[args.index(name) + 1 :] if name in args else []
        sub = next((a for a in after if a in group.commands), None)
        if sub is not None:
            named += f" {sub}"
    return named


def check_redact_config() -> None:
    """Read the redaction rules `$WORLDTRACE_REDACT_CONFIG` names before any command runs:
    a bad file failed inside whatever read it first (a collector, a pipeline worker) with
    a traceback, where it deserves one line naming the file, its line and key. Unset,
    nothing is loaded: the rules' module (and the schemas package under it: pyarrow,
    DuckDB, numpy) cost every command ~0.2-0.3 s of CPU at its start, `jobs list` two
    thirds of its run."""
    path = os.environ.get(REDACT_CONFIG_ENV)
    if not path:
        return
    from worldtrace.schemas.parsing import ConfigError
    from worldtrace.schemas.redact import active_config

    try:
        active_config()
    except ConfigError as exc:
        raise click.ClickException(f"${REDACT_CONFIG_ENV}: {exc}") from None
    except OSError as exc:
        raise click.ClickException(
            f"${REDACT_CONFIG_ENV}: cannot read {path}: {exc.strerror}"
        ) from None


def add_global_options(command: click.Command) -> None:
    """Accept the global options on `command` and, for a group, on everything under it."""
    # a ConfigCommand builds its generated options when `params` is first read; adding
    # to the list behind it keeps listing the commands free of config imports
    params = command._params if isinstance(command, ConfigCommand) else command.params
    params.extend(global_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)


def say_when_stopped(command: click.Command) -> None:
    """What a Ctrl-C or SIGTERM says while `command` (and each under it) runs, unless it
    says more (`errors.stop_says`: `stats` wrote nothing, `process` published nothing):
    that it stopped before it ended (docs/cli.md)."""
    callback = command.callback
    if callback is not None:

        @functools.wraps(callback)
        def running(*args, **kwargs):
            from .errors import stop_says

            path = click.get_current_context().command_path
            stop_says(lambda: f"{path} stopped before it ended")
            if _AS_MAIN and command.name in ENDS_ON_A_STOP:
                return _to_its_end(callback, *args, **kwargs)
            return callback(*args, **kwargs)

        command.callback = running
    for sub in getattr(command, "commands", {}).values():
        say_when_stopped(sub)


cli.params[:0] = global_options()
for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        add_global_options(_command)
        say_when_stopped(_command)
        cli.add_command(_command)


def _to_its_end(callback, *args, **kwargs):
    """Run a command of `ENDS_ON_A_STOP`: once it returned its status stands, a Ctrl-C or
    SIGTERM from then on ignored, and one its own handling did not take (the instant
    before it; its summary, after it) ends it as one that handling took (exit 0).

    Found (hunt 1206z): a Ctrl-C just after `worker` printed its summary (its attempts
    finished or given back, its stop recorded in the job store) said `interrupted
    (Ctrl-C): worldtrace worker stopped before it ended` with 130, printed a traceback
    (`run_guarded` changing handlers), or killed it in silence once the interpreter's
    shutdown had put the default action back (130 for a shell, -2 for a supervisor): a
    failure, for the stop a supervisor makes of a worker that had ended. An ignored
    signal outlives that shutdown, which a handler does not."""
    from .errors import STOP_NAMES, stop_answered

    def stands() -> None:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_NAMES:
                signal.signal(s, signal.SIG_IGN)

    try:
        try:
            return callback(*args, **kwargs)
        finally:  # after its status (1: worker errors; 130: a second stop)
            stands()
    except KeyboardInterrupt:  # the CLI's handler took it (`cli_stops`): not an interrupt
        stands()
        stop_answered()
        return None


class _Said(logging.Formatter):
    """A warning of ours as the CLI says its own: `warning: ...`, control characters
    escaped (a message may quote what a server or file holds)."""

    def format(self, record: logging.LogRecord) -> str:
        from .output import printable

        return f"{record.levelname.lower()}: {printable(super().format(record))}"


class _Stderr(logging.StreamHandler):
    """stderr as it is when a message is written, not when the handler was made: a live
    progress display (rich) puts its own in front, which prints above the bar."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ sets one: stderr is read live
        pass


def show_our_warnings() -> None:
    """Beam's import-time warnings are noise here (the root logger says only errors), but
    ours are the user's to read (an explorer that set a tool aside, a warm container not
    handed out): the `worldtrace` loggers say warnings on stderr."""
    logging.getLogger().setLevel(logging.ERROR)
    ours = logging.getLogger("worldtrace")
    if not ours.handlers:
        handler = _Stderr()
        handler.setFormatter(_Said())
        ours.addHandler(handler)
    ours.setLevel(logging.WARNING)
    ours.propagate = False


def main() -> None:
    from .errors import cli_stops, run_guarded

    _AS_MAIN[:] = [True]
    cli_stops()  # first: a Ctrl-C or SIGTERM from here on is said in one line (130, 143)
    show_our_warnings()
    run_guarded(cli)  # a full disk or a locked jobs.db: one line, no traceback


if __name__ == "__main__":
    main()
