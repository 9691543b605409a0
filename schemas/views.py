"""DuckDB views over a store (DESIGN.md "DuckDB views").

The columns that restate record fields are derived from the declaration
(`view_columns`): every field of the record, and each nested field whose `spec(view=...)`
names a column. Only computed columns (num_turns, action_chars, ...) are written here.

Views over data that does not exist yet are empty, with the same columns, and shards
written before a field was added read with that field null: each view reads the visible
Parquet shards UNION ALL BY NAME an empty Arrow table of the current schema (DuckDB
merges struct fields by name). A shard whose footer does not read (truncated, corrupt)
is left out with a warning naming it, so one bad file never hides the rest; one whose
footer reads but whose pages do not (a disk fault) fails the query that reaches it,
and `read_failure` says that in one line naming the file and what to do. DuckDB (2.0)
does not check the pages' checksums (`tempfiles.PAGE_CHECKSUMS`): a bit flipped in a
page zstd kept raw reads as other text here; `doctor` and `export` name the file. The
connection is locked down (`lockdown.py`): it reads the store and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shlex
import sqlite3
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from . import fields as F
from .arrow import arrow_schema
from .lockdown import locked_connection
from .publish import finish_publish, restore_swaps, run_manifest, tables_run
from .records import Trajectory
from .spec import fields_of, item_of, kind_of
from .sqlite import connect_read_only
from .store import Store, open_parquet, shard_files
from .tables import STORED_TURNS_SCHEMA, TABLE_ROWS, TURN_CLUSTER
from .tempfiles import REBUILD_HINT, first_line
from .text import json_excerpt

# DESIGN.md's column contracts lead their views, in this order; the rest follow the
# declaration order.
TRAJECTORY_HEAD = ("trajectory_id", "domain", "origin_format", "origin_id", "num_turns")
TURN_HEAD = (
    "trajectory_id", "origin_id", "domain", "turn_index", "action_kind", "tool_name",
    "action_chars", "obs_chars", "is_error", "truncated",
)  # fmt: skip
# Computed columns: (SQL, name); `t` is the unnested turn.
TRAJECTORY_COMPUTED = (("len(turns)", "num_turns"),)
TURN_COMPUTED = (
    ("length(t.action.text)", "action_chars"),
    ("length(t.observation.text)", "obs_chars"),
    (
        "coalesce(t.observation.is_error, false) OR coalesce(t.observation.exit_code, 0) != 0",
        "is_error",
    ),
    ("coalesce(t.observation.truncated, false)", "truncated"),
)


def view_columns(
    cls: type, prefix: str = "", whole: bool = True, raw: bool = False
) -> list[tuple[str, str]]:
    """(SQL expression, column name) of the view columns a record class declares.

    `whole`: every field of `cls` is a column; nested struct fields (not across lists)
    with `spec(view=NAME)` are promoted as NAME; `raw` leaves out `processed` fields.
    """
    out: list[tuple[str, str]] = []
    for f in fields_of(cls):
        if raw and f.spec.processed:
            continue
        path = f"{prefix}.{f.name}" if prefix else f.name
        if whole:
            out.append((path, f.name))
        elif f.spec.view:
            out.append((path, f.spec.view))
        if kind_of(f.hint) == "struct":
            out.extend(view_columns(f.hint, path, whole=False, raw=raw))
    return out


def turn_class(root: type) -> type:
    """The record class of a root's `turns` list."""
    return item_of(next(f.hint for f in fields_of(root) if f.name == F.TURNS))


def _ordered(cols: list[tuple[str, str]], head: tuple[str, ...]) -> list[tuple[str, str]]:
    names = [n for _, n in cols]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"view columns declared twice: {', '.join(sorted(dup))}")
    return sorted(cols, key=lambda c: head.index(c[1]) if c[1] in head else len(head))


def _select(cols: list[tuple[str, str]]) -> str:
    return ", ".join(e if e == n else f"{e} AS {n}" for e, n in cols)


def trajectory_columns(root: type = Trajectory, raw: bool = False) -> list[tuple[str, str]]:
    return _ordered([*view_columns(root, raw=raw), *TRAJECTORY_COMPUTED], TRAJECTORY_HEAD)


def trajectory_select(root: type = Trajectory, fixed: bool = False) -> str:
    """The `trajectories` view's columns as a SELECT list over trajectory shards: the
    stored turns, or (`fixed`) with each turn's corpus-count fields from a `_fix` column
    joined in, as the view does (`corrected_trajectories`)."""
    if not fixed:
        return _select(trajectory_columns(root))
    cols = trajectory_columns(root)
    return _select([(trajectory_turns_sql() if n == F.TURNS else e, n) for e, n in cols])


