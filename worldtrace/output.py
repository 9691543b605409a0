"""What commands print: rich tables, the processing accounting, query results.

Kept apart from the commands so they stay parse -> call -> print, and so a new command
reuses the same tables. rich and the query libraries are imported inside each function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

QUERY_FORMATS = ("table", "csv", "json", "parquet")
"""What `emit` writes a query result as."""


def rows_table(rows: list[dict], title: str | None = None):
    """A rich table of dict rows (columns from the first row; None prints empty)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in rows[0] if rows else []:
        t.add_column(col)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r.values()))
    return t


def print_table(table: Any) -> None:
    from rich.console import Console

    Console().print(table)


def print_checks(checks: list) -> None:
    """`worldtrace doctor`: one line per check, the fix under each gap, then a count."""
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        line = f"[{mark}] {c.name.ljust(width)}  {c.detail}"
        if c.fix:
            line += f"\n       {' ' * width}  -> {c.fix}"
        click.echo(line)
    missing = sum(not c.ok for c in checks)
    click.echo(f"{len(checks) - missing}/{len(checks)} available")


def print_import_report(report: Any, dest: Path, show: int) -> None:
    """Counts per format and problem kind; the first `show` problems on stderr."""
    from rich.table import Table

    t = Table(title=f"import: {report.files} file(s) -> {dest}")
    t.add_column("")
    t.add_column("kind")
    t.add_column("count", justify="right")
    for name, n in sorted(report.imported.items()):
        t.add_row("imported", name, str(n))
    for name, n in sorted(report.present.items()):
        t.add_row("already present", name, str(n))
    for kind, n in sorted(report.errors.items()):
        t.add_row("error", kind, str(n))
    for kind, n in sorted(report.warnings.items()):
        t.add_row("warning", kind, str(n))
    print_table(t)
    for p in report.problems[:show]:
        click.echo(str(p), err=True)
    if len(report.problems) > show:
        click.echo(f"... {len(report.problems) - show} more", err=True)


def print_collect_result(result: Any) -> None:
    """One line per attempt, then where the shards went."""
    for t in result.trajectories:
        click.echo(
            f"{t.trajectory_id} {t.domain} {t.source.episode_id} attempt {t.source.attempt}: {t.outcome.status} ({len(t.turns)} turns)"
        )
    click.echo(
        f"{len(result.trajectories)} trajectories -> {', '.join(str(p) for p in result.shards)}"
    )


def print_job(job: dict) -> None:
    """A job's fields on one line, then its episodes (long ids and errors shortened)."""
    episodes = []
    for e in job.pop("episode_rows"):
        row = {
            **e,
            "error": (e["error"] or "")[:60],
            "trajectory_id": (e["trajectory_id"] or "")[:12],
        }
        row.pop("worker", None)
        episodes.append(row)
    job.pop("spec_json")
    click.echo("  ".join(f"{k}={v}" for k, v in job.items()))
    print_table(rows_table(episodes))


def print_accounting(manifest: dict) -> None:
    """A processing run's trajectory accounting and the counters explaining it."""
    from rich.table import Table

    acc, counters = manifest["accounting"], manifest["counters"]
    t = Table(title=f"process run {manifest['run_id']} ({manifest['seconds']} s)")
    t.add_column("trajectories")
    t.add_column("count", justify="right")
    for k in ("in", "kept", "filtered", "duplicates", "rejected"):
        t.add_row(k, str(acc[k]))
    for k, v in counters.items():
        if k.startswith(("filtered.", "turns_removed.", "duplicates.", "category.")):
            t.add_row(f"  {k}", str(v))
    print_table(t)
    if not acc["balanced"]:
        click.echo("warning: in != kept + filtered + duplicates + rejected", err=True)


def print_export(counts: dict, output: str) -> None:
    c = counts
    click.echo(
        f"exported {c['samples']} samples ({c['rows']} rows, {c['tokens']} tokens, "
        f"{c['loss_tokens']} loss tokens) from {c['trajectories']} trajectories -> {output}"
    )


def emit(con, sql: str, fmt: str, output: str | None, max_rows: int) -> None:
    """Run `sql` and write its result as a table, CSV, JSON or Parquet (file or stdout)."""
    if fmt == "table":
        from rich.console import Console

        from .summary import result_table

        cur = con.execute(sql)
        if cur.description is None:
            click.echo("ok")
            return
        table = result_table(cur, max_rows=max_rows)
        if output:
            with open(output, "w") as fh:
                Console(file=fh, width=200).print(table)
        else:
            Console().print(table)
        return
    rel = con.sql(sql)
    if rel is None:
        click.echo("ok")
        return
    table = rel.to_arrow_table()
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        from worldtrace.schemas.store import write_table_atomic

        write_table_atomic(output, table)
        click.echo(f"{table.num_rows} rows -> {output}", err=True)
        return
    if fmt == "csv":
        import io

        import pyarrow.csv as pacsv

        buf = io.BytesIO()
        pacsv.write_csv(table, buf)
        text = buf.getvalue().decode()
    else:
        import json

        text = json.dumps(table.to_pylist(), default=str, ensure_ascii=False) + "\n"
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)
