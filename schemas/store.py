"""The shard store: atomic, rolling Parquet shards under one store root.

A shard becomes visible only by an atomic rename after its footer is written and
fsynced; readers only see `*.parquet` files whose name does not start with `.`, so a
crash mid-write leaves at most a hidden temp file that the next writer sweeps.

A failed write (a full disk, any OSError) removes its temp file at once, leaves the
published shards as they were and raises `StoreWriteError`, one line naming the path.
Temp names, sweeping and the atomic single-file writes live in `tempfiles.py`.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from . import fields as F
from .arrow import TRAJECTORY_SCHEMA, micros_casts, to_batch, zoned_times
from .layout import Store  # noqa: F401  (re-exported: where it always was)
from .records import Trajectory, from_jsonable, trajectory_from_dict
from .tempfiles import (  # noqa: F401  (re-exported: the store's public writing API)
    TEMP_PREFIXES,
    TMP_PREFIX,
    TMP_STALE_SECONDS,
    ArrowFileWriter,
    StoreWriteError,
    _fsync_dir,
    first_line,
    is_leftover,
    open_parquet,
    parquet_writer,
    sweep_leftovers,
    sweep_stale_temps,
    temp_name,
    try_lock,
    verified_scan_options,
    write_bytes_atomic,
    write_parquet,
    write_table_atomic,
)
from .text import BadText, byte_lines, not_text, not_utf8, too_deep, undecodable, utf8
from .validate import Problem, validate_dict


class ShardWriter:
    """Writes rows into rolling Parquet shards (zstd, page checksums) that appear atomically.

    Use as a context manager: on an exception the shard in progress is discarded,
    on success it is published. `paths` lists the published shards.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        schema: pa.Schema = TRAJECTORY_SCHEMA,
        prefix: str = "part",
        target_bytes: int = F.SHARD_TARGET_BYTES,
        row_group_rows: int = F.SHARD_ROW_GROUP_ROWS,
        compression: str = "zstd",
        run: str | None = None,
    ):
        """`run` names this writer's shards (random by default; fixed for reproducible output)."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.prefix = prefix
        self.target_bytes = target_bytes
        self.row_group_rows = row_group_rows
        self.compression = compression
        self.paths: list[Path] = []
        self.rows_written = 0
        self._run = run or uuid.uuid4().hex[:12]
        self._seq = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._tmp: Path | None = None
        sweep_stale_temps(self.directory)

    # -- writing -------------------------------------------------------------
    def write(self, records: Trajectory | Iterable[Trajectory]) -> None:
        if isinstance(records, Trajectory):
            records = [records]
        records = list(records)
        if records:
            self.write_batch(to_batch(records))

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.write_batch(pa.RecordBatch.from_pylist(rows, schema=self.schema))

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self.write_batch(b)
            return
        if batch.num_rows == 0:
            return
        if not batch.schema.equals(self.schema):
            batch = pa.RecordBatch.from_pylist(batch.to_pylist(), schema=self.schema)
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= self.row_group_rows:
            self._flush_row_group(self.row_group_rows)

    def _flush_row_group(self, rows: int | None = None) -> None:
        """Write one row group of `rows` rows (all pending when None), then maybe roll."""
        if not self._pending_rows:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        rows = table.num_rows if rows is None else rows
        group, rest = table.slice(0, rows), table.slice(rows)
        self._pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows
        try:
            if self._writer is None:
                name = temp_name(TMP_PREFIX, f"{self._run}-{self._seq:05d}{F.SHARD_SUFFIX}")
                self._tmp = self.directory / name
                self._writer = parquet_writer(
                    self._tmp, self.schema, compression=self.compression, use_dictionary=True
                )
            self._writer.write_table(group, row_group_size=self.row_group_rows)
            self.rows_written += group.num_rows
            full = self._tmp is not None and self._tmp.stat().st_size >= self.target_bytes
        except OSError as exc:
            raise self._failed(exc) from exc
        if full:
            self._publish()

    def _failed(self, exc: OSError) -> StoreWriteError:
        """Drop the shard in progress (its temp file goes at once) and name what failed."""
        path = self._tmp or self.directory
        self.abort()
        return exc if isinstance(exc, StoreWriteError) else StoreWriteError(path, exc)

    def _publish(self) -> None:
        assert self._writer is not None and self._tmp is not None
        final = self.directory / f"{self.prefix}-{self._run}-{self._seq:05d}{F.SHARD_SUFFIX}"
        try:
            self._writer.close()
            with open(self._tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(self._tmp, final)
            _fsync_dir(self.directory)
        except OSError as exc:
            raise self._failed(exc) from exc
        self.paths.append(final)
        self._writer, self._tmp = None, None
        self._seq += 1

    # -- lifecycle -------------------------------------------------------------
    def close(self) -> list[Path]:
        self._flush_row_group()
        if self._writer is not None:
            self._publish()
        return self.paths

    def abort(self) -> None:
        """Drop the shard in progress; published shards stay. Never raises for the
        writer's own state: closing a writer on a full disk fails again, and the temp
        file must go regardless. A temp file that cannot be removed (its directory became
        read-only) stays hidden from readers, and a later `abort` tries again; raising
        here would hide the error that made the write fail."""
        self._pending, self._pending_rows = [], 0
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError):  # no room for the footer: dropped below anyway
                writer.close()
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.unlink(missing_ok=True)
                self._tmp = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# -- reading -------------------------------------------------------------------
def visible(p: Path) -> bool:
    """Whether `p`'s name is one a reader takes: not hidden (`.`: a writer's temp file, a
    journal folder) nor ours (`_`: an index)."""
    return not p.name.startswith((".", "_"))


def rebased(path: str, old_root: Path, new_root: Path) -> str:
    """`path` under `new_root` if it was under `old_root` (a store copied or moved since
    it recorded the path), else as it was."""
    p = Path(path)
    return str(new_root / p.relative_to(old_root)) if p.is_relative_to(old_root) else path


def shard_files(
    path: str | os.PathLike,
    suffixes: tuple[str, ...] = (F.SHARD_SUFFIX,),
    broken: bool = False,
    skipped: list[Path] | None = None,
) -> list[Path]:
    """Visible shard files under `path` (a file or a directory, recursively), sorted.
    `broken`: with the symlinks of those names to nothing (`broken_link`), so that an
    input whose file is gone is named rather than passed over. `skipped`: gets the
    visible files of other names the walk passes over, to be said."""
    path = Path(path)
    if path.is_file() or (broken and broken_link(path)):
        return [path]
    if not path.exists():
        return []
    found = sorted(
        p
        for p in path.rglob("*")
        if (p.is_file() or (broken and broken_link(p) is not None))
        and visible(p)
        and all(visible(q) for q in p.relative_to(path).parents if str(q) != ".")
    )
    if skipped is not None:
        skipped.extend(p for p in found if not p.name.endswith(suffixes))
    return [p for p in found if p.name.endswith(suffixes)]


def read_parquet(
    files: str | os.PathLike | list[str | os.PathLike], columns: list[str] | None = None
) -> pa.Table:
    """A Parquet file, or several (at least one) in turn, as one table of `columns`.
    `pq.read_table` goes through pyarrow's dataset layer: its first use imports it (~8 ms
    of every `process` run, which needs nothing it adds) and each call costs ~0.5 ms
    more; read one file at a time it reads as fast. Raises what `pq.read_table` raises
    (OSError, `pa.ArrowException`; a page whose checksum fails is OSError), less its
    prefix naming the file: callers name it."""
    many = isinstance(files, list)
    tables = []
    for f in files if many else [files]:
        with open_parquet(f) as one:  # one file's columns on this thread: as fast
            tables.append(one.read(columns=columns, use_threads=not many))
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")


def read_table(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    files = shard_files(path)
    if not files:
        return TRAJECTORY_SCHEMA.empty_table()
    return read_parquet(list(files), columns)


def row_count(path: str | os.PathLike) -> int:
    """Rows of the visible shards under `path`, from their footers (nothing else is read);
    unreadable shards count 0 (readers name them)."""
    total = 0
    for f in shard_files(path):
        try:
            total += open_parquet(f).metadata.num_rows
        except Exception:  # pyarrow raises several types for a torn footer
            continue
    return total


def iter_batches(
    path: str | os.PathLike, batch_size: int = 1024, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    for f in shard_files(path):
        yield from open_parquet(f).iter_batches(batch_size=batch_size, columns=columns)


def read_records(path: str | os.PathLike) -> Iterator[Trajectory]:
    for batch in iter_batches(path):
        for row in batch.to_pylist():
            yield trajectory_from_dict(row)


# -- mixed inputs: Parquet shards and JSONL of records -----------------------------
JSONL_SUFFIXES = (*F.LINE_SUFFIXES, ".json")  # a record a line (a .json one too)
INPUT_SUFFIXES = (F.SHARD_SUFFIX, *JSONL_SUFFIXES)
"""The names `process` and `validate` read, as written (`RUN.JSONL` is not one)."""


def input_files(
    paths: Iterable[str | os.PathLike], skipped: list[Path] | None = None
) -> list[Path]:
    """The Parquet and JSONL files under `paths`, broken symlinks included (`broken_link`:
    `validate` reports them, `process` stops on them). `skipped`: gets the visible files
    of other names under a directory (`SHARD.PARQUET`, `RUN.JSONL`, `x.jsonl.gz`), as
    `importers.input_files` does, to be said (`output.not_read_line`): `process` and
    `validate` passed over 44 of 49 records so, exit 0, nothing said (2026-12-07, a hunt).
    A store's own files beside its shards are hidden (`.spec.json`, journals)."""
    out: list[Path] = []
    for p in paths:
        out.extend(shard_files(p, INPUT_SUFFIXES, broken=True, skipped=skipped))
    return out


