"""Pass 1 on one unit (read, validate, normalize, filter, score, sketch) and pass 2 on one
segment (finalize), on real files."""

from __future__ import annotations

import gc
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, near_duplicate_corpus, tool
from worldtrace.pipelines import stats as S
from worldtrace.pipelines.dedup import DedupConfig
from worldtrace.pipelines.filters import FilterConfig
from worldtrace.pipelines.mask import AgentWorldV1
from worldtrace.pipelines.normalize import normalize
from worldtrace.pipelines.segments import finalize
from worldtrace.pipelines.transforms import _Pass1
from worldtrace.pipelines.units import (
    MAX_UNIT_ROWS,
    MIN_UNIT_ROWS,
    UID,
    filter_records,
    plan_units,
    process_unit,
    score,
    stem_of,
    unit_rows,
)
from worldtrace.schemas import Observation, ShardWriter


def unit(path, group=None):
    return process_unit(str(path), group, FilterConfig(), DedupConfig(), AgentWorldV1())


def test_read_validates_and_rejects(tmp_path, corpus):
    with ShardWriter(tmp_path / "in") as w:
        w.write(corpus[:3])
    good = unit(w.paths[0], 0)
    assert sorted(good.segment["trajectory_id"].to_pylist()) == sorted(
        t.trajectory_id for t in corpus[:3]
    )
    assert good.counts["read"] == 3 and good.rejects == []
    bad = tmp_path / "in" / "bad.jsonl"
    bad.write_text(corpus[3].to_json().replace('"domain": "', '"domain": "x') + "\n{broken\n")
    res = unit(bad)
    assert [(r["record"], r["stage"], r["reason"].split(":")[0]) for r in res.rejects] == [
        ("line 1", "validate", "domain"),
        ("line 2", "validate", "<json>"),
    ]
    assert res.counts["rejected"] == 2 and res.segment.num_rows == 0


def test_normalize_strips_reasoning_only():
    t = build("mcp", [(tool("get", b=2, a=1), "obs\r\n  kept  "), (tool("get", a=3), "x")])
    t.turns[0].reasoning = "I think..."
    t.turns[0].action.arguments_json = '{"b": 2,   "a": 1}'
    r = normalize(t.to_dict())
    assert [
        (x["reasoning"], x["action"]["arguments_json"], x["observation"]["text"])
        for x in r["turns"]
    ] == [(None, '{"a": 1, "b": 2}', "obs\r\n  kept  "), (None, '{"a": 3}', "x")]


def test_filters_emit_rejects_with_reasons_and_a_new_content_id():
    short = build("terminal", [("ls\n", "a")])
    empty = build("terminal", [("ls\n", "a"), ("\n", "p"), ("pwd\n", "/")])
    counts, rejects = Counter(), []
    items = [("f:row 0", short.to_dict()), ("f:row 1", empty.to_dict())]
    kept = filter_records(items, FilterConfig(), counts, rejects)
    assert [(uid, len(r["turns"])) for uid, r in kept] == [("f:row 1", 2)]
    assert [(r["record"], r["stage"], r["reason"]) for r in rejects] == [
        ("row 0", "filter", "min_turns"),
        ("row 1#turn 1", "turn_filter", "empty_action"),
    ]
    r = kept[0][1]
    assert r["trajectory_id"] != empty.trajectory_id
    assert dict(r["metadata"])["raw_trajectory_id"] == empty.trajectory_id


def test_batch_statistics_equal_the_per_turn_functions():
    t = build("terminal", [("cat a\n", "héllo wörld " * 20), ("ls\n", ""), ("x\n", "ab" * 50)])
    r = normalize(t.to_dict())
    score([r], AgentWorldV1())
    for turn in r["turns"]:
        a, o = turn["action"]["text"], turn["observation"]["text"]
        rs = S.report_stats(a, o)
        st = turn["stats"]
        assert (st["ol"], st["nov"], st["jac"], st["r"]) == (rs.ol, rs.nov, rs.jac, rs.r)
        assert st["byte_entropy"] == pytest.approx(S.byte_entropy(o.encode()))
        assert turn["category"] == AgentWorldV1().decide(st, a, o).category


def segment_of(tmp_path, records):
    with ShardWriter(tmp_path / "in") as w:
        w.write(records)
    return unit(w.paths[0], 0).segment


