"""Incremental state as Beam stages: earlier records that meet new ones, the template
count changes, the earlier segments to rewrite and the cluster state to keep.

Everything here moves batches (`dedup.SIG_SCHEMA` tables, dicts, sets): one element per
unit or segment, never one per record, so Beam's per-element cost stays off the corpus
size. State files are written into the run directory (`out`/_index) that
`process.merge_state` completes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import ArrowFileWriter, write_table_atomic
from worldtrace.schemas.tempfiles import open_parquet

from . import segments as G
from .dedup import SIG_SCHEMA, SINGLETON_KEPT, Merge
from .transforms import WAS, sig_batch, was_columns
from .units import ARRIVAL, BANDS, CONTENT, SIG, TEMPLATES, UID


def members_batch(m: pa.Table) -> pa.Table:
    """Rows of the cluster state of earlier runs (`_index/members.parquet`) as a Sig batch."""
    n = m.num_rows
    cols = {c: m[c] for c in ("uid", "tid", "failed", "turns", "started", "arrival", "stem")}
    cols["sig"] = pa.nulls(n, pa.binary())
    cols["bands"] = pa.array([[]] * n, pa.list_(pa.uint64()))
    cols["keys"] = m["keys"]
    for name, source in (("was_cluster", "cluster_id"), ("was_rep", "representative"),
                         ("was_role", "role")):  # fmt: skip
        cols[name] = m[source]
    return pa.table(cols).cast(SIG_SCHEMA)


def _probe(t: pa.Table) -> tuple[set, set]:
    bands = pc.list_flatten(t["bands"]).to_numpy(zero_copy_only=False)
    return set(t["tid"].to_pylist()), set(bands.tolist())


def in_clusters(members: pa.Table, clusters: set[str]) -> np.ndarray:
    """Which rows of a members table belong to one of `clusters`."""
    hit = pc.is_in(members["cluster_id"], pa.array(list(clusters), pa.string()))
    return hit.to_numpy(zero_copy_only=False).astype(bool)


def earlier_members(index: Path, clusters: set[str]) -> pa.Table:
    """The earlier members of `clusters` (the clusters a new record may join), as a Sig
    batch: only they can change, so a run costs what is new, not the corpus's clusters."""
    members = G.members_table(index)
    return members_batch(members.filter(pa.array(in_clusters(members, clusters))))


def touched_clusters(t: pa.Table) -> set[str]:
    """Earlier non-singleton clusters of a batch of earlier records."""
    role = pc.fill_null(t["was_role"], "singleton")
    return set(t.filter(pc.not_equal(role, "singleton"))["was_cluster"].to_pylist())


class _OldMatches(beam.DoFn):
    """Records of an earlier segment that share a content id or a band key with a new one.

    Reads the earlier cluster state itself (`setup`): a large object passed into the
    pipeline would be pickled into its graph, which the driver pays for at build time.
    """

    COLUMNS = [UID, CONTENT, F.OUTCOME, F.STARTED_AT, ARRIVAL, BANDS, TEMPLATES, SIG]

    def __init__(self, index: str):
        self.index = Path(index)

    def setup(self):
        self.was = G.member_decisions(self.index)
        self.probed: tuple = (None, None)

    def _arrays(self, probe: tuple[set, set]) -> tuple[pa.Array, pa.Array]:
        """The probe as Arrow arrays, built once per worker (not once per segment)."""
        if self.probed[0] is not probe:
            tids, bands = probe
            arrays = (
                pa.array(list(tids), pa.string()),
                pa.array(np.fromiter(bands, np.uint64, len(bands))),
            )
            self.probed = (probe, arrays)
        return self.probed[1]

    def process(self, stem: str, probe: tuple[set, set]):
        if not probe[0]:
            return
        tids, bands = self._arrays(probe)
        path = self.index / G.SEGMENTS / f"{stem}.parquet"
        with G.index_read(path):
            segment = open_parquet(path)
            t = segment.read(columns=[CONTENT, BANDS])  # the probe's only
        hit = _hits(t, tids, bands, CONTENT, BANDS)
        if hit.any():
            with G.index_read(path):
                rows = segment.read(columns=self.COLUMNS)
            yield sig_batch(rows.take(pa.array(np.flatnonzero(hit))), stem, self.was, sigs=True)


