"""Review of incremental `process` (1203b): with `dedup.exact=false` a touched cluster's
members stay in the cluster state (F1), and a rebuild orders records by the arrival the
index recorded, not by raw files' current mtimes (F2)."""

from __future__ import annotations

import json
import os
import random
import shutil

import numpy as np
import pyarrow.parquet as pq
from worldtrace.collectors.synthetic import build
from worldtrace.pipelines import segments
from worldtrace.pipelines.dedup import DedupConfig, Sig, rank_of, sig_table
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.state import changed_stems, key_deltas, member_rows
from worldtrace.schemas import ShardWriter, Store

VOCAB = [f"w{i}" for i in range(5000)]
P1 = [(0, 5), (2, 10), (4, 15), (6, 20)]
P2 = [(1, 5), (3, 10), (5, 15), (7, 20)]
"""Word positions (turn, word) a variant replaces: P1 and P2 variants of one base are
each near it, and twice as far from each other."""


def base(tag: str, turns: int = 8) -> list[tuple[str, str]]:
    rng = random.Random(tag)
    return [
        (f"cat {tag}_{i}.txt\n", " ".join(rng.choice(VOCAB) for _ in range(30)))
        for i in range(turns)
    ]


def variant(pairs: list[tuple[str, str]], positions, salt: str) -> list[tuple[str, str]]:
    out = [list(p) for p in pairs]
    for t, w in positions:
        words = out[t][1].split(" ")
        words[w] = f"x{salt}_{t}_{w}"
        out[t][1] = " ".join(words)
    return [(a, o) for a, o in out]


def traj(pairs, status: str = "success", episode: str = "ep"):
    t = build("terminal", pairs, episode=episode)
    t.outcome.status = status
    return t.with_id()


def write(store: Store, name: str, records) -> None:
    with ShardWriter(store.raw / name, row_group_rows=40) as w:
        w.write(records)


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


def rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def snapshot(store: Store) -> dict[str, list]:
    """The processed tables, the template counts and the cluster state as sorted rows
    (the state without its units' names, which a rebuild may cut otherwise)."""
    out = {}
    for name in ("trajectories", "turns", "clusters", "rejects"):
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows(store.processed / name))  # fmt: skip
    index = store.processed / segments.INDEX
    out["templates"] = sorted(
        json.dumps(r, sort_keys=True) for r in rows(index / segments.TEMPLATES_FILE)
    )
    out["members"] = sorted(
        json.dumps({**r, "stem": None}, sort_keys=True, default=str)
        for r in rows(index / segments.MEMBERS_FILE)
    )
    return out


def rebuilt(store: Store, where, **kw) -> Store:
    """A copy of the store (`cp -a`: times kept) processed with `--rebuild`."""
    copy = Store.at(where)
    shutil.copytree(store.root, copy.root)
    run(cfg(copy, rebuild=True, **kw))
    return copy


def assert_a_rebuild_agrees(store: Store, where, **kw) -> None:
    incremental = snapshot(store)
    again = snapshot(rebuilt(store, where, **kw))
    for name in incremental:
        assert incremental[name] == again[name], name


def kept(store: Store) -> set[str]:
    return set(pq.read_table(store.processed / "trajectories")["trajectory_id"].to_pylist())


def by_tid(store: Store) -> dict[str, dict]:
    return {r["trajectory_id"]: r for r in rows(store.processed / "clusters")}


def estimated_jaccard(store: Store, x, y) -> float:
    """Dedup's estimate for two processed records (the share of equal MinHash values)."""
    t = pq.read_table(store.processed / segments.INDEX / segments.SEGMENTS)
    sig = dict(zip(t["trajectory_id"].to_pylist(), t["_sig"].to_pylist(), strict=True))
    a, b = (np.frombuffer(sig[r.trajectory_id], np.uint32) for r in (x, y))
    return float((a == b).mean())


# F1 ------------------------------------------------------------------------------------


def test_exact_false_a_touched_cluster_keeps_the_members_no_new_record_reaches(store, tmp_path):
    """Found: with `dedup.exact=false` the earlier clusters seeded dedup with edges from
    trajectory ids to the representative's uid, while its nodes are uids. A member of a
    cluster a new record joined that no new record came near (a2) got no decision: the
    cluster state lost it and the template counts counted it as kept, while the tables
    kept it `near`; the next full rewrite of its segment (b2) then kept it, a duplicate
    of the new representative in the training set."""
    no_exact = {"dedup": DedupConfig(exact=False)}
    A, C = base("A"), base("C")
    a, a2 = traj(A, "failure", "a"), traj(variant(A, P1, "a2"), "failure", "a2")
    c = traj(C, episode="c")
    others = [traj(base(f"O{i}"), episode=f"o{i}") for i in range(3)]
    write(store, "b0", [a, a2, c, *others])  # one unit: one segment
    run(cfg(store, **no_exact))
    assert {by_tid(store)[t.trajectory_id]["role"] for t in (a, a2)} == {"representative", "near"}
    # a success near a but not near a2: it becomes the representative of a's cluster
    late = traj(variant(A, P2, "late"), "success", "late")
    write(store, "b1", [late])
    run(cfg(store, **no_exact))
    assert estimated_jaccard(store, late, a) >= 0.8 > estimated_jaccard(store, late, a2)
    after = by_tid(store)
    [late_uid] = [r["source"] for t, r in after.items() if t == late.trajectory_id]
    for t in (a, a2, late):
        assert after[t.trajectory_id]["cluster_id"] == f"c{late_uid}"
    state = rows(store.processed / segments.INDEX / segments.MEMBERS_FILE)
    assert sorted(r["tid"] for r in state) == sorted(t.trajectory_id for t in (a, a2, late))
    assert_a_rebuild_agrees(store, tmp_path / "rebuild-b1", **no_exact)
    # a better (9-turn) near-duplicate of c: b0's segment, a2's, is written again whole
    c9 = traj([*C, ("cat C_extra.txt\n", "one more line")], episode="c9")
    write(store, "b2", [c9])
    m = run(cfg(store, **no_exact))
    assert m["counters"]["segments.rewritten"] == 1
    assert a2.trajectory_id not in kept(store)
    assert kept(store) == {late.trajectory_id, c9.trajectory_id} | {t.trajectory_id for t in others}
    assert m["accounting"]["kept"] == 5 and m["accounting"]["duplicates"] == 3
    assert_a_rebuild_agrees(store, tmp_path / "rebuild-b2", **no_exact)


