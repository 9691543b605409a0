"""What commands print: rich tables, the processing accounting, query results.

Kept apart from the commands so they stay parse -> call -> print, and so a new command
reuses the same tables. rich and the query libraries are imported inside each function.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
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


WIDE = 1 << 20
"""Console width for output that is not a terminal: no line is wrapped, no cell cut."""

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile(f"[{_CONTROLS}]")
_LINE_CONTROL_RE = re.compile(f"[\n{_CONTROLS}]")
"""C0/C1 controls (ESC starts a terminal's title, clear and colour sequences) and bidi
overrides; a line's pattern also takes newlines."""


def printable(text: str, one_line: bool = False) -> str:
    """`text` safe for a terminal: every control character written as its escape
    (`\\x1b`), so data never drives the terminal (a tool named `ESC]0;...` retitled it);
    tabs and, unless `one_line`, newlines stay."""
    pattern = _LINE_CONTROL_RE if one_line else _CONTROL_RE
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


@functools.cache
def _table_class() -> type:
    """`rich.table.Table` whose title and caption are lines of their own, as wide as the
    console rather than the table (rich wraps them to the table's width, so a narrow
    table cut `.../raw/import` and a run id from its time even in a pipe). Made on first
    use: rich loads when a command prints, not when the CLI starts."""
    import copy

    from rich.cells import cell_len
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    def annotation(text: Any, style: str) -> Any:
        return Text(text, style=style) if isinstance(text, str) else text

    class WholeTitleTable(Table):
        def _annotations(self) -> list[str]:
            return [str(a) for a in (self.title, self.caption) if a]

        def __rich_console__(self, console, options):
            bare = copy.copy(self)
            bare.title = bare.caption = None
            if self.title:
                yield annotation(self.title, self.title_style or "table.title")
            yield from Table.__rich_console__(bare, console, options)
            if self.caption:
                yield annotation(self.caption, self.caption_style or "table.caption")

        def __rich_measure__(self, console, options) -> Measurement:
            m = super().__rich_measure__(console, options)
            texts = self._annotations()
            word = max((cell_len(w) for t in texts for w in t.split()), default=0)
            line = max((cell_len(x) for t in texts for x in t.splitlines()), default=0)
            return Measurement(max(m.minimum, word), max(m.maximum, line))

    return WholeTitleTable


def make_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None):
    """A rich table whose ids stay whole: a column whose values have no whitespace (ids,
    numbers, names, paths) never wraps, the others fold; cells are plain text, never
    markup (an error message with `[...]` prints as it is). The title (and a caption)
    is a line of its own: wrapped between words on a terminal only, as any line is."""
    from rich.text import Text

    values = [list(row) for row in rows]
    cells = [["" if v is None else printable(str(v)) for v in row] for row in values]
    t = _table_class()(title=title, title_justify="left")
    for i, name in enumerate(columns):
        whole = all(not any(ch.isspace() for ch in row[i]) for row in cells)
        numeric = bool(values) and all(_is_number(row[i]) for row in values)
        t.add_column(
            Text(name), no_wrap=whole, overflow="fold", justify="right" if numeric else "left"
        )
    for row in cells:
        t.add_row(*(Text(v) for v in row))
    return t


def _is_number(v: Any) -> bool:
    from decimal import Decimal

    return v is None or (isinstance(v, (int, float, Decimal)) and not isinstance(v, bool))


def rows_table(rows: list[dict], title: str | None = None):
    """A table of dict rows (columns from the first row; None prints empty)."""
    return make_table(list(rows[0]) if rows else [], (r.values() for r in rows), title)


def fitted(console: Any = None, *renderables: Any):
    """A console to print `renderables` on without cutting a word: off a terminal (a pipe,
    a file) as wide as a line needs; on a terminal its width, or wider when the narrowest
    layout of a table (every column as wide as its longest word or unbreakable value)
    needs more, so the terminal wraps lines rather than rich cutting ids (`termin…`)."""
    from rich.console import Console
    from rich.measure import Measurement

    console = console or Console()
    if console.is_terminal:
        wide = console.options.update_width(WIDE)
        need = max([Measurement.get(console, wide, r).minimum for r in renderables] or [0])
        width = max(console.width, need)
    else:
        width = WIDE
    if width == console.width:
        return console
    return Console(
        file=console.file,
        width=width,
        force_terminal=console.is_terminal,
        color_system=console.color_system,
        highlight=False,
    )


def print_table(table: Any, console: Any = None) -> None:
    """Print a table (or any renderable) with no id cut, on a terminal or not."""
    fitted(console, table).print(table)


def jsonable(value: Any) -> Any:
    """Values DuckDB, sqlite and our records hand back, as JSON types (timestamps as ISO
    8601, decimals as numbers)."""
    from datetime import date, datetime
    from decimal import Decimal

    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


SHOWN_NOT_READ = 5
"""Files a `not_read_line` names; the rest are counted."""
LOWER_CASE = ", named in lower case"
"""What `validate` and `process` add to a `not_read_line`: `import` reads any case."""


