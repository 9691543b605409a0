"""Exact and near-duplicate removal (MinHash LSH with datasketch).

Only small tuples move through the shuffles: (uid, content hash, rank, band keys). The
decision map for members of non-singleton clusters is a side input of the final
filter, so whole trajectories are never grouped. Clusters are connected components of
the LSH candidate graph (union-find over every band's edges), so a cluster whose
members meet in different buckets is still one cluster.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from worldtrace.schemas import fields as F

NS = "worldtrace"
_TOKEN_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class DedupConfig:
    """Near-duplicate detection settings (defaults: docs/pipeline.md#dedup)."""

    exact: bool = True
    near: bool = True
    num_perm: int = 128
    """MinHash permutations: estimate error ~ 1/sqrt(num_perm)."""
    threshold: float = 0.8
    """Target Jaccard similarity of word shingles; sets bands x rows when those are 0."""
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
        from datasketch.lsh import _optimal_param

        return _optimal_param(self.threshold, self.num_perm, 0.5, 0.5)


class Sig(NamedTuple):
    uid: str
    tid: str
    rank: tuple
    bands: tuple[str, ...]


def rank_of(uid: str, record: dict[str, Any]) -> tuple:
    """Representative preference: success first, more turns, then stable ids."""
    status = (record.get(F.OUTCOME) or {}).get("status")
    origin = (record.get(F.SOURCE) or {}).get("origin_id") or ""
    return (status != "success", -len(record[F.TURNS]), record[F.TRAJECTORY_ID], origin, uid)


def shingles(record: dict[str, Any], k: int) -> set[bytes]:
    parts = []
    for t in record[F.TURNS]:
        parts.append((t.get("action") or {}).get("text") or "")
        parts.append((t.get("observation") or {}).get("text") or "")
    tokens = _TOKEN_RE.findall("\n".join(parts).lower())
    if len(tokens) < k:
        return {" ".join(tokens).encode()}
    return {" ".join(tokens[i : i + k]).encode() for i in range(len(tokens) - k + 1)}


def band_keys(hashvalues, bands: int, rows: int) -> tuple[str, ...]:
    out = []
    for b in range(bands):
        chunk = hashvalues[b * rows : (b + 1) * rows].tobytes()
        out.append(f"{b}:{hashlib.blake2b(chunk, digest_size=8).hexdigest()}")
    return tuple(out)


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


# -- DoFns -------------------------------------------------------------------------
class _Signature(beam.DoFn):
    def __init__(self, cfg: DedupConfig):
        self.cfg = cfg

    def setup(self) -> None:
        import xxhash
        from datasketch import MinHash

        self._bands, self._rows = self.cfg.band_rows()
        template = MinHash(num_perm=self.cfg.num_perm, seed=self.cfg.seed)
        self._kwargs = {
            "num_perm": self.cfg.num_perm,
            "seed": self.cfg.seed,
            "permutations": template.permutations,
            "hashfunc": xxhash.xxh32_intdigest,  # ~3x faster than datasketch's sha1 default
        }
        if getattr(template, "scheme", None):  # datasketch >= 2 asks for it with permutations
            self._kwargs["scheme"] = template.scheme

    def process(self, item: tuple[str, dict[str, Any]]) -> Iterator[Sig]:
        from datasketch import MinHash

        uid, record = item
        bands: tuple[str, ...] = ()
        if self.cfg.near:
            m = MinHash(**self._kwargs)
            m.update_batch(list(shingles(record, self.cfg.shingle_words)))
            bands = band_keys(m.hashvalues, self._bands, self._rows)
        yield Sig(uid, record[F.TRAJECTORY_ID], rank_of(uid, record), bands)


class _ContentGroup(beam.DoFn):
    """One group of identical content: its best member stands for it in LSH."""

    def process(self, item: tuple[str, Iterable[Sig]]) -> Iterator[Any]:
        tid, sigs = item
        sigs = sorted(sigs, key=lambda s: s.rank)
        if len(sigs) > 1:  # only exact-duplicate groups travel as a side input
            yield beam.pvalue.TaggedOutput("members", (tid, [s.uid for s in sigs]))
        yield (tid, sigs[0].rank, sigs[0].bands)


class _BandEdges(beam.DoFn):
    def process(self, item: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
        _, tids = item
        tids = sorted(set(tids))
        for other in tids[1:]:
            yield (tids[0], other)


class _ComponentsFn(beam.CombineFn):
    def create_accumulator(self) -> list[tuple[str, str]]:
        return []

    def add_input(self, acc, edge):
        acc.append(edge)
        return acc

    def merge_accumulators(self, accs):
        return [e for a in accs for e in a]

    def extract_output(self, acc) -> dict[str, str]:
        return components(acc)


class _KeyByComponent(beam.DoFn):
    def process(self, item, comps: dict[str, str], members: dict[str, list[str]]):
        tid, rank, _ = item
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


class _Apply(beam.DoFn):
    """Keep representatives and singletons; emit a clusters row for everyone."""

    def __init__(self) -> None:
        self.kept = Metrics.counter(NS, "dedup.kept")
        self.exact = Metrics.counter(NS, "duplicates.exact")
        self.near = Metrics.counter(NS, "duplicates.near")

    def process(self, item, decisions: dict[str, tuple[str, bool, str]]):
        uid, record = item
        tid = record[F.TRAJECTORY_ID]
        cluster, rep, role = decisions.get(uid, (f"c{tid}", True, "singleton"))
        yield beam.pvalue.TaggedOutput(
            "clusters",
            {
                "trajectory_id": tid,
                "origin_id": (record.get(F.SOURCE) or {}).get("origin_id"),
                "source": uid,
                "domain": record[F.DOMAIN],
                "cluster_id": cluster,
                "representative": rep,
                "role": role,
            },
        )
        if rep:
            self.kept.inc()
            yield {
                **record,
                F.DEDUP: {"exact_hash": tid, "cluster_id": cluster, "representative": True},
            }
        elif role == "exact":
            self.exact.inc()
        else:
            self.near.inc()


class DedupDecisions(beam.PTransform):
    """(uid, record) -> (uid, (cluster_id, representative, role)) for members of
    non-singleton clusters only: the small map the apply step takes as a side input."""

    def __init__(self, cfg: DedupConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, pcoll):
        if not (self.cfg.exact or self.cfg.near):
            return pcoll | "NoDecisions" >> beam.Filter(lambda _: False)
        sigs = pcoll | "Signature" >> beam.ParDo(_Signature(self.cfg))
        content = (
            sigs
            | "KeyByContent" >> beam.Map(lambda s: (s.tid if self.cfg.exact else s.uid, s))
            | "GroupContent" >> beam.GroupByKey()
            | "ContentGroups" >> beam.ParDo(_ContentGroup()).with_outputs("members", main="reps")
        )
        comps = (
            content.reps
            | "BandKeys" >> beam.FlatMap(lambda r: [(b, r[0]) for b in r[2]])
            | "GroupBands" >> beam.GroupByKey()
            | "BandEdges" >> beam.ParDo(_BandEdges())
            | "Components" >> beam.CombineGlobally(_ComponentsFn())
        )
        return (
            content.reps
            | "KeyByComponent"
            >> beam.ParDo(
                _KeyByComponent(),
                comps=beam.pvalue.AsSingleton(comps),
                members=beam.pvalue.AsDict(content.members),
            )
            | "GroupComponents" >> beam.GroupByKey()
            | "Decide" >> beam.ParDo(_Decide(), members=beam.pvalue.AsDict(content.members))
        )


class ApplyDedup(beam.PTransform):
    """(uid, record) -> representatives (records with `dedup` set); tagged `clusters` rows."""

    def __init__(self, decisions):
        super().__init__()
        self.decisions = decisions

    def expand(self, pcoll):
        return pcoll | "Apply" >> beam.ParDo(
            _Apply(), decisions=beam.pvalue.AsDict(self.decisions)
        ).with_outputs("clusters", main="kept")


class Deduplicate(beam.PTransform):
    """Decisions and their application on the same PCollection (one pass)."""

    def __init__(self, cfg: DedupConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, pcoll):
        decisions = pcoll | "Decisions" >> DedupDecisions(self.cfg)
        return pcoll | "ApplyDedup" >> ApplyDedup(decisions)
