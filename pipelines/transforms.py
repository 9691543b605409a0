"""The processing stages as Beam DoFns and composite transforms.

Elements are units of work (a Parquet row group or a JSONL file) and segment names, not
records: per-element Beam overhead is paid once per ~1,000 trajectories. What crosses
stages between the passes are `dedup.Sig` tuples (no text). Files are written by the
stage that made them into the run directory (`out`), which `process.publish` swaps in.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import scan_units, write_table_atomic
from worldtrace.schemas.tables import REJECTS_SCHEMA

from . import segments as G
from .dedup import SINGLETON_KEPT, DedupConfig, Sig, rank_of
from .filters import FilterConfig
from .mask import MaskPolicy
from .units import BANDS, SIG, TEMPLATES, UID, process_unit

NS = "worldtrace"


def count(counts: Counter) -> None:
    for name, n in counts.items():
        Metrics.counter(NS, name).inc(n)


def sigs_of(t: pa.Table, stem: str, was: dict[str, tuple] | None = None) -> list[Sig]:
    """Dedup's view of segment rows (columnar reads, one tuple per row)."""
    status = pc.struct_field(t[F.OUTCOME], "status").to_pylist()
    origin = pc.struct_field(t[F.SOURCE], "origin_id").to_pylist()
    keys = t[TEMPLATES].to_pylist()
    out = []
    for uid, tid, st, org, sig, bands, ks in zip(
        t[UID].to_pylist(), t[F.TRAJECTORY_ID].to_pylist(), status, origin,
        t[SIG].to_pylist(), t[BANDS].to_pylist(), keys, strict=True,
    ):  # fmt: skip
        prev = None if was is None else was.get(uid, (f"c{tid}", True, "singleton"))
        rank = rank_of(st, len(ks), tid, org, uid)
        out.append(Sig(uid, tid, rank, stem, sig, tuple(bands), tuple(ks), prev))
    return out


class _Pass1(beam.DoFn):
    """One unit: read, validate, filter, score, sketch; write its segment and rejects."""

    def __init__(self, out: str, filters: FilterConfig, dedup: DedupConfig, policy: MaskPolicy):
        self.out, self.filters, self.dedup, self.policy = Path(out), filters, dedup, policy

    def process(self, unit: tuple[str, int | None]):
        res = process_unit(unit[0], unit[1], self.filters, self.dedup, self.policy)
        count(res.counts)
        if res.rejects:
            rows = pa.Table.from_pylist(res.rejects, schema=REJECTS_SCHEMA)
            write_table_atomic(self.out / "rejects" / f"{res.stem}.parquet", rows)
        if res.segment.num_rows:
            write_table_atomic(self.out / G.INDEX / G.SEGMENTS / f"{res.stem}.parquet", res.segment)
            yield beam.pvalue.TaggedOutput("stems", res.stem)
            yield from sigs_of(res.segment, res.stem)


class _OldMatches(beam.DoFn):
    """Records of an earlier segment that share a content id or a band key with a new one."""

    COLUMNS = [UID, F.TRAJECTORY_ID, F.OUTCOME, F.SOURCE, SIG, BANDS, TEMPLATES]

    def __init__(self, index: str):
        self.index = Path(index)

    def process(self, stem: str, probe: tuple[set, set], was: dict[str, tuple]):
        tids, bands = probe
        if not tids:
            return
        t = pq.read_table(self.index / G.SEGMENTS / f"{stem}.parquet", columns=self.COLUMNS)
        hit = pc.is_in(t[F.TRAJECTORY_ID], pa.array(list(tids), pa.string()))
        if bands:
            flat = pc.list_flatten(t[BANDS])
            parents = pc.list_parent_indices(t[BANDS]).to_numpy(zero_copy_only=False)
            b = pc.is_in(flat, pa.array(np.fromiter(bands, np.uint64, len(bands)))).to_numpy(
                zero_copy_only=False
            )
            rows = np.zeros(len(t), bool)
            rows[parents[b]] = True
            hit = pc.or_(hit, pa.array(rows))
        yield from sigs_of(t.filter(hit), stem, was)


class _Probe(beam.CombineFn):
    def create_accumulator(self):
        return set(), set()

    def add_input(self, acc, item):
        acc[0].add(item[0])
        acc[1].update(item[1])
        return acc

    def merge_accumulators(self, accs):
        out = self.create_accumulator()
        for a in accs:
            out[0].update(a[0])
            out[1].update(a[1])
        return out

    def extract_output(self, acc):
        return acc


def was_kept(s: Sig) -> bool:
    return s.was is not None and s.was[2] in SINGLETON_KEPT


def now(s: Sig, decisions: dict) -> tuple:
    return decisions.get(s.uid, (f"c{s.tid}", True, "singleton"))


class _KeyDeltas(beam.DoFn):
    """+1 per template of a newly kept record, -1 per template of one no longer kept."""

    def process(self, s: Sig, decisions: dict):
        step = int(now(s, decisions)[1]) - int(was_kept(s))
        if step:
            for k in s.keys:
                yield k, step


class _Changed(beam.DoFn):
    """Stems of earlier segments whose records' cluster, role or keep changed."""

    def process(self, s: Sig, decisions: dict):
        if s.was is not None and tuple(now(s, decisions)) != tuple(s.was):
            yield s.stem