def not_read_line(
    command: str, files: list[Path], paths: Iterable[Any], kinds: Iterable[str], note: str = ""
) -> str:
    """The files a walk of `paths` passed over (`input_files`' `skipped`, `import`'s and
    `process`'s), in one line: the first few named, a compressed one said so."""
    from worldtrace.schemas import fields as F

    kinds = sorted(kinds)
    names = [
        f"{f} (compressed: decompress it first)"
        if f.name.lower().endswith(F.COMPRESSED_SUFFIXES)
        else str(f)
        for f in files[:SHOWN_NOT_READ]
    ]
    more = f" and {len(files) - SHOWN_NOT_READ} more" if len(files) > SHOWN_NOT_READ else ""
    return (
        f"{command}: {len(files)} file(s) not read under {', '.join(map(str, paths))} (only "
        f"{', '.join(kinds[:-1])} and {kinds[-1]} files are{note}): {', '.join(names)}{more}"
    )


def print_json(doc: Any) -> None:
    """`--json`: one JSON document on stdout (keys as documented in docs/cli.md)."""
    import json

    click.echo(json.dumps(doc, indent=2, default=jsonable, ensure_ascii=False))


def print_checks(checks: list) -> None:
    """`worldtrace doctor`: one line per check (`ok`; `MISS` a part this machine lacks;
    `FAIL` a problem, `doctor.Check.problem`), the fix under each gap, then a count."""
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.ok else "FAIL" if c.problem else "MISS"
        line = f"[{mark}] {c.name.ljust(width)}  {c.detail}"
        if c.fix:
            line += f"\n       {' ' * width}  -> {c.fix}"
        click.echo(line)
    missing = sum(not c.ok for c in checks)
    failed = sum(c.problem for c in checks)
    said = f", {failed} problem(s)" if failed else ""
    click.echo(f"{len(checks) - missing}/{len(checks)} available{said}")


def print_import_report(report: Any, dest: Path, show: int) -> None:
    """Counts per format and problem kind; the first `show` problems on stderr, errors
    first."""
    rows = [
        *(("imported", name, n) for name, n in sorted(report.imported.items())),
        *(("already present", name, n) for name, n in sorted(report.present.items())),
        *(("error", kind, n) for kind, n in sorted(report.errors.items())),
        *(("warning", kind, n) for kind, n in sorted(report.warnings.items())),
    ]
    n = report.workers
    by = f", converted by {n} worker processes" if n > 1 else ""
    title = f"import: {report.files} file(s) -> {dest}{by}"
    print_table(make_table(("", "kind", "count"), rows, title))
    # errors (records not imported) before warnings: 291 warnings of one kind hid 4 of
    # 5 errors behind `... 276 more`; each group keeps the order the files were read in
    problems = sorted(report.problems, key=lambda p: not p.fatal)
    for p in problems[:show]:
        click.echo(printable(str(p), True), err=True)
    if len(problems) > show:
        click.echo(f"... {len(problems) - show} more", err=True)


def attempt_row(row: dict) -> dict:
    """An attempt of `jobs show`: the job store keeps why every ended attempt ended in
    its `error` column, a succeeded one's too (`the shell exited (status 3)`); a
    succeeded attempt has no error, so that is its `ending` (placed after `error`)."""
    out: dict = {}
    for k, v in row.items():
        out[k] = v
        if k == "error":
            succeeded = row.get("status") == "succeeded"
            out["error"], out["ending"] = (None, v) if succeeded else (v, None)
    return out


def job_document(job: dict) -> dict:
    """`jobs show --json`: the job's fields (`episodes` is their number), its parsed job
    file as `spec`, and every attempt of its episodes under `attempts` (nothing cut)."""
    import json

    doc = {k: v for k, v in job.items() if k not in ("episode_rows", "spec_json")}
    doc["spec"] = json.loads(job["spec_json"]) if job.get("spec_json") else None
    doc["attempts"] = [attempt_row(e) for e in job["episode_rows"]]
    return doc


def print_job(job: dict) -> None:
    """A job's fields on one line, then its attempts with the columns of `--json`'s
    `attempts`, the worker that ran each too (ids whole; the table folds long errors on
    a terminal)."""
    episodes = [attempt_row(e) for e in job["episode_rows"]]
    fields = {k: v for k, v in job.items() if k not in ("episode_rows", "spec_json")}
    click.echo("  ".join(f"{k}={v}" for k, v in fields.items()))
    print_table(rows_table(episodes))


REJECT_LABELS = {"validate": "rejected", "filter": "filtered", "turn_filter": "turn removed"}
"""What each stage of a rejects row did to its record, in `process`'s lines."""


