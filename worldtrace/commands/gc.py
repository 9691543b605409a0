"""`gc`: remove what stopped writers left in the store, and containers of dead owners."""

from __future__ import annotations

import sys

import click

from . import EXIT_PROBLEMS, store


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`30d`, `12h`, `90m`, `45s` -> seconds."""
    if value is None:
        return None
    from worldtrace.collectors.jobspec import parse_every

    try:
        return parse_every(value, zero=True).total_seconds()  # 0s: whatever its age
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


EPILOG = """\b
Example:
  worldtrace gc --dry-run                         (list what would go, remove nothing)
  worldtrace gc --exports-older-than 30d          (also exports written 30+ days ago)
  worldtrace --store runs/ gc --min-age 6h --no-containers
"""


@click.command(epilog=EPILOG)
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
@click.option(
    "--min-age",
    default="1h",
    show_default=True,
    metavar="AGE",
    callback=_duration,
    help="Leftover files are removed only when untouched this long and open in no process "
    "(gc goes by age, not by the pid some temp names carry: see docs/cli.md).",
)
@click.option(
    "--exports-older-than",
    callback=_duration,
    metavar="AGE",
    help="Also remove exports under export/ whose manifest is older than AGE (e.g. 30d).",
)
@click.option(
    "--containers/--no-containers",
    default=True,
    show_default=True,
    help="Also remove sandbox containers, volumes and MCP episode folders whose owner process "
    "is dead (containers of this $WORLDTRACE_SANDBOX_SCOPE only).",
)
@click.pass_context
def gc(
    ctx: click.Context,
    dry_run: bool,
    min_age: float,
    exports_older_than: float | None,
    containers: bool,
) -> None:
    """Remove leftovers of writers that stopped: temp files (.tmp-*), `process` work
    directories (.run-*), export staging (.staging-*), swapped-out tables (.old-*),
    journals whose trajectory is published, containers of dead owners, and old exports
    on request. Prints each item with its size and why; nothing a live process uses."""
    from worldtrace import garbage
    from worldtrace.freshness import settled
    from worldtrace.schemas.publish import pending
    from worldtrace.schemas.tempfiles import DamagedFile

    damaged = None
    try:
        if dry_run:
            pending(store(ctx).processed)  # only read: is the journal whole?
        else:  # a publish a dead `process` left half done is finished, not removed, and
            settled(store(ctx))  # an export stopped between its renames put back
    except DamagedFile as exc:  # its run and tables are kept (`garbage.find`); said last
        damaged = exc
    items = garbage.find(store(ctx), min_age_s=min_age, exports_older_than_s=exports_older_than)
    notes: list[str] = []
    if containers:
        found, note = garbage.containers(dry_run)
        items.extend(found)
        notes.extend([note] if note else [])
        items.extend(garbage.mcp_workdirs(dry_run))
    verb = "would remove" if dry_run else "removed"
    freed = n = failed = 0
    for item in items:
        action, why = (verb if item.remove else "kept"), item.why
        if item.remove and item.kind not in garbage.SWEPT_BY_OWNER and not dry_run:
            try:
                garbage.remove(item)
            except OSError as exc:  # ours to report: the item stays, gc exits 1
                action, why, failed = "failed", f"{why}; {exc.strerror or exc}", failed + 1
        size = garbage.human_size(item.size)
        click.echo(f"{action:<12}  {size:>8}  {item.target}  ({why})")
        if action == verb:
            n += 1
            freed += item.size or 0
    for note in notes:
        click.echo(note, err=True)
    total = f"{n} item(s), {garbage.human_size(freed)}"
    click.echo(
        f"gc: {total} would be removed (dry run)" if dry_run else f"gc: removed {total}", err=True
    )
    if failed:
        click.echo(f"gc: {failed} item(s) could not be removed", err=True)
    if damaged is not None:
        click.echo(f"gc: {damaged}", err=True)
    if failed or damaged is not None:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = (gc,)
