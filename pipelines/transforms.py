"""The processing stages as Beam DoFns and composite transforms.

Elements are units of work (a Parquet row group or a JSONL file), segment names and
batches, not records: per-element Beam overhead is paid once per ~1,000 trajectories.
What crosses stages between the passes are `dedup.SIG_SCHEMA` batches (no text). Files are written by the
stage that made them into the run directory (`out`), which `process` publishes (schemas/publish.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import write_table_atomic
from worldtrace.schemas.tables import REJECTS_SCHEMA

from . import segments as G
from .dedup import NS, SIG_SCHEMA, DedupConfig
from .filters import FilterConfig
from .mask import MaskPolicy
from .runner import paused_gc
from .units import ARRIVAL, BANDS, SIG, TEMPLATES, UID, Unit, process_unit


def count(counts: Counter) -> None:
    for name, n in counts.items():
        Metrics.counter(NS, name).inc(n)


def sig_batch(
    t: pa.Table, stem: str, was: dict[str, tuple] | None = None, sigs: bool = False
) -> pa.Table:
    """Dedup's view of segment rows, as a batch (`dedup.SIG_SCHEMA`): `was` gives earlier
    records their (cluster, representative, role), a singleton when absent. Signatures
    stay on disk (`dedup.SigSource`) unless `sigs`: rows read back from an earlier
    segment for the new ones they meet, which are the likely candidate ends, carry theirs
    (one more column of a read made anyway, instead of a second read per segment)."""
    status = pc.struct_field(t[F.OUTCOME], "status")
    tids = t[F.TRAJECTORY_ID]
    cols = {
        "uid": t[UID], "tid": tids,
        "failed": pc.fill_null(pc.not_equal(status, "success"), True),
        "turns": pc.list_value_length(t[TEMPLATES]).cast(pa.int64()),
        "started": t[F.STARTED_AT].cast(pa.int64()),
        "arrival": t[ARRIVAL],
        "stem": pa.array([stem] * t.num_rows, pa.string()),
        "sig": t[SIG] if sigs else pa.nulls(t.num_rows, pa.binary()),
        "bands": t[BANDS], "keys": t[TEMPLATES],
    }  # fmt: skip
    prev = [(None, None, None)] * t.num_rows if was is None else G.segment_decisions(t, was)
    return pa.table({**cols, **was_columns(prev)}).cast(SIG_SCHEMA)


WAS = ("was_cluster", "was_rep", "was_role")
"""A Sig batch's earlier decision of each record (all null for a new one)."""


def was_columns(prev: list[tuple]) -> dict[str, pa.Array]:
    """The `WAS` columns from each row's earlier (cluster, representative, role)."""
    return {name: pa.array([p[n] for p in prev], SIG_SCHEMA.field(name).type)
            for n, name in enumerate(WAS)}  # fmt: skip


class _Pass1(beam.DoFn):
    """One unit: read, validate, filter, score, sketch; write its segment and rejects.
    Emits the unit's Sig batch without signatures (every stage after moves it), its
    probe rows with them (`state.ProbeIndex`, in this stage) and its stem."""

    def __init__(
        self,
        out: str,
        filters: FilterConfig,
        dedup: DedupConfig,
        policy: MaskPolicy,
        root: str | None = None,
    ):
        self.out, self.filters, self.dedup, self.policy = Path(out), filters, dedup, policy
        self.root = root  # units are named from it (`units.stem_of`)

    def process(self, unit: Unit):
        path, group, span, *arrival = unit
        with paused_gc():
            res = process_unit(
                path, group, self.filters, self.dedup, self.policy, span, self.root, *arrival
            )
        count(res.counts)
        if res.rejects:
            rows = pa.Table.from_pylist(res.rejects, schema=REJECTS_SCHEMA)
            write_table_atomic(self.out / "rejects" / f"{res.stem}.parquet", rows)
        if res.segment.num_rows:
            # texts, ids and signatures: dictionary pages only cost (a 1,024-record segment
            # 18.6 -> 16.0 ms to write, 1% smaller, read as fast)
            segment = self.out / G.INDEX / G.SEGMENTS / f"{res.stem}.parquet"
            write_table_atomic(segment, res.segment, dictionary=False)
            yield beam.pvalue.TaggedOutput("stems", res.stem)
            batch = sig_batch(res.segment, res.stem, sigs=True)
            yield beam.pvalue.TaggedOutput("probe", batch.select(list(G.PROBE_COLUMNS)))
            at = batch.schema.get_field_index("sig")  # dedup looks up the few it needs
            yield batch.set_column(at, "sig", pa.nulls(batch.num_rows, pa.binary()))


class _Finalize(beam.DoFn):
    """Write a segment's trajectories, turns and clusters files (pass 2).

    An earlier segment (`old=True`) is rewritten only when one of its records changed
    cluster, role or keep: template counts are joined in at read time, so they never
    make an earlier file stale. `decisions` holds this run's (the clusters new records
    reached); its other records keep the earlier cluster state (`segments.after_run`).
    """

    def __init__(self, out: str, index: str | None, policy: MaskPolicy, seed: int, old: bool):
        self.out, self.policy, self.seed, self.old = Path(out), policy, seed, old
        self.index = Path(index) if index else None
        self.was: dict[str, tuple] | None = None

    def process(self, stem: str, decisions: dict, stems):
        if self.old and stem not in stems:
            return
        if self.old:  # read once, and only by a run that rewrites an earlier segment
            if self.was is None:
                self.was = G.member_decisions(self.index)
            decisions = G.after_run(decisions, self.was)
        src = (self.index if self.old else self.out / G.INDEX) / G.SEGMENTS / f"{stem}.parquet"
        if self.old and stem not in stems.full:  # roles only: no text to read or write
            segment = pq.read_table(src, columns=list(G.CLUSTER_COLUMNS))
            tables = {"clusters": G.cluster_rows(segment, G.segment_decisions(segment, decisions))}
            counter = "segments.rewritten_clusters"
        else:
            tables = G.finalize(G.read_for_finalize(src), decisions, self.policy, self.seed)
            counter = "segments.rewritten" if self.old else "segments.new"
        for name, table in tables.items():
            write_table_atomic(self.out / name / f"{stem}.parquet", table)
        Metrics.counter(NS, counter).inc()
        yield stem