def print_accounting(manifest: dict) -> None:
    """A processing run's trajectory accounting, this run's beside the store's (a second
    run of 1 file read "in 2": the store's total), the counters explaining the run, and
    why records were rejected (a file that is not a trajectory shard is one reject)."""
    acc, counters, run = manifest["accounting"], manifest["counters"], manifest["this_run"]
    keys = ("in", "kept", "filtered", "duplicates", "rejected")
    rows = [(k, run.get(k), acc[k]) for k in keys]
    rows += [
        (f"  {k}", v, None)
        for k, v in counters.items()
        if k.startswith(("filtered.", "turns_removed.", "duplicates.", "category."))
    ]
    title = f"process run {manifest['run_id']} ({manifest['seconds']} s)"
    print_table(make_table(("trajectories", "this run", "store"), rows, title))
    click.echo(balance_line(acc))  # `accounting.balanced`, said (docs/pipeline.md)
    if manifest.get("incremental") and not manifest.get("new_inputs"):
        click.echo("no new input: every file was processed before (--rebuild: all again)", err=True)
    shown = manifest.get("rejected") or []
    for r in shown:  # the rejects table's rows: said as what they are, as the table above
        where = f"{r['source_path']}:{r['record']}" if r["record"] else r["source_path"]
        said = REJECT_LABELS.get(r["stage"], "rejected")
        click.echo(printable(f"{said}: {where}: {r['stage']}: {r['reason']}", True), err=True)
    removed = sum(v for k, v in counters.items() if k.startswith("turns_removed."))
    rows = run.get("rejected", 0) + run.get("filtered", 0) + removed
    if rows > len(shown):
        more = rows - len(shown)
        click.echo(
            f'{more} more (rejected, filtered or turns removed): worldtrace query "SELECT * '
            'FROM rejects"',
            err=True,
        )
    gone = manifest.get("gone_inputs") or {}
    if gone.get("count"):
        click.echo(
            f"warning: {gone['count']} file(s) processed before are gone (first: "
            f"{gone['first'][0]}); their records stay in the processed data until "
            "`worldtrace process --rebuild`",
            err=True,
        )
    # a rebuild: what it no longer holds, said (docs/pipeline.md); files not read are
    # said even when nothing came only from them, changed files only when something did
    for key, zero_said, whose in (
        ("dropped_inputs", True, "that came only from {} raw file(s) processed before and not "
         "read by this rebuild (gone, or not among its inputs; first: {})"),
        ("changed_inputs", False, "whose records {} raw file(s) changed since they were processed "
         "no longer hold (first: {})"),
    ):  # fmt: skip
        lost = manifest.get(key) or {}
        n = lost.get("trajectories")
        if lost.get("count") and (n != 0 or zero_said):
            what = "an unknown number of" if n is None else str(n)
            said = whose.format(lost["count"], lost["first"][0])
            click.echo(
                f"dropped {what} processed trajectories {said}; `{key}` in processed/manifest.json",
                err=True,
            )
    if not acc["balanced"]:
        click.echo(
            "warning: the store's accounting does not balance: in != kept + filtered + "
            "duplicates + rejected, so records were lost or counted twice (`accounting` in "
            "processed/manifest.json)",
            err=True,
        )


def balance_line(acc: dict) -> str:
    """The store's accounting as one equation (docs/pipeline.md#accounting): `in N = kept
    K + filtered F + duplicates D + rejected R`, or `!=` and UNBALANCED when it is not."""
    parts = ("kept", "filtered", "duplicates", "rejected")
    terms = " + ".join(f"{k} {acc[k]}" for k in parts)
    if acc["balanced"]:
        return f"in {acc['in']} = {terms}"
    total = sum(acc[k] for k in parts)
    return f"UNBALANCED: in {acc['in']} != {terms} (= {total})"


def print_export(counts: dict, output: str, tokens: bool = True, parts: dict | None = None) -> None:
    """`tokens`: the format holds token ids (an AgentWorldBench export holds text: its
    token counts are not zeros to report). `parts`: a split export's parts (the top
    manifest's `parts`), a line each under the total, from the counts in its manifest."""

    def said(c: dict) -> str:
        size = f"{c['rows']} rows, {c['tokens']} tokens, {c['loss_tokens']} loss tokens"
        return (
            f"{c['samples']} samples ({size if tokens else str(c['rows']) + ' rows'}) "
            f"from {c['trajectories']} trajectories"
        )

    click.echo(f"exported {said(counts)} -> {output}")
    for name, part in (parts or {}).items():
        click.echo(f"  {name}: {said(part['counts'])} -> {Path(output) / part['path']}")


def query_format(fmt: str | None, output: str | None) -> str:
    """`--format`, else the one the output file's extension names, else a table; a format
    the extension contradicts (`--format csv -o x.json`) is a usage error, not a file of
    one format under the other's name."""
    found = FORMAT_BY_SUFFIX.get(Path(output).suffix.lower()) if output else None
    if fmt:
        if found and found != fmt:
            raise click.UsageError(
                f"--format {fmt} but {Path(output).name} names {found}: give a matching "
                "extension, or one no format claims"
            )
        return fmt
    if not output or output == "-":  # stdout, as without -o
        return "table"
    if found is None:
        known = ", ".join(FORMAT_BY_SUFFIX)
        raise click.UsageError(
            f"cannot tell the format of {output} from its extension ({known}); give --format"
        )
    return found


def relation(con, sql: str):
    """`con.sql(sql)`; an error binding it (a column or table that is not there) raised
    with DuckDB's `LINE N` and caret, which the relation API leaves out of a binder's
    error and `execute` gives: it binds again, failing alike (nothing runs)."""
    import duckdb

    try:
        return con.sql(sql)
    except (duckdb.BinderException, duckdb.CatalogException) as exc:
        if "\nLINE " in str(exc):
            raise
        try:
            con.execute(sql)
        except type(exc) as again:
            raise again from None
        raise


