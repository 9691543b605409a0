"""The CLI's commands, one module per command group; each lists its commands in COMMANDS.

Commands stay thin: parse options, call the library, print (printing lives in
`worldtrace.output`). Heavy modules are imported inside each command.

Global options (`--store`, `--create`) are accepted before the command and after it
(`worldtrace --store X stats` == `worldtrace stats --store X`): `cli.py` adds
`global_options()` to the root group and to every command and group under it, and each
copy writes into the one `ctx.obj` that commands read through `store(ctx)`.
"""

from __future__ import annotations

from typing import Any

import click

EXIT_PROBLEMS = 1
"""Exit status when the input had problems (validation, import) or a command could not
do its work (a worker's own errors, a job file `collect` cannot run); `collect` exits 3
when an episode failed for good (`commands.collect.EXIT_EPISODES_FAILED`)."""

STORE_KEY, CREATE_KEY = "store", "create"
"""Where the global options are kept in `ctx.obj`."""


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep a global option in the shared `ctx.obj`; the same option given twice with
    different values is an error rather than a silent choice of one. Two spellings of
    one directory (`--store s1 ... --store ./s1`) are one value."""
    if value is None or value is False:
        return value
    obj = ctx.ensure_object(dict)
    key = param.name or ""
    if obj.get(key) not in (None, False) and not _same(key, obj[key], value):
        raise click.BadParameter(f"given twice with different values ({obj[key]}, {value})")
    obj[key] = value
    return value


def _same(key: str, first: Any, then: Any) -> bool:
    """Whether two values of global option `key` name the same thing: a path by where
    it leads (resolved), anything else as it is."""
    import os

    if first == then:
        return True
    if key != STORE_KEY:
        return False
    return os.path.realpath(os.path.expanduser(first)) == os.path.realpath(os.path.expanduser(then))


def global_options() -> list[click.Option]:
    """Fresh copies of the global options, for the root group and for each command."""
    return [
        click.Option(
            ["--store"],
            type=click.Path(file_okay=False),
            default=None,
            expose_value=False,
            callback=_remember,
            help="Store root (default ./worldtrace-data or $WORLDTRACE_STORE); "
            "before or after the command.",
        ),
        click.Option(
            ["--create"],
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_remember,
            help="Make the store if it does not exist (only commands that write: "
            "collect, import, process --input, jobs submit, worker, scheduler, demo).",
        ),
    ]


def store_path(ctx: click.Context):
    """The store the options name, whether or not it exists (for path checks only)."""
    from worldtrace.schemas import Store

    return Store.at(ctx.find_root().ensure_object(dict).get(STORE_KEY))


def store(ctx: click.Context, create: bool = False):
    """The store `--store` (or $WORLDTRACE_STORE, or the default) names, which must exist.

    `create`: the command writes, so `--create` may make a missing store. A store that
    does not exist is a one-line error naming its path (exit 1): reading it would only
    print "no data yet", and writing into a mistyped path would scatter data.
    """
    from worldtrace.schemas import Store

    obj = ctx.find_root().ensure_object(dict)
    s = Store.at(obj.get(STORE_KEY))
    if s.root.is_dir():
        return s
    if s.root.exists():
        raise click.ClickException(f"store {s.root} is not a directory")
    if create and obj.get(CREATE_KEY):
        s.root.mkdir(parents=True)
        return s
    hint = "pass --create to make it" if create else _reading_hint(ctx, obj)
    raise click.ClickException(f"store {s.root} does not exist: {hint}")


STORE_MAKERS = ("collect", "import", "worker", "jobs submit", "scheduler", "demo")
"""The commands that make a missing store with --create (docs/cli.md), beside `process
--input PATH`: those calling `store(ctx, create=True)`."""


def _reading_hint(ctx: click.Context, obj: dict) -> str:
    """What to do about a missing store for a command that reads one: check the path,
    or make the store with a command that takes --create. A --create given to this
    command is said to do nothing here; `process` says its `--input PATH --create`."""
    process = ctx.command.name == "process"  # with --input it would make the store
    named = f"`{ctx.command_path}`" + (" without --input" if process else "")
    if obj.get(CREATE_KEY):  # given, and not taken: said, not ignored in silence
        works = f"--create does not apply to {named}: it works on a store that exists"
    else:
        works = f"{named} works on a store that exists"
    makers = ", ".join(f"`{c}`" for c in STORE_MAKERS[:-1]) + f" and `{STORE_MAKERS[-1]}`"
    if process:
        made = (
            f"`{ctx.command_path} --input PATH --create` makes one from PATH, as {makers} "
            "do with --create"
        )
    else:
        made = (
            f"{', '.join(f'`{c}`' for c in STORE_MAKERS[:-1])}, `process --input PATH` and "
            f"`{STORE_MAKERS[-1]}` make a new one with --create"
        )
    return f"check {_named(obj)}; {works} ({made})"


def _named(obj: dict) -> str:
    """Which setting chose the store, for the error message."""
    import os

    from worldtrace.schemas import fields as F

    if obj.get(STORE_KEY):
        return "--store"
    if os.environ.get(F.STORE_ENV):
        return f"${F.STORE_ENV}"
    return f"--store (the default is ./{F.DEFAULT_STORE})"


def progress_every_option(command):
    """`--progress-every SECONDS`: long commands show a bar on a terminal, and a plain
    progress line this often otherwise (logs of batch runs)."""
    return click.option(
        "--progress-every",
        default=5.0,
        show_default=True,
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="When stderr is not a terminal, a progress line this often (a terminal gets a bar).",
    )(command)


class Seconds(click.FloatRange):
    """A number of seconds in a range: click's FloatRange lets `nan` through (no
    comparison fails it), which `time.sleep` then refused with a traceback after the
    command had started (`jobs list --watch --interval nan`); a usage error naming the
    option instead. Give it a finite `max` where the value is slept (`inf` overflowed)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        import math

        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value} is not a number of seconds", param, ctx)
        return seconds


def show_option(default: int, help: str):
    """`--show N`: how many problems or findings are listed (all are counted); a count,
    so a negative one is a usage error, not `... N more` of nothing."""
    return click.option(
        "--show",
        type=click.IntRange(min=0),
        default=default,
        show_default=True,
        help=help,
    )
