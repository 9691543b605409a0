"""Which status a stop before a command's own handling ends it with: a module of its own,
light enough for `worldtrace.entry` to load while it guards the CLI's loading, and free of
signal handlers (`entry` takes them at import; `cli` and `errors` must not)."""

from __future__ import annotations

import sys

ENDS_ON_A_STOP = ("worker",)
"""Commands whose stop (Ctrl-C, SIGTERM) is their ordinary end, exit 0 (docs/collect.md,
"Stopping"), whenever it comes: while the CLI loads (`entry`), before the command starts
(`errors.cli_stops`) and while it runs (`cli._to_its_end`). Until 12-06 a worker stopped
in its first ~0.5 s exited 130 or 143 (hunt s)."""
VALUED_GLOBALS = ("--store",)
"""The group's own options that take a value (`commands.global_options`)."""


def command_of(argv: list[str]) -> str | None:
    """The subcommand `argv` (the arguments after the program) names: its first word that
    is no option nor a global option's value."""
    words = iter(argv)
    for word in words:
        if word in VALUED_GLOBALS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def stop_status(signum: int) -> int:
    """The exit status of a stop by `signum` outside the command's own handling: 0 for a
    command it ends as usual (`ENDS_ON_A_STOP`), else 128 + signum."""
    return 0 if command_of(sys.argv[1:]) in ENDS_ON_A_STOP else 128 + signum