def emit(con, sql: str, fmt: str, output: str | None, max_rows: int) -> None:
    """Run the statement `sql` and write its result as a table, CSV, JSON (array or
    lines) or Parquet, to `output` or stdout. A statement without a result prints `ok`.
    Of several statements the caller runs all but the last first (`before_last`).

    CSV and JSON are written a batch of rows at a time (`_batches`), so memory stays
    bounded however many rows the result has; an error's `LINE N` is the user's
    (`user_lines`), though the result is read through a projection of our own."""
    rel = relation(con, sql)
    if rel is None:
        click.echo("ok")
        return
    if fmt == "table":
        _emit_table(con, rel, sql, output, max_rows)
        return
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        import io

        import pyarrow as pa

        from worldtrace.schemas.tempfiles import write_parquet  # with page checksums

        try:
            table = rel.to_arrow_table()
            buf = io.BytesIO()
            write_parquet(table, buf, compression="zstd")
        except pa.ArrowException as exc:  # a DuckDB type Parquet has no form for
            raise click.ClickException(f"cannot write Parquet: {exc}") from None
        write_output(output, buf.getvalue())
        click.echo(f"{table.num_rows} rows -> {output}", err=True)
        return
    chunks = _csv(con, rel, sql) if fmt == "csv" else _json(con, rel, sql, lines=fmt == "jsonl")
    chunks = whole_first(chunks)  # a small result is one write: `| head -1` exits 0
    if output:
        with _sink(output) as write:
            for text in chunks:
                write(text.encode())
        return
    tty = sys.stdout.isatty()
    for text in chunks:
        if tty:  # a person reads it: the data's controls as escapes
            click.echo(printable(text), nl=False)
        else:  # data for a program: as it is (click strips colour codes unless told)
            click.echo(text, nl=False, color=True)


def split_statements(sql: str) -> list[str]:
    """The statements of `sql` (DuckDB's parser splits them); SQL it cannot parse is
    one, whose run reports the error."""
    import duckdb

    if not sql.strip():
        return []
    try:
        return [s.query for s in duckdb.extract_statements(sql)] or [sql]
    except (duckdb.Error, ValueError):
        return [sql]


