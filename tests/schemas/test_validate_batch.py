"""`validate.suspects`: a declared shard checked column by column flags every record the
record walk (`validate_dict(declared=True)`) finds a problem in, and no valid one."""

from __future__ import annotations

import copy
import math
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.units import read_valid
from worldtrace.schemas import TRAJECTORY_SCHEMA
from worldtrace.schemas.arrow import to_table
from worldtrace.schemas.store import declared, scan_file
from worldtrace.schemas.validate import suspects, validate_dict


def turn(d: dict, n: int = 0) -> dict:
    return d["turns"][n]


def set_in(path: str, value):
    """A mutation setting the dotted `path` (`turns.0.action.kind`) of a row dict."""

    def apply(d: dict) -> None:
        *parents, last = path.split(".")
        for p in parents:
            d = d[int(p)] if p.isdigit() else d[p]
        d[int(last) if last.isdigit() else last] = value

    return apply


def ends_before_start(d: dict) -> None:
    d["ended_at"] = d["started_at"].replace(year=2000)


BROKEN = {
    "domain": set_in("domain", "chess"),
    "schema version": set_in("schema_version", "worldtrace.trajectory/9"),
    "no source": set_in("source", None),
    "source kind": set_in("source.kind", "dream"),
    "origin index": set_in("source.origin_index", -1),
    "environment config": set_in("environment", {"config": "{"}),
    "action space": set_in("system", {"action_space": '{"a": 1}'}),
    "no turns": set_in("turns", None),
    "a null turn": lambda d: d["turns"].insert(1, None),
    "turn index": set_in("turns.1.index", 5),
    "no action": set_in("turns.0.action", None),
    "action kind": set_in("turns.0.action.kind", "telepathy"),
    "no action text": set_in("turns.0.action.text", None),
    "arguments": set_in("turns.0.action.arguments_json", "{bad"),
    "arguments a list": set_in("turns.1.action.arguments_json", "[1]"),
    "no observation": set_in("turns.0.observation", None),
    "no observation text": set_in("turns.1.observation.text", None),
    "state json": set_in("turns.0.observation.state_json", "[]"),
    "a stat missing": lambda d: turn(d).update(stats={"ol": 0.5}),
    "category": set_in("turns.0.category", "poetry"),
    "keep above 1": set_in("turns.1.keep", 1.5),
    "keep below 0": set_in("turns.0.keep", -0.1),
    "keep NaN": set_in("turns.0.keep", math.nan),
    "perturbation": set_in("turns.0.perturbation", "nope"),
    "outcome status": set_in("outcome.status", "meh"),
    "outcome without status": set_in("outcome", {"error": "x"}),
    "time order": ends_before_start,
    "conditions": set_in("conditions", "{}"),
    "redactions": set_in("redactions", -1),
}

VALID = {
    "as collected": lambda d: None,
    "no stats": set_in("turns.0.stats", None),
    "no outcome": set_in("outcome", None),
    "no environment": set_in("environment", None),
    "no end": set_in("ended_at", None),
    "no turns at all": set_in("turns", []),
    "a kept turn": lambda d: turn(d).update(keep=1.0, category="action"),
    "arguments an object": set_in("turns.0.action.arguments_json", '{"a": [1]}'),
}


@pytest.fixture
def rows(corpus) -> list[dict]:
    """Rows of the declared schema with at least two turns (as a shard reads them)."""
    return [r for r in to_table(corpus).to_pylist() if len(r["turns"]) >= 2][:3]


def batch_of(dicts: list[dict]) -> pa.RecordBatch:
    return pa.Table.from_pylist(dicts, schema=TRAJECTORY_SCHEMA).to_batches()[0]


def walk(d: dict) -> list:
    return validate_dict(d, "t", False, declared=True)


@pytest.mark.parametrize("name", list(BROKEN) + list(VALID))
def test_suspects_are_the_rows_the_walk_finds_a_problem_in(rows, name):
    bad = copy.deepcopy(rows[1])
    (BROKEN | VALID)[name](bad)
    batch = batch_of([rows[0], bad, rows[2]])
    back = batch.to_pylist()
    assert [bool(walk(d)) for d in back] == [False, name in BROKEN, False]
    assert suspects(batch).tolist() == [False, name in BROKEN, False]


def test_sliced_batches_flag_their_own_rows(rows):
    """A unit's rows are a slice of a batch (`rows` of a cut row group): offsets count."""
    dicts = [copy.deepcopy(rows[i % 3]) for i in range(9)]
    for i in (2, 7):
        BROKEN["keep above 1"](dicts[i])
        BROKEN["a null turn"](dicts[i + 1])
    batch = batch_of(dicts)
    assert suspects(batch.slice(2, 5)).tolist() == [True, True, False, False, False]
    assert suspects(batch.slice(6)).tolist() == [False, True, True]


def test_read_valid_rejects_what_the_walk_rejects(tmp_path, rows):
    """A shard of every broken row and every valid one: pass 1 rejects the broken ones
    with the walk's own reasons, row by row, and keeps the rest as read."""
    dicts = []
    for fn in [*BROKEN.values(), *VALID.values()]:
        d = copy.deepcopy(rows[len(dicts) % 3])
        fn(d)
        dicts.append(d)
    path = tmp_path / "part-x-00000.parquet"
    pq.write_table(pa.Table.from_pylist(dicts, schema=TRAJECTORY_SCHEMA), path, row_group_size=16)
    assert declared(path)
    expected = {}
    for where, d in scan_file(path, micros=True):
        if problems := validate_dict(d, where, False, micros=True, declared=True):
            expected[where.rpartition(":")[2]] = "; ".join(
                f"{p.field}: {p.message}" for p in problems
            )
    assert len(expected) == len(BROKEN)
    got, kept = {}, []
    for group in range(pq.ParquetFile(path).metadata.num_row_groups):
        rejects: list = []
        kept += read_valid(str(path), group, Counter(), rejects)
        got |= {r["record"]: r["reason"] for r in rejects}
    assert got == expected
    assert len(kept) == len(VALID)
