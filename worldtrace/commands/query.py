"""Looking at the store: `query` (SQL over DuckDB views), `stats`, `explain`, `report`.

Every command here opens the views locked down (schemas/lockdown.py): the connection
reads the store and nothing else, and `query` refuses statements that would write
before running anything (docs/query.md, "What query may do").
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from worldtrace.options import RegistryChoice

from . import EXIT_PROBLEMS, store

PROCESSED_VIEWS = frozenset({"trajectories", "turns", "clusters", "rejects", "perturbations"})


def _views():
    """The DuckDB views module (its one import site here, so it can move in one edit)."""
    from worldtrace.schemas import views

    return views


def _connect(st):
    """The store's views; each file left out is named on stderr, with what to do
    (`views.skip_fix`): the answers that follow are short of what it holds."""

    def skipped(path: Path, why: str) -> None:
        fix = _views().skip_fix(st, path, why)
        click.echo(f"warning: skipped {path}: {why}" + (f"; {fix}" if fix else ""), err=True)

    return _views().connect(st, on_skip=skipped)


@contextmanager
def _reading(st):
    """Reading the views: a shard whose pages do not decode under a valid footer (the
    views leave out only unreadable footers) fails the query that reaches it; said as
    one line naming the file and what to do (`views.read_failure`), exit 1, never
    DuckDB's traceback."""
    import duckdb

    try:
        yield
    except duckdb.Error as exc:
        from worldtrace.errors import joined

        raise click.ClickException(_views().read_failure(st, exc) or joined(str(exc))) from None


NOTHING_WRITTEN = "nothing was written"
"""What a stop of a command that only reads says (`errors.stop_says`)."""

INTERRUPTED = "error: query interrupted"
"""What `run_sql` returns for a query Ctrl-C stopped (the shell goes on after it)."""


def run_sql(
    con, sql: str, fmt: str, output: str | None, max_rows: int, timeout: float, st=None
) -> str:
    """Run user SQL on a locked connection; returns an error line ("" when it ran).

    Refused statements never start; a query still running after `timeout` seconds is
    interrupted (0: no limit). With the store `st`, a shard that fails the query is
    named with what to do (`views.read_failure`)."""
    import duckdb

    from worldtrace.errors import stop_taken
    from worldtrace.output import before_last, emit
    from worldtrace.schemas.lockdown import refusal

    refused = refusal(sql)
    if refused:
        return refused
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    timer = threading.Timer(timeout, stop) if timeout > 0 else None
    if timer:
        timer.daemon = True
        timer.start()
    wrapped = False
    try:
        with _ctrl_c_interrupts(con) as ctrl_c:
            last = before_last(con, sql)  # the earlier ones run: the last binds
            sent = _distinct_columns(con, last, fmt)
            wrapped = sent != last
            emit(con, sent, fmt, output, max_rows)
    except (duckdb.InterruptException, RuntimeError) as exc:
        # a Ctrl-C outside our handler reaches DuckDB as `RuntimeError: Query interrupted`
        if not isinstance(exc, duckdb.InterruptException) and "interrupted" not in str(exc).lower():
            raise
        if stop_taken() is not None:  # SIGTERM (or a Ctrl-C before): the command's stop
            raise
        if fired.is_set() and not ctrl_c:
            return f"error: query stopped after {timeout:g} s (--timeout); raise it or narrow the query"
        return INTERRUPTED
    except duckdb.Error as exc:  # one line: DuckDB's LINE and caret become a column
        from worldtrace.errors import joined

        if stop_taken() is not None:  # the stop, as DuckDB re-raised it from a scan
            raise

        damaged = _views().read_failure(st, exc) if st is not None else None
        from worldtrace.output import user_lines

        text = user_lines(str(exc)) if wrapped else str(exc)  # emit's own wrap: said by emit
        return f"error: {damaged or joined(text)}"
    finally:
        if timer:
            timer.cancel()
            timer.join()  # a timer thread still waking at exit aborts the interpreter
    return ""


