"""Corpus-count columns at read time: the views and export fill `corpus_surprisal` and the
count-dependent decisions from the template counts, exactly as a full recomputation in
Python would, and a new batch rewrites no earlier file for them."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines import stats as S
from worldtrace.pipelines.inputs import iter_batches
from worldtrace.pipelines.mask import get_policy, keep_turn
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import connect


def write(store: Store, name: str, records, rows: int = 40) -> None:
    with ShardWriter(store.raw / name, row_group_rows=rows) as w:
        w.write(records)


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


def saved(n: int, start: int = 0):
    """Trajectories sharing the template of "File saved." (and of "a<i> b")."""
    return [
        build("terminal", [(f"save {i}\n", "File saved."), ("ls\n", f"a{i} b")])
        for i in range(start, start + n)
    ]


def expected(store: Store, policy_name: str) -> dict[tuple, tuple]:
    """(trajectory, turn) -> (corpus_surprisal, category, keep, rule, in_loss), computed
    from the stored trajectories the way a full run used to store them."""
    policy = get_policy(policy_name)
    rows = pq.read_table(store.processed / "trajectories").to_pylist()
    counts = Counter(S.template_hash(t["observation"]["text"]) for r in rows for t in r["turns"])
    out = {}
    for r in rows:
        for t in r["turns"]:
            a, o = t["action"]["text"], t["observation"]["text"]
            cs = S.surprisal(counts[S.template_hash(o)])
            d = policy.decide({**t["stats"], "corpus_surprisal": cs}, a, o)
            in_loss = keep_turn(r["trajectory_id"], t["index"], 0, d.keep)
            out[r["trajectory_id"], t["index"]] = (
                round(cs, 9),
                d.category,
                d.keep,
                d.rule,
                in_loss,
            )
    return out


def through_views(store: Store) -> tuple[dict, dict]:
    """The same columns as read through the `turns` and `trajectories` views."""
    con = connect(store)
    turns = {
        (tid, i): (round(cs, 9), cat, keep, rule, in_loss)
        for tid, i, cs, cat, keep, rule, in_loss in con.execute(
            "SELECT trajectory_id, turn_index, corpus_surprisal, category, keep, rule, in_loss "
            "FROM turns"
        ).fetchall()
    }
    traj = {}
    for tid, ts in con.execute("SELECT trajectory_id, turns FROM trajectories").fetchall():
        for t in ts:
            cs = t["stats"]["corpus_surprisal"]
            traj[tid, t["index"]] = (round(cs, 9), t["category"], t["keep"], t["rule"])
    return turns, traj


def exported(store: Store) -> dict:
    """(category, keep) per turn as export reads them."""
    return {
        (r["trajectory_id"], t["index"]): (t["category"], t["keep"])
        for batch in iter_batches(str(store.processed / "trajectories"), 64)
        for r in batch
        for t in r["turns"]
    }


def check_read_time_columns(store: Store, policy: str) -> dict:
    want = expected(store, policy)
    turns, traj = through_views(store)
    assert turns == want
    assert traj == {k: v[:4] for k, v in want.items()}
    assert exported(store) == {k: v[1:3] for k, v in want.items()}
    return want


@pytest.mark.parametrize("policy", ["agentworld-v1", "agentworld-v1+info"])
def test_views_and_export_fill_the_corpus_columns_as_a_full_recomputation(store, policy):
    data, _ = near_duplicate_corpus(n_unique=40, n_groups=4, group_size=3, seed=3, exact_copies=2)
    write(store, "b1", data + saved(12))
    run(cfg(store, policy=policy))
    want = check_read_time_columns(store, policy)
    cats = Counter(v[1] for v in want.values())
    if policy == "agentworld-v1+info":
        assert cats["common"] >= 12  # "File saved." kept 12 times: more than 8
    else:
        assert "common" not in cats
    # the saved turns' template is counted 12 times: log2(16 / 12)
    con = connect(store)
    (cs,) = con.execute(
        "SELECT DISTINCT corpus_surprisal FROM turns t JOIN trajectories r USING (trajectory_id) "
        "WHERE r.turns[1].observation.text = 'File saved.' AND t.turn_index = 0"
    ).fetchone()
    assert cs == pytest.approx(S.surprisal(12))


def test_a_new_batch_sharing_templates_rewrites_no_earlier_file(store):
    """Found: a new batch sharing a rare template rewrote every earlier segment holding
    it (its corpus_surprisal and +info keep were stored), so +1% cost 16% of a rebuild."""
    policy = "agentworld-v1+info"
    write(store, "b1", saved(8), rows=4)  # 2 segments; 8 kept: not yet common (from 9)
    run(cfg(store, policy=policy))
    before = {p.name: p.stat().st_mtime_ns for p in (store.processed / "turns").iterdir()}
    assert "common" not in {v[1] for v in check_read_time_columns(store, policy).values()}
    write(store, "b2", saved(6, start=200), rows=10)
    m = run(cfg(store, policy=policy))
    assert m["counters"].get("segments.rewritten", 0) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (store.processed / "turns").iterdir()}
    assert {k: after[k] for k in before} == before  # earlier files untouched
    want = check_read_time_columns(store, policy)
    assert Counter(v[1] for v in want.values())["common"] == 28  # both templates: 14 kept
    incremental = through_views(store)
    run(cfg(store, policy=policy, rebuild=True))
    assert through_views(store) == incremental


def test_older_layout_needs_a_rebuild(store):
    write(store, "b1", saved(3))
    run(cfg(store))
    manifest = store.processed / "manifest.json"
    m = json.loads(manifest.read_text())
    del m["layout"]
    manifest.write_text(json.dumps(m))
    write(store, "b2", saved(3, start=10))
    with pytest.raises(ValueError, match=r"older version.*--rebuild"):
        run(cfg(store))
    assert run(cfg(store, rebuild=True))["accounting"]["kept"] == 6


def test_explain_shows_the_joined_corpus_surprisal(store):
    from rich.console import Console

    from worldtrace.summary import explanation, print_explanation

    write(store, "b1", saved(4))
    run(cfg(store))
    tid = pq.read_table(store.processed / "trajectories")["trajectory_id"][0].as_py()
    doc = explanation(connect(store), tid)
    assert doc["turns"][0]["stats"]["corpus_surprisal"] == pytest.approx(S.surprisal(4))
    console = Console(record=True, width=200)
    print_explanation(doc, console)
    assert "corpus_surprisal=2.00 bits" in console.export_text()
    # a trajectories file without its turns file (a damaged store): shown as unknown
    for f in (store.processed / "turns").iterdir():
        f.unlink()
    doc = explanation(connect(store), tid)
    assert doc["turns"][0]["stats"]["corpus_surprisal"] is None
    console = Console(record=True, width=200)
    print_explanation(doc, console)
    assert "corpus_surprisal=- bits" in console.export_text()


def test_count_changes_merge_as_a_group_by_over_both():
    """`segments.merged_counts` looks up only a run's keys in the sorted earlier counts;
    it must equal summing both tables by key: keys new, gone (count 0), at either end,
    and earlier counts an older version wrote unsorted."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from worldtrace.pipelines.segments import TEMPLATE_COUNTS, merged_counts

    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(1, 2**63, 5000, dtype=np.uint64))
    before = pa.table({"key": keys, "count": rng.integers(1, 4, len(keys))}, TEMPLATE_COUNTS)
    old = rng.choice(keys, 300, replace=False)
    fresh = np.array([0, 2**64 - 1, *rng.integers(1, 2**63, 200, dtype=np.uint64)], np.uint64)
    dk = np.unique(np.concatenate([old, fresh]))
    delta = pa.table({"key": dk, "count": rng.integers(-3, 3, len(dk))}, TEMPLATE_COUNTS)
    delta = delta.filter(pc.not_equal(delta["count"], 0))
    both = pa.concat_tables([before, delta]).group_by("key").aggregate([("count", "sum")])
    expected = both.rename_columns(["key", "count"]).filter(pc.greater(pc.field("count"), 0))
    expected = expected.sort_by("key")
    assert (delta["count"].to_numpy() < 0).sum() > 0  # some earlier counts fall
    for earlier in (before, before.take(rng.permutation(before.num_rows))):  # sorted, not
        merged = merged_counts(earlier, delta)
        assert merged.equals(expected)
        assert merged.num_rows < before.num_rows + len(fresh)  # some fell to 0 and left
    assert merged_counts(None, delta).equals(
        delta.filter(pc.greater(delta["count"], 0)).sort_by("key")
    )


def test_count_changes_are_summed_per_key_as_arrays():
    """A run's template count changes travel as arrays from each batch to its total
    (`state.summed`): a Counter of every template, merged and turned into rows, cost the
    run's last stages ~0.1 s per 20,000 trajectories. Equal to a Counter: one row per
    key, sorted, zeros left out, keys at both ends of uint64."""
    from collections import Counter

    import numpy as np
    from worldtrace.pipelines.state import summed

    rng = np.random.default_rng(5)
    keys = rng.choice(
        np.array([0, 2**64 - 1, *rng.integers(1, 2**63, 300, dtype=np.uint64)], np.uint64),
        5000,
    )
    counts = rng.integers(-2, 3, len(keys))
    want = Counter()
    for k, c in zip(keys.tolist(), counts.tolist(), strict=True):
        want[k] += c
    got = summed(keys, counts)
    assert got["key"].to_pylist() == sorted(k for k, c in want.items() if c)
    assert dict(zip(got["key"].to_pylist(), got["count"].to_pylist(), strict=True)) == {
        k: c for k, c in want.items() if c
    }
    assert summed(np.zeros(0, np.uint64), np.zeros(0, np.int64)).num_rows == 0
