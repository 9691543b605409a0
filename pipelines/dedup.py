"""Exact and near-duplicate decisions over MinHash LSH, incremental-ready.

What moves are *batches*: Arrow tables of `SIG_SCHEMA` rows (ids, rank, band keys,
template keys; the 512-byte signatures stay on disk, in pass 1's probe files and
segments, and are looked up for the ends of candidate pairs only, `SigSource`), one per
unit of pass 1, regrouped by hash into `PARTITIONS` shuffle keys at each step, so Beam's
per-element cost is paid per batch, not per record. Records with the same content
(content key, `tid`: the trajectory id of the content in NFC, `hashing.content_ids`)
form one exact group whose best member stands for it in LSH. Records
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

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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

    def __post_init__(self) -> None:
        """Ranges, checked when a config is made (`--set`/`--config` name the key)."""
        from worldtrace.schemas.config import check

        check(self, "num_perm", self.num_perm >= 1, "a positive integer")
        check(self, "threshold", 0 < self.threshold <= 1, "a number in (0, 1]")
        for name in ("bands", "rows"):
            check(self, name, getattr(self, name) >= 0, "0 (set from threshold) or more")
        if bool(self.bands) != bool(self.rows):
            name, other = ("bands", "rows") if self.bands else ("rows", "bands")
            check(self, name, False, f"{other} set too (both 0: set from threshold)")
        check(
            self,
            "rows",
            self.bands * self.rows <= self.num_perm,
            f"bands x rows ({self.bands} x {self.rows}) at most num_perm ({self.num_perm})",
        )
        check(self, "shingle_words", self.shingle_words >= 1, "a positive integer")
        check(self, "seed", 0 <= self.seed < 1 << 64, "an integer in [0, 2^64)")

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
PARTITIONS = 16
"""Shuffle keys of each dedup step on a runner whose parallelism is unknown (a portable
one): enough to spread the work over its workers, few enough that Beam moves a handful
of batches per unit instead of one element per record. The local runner uses one per
worker process (`process.dedup_partitions`; 1 in-process): each key costs every step
a few milliseconds."""
SMALL_BUCKET = 32
"""Buckets of at most this many members are verified pair by pair, their pairs gathered
across buckets into batches of `VERIFY_PAIRS` (one numpy comparison a batch: most
buckets are 2-3 records); a larger bucket is compared member against member, skipping
pairs already joined (`_Verify`), so its cost in memory is its signatures, not k² / 2
pairs."""
VERIFY_PAIRS = 16_384
"""Candidate pairs verified in one batch: both ends' signatures, 16 MB."""
SIG_SCHEMA = pa.schema(
    [
        pa.field("uid", pa.string()),
        pa.field("tid", pa.string()),
        pa.field("failed", pa.bool_()),
        pa.field("turns", pa.int64()),
        pa.field("started", pa.int64()),
        pa.field("arrival", pa.string()),
        pa.field("stem", pa.string()),
        pa.field("sig", pa.binary()),
        pa.field("bands", pa.list_(pa.uint64())),
        pa.field("keys", pa.list_(pa.uint64())),
        pa.field("was_cluster", pa.string()),
        pa.field("was_rep", pa.bool_()),
        pa.field("was_role", pa.string()),
    ]
)
"""A batch of what dedup knows of records: `Sig` as columns (`was_*` null: new record)."""
RANK = [("failed", "ascending"), ("turns", "descending"), ("started", "ascending"),
        ("arrival", "ascending"), ("tid", "ascending"), ("uid", "ascending")]  # fmt: skip
"""`rank_of` as a sort order (Arrow puts a null `started` last, as `rank_of` does)."""
RANK_COLUMNS = ["failed", "turns", "started", "tid", "arrival", "uid"]
"""`rank_of`'s arguments."""


def rank_of(
    failed: bool, turns: int, started: int | None, tid: str, arrival: str | None, uid: str
) -> tuple:
    """Representative preference: success first, more turns, then the first collected
    (`started_at`, unknown last), then the first to arrive (`units.arrival_key`: its raw
    file's time, name and row), then stable ids. Preferring the first collected keeps a
    cluster's representative when a later re-run of the same task joins it, and the first
    to arrive keeps it when the same record comes again (an import of a copy of a file;
    imports have no `started_at`, and exact copies share their id, so the tie fell to
    the origin's name), so an incremental run leaves earlier files alone and an exported
    training set stays stable as collection goes on; both are facts of the raw data, so a
    rebuild chooses the same."""
    return (failed, -turns, started is None, started or 0, arrival or "", tid, uid)


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
    """Union-find per bundle of edge lists; forests merge by re-linking their parent
    pointers."""

    def create_accumulator(self) -> dict[str, str]:
        return {}

    def add_input(self, acc, edges):
        uf = UnionFind()
        uf.parent = acc
        for a, b in edges:
            uf.union(a, b)
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


