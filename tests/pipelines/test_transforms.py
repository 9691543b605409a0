"""Each stage as a Beam transform, on TestPipeline with assert_that."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to
from worldtrace.collectors.synthetic import build, tool
from worldtrace.pipelines.filters import FilterConfig
from worldtrace.pipelines.mask import AgentWorldV1
from worldtrace.pipelines.transforms import (
    REJECTS,
    ApplyFilters,
    Normalize,
    ReadTrajectories,
    ScoreTurns,
)
from worldtrace.schemas import Observation, ShardWriter


def test_read_validates_and_rejects(tmp_path, corpus):
    with ShardWriter(tmp_path / "in") as w:
        w.write(corpus[:3])
    bad = tmp_path / "in" / "bad.jsonl"
    d = corpus[3].to_dict()
    bad.write_text(corpus[3].to_json().replace('"domain": "', '"domain": "x') + "\n{broken\n")
    with BeamPipeline() as p:
        out = p | beam.Create([str(w.paths[0]), str(bad)]) | ReadTrajectories()
        assert_that(
            out.valid | beam.MapTuple(lambda uid, r: r["trajectory_id"]),
            equal_to([t.trajectory_id for t in corpus[:3]]),
        )
        assert_that(
            out[REJECTS] | beam.Map(lambda r: (r["record"], r["stage"], r["reason"].split(":")[0])),
            equal_to([("line 1", "validate", "domain"), ("line 2", "validate", "<json>")]),
            label="rejects",
        )
    assert d  # the fixture record itself was valid


def test_normalize_strips_reasoning_only():
    t = build("mcp", [(tool("get", b=2, a=1), "obs\r\n  kept  "), (tool("get", a=3), "x")])
    t.turns[0].reasoning = "I think..."
    t.turns[0].action.arguments_json = '{"b": 2,   "a": 1}'
    with BeamPipeline() as p:
        out = p | beam.Create([("u", t.to_dict())]) | Normalize()
        assert_that(
            out
            | beam.MapTuple(
                lambda uid, r: [
                    (x["reasoning"], x["action"]["arguments_json"], x["observation"]["text"])
                    for x in r["turns"]
                ]
            ),
            equal_to([[(None, '{"a": 1, "b": 2}', "obs\r\n  kept  "), (None, '{"a": 3}', "x")]]),
        )


def test_filters_emit_rejects_with_reasons():
    short = build("terminal", [("ls\n", "a")])
    empty = build("terminal", [("ls\n", "a"), ("\n", "p"), ("pwd\n", "/")])
    with BeamPipeline() as p:
        items = p | beam.Create([("f:row 0", short.to_dict()), ("f:row 1", empty.to_dict())])
        out = items | ApplyFilters(FilterConfig())
        assert_that(
            out.kept | beam.MapTuple(lambda uid, r: (uid, len(r["turns"]))),
            equal_to([("f:row 1", 2)]),
        )
        assert_that(
            out[REJECTS] | beam.Map(lambda r: (r["record"], r["stage"], r["reason"])),
            equal_to(
                [("row 0", "filter", "min_turns"), ("row 1#turn 1", "turn_filter", "empty_action")]
            ),
            label="rejects",
        )


def test_filtered_record_gets_a_new_content_id():
    t = build("terminal", [("ls\n", "a"), ("\n", "p"), ("pwd\n", "/")])
    with BeamPipeline() as p:
        out = p | beam.Create([("u", t.to_dict())]) | ApplyFilters(FilterConfig())
        assert_that(
            out.kept
            | beam.MapTuple(
                lambda uid, r: (
                    r["trajectory_id"] != t.trajectory_id,
                    dict(r["metadata"])["raw_trajectory_id"],
                )
            ),
            equal_to([(True, t.trajectory_id)]),
        )


def test_score_turns_uses_corpus_template_counts():
    saved = [
        build(
            "terminal",
            [(f"save {i}\n", "File saved."), (f"cat f{i}\n", f"unique text number {i} " * 5)],
        )
        for i in range(4)
    ]
    with BeamPipeline() as p:
        recs = p | beam.Create([t.to_dict() for t in saved])
        out = recs | ScoreTurns(AgentWorldV1())
        # 8 turns; "File saved." is 4 of them: surprisal = -log2(4/8) = 1 bit
        assert_that(
            out.turns
            | beam.Filter(lambda r: r["turn_index"] == 0)
            | beam.Map(lambda r: round(r["corpus_surprisal"], 6)),
            equal_to([1.0] * 4),
        )
        assert_that(
            out.trajectories
            | beam.Map(lambda r: [(t["category"], t["keep"]) for t in r["turns"]][1]),
            equal_to([("retrieval", 1.0)] * 4),
            label="categories",
        )


def test_nonzero_exit_is_an_error_turn():
    t = build("terminal", [("a\n", Observation("boom", exit_code=2)), ("b\n", "ok")])
    with BeamPipeline() as p:
        out = p | beam.Create([t.to_dict()]) | ScoreTurns(AgentWorldV1())
        assert_that(
            out.turns | beam.Map(lambda r: (r["turn_index"], r["is_error"])),
            equal_to([(0, True), (1, False)]),
        )
