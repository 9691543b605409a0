"""About the installation: `doctor`, `demo`, `version`."""

from __future__ import annotations

import sys

import click

from . import store


@click.command()
def version() -> None:
    """Print the version and the record schema version."""
    from worldtrace import __version__
    from worldtrace.schemas.fields import SCHEMA_VERSION

    click.echo(f"worldtrace {__version__} ({SCHEMA_VERSION})")


@click.command()
def doctor() -> None:
    """Report what this machine has (docker, chromium, node, MCP, adb, tokenizer) and how to fix gaps."""
    from worldtrace.doctor import run_checks
    from worldtrace.output import print_checks

    print_checks(run_checks())


@click.command()
@click.option(
    "--episodes",
    default=300,
    show_default=True,
    help="Generated trajectories added to the collected ones.",
)
@click.pass_context
def demo(ctx: click.Context, episodes: int) -> None:
    """The main job end to end on embedded defaults."""
    from worldtrace.demo import run_demo

    sys.exit(run_demo(store(ctx, create=True), episodes=episodes))


COMMANDS = (doctor, demo, version)