class _MemberRow(beam.DoFn):
    def process(self, s: Sig, decisions: dict):
        if s.uid in decisions:
            cluster, rep, role = decisions[s.uid]
            failed, neg_turns, tid, origin, _ = s.rank
            yield {
                "uid": s.uid, "tid": tid, "cluster_id": cluster, "representative": rep,
                "role": role, "failed": failed, "turns": -neg_turns, "origin": origin,
                "stem": s.stem, "keys": list(s.keys),
            }  # fmt: skip


class TemplateDeltas(beam.PTransform):
    """One Sig per record -> (template key, count change) where the change is not 0."""

    def __init__(self, decisions):
        super().__init__()
        self.decisions = decisions

    def expand(self, records):
        return (
            records
            | "KeyDeltas" >> beam.ParDo(_KeyDeltas(), decisions=self.decisions)
            | "Sum" >> beam.CombinePerKey(sum)
            | "NonZero" >> beam.Filter(lambda kv: kv[1] != 0)
        )


class ChangedStems(beam.PTransform):
    """One Sig per record -> the set of earlier segments whose decisions changed."""

    def __init__(self, decisions):
        super().__init__()
        self.decisions = decisions

    def expand(self, records):
        return (
            records
            | "Changed" >> beam.ParDo(_Changed(), decisions=self.decisions)
            | "Set" >> beam.combiners.ToSet()
        )


class EarlierRecords(beam.PTransform):
    """New Sigs -> the Sigs of earlier runs that matter to them: records sharing a content
    id or a band key with a new one, and every member of an earlier non-singleton cluster."""

    def __init__(self, index: Path | None, stems: list[str], members: list[Sig]):
        super().__init__()
        self.index, self.stems, self.members = index, stems, members

    def expand(self, new):
        p = new.pipeline
        probe = (
            new
            | "ProbeKeys" >> beam.Map(lambda s: (s.tid, s.bands))
            | "Probe" >> beam.CombineGlobally(_Probe())
        )
        was = {s.uid: s.was for s in self.members}
        matched = (
            p
            | "Segments" >> beam.Create(self.stems)
            | "Matches"
            >> beam.ParDo(
                _OldMatches(str(self.index or "")),
                probe=beam.pvalue.AsSingleton(probe),
                was=was,
            )
        )
        state = p | "Clusters" >> beam.Create(self.members)
        return (matched, state) | "Both" >> beam.Flatten()


class OnePerRecord(beam.PTransform):
    """(new, earlier) Sigs -> one Sig per record: an earlier record may arrive twice
    (matched and in the cluster state), a new one only once."""

    def expand(self, both):
        new, old = both
        once = (
            old
            | "ByUid" >> beam.Map(lambda s: (s.uid, s))
            | "OnePerUid" >> beam.CombinePerKey(lambda xs: next(iter(xs)))
            | "Values" >> beam.Values()
        )
        return (new, once) | "All" >> beam.Flatten()


class WriteState(beam.PTransform):
    """The run's cluster state and template count changes, into `out`/_index."""

    def __init__(self, out: str, decisions):
        super().__init__()
        self.out, self.decisions = out, decisions

    def expand(self, records_and_delta):
        records, delta = records_and_delta
        (
            records
            | "MemberRows" >> beam.ParDo(_MemberRow(), decisions=self.decisions)
            | "Members" >> beam.combiners.ToList()
            | "WriteMembers"
            >> beam.Map(write_rows(self.out, f"{G.INDEX}/{G.MEMBERS_FILE}", G.MEMBERS_SCHEMA))
        )
        return (
            delta
            | "DeltaRows" >> beam.Map(lambda d: [{"key": k, "count": v} for k, v in d.items()])
            | "WriteDelta"
            >> beam.Map(write_rows(self.out, f"{G.INDEX}/delta.parquet", G.TEMPLATE_COUNTS))
        )


class _Finalize(beam.DoFn):
    """Write a segment's trajectories, turns and clusters files (pass 2).

    An earlier segment (`old=True`) is rewritten only when one of its records changed
    cluster, role or keep: template counts are joined in at read time, so they never
    make an earlier file stale.
    """

    def __init__(self, out: str, index: str | None, policy: MaskPolicy, seed: int, old: bool):
        self.out, self.policy, self.seed, self.old = Path(out), policy, seed, old
        self.index = Path(index) if index else None

    def process(self, stem: str, decisions: dict, stems: set):
        if self.old and stem not in stems:
            return
        src = (self.index if self.old else self.out / G.INDEX) / G.SEGMENTS / f"{stem}.parquet"
        tables = G.finalize(pq.read_table(src), decisions, self.policy, self.seed)
        for name, table in tables.items():
            write_table_atomic(self.out / name / f"{stem}.parquet", table)
        Metrics.counter(NS, "segments.rewritten" if self.old else "segments.new").inc()
        yield stem


class SplitFiles(beam.PTransform):
    """File paths -> (file, row group) units spread over workers."""

    def expand(self, paths):
        return (
            paths
            | "RowGroups" >> beam.FlatMap(lambda p: scan_units(Path(p)))
            | "Spread" >> beam.Reshuffle()
        )


def write_rows(out: str, name: str, schema: pa.Schema):
    """A sink for a small collected list of rows: one Parquet file under `out`."""

    def write(rows: list[dict[str, Any]]) -> str:
        path = Path(out) / name
        write_table_atomic(path, pa.Table.from_pylist(rows, schema=schema))
        return str(path)

    return write