COUNTED = ("CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "TRANSACTION")
"""Statement types whose result, without RETURNING, is DuckDB's count of rows changed."""


def before_last(con, sql: str) -> str:
    """Run every statement of `sql` but the last, which is returned to run; an earlier
    one whose rows no one sees is named on stderr. A `CREATE TEMP TABLE ... AS`, an
    `INSERT` (and the like) answers only DuckDB's `Count` of rows changed: that is not a
    result left unshown (`CREATE TEMP TABLE t AS ...; SELECT ... FROM t` warned that its
    statement 1 returns rows)."""
    import duckdb

    statements = split_statements(sql)
    if len(statements) < 2:
        return sql
    for k, statement in enumerate(statements[:-1], 1):
        rel = relation(con, statement)
        if rel is None:
            continue
        try:
            kind = duckdb.extract_statements(statement)[0].type.name
        except (duckdb.Error, ValueError, IndexError):
            kind = ""
        if kind in COUNTED and rel.columns == ["Count"]:
            continue
        click.echo(
            f"warning: statement {k} of {len(statements)} returns rows that are not "
            "shown: a query writes the last statement's result (query --shell shows each)",
            err=True,
        )
    return statements[-1]


def check_output_dir(output: str | None) -> None:
    """An output the user names (`query -o FILE`, `report -o FILE`) is made, never its
    missing directories: a typo in them put the file where nobody looks (as `cp` and
    `curl -o`, it is an error naming the directory, exit 1, nothing made). `-` (stdout)
    and a bare name (the current directory) pass. Checked before any work is done."""
    import os

    if not output or output == "-":
        return
    parent = os.path.dirname(os.path.abspath(os.path.expanduser(output)))
    if os.path.isdir(parent):
        return
    # the nearest part that exists, named as the user gave it: a file (`afile/x.csv`)
    # says so (`afile`, not the absolute path the check walked)
    up = os.path.dirname(output)
    while up and not os.path.lexists(os.path.expanduser(up)) and up != os.path.dirname(up):
        up = os.path.dirname(up)
    found = os.path.expanduser(up)
    if up and os.path.lexists(found) and not os.path.isdir(found):
        raise click.ClickException(f"cannot write {output}: {up} is a file, not a directory")
    named = os.path.dirname(output) or parent
    raise click.ClickException(
        f"cannot write {output}: directory {named} does not exist (create it first)"
    )


def our_stream(output: str):
    """The stream (`sys.stdout`, `sys.stderr`) that `output` names: `-`, or a path to
    the same file as one of them (`/dev/stdout`, `/proc/self/fd/1`, the file stdout is
    redirected to); else None."""
    import os

    if output == "-":
        return sys.stdout
    try:
        st = os.stat(output)  # through links: /dev/stdout
    except OSError:
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            ours = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):  # captured, no descriptor
            continue
        if (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
            return stream
    return None


def write_output(output: str, data: bytes) -> None:
    """`data` to what `output` names, as `_sink` writes it."""
    with _sink(output) as write:
        write(data)


@contextmanager
def _sink(output: str) -> Iterator[Callable[[bytes], Any]]:
    """A writer of bytes (called once per batch) to what `output` names: `-` and a name
    of our own stdout or stderr are written to that stream (`/dev/stdout` when stdout is
    redirected to a file: replacing that file, or opening it to write from its start,
    lost what the shell had appended before); another device or a pipe (a FIFO,
    `/dev/null`) is written into, not replaced; a symlink's target is replaced,
    atomically, not the link; any other path atomically: written beside it under a temp
    name and renamed when every batch is in, so a failed or stopped query leaves no
    half file under the name (nor the temp)."""
    import os
    import stat

    from worldtrace.schemas.tempfiles import atomic_writer

    stream = our_stream(output)
    if stream is not None:
        stream.flush()
        yield stream.buffer.write
        stream.buffer.flush()
        return
    try:
        mode = os.stat(output).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        with open(output, "wb") as fh:
            yield fh.write
        return
    # its directory exists (`check_output_dir`): a missing one is a typo, not made
    with atomic_writer(os.path.realpath(output), parents=False) as write:
        yield write


PIPE_BYTES = 64 * 1024
"""What a pipe holds (Linux's default): output up to this size is written at once."""


def whole_first(chunks: Iterable[str], limit: int = PIPE_BYTES) -> Iterator[str]:
    """`chunks` with the first ones joined until they hold `limit` bytes, then the rest
    as they come: output that fits in a pipe is one write, so a reader that closes the
    pipe after its first read (`query ... | head -1`) has had all of it, and the command
    exits 0 as docs/cli.md says; written a chunk at a time (the CSV header, then each
    batch), `head` exited between two writes and the next one failed (141, 6 runs in
    20). A larger output streams after its first `limit` bytes (memory stays bounded).
    An error while the first chunks are held writes them before it is raised, as when
    each was written at once (the rows before a failing one are printed)."""
    held: list[str] = []
    size = 0
    rest = iter(chunks)
    try:
        for text in rest:
            held.append(text)
            size += len(text.encode())
            if size >= limit:
                break
    except BaseException:
        if held:
            yield "".join(held)
        raise
    if held:
        yield "".join(held)
    yield from rest


BATCH_ROWS = 2048
"""Rows read from DuckDB and written at a time (CSV, JSON; one DuckDB vector): memory
holds one batch, kept small because a row of the store may hold whole observations."""

WRAPPED_LINE = re.compile(r"^LINE (\d+):", re.M)
"""DuckDB's `LINE N:` of an error: in a statement `wrap` made, one below the user's."""


def wrap(sql: str, select: str = "*") -> str:
    """`sql` (one statement) read through `SELECT select FROM (...)`: the user's SQL
    starts on the second line, so an error's `LINE N` is the user's plus one
    (`user_lines` takes it back); the statement's closing `;` goes (DuckDB's tokens
    find it, past a comment), and a `--` comment ends at its line."""
    import duckdb

    try:
        tokens = duckdb.tokenize(sql)
    except (duckdb.Error, RuntimeError, ValueError):
        tokens = []
    code = [t for t in tokens if t[1] != duckdb.token_type.comment]
    raw = sql.encode()  # a token's place is a byte offset
    if code and raw[code[-1][0] : code[-1][0] + 1] == b";":
        at = code[-1][0]
        sql = (raw[:at] + b" " + raw[at + 1 :]).decode()
    return f"SELECT {select} FROM (\n{sql}\n)"


def user_lines(text: str, wraps: int = 1) -> str:
    """DuckDB's error `text` about a statement `wrap` made (`wraps` times): its `LINE N`
    as the line of the user's SQL."""
    return WRAPPED_LINE.sub(lambda m: f"LINE {max(int(m[1]) - wraps, 1)}:", text)


@contextmanager
def _users_lines() -> Iterator[None]:
    """DuckDB's errors raised inside, about a statement `wrap` made, raised again with the
    user's `LINE N` (same exception class, so the caller tells them apart as before);
    an interrupt as it is."""
    import duckdb

    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        text = str(exc)
        fixed = user_lines(text)
        if fixed == text:
            raise
        raise type(exc)(fixed) from None


def _batches(con, rel, sql: str, exprs: str | None, limit: int | None = None) -> Iterator[list]:
    """The rows of `rel` (the relation of the user's statement `sql`), projected through
    `exprs` (None: as they are), `BATCH_ROWS` at a time, read from one run of the
    statement as DuckDB streams it: memory holds a batch, not the result. A SELECT is
    sent as the user wrote it inside `wrap`, so DuckDB's `LINE N` is theirs; a statement
    that ran already (`PRAGMA`, `INSERT ... RETURNING`: the rows are in memory) is
    projected as a relation."""
    import duckdb

    if rel.type != "QUERY_RELATION":
        done = rel.project(exprs) if exprs else rel
        yield (done.limit(limit) if limit else done).fetchall()
        return
    text = wrap(sql, exprs or "*") + (f" LIMIT {limit}" if limit else "")
    try:
        with _users_lines():
            cur = con.execute(text)
    except duckdb.ParserException:  # the user's SQL parsed: not ours to wrap, a relation
        done = rel.project(exprs) if exprs else rel
        yield (done.limit(limit) if limit else done).fetchall()
        return
    with _users_lines():
        while rows := cur.fetchmany(BATCH_ROWS):
            yield rows


def _csv(con, rel, sql: str) -> Iterator[str]:
    """CSV as the DuckDB CLI writes it, a batch of lines at a time: values quoted only
    when they need it, NULL empty (also alone on its line: a single column of ids pipes
    into `xargs`), an empty string `""` (so it is not NULL), nested values (struct, map,
    list) as JSON (strict: `_strict_json`), everything else in DuckDB's text form.
    (Python's csv module quotes a lone NULL as `""`; pyarrow's "needed" quoting still
    quotes every string.)"""
    exprs = ", ".join(
        (f"to_json(#{i})" if t.id in NESTED_TYPES else f"CAST(#{i} AS VARCHAR)")
        + f" AS {_ident(c)}"
        for i, (t, c) in enumerate(zip(rel.types, rel.columns, strict=True), 1)
    )
    nested = [i for i, t in enumerate(rel.types) if t.id in NESTED_TYPES]
    batches = _batches(con, rel, sql, exprs)
    first = next(batches, [])  # the query runs before the header: an error writes none
    yield ",".join(map(_csv_field, rel.columns)) + "\n"
    for rows in itertools.chain([first], batches):
        if nested:
            rows = [_strict_row(row, nested) for row in rows]
        yield "".join(",".join(map(_csv_field, row)) + "\n" for row in rows)


def _shortened(row: Sequence, floats: list[int]) -> list:
    """`row` with its FLOAT columns in their shortest float32 form (`_float32`)."""
    out = list(row)
    for i in floats:
        out[i] = _float32(out[i])
    return out


def _strict_row(row: tuple, nested: list[int]) -> list:
    """`row` with its nested columns' JSON text made strict (`_strict_json`)."""
    out = list(row)
    for i in nested:
        out[i] = _strict_json(out[i])
    return out


_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?(?:NaN|Infinity))')
"""A JSON string (kept as it is) or a NaN or infinity DuckDB's `to_json` wrote."""


