"""Looking at the store: `query` (SQL over DuckDB views), `stats`, `explain`, `report`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from worldtrace.options import RegistryChoice

from . import EXIT_PROBLEMS, store


def _views():
    """The DuckDB views module (its one import site here, so it can move in one edit)."""
    from worldtrace.schemas import views

    return views


@click.command(
    epilog="`worldtrace query --views` lists every view with its columns (docs/query.md)."
)
@click.argument("sql", required=False)
@click.option(
    "--format",
    "fmt",
    default="table",
    show_default=True,
    type=RegistryChoice("worldtrace.output:QUERY_FORMATS"),
    help="Output format.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Write the result here (required for parquet).",
)
@click.option(
    "--sql-file", type=click.Path(exists=True, dir_okay=False), help="Read the SQL from a file."
)
@click.option(
    "--shell", is_flag=True, help="Interactive prompt; statements end with ';', .exit quits."
)
@click.option("--views", "list_views", is_flag=True, help="List the views and their columns.")
@click.option("--max-rows", default=200, show_default=True, help="Rows shown by --format table.")
@click.pass_context
def query(ctx: click.Context, sql, fmt, output, sql_file, shell, list_views, max_rows) -> None:
    """Run DuckDB SQL over the store's views: trajectories, turns, clusters, rejects,
    raw_trajectories, raw_turns, jobs, episodes, exports."""
    import duckdb

    from worldtrace.output import emit

    views = _views()
    if list_views:
        for name, doc in views.VIEW_DOCS.items():
            click.echo(f"{name}\n    {doc}")
        return
    con = views.connect(store(ctx))
    if shell:
        _shell(con, max_rows, views.VIEW_DOCS)
        return
    if sql_file:
        sql = Path(sql_file).read_text()
    if not sql:
        raise click.UsageError("give SQL, --sql-file, --shell or --views")
    try:
        emit(con, sql, fmt, output, max_rows)
    except duckdb.Error as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_PROBLEMS)


def _shell(con, max_rows: int, view_docs: dict[str, str]) -> None:
    """Read statements until EOF or .exit; an error is printed and the prompt goes on."""
    import duckdb

    from worldtrace.output import emit

    click.echo("worldtrace SQL shell: end statements with ';', .views lists views, .exit quits")
    buf: list[str] = []
    stdin = click.get_text_stream("stdin")
    while True:
        if sys.stdin.isatty():
            click.echo("sql> " if not buf else "...> ", nl=False)
        line = stdin.readline()
        if not line:
            break
        stripped = line.strip()
        if not buf and stripped in (".exit", ".quit"):
            break
        if not buf and stripped == ".views":
            click.echo("\n".join(view_docs))
            continue
        buf.append(line)
        if stripped.endswith(";"):
            sql = "".join(buf)
            buf = []
            try:
                emit(con, sql, "table", None, max_rows)
            except duckdb.Error as exc:
                click.echo(f"error: {exc}")


@click.command()
@click.pass_context
def stats(ctx: click.Context) -> None:
    """Summary: counts by domain and source, lengths, category shares and effective keep,
    dedup rates, filter counts, exports, job success rates."""
    from worldtrace.summary import print_stats

    print_stats(_views().connect(store(ctx)))


@click.command()
@click.argument("trajectory_id")
@click.option("--seed", default=0, show_default=True, help="Seed of the per-turn keep draw shown.")
@click.pass_context
def explain(ctx: click.Context, trajectory_id: str, seed: int) -> None:
    """Every turn of one trajectory: excerpts, OL/Nov/Jac/R and extra statistics, the
    category, the rule that fired and the keep decision. Accepts an id, an id prefix, a
    raw id or an origin id."""
    from worldtrace.summary import explain as run_explain

    if not run_explain(_views().connect(store(ctx)), trajectory_id, seed):
        sys.exit(EXIT_PROBLEMS)


@click.command(epilog="\b\nExample:\n  worldtrace report --store runs/ -o runs-report.html")
@click.option(
    "--output",
    "-o",
    default="report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="HTML file written.",
)
@click.pass_context
def report(ctx: click.Context, output: str) -> None:
    """Write a self-contained HTML report: plotly plots (embedded, opens offline), the turns
    most worth a look per category, and the stats tables (docs/query.md)."""
    from worldtrace.report import write

    path = write(store(ctx), output)
    click.echo(f"report -> {path}")


COMMANDS = (query, stats, explain, report)