def test_finalize_drops_duplicates_and_keeps_template_keys(tmp_path):
    saved = [
        build("terminal", [(f"save {i}\n", "File saved."), (f"cat f{i}\n", f"text {i} " * 9)])
        for i in range(4)
    ]
    seg = segment_of(tmp_path, saved)
    uid0 = seg[UID][0].as_py()
    decisions = {uid0: ("cX", False, "near")}
    out = finalize(seg, decisions, AgentWorldV1(), seed=0)
    assert out["trajectories"].num_rows == 3 and out["clusters"].num_rows == 4
    turns = out["turns"].to_pylist()
    assert len(turns) == 6
    # the stored rows carry each turn's template key; the count (and corpus_surprisal)
    # is joined in at read time (test_corpus_counts.py checks the values)
    kept_keys = [k for ks in seg["_templates"].to_pylist()[1:] for k in ks]
    assert [t["_template"] for t in turns] == kept_keys
    assert {t["corpus_surprisal"] for t in turns} == {None}
    assert {t["_alt_from"] for t in turns} == {None}  # agentworld-v1 reads no count
    roles = {r["source"]: r["role"] for r in out["clusters"].to_pylist()}
    assert roles[uid0] == "near" and sorted(roles.values()).count("singleton") == 3
    back = out["trajectories"].to_pylist()
    assert all(r["dedup"]["representative"] for r in back)
    assert back[0]["turns"][0]["stats"]["corpus_surprisal"] is None


def test_nonzero_exit_is_an_error_turn(tmp_path):
    t = build("terminal", [("a\n", Observation("boom", exit_code=2)), ("b\n", "ok")])
    out = finalize(segment_of(tmp_path, [t]), {}, AgentWorldV1(), seed=0)
    assert [(r["turn_index"], r["is_error"]) for r in out["turns"].to_pylist()] == [
        (0, True),
        (1, False),
    ]


def test_units_cut_row_groups_to_spread_a_small_run_and_bound_memory(tmp_path):
    """Five 1,024-row groups on two workers are three units on one worker and two on the
    other: pass 1 took a fifth longer than an even split. Groups are cut into equal
    slices when a run has too few for `UNITS_PER_WORKER` each, and a foreign writer's
    huge group is cut at `MAX_UNIT_ROWS` (a unit's records are in memory at once)."""
    assert unit_rows(5000, 2) == 625  # 10 units: five per worker
    assert unit_rows(20480, 2) == 2560  # enough groups already: none cut
    assert unit_rows(100, 2) == MIN_UNIT_ROWS
    assert unit_rows(10**7, 2) == unit_rows(10**7, 1) == MAX_UNIT_ROWS
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": range(1928)}), path, row_group_size=1024)
    p = str(path)
    assert plan_units(path, 625) == [
        (p, 0, (0, 512), 512),
        (p, 0, (512, 1024), 512),
        (p, 1, (0, 452), 452),
        (p, 1, (452, 904), 452),
    ]
    assert plan_units(path, 2560) == [(p, 0, None, 1024), (p, 1, None, 904)]
    huge = tmp_path / "huge.parquet"
    pq.write_table(pa.table({"x": range(20000)}), huge, row_group_size=20000)
    sizes = [n for *_, n in plan_units(huge, MAX_UNIT_ROWS)]
    assert sum(sizes) == 20000 and max(sizes) <= MAX_UNIT_ROWS and len(sizes) == 3
    stems = {stem_of(*u[:3]) for u in plan_units(path, 625)}
    assert len(stems) == 4 and stem_of(p, 0) == stem_of(p, 0, None)  # uncut: earlier names


def test_a_slice_unit_is_its_rows_of_the_group(tmp_path, corpus):
    with ShardWriter(tmp_path / "in", row_group_rows=len(corpus)) as w:
        w.write(corpus)
    whole = unit(w.paths[0], 0)
    parts = [
        process_unit(str(w.paths[0]), 0, FilterConfig(), DedupConfig(), AgentWorldV1(), rows)
        for rows in [(0, 15), (15, len(corpus))]
    ]
    assert pa.concat_tables([x.segment for x in parts]).equals(whole.segment)
    assert len({x.stem for x in parts} | {whole.stem}) == 3


def test_pass1_on_a_unit_triggers_no_garbage_collection(tmp_path):
    """Found: the collections a unit's allocations triggered walked its records again and
    again (a fresh worker's first unit: 0.45 s instead of 0.37 for 800 records, a 1%
    increment's whole pass 1). Pass 1 pauses the collector per unit."""
    data, _ = near_duplicate_corpus(n_unique=300, n_groups=5, group_size=3, seed=1)
    with ShardWriter(tmp_path / "in", row_group_rows=len(data)) as w:
        w.write(data)
    collections: list[int] = []

    def seen(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        unit(w.paths[0], 0)  # the same work with the collector on: it does run
        assert collections
        collections.clear()
        stage = _Pass1(str(tmp_path / "out"), FilterConfig(), DedupConfig(), AgentWorldV1())
        out = list(stage.process((str(w.paths[0]), 0, None)))
    finally:
        gc.callbacks.remove(seen)
    assert collections == [] and gc.isenabled()
    assert out and (tmp_path / "out" / "_index" / "segments").exists()