def _strict_json(text: str | None) -> str | None:
    """DuckDB's `to_json` text with its NaN and infinities (`[1.0,NaN,-Infinity]`, which
    no strict JSON parser reads) as `null`, as JSON and JSONL write them; strings, and
    every other byte, as they are."""
    if text is None or ("NaN" not in text and "Infinity" not in text):
        return text
    return _NON_FINITE.sub(lambda m: "null" if m[1] else m[0], text)


_CSV_QUOTED = frozenset(',"\n\r')
"""What makes a CSV value need quotes (the separator, the quote, a line break)."""


def _csv_field(value: str | None) -> str:
    """One CSV value: NULL empty, an empty string or one holding `_CSV_QUOTED` quoted
    (inner quotes doubled), anything else as it is."""
    if value is None:
        return ""
    if value == "" or not _CSV_QUOTED.isdisjoint(value):
        return '"' + value.replace('"', '""') + '"'
    return value


def _json(con, rel, sql: str, lines: bool) -> Iterator[str]:
    """Rows as JSON objects (nested values as JSON, maps as objects), one array or one
    object per line, a batch of rows at a time, byte for byte the text `json.dumps` makes
    of them as `_json_values` reads them. DuckDB writes each row's text (`_row_json`: 21
    -> 58 MB/s on the bench corpus, its own JSON writer ~60), Python joins the rows; a
    result holding a type it cannot write alike is written value by value (`_json_values`)."""
    row = _row_json(rel)
    if row is None:
        yield from _json_values(con, rel, sql, lines)
        return
    sep = "" if lines else "["
    for batch in _batches(con, rel, sql, row):
        texts = [text for (text,) in batch]
        if lines and texts:
            yield _lower_escapes("\n".join(texts) + "\n")
        elif texts:
            yield _lower_escapes(sep + ", ".join(texts))  # the batch's items, as in the whole list
            sep = ", "
    if not lines:
        yield ("[" if sep == "[" else "") + "]\n"


def _json_values(con, rel, sql: str, lines: bool) -> Iterator[str]:
    """`_json`, each value read into Python and written by `json.dumps`. A value is written
    alike at the top of a row and inside a list or struct: a DECIMAL a number (it was the
    string `"1.10"` beside `[1.1]`), a FLOAT its shortest float32 form (`0.1`, as CSV
    writes it, not `0.10000000149011612`), a date, time or timestamp DuckDB's text (`+00`,
    as CSV and `to_json`, not `+00:00`)."""
    import json

    exprs = _text_exprs(rel, as_json=JSON_TYPES)
    names = rel.columns
    convert = [_json_value(t) for t in rel.types]
    # json.dumps with these options makes an encoder per call: one, made once
    dump = json.JSONEncoder(default=str, ensure_ascii=False, allow_nan=False).encode
    sep = "" if lines else "["
    for batch in _batches(con, rel, sql, exprs):
        rows = [
            {
                c: _finite(v if f is None else f(v))
                for c, f, v in zip(names, convert, row, strict=True)
            }
            for row in batch
        ]
        if lines:
            yield "".join(dump(r) + "\n" for r in rows)
        elif rows:
            yield sep + dump(rows)[1:-1]  # the batch's items, as in the whole list
            sep = ", "
    if not lines:
        yield ("[" if sep == "[" else "") + "]\n"


def _row_json(rel) -> str | None:
    """SQL making each row of `rel` the text `json.dumps` makes of it in `_json_values`
    (`{"name": value, ...}`, its `", "` and `": "`); None when a column's type is not
    one `_json_text` writes, or two columns share a name (a dict keeps one)."""
    names = rel.columns
    if len(set(names)) < len(names):
        return None
    parts = []
    for i, (name, t) in enumerate(zip(names, rel.types, strict=True), 1):
        value = _json_text(f"#{i}", t, top=True)
        if value is None or "\0" in name:
            return None
        parts += [_literal(("{" if i == 1 else ", ") + _json_key(name)), value]
    return f"concat({', '.join(parts)}, '}}') AS row_json"


