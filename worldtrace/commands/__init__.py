"""The CLI's commands, one module per command group; each lists its commands in COMMANDS.

Commands stay thin: parse options, call the library, print (printing lives in
`worldtrace.output`). Heavy modules are imported inside each command.
"""

from __future__ import annotations

import click

EXIT_PROBLEMS = 1
"""Exit status when the input had problems (validation, import, failed attempts)."""


def store(ctx: click.Context):
    """The store the root `--store` option (or its default) names."""
    from worldtrace.schemas import Store

    return Store.at(ctx.obj.get("store"))
