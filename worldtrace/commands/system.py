"""About the installation: `doctor`, `demo`, `version`."""

from __future__ import annotations

import sys

import click

from worldtrace.demo import SECTION_NAMES

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


@click.command(
    epilog="Example: worldtrace demo --sections docker,web --episodes 1\n\n"
    "Without --store the demo writes into ./worldtrace-demo, never into your default store."
)
@click.option(
    "--sections",
    default=",".join(SECTION_NAMES),
    show_default=True,
    help="Comma-separated environments to collect from.",
)
@click.option(
    "--episodes", default=2, show_default=True, help="Episodes per task of the explorer jobs."
)
@click.pass_context
def demo(ctx: click.Context, sections: str, episodes: int) -> None:
    """The main job end to end on embedded defaults: collect every domain from real
    environments, validate, process, export, stats, report."""
    from worldtrace.demo import DEMO_STORE, run_demo
    from worldtrace.schemas import Store

    chosen = tuple(s.strip() for s in sections.split(",") if s.strip())
    unknown = sorted(set(chosen) - set(SECTION_NAMES))
    if unknown:
        raise click.BadParameter(
            f"unknown section(s) {', '.join(unknown)} (known: {', '.join(SECTION_NAMES)})",
            param_hint="--sections",
        )
    root = store(ctx, create=True) if ctx.find_root().obj.get("store") else Store.at(DEMO_STORE)
    sys.exit(run_demo(root, sections=chosen, episodes=episodes))


COMMANDS = (doctor, demo, version)