def _json_text(x: str, t: Any, top: bool = False, depth: int = 0) -> str | None:
    """SQL writing the value `x` of DuckDB type `t` (never NULL: `null`) as `_json_values`
    writes it; None for a type it writes otherwise (a FLOAT's shortest float32 form, a
    union, a JSON value inside a nested one, a map not keyed by text or integers).

    A DOUBLE is DuckDB's text, which is Python's `repr` (`1e+16`, `1e-05`, `-0.0`;
    NaN and infinities `null`); a DECIMAL is the number `to_json` writes, read as Python
    reads it (a float when it has a point or exponent); a string is `to_json`'s, whose
    escapes are Python's but for the case of nine (`_lower_escapes`)."""
    kind = t.id
    if kind == "null":
        return "'null'"
    if kind in JSON_INTEGERS or kind == "boolean":
        return f"COALESCE(CAST({x} AS VARCHAR), 'null')"
    if kind == "double":
        return f"CASE WHEN isfinite({x}) THEN CAST({x} AS VARCHAR) ELSE 'null' END"
    if kind == "decimal":
        j = f"CAST(to_json({x}) AS VARCHAR)"
        floating = f"regexp_matches({j}, '[.eE]')"
        return f"COALESCE(CASE WHEN {floating} THEN CAST(CAST({j} AS DOUBLE) AS VARCHAR) ELSE {j} END, 'null')"
    if kind in JSON_STRINGS:
        if str(t) == "JSON" and not top:  # to_json writes it as JSON, parsed and written again
            return None
        as_text = top and (kind in TEXT_TYPES or str(t) == "JSON")  # as `_text_exprs` reads it
        value = f"CAST({x} AS VARCHAR)" if as_text else x
        return f"COALESCE(CAST(to_json({value}) AS VARCHAR), 'null')"
    if kind in ("list", "array"):
        e = f"e{depth}"
        item = _json_text(e, dict(t.children)["child"], depth=depth + 1)
        if item is None:
            return None
        items = f"array_to_string(list_transform({x}, {_lambda(e, item)}), ', ')"
        return f"CASE WHEN {x} IS NULL THEN 'null' ELSE concat('[', {items}, ']') END"
    if kind == "struct":
        names = [name for name, _ in t.children]
        if not names or "" in names or len({n.lower() for n in names}) < len(names):
            return None
        fields = []
        for k, (name, child) in enumerate(t.children):
            value = _json_text(f"struct_extract({x}, {_literal(name)})", child, depth=depth)
            if value is None or "\0" in name:
                return None
            fields += [_literal(("{" if k == 0 else ", ") + _json_key(name)), value]
        return f"CASE WHEN {x} IS NULL THEN 'null' ELSE concat({', '.join(fields)}, '}}') END"
    if kind == "map":
        e = f"e{depth}"
        key_t, value_t = dict(t.children)["key"], dict(t.children)["value"]
        if key_t.id in ("varchar", "enum") and str(key_t) != "JSON":
            key = f"CAST(to_json({e}.key) AS VARCHAR)"
        elif key_t.id in JSON_INTEGERS:
            key = f"concat('\"', CAST({e}.key AS VARCHAR), '\"')"
        else:
            return None
        value = _json_text(f"{e}.value", value_t, depth=depth + 1)
        if value is None:
            return None
        entry = _lambda(e, f"concat({key}, ': ', {value})")
        items = f"array_to_string(list_transform(map_entries({x}), {entry}), ', ')"
        return f"CASE WHEN {x} IS NULL THEN 'null' ELSE concat('{{', {items}, '}}') END"
    return None


def _json_key(name: str) -> str:
    """A key as `json.dumps` writes it, with its `": "`."""
    import json

    return json.dumps(name, ensure_ascii=False) + ": "