def _hits(t: pa.Table, tids: pa.Array, bands: pa.Array, tid: str, band: str) -> np.ndarray:
    """Rows of `t` whose content key (`units.CONTENT`) is among `tids` or one of whose
    band keys is among `bands`."""
    hit = pc.is_in(t[tid], tids).to_numpy(zero_copy_only=False).copy()
    if len(bands):
        flat = pc.list_flatten(t[band])
        parents = pc.list_parent_indices(t[band]).to_numpy(zero_copy_only=False)
        hit[parents[pc.is_in(flat, bands).to_numpy(zero_copy_only=False)]] = True
    return hit


class _IndexMatches(_OldMatches):
    """`_OldMatches` over the probe index (`segments.PROBE`): a few files in all instead of
    one read per earlier segment, signatures included (probe files written before they
    held them leave them to `dedup.SigSource`)."""

    def process(self, index: str, probe: tuple[set, set]):
        if not probe[0]:
            return
        tids, bands = self._arrays(probe)
        t = G.read_probe(G.probe_files(self.index))
        hit = _hits(t, tids, bands, "tid", "bands")
        if hit.any():
            t = t.take(pa.array(np.flatnonzero(hit)))
            cols = {c: t[c] for c in G.PROBE_COLUMNS}
            was = G.decisions_for(t["uid"].to_pylist(), t["tid"].to_pylist(), self.was)
            yield pa.table({**cols, **was_columns(was)}).select(SIG_SCHEMA.names).cast(SIG_SCHEMA)


class ProbeIndex(beam.DoFn):
    """This run's new records (pass 1's probe rows: `segments.PROBE_COLUMNS`, signatures
    included) -> its probe files under `out`/_index/probe, one per bundle (pass 1's
    stage: one per worker here), so a later run reads a few files instead of every
    segment. Runs in pass 1's stage: nothing is gathered or shuffled, and each unit's
    rows go to the file as they come (held until the bundle's end, they took 30 MB for
    a worker's 40,000 records)."""

    def __init__(self, out: str):
        self.out = out

    def start_bundle(self):
        self.writer: ArrowFileWriter | None = None

    def process(self, rows: pa.Table):
        if self.writer is None:
            name = f"p{uuid.uuid4().hex[:12]}{G.PROBE_SUFFIX}"
            path = Path(self.out) / G.INDEX / G.PROBE / name
            self.writer = ArrowFileWriter(path, G.PROBE_SCHEMA)
        self.writer.write(rows)

    def finish_bundle(self):
        if self.writer is not None:
            self.writer.close()
        self.writer = None

    def teardown(self):
        if getattr(self, "writer", None) is not None:  # a failed bundle's file
            self.writer.abort()


class EarlierRecords(beam.PTransform):
    """New batches -> {"sigs": batches of earlier records that matter to them, "touched":
    the earlier clusters they reach}: records sharing a content id or a band key with a
    new one, and every member of an earlier non-singleton cluster one of those is in (a
    record may come twice: dedup keeps it once). Other earlier clusters cannot change.
    Earlier records are looked up in the probe files (`probed`: the segments they
    cover); segments written before probe files existed are read one by one, spread over
    the workers when there are several (`spread`)."""

    def __init__(
        self, index: Path, stems: list[str], spread: bool = True, probed: set[str] = frozenset()
    ):
        super().__init__()
        self.index, self.stems, self.spread, self.probed = index, stems, spread, probed

    def expand(self, new):
        p = new.pipeline
        probe = (
            new
            | "ProbeKeys" >> beam.Map(_probe)
            | "Probe" >> beam.CombineGlobally(Merge(set, set)).without_defaults()
        )
        probe = beam.pvalue.AsSingleton(probe, default_value=(set(), set()))
        index = str(self.index)
        found = []
        if self.probed:  # the segments the probe files cover
            found.append(
                p
                | "Index" >> beam.Create([index], reshuffle=False)
                | "IndexMatches" >> beam.ParDo(_IndexMatches(index), probe=probe)
            )
        unprobed = [s for s in self.stems if s not in self.probed]
        if unprobed or not found:  # written before probe files existed: one by one
            found.append(
                p
                | "Segments" >> beam.Create(unprobed, reshuffle=self.spread)
                | "Matches" >> beam.ParDo(_OldMatches(index), probe=probe)
            )
        matched = found[0] if len(found) == 1 else tuple(found) | "Matched" >> beam.Flatten()
        touched = (
            matched
            | "Reached" >> beam.Map(touched_clusters)
            | "Touched" >> beam.CombineGlobally(Merge(set)).without_defaults()
        )
        state = (
            p
            | "Clusters" >> beam.Create([str(self.index)], reshuffle=False)
            | "State"
            >> beam.Map(
                lambda index, clusters: earlier_members(Path(index), clusters),
                clusters=beam.pvalue.AsSingleton(touched, default_value=set()),
            )
        )
        return {"sigs": (matched, state) | "Both" >> beam.Flatten(), "touched": touched}