def sig_table(sigs: list[Sig]) -> pa.Table:
    """A batch from `Sig` tuples (tests and small inputs)."""
    rows = []
    for s in sigs:
        failed, neg_turns, unknown, started, arrival, _, _ = s.rank
        was = s.was or (None, None, None)
        rows.append(
            {"uid": s.uid, "tid": s.tid, "failed": failed, "turns": -neg_turns,
             "started": None if unknown else started, "arrival": arrival,
             "stem": s.stem, "sig": s.sig, "bands": list(s.bands), "keys": list(s.keys),
             "was_cluster": was[0], "was_rep": was[1], "was_role": was[2]}
        )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=SIG_SCHEMA)


def part_of(text: str, partitions: int = PARTITIONS) -> int:
    """A string's shuffle partition (stable across processes, unlike `hash`)."""
    return zlib.crc32(text.encode()) % partitions


def split(t: pa.Table, parts: np.ndarray) -> list[tuple[int, pa.Table]]:
    """(partition, rows of `t` in it) for every partition that has rows."""
    return [(int(p), t.filter(pa.array(parts == p))) for p in np.unique(parts)]


def content_column(exact: bool) -> str:
    """The column that keys a record's content group: its content key (`tid`, the
    trajectory id of its content in NFC) with exact dedup, else its own uid."""
    return "tid" if exact else "uid"


def _content_key(t: pa.Table, exact: bool) -> pa.Array:
    return t[content_column(exact)]


class _ByContent(beam.DoFn):
    """A batch -> its rows by partition of their content key (uid without exact dedup)."""

    def __init__(self, exact: bool, partitions: int = PARTITIONS):
        self.exact, self.partitions = exact, partitions

    def process(self, t: pa.Table):
        keys = _content_key(t, self.exact).to_pylist()
        parts = (part_of(k, self.partitions) for k in keys)
        yield from split(t, np.fromiter(parts, np.int64, len(keys)))


class _ContentGroups(beam.DoFn):
    """One partition: every record once (`records`), and each content group's best
    member standing for it in LSH (main output, a batch of representatives: `key`, rank,
    the band keys of the group's first sketched member and its signature where the batch
    carried it, `new`, and the uids of a group of several in rank order, `members`: they
    travel with their representative rather than as a map every worker is sent)."""

    def __init__(self, exact: bool):
        self.exact = exact

    def process(self, item: tuple[int, Iterable[pa.Table]]):
        t = pa.concat_tables(list(item[1])).combine_chunks()
        # sketched: has band keys (or, in memory, a signature); an earlier cluster's
        # state has neither. An earlier record may arrive twice (state + match): keep
        # the sketched row
        sketched = pc.or_(t["sig"].is_valid(), pc.greater(pc.list_value_length(t["bands"]), 0))
        t = t.append_column("sketched", sketched)
        t = t.sort_by([("uid", "ascending"), ("sketched", "descending")])
        t = t.take(pa.array(run_starts(t["uid"])))
        earlier = t.num_rows - t["was_role"].null_count
        if earlier:
            Metrics.counter(NS, "dedup.earlier").inc(earlier)
        # what the run's state needs of each record: not its band keys (nor a signature)
        yield beam.pvalue.TaggedOutput("records", t.drop_columns(["sig", "bands", "sketched"]))
        t = t.append_column("key", _content_key(t, self.exact))
        t = t.append_column("arrival0", pc.fill_null(t["arrival"], ""))
        t = t.sort_by(
            [("key", "ascending"), *((n if n != "arrival" else "arrival0", o) for n, o in RANK)]
        )
        starts = run_starts(t["key"])
        size = np.diff(np.append(starts, t.num_rows))
        rows = np.arange(t.num_rows)
        signed = t["sketched"].to_numpy(zero_copy_only=False)
        first_signed = np.minimum.reduceat(np.where(signed, rows, t.num_rows), starts)
        sketches = np.where(first_signed < t.num_rows, first_signed, starts)
        new = t["was_role"].is_null().to_numpy(zero_copy_only=False)
        news = np.logical_or.reduceat(new, starts) if len(starts) else new
        members: list[list[str] | None] = [None] * len(starts)
        for g in np.flatnonzero(size > 1).tolist():  # groups of several, in rank order
            members[g] = t["uid"][int(starts[g]) : int(starts[g] + size[g])].to_pylist()
        rank = t.select(["key", *RANK_COLUMNS]).take(pa.array(starts))
        sketch = t.select(["bands", "sig"]).take(pa.array(sketches, pa.int64()))
        yield pa.Table.from_arrays(
            [*rank.columns, *sketch.columns, pa.array(news, pa.bool_()),
             pa.array(members, pa.list_(pa.string()))],
            names=[*rank.column_names, "bands", "sig", "new", "members"],
        )  # fmt: skip