def _literal(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _lambda(name: str, body: str) -> str:
    """A DuckDB lambda: `lambda x: ...` since 1.3 (2.0 refuses the arrow), `x -> ...`
    before."""
    import duckdb

    if tuple(int(p) for p in duckdb.__version__.split(".")[:2]) >= (1, 3):
        return f"lambda {name}: {body}"
    return f"{name} -> {body}"


_UPPER_ESCAPE = re.compile(r"\\+u00(?:0[BEF]|1[A-F])")
r"""An escape DuckDB writes in upper case (`\u001B`, where `json.dumps` writes `\u001b`),
with the backslashes before it: one of an odd number of them starts the escape, an even
number are escaped backslashes (the text `\\u001B`)."""


def _lower_escapes(text: str) -> str:
    r"""`text` (JSON DuckDB wrote) with its `\u00XX` escapes in lower case, as `json.dumps`
    writes them; the text of a value is left as it is."""
    if "\\u00" not in text:
        return text

    def lower(m: re.Match) -> str:
        s = m[0]
        return s[:-2] + s[-2:].lower() if (len(s) - 5) % 2 else s

    return _UPPER_ESCAPE.sub(lower, text)


TEMPORAL_TYPES = frozenset(
    {
        "date",
        "time",
        "time_ns",
        "time with time zone",
        "timestamp",
        "timestamp_s",
        "timestamp_ms",
        "timestamp_ns",
        "timestamp with time zone",
    }
)
"""Written in DuckDB's text form, as CSV and `to_json` write them (`2024-01-02
03:04:05+00`, a TIMESTAMP_NS's nanoseconds, `infinity`): Python's rendering said `+00:00`,
cut nanoseconds and made `infinity` a date of the year 9999."""
TEXT_TYPES = frozenset({"blob", "interval", "bit"}) | TEMPORAL_TYPES
"""Types whose Python value would print as Python's rendering (`b'\\x00'`, `3 days,
0:00:00`, `+00:00`): written in DuckDB's text form instead, as CSV writes them."""
JSON_TYPES = NESTED_TYPES | {"decimal"}
"""What JSON and JSONL read through DuckDB's `to_json`: nested values, and a DECIMAL,
so that one is the same number at the top of a row as inside a list."""
JSON_INTEGERS = frozenset(
    {"tinyint", "smallint", "integer", "bigint", "hugeint"}
    | {"utinyint", "usmallint", "uinteger", "ubigint", "uhugeint"}
)
"""Integer types whose DuckDB text is the number `json.dumps` writes of the Python int."""
JSON_STRINGS = frozenset({"varchar", "enum", "uuid"}) | TEXT_TYPES
"""Types `_json_values` writes as a JSON string (at the top of a row the `TEXT_TYPES` in
DuckDB's text form, inside a nested value as `to_json` writes them)."""


def _text_exprs(rel, as_json: frozenset[str] = NESTED_TYPES) -> str | None:
    """The projection of `rel` with the types of `as_json` as JSON text (`to_json`) and
    `TEXT_TYPES` as DuckDB's text form; None when it has neither."""
    kinds = [t.id for t in rel.types]
    if not any(k in TEXT_TYPES or k in as_json for k in kinds):
        return None
    return ", ".join(
        (
            f"to_json(#{i})"
            if k in as_json
            else f"CAST(#{i} AS VARCHAR)"
            if k in TEXT_TYPES
            else f"#{i}"
        )
        + f" AS {_ident(c)}"
        for i, (k, c) in enumerate(zip(kinds, rel.columns, strict=True), 1)
    )


def _json_value(t: Any) -> Callable[[Any], Any] | None:
    """How a value of DuckDB type `t`, as `_text_exprs(as_json=JSON_TYPES)` reads it,
    becomes its JSON value: JSON text parsed (its FLOATs shortened), a FLOAT shortened;
    None: as it is."""
    import json

    floats = _float32s(t)
    if t.id not in JSON_TYPES:
        return floats
    if floats is None:
        return lambda v: None if v is None else json.loads(v)
    return lambda v: None if v is None else floats(json.loads(v))


def _float32s(t: Any) -> Callable[[Any], Any] | None:
    """What makes every FLOAT (float32) within a value of DuckDB type `t` (parsed from
    `to_json`, which writes a FLOAT widened: `0.10000000149011612`) its shortest float32
    form (`_float32`); None when `t` holds no FLOAT."""
    kind = t.id
    if kind == "float":
        return _float32
    if kind in ("list", "array", "map"):
        inner = _float32s(dict(t.children)["value" if kind == "map" else "child"])
        if inner is None:
            return None
        if kind == "map":  # `to_json` writes a map as an object
            return lambda v: {k: inner(x) for k, x in v.items()} if isinstance(v, dict) else v
        return lambda v: [inner(x) for x in v] if isinstance(v, list) else v
    if kind in ("struct", "union"):  # a union: an object of its one member
        fields = {name: f for name, c in t.children if name and (f := _float32s(c))}
        if not fields:
            return None
        return lambda v: (
            {k: fields[k](x) if k in fields else x for k, x in v.items()}
            if isinstance(v, dict)
            else v
        )
    return None


def _float32(v: Any) -> Any:
    """A float32 widened to a Python float (`0.10000000149011612`) as the shortest
    decimal that is the same float32 (`0.1`), as DuckDB writes a FLOAT as text."""
    import struct

    if not isinstance(v, float) or not math.isfinite(v):
        return v
    same = struct.pack("<f", v)
    for digits in range(1, 10):  # 9 significant digits tell every float32 apart
        short = float(f"{v:.{digits}g}")
        try:
            if struct.pack("<f", short) == same:
                return short
        except OverflowError:  # rounded up past the largest float32
            continue
    return v


def _finite(v: Any) -> Any:
    """JSON has no NaN or Infinity (strict parsers refuse them): null, in values at any
    depth."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [_finite(x) for x in v]
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    return v


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _emit_table(con, rel, sql: str, output: str | None, max_rows: int) -> None:
    """A box-drawn table; on a terminal it fits the width without cutting an id, anywhere
    else (a pipe, a file) no cell is cut, so ids survive copy and paste. A nested value
    is strict JSON (`_strict_json`), as in CSV."""
    from rich.console import Console

    nested = [i for i, t in enumerate(rel.types) if t.id in NESTED_TYPES]
    floats = [i for i, t in enumerate(rel.types) if t.id == "float"]
    exprs = _text_exprs(rel)
    rows = [r for batch in _batches(con, rel, sql, exprs, limit=max_rows + 1) for r in batch]
    if nested:
        rows = [_strict_row(row, nested) for row in rows]
    if floats:  # a FLOAT as CSV writes it (0.1), not widened (0.10000000149011612)
        rows = [_shortened(row, floats) for row in rows]
    t = make_table(rel.columns, rows[:max_rows])
    if len(rows) > max_rows:
        t.caption = f"first {max_rows} rows shown (--max-rows)"
    if output:
        import io

        buf = io.StringIO()
        Console(file=buf, width=WIDE, color_system=None, highlight=False).print(t)
        write_output(output, buf.getvalue().encode())
    else:
        print_table(t)
