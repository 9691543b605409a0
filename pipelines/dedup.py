"""Exact and near-duplicate decisions over MinHash LSH, incremental-ready.

Only small tuples move (`Sig`: ids, rank, band keys, template keys; the 512-byte
signature rides along only to verify candidate pairs). Records with the same content
(trajectory id) form one exact group whose best member stands for it in LSH. Records
that share a band bucket are *candidates*; a candidate pair becomes an edge only when
its signatures estimate a Jaccard similarity >= the threshold, so one weak collision
cannot chain two clusters. Connected components: every bundle reduces its edges to a
union-find forest (one parent per node that has an edge) and the forests merge, so no
worker ever holds the edge list; what meets at the end is one entry per member of a
non-singleton cluster. Earlier runs enter as their cluster state (seed edges to each
member's root) and as the old records that share a content id or a bucket with a new
one, so a near-duplicate arriving later joins the earlier cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

NS = "worldtrace"


@dataclass(frozen=True)
class DedupConfig:
    """Near-duplicate detection settings (defaults: docs/pipeline.md#dedup)."""

    exact: bool = True
    near: bool = True
    num_perm: int = 128
    """MinHash permutations: estimate error ~ 1/sqrt(num_perm)."""
    threshold: float = 0.8
    """Target Jaccard similarity of word shingles: sets bands x rows when those are 0,
    and a candidate pair is an edge only when its estimate reaches it."""
    bands: int = 0
    rows: int = 0
    shingle_words: int = 5
    """Words per shingle."""
    seed: int = 1

    def band_rows(self) -> tuple[int, int]:
        if self.bands and self.rows:
            if self.bands * self.rows > self.num_perm:
                raise ValueError(
                    f"bands*rows={self.bands * self.rows} exceeds num_perm={self.num_perm}"
                )
            return self.bands, self.rows
        from .minhash import lsh_params

        return lsh_params(self.threshold, self.num_perm)


class Sig(NamedTuple):
    """What dedup knows of one record."""

    uid: str
    tid: str
    rank: tuple
    stem: str
    sig: bytes | None
    bands: tuple[int, ...]
    keys: tuple[int, ...]
    """Template keys of its turns (the corpus counts follow who is kept)."""
    was: tuple | None = None
    """(cluster_id, representative, role) from an earlier run; None for a new record."""


Decision = tuple[str, bool, str]
SINGLETON_KEPT = ("singleton", "representative")


def rank_of(status: str | None, turns: int, tid: str, origin: str | None, uid: str) -> tuple:
    """Representative preference: success first, more turns, then stable ids."""
    return (status != "success", -turns, tid, origin or "", uid)


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra  # the smallest id is the root: deterministic


def components(edges: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Map every node that has an edge to its component's smallest node."""
    uf = UnionFind()
    for a, b in edges:
        uf.union(a, b)
    return {x: uf.find(x) for x in list(uf.parent)}


class _Forest(beam.CombineFn):
    """Union-find per bundle; forests merge by re-linking their parent pointers."""

    def create_accumulator(self) -> dict[str, str]:
        return {}

    def add_input(self, acc, edge):
        uf = UnionFind()
        uf.parent = acc
        uf.union(*edge)
        return acc

    def merge_accumulators(self, accs):
        uf = UnionFind()
        for acc in accs:
            for node, parent in acc.items():
                uf.union(node, parent)
        return uf.parent

    def extract_output(self, acc) -> dict[str, str]:
        uf = UnionFind()
        uf.parent = acc
        return {x: uf.find(x) for x in list(acc)}


class _ContentGroup(beam.DoFn):
    """One content id: its best member stands for the group in LSH."""

    def process(self, item: tuple[str, Iterable[Sig]]) -> Iterator[Any]:
        tid, sigs = item
        by_uid = {s.uid: s for s in sigs}  # an old record may arrive twice (state + match)
        ordered = sorted(by_uid.values(), key=lambda s: s.rank)
        if len(ordered) > 1:
            yield beam.pvalue.TaggedOutput("members", (tid, [s.uid for s in ordered]))
        sketch = next((s for s in ordered if s.sig is not None), ordered[0])
        new = any(s.was is None for s in ordered)
        yield (tid, ordered[0].rank, sketch.bands, sketch.sig, new)


class _Candidates(beam.DoFn):
    """Pairs within one bucket that involve a new record (old pairs were judged before)."""

    def process(self, item: tuple[Any, Iterable[tuple[str, bool]]]):
        _, entries = item
        entries = sorted(set(entries))
        if len(entries) < 2:
            return
        for i, (a, a_new) in enumerate(entries):
            for b, b_new in entries[i + 1 :]:
                if a_new or b_new:
                    yield (a, b)


class _Verify(beam.DoFn):
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.weak = Metrics.counter(NS, "dedup.candidates_rejected")

    def process(self, pair: tuple[str, str], sigs: dict[str, bytes]):
        a, b = (np.frombuffer(sigs[x], np.uint32) for x in pair)
        if np.count_nonzero(a == b) >= self.threshold * len(a):
            yield pair
        else:
            self.weak.inc()


class _KeyByComponent(beam.DoFn):
    def process(self, item, comps: dict[str, str], members: dict[str, list[str]]):
        tid, rank, *_ = item
        if tid in comps or tid in members:  # singletons need no decision
            yield comps.get(tid, tid), (tid, rank)


class _Decide(beam.DoFn):
    """Per component: cluster id, representative content, and each member's role."""

    def process(self, item, members: dict[str, list[str]]):
        root, tids = item
        tids = sorted(tids, key=lambda x: x[1])
        cluster = f"c{root}"
        rep_tid = tids[0][0]
        for tid, rank in tids:
            for n, uid in enumerate(members.get(tid, [rank[-1]])):
                if tid == rep_tid and n == 0:
                    yield uid, (cluster, True, "representative")
                else:
                    yield uid, (cluster, False, "exact" if n > 0 else "near")


class DedupDecisions(beam.PTransform):
    """Sigs (new, plus old matches and old cluster state) -> (uid, Decision) for every
    member of a non-singleton cluster: the small map pass 2 takes as a side input."""

    def __init__(self, cfg: DedupConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, sigs):
        cfg = self.cfg
        if not (cfg.exact or cfg.near):
            return sigs | "NoDecisions" >> beam.Filter(lambda _: False)
        content = (
            sigs
            | "KeyByContent" >> beam.Map(lambda s: (s.tid if cfg.exact else s.uid, s))
            | "GroupContent" >> beam.GroupByKey()
            | "ContentGroups" >> beam.ParDo(_ContentGroup()).with_outputs("members", main="reps")
        )
        members = beam.pvalue.AsDict(content.members)
        seeds = (
            sigs
            | "OldClusters" >> beam.Filter(lambda s: s.was is not None and s.was[2] != "singleton")
            | "SeedEdges" >> beam.Map(lambda s: (s.tid, s.was[0][1:]))
        )
        pairs = (
            content.reps
            | "BandKeys"
            >> beam.FlatMap(lambda r: [((b, k), (r[0], r[4])) for b, k in enumerate(r[2])])
            | "GroupBands" >> beam.GroupByKey()
            | "Candidates" >> beam.ParDo(_Candidates())
        )  # a pair met in several bands is verified several times: cheaper than a shuffle
        ends = pairs | "Ends" >> beam.FlatMap(lambda p: p)
        ends_sigs = content.reps | "EndSigs" >> beam.FlatMap(
            lambda r, ends: [(r[0], r[3])] if r[0] in ends else [],
            ends=beam.pvalue.AsSingleton(ends | "EndSet" >> beam.combiners.ToSet()),
        )
        edges = pairs | "Verify" >> beam.ParDo(
            _Verify(cfg.threshold), sigs=beam.pvalue.AsDict(ends_sigs)
        )
        comps = (
            (edges, seeds)
            | "AllEdges" >> beam.Flatten()
            | "Components" >> beam.CombineGlobally(_Forest())
        )
        return (
            content.reps
            | "KeyByComponent"
            >> beam.ParDo(_KeyByComponent(), comps=beam.pvalue.AsSingleton(comps), members=members)
            | "GroupComponents" >> beam.GroupByKey()
            | "Decide" >> beam.ParDo(_Decide(), members=members)
        )
