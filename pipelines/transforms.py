"""The processing stages as Beam DoFns and composite transforms.

Elements are units of work (a Parquet row group or a JSONL file), segment names and
batches, not records: per-element Beam overhead is paid once per ~1,000 trajectories.
What crosses stages between the passes are `dedup.SIG_SCHEMA` batches (no text). Files are written by the
stage that made them into the run directory (`out`), which `process` publishes (schemas/publish.py).
"""

from __future__ import annotations

import functools
import pickle
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import read_parquet, write_table_atomic
from worldtrace.schemas.tables import REJECTS_SCHEMA

from . import segments as G
from .dedup import NS, SIG_SCHEMA, DedupConfig
from .filters import FilterConfig
from .mask import MaskPolicy
from .runner import lane_result, lane_tasks, paused_gc, work_lanes
from .units import ARRIVAL, BANDS, CONTENT, SIG, TEMPLATES, UID, Unit, process_unit


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
    tids = t[CONTENT]  # the content key: exact dedup's groups, the probe's content ids
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


class _OnLanes(beam.DoFn):
    """A DoFn whose elements' work (`work`: a module-level function and its arguments)
    runs on the local run's worker lanes when it has them (`runner.work_lanes`), the
    outputs (`emit`) following when the bundle finishes, each as its task is done; else
    here, as each element comes.

    The bundle's elements are dealt to the lanes in turn, the order `units.deal` made so
    that each worker gets the same rows (handed to one pool's free workers one by one, a
    worker that drew more short units took a further long one: a 5k run's pass 1 0.25 s
    longer). The work is a function of its arguments alone: a forked worker has nothing
    of this DoFn, and what it counts comes back with its result (Beam's metrics of
    another process would be lost)."""

    def start_bundle(self) -> None:
        self._calls: list[tuple] = []

    def work(self, element, *args, **kwargs) -> tuple | None:
        raise NotImplementedError

    def emit(self, result):
        raise NotImplementedError

    def process(self, element, *args, **kwargs):
        call = self.work(element, *args, **kwargs)
        if call is None:
            return
        if work_lanes() is None:
            yield from self.emit(call[0](*call[1:]))
        else:
            self._calls.append(call)

    def finish_bundle(self):
        calls, self._calls = self._calls, []
        if not calls or work_lanes() is None:
            return
        for task in lane_tasks(calls):
            for out in self.emit(lane_result(task)):
                if isinstance(out, beam.pvalue.TaggedOutput):
                    yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
                else:
                    yield GlobalWindows.windowed_value(out)


def pass1_unit(
    out: Path,
    filters: FilterConfig,
    dedup: DedupConfig,
    policy: MaskPolicy,
    root: str | None,
    unit: Unit,
) -> tuple[Counter, str | None, pa.Table | None]:
    """Pass 1 of one unit (`_Pass1`): its counts, and its stem and Sig batch (with
    signatures) when it kept records."""
    path, group, span, *arrival = unit
    with paused_gc():
        res = process_unit(path, group, filters, dedup, policy, span, root, *arrival)
    if res.rejects:
        rows = pa.Table.from_pylist(res.rejects, schema=REJECTS_SCHEMA)
        write_table_atomic(out / "rejects" / f"{res.stem}.parquet", rows)
    if not res.segment.num_rows:
        return res.counts, None, None
    # texts, ids and signatures: dictionary pages only cost (a 1,024-record segment
    # 18.6 -> 16.0 ms to write, 1% smaller, read as fast)
    segment = out / G.INDEX / G.SEGMENTS / f"{res.stem}.parquet"
    write_table_atomic(segment, res.segment, dictionary=False)
    return res.counts, res.stem, sig_batch(res.segment, res.stem, sigs=True)


class _Pass1(_OnLanes):
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

    def work(self, unit: Unit) -> tuple:
        """The unit's work as `_OnLanes` runs it (and `process` submits ahead)."""
        return (pass1_unit, self.out, self.filters, self.dedup, self.policy, self.root, unit)

    def emit(self, result):
        counts, stem, batch = result
        count(counts)
        if stem is not None:
            yield beam.pvalue.TaggedOutput("stems", stem)
            yield beam.pvalue.TaggedOutput("probe", batch.select(list(G.PROBE_COLUMNS)))
            at = batch.schema.get_field_index("sig")  # dedup looks up the few it needs
            yield batch.set_column(at, "sig", pa.nulls(batch.num_rows, pa.binary()))


def finalize_segment(
    out: Path, src: Path, decisions: dict, policy: MaskPolicy, seed: int, old: bool, full: bool
) -> tuple[str, str]:
    """Pass 2 of one segment (`_Finalize`): its stem and the counter it adds to.
    `decisions` is the map, or a file holding it (`_Finalize.shared`)."""
    stem = src.stem
    if isinstance(decisions, Path):
        decisions = _loaded(decisions)
    # an earlier segment that does not read is named, with the rebuild (`G.index_read`)
    with G.index_read(src) if old else nullcontext():
        if not full:  # roles only: no text to read or write
            segment = read_parquet(src, columns=list(G.CLUSTER_COLUMNS))
        else:
            segment = G.read_for_finalize(src)
    if not full:
        tables = {"clusters": G.cluster_rows(segment, G.segment_decisions(segment, decisions))}
        counter = "segments.rewritten_clusters"
    else:
        tables = G.finalize(segment, decisions, policy, seed)
        counter = "segments.rewritten" if old else "segments.new"
    for name, table in tables.items():
        write_table_atomic(out / name / f"{stem}.parquet", table)
    return stem, counter


@functools.lru_cache(maxsize=1)
def _loaded(path: Path) -> Any:
    """A file's pickled value, read once by each worker (`_Finalize.shared`)."""
    return pickle.loads(path.read_bytes())


class _Finalize(_OnLanes):
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
        self._shared: tuple[dict, dict | Path] | None = None
        self._files = 0

    def work(self, stem: str, decisions: dict, stems) -> tuple | None:
        if self.old and stem not in stems:
            return None
        if work_lanes() is not None or self.old:  # the same map for every segment
            decisions = self.shared(decisions)
        src = (self.index if self.old else self.out / G.INDEX) / G.SEGMENTS / f"{stem}.parquet"
        full = not self.old or stem in stems.full
        return (finalize_segment, self.out, src, decisions, self.policy, self.seed, self.old, full)

    def shared(self, decisions: dict) -> dict | Path:
        """The map every segment's work takes, made once for this side input: with the
        earlier cluster state for an earlier segment (`segments.after_run`), and for
        worker lanes written to a file each worker reads once (a copy in every task was
        80 pickles of ~8k entries in an 80k run: pass 2 0.4 s longer)."""
        if self._shared is not None and self._shared[0] is decisions:
            return self._shared[1]
        made: dict | Path = decisions
        if self.old:  # read once, and only by a run that rewrites an earlier segment
            if self.was is None:
                self.was = G.member_decisions(self.index)
            made = G.after_run(decisions, self.was)
        if work_lanes() is not None:
            self._files += 1
            path = self.out / f".decisions-{'old' if self.old else 'new'}-{self._files}.pickle"
            path.write_bytes(pickle.dumps(made, pickle.HIGHEST_PROTOCOL))
            made = path
        self._shared = (decisions, made)
        return made

    def emit(self, result):
        stem, counter = result
        Metrics.counter(NS, counter).inc()
        yield stem