KEYED_FORMATS = ("json", "jsonl", "parquet")
"""Output formats whose columns are keyed by name: two columns of one name (`SELECT t.domain,
u.domain FROM ... JOIN ...`) became one JSON key, the other value dropped, and a Parquet
file no reader could open (`Multiple matches for FieldRef.Name`)."""


def _distinct_columns(con, sql: str, fmt: str) -> str:
    """The statement `sql`, when it is a SELECT whose result has two columns of one name,
    read through `SELECT * FROM (...)`, where DuckDB names them apart as its `COPY` and
    `CREATE TABLE AS` do (`domain`, `domain_1`), keeping the rows and their order; said
    on stderr. Any other statement (a table or CSV shows both columns) is returned as it
    is."""
    import duckdb

    from worldtrace.output import wrap

    if fmt not in KEYED_FORMATS:
        return sql
    try:
        [statement] = duckdb.extract_statements(sql)
        if statement.type != duckdb.StatementType.SELECT:
            return sql
        names = con.sql(sql).columns  # a SELECT is bound here, not run
        if len(set(names)) == len(names):
            return sql
        wrapped = wrap(statement.query)  # its errors' LINE N: `output.user_lines`
        renamed = con.sql(wrapped).columns
    except (duckdb.Error, ValueError):
        return sql  # running it says what is wrong
    said = ", ".join(f"{a} -> {b}" for a, b in zip(names, renamed, strict=True) if a != b)
    click.echo(
        f"note: columns of one name are named apart in the {fmt} output, as DuckDB names "
        f"them: {said} (give each an alias with AS to choose the names)",
        err=True,
    )
    return wrapped


@contextmanager
def _ctrl_c_interrupts(con) -> Iterator[list[int]]:
    """Ctrl-C interrupts the running statement as --timeout does (`con.interrupt()`, from
    the relay thread of `main_thread_woken`), not by raising in Python: DuckDB answers a
    Python signal check by stopping only the part of the query the main thread runs, and
    then waits for its workers, one of which may hold a whole task (`range(10**12)`): the
    query went on for hours. SIGTERM interrupts it too, and is said by the CLI's handler
    (`errors.cli_stops`). Yields the Ctrl-Cs taken (empty: none)."""
    from worldtrace.errors import STOP_NAMES, main_thread_woken

    taken: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield taken
        return

    def interrupt(signum: int) -> None:
        if signum == signal.SIGINT:
            taken.append(signum)
        con.interrupt()

    seen: list[int] = []

    def again(signum: int, frame) -> None:
        """The relay interrupts; a second Ctrl-C raises, as without this handler."""
        seen.append(signum)
        if len(seen) > 1:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, again)
    try:
        with main_thread_woken(tuple(STOP_NAMES), also=interrupt):
            yield taken
    finally:
        signal.signal(signal.SIGINT, old)


