"""About the installation: `doctor`, `demo`, `version`, and `android-sim` (the device simulator)."""

from __future__ import annotations

import sys

import click

from worldtrace.demo import SECTION_NAMES
from worldtrace.sandboxes.android_sim_cli import command as android_sim

from . import EXIT_PROBLEMS, store


@click.command(epilog="\b\nExample:\n  worldtrace version")
def version() -> None:
    """Print the version and the record schema version."""
    from worldtrace import __version__
    from worldtrace.schemas.fields import SCHEMA_VERSION

    click.echo(f"worldtrace {__version__} ({SCHEMA_VERSION})")


DOCTOR_EPILOG = """\b
Example:
  worldtrace doctor --store runs/     (also lists shards of runs/ that do not read)
  worldtrace doctor --store runs/ --store-only     (after a crash: the store's checks alone)
  worldtrace doctor --json | jq -r '.checks[] | select(.ok | not) | .fix'
"""


@click.command(epilog=DOCTOR_EPILOG)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document on stdout (docs/cli.md)."
)
@click.option(
    "--store-only",
    is_flag=True,
    help="Only the store's checks (shards, swaps, export manifests, job store, journals, "
    "stopped attempts), without probing the machine's programs (~3 s).",
)
def doctor(as_json: bool, store_only: bool) -> None:
    """Report what this machine has (docker, chromium, node, MCP, adb, tokenizer, the
    redaction screen) and the store's unreadable shards and export manifests, with how to
    fix each gap; exit 1 when a check found a problem (FAIL: a damaged file, a file a
    variable names that does not load), 0 when only parts are missing (MISS)."""
    from worldtrace.doctor import doctor_document, problems, run_checks
    from worldtrace.output import print_checks, print_json

    checks = run_checks(machine=not store_only)
    if as_json:
        print_json(doctor_document(checks))
    else:
        print_checks(checks)
    if problems(checks):
        sys.exit(EXIT_PROBLEMS)


@click.command(epilog="\b\nExample:\n  worldtrace demo --sections docker,web --episodes 1\n")
@click.option(
    "--sections",
    default=",".join(SECTION_NAMES),
    show_default=True,
    help="Comma-separated environments to collect from.",
)
@click.option(
    "--episodes",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Episodes per task of the MCP, search and web explorer jobs (the other jobs, "
    "android's explorer too, run a fixed number).",
)
@click.pass_context
def demo(ctx: click.Context, sections: str, episodes: int) -> None:
    """The main job end to end on embedded defaults: collect every domain from real
    environments, validate, process, export, stats, report.

    Without --store the demo writes into ./worldtrace-demo, never into your default
    store."""
    from worldtrace.demo import DEMO_STORE, run_demo
    from worldtrace.schemas import Store

    chosen = tuple(s.strip() for s in sections.split(",") if s.strip())
    unknown = sorted(set(chosen) - set(SECTION_NAMES))
    if unknown or not chosen:  # none: nothing collected, then `process` found no input
        raise click.BadParameter(
            f"unknown section(s) {', '.join(unknown)} (known: {', '.join(SECTION_NAMES)})"
            if unknown
            else f"names no section (known: {', '.join(SECTION_NAMES)})",
            param_hint="--sections",
        )
    root = store(ctx, create=True) if ctx.find_root().obj.get("store") else Store.at(DEMO_STORE)
    sys.exit(run_demo(root, sections=chosen, episodes=episodes))


COMMANDS = (doctor, demo, version, android_sim)
