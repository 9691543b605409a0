"""records.py is the one declaration: Arrow schema, validation and views follow it.

The acceptance of issue 19: a field added in one place (a copy of the spec) shows up in
the Arrow schema, in validation and in the views; the schema of shards written before
the new fields stays readable.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import typing
from dataclasses import field, make_dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.schemas import (
    TRAJECTORY_SCHEMA,
    Observation,
    ShardWriter,
    Store,
    System,
    Trajectory,
    Turn,
    TurnStats,
    from_table,
    to_table,
    trajectory_id,
    validate_dict,
)
from worldtrace.schemas import fields as F
from worldtrace.schemas.arrow import arrow_schema
from worldtrace.schemas.spec import spec
from worldtrace.schemas.validate import validator_for
from worldtrace.schemas.views import VIEW_DOCS, connect

TS = pa.timestamp("us", tz="UTC")
S = pa.string()


def _struct(*fields) -> pa.DataType:
    return pa.struct([pa.field(n, t) for n, t in fields])


# Today's schema (before issue 19), written out once: shards like these must keep reading.
OLD_SOURCE = [("kind", S), ("name", S), ("job_id", S), ("episode_id", S),
              ("attempt", pa.int32()), ("origin_format", S), ("origin_id", S)]  # fmt: skip
OLD_OBSERVATION = [("text", S), ("is_error", pa.bool_()), ("exit_code", pa.int32()),
                   ("truncated", pa.bool_()), ("state_json", S)]  # fmt: skip
STATS = _struct(*[(n, pa.float64()) for n in
                  ("ol", "nov", "jac", "r", "byte_entropy", "zlib_ratio", "cond_novelty", "corpus_surprisal")])  # fmt: skip
ACTION = _struct(("kind", S), ("text", S), ("name", S), ("arguments_json", S))


def _turn(observation: pa.DataType, extra=()) -> pa.DataType:
    return _struct(("index", pa.int32()), ("action", ACTION), ("observation", observation),
                   ("started_at", TS), ("duration_ms", pa.float64()), ("reasoning", S),
                   ("stats", STATS), ("category", S), ("keep", pa.float64()), ("rule", S), *extra)  # fmt: skip


def _schema(source, observation, turn_extra=(), top_extra=()) -> pa.Schema:
    return pa.schema(
        [
            pa.field("schema_version", S, nullable=False),
            pa.field("trajectory_id", S, nullable=False),
            pa.field("domain", S, nullable=False),
            pa.field("source", _struct(*source)),
            pa.field("environment", _struct(*[(n, S) for n in ("backend", "image", "server", "url", "device", "config")])),
            pa.field("task", _struct(("task_id", S), ("instruction", S))),
            pa.field("agent", _struct(("name", S), ("model", S), ("policy", S))),
            pa.field("system", _struct(*[(n, S) for n in F.SYSTEM_FIELDS])),
            pa.field("turns", pa.list_(_turn(_struct(*observation), turn_extra))),
            pa.field("outcome", _struct(("status", S), ("reward", pa.float64()), ("error", S))),
            pa.field("started_at", TS),
            pa.field("ended_at", TS),
            pa.field("metadata", pa.map_(S, S)),
            pa.field("dedup", _struct(("exact_hash", S), ("cluster_id", S), ("representative", pa.bool_()))),
            *[pa.field(n, t) for n, t in top_extra],
        ],
        metadata={b"worldtrace.schema_version": b"worldtrace.trajectory/1"},
    )  # fmt: skip


OLD_SCHEMA = _schema(OLD_SOURCE, OLD_OBSERVATION)


def test_schema_is_todays_plus_the_new_nullable_fields_appended():
    expected = _schema(
        [*OLD_SOURCE, ("origin_path", S), ("origin_index", pa.int32())],
        [*OLD_OBSERVATION, ("env_failure", S), ("changed", pa.bool_())],
        turn_extra=[("perturbation", S)],
        top_extra=[("conditions", S), ("redactions", pa.int32())],
    )
    assert TRAJECTORY_SCHEMA.equals(expected, check_metadata=True), TRAJECTORY_SCHEMA
    assert arrow_schema(Trajectory).equals(TRAJECTORY_SCHEMA, check_metadata=True)


def test_name_constants_agree_with_the_declaration():
    assert tuple(f.name for f in dataclasses.fields(System)) == F.SYSTEM_FIELDS
    assert tuple(f.name for f in dataclasses.fields(TurnStats)) == F.STATS_FIELDS
    assert "perturbation" in F.TURN_FIELDS and "env_failure" in F.OBSERVATION_FIELDS


# -- acceptance: one added field, carried by Arrow, validation and the views ---------


def variant(cls: type, extra=(), **retype) -> type:
    """A copy of a declared record class, with fields retyped and `extra` appended."""
    hints = typing.get_type_hints(cls)
    own = [
        (f.name, retype.get(f.name, hints[f.name]), field(default=f.default,
         default_factory=f.default_factory, metadata=f.metadata, kw_only=f.kw_only))
        for f in dataclasses.fields(cls)
    ]  # fmt: skip
    return make_dataclass(cls.__name__, [*own, *extra])


LATENCY = ("latency_ms", float | None, field(default=None, metadata=spec(view="latency_ms", range=(0, None))))  # fmt: skip
ObservationV = variant(Observation, [LATENCY])
TurnV = variant(Turn, observation=ObservationV)
TrajectoryV = variant(Trajectory, turns=list[TurnV])


def test_one_added_field_reaches_arrow_validation_and_views(tmp_path, corpus):
    schema = arrow_schema(TrajectoryV)
    obs = schema.field("turns").type.value_type.field("observation").type
    assert obs.field("latency_ms").type == pa.float64() and obs.names[-1] == "latency_ms"
    assert (
        obs.names[:-1]
        == TRAJECTORY_SCHEMA.field("turns").type.value_type.field("observation").type.names
    )

    check = validator_for(TrajectoryV)
    rows = [t.to_dict() for t in corpus[:5]]
    for i, r in enumerate(rows):
        r["turns"][0]["observation"]["latency_ms"] = 10.0 + i
    assert [check(r, "v") for r in rows] == [[]] * 5
    assert validate_dict(rows[0])[0].message == "unknown field"  # the real spec lacks it

    def problems(value):
        bad = copy.deepcopy(rows[0])
        bad["turns"][0]["observation"]["latency_ms"] = value
        return [(p.field, p.message) for p in check(bad, "v", check_id=False)]

    path = "turns[0].observation.latency_ms"
    assert problems("slow") == [(path, "wrong type: expected a number, got str")]
    assert problems(True) == [(path, "wrong type: expected a number, got bool")]
    assert problems(-1.0) == [(path, "must be >= 0, got -1.0")]

    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "v", schema=schema) as w:
        w.write_rows(rows)
    con = connect(store, root=TrajectoryV)
    got = con.execute(
        "SELECT latency_ms FROM raw_turns WHERE turn_index = 0 ORDER BY latency_ms"
    ).fetchall()
    assert got == [(10.0 + i,) for i in range(5)]
    assert con.execute("SELECT count(latency_ms) FROM raw_turns").fetchone() == (5,)


# -- the new fields of issue 19 -------------------------------------------------------


def _with_new_fields(t: Trajectory) -> Trajectory:
    t = copy.deepcopy(t)
    t.turns[0].observation.env_failure = "http_error:404"
    t.turns[0].observation.changed = False
    t.turns[1].perturbation = json.dumps({"kind": "disk_full", "at": 1})
    t.conditions = json.dumps([{"kind": "disk_full"}])
    t.redactions = 2
    t.source.origin_path = "runs/a.jsonl"
    t.source.origin_index = 7
    return t


def test_new_fields_round_trip_and_stay_out_of_the_id(tmp_path, corpus):
    plain = corpus[0]
    rich = _with_new_fields(plain)
    assert trajectory_id(rich) == trajectory_id(plain) == plain.trajectory_id
    assert validate_dict(rich.to_dict()) == []
    pq.write_table(to_table([rich]), tmp_path / "x.parquet")
    assert from_table(pq.read_table(tmp_path / "x.parquet")) == [rich]
    assert Trajectory.from_json(rich.to_json()) == rich


NEW_FIELD_CASES = [
    (lambda d: d["turns"][0]["observation"].update(env_failure=404), "turns[0].observation.env_failure", "expected a string, got int"),
    (lambda d: d["turns"][0]["observation"].update(changed="yes"), "turns[0].observation.changed", "expected a boolean, got str"),
    (lambda d: d["turns"][0].update(perturbation="[1]"), "turns[0].perturbation", "JSON must be dict, got list"),
    (lambda d: d["turns"][0].update(perturbation="{"), "turns[0].perturbation", "invalid JSON"),
    (lambda d: d.update(conditions='{"kind": "x"}'), "conditions", "JSON must be list, got dict"),
    (lambda d: d.update(redactions=-1), "redactions", "must be >= 0, got -1"),
    (lambda d: d.update(redactions=1.5), "redactions", "expected an integer, got float"),
    (lambda d: d["source"].update(origin_path=3), "source.origin_path", "expected a string, got int"),
    (lambda d: d["source"].update(origin_index="7"), "source.origin_index", "expected an integer, got str"),
]  # fmt: skip


@pytest.mark.parametrize("fn,path,message", NEW_FIELD_CASES, ids=[c[1] for c in NEW_FIELD_CASES])
def test_new_fields_are_validated(corpus, fn, path, message):
    d = _with_new_fields(corpus[0]).to_dict()
    fn(d)
    found = [(p.field, p.message) for p in validate_dict(d, check_id=False)]
    assert len(found) == 1 and found[0][0] == path and message in found[0][1], found


def test_views_expose_the_new_fields(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "n") as w:
        w.write([_with_new_fields(corpus[0]), corpus[1]])
    con = connect(store)
    rows = con.execute(
        "SELECT conditions, redactions, origin_path, origin_index FROM raw_trajectories "
        "ORDER BY redactions NULLS LAST"
    ).fetchall()
    assert rows == [('[{"kind": "disk_full"}]', 2, "runs/a.jsonl", 7), (None, None, None, None)]
    turn = con.execute(
        "SELECT perturbation, env_failure, changed FROM raw_turns "
        f"WHERE trajectory_id = '{corpus[0].trajectory_id}' ORDER BY turn_index LIMIT 2"
    ).fetchall()
    assert turn == [(None, "http_error:404", False), ('{"kind": "disk_full", "at": 1}', None, None)]
    for view, cols in {
        "raw_trajectories": ["conditions", "redactions", "origin_path", "origin_index"],
        "trajectories": ["conditions", "redactions", "origin_path", "origin_index"],
        "raw_turns": ["perturbation", "env_failure", "changed"],
        "turns": ["perturbation"],
    }.items():
        names = [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
        assert set(cols) <= set(names) and all(c in VIEW_DOCS[view] for c in cols), view


# -- data written before the new fields ------------------------------------------------


def test_old_shards_read_through_views_validation_and_processing(tmp_path, corpus):
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas.store import check_files, shard_files
    from worldtrace.schemas.tables import TURNS_SCHEMA

    store = Store.at(tmp_path / "store")
    old = store.raw / "old" / "part-0.parquet"
    old.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([t.to_dict() for t in corpus], schema=OLD_SCHEMA), old)
    assert pq.read_schema(old).equals(OLD_SCHEMA)

    con = connect(store)  # only old shards: the new columns exist, null
    assert con.execute(
        "SELECT count(*), count(conditions), count(origin_path) FROM raw_trajectories"
    ).fetchone() == (len(corpus), 0, 0)
    n_turns = sum(len(t.turns) for t in corpus)
    assert con.execute(
        "SELECT count(*), count(env_failure), count(perturbation) FROM raw_turns"
    ).fetchone() == (n_turns, 0, 0)

    checked = list(check_files([old]))
    assert len(checked) == len(corpus) and all(ok and not p for ok, p in checked)

    # a terminal trajectory: on a GUI domain the reported env_failure would filter it out
    rich = _with_new_fields(generate(SyntheticConfig(n=1, seed=11, domains=("terminal",)))[0])
    with ShardWriter(store.raw / "new") as w:  # old and new shards side by side
        w.write([rich])
    con = connect(store)
    assert con.execute(
        "SELECT count(*), count(conditions), count(origin_path) FROM raw_trajectories"
    ).fetchone() == (len(corpus) + 1, 1, 1)

    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    old_turns = pa.schema([f for f in TURNS_SCHEMA if f.name != "perturbation"])
    for f in shard_files(store.table("turns")):  # the processed side table, old layout
        pq.write_table(pq.read_table(f).select(old_turns.names).cast(old_turns), f)
    con = connect(store)
    kept = con.execute(
        "SELECT count(*), count(redactions), max(origin_path), max(conditions) FROM trajectories"
    ).fetchone()
    assert kept[0] > 1 and kept[1:] == (
        kept[0],
        "runs/a.jsonl",
        rich.conditions,
    )  # redaction counts all
    assert con.execute("SELECT count(*), count(perturbation) FROM turns").fetchone()[1] == 0
    assert "perturbation" not in pq.read_schema(shard_files(store.table("turns"))[0]).names
