"""What commands print: rich tables, the processing accounting, query results.

Kept apart from the commands so they stay parse -> call -> print, and so a new command
reuses the same tables. rich and the query libraries are imported inside each function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

QUERY_FORMATS = ("table", "csv", "json", "jsonl", "parquet")
"""What `emit` writes a query result as."""
FORMAT_BY_SUFFIX = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".parquet": "parquet",
    ".txt": "table",
}
"""The format `query --output FILE` writes when `--format` is not given."""
NESTED_TYPES = frozenset({"struct", "map", "list", "array", "union"})


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


def query_format(fmt: str | None, output: str | None) -> str:
    """`--format`, else the one the output file's extension names, else a table."""
    if fmt:
        return fmt
    if not output:
        return "table"
    found = FORMAT_BY_SUFFIX.get(Path(output).suffix.lower())
    if found is None:
        known = ", ".join(FORMAT_BY_SUFFIX)
        raise click.UsageError(
            f"cannot tell the format of {output} from its extension ({known}); give --format"
        )
    return found


def emit(con, sql: str, fmt: str, output: str | None, max_rows: int) -> None:
    """Run `sql` and write its result as a table, CSV, JSON (array or lines) or Parquet,
    to `output` or stdout. A statement without a result prints `ok`."""
    rel = con.sql(sql)
    if rel is None:
        click.echo("ok")
        return
    if fmt == "table":
        _emit_table(rel, output, max_rows)
        return
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        from worldtrace.schemas.store import write_table_atomic

        table = rel.to_arrow_table()
        write_table_atomic(output, table)
        click.echo(f"{table.num_rows} rows -> {output}", err=True)
        return
    text = _csv(rel) if fmt == "csv" else _json(rel, lines=fmt == "jsonl")
    if output:
        from worldtrace.schemas.store import write_bytes_atomic

        write_bytes_atomic(output, text.encode())
    else:
        click.echo(text, nl=False)


def _csv(rel) -> str:
    """CSV as the DuckDB CLI writes it: values quoted only when they need it, NULL empty,
    nested values (struct, map, list) as JSON, everything else in DuckDB's text form.
    (Python's csv module: pyarrow's "needed" quoting still quotes every string.)"""
    import csv
    import io

    exprs = ", ".join(
        (f"to_json(#{i})" if t.id in NESTED_TYPES else f"CAST(#{i} AS VARCHAR)")
        + f" AS {_ident(c)}"
        for i, (t, c) in enumerate(zip(rel.types, rel.columns, strict=True), 1)
    )
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(rel.columns)
    out.writerows(rel.project(exprs).fetchall())
    return buf.getvalue()


def _json(rel, lines: bool) -> str:
    """Rows as JSON objects (nested values as JSON, maps as objects), one array or one
    object per line."""
    import json

    nested = [t.id in NESTED_TYPES for t in rel.types]
    if any(nested):
        exprs = ", ".join(
            (f"to_json(#{i})" if n else f"#{i}") + f" AS {_ident(c)}"
            for i, (n, c) in enumerate(zip(nested, rel.columns, strict=True), 1)
        )
        rel = rel.project(exprs)
    names = rel.columns
    rows = [
        {
            c: json.loads(v) if n and v is not None else v
            for c, n, v in zip(names, nested, row, strict=True)
        }
        for row in rel.fetchall()
    ]
    if lines:
        return "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in rows)
    return json.dumps(rows, default=str, ensure_ascii=False) + "\n"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _emit_table(rel, output: str | None, max_rows: int) -> None:
    """A box-drawn table; on a terminal rich fits it to the width, anywhere else (a pipe,
    a file) no cell is cut, so ids survive copy and paste."""
    import sys

    from rich.console import Console
    from rich.table import Table

    t = Table()
    for c in rel.columns:
        t.add_column(c, overflow="fold")
    rows = rel.limit(max_rows + 1).fetchall()
    for row in rows[:max_rows]:
        t.add_row(*("" if v is None else str(v) for v in row))
    if len(rows) > max_rows:
        t.caption = f"first {max_rows} rows shown (--max-rows)"
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            Console(file=fh, width=1 << 20, color_system=None, highlight=False).print(t)
    elif sys.stdout.isatty():
        Console().print(t)
    else:
        Console(file=sys.stdout, width=1 << 20, color_system=None, highlight=False).print(t)