def corrected_trajectories(trajectories: str, stored_turns: str, counts: str) -> str:
    """The `trajectories` view over one source of trajectory rows and the stored turns
    that go with them, `counts` the template counts (key, count): what the view reads
    and what `export --where` reads a shard file as, so a condition on a turn's
    corpus-count fields counts there what `query` counts (`pipelines.selection`)."""
    return f"{trajectories} LEFT JOIN {trajectory_fix(stored_turns, counts)} ON {FIX_JOIN}"


def raw_turn_columns(root: type = Trajectory) -> list[tuple[str, str]]:
    ids = [(F.TRAJECTORY_ID, F.TRAJECTORY_ID), ("origin_id", "origin_id"), (F.DOMAIN, F.DOMAIN)]
    turn = view_columns(turn_class(root), "t", whole=False, raw=True)
    return _ordered([*ids, *turn, *TURN_COMPUTED], TURN_HEAD)


JOBS_SCHEMA = pa.schema(
    [
        ("job_id", pa.string()), ("name", pa.string()), ("status", pa.string()),
        ("episodes", pa.int64()), ("succeeded", pa.int64()), ("failed", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")), ("finished_at", pa.timestamp("us", tz="UTC")),
    ]
)  # fmt: skip
EPISODES_SCHEMA = pa.schema(
    [
        ("job_id", pa.string()), ("episode_id", pa.string()), ("attempt", pa.int64()),
        ("status", pa.string()), ("error", pa.string()), ("trajectory_id", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")), ("ended_at", pa.timestamp("us", tz="UTC")),
    ]
)  # fmt: skip
EXPORTS_SCHEMA = pa.schema(
    [
        ("name", pa.string()), ("format", pa.string()), ("samples", pa.int64()), ("rows", pa.int64()),
        ("tokens", pa.int64()), ("loss_tokens", pa.int64()), ("tokenizer", pa.string()),
        ("template", pa.string()), ("keep_mode", pa.string()), ("seed", pa.int64()), ("path", pa.string()),
        ("processing_run", pa.string()), ("current_run", pa.bool_()),
    ]
)  # fmt: skip

PERTURBATION_COLUMNS = (
    "trajectory_id", "domain", "source", "kind", "turns", "turn_indexes", "details",
)  # fmt: skip
"""Columns of `perturbations` / `raw_perturbations` (checked against the SQL in tests)."""
PERTURBATION_SOURCES = ("perturbation", "condition")
"""`source` of a perturbations row: a turn's `perturbation` (a fault injected into that
turn) or one of the trajectory's `conditions` (the whole episode ran under it)."""


def perturbations_sql(trajectories: str) -> str:
    """One row per (trajectory, source, kind) over the trajectory view `trajectories`:
    turn perturbations grouped by kind (`turns` = the turns it hit, `turn_indexes`; a
    turn an injected fault also delayed, `{"kind": "error", "latency_ms": ...}`, counts
    under `latency` too: it was counted under its fault only), and
    each condition (`turns` = every turn of the episode). `details` holds the JSON
    objects as recorded. Conditions recorded only in `metadata['conditions']` (writers
    older than the field) count too; a value that is not valid JSON shows as kind
    `invalid` rather than failing every query."""
    turn, condition = PERTURBATION_SOURCES
    return f"""
WITH src AS (SELECT trajectory_id, domain, turns,
                    coalesce(conditions, metadata['conditions']) AS conds FROM {trajectories})
SELECT trajectory_id, domain, '{turn}' AS source, kind, count(*)::INTEGER AS turns,
       list(turn_index ORDER BY turn_index) AS turn_indexes,
       list(detail ORDER BY turn_index) AS details
FROM (SELECT trajectory_id, domain, turn_index, detail, unnest(kinds) AS kind
      FROM (SELECT trajectory_id, domain, t.index AS turn_index, t.perturbation AS detail,
                   CASE WHEN NOT json_valid(t.perturbation) THEN ['invalid']
                        WHEN json_extract(t.perturbation, '$.latency_ms') IS NOT NULL
                             AND coalesce(json_extract_string(t.perturbation, '$.kind'), 'unknown')
                                 <> 'latency'
                        THEN [coalesce(json_extract_string(t.perturbation, '$.kind'), 'unknown'),
                              'latency']
                        ELSE [coalesce(json_extract_string(t.perturbation, '$.kind'), 'unknown')]
                   END AS kinds
            FROM (SELECT trajectory_id, domain, unnest(turns) AS t FROM src)
            WHERE t.perturbation IS NOT NULL))
GROUP BY trajectory_id, domain, kind
UNION ALL BY NAME
SELECT trajectory_id, domain, '{condition}' AS source,
       coalesce(json_extract_string(c, '$.kind'), json_extract_string(c, '$'), 'unknown') AS kind,
       len(turns)::INTEGER AS turns, NULL::INTEGER[] AS turn_indexes, [c::VARCHAR] AS details
FROM (SELECT trajectory_id, domain, turns, unnest(json_extract(conds, '$[*]')) AS c
      FROM src WHERE json_valid(conds) AND json_type(conds) = 'ARRAY')"""


TEMPLATE_COUNTS_SCHEMA = pa.schema([("key", pa.uint64()), ("count", pa.int64())])
CORPUS_DECISION = ("category", "keep", "rule", "in_loss")
"""`turns` columns a policy that reads corpus counts decides by the count (`_alt_*`)."""


def turns_sql(stored: str, counts: str, names: list[str]) -> str:
    """The `turns` view: stored rows with the corpus-count columns joined in.

    `corpus_surprisal` is log2(16 / min(count, 16)) of the turn's template count over
    kept turns (`fields.SURPRISAL_REFERENCE`); where a policy stored a decision for a
    common template (`_alt_from`), it holds once the count reaches `_alt_from`. Rows
    without a template key (files written before the counts moved to read time) keep
    their stored values. Matches `pipelines.stats.surprisal` and the policy's `decide`
    (tests/pipelines/test_incremental.py)."""
    ref = F.SURPRISAL_REFERENCE
    common = "c.count >= s._alt_from"
    expr = {
        "corpus_surprisal": f"CASE WHEN s._template IS NULL THEN s.corpus_surprisal ELSE "
        f"log2({ref}.0 / least(greatest(coalesce(c.count, 1), 1), {ref})) END",
        **{n: f"CASE WHEN {common} THEN s._alt_{n} ELSE s.{n} END" for n in CORPUS_DECISION},
    }
    cols = ", ".join(f"{expr[n]} AS {n}" if n in expr else f"s.{n}" for n in names)
    return f"SELECT {cols} FROM {stored} s LEFT JOIN {counts} c ON c.key = s._template"


def trajectory_turns_sql() -> str:
    """The trajectories view's `turns`: each turn's corpus-count fields as in `turns`
    (joined by position: processed turns are indexed 0..n-1 in order)."""
    return (
        "CASE WHEN _fix IS NULL THEN turns ELSE list_transform(turns, lambda x, i: "
        "struct_update(x, stats := struct_update(x.stats, corpus_surprisal := _fix[i].cs), "
        "category := _fix[i].category, keep := _fix[i].keep, rule := _fix[i].rule)) END"
    )


FIX_COLUMNS = [
    "trajectory_id", TURN_CLUSTER, "turn_index", "corpus_surprisal", "category", "keep", "rule",
]  # fmt: skip


def trajectory_fix(stored_turns: str, counts: str) -> str:
    """Per processed trajectory, its turns' corpus-count fields as the `turns` view has
    them (`turns_sql` over the stored turns `stored_turns`), joined to its row by
    `FIX_JOIN`: by its id and the cluster it represents (`tables.TURN_CLUSTER`), since
    with `dedup.exact=false` two processed trajectories can share an id. By the id
    alone, both copies' turns made one list in turn order (t0, t0, t1, t1, ...) and each
    copy's turn 1 read its turn 0's category, keep and rule."""
    turns = turns_sql(stored_turns, counts, FIX_COLUMNS)
    return (
        f"(SELECT trajectory_id AS _tid, coalesce({TURN_CLUSTER}, 'c' || trajectory_id) AS _cid, "
        "list({'cs': corpus_surprisal, 'category': category, 'keep': keep, 'rule': rule} "
        f"ORDER BY turn_index) AS _fix FROM ({turns}) GROUP BY _tid, _cid)"
    )


FIX_JOIN = "_tid = trajectory_id AND _cid = coalesce(dedup.cluster_id, 'c' || trajectory_id)"
"""How a trajectory row finds its turns in `trajectory_fix`: each kept trajectory is the
one representative of its cluster."""


_DESCRIPTIONS = {
    "trajectories": "processed trajectories (representatives)",
    "turns": "one row per processed turn",
    "clusters": "every trajectory that reached dedup",
    "rejects": "what processing dropped",
    "raw_trajectories": "raw shards (no processing fields)",
    "raw_turns": "one row per raw turn",
    "jobs": "collection jobs from jobs.db",
    "episodes": "episodes of jobs",
    "exports": "training exports (manifests under export/)",
    "perturbations": "faults injected into turns and conditions of episodes, one row per "
    "(trajectory, source, kind), processed",
    "raw_perturbations": "as perturbations, over raw shards",
}


def columns_by_view(root: type = Trajectory) -> dict[str, list[str]]:
    """Every view and its columns, in order."""
    tables = {name: arrow_schema(row).names for name, row in TABLE_ROWS.items()}
    return {
        "trajectories": [n for _, n in trajectory_columns(root)],
        **tables,
        "raw_trajectories": [n for _, n in trajectory_columns(root, raw=True)],
        "raw_turns": [n for _, n in raw_turn_columns(root)],
        "jobs": JOBS_SCHEMA.names,
        "episodes": EPISODES_SCHEMA.names,
        "exports": EXPORTS_SCHEMA.names,
        "perturbations": list(PERTURBATION_COLUMNS),
        "raw_perturbations": list(PERTURBATION_COLUMNS),
    }


# name -> "description: columns" for `worldtrace query --views` and docs/query.md
VIEW_DOCS = {
    name: f"{_DESCRIPTIONS[name]}: {', '.join(cols)}" for name, cols in columns_by_view().items()
}


Skipped = list[tuple[Path, str]]
"""(file, why) of shards a view left out."""


def shard_problem(path: Path, required: tuple[str, ...] = (), deep: bool = False) -> str | None:
    """Why a shard cannot be read (None when its footer reads and it has the `required`
    columns). Reading the footer is cheap (one small read at the end of the file, about
    0.7 ms) and catches what a crash, a full disk or a copy cut short leaves; `deep`
    also decodes every page and checks its checksum (`doctor`: ~30 MB/s of processed
    shards), which pages a disk fault changed under a valid footer fail (a page zstd
    kept raw decodes whatever its bytes: only its checksum tells). Answers are kept per (path, size,
    mtime) for the life of the process."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return _shard_problem(str(path), st.st_size, st.st_mtime_ns, required, deep)


@functools.lru_cache(maxsize=1 << 16)
def _shard_problem(
    path: str, size: int, mtime_ns: int, required: tuple[str, ...], deep: bool = False
) -> str | None:
    if path.endswith(ARROW_SUFFIX):
        return _arrow_problem(path, deep)
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        return f"unreadable Parquet ({first_line(exc)})"
    names = meta.schema.to_arrow_schema().names if required else ()
    missing = [n for n in required if n not in names]
    if missing:
        return f"not a trajectory shard (no column {', '.join(missing)})"
    if deep:
        try:  # a row group at a time: memory holds one, however large the file
            pf = open_parquet(path)
            for g in range(pf.metadata.num_row_groups):
                pf.read_row_group(g)
        except (OSError, pa.ArrowException) as exc:
            return f"damaged Parquet ({first_line(exc)})"
    return None


ARROW_SUFFIX = ".arrow"
"""Arrow IPC files: the probe files of the run's index (`_index/probe/`)."""


def _arrow_problem(path: str, deep: bool) -> str | None:
    """Why an Arrow IPC file does not read: its footer and schema (cut short, empty);
    `deep`: also every batch, checked whole (offsets and UTF-8 a disk fault changed)."""
    with contextlib.ExitStack() as stack:
        try:
            reader = pa.ipc.open_file(stack.enter_context(pa.memory_map(path)))
        except (OSError, pa.ArrowException) as exc:
            return f"unreadable Arrow IPC file ({first_line(exc)})"
        try:
            for i in range(reader.num_record_batches if deep else 0):
                reader.get_batch(i).validate(full=True)
        except (OSError, pa.ArrowException) as exc:
            return f"damaged Arrow IPC file ({first_line(exc)})"
    return None


def _source(
    regs: dict[str, pa.Table],
    name: str,
    directory: Path,
    schema: pa.Schema,
    skipped: Skipped,
    required: tuple[str, ...] = (),
) -> str:
    """SQL for the readable shards under `directory` in the current `schema` (old shards
    included); unreadable ones are added to `skipped` and left out."""
    regs[f"_empty_{name}"] = schema.empty_table()
    files = []
    for f in shard_files(directory):
        problem = shard_problem(f, required)
        if problem:
            skipped.append((f, problem))
        else:
            files.append(f)
    if not files:
        return f"_empty_{name}"
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    return (
        f"(SELECT * FROM read_parquet([{listed}], union_by_name = true) "
        f"UNION ALL BY NAME SELECT * FROM _empty_{name})"
    )


def _counts_source(regs: dict[str, pa.Table], path: Path, skipped: Skipped) -> str:
    """SQL of the template counts (key, count); empty when processing has not written them."""
    regs["_empty_templates"] = TEMPLATE_COUNTS_SCHEMA.empty_table()
    problem = shard_problem(path) if path.exists() else "absent"
    if problem:
        if problem != "absent":
            skipped.append((path, problem))
        return "_empty_templates"
    quoted = "'" + str(path).replace("'", "''") + "'"
    return f"(SELECT key, count FROM read_parquet({quoted}))"


def _jobs_tables(db: Path, skipped: Skipped) -> tuple[pa.Table, pa.Table]:
    """The job store's jobs and episodes; one it cannot read (not a database, locked,
    without its tables) is added to `skipped`, as an unreadable shard: empty views must
    not read as "no jobs"."""
    empty = JOBS_SCHEMA.empty_table(), EPISODES_SCHEMA.empty_table()
    if not db.exists():
        return empty
    out = []
    try:
        with contextlib.closing(connect_read_only(db)) as c:
            for table, schema in (("jobs", JOBS_SCHEMA), ("episodes", EPISODES_SCHEMA)):
                cur = c.execute(f"SELECT {', '.join(schema.names)} FROM {table}")
                rows = [
                    {
                        k: _ts(v) if pa.types.is_timestamp(schema.field(k).type) else v
                        for k, v in zip(schema.names, r, strict=True)
                    }
                    for r in cur.fetchall()
                ]
                out.append(pa.Table.from_pylist(rows, schema=schema))
    except sqlite3.Error as exc:
        skipped.append((db, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
        return empty
    return out[0], out[1]


def unreadable_job_store(db: Path) -> str | None:
    """Why the job store `db` does not read (as the views leave it out), or None: it
    reads, or there is none."""
    skipped: Skipped = []
    _jobs_tables(db, skipped)
    return skipped[0][1] if skipped else None


def _ts(value):
    return datetime.fromisoformat(value) if isinstance(value, str) else value


IN_STORE = {"rejects": "source_path", "clusters": "source"}
"""Processed columns that name a raw file: from the store's root when it is in the store
(`pipelines.units.in_store`), so they follow a copied or moved store."""


def in_store_sql(column: str, root: Path) -> str:
    """SQL of `column` with the store's root (as it is now) put back in front of a path
    recorded from it; an absolute path (a file outside the store, or recorded by an
    earlier version) stays as it is."""
    quoted = "'" + (str(Path(root).resolve()) + "/").replace("'", "''") + "'"
    return (
        f"CASE WHEN {column} IS NULL OR starts_with({column}, '/') THEN {column} "
        f"ELSE {quoted} || {column} END"
    )


EXPORT_INTS = ("samples", "rows", "tokens", "loss_tokens")
"""The counts of an export's manifest the `exports` view shows (int64 columns)."""


def _exports_table(
    export_dir: Path, skipped: Skipped | None = None, run_id: str | None = None
) -> pa.Table:
    """A row per export under `export_dir` with a manifest. A manifest that does not read
    or is not shaped as export writes it (not JSON, not UTF-8, not an object, a count
    that is no int64) is left out and added to `skipped`, as an unreadable shard: one bad
    file must not fail every command that opens the views. `run_id`: the processed data's
    run (`current_run`: whether an export read its tables; null when either is unknown)."""
    rows = []
    for m in sorted(export_dir.glob("*/manifest.json")) if export_dir.exists() else []:
        if m.parent.name.startswith("."):  # an export being written or replaced (`.staging-*`,
            continue  # `.old-*`), or one an interrupted export left: not an export
        row = _export_row(m)
        if isinstance(row, str):
            if skipped is not None:
                skipped.append((m, row))
            continue
        made = row["processing_run"]
        row["current_run"] = None if made is None or run_id is None else made == run_id
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=EXPORTS_SCHEMA)


def processed_run_id(store: Store) -> str | None:
    """The run whose tables processed/ holds (`publish.tables_run`); None when there is
    none or its manifest does not read (every reading command names a damaged one)."""
    try:
        return tables_run(run_manifest(store.processed / F.PROCESS_MANIFEST))
    except OSError:  # none, or damaged (`DamagedFile`): every reading command names it
        return None


def _export_row(m: Path) -> dict | str:
    """The `exports` row of manifest `m`, or why it has none."""
    try:
        d = json.loads(m.read_bytes().decode("utf-8"))
    except OSError as exc:
        return f"cannot read it ({exc.strerror or type(exc).__name__})"
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return f"not JSON ({first_line(str(exc)) or type(exc).__name__})"
    if not isinstance(d, dict):
        return f"not an export manifest (a JSON {_json_kind(d)}, not an object)"
    c = d.get("counts", {})
    if not isinstance(c, dict):
        return f"counts is a JSON {_json_kind(c)}, not an object"
    row: dict = {"name": m.parent.name, "path": str(m.parent)}
    for key, value in [(k, c.get(k)) for k in EXPORT_INTS] + [("seed", d.get("seed"))]:
        if value is not None and not _is_int64(value):
            where = key if key == "seed" else f"counts.{key}"
            return f"{where} is not an integer of 64 bits ({_excerpt(value)})"
        row[key] = value
    for key in ("format", "keep_mode", "processing_run"):
        if (value := d.get(key)) is not None and not isinstance(value, str):
            return f"{key} is not a string ({_excerpt(value)})"
        row[key] = value
    for key in ("tokenizer", "template"):
        value = d.get(key) or {}
        if not isinstance(value, dict):
            return f"{key} is a JSON {_json_kind(value)}, not an object"
        if (name := value.get("name")) is not None and not isinstance(name, str):
            return f"{key}.name is not a string ({_excerpt(name)})"
        row[key] = name
    if row["format"] == "agentworldbench":  # text lines: no token was counted (not 0)
        row["tokens"] = row["loss_tokens"] = None
    return row


def _is_int64(value) -> bool:
    return type(value) is int and -(1 << 63) <= value < 1 << 63


def _excerpt(value) -> str:
    return json_excerpt(value, 40)


def _json_kind(value) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"),
             (list, "array"), (dict, "object"))  # fmt: skip
    return next((name for t, name in kinds if isinstance(value, t)), "null")


def unreadable_shards(store: Store, deep: bool = False) -> Skipped:
    """Every shard under raw/ and processed/ the views would leave out, and every file of
    the run's index (`index_files`: `process` stops on one that does not read), and why;
    `deep`: also those whose pages do not decode (`shard_problem`), which a query or a
    run reaching them fails on. (`doctor` lists them; before 2026-12-06 a damaged
    `_index/shards.parquet` passed: only the tables were looked at.)"""
    skipped = _unreadable_viewed(store, deep)
    seen = {f for f, _ in skipped}
    for f in index_files(store):
        if f not in seen and (problem := shard_problem(f, (), deep)):
            skipped.append((f, problem))
    return skipped


def _unreadable_viewed(store: Store, deep: bool = False) -> Skipped:
    """`unreadable_shards` of the files the views read: the shards under raw/, the
    processed tables and the template counts."""
    skipped: Skipped = []
    for f in shard_files(store.raw):
        problem = shard_problem(f, TRAJECTORY_REQUIRED, deep)
        if problem:
            skipped.append((f, problem))
    for name in F.PROCESSED_TABLES:
        required = TRAJECTORY_REQUIRED if name == "trajectories" else ()
        for f in shard_files(store.table(name)):
            problem = shard_problem(f, required, deep)
            if problem:
                skipped.append((f, problem))
    counts = store.processed / F.PROCESS_INDEX / F.TEMPLATE_COUNTS_FILE
    if counts.is_file() and (problem := shard_problem(counts, (), deep)):
        skipped.append((counts, problem))
    return skipped


def index_files(store: Store) -> list[Path]:
    """The files of the last run's index, `processed/_index/` (`shards.parquet`,
    `members.parquet`, `templates.parquet`, `segments/*.parquet`, `probe/*.arrow` and
    older Parquet probe files: docs/pipeline.md), hidden names (a writer's temp files)
    left out."""
    index = store.processed / F.PROCESS_INDEX
    if not index.is_dir():
        return []
    return sorted(
        p
        for p in index.rglob("*")
        if p.suffix in (ARROW_SUFFIX, F.SHARD_SUFFIX)
        and not any(part.startswith(".") for part in p.relative_to(index).parts)
        and p.is_file()
    )


def damage_hint(store: Store, path: Path) -> str:
    """What to do about a file of the store that does not read: one of processed/ is
    made again by a rebuild; a raw one is copied again or moved out (what of the
    processed data comes only from it, if it was processed, `worldtrace process` says)."""
    path = Path(path).resolve()
    if path.is_relative_to(store.processed.resolve()):
        return REBUILD_HINT
    if path.is_relative_to(store.raw.resolve()):
        return "copy it again (or import its source again), or move it out of the store"
    return "copy it again, or move it away"


def job_store_fix(path: Path, why: str) -> str | None:
    """What to do about a job store (SQLite) that does not read, from SQLite's message
    `why`: a locked one is waited for (nothing is wrong with it), a damaged one is moved
    aside (its jobs and schedules are lost; the collected data is not), one without the
    tables is not a job store; None for another failure (its message is the reason).
    The line that says it names `path` already: the commands here name its directory. A
    missing table or column of a file that holds the `jobs` and `episodes` tables is an
    older layout (it read as "not a job store")."""

    def _tables(p: Path) -> set[str]:
        try:
            with contextlib.closing(connect_read_only(p)) as c:
                return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}  # fmt: skip
        except sqlite3.Error:
            return set()

    text = why.lower()
    path = Path(path)
    where, name = shlex.quote(str(path.absolute().parent)), shlex.quote(path.name)
    if re.search(r"database( table| schema)? is locked|database is busy", text):
        return (
            "another process holds a lock on it (a worker, scheduler or `jobs` command in "
            "the middle of a write, or one stopped while holding it: suspended with Ctrl-Z, "
            "hung); nothing is damaged: run the command again when it ends (`fuser -v` on "
            "it names the processes that have it open)"
        )
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (
            "the job store is damaged: its jobs and schedules cannot be read (the collected "
            "data under raw/ is not affected); move it aside with its -wal and -shm files "
            f"(`cd {where} && mkdir jobs-damaged && mv {name}* jobs-damaged/`: "
            f"`sqlite3 jobs-damaged/{name} .recover` prints the rows that still read), then "
            "submit the job files again (the first `jobs submit` makes a new, empty job store)"
        )
    missing = "no such table" in text or "no such column" in text
    if missing and {"jobs", "episodes"} <= _tables(path):  # not another program's file
        return (
            "it is a job store of an older layout (its jobs and episodes tables without "
            "what later versions added); `worldtrace worker` or `jobs submit` brings it up "
            "to date, keeping its jobs"
        )
    if "no such table" in text:
        return (
            "it holds no job store tables: an empty file, or another program's database; "
            "`worldtrace jobs submit` makes them in an empty one (move another program's "
            "file out of the store first)"
        )
    return None


def skip_fix(store: Store, path: Path, why: str = "") -> str | None:
    """What to do about a file the views left out (`connect`'s `on_skip`, with its reason
    `why`): a shard of raw/ or processed/ (`damage_hint`), an export's manifest, the job
    store (`job_store_fix`: locked, or damaged); None for another."""
    p = Path(path).resolve()
    if p == store.jobs_db.resolve():
        return job_store_fix(path, why)
    if p.is_relative_to(store.processed.resolve()) or p.is_relative_to(store.raw.resolve()):
        return damage_hint(store, path)
    if p.is_relative_to(store.export.resolve()):
        out = Path(path).parent
        return (
            f"export again into it (`worldtrace export -o {out}` with the options it was made "
            f"with), or move {out} out of the store"
        )
    return None


def unreadable_manifests(store: Store) -> Skipped:
    """The export manifests the `exports` view leaves out, and why."""
    skipped: Skipped = []
    _exports_table(store.export, skipped)
    return skipped


_GONE_FILE = re.compile(r'No files found that match the pattern "([^"]+)"')
"""How DuckDB names a file its view listed that is gone when a query reads it (found
2026-12-06, hunt k2: `query`, `report` while `process` published: DuckDB's `IO Error`
with its SQL caret, nothing said of why or what to do)."""


def _in_store(store: Store, path: str) -> bool:
    """Whether `path` lies in the store (its parent resolved: the file may be gone)."""
    p = Path(path)
    return p.parent.resolve().is_relative_to(store.root.resolve())


_FAILED_FILE = re.compile(r'file "([^"]+)"\s*:?\s*(.*)', re.S)
"""How DuckDB names a file it failed to read (`Failed to read file "PATH": WHY`)."""


def read_failure(store: Store, exc: BaseException) -> str | None:
    """One line for a DuckDB error met while reading the store's views when a shard's
    footer read but its pages do not (the views leave out only unreadable footers): the
    file, why and what to do; None for any other error. The file is the one DuckDB
    names, else the first of the files the views read that fails a deep read
    (`unreadable_shards(deep=True)` but the run's index: only on this failing path)."""
    text = str(exc)
    gone = _GONE_FILE.search(text)
    if gone and not Path(gone[1]).exists() and _in_store(store, gone[1]):
        return (
            f"{gone[1]} was removed while this command read the store (a `worldtrace "
            "process` run publishing its tables replaces processed/'s files): run it again"
        )
    m = _FAILED_FILE.search(text)
    if m and Path(m.group(1)).resolve().is_relative_to(store.root.resolve()):
        path, why = Path(m.group(1)), m.group(2) if m.group(2).strip() else text
        return f"{path}: damaged Parquet ({first_line(why)}); {damage_hint(store, path)}"
    # a page header that does not decode is thrift's error alone ("TProtocolException:
    # Exceeded size limit", "don't know what type: "): no file, no "parquet"
    if not re.search(r"parquet|decompress|corrupt|thrift|tprotocol|know what type", text, re.I):
        return None
    bad = _unreadable_viewed(store, deep=True)  # only what the views read
    if not bad:
        return None
    path, why = bad[0]
    return f"{path}: {why}; {damage_hint(store, path)}"


TRAJECTORY_REQUIRED = (F.DOMAIN, F.TURNS)


def _warn(path: Path, why: str) -> None:
    warnings.warn(f"skipped {path}: {why}", stacklevel=3)


def connect(
    store: Store,
    root: type = Trajectory,
    on_skip: Callable[[Path, str], None] | None = _warn,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every view of the store defined, locked down.

    `root` is the record class the trajectory views follow (a variant in tests).
    Unreadable shards are left out and reported to `on_skip` (a warning by default).
    The connection only reads: its views live in a read-only database (so only
    temporary objects can be created or changed), files are reachable only under the
    store root, extensions cannot be installed or loaded and the configuration is
    locked. Statements that would write files (COPY, EXPORT, ATTACH...) are refused by
    `refusal`, which callers running user SQL check first (docs/query.md). A publish a
    dead `process` run left half done is finished first (`publish.finish_publish`)."""
    if store.processed.is_dir():
        finish_publish(store.processed)  # a live one is said by `freshness`
    regs: dict[str, pa.Table] = {}
    skipped: Skipped = []
    schema = arrow_schema(root)
    ddl = []
    traj = _source(regs, "trajectories", store.table("trajectories"), schema, skipped,
                   TRAJECTORY_REQUIRED)  # fmt: skip
    counts = _counts_source(regs, store.processed / F.PROCESS_INDEX / F.TEMPLATE_COUNTS_FILE,
                            skipped)  # fmt: skip
    for name, row in TABLE_ROWS.items():
        if name == "turns":
            stored = _source(regs, name, store.table(name), STORED_TURNS_SCHEMA, skipped)
            names = arrow_schema(row).names
            ddl.append(f"CREATE VIEW turns AS {turns_sql(stored, counts, names)}")
            continue
        src = _source(regs, name, store.table(name), arrow_schema(row), skipped)
        col = IN_STORE.get(name)
        cols = f"* REPLACE ({in_store_sql(col, store.root)} AS {col})" if col else "*"
        ddl.append(f"CREATE VIEW {name} AS SELECT {cols} FROM {src}")
    cols = [(trajectory_turns_sql() if n == F.TURNS else e, n) for e, n in trajectory_columns(root)]
    ddl.append(  # each turn's corpus-count columns, as `turns` has them, fill the nested ones
        f"CREATE VIEW trajectories AS SELECT {_select(cols)} "
        f"FROM {corrected_trajectories(traj, stored, counts)}"
    )
    raw = _source(regs, "raw", store.raw, schema, skipped, TRAJECTORY_REQUIRED)
    ddl.append(
        f"CREATE VIEW raw_trajectories AS SELECT {_select(trajectory_columns(root, raw=True))} "
        f"FROM {raw}"
    )
    ddl.append(
        f"CREATE VIEW raw_turns AS SELECT {_select(raw_turn_columns(root))} FROM "
        f"(SELECT trajectory_id, source.origin_id AS origin_id, domain, unnest(turns) AS t "
        f"FROM {raw})"
    )
    for name, over in (
        ("perturbations", "trajectories"),
        ("raw_perturbations", "raw_trajectories"),
    ):
        ddl.append(f"CREATE VIEW {name} AS {perturbations_sql(over)}")
    jobs, episodes = _jobs_tables(store.jobs_db, skipped)
    restore_swaps(store.export)  # an export stopped between its two renames: put back
    for name, table in (
        ("jobs", jobs),
        ("episodes", episodes),
        ("exports", _exports_table(store.export, skipped, processed_run_id(store))),
    ):
        regs[f"_t_{name}"] = table
        ddl.append(f"CREATE VIEW {name} AS SELECT * FROM _t_{name}")
    con = locked_connection(ddl, regs, [store.root])
    for path, why in skipped if on_skip else ():
        on_skip(path, why)
    return con
