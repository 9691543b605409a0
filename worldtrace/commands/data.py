"""Data coming in: `validate` checks records, `import` converts foreign trajectories."""

from __future__ import annotations

import sys

import click

from worldtrace.options import RegistryChoice

from . import EXIT_PROBLEMS, store


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--quiet", "-q", is_flag=True, help="Print only the problems.")
def validate(paths: tuple[str, ...], quiet: bool) -> None:
    """Validate trajectory shards (Parquet) or JSONL of records; exit 1 if anything is invalid."""
    from worldtrace.schemas.store import check_files, input_files

    files = input_files(paths)
    if not files:
        click.echo("no Parquet or JSONL files found", err=True)
        sys.exit(EXIT_PROBLEMS)
    records = problems = 0
    for is_record, found in check_files(files):
        records += is_record
        for p in found:
            problems += 1
            click.echo(str(p))
    if not quiet:
        click.echo(f"{len(files)} file(s), {records} record(s), {problems} problem(s)", err=True)
    sys.exit(EXIT_PROBLEMS if problems else 0)


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=RegistryChoice("worldtrace.collectors.importers:FORMATS", first=("auto",)),
    help="Input format; auto detects it per file from content.",
)
@click.option(
    "--domain",
    type=RegistryChoice("worldtrace.schemas.fields:DOMAINS"),
    help="Force the domain instead of inferring it.",
)
@click.option("--strict", is_flag=True, help="Exit 1 if any record could not be imported.")
@click.option("--show", default=20, show_default=True, help="Problems listed (all are counted).")
@click.pass_context
def import_(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    domain: str | None,
    strict: bool,
    show: int,
) -> None:
    """Import trajectories recorded elsewhere into raw shards (reasoning kept apart, never
    in the action): SWE-agent .traj, mini-swe-agent .traj.json, Harbor ATIF, OpenAI chat
    messages with tool calls, ShareGPT with function calls, AgentWorldBench JSONL.
    Directories are walked; formats are detected per file (and per JSONL line)."""
    from worldtrace.collectors.importers import import_paths
    from worldtrace.output import print_import_report

    dest = store(ctx, create=True).raw / "import"
    report = import_paths(paths, dest, fmt, domain)
    print_import_report(report, dest, show)
    total = sum(report.imported.values())
    if (strict and report.errors) or (not total and report.errors) or not report.files:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = (validate, import_)
