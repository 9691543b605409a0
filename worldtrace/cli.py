"""The `worldtrace` command line (DESIGN.md "CLI contract"): the root group and `main`.

Commands live in `worldtrace.commands`, one module per group, each listing its commands
in COMMANDS: a new group is one module there plus one entry in COMMAND_MODULES. Heavy
modules (and options generated from config dataclasses) load when a command runs, so
`worldtrace --help` stays instant.
"""

from __future__ import annotations

import click

from .commands import collect, data, export, process, query, redact, system

COMMAND_MODULES = (data, collect, process, export, query, system, redact)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="Store root (default ./worldtrace-data or $WORLDTRACE_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """worldtrace: collect, process, query and export trajectories for language world models."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store


for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # Beam's import-time warnings are noise here
    from .errors import run_guarded

    run_guarded(cli)  # a full disk or a locked jobs.db: one line, no traceback


if __name__ == "__main__":
    main()