def run_starts(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Index of the first row of each run of equal values in a sorted column."""
    a = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(a) == 0:
        return np.zeros(0, np.int64)
    differs = pc.not_equal(a[1:], a[:-1]).to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.flatnonzero(differs) + 1]).astype(np.int64)


def rank_rows(t: pa.Table) -> list[tuple[str, tuple]]:
    """(content key, rank) of every representative row."""
    cols = [t[n].to_pylist() for n in ("key", *RANK_COLUMNS)]
    return [(k, rank_of(*r)) for k, *r in zip(*cols, strict=True)]


class _BandEntries(beam.DoFn):
    """Representatives -> (partition, rows of band, band key, content key, new, and the
    signature where the batch carries it: an earlier record read back) by band key."""

    def __init__(self, partitions: int = PARTITIONS):
        self.partitions = partitions

    def process(self, t: pa.Table):
        if not t.num_rows:
            return
        bands = t["bands"]
        lengths = pc.list_value_length(bands).to_numpy(zero_copy_only=False)
        keys = pc.list_flatten(bands).to_numpy(zero_copy_only=False).astype(np.uint64)
        band = np.concatenate([np.arange(n) for n in lengths]) if len(keys) else keys
        parent = np.repeat(np.arange(t.num_rows), lengths)
        at = pa.array(parent)
        entries = pa.table(
            {"band": pa.array(band, pa.int64()), "bkey": pa.array(keys, pa.uint64()),
             "key": t["key"].take(at), "new": t["new"].take(at), "sig": t["sig"].take(at)}
        )  # fmt: skip
        parts = (keys ^ band.astype(np.uint64)) % np.uint64(self.partitions)
        yield from split(entries, parts.astype(np.int64))


class _Candidates(beam.DoFn):
    """Buckets of one partition that hold a new record (buckets of earlier records only
    were judged before), with the signatures their entries carry: ([(keys, new flags)],
    {key: signature}). Buckets, not pairs: a bucket of k near-duplicates is k² / 2 pairs
    (900 copies of one task's runs took 2.7 GB in pairs and their stacked signatures,
    6,000 over 16 GB; hunt 1206w), and `_Verify` compares its members without them."""

    def process(self, item: tuple[int, Iterable[pa.Table]]):
        t = pa.concat_tables(list(item[1]))
        t = t.sort_by([("band", "ascending"), ("bkey", "ascending"), ("key", "ascending")])
        band = t["band"].to_numpy()
        bkey = t["bkey"].to_numpy()
        same = (band[1:] == band[:-1]) & (bkey[1:] == bkey[:-1])
        if not same.any():
            return
        keys, new = t["key"].to_pylist(), t["new"].to_pylist()
        buckets = []
        starts = np.flatnonzero(np.concatenate([[True], ~same]))
        ends = np.append(starts[1:], len(keys))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            if e - s < 2 or not any(new[s:e]):
                continue
            members: dict[str, bool] = {}
            for k, n in zip(keys[s:e], new[s:e], strict=True):
                members[k] = members.get(k, False) or n
            if len(members) > 1:
                buckets.append((list(members), list(members.values())))
        if buckets:
            wanted = {k for bucket, _ in buckets for k in bucket}
            carried = t.filter(t["sig"].is_valid())
            sigs = zip(carried["key"].to_pylist(), carried["sig"].to_pylist(), strict=True)
            yield buckets, {k: v for k, v in sigs if k in wanted}


class Merge(beam.CombineFn):
    """Merge containers (sets and dicts update, Counters add, lists extend), or tuples of
    them field by field: the incremental state's probe keys, touched clusters and count
    changes (`state.py`)."""

    def __init__(self, *empties):
        self.empties = empties

    def create_accumulator(self):
        acc = tuple(e() for e in self.empties)
        return acc if len(acc) > 1 else acc[0]

    def add_input(self, acc, item):
        pairs = zip(acc, item, strict=True) if len(self.empties) > 1 else [(acc, item)]
        for a, x in pairs:
            (a.extend if isinstance(a, list) else a.update)(x)
        return acc

    def merge_accumulators(self, accs):
        out = self.create_accumulator()
        for a in accs:
            self.add_input(out, a)
        return out

    def extract_output(self, acc):
        return acc


SigSource = Callable[[list[str]], dict[str, bytes]]
"""Content keys -> their MinHash signatures, for the candidate ends no batch carried
(`segments.ProbeSigs`: this run's probe files, then the earlier runs')."""


class _Spanning:
    """One partition's verified edges as a spanning forest (`_Verify`): an edge is kept
    only when it joins two components, so a cluster of k costs k - 1 edges."""

    def __init__(self, sigs: dict[str, bytes], threshold: float) -> None:
        self.sigs, self.threshold = sigs, threshold
        self.forest, self.edges, self.rejected = UnionFind(), [], 0

    def join(self, a: str, b: str) -> None:
        if self.forest.find(a) != self.forest.find(b):
            self.forest.union(a, b)
            self.edges.append((a, b))

    def pairs(self, pairs: list[tuple[str, str]]) -> None:
        """Verify pairs in one comparison (pairs of small buckets, `VERIFY_PAIRS`)."""
        if not pairs:
            return
        a = np.stack([np.frombuffer(self.sigs[x], np.uint32) for x, _ in pairs])
        b = np.stack([np.frombuffer(self.sigs[y], np.uint32) for _, y in pairs])
        strong = np.count_nonzero(a == b, axis=1) >= self.threshold * a.shape[1]
        self.rejected += int(len(pairs) - strong.sum())
        for i in np.flatnonzero(strong).tolist():
            self.join(*pairs[i])

    def bucket(self, keys: list[str], new: list[bool]) -> None:
        """A large bucket member against member, skipping pairs already joined."""
        roots: dict[str, int] = {}
        label = np.array([roots.setdefault(self.forest.find(k), len(roots)) for k in keys])
        if len(roots) == 1:
            return  # joined in another band
        m = np.stack([np.frombuffer(self.sigs[k], np.uint32) for k in keys])
        fresh = np.array(new, bool)
        least = self.threshold * m.shape[1]
        for i in range(len(keys) - 1):
            open_ = (label[i + 1 :] != label[i]) & (fresh[i] | fresh[i + 1 :])
            if not open_.any():
                continue
            js = np.flatnonzero(open_) + i + 1
            strong = np.count_nonzero(m[js] == m[i], axis=1) >= least
            self.rejected += int(len(js) - strong.sum())
            for j in js[strong].tolist():
                if label[j] != label[i]:
                    label[label == label[j]] = label[i]
                    self.join(keys[i], keys[j])


class _Verify(beam.DoFn):
    """A partition's buckets -> edges between members whose signatures estimate a
    Jaccard >= the threshold (only pairs with a new member), as a spanning forest whose
    components equal those of every verified pair (`_Spanning`). Small buckets are
    verified in batches of pairs, a large one member against member (`SMALL_BUCKET`).
    Runs in the candidates' stage: the signatures a batch did not carry are looked up
    (`source`) rather than gathered from every unit through four more stage barriers."""

    def __init__(self, threshold: float, source: SigSource | None = None) -> None:
        self.threshold, self.source = threshold, source
        self.weak = Metrics.counter(NS, "dedup.candidates_rejected")

    def process(self, item: tuple[list[tuple[list[str], list[bool]]], dict[str, bytes]]):
        buckets, sigs = item
        need = sorted({k for bucket, _ in buckets for k in bucket} - sigs.keys())
        if need:
            if self.source is None:
                raise ValueError(f"signatures of {len(need)} candidates: none carried or readable")
            sigs = {**sigs, **self.source(need)}
        forest = _Spanning(sigs, self.threshold)
        pairs: list[tuple[str, str]] = []
        for keys, new in buckets:
            if len(keys) > SMALL_BUCKET:
                forest.bucket(keys, new)
                continue
            for i in range(len(keys) - 1):
                a, a_new = keys[i], new[i]
                pairs += [(a, keys[j]) for j in range(i + 1, len(keys)) if a_new or new[j]]
            if len(pairs) >= VERIFY_PAIRS:
                forest.pairs(pairs)
                pairs = []
        forest.pairs(pairs)
        if forest.rejected:
            self.weak.inc(forest.rejected)
        if forest.edges:
            yield forest.edges


def _seeds(t: pa.Table, exact: bool) -> list[tuple[str, str]]:
    """Edges from an earlier run's clusters: each member's node to its cluster's root.
    Nodes are content keys (`content_column`: uids without exact dedup), and a cluster is
    named `c` + its representative's key: seeded by trajectory id without exact dedup,
    the members were no nodes, and one no new record came near got no decision."""
    role = t["was_role"]
    t = t.filter(pc.and_(role.is_valid(), pc.not_equal(pc.fill_null(role, ""), "singleton")))
    keys = t[content_column(exact)].to_pylist()
    return [(k, c[1:]) for k, c in zip(keys, t["was_cluster"].to_pylist(), strict=True)]


class _ByComponent(beam.DoFn):
    """Representatives in a component or a content group of several -> by partition of
    their component root: (root, content key, rank, members or None)."""

    def __init__(self, partitions: int = PARTITIONS):
        self.partitions = partitions

    def process(self, t: pa.Table, comps: dict[str, str] | None = None):
        comps = comps or {}
        # singletons need no decision: only these rows become Python objects
        linked = pc.is_in(t["key"], pa.array(list(comps), pa.string()))
        t = t.filter(pc.or_(linked, t["members"].is_valid()))
        out: dict[int, list] = {}
        groups = t["members"].to_pylist()
        for (key, rank), members in zip(rank_rows(t), groups, strict=True):
            root = comps.get(key, key)
            out.setdefault(part_of(root, self.partitions), []).append((root, key, rank, members))
        yield from out.items()


class _Decide(beam.DoFn):
    """Per component: cluster id, representative content, and each member's role."""

    def process(self, item):
        by_root: dict[str, list] = {}
        for rows in item[1]:
            for root, key, rank, members in rows:
                by_root.setdefault(root, []).append((key, rank, members))
        for keys in by_root.values():
            keys.sort(key=lambda x: x[1])
            rep = keys[0][0]
            # named after its representative: a singleton that gains members keeps its id,
            # so an incremental run rewrites only its role (`state.changed_stems`)
            cluster = f"c{rep}"
            for key, rank, members in keys:
                for n, uid in enumerate(members or [rank[-1]]):
                    if key == rep and n == 0:
                        yield uid, (cluster, True, "representative")
                    else:
                        yield uid, (cluster, False, "exact" if n > 0 else "near")


class DedupDecisions(beam.PTransform):
    """Sig batches (new, plus the earlier records and clusters they reach) -> `decisions`:
    (uid, Decision) for every member of a non-singleton cluster among them (the small map
    pass 2 takes as a side input), and `records`: the batches with every record once
    (without band keys). `sigs` reads the signatures a batch does not carry (null `sig`).

    The global combines run `without_defaults` and their side inputs carry the value for
    an empty input (`default_value`): a combine's own default costs Beam a further stage
    barrier, paid by every run however small. Earlier clusters seed edges only when
    earlier records can come in (`earlier`): the Flatten of those with the near edges,
    inputs from two stages, is a stage of its own."""

    def __init__(
        self,
        cfg: DedupConfig,
        sigs: SigSource | None = None,
        partitions: int = PARTITIONS,
        earlier: bool = True,
    ):
        super().__init__()
        self.cfg, self.sigs, self.partitions = cfg, sigs, partitions
        self.earlier = earlier

    def expand(self, batches):
        cfg = self.cfg
        content = (
            batches
            | "ByContent" >> beam.ParDo(_ByContent(cfg.exact, self.partitions))
            | "GroupContent" >> beam.GroupByKey()
            | "ContentGroups"
            >> beam.ParDo(_ContentGroups(cfg.exact)).with_outputs("records", main="reps")
        )
        if not (cfg.exact or cfg.near):
            none = content.reps | "NoDecisions" >> beam.Filter(lambda _: False)
            return {"decisions": none, "records": content.records}
        edges = self._near(content.reps) if cfg.near else []
        if self.earlier:
            edges.append(content.records | "SeedEdges" >> beam.Map(_seeds, cfg.exact))
        side = {}
        if edges:  # else no record has an edge: exact groups only
            one = edges[0] if len(edges) == 1 else tuple(edges) | "AllEdges" >> beam.Flatten()
            comps = one | "Components" >> beam.CombineGlobally(_Forest()).without_defaults()
            side["comps"] = beam.pvalue.AsSingleton(comps, default_value={})
        decisions = (
            content.reps
            | "ByComponent" >> beam.ParDo(_ByComponent(self.partitions), **side)
            | "GroupComponents" >> beam.GroupByKey()
            | "Decide" >> beam.ParDo(_Decide())
        )
        return {"decisions": decisions, "records": content.records}

    def _near(self, reps) -> list:
        """Verified near-duplicate edges between representatives (LSH buckets)."""
        return [
            reps
            | "BandEntries" >> beam.ParDo(_BandEntries(self.partitions))
            | "GroupBands" >> beam.GroupByKey()
            | "Candidates" >> beam.ParDo(_Candidates())
            | "Verify" >> beam.ParDo(_Verify(self.cfg.threshold, self.sigs))
        ]