def tables_read(con, sql: str) -> set[str]:
    """Names of the tables and views the SELECT statements in `sql` read (DuckDB's parse
    tree, `json_serialize_sql`; other statements read nothing here)."""
    import json

    import duckdb

    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and node.get("table_name"):
                names.add(node["table_name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for statement in duckdb.extract_statements(sql):
        tree = con.execute("SELECT json_serialize_sql($q)", {"q": statement.query}).fetchall()[0][0]
        walk(json.loads(tree))
    return names


def _note(st) -> None:
    """Say on stderr what to run first (no data, nothing processed, processed data older
    than the raw data), so an empty or old answer is never silent."""
    from worldtrace.freshness import next_step

    step = next_step(st)
    if step:
        click.echo(f"hint: {step}", err=True)


def _hint(con, st, sql: str) -> None:
    """Processed views are empty until `worldtrace process` ran, and old after a new
    collect: say so when the SQL reads them."""
    import duckdb

    from worldtrace.freshness import next_step

    step = next_step(st)
    if not step:
        return
    try:
        used = tables_read(con, sql) & PROCESSED_VIEWS
    except (duckdb.Error, ValueError):
        return  # running it reports the problem
    if used:
        click.echo(f"hint: {', '.join(sorted(used))}: {step}", err=True)


def _refuse_output_in_store(output: str, root: Path) -> None:
    """`--output` never writes into the store: a file there would be read as data (a
    Parquet file under raw/ doubles the raw rows). Symlinks are resolved on both sides,
    so neither a link to the store nor a parent directory linking into it gets through."""
    inside = Path(output).expanduser().resolve()
    top = Path(root).expanduser().resolve()
    if inside == top or inside.is_relative_to(top):
        raise click.UsageError(
            f"will not write query output into the store ({top}): give -o a path outside it"
        )


QUERY_EPILOG = """\b
Example:
  worldtrace query "SELECT domain, count(*) AS n FROM trajectories GROUP BY ALL"
  worldtrace query "SELECT * FROM turns WHERE category = 'echo'" -o echo.parquet
  worldtrace query "SELECT trajectory_id FROM trajectories" --format csv | tail -n +2
"""


@click.command(epilog=QUERY_EPILOG)
@click.argument("sql", required=False)
@click.option(
    "--format",
    "fmt",
    default=None,
    type=RegistryChoice("worldtrace.output:QUERY_FORMATS"),
    help="Output format [default: from the --output extension (.csv .json .jsonl .parquet "
    ".txt), else table].",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Write the result here (required for parquet); its directory must exist.",
)
@click.option(
    "--sql-file", type=click.Path(exists=True, dir_okay=False), help="Read the SQL from a file."
)
@click.option(
    "--shell",
    is_flag=True,
    help="Interactive prompt; statements end with ';' (or the input's end), .exit quits; "
    "from a pipe, exit 1 when a statement failed.",
)
@click.option("--views", "list_views", is_flag=True, help="List the views and their columns.")
@click.option(
    "--max-rows",
    default=200,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows shown by --format table.",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds a statement may run before it is interrupted (0: no limit).",
)
@click.pass_context
def query(
    ctx: click.Context, sql, fmt, output, sql_file, shell, list_views, max_rows, timeout
) -> None:
    """Run DuckDB SQL over the store's views: trajectories, turns, clusters, rejects,
    raw_trajectories, raw_turns, jobs, episodes, exports, perturbations,
    raw_perturbations. Reads only: statements that write files, attach databases, load
    extensions or change settings are refused.

    `worldtrace query --views` lists every view with its columns; docs/query.md says what
    a query may do."""
    from worldtrace.errors import stop_says
    from worldtrace.output import check_output_dir, query_format

    _one_mode(sql, sql_file, shell, list_views, fmt, output)
    views = _views()
    if list_views:
        for name, doc in views.VIEW_DOCS.items():
            click.echo(f"{name}\n    {doc}")
        return
    fmt = query_format(fmt, output)
    # a file and a table are written whole or not at all; csv and json on stdout
    # stream, so the rows before the stop are out (as the DuckDB shell's)
    streamed = output is None and fmt in ("csv", "json", "jsonl")
    said = "the rows above are all it wrote" if streamed else "nothing was written"
    stop_says(lambda: f"the query was stopped; {said}")  # SIGTERM, or Ctrl-C before it ran
    st = store(ctx)
    if output:
        _refuse_output_in_store(output, st.root)
        check_output_dir(output)
    con = _connect(st)
    if shell:
        _shell(con, max_rows, timeout, views.VIEW_DOCS, st)
        return
    if sql_file:
        if sql is not None:
            raise click.UsageError("give SQL or --sql-file, not both")
        sql = _sql_text(sql_file)
    if not (sql or "").strip():
        raise click.UsageError("give SQL, --sql-file, --shell or --views")
    if _no_statement(sql):  # `;`, `/* x */`: blank SQL too (it printed `ok`, not JSON)
        raise click.UsageError(
            "the SQL holds no statement (only comments and ';'): give SQL, --sql-file, "
            "--shell or --views"
        )
    _hint(con, st, sql)
    error = run_sql(con, sql, fmt, output, max_rows, timeout, st)
    if error == INTERRUPTED:  # Ctrl-C: a stop, as every command says it (not a failure)
        from worldtrace.errors import EXIT_INTERRUPTED

        click.echo(f"interrupted (Ctrl-C): the query was stopped; {said}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if error:
        click.echo(error, err=True)
        sys.exit(EXIT_PROBLEMS)


def _one_mode(sql, sql_file, shell: bool, list_views: bool, fmt, output) -> None:
    """SQL, --sql-file, --shell and --views are ways to say what to run: two of them is
    a usage error naming both (`--shell --views` ran --views in silence), as are
    --format and --output beside --shell or --views, which print only to the screen."""
    modes = [
        name
        for name, given in (
            ("SQL", sql is not None),
            ("--sql-file", sql_file),
            ("--shell", shell),
            ("--views", list_views),
        )
        if given
    ]
    if modes[:2] == ["SQL", "--sql-file"]:
        raise click.UsageError("give SQL or --sql-file, not both")
    if len(modes) > 1:
        raise click.UsageError(
            f"{modes[0]} and {modes[1]} do not go together: give one of SQL, --sql-file, "
            "--shell, --views"
        )
    for name, given in (("--format", fmt), ("--output", output)):
        if given and modes and modes[0] in ("--shell", "--views"):
            raise click.UsageError(
                f"{name} applies to SQL and --sql-file, not {modes[0]} (which prints to the screen)"
            )


def _no_statement(sql: str) -> bool:
    """Whether `sql` parses to no statement at all (only `;` and comments); SQL that
    does not parse is run, and its error said."""
    import duckdb

    try:
        return not duckdb.extract_statements(sql)
    except (duckdb.Error, ValueError):
        return False


def _sql_text(path: str) -> str:
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.UsageError(
            f"--sql-file {path}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def _shell(con, max_rows: int, timeout: float, view_docs: dict[str, str], st=None) -> None:
    """Read statements until EOF or .exit; each runs under the same rules as `query`, and
    an error or refusal is printed on stderr and the prompt goes on. A statement ends at
    a `;` outside quotes and comments (`_complete`), and at the end of the input; read
    from a pipe, the shell exits 1 when any statement failed, as a script expects."""
    from worldtrace.output import split_statements

    click.echo("worldtrace SQL shell: end statements with ';', .views lists views, .exit quits")
    buf: list[str] = []
    failed = 0
    stdin = click.get_text_stream("stdin")
    tty = sys.stdin.isatty()
    while True:
        if tty:
            click.echo("sql> " if not buf else "...> ", nl=False)
        line = stdin.readline()
        stripped = line.strip()
        if line and not buf and stripped in (".exit", ".quit"):
            break
        if line and not buf and stripped == ".views":
            click.echo("\n".join(view_docs))
            continue
        buf.append(line)
        text = "".join(buf)
        if line and not (stripped.endswith(";") and _complete(text)):
            continue
        buf = []
        for sql in split_statements(text):
            if error := run_sql(con, sql, "table", None, max_rows, timeout, st):
                click.echo(error, err=True)
                failed += 1
        if not line:
            break
    if failed and not tty:
        sys.exit(1)


def _complete(text: str) -> bool:
    """Whether `text` ends with a `;` that ends a statement: outside quotes, `--` and
    `/* */` comments. By hand: DuckDB's Python API has no completeness test, and its
    parser cannot tell a `;` inside a comment from an end (both parse)."""
    quote, last, i, n = "", "", 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                if text[i + 1 : i + 2] == quote:
                    i += 1  # '' or "" inside: the quote itself
                else:
                    quote = ""
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return False
            i = j + 2
            continue
        elif c in "'\"":
            quote = last = c
        elif not c.isspace():
            last = c
        i += 1
    return not quote and last == ";"


JSON_HELP = "Print one JSON document on stdout instead (keys in docs/cli.md)."

STATS_EPILOG = """\b
Example:
  worldtrace stats --store runs/
  worldtrace stats --json | jq '.sections.perturbations[] | select(.kind == "timeout")'
"""


@click.command(epilog=STATS_EPILOG)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Summary: counts by domain and source, lengths, category shares and effective keep,
    dedup rates, filter counts, perturbations and conditions, redactions, exports, job
    success rates. Says on stderr what to run when nothing is processed or the processed
    data is older than the raw data or holds records of raw files since deleted."""
    from worldtrace.errors import stop_says

    stop_says(lambda: NOTHING_WRITTEN)
    from worldtrace.output import print_json
    from worldtrace.summary import print_stats, stats_document

    st = store(ctx)
    con = _connect(st)
    _note(st)
    with _reading(st):
        if as_json:
            print_json(stats_document(con, st))
        else:
            print_stats(con, store=st)


EXPLAIN_EPILOG = """\b
Example:
  worldtrace explain 3f2a9c            (an id prefix is enough when it names one)
  worldtrace query "SELECT trajectory_id FROM turns WHERE category = 'echo' LIMIT 1" \\
      --format csv | tail -n +2 | xargs worldtrace explain
  worldtrace explain 3f2a9c --json | jq '.turns[] | {index, category, keep}'
"""


def _not_blank(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A blank id is a prefix of every id: it names no trajectory (it listed them all)."""
    if not value.strip():
        raise click.BadParameter(
            "blank: give an id, an id prefix, a raw id or an origin id", ctx=ctx, param=param
        )
    return value


@click.command(epilog=EXPLAIN_EPILOG)
@click.argument("trajectory_id", callback=_not_blank)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed of the per-turn keep draw shown  [default: the processing run's, as the turns "
    "table's in_loss and export use]",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.pass_context
def explain(ctx: click.Context, trajectory_id: str, seed: int | None, as_json: bool) -> None:
    """Every turn of one trajectory: excerpts, OL/Nov/Jac/R and extra statistics, the
    category, the rule that fired and the keep decision. Accepts an id, an id prefix, a
    raw id or an origin id, alone or as the header prints it (origin=FORMAT:ORIGIN_ID);
    exit 1 when it names none or several (listed), or only raw data not processed yet
    (said, with the command to run)."""
    from worldtrace.errors import stop_says

    stop_says(lambda: NOTHING_WRITTEN)
    from worldtrace.output import print_json
    from worldtrace.summary import explanation, print_explanation

    st = store(ctx)
    _note(st)  # nothing processed, or raw data no run read: as `stats` and `query` say it
    with _reading(st):  # the seed and the tables of one run (as export reads them)
        if seed is None:  # the draw `process --set seed=N` made: the turns table's, export's
            from worldtrace.pipelines.export import processing_seed

            seed = processing_seed(str(st.table("trajectories"))) or 0
        doc = explanation(_connect(st), trajectory_id, seed)
    if as_json:
        print_json(doc)
        ok = doc["status"] in ("explained", "dropped")
    else:
        ok = print_explanation(doc)
    if not ok:
        sys.exit(EXIT_PROBLEMS)


@click.command(epilog="\b\nExample:\n  worldtrace report --store runs/ -o runs-report.html")
@click.option(
    "--output",
    "-o",
    default="report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="HTML file written; its directory must exist.",
)
@click.pass_context
def report(ctx: click.Context, output: str) -> None:
    """Write a self-contained HTML report: plotly plots (embedded, opens offline), the turns
    most worth a look per category, and the stats tables (docs/query.md)."""
    from worldtrace.errors import stop_says
    from worldtrace.output import check_output_dir, our_stream
    from worldtrace.report import write

    written: list[str] = []
    stop_says(
        lambda: (
            f"the report was written: {written[0]}"
            if written
            else f"nothing was written ({output} is written whole or not at all)"
        )
    )
    st = store(ctx)
    check_output_dir(output)
    con = _connect(st)
    _note(st)
    with _reading(st):
        path = write(con, output, store_root=st.root)
    written.append(str(path))
    click.echo(f"report -> {path}", err=our_stream(output) is not None)  # not into the HTML


COMMANDS = (query, stats, explain, report)