def test_an_earlier_record_without_a_decision_keeps_its_earlier_one():
    """The state's reading of "no decision this run" for an earlier record is the one
    pass 2 has (`transforms._Finalize`: this run's decisions, then the earlier state):
    its earlier decision. It was a kept singleton here: the member left the cluster
    state, its templates were counted as kept, and its segment was rewritten."""
    rank = rank_of(True, 8, None, "t", "", "u")
    cluster = "crep"
    was = {
        "rep": (cluster, True, "representative"),
        "m": (cluster, False, "near"),
        "s": ("cs", True, "singleton"),
    }
    sigs = [
        Sig(u, u, rank, f"seg-{u}", None, (), (k,), was.get(u))
        for u, k in (("rep", 1), ("m", 2), ("s", 3), ("new", 4))
    ]
    records = sig_table(sigs).drop_columns(["sig", "bands"])
    decisions = {"rep": was["rep"], "new": (cluster, False, "near")}  # none for m and s
    deltas = key_deltas(records, decisions).to_pylist()
    assert deltas == []  # m stays a duplicate, s kept, new a duplicate: no count moves
    members = {r["uid"]: r for r in member_rows(records, decisions).to_pylist()}
    assert sorted(members) == ["m", "new", "rep"]
    assert (members["m"]["cluster_id"], members["m"]["representative"], members["m"]["role"]) == (
        cluster,
        False,
        "near",
    )
    assert changed_stems(records, decisions) == (set(), set())


# F2 ------------------------------------------------------------------------------------


def test_a_rebuild_orders_records_by_their_recorded_arrival_not_by_touched_mtimes(store, tmp_path):
    """Found: a record's arrival (the representative's tie-break among equals: no
    `started_at`, as every import) is its raw file's mtime when first processed, but a
    rebuild took the files' current mtimes. After a `touch` (or a restore, an rsync
    without times) an earlier file's records arrived after a later file's, and the
    rebuild kept other content than the incremental runs did. A file the index recorded
    with the same sha256 arrives when it first did."""
    A = base("A")
    first, again = traj(A, episode="first"), traj(variant(A, P1, "again"), episode="again")
    write(store, "b0", [first, traj(base("B"), episode="b")])
    [b0] = (store.raw / "b0").glob("*.parquet")
    t0 = b0.stat().st_mtime_ns
    run(cfg(store))
    write(store, "b1", [again])  # an equal near-duplicate, later
    [b1] = (store.raw / "b1").glob("*.parquet")
    os.utime(b1, ns=(t0 + 10**9, t0 + 10**9))
    run(cfg(store))
    assert by_tid(store)[again.trajectory_id]["role"] == "near"
    os.utime(b0, ns=(t0 + 2 * 10**9, t0 + 2 * 10**9))  # touched: after b1 now
    m = run(cfg(store))
    assert m["counters"]["read"] == 0
    assert first.trajectory_id in kept(store) and again.trajectory_id not in kept(store)
    copy = rebuilt(store, tmp_path / "rebuild")
    assert snapshot(copy) == snapshot(store)
    # the rebuild records the first arrival too: rebuilt again after another touch, or
    # moved elsewhere (`cp -a`), the same
    os.utime(copy.raw / b0.relative_to(store.raw), ns=(t0 + 3 * 10**9,) * 2)
    assert run(cfg(copy))["counters"]["read"] == 0
    run(cfg(copy, rebuild=True))
    assert snapshot(copy) == snapshot(store)
    assert snapshot(rebuilt(copy, tmp_path / "moved" / "rebuild")) == snapshot(store)
    shards = pq.read_table(copy.processed / segments.INDEX / segments.SHARDS_FILE)
    assert "arrival_ns" in shards.schema.names
    assert sorted(shards["arrival_ns"].to_pylist()) == [t0, t0 + 10**9]


def test_a_new_file_arrives_at_its_mtime_as_the_index_records_it(store):
    """The index records each file's arrival (its mtime when first processed) beside the
    mtime it has now: a touch moves the one, never the other."""
    write(store, "b0", [traj(base("A"), episode="a")])
    [b0] = (store.raw / "b0").glob("*.parquet")
    t0 = b0.stat().st_mtime_ns
    run(cfg(store))
    os.utime(b0, ns=(t0 + 10**9, t0 + 10**9))
    run(cfg(store))
    [row] = rows(store.processed / segments.INDEX / segments.SHARDS_FILE)
    assert (row["mtime_ns"], row["arrival_ns"]) == (t0 + 10**9, t0)
    [arrival] = pq.read_table(store.processed / segments.INDEX / segments.SEGMENTS)[
        "_arrival"
    ].to_pylist()
    assert arrival.startswith(f"{t0:020d}-")
