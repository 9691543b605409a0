"""Pass 2 on one segment, columnar: dedup decisions and corpus counts -> final tables.

A segment (`units.SEGMENT_SCHEMA`) holds every record of one unit that reached dedup,
already scored. Finalising it drops the non-representatives, sets `dedup` and derives
the `turns` and `clusters` rows, all with pyarrow: no Python object per record except
the decision lookups. Columns that depend on corpus counts (`corpus_surprisal`, and the
decisions of a policy that reads it) are not stored final: the `turns` files carry each
turn's template key (and the decision for a common template), and the views join the
counts in at read time, so a new batch never rewrites an earlier file for them.

Incremental state lives under `processed/_index/` (docs/pipeline.md#incremental):
`segments/<stem>.parquet`, `probe/*.arrow` (what incremental runs look earlier
records up in), `templates.parquet` (key, count over kept trajectories),
`members.parquet` (the cluster state of every member of a non-singleton cluster) and
`shards.parquet` (the raw files already processed).
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics
from worldtrace.schemas import TRAJECTORY_SCHEMA
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import ArrowFileWriter, read_parquet
from worldtrace.schemas.tables import (
    CLUSTERS_SCHEMA,
    STORED_TURNS_SCHEMA,
    TURN_CLUSTER,
    TURNS_SCHEMA,
)
from worldtrace.schemas.tempfiles import (
    REBUILD_HINT,
    DamagedFile,
    first_line,
    index_read,
    open_parquet,
    unreadable,
)

from . import stats as S
from .dedup import NS, SIG_SCHEMA
from .mask import MaskPolicy, keep_turn, turn_fault
from .units import ARRIVAL, BANDS, CONTENT, CONTENT_KEY, SIG, TEMPLATES, UID

INDEX = F.PROCESS_INDEX
SEGMENTS = F.PROCESS_SEGMENTS
TEMPLATES_FILE = F.TEMPLATE_COUNTS_FILE
MEMBERS_FILE = "members.parquet"
SHARDS_FILE = "shards.parquet"
DELTA_FILE = "delta.parquet"
"""A run's template count changes, in its _index until `process.merge_state` adds them
to the counts."""
TEMPLATE_COUNTS = pa.schema([pa.field("key", pa.uint64()), pa.field("count", pa.int64())])
MEMBERS_SCHEMA = pa.schema(
    [
        pa.field("uid", pa.string()),
        pa.field("tid", pa.string()),
        pa.field("cluster_id", pa.string()),
        pa.field("representative", pa.bool_()),
        pa.field("role", pa.string()),
        pa.field("failed", pa.bool_()),
        pa.field("turns", pa.int64()),
        pa.field("started", pa.int64()),
        pa.field("arrival", pa.string()),
        pa.field("stem", pa.string()),
        pa.field("keys", pa.list_(pa.uint64())),
    ]
)
SHARDS_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("run_id", pa.string()),
        pa.field("sha256", pa.string()),
        pa.field("arrival_ns", pa.int64()),
        pa.field("ctime_ns", pa.int64()),
        pa.field("ino", pa.uint64()),
    ]
)
"""Each raw file a run read: its size, mtime, ctime and inode (the quick test for a
change, `hashing.stat_key`: an mtime can be set back, `touch -r`, `cp -p`, a checkout; a
ctime cannot, and every write, rename or copy moves it, as git's index keeps them; null
in an index written before they were kept: each such file is hashed once), its
content hash (whether a file whose mtime alone moved, copied or touched, changed; null
in an index written before it was kept) and its arrival: its mtime when it was first
processed, its records' place in the arrival order (`units.arrival_key`). A touch moves
`mtime_ns`, never `arrival_ns`, and a rebuild takes a file's arrival from here while its
sha256 is the one recorded (`process.recorded_arrivals`), so it orders records as the
incremental runs did. An index written before it was kept reads `mtime_ns` for it."""


PROBE = "probe"
"""`_index/probe/`: the earlier records as an incremental run probes them, one file per
pass-1 bundle of each run (`state.ProbeIndex`) instead of one read per segment (each
costs its footer)."""
PROBE_COLUMNS = (
    "uid", "tid", "failed", "turns", "started", "arrival", "stem", "sig", "bands", "keys"
)  # fmt: skip
PROBE_SCHEMA = pa.schema([SIG_SCHEMA.field(c) for c in PROBE_COLUMNS])
PROBE_OPTIONAL = ("sig",)
"""Probe columns that files written before them lack (read as nulls: a record found
through such a file has its signature read from its segment, as before)."""
PROBE_FILES = 16
"""More probe files than this are merged into one when a run completes the index."""
PROBE_SUFFIX = ".arrow"
"""Probe files are Arrow IPC files, mapped rather than read: a run touches every row's
ids and band keys but takes the other columns, signatures included, of only the few rows
that match, which a Parquet read decoded whole (80k records: read and match 33 -> 14
ms). With the signatures there, the earlier records a run finds need no read of their
segments (67 segment reads, ~90 ms of a 1% increment on the 80k store). Stores processed
before keep their Parquet probe files until a compaction merges them."""


def probe_files(index: Path) -> list[Path]:
    return sorted(
        f
        for f in (index / PROBE).glob("*")
        if f.suffix in (PROBE_SUFFIX, ".parquet") and not f.name.startswith(".")
    )


def read_probe(files: list[Path], columns: list[str] | tuple = PROBE_COLUMNS) -> pa.Table:
    """`columns` of the rows of probe files, in file order, typed as `PROBE_SCHEMA` (no
    rows when there are no files: a store processed before probe files existed). A file
    that does not read is `DamagedFile` (`index_read`)."""
    schema = pa.schema([PROBE_SCHEMA.field(c) for c in columns])
    tables = []
    for f in files:
        with index_read(f):
            tables.append(_probe_rows(f, schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _probe_rows(f: Path, schema: pa.Schema) -> pa.Table:
    """The `schema` columns of one probe file."""
    columns = schema.names
    if f.suffix == PROBE_SUFFIX:
        t = pa.ipc.open_file(pa.memory_map(str(f))).read_all()
    else:  # written by an earlier version
        pf = open_parquet(f)
        t = pf.read(columns=[c for c in columns if c in pf.schema_arrow.names])
    for c in columns:
        if c not in t.column_names and c in PROBE_OPTIONAL:
            t = t.append_column(c, pa.nulls(t.num_rows, schema.field(c).type))
    t = t.select(list(columns))
    return t if t.schema.equals(schema) else t.cast(schema)


def probed_stems(index: Path) -> set[str]:
    """The segments the probe files cover (a store processed before they existed has
    none: its segments are probed one by one)."""
    return set(pc.unique(read_probe(probe_files(index), ["stem"])["stem"]).to_pylist())


def compact_probe(index: Path, earlier: Path | None = None) -> None:
    """Merge the probe files into one once there are more than `PROBE_FILES`, file by
    file. A file that does not read is named where the store holds it: in `earlier`
    (the published `_index` a run's links come from) when it is one of its files."""
    files = probe_files(index)
    if len(files) > PROBE_FILES:
        merged = index / PROBE / f"{files[0].stem}-m{PROBE_SUFFIX}"
        writer = ArrowFileWriter(merged, PROBE_SCHEMA)
        for f in files:  # one at a time, mapped: the whole index never sits in memory
            was = earlier / PROBE / f.name if earlier else f
            with index_read(was if was.exists() else f):
                rows = _probe_rows(f, PROBE_SCHEMA)
            writer.write(rows)
        writer.close()
        for f in files:
            if f != merged:
                f.unlink()


def members_table(index: Path) -> pa.Table:
    """The cluster state of earlier runs: every member of a non-singleton cluster."""
    path = index / MEMBERS_FILE
    if not path.exists():
        return MEMBERS_SCHEMA.empty_table()
    with index_read(path):
        return read_parquet(path)


def index_files(index: Path, stems: list[str]) -> list[tuple[Path, tuple[str, ...] | None]]:
    """The files of an earlier `_index` an incremental run may read (but the shards
    index, `process.read_shards`), each with the columns it reads of it: the cluster
    state, the template counts, the probe files; and the segments `stems`, whose ends
    alone are checked (None: `file_problem`)."""
    fixed = [(index / MEMBERS_FILE, tuple(MEMBERS_SCHEMA.names)),
             (index / TEMPLATES_FILE, tuple(TEMPLATE_COUNTS.names))]  # fmt: skip
    probe = tuple(c for c in PROBE_COLUMNS if c not in PROBE_OPTIONAL)
    return [
        *((f, cols) for f, cols in fixed if f.exists()),  # none yet: no cluster, no count
        *((f, probe) for f in probe_files(index)),
        *((index / SEGMENTS / f"{s}.parquet", None) for s in stems),
    ]


PARQUET_MAGIC = b"PAR1"


def file_problem(path: Path, columns: tuple[str, ...] | None) -> str | None:
    """Why an index file would not read, or None: from its footer and schema, the
    `columns` a run reads of it (no page is decoded); with `columns` None, from its ends
    alone (`_ends_problem`)."""
    if columns is None:
        return _ends_problem(path)
    try:
        if path.suffix == PROBE_SUFFIX:
            with pa.memory_map(str(path)) as mapped:
                names = pa.ipc.open_file(mapped).schema.names
        else:
            names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        return f"{unreadable(path)} ({first_line(exc)})"
    missing = [c for c in columns if c not in names]
    return f"lacks the column(s) {', '.join(missing)}" if missing else None


def _ends_problem(path: Path) -> str | None:
    """Why a Parquet file does not end as one (cut short, empty, another file), or None:
    its magic at both ends and a footer that fits, 12 bytes read. A segment's footer
    holds the trajectory's schema, ~0.35 ms to parse: every footer of a 20k-trajectory
    store's index parsed took 8 ms, with its 21 segments' ends instead 0.7 ms. A
    segment damaged inside is named when the run reads it (`index_read`)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(4)
            fh.seek(max(size - 8, 0))
            tail = fh.read(8)
    except OSError as exc:
        return f"unreadable Parquet ({first_line(exc)})"
    footer = int.from_bytes(tail[:4], "little")
    if size >= 12 and head == tail[4:] == PARQUET_MAGIC and footer + 12 <= size:
        return None
    return file_problem(path, ()) or "unreadable Parquet (no footer at its end)"


def index_problems(index: Path, stems: list[str] | None = None) -> list[tuple[Path, str]]:
    """(file, why) of each file of `index` an incremental run would read that does not
    read (`file_problem`); `stems`: its segments (default: all there)."""
    if stems is None:
        stems = sorted(p.stem for p in (index / SEGMENTS).glob("*.parquet"))
    return [(f, why) for f, cols in index_files(index, stems) if (why := file_problem(f, cols))]


def check_index(index: Path, stems: list[str]) -> None:
    """Stop an incremental run before it starts when a file of `index` it would read is
    damaged: `DamagedFile` naming the first, with `process --rebuild` (the index is made
    from raw/). Inside the pipeline the same read failed after its stages had started,
    in Beam's traceback, or named no file."""
    bad = index_problems(index, stems)
    if bad:
        path, why = bad[0]
        more = f" (and {len(bad) - 1} more file(s) of {index})" if bad[1:] else ""
        raise DamagedFile(path, f"{why}{more}", REBUILD_HINT)


def merged_counts(before: pa.Table | None, delta: pa.Table) -> pa.Table:
    """Template counts (`TEMPLATE_COUNTS`, sorted by key) after a run's changes `delta`
    (key, +/- count, each key once); a count that falls to 0 leaves.

    Only the run's keys are looked up in the sorted earlier counts: a run changes a few
    thousand of the corpus's 230,000 templates (80k store), which a group-by over both
    re-added every run (0.08 s). Counts an older version wrote unsorted are sorted first.
    """
    delta = delta.select(["key", "count"]).cast(TEMPLATE_COUNTS).sort_by("key")
    if before is None:
        merged = delta
    else:
        before = before.select(["key", "count"]).cast(TEMPLATE_COUNTS)
        keys = before["key"].to_numpy()
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
            before = before.sort_by("key")
            keys = before["key"].to_numpy()
        counts = before["count"].to_numpy().copy()
        dk, dc = delta["key"].to_numpy(), delta["count"].to_numpy()
        at = np.searchsorted(keys, dk)
        found = at < len(keys)
        found[found] = keys[at[found]] == dk[found]
        counts[at[found]] += dc[found]
        new = ~found
        keys, counts = np.insert(keys, at[new], dk[new]), np.insert(counts, at[new], dc[new])
        merged = pa.table({"key": keys, "count": counts}, schema=TEMPLATE_COUNTS)
    return merged.filter(pc.greater(merged["count"], 0))


def member_decisions(index: Path) -> dict[str, tuple]:
    """uid -> (cluster, representative, role) of every member in earlier runs' state."""
    members = members_table(index)
    cols = [members[c].to_pylist() for c in ("cluster_id", "representative", "role")]
    return dict(zip(members["uid"].to_pylist(), zip(*cols, strict=True), strict=True))


def read_sigs(dirs: list[str], wanted: dict[str, list[str]]) -> dict[str, bytes]:
    """uid -> MinHash signature of the `wanted` records ({unit stem: [uid, ...]}), from
    their segments in the first of `dirs` that has them (this run's, then earlier runs')."""
    out: dict[str, bytes] = {}
    for stem, uids in wanted.items():
        path = next((p for d in dirs if (p := Path(d) / f"{stem}.parquet").exists()), None)
        if path is None:
            raise FileNotFoundError(f"segment {stem}.parquet: in none of {', '.join(dirs)}")
        with index_read(path):
            t = read_parquet(path, [UID, SIG])
        t = t.filter(pc.is_in(t[UID], pa.array(uids, pa.string())))
        out.update(zip(t[UID].to_pylist(), t[SIG].to_pylist(), strict=True))
    return out


class ProbeSigs:
    """`dedup.SigSource`: content keys -> MinHash signatures, looked up in the probe files
    of `indexes` (this run's `_index` first, then the earlier runs'), where pass 1 left
    every record's signature beside its ids: candidate ends need no gathering from their
    units. `by` is the content key's column (`dedup.content_column`): records of equal
    content have equal signatures, so any row of the key serves. A probe file written
    before probe files held signatures gives the row's unit instead, and the signature is
    read from its segment in the first of `segment_dirs` that has it (`read_sigs`).

    Each process maps the probe files once (`_probe`), at its first look-up: pickling
    leaves them behind."""

    def __init__(self, indexes: list[str], segment_dirs: list[str], by: str):
        self.indexes, self.segment_dirs, self.by = indexes, segment_dirs, by
        self._mapped: dict[str, pa.Table] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_mapped": {}}

    def _probe(self, index: str) -> pa.Table:
        t = self._mapped.get(index)
        if t is None:
            columns = list(dict.fromkeys([self.by, "uid", "stem", "sig"]))
            t = self._mapped[index] = read_probe(probe_files(Path(index)), columns)
        return t

    def __call__(self, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        unread: dict[str, tuple[str, str]] = {}  # key -> (stem, uid) of a row without one
        todo = list(keys)
        for index in self.indexes:
            t = self._probe(index)
            t = t.filter(pc.is_in(t[self.by], pa.array(todo, pa.string())))
            cols = [t[c].to_pylist() for c in (self.by, "stem", "uid", "sig")]
            for key, stem, uid, sig in zip(*cols, strict=True):
                if sig is not None:
                    out.setdefault(key, sig)
                else:
                    unread.setdefault(key, (stem, uid))
            todo = [k for k in todo if k not in out]
            if not todo:
                return out
        missing = [k for k in todo if k not in unread]
        if missing:
            raise ValueError(
                f"signature of {missing[0]} ({len(missing)} in all): in no probe file under "
                + ", ".join(self.indexes)
            )
        wanted: dict[str, list[str]] = {}
        for key in todo:
            stem, uid = unread[key]
            wanted.setdefault(stem, []).append(uid)
        sigs = read_sigs(self.segment_dirs, wanted)
        Metrics.counter(NS, "dedup.sig_reads").inc(len(wanted))
        out.update((key, sigs[unread[key][1]]) for key in todo)
        return out


def _struct(arr: pa.StructArray, **replace: pa.Array) -> pa.StructArray:
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    cols = [replace.get(n, arr.field(n)) for n in names]
    return pa.StructArray.from_arrays(cols, names=names)


def corpus_columns(
    turns: pa.StructArray, tids: list[str], keys: pa.Array, policy: MaskPolicy, seed: int
) -> dict[str, pa.Array]:
    """The hidden `turns` columns (`tables.TURN_CORPUS_COLUMNS`): template keys, and for a
    policy that reads corpus counts the decision once the count reaches `corpus_from`."""
    n = len(turns)
    start = getattr(policy, "corpus_from", lambda: None)()
    alt: list = [None] * n
    if start is not None:
        cs = S.surprisal(start)
        stats = turns.field("stats").to_pylist()
        # decided on the NFC text, as pass 1 decided the stored decision (`units.score`)
        acts = list(map(S.nfc, pc.struct_field(turns, ["action", "text"]).to_pylist()))
        obs = list(map(S.nfc, pc.struct_field(turns, ["observation", "text"]).to_pylist()))
        cats, index = turns.field("category").to_pylist(), turns.field("index").to_pylist()
        seen = turns.field("observation")
        faults = [
            turn_fault(p, cut, state)
            for p, cut, state in zip(
                turns.field("perturbation").to_pylist(),
                seen.field("truncated").to_pylist(),
                seen.field("state_json").to_pylist(),
                strict=True,
            )
        ]
        for i in range(n):
            d = policy.decide({**stats[i], "corpus_surprisal": cs}, acts[i], obs[i], faults[i])
            if d.category != cats[i]:
                alt[i] = (d, keep_turn(tids[i], index[i], seed, d.keep))
    return {
        "_template": keys,
        "_alt_from": pa.array([start if a else None for a in alt], pa.int64()),
        "_alt_category": pa.array([a and a[0].category for a in alt], pa.string()),
        "_alt_keep": pa.array([a and a[0].keep for a in alt], pa.float64()),
        "_alt_rule": pa.array([a and a[0].rule for a in alt], pa.string()),
        "_alt_in_loss": pa.array([a and a[1] for a in alt], pa.bool_()),
    }


CLUSTER_COLUMNS = (F.TRAJECTORY_ID, F.SOURCE, UID, F.DOMAIN, CONTENT)
"""The segment columns the `clusters` rows need (no text)."""


def after_run(decisions: Mapping[str, tuple], earlier: Mapping[str, tuple]) -> Mapping:
    """uid -> (cluster, representative, role) after a run: this run's decision (the
    clusters its new records reached), else the record's earlier one (`earlier`: the
    cluster state of earlier runs), else (`decisions_for`) a singleton. The one rule pass
    2 (`transforms._Finalize`) and the run's state (`state.py`: template counts, segments
    to rewrite, cluster state) read a record by: one this run decided nothing on stays
    as it was. The state read it as a kept singleton while pass 2 kept its earlier
    decision: the member left the cluster state, its templates were counted as kept,
    and the next full rewrite of its segment kept it."""
    return ChainMap(decisions, earlier) if earlier else decisions


def decisions_for(uids: list[str], keys: list[str], decisions: Mapping) -> list[tuple]:
    """(cluster, representative, role) of each record; absent from `decisions`: a
    singleton, its own cluster `c<content key>` (`keys`: its content key, or its uid
    with `dedup.exact=false`, `units.CONTENT_KEY`), as a cluster of several is named
    after its representative's key (`dedup._Decide`)."""
    return [
        tuple(decisions.get(u, (f"c{k}", True, "singleton")))
        for u, k in zip(uids, keys, strict=True)
    ]


def content_keys(segment: pa.Table) -> pa.ChunkedArray:
    """Each segment row's content key: the column its `units.CONTENT_KEY` metadata names
    (the trajectory id in a segment written before it)."""
    column = (segment.schema.metadata or {}).get(CONTENT_KEY, F.TRAJECTORY_ID.encode())
    return segment[column.decode()]


def segment_decisions(segment: pa.Table, decisions: dict[str, tuple]) -> list[tuple]:
    """`decisions_for` the rows of a segment, by the content key pass 1 recorded. Until
    2026-12-05 every singleton was `c<trajectory id>`: with `dedup.exact=false` two
    identical records kept apart had one cluster id (one cluster of two, no duplicate),
    while a near cluster was named after its representative's uid."""
    return decisions_for(segment[UID].to_pylist(), content_keys(segment).to_pylist(), decisions)


def cluster_rows(segment: pa.Table, dec: list[tuple]) -> pa.Table:
    """The segment's `clusters` rows: one per record, kept or not."""
    return pa.table(
        {
            "trajectory_id": segment[F.TRAJECTORY_ID],
            "origin_id": pc.struct_field(segment[F.SOURCE], "origin_id"),
            "source": segment[UID],
            "domain": segment[F.DOMAIN],
            "cluster_id": pa.array([d[0] for d in dec], pa.string()),
            "representative": pa.array([d[1] for d in dec], pa.bool_()),
            "role": pa.array([d[2] for d in dec], pa.string()),
        },
        schema=CLUSTERS_SCHEMA,
    )


def read_for_finalize(path: Path) -> pa.Table:
    """A segment's columns `finalize` uses: not the signatures and band keys, a quarter
    of a segment's read (2.5 of ~10 ms for 1,024 records) that pass 2 only dropped."""
    segment = open_parquet(path)
    return segment.read(columns=[c for c in segment.schema_arrow.names if c not in (SIG, BANDS)])


def finalize(
    segment: pa.Table, decisions: dict[str, tuple], policy: MaskPolicy, seed: int
) -> dict[str, pa.Table]:
    """The segment's rows of the `trajectories`, `turns` and `clusters` tables.

    Nothing here depends on the corpus counts (they are joined in at read time), so a
    segment is finalised again only when a decision of its own records changes.
    """
    dec = segment_decisions(segment, decisions)
    clusters = cluster_rows(segment, dec)
    kept = segment.filter(pa.array([d[1] for d in dec], pa.bool_())).combine_chunks()
    cluster_ids = pa.array([d[0] for d in dec if d[1]], pa.string())
    turn_lists = kept[F.TURNS].chunk(0) if kept[F.TURNS].num_chunks else pa.array([], F_TURNS)
    turns = pc.list_flatten(turn_lists)
    keys = pc.list_flatten(kept[TEMPLATES])
    lengths = pc.list_value_length(turn_lists).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    dedup = pa.StructArray.from_arrays(
        [kept[F.TRAJECTORY_ID].chunk(0) if len(kept) else pa.array([], pa.string()), cluster_ids,
         pa.array(np.ones(len(kept), bool))],
        names=list(F.DEDUP_FIELDS),
    )  # fmt: skip
    trajectories = kept.drop_columns(
        [c for c in (UID, TEMPLATES, SIG, BANDS, ARRIVAL, CONTENT) if c in kept.column_names]
    )
    trajectories = trajectories.set_column(
        trajectories.schema.get_field_index(F.TURNS),
        F.TURNS,
        pa.ListArray.from_arrays(pa.array(offsets), turns),
    )
    trajectories = trajectories.set_column(
        trajectories.schema.get_field_index(F.DEDUP), F.DEDUP, dedup
    ).cast(TRAJECTORY_SCHEMA)
    rows = turn_rows(trajectories, turns, lengths, seed)
    corpus = corpus_columns(turns, rows["trajectory_id"].to_pylist(), keys, policy, seed)
    for name, column in corpus.items():
        rows = rows.append_column(name, column)
    parent = pa.array(np.repeat(np.arange(len(lengths)), lengths))
    rows = rows.append_column(TURN_CLUSTER, pc.take(cluster_ids, parent))
    if len(segment) and ARRIVAL in segment.column_names:  # where the unit's records came in
        first = pc.min(segment[ARRIVAL]).as_py().encode()
        meta = {**(trajectories.schema.metadata or {}), F.UNIT_ORDER_KEY: first}
        trajectories = trajectories.replace_schema_metadata(meta)
    return {
        "trajectories": trajectories,
        "turns": rows.cast(STORED_TURNS_SCHEMA),
        "clusters": clusters,
    }


F_TURNS = TRAJECTORY_SCHEMA.field(F.TURNS).type


def turn_rows(traj: pa.Table, turns: pa.StructArray, lengths: np.ndarray, seed: int) -> pa.Table:
    """One `turns` row per turn, from the flattened turn structs."""
    parent = pa.array(np.repeat(np.arange(len(lengths)), lengths))
    tids = pc.take(traj[F.TRAJECTORY_ID], parent)
    action, obs, stats = turns.field("action"), turns.field("observation"), turns.field("stats")
    index, keep = turns.field("index"), turns.field("keep")
    exit_code = obs.field("exit_code")
    is_error = pc.or_(
        pc.fill_null(obs.field("is_error"), False),
        pc.fill_null(pc.not_equal(exit_code, 0), False),
    )
    keeps = keep.to_numpy(zero_copy_only=False)
    in_loss = keeps >= 1.0
    partial = np.flatnonzero((keeps > 0.0) & (keeps < 1.0))
    if len(partial):
        t_list, i_list = tids.to_pylist(), index.to_pylist()
        for n in partial.tolist():
            in_loss[n] = keep_turn(t_list[n], i_list[n], seed, keeps[n])
    cols: dict[str, Any] = {
        "trajectory_id": tids,
        "origin_id": pc.take(pc.struct_field(traj[F.SOURCE], "origin_id"), parent),
        "domain": pc.take(traj[F.DOMAIN], parent),
        "turn_index": index,
        "action_kind": action.field("kind"),
        "tool_name": action.field("name"),
        "action_chars": pc.utf8_length(action.field("text")).cast(pa.int64()),
        "obs_chars": pc.utf8_length(obs.field("text")).cast(pa.int64()),
        "is_error": is_error,
        "truncated": pc.fill_null(obs.field("truncated"), False),
        **{name: stats.field(name) for name in F.STATS_FIELDS},
        "category": turns.field("category"),
        "keep": keep,
        "rule": turns.field("rule"),
        "in_loss": pa.array(in_loss, pa.bool_()),
        "perturbation": turns.field("perturbation"),
    }
    return pa.table(cols, schema=TURNS_SCHEMA)