def _now(t: pa.Table, decisions: dict) -> list[tuple]:
    """Each record's decision after the run (`segments.after_run`)."""
    after = G.after_run(decisions, _earlier(t))
    return G.decisions_for(t["uid"].to_pylist(), t["tid"].to_pylist(), after)


def _was(t: pa.Table) -> list[tuple | None]:
    cols = [t[c].to_pylist() for c in WAS]
    return [None if r[2] is None else r for r in zip(*cols, strict=True)]


def _earlier(t: pa.Table) -> dict[str, tuple]:
    """uid -> earlier decision of the batch's earlier records (in Python: only they)."""
    t = t.filter(t["was_role"].is_valid())
    return dict(zip(t["uid"].to_pylist(), _was(t), strict=True))


def _kept(t: pa.Table, decisions: dict) -> np.ndarray:
    """Whether each record is kept after the run: `_now`'s representative flag, columnar
    (a full run's batches hold new records only: this run's decisions alone)."""
    uids = t["uid"]
    dropped = [u for u, d in decisions.items() if not d[1]]
    now = ~pc.is_in(uids, pa.array(dropped, pa.string())).to_numpy(zero_copy_only=False)
    earlier = t["was_role"].is_valid().to_numpy(zero_copy_only=False)
    if earlier.any():  # one this run decided nothing on: as it was (`segments.after_run`)
        decided = pc.is_in(uids, pa.array(list(decisions), pa.string()))
        same = earlier & ~decided.to_numpy(zero_copy_only=False)
        was = pc.fill_null(t["was_rep"], True).to_numpy(zero_copy_only=False)
        now = np.where(same, was, now)
    return now


def key_deltas(t: pa.Table, decisions: dict) -> pa.Table:
    """`TEMPLATE_COUNTS` rows: +1 per template of a newly kept record, -1 per template of
    one no longer kept, each key once, zeros left out (columnar: a full run adds every
    template of every record)."""
    now = _kept(t, decisions)
    was = pc.is_in(t["was_role"], pa.array(SINGLETON_KEPT)).to_numpy(zero_copy_only=False)
    step = now.astype(np.int64) - was.astype(np.int64)
    keys = pc.list_flatten(t["keys"]).to_numpy(zero_copy_only=False)
    weight = step[pc.list_parent_indices(t["keys"]).to_numpy(zero_copy_only=False)]
    return summed(keys, weight)


def summed(keys: np.ndarray, counts: np.ndarray) -> pa.Table:
    """`TEMPLATE_COUNTS` rows of the per-key sums of `counts`, sorted, zeros left out:
    count changes stay numpy arrays from a batch to the run's total (a Counter of the
    corpus's 230,000 templates, merged and turned into rows, cost the run's last
    stages ~0.1 s per 20,000 trajectories)."""
    distinct, inverse = np.unique(np.asarray(keys, np.uint64), return_inverse=True)
    total = np.bincount(inverse, weights=counts, minlength=len(distinct)).astype(np.int64)
    moved = np.flatnonzero(total)
    return pa.table({"key": distinct[moved], "count": total[moved]}, schema=G.TEMPLATE_COUNTS)


def changed_stems(t: pa.Table, decisions: dict) -> tuple[set[str], set[str]]:
    """Stems of earlier segments whose records changed: (cluster or keep changed, only
    the role changed). A role alone (a singleton that became its cluster's
    representative: the commonest change) only moves the segment's `clusters` rows."""
    t = t.filter(t["was_role"].is_valid())  # earlier records only
    stems = t["stem"].to_pylist()
    full, roles = set(), set()
    for i, (now, was) in enumerate(zip(_now(t, decisions), _was(t), strict=True)):
        if now[:2] != was[:2]:
            full.add(stems[i])
        elif now != was:
            roles.add(stems[i])
    return full, roles