def sized_units(path: Path) -> list[tuple[str, int | None, int | None]]:
    """Independent units of work in a file, its row groups (Parquet) or the whole file,
    with each one's row count where the Parquet footer says it (None for JSONL and for a
    file whose footer cannot be read)."""
    if path.name.endswith(F.SHARD_SUFFIX):
        try:
            meta = open_parquet(path).metadata
        except Exception:
            return [(str(path), None, None)]  # scanning it reports the problem
        groups = [(str(path), g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
        return groups or [(str(path), None, 0)]
    return [(str(path), None, None)]


@dataclass(frozen=True)
class Unread(Problem):
    """Rows of a Parquet file that did not read (pages that do not decode), by their row
    numbers in the file (`rows`, from the footer): each is a record lost, which the
    accounting counts (`units.read_valid`: a reject per row), where a file that is no
    shard or whose footer does not read is one Problem (its rows are none, or unknown)."""

    rows: range = range(0)


def broken_link(path: Path) -> str | None:
    """Why `path` cannot be read when it is a symlink to nothing (its target is gone, or
    a loop), else None: such an input is named, never passed over."""
    if not path.is_symlink() or path.exists():
        return None
    return f"a broken symlink: {os.readlink(path)} does not exist"


def scan_file(
    path: Path,
    row_group: int | None = None,
    rows: tuple[int, int] | None = None,
    micros: bool = False,
) -> Iterator[tuple[str, dict[str, Any] | Problem]]:
    """Yield (location, record dict) or (location, Problem) for every record of a file
    (or of one of its Parquet row groups, or of rows `[start, stop)` of that group).
    `micros`: a Parquet file's timestamps come as int epoch microseconds, not datetimes
    (`arrow.micros_casts`; validate such records with `micros=True`).

    Never raises for bad content: a truncated Parquet file, a foreign schema or a broken
    JSON line becomes a Problem that names the file (and row or line).
    """
    for where, item, _ in scan_screened(path, row_group, rows, micros):
        yield where, item


Screen = Callable[[pa.RecordBatch], Any]
"""Per row of a batch of records, a flag (an array of bools): `redact.screen`."""

ESCAPED = 4
"""A bit of the flag `scan_screened` gives a record of a JSON file (1, or `1 | ESCAPED`):
its text held a `\\ud800`-`\\udfff` escape, so a string of it may hold a lone surrogate,
which UTF-8 cannot store (`validate_dict(texts=True)` names it). Text that was read as
strict UTF-8 holds none otherwise, so the other records (nearly all) are not walked for
one. Arrow rows never hold one: their flags (0/1, `redact.screen`) lack this bit."""


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def may_hold_surrogates(text: str) -> bool:
    """Whether JSON `text` (decoded as strict UTF-8) holds an escape that may decode to a
    lone surrogate (`\\ud800`-`\\udfff`: half of a pair, or a whole pair, or an escaped
    backslash before `ud800`: a false alarm costs only the check). One C regex search:
    ~0.8 ns a byte, where `"\\ud" in text or "\\uD" in text` took ~2."""
    return _SURROGATE_ESCAPE.search(text) is not None


def texts_to_check(flag: Any) -> bool:
    """Whether a record `scan_screened` flagged so may hold a lone surrogate: what
    `validate_dict(texts=...)` is given."""
    return type(flag) is int and bool(flag & ESCAPED)


def scan_screened(
    path: Path,
    row_group: int | None = None,
    rows: tuple[int, int] | None = None,
    micros: bool = False,
    screen: Screen | None = None,
) -> Iterator[tuple[str, dict[str, Any] | Problem, int]]:
    """`scan_file`, each record with its flag from `screen` applied to the Arrow batch it
    was read from (True without a screen); a record of a JSON file is flagged 1, or
    `1 | ESCAPED` when its strings may hold a lone surrogate (`texts_to_check`)."""
    if (why := broken_link(path)) is not None:
        yield str(path), Problem(str(path), "<file>", why), True
        return
    if not path.name.endswith(F.SHARD_SUFFIX):
        for where, item, escaped in _scan_jsonl(path):
            yield where, item, 1 | ESCAPED if escaped else 1
        return
    for first, part in _parquet_parts(path, row_group, rows, micros):
        if isinstance(part, Problem):
            yield first, part, True
            continue
        n = part.num_rows
        flags = screen(part).tolist() if screen is not None else [True] * n
        for k, d, flag in zip(range(first, first + n), part.to_pylist(), flags, strict=True):
            yield f"{path}:row {k}", d, flag


def declared(path: Path) -> bool:
    """Whether `path` is a Parquet file of exactly the declared columns (names, types and
    nullability at every depth, as our writers write): its rows need no type checks
    (`validate_dict(declared=True)`). A foreign writer's file is checked whole."""
    return how_to_read(path)[0]


def how_to_read(path: Path) -> tuple[bool, bool]:
    """(`declared`, whether its timestamps may be read as epoch microseconds:
    `arrow.zoned_times`) from one read of the footer's schema; (False, False) for a JSON
    file, whose times are text, and for an unreadable one (scan_file reports it)."""
    if not path.name.endswith(F.SHARD_SUFFIX):
        return False, False
    try:
        schema = pq.read_schema(path)
    except Exception:  # not Parquet, or unreadable
        return False, False
    known = schema.equals(TRAJECTORY_SCHEMA, check_metadata=False)
    return known, known or zoned_times(schema)


def _parquet_parts(
    path: Path, row_group: int | None, rows: tuple[int, int] | None = None, micros: bool = False
) -> Iterator[tuple[int, pa.RecordBatch] | tuple[str, Problem]]:
    """(number of the first row, batch) of the rows asked for, or (location, Problem).
    Read group by group: a group whose pages do not decode is one `Unread` and the next
    groups are read (read as one stream, the first bad page ended the file's reading)."""
    try:
        pf = open_parquet(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        why = first_line(exc)  # pyarrow's ends in a newline, or runs to several lines
        yield str(path), Problem(str(path), "<file>", f"unreadable Parquet: {why}")
        return
    missing = [n for n in (F.DOMAIN, F.TURNS) if n not in pf.schema_arrow.names]
    if missing:
        if not row_group and not (rows and rows[0]):  # a foreign file: reported once
            msg = f"not a trajectory shard: missing column(s) {', '.join(missing)}"
            yield str(path), Problem(str(path), "<schema>", msg)
        return
    meta = pf.metadata
    groups = range(meta.num_row_groups) if row_group is None else [row_group]
    first = sum(meta.row_group(g).num_rows for g in range(groups[0] if groups else 0))
    casts = micros_casts(pf.schema_arrow) if micros else []
    for g in groups:
        n = meta.row_group(g).num_rows
        yield from _group_parts(pf, path, g, first, rows or (0, n), casts)
        first += n


def _group_parts(
    pf: pq.ParquetFile,
    path: Path,
    group: int,
    first: int,
    rows: tuple[int, int],
    casts: list[pa.Schema],
) -> Iterator[tuple[int, pa.RecordBatch] | tuple[str, Problem]]:
    """Rows `[start, stop)` of one row group, whose first row is row `first` of the file;
    from a page that does not decode (or fails its checksum) on, its rows are one `Unread`
    (the footer counts them). Rows before `start` are decoded, not converted."""
    start, stop = rows
    at = 0  # rows of the group read so far
    try:
        for batch in pf.iter_batches(batch_size=512, row_groups=[group]):
            lo, hi = max(start - at, 0), min(batch.num_rows, stop - at)
            if lo < hi:
                part = batch.slice(lo, hi - lo)
                for schema in casts:
                    part = part.cast(schema, safe=False)  # ns -> us drops what micros() drops
                yield first + at + lo, part
            at += batch.num_rows
            if at >= stop:
                return
    except Exception as exc:
        lost = range(first + max(at, start), first + stop)
        where = f"{path}:row {lost.start}"
        msg = f"unreadable Parquet: {first_line(exc)} (rows {lost.start}-{lost.stop - 1} not read)"
        yield where, Unread(where, "<file>", msg, lost)


class _NotJson(float):
    """`NaN`, `Infinity`, `-Infinity` or a number too large for a float (`1e400`): Python's
    reader takes them (as nan or infinity), JSON has no such value. Read as one of these,
    which keeps how it was written, so that the field holding it can be named."""

    text: str


class _Reader:
    """How the store reads JSON records: `text.loads`, but a value JSON has not is read as
    `_NotJson` and counted (`odd`: the last text's), to be refused with its field
    (`_not_json_problem`), not stored as nan or infinity (a query's JSON shows either as
    null, an unknown value). One per file read: the count is its own."""

    def __init__(self) -> None:
        self.odd = 0
        self._decoder = json.JSONDecoder(parse_constant=self._not_json, parse_float=self._float)

    def _not_json(self, text: str) -> _NotJson:
        self.odd += 1
        value = _NotJson(text)
        value.text = text
        return value

    def _float(self, text: str) -> float:
        value = float(text)
        return self._not_json(text) if value in (math.inf, -math.inf) else value

    def loads(self, text: str, unit: str = "line") -> Any:
        """The JSON value of `text`; each failure a located BadText (`text.loads`)."""
        self.odd = 0
        try:
            return self._decoder.decode(text)
        except json.JSONDecodeError as exc:
            raise undecodable(text, exc, unit) from None
        except RecursionError:  # the line's problem, not the end of the file it is in
            raise too_deep(text) from None
        except ValueError as exc:  # an integer of 5,000 digits
            raise BadText(f"invalid JSON: {exc}") from None


def _not_json_problem(where: str, value: Any) -> Problem | None:
    """Where a value `_Reader` read holds one JSON has not (`_NotJson`): the first's field
    and how many more, or None (a duplicate key replaced it). Walked without recursion."""
    found, todo = [], [("", value)]
    while todo:
        at, v = todo.pop()
        if type(v) is _NotJson:
            found.append((at or "<record>", v.text))
        elif isinstance(v, dict):
            todo.extend((f"{at}.{k}" if at else k, x) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            todo.extend((f"{at}[{i}]", x) for i, x in reversed(list(enumerate(v))))
    if not found:
        return None
    (field, text), more = found[0], found[1:]
    why = (
        f"{text} is not JSON: write a number, or null if it is unknown"
        if text in ("NaN", "Infinity", "-Infinity")
        else f"{text} is too large for a number (a float holds up to 1.8e308)"
    )
    if more:
        also = ", ".join(f"{t} at {f}" for f, t in more[:3])
        why += f" (also {also}{', ...' if len(more) > 3 else ''})"
    return Problem(where, field, why)


def _scan_json(path: Path) -> Iterator[tuple[str, dict[str, Any] | Problem, bool]]:
    """A `.json` file: one record, or a list of records. Read strictly (`text`): a file
    that is not UTF-8 text, or not JSON, or nested too deep, is one Problem at its line;
    a record holding NaN, an infinity or `1e400` one naming the field (`_Reader`). Each
    with whether the file may hold a lone surrogate (`may_hold_surrogates`)."""
    data = path.read_bytes()
    if (why := not_text(data, path)) is not None:
        yield str(path), Problem(str(path), "<file>", why), False
        return
    try:
        text = utf8(data.removeprefix(codecs.BOM_UTF8), path)
    except BadText as exc:
        where = f"{path}:line {exc.line}"
        yield where, Problem(where, "<utf8>", exc.message), False
        return
    reader = _Reader()
    try:
        doc = reader.loads(text, "file")
    except BadText as exc:
        where = f"{path}:line {exc.line}"
        yield where, Problem(where, "<json>", exc.message), False
        return
    escaped = may_hold_surrogates(text)
    items = doc if isinstance(doc, list) else [doc]
    for n, d in enumerate(items):
        where = f"{path}:record {n}" if isinstance(doc, list) else str(path)
        if reader.odd and (problem := _not_json_problem(where, d)) is not None:
            yield where, problem, False
            continue
        yield where, from_jsonable(d) if isinstance(d, dict) else d, escaped


def _scan_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any] | Problem, bool]]:
    """Every line of a JSONL file, read strictly (`text`): a line that is not UTF-8, not
    JSON or nested too deep to parse is a Problem naming its line (never replaced text),
    one holding NaN, an infinity or `1e400` a Problem naming its line and the field
    (`_Reader`), and the next lines are read. A leading UTF-8 byte order mark is passed
    over; a compressed or UTF-16 file is one Problem. Each with whether its line may hold
    a lone surrogate (`may_hold_surrogates`)."""
    if path.name.endswith(".json"):
        yield from _scan_json(path)
        return
    reader = _Reader()
    with open(path, "rb") as fh:
        for n, raw in enumerate(byte_lines(fh), 1):
            if n == 1:
                if (why := not_text(raw, path)) is not None:
                    yield str(path), Problem(str(path), "<file>", why), False
                    return
                raw = raw.removeprefix(codecs.BOM_UTF8)
            where = f"{path}:line {n}"
            try:
                line = raw.decode()
            except UnicodeDecodeError as exc:
                yield where, Problem(where, "<utf8>", not_utf8(raw, exc, path).message), False
                continue
            if not line.strip():
                continue
            try:
                d = reader.loads(line)
            except BadText as exc:
                yield where, Problem(where, "<json>", exc.message), False
                continue
            if reader.odd and (problem := _not_json_problem(where, d)) is not None:
                yield where, problem, False
                continue
            escaped = may_hold_surrogates(line)
            yield where, from_jsonable(d) if isinstance(d, dict) else d, escaped


def check_files(
    files: Iterable[Path], foreign: Callable[[Path, str, Any], str | None] | None = None
) -> Iterator[tuple[bool, list[Problem | str]]]:
    """(is a record, its problems) for every record, or unreadable part, of `files`.
    `foreign(file, where, item)`: one line saying what a record that is not ours is (a
    format `import` reads), instead of a schema problem per field; None: it is ours."""
    for f in files:
        for where, item, flag in scan_screened(f):
            if isinstance(item, Problem):
                yield False, [item]
            elif foreign is not None and (line := foreign(f, where, item)):
                yield False, [line]
            else:
                yield True, validate_dict(item, where, texts=texts_to_check(flag))


def write_jsonl(path: str | os.PathLike, records: Iterable[Trajectory]) -> Path:
    data = "".join(t.to_json() + "\n" for t in records).encode()
    return write_bytes_atomic(path, data)