def member_rows(t: pa.Table, decisions: dict) -> pa.Table:
    """`_index/members.parquet` rows of the batch's records in a non-singleton cluster
    after the run (`segments.after_run`: an earlier member this run decided nothing on
    stays in its cluster; `write_state` drops the earlier rows of every cluster reached).

    Columnar, as the count changes: built as Python dicts, a duplicate-heavy batch's
    members (half of a corpus holding each trajectory twice) cost the two state stages
    more than dedup itself, and were pickled again on their way to the total."""
    earlier = {u: d for u, d in _earlier(t).items() if d[2] != "singleton"}
    after = G.after_run(decisions, earlier)
    if not after:
        return G.MEMBERS_SCHEMA.empty_table()
    m = t.filter(pc.is_in(t["uid"], pa.array(list(after), pa.string())))
    got = [after[u] for u in m["uid"].to_pylist()]
    cols = {"cluster_id": 0, "representative": 1, "role": 2}
    return pa.table(
        {
            f.name: pa.array([d[cols[f.name]] for d in got], f.type)
            if f.name in cols
            else m[f.name]
            for f in G.MEMBERS_SCHEMA
        },
        schema=G.MEMBERS_SCHEMA,
    )


def changes(t: pa.Table, decisions: dict) -> tuple[list, set[str], set[str], list[pa.Table]]:
    """One batch's share of the run's state: count changes (a one-table list: the total
    concatenates them), stems to rewrite (whole, and clusters only), members (a one-table
    list too)."""
    full, roles = changed_stems(t, decisions)
    return [key_deltas(t, decisions)], full, roles, [member_rows(t, decisions)]


TOTAL = Merge(list, set, set, list)
"""The run's state from `changes` of every batch: count changes, stems to rewrite (whole,
clusters only), members; its empty accumulator is a run no record reached."""


class RecordState(beam.PTransform):
    """Records (batches, each record once) -> the earlier segments to rewrite (`Rewrite`);
    writes the run's cluster state (`members.parquet`, sorted by uid: the earlier state
    of the clusters no new record reached, `touched` from `EarlierRecords`, and this
    run's decisions) and template count changes (`G.DELTA_FILE`) into `out`/_index.

    Its combine has no default (a default costs every run a further stage barrier): a
    run no record reached writes nothing here and the pipeline's `NO_REWRITE` stands
    for its result; `complete_state` writes its files after the run."""

    def __init__(self, out: str, decisions, index: Path | None = None, touched=None):
        super().__init__()
        self.out, self.decisions, self.index, self.touched = out, decisions, index, touched

    def expand(self, records):
        earlier: tuple = (None, set())
        if self.index is not None:
            earlier = (str(self.index), beam.pvalue.AsSingleton(self.touched, default_value=set()))
        return (
            records
            | "Changes" >> beam.Map(changes, decisions=self.decisions)
            # one combine for all three: each combine is a stage barrier
            | "Total" >> beam.CombineGlobally(TOTAL).without_defaults()
            | "Write" >> beam.Map(write_state, self.out, *earlier)
        )


class Rewrite(NamedTuple):
    """Earlier segments pass 2 writes again."""

    full: frozenset[str]
    """A record changed cluster or keep: every table."""
    clusters: frozenset[str]
    """Only roles changed: the `clusters` file alone."""

    def __contains__(self, stem: object) -> bool:
        return stem in self.full or stem in self.clusters


NO_REWRITE = Rewrite(frozenset(), frozenset())
"""What `RecordState` stands for when no record reached it."""


def complete_state(out: Path, index: Path | None) -> None:
    """Write the state of a run no record reached, if `RecordState` wrote none: the
    earlier clusters as they were, no count changes."""
    if not (out / G.INDEX / G.DELTA_FILE).exists():
        write_state(TOTAL.create_accumulator(), str(out), str(index) if index else None, set())


def write_state(
    total: tuple[list[pa.Table], set[str], set[str], list[pa.Table]],
    out: str,
    index: str | None,
    touched: set[str],
) -> Rewrite:
    delta, full, roles, new_members = total
    members = pa.concat_tables([G.MEMBERS_SCHEMA.empty_table(), *new_members])
    if index:  # the earlier clusters no new record reached stay as they were
        before = G.members_table(Path(index)).cast(G.MEMBERS_SCHEMA)
        members = pa.concat_tables(
            [before.filter(pa.array(~in_clusters(before, touched))), members]
        )
    write_table_atomic(Path(out) / G.INDEX / G.MEMBERS_FILE, members.sort_by("uid"))
    delta = pa.concat_tables([G.TEMPLATE_COUNTS.empty_table(), *delta])
    counts = summed(delta["key"].to_numpy(), delta["count"].to_numpy())
    write_table_atomic(Path(out) / G.INDEX / G.DELTA_FILE, counts)
    return Rewrite(frozenset(full), frozenset(roles - full))
