"""Every validation error path, with its message."""

from __future__ import annotations

import copy

import pytest
from worldtrace.schemas import ValidationError, validate, validate_dict
from worldtrace.schemas.hashing import trajectory_id


@pytest.fixture
def good(corpus) -> dict:
    return corpus[0].to_dict()


def problems(d: dict, check_id: bool = False) -> list[tuple[str, str]]:
    return [(p.field, p.message) for p in validate_dict(d, "f.jsonl:line 1", check_id=check_id)]


def test_valid_record_has_no_problems(good):
    assert validate_dict(good) == []


def mutate(d: dict, fn) -> dict:
    d = copy.deepcopy(d)
    fn(d)
    return d


CASES = [
    ("missing domain", lambda d: d.pop("domain"), "domain", "missing required field"),
    ("unknown domain", lambda d: d.update(domain="chess"), "domain", "unknown domain 'chess'"),
    (
        "wrong type",
        lambda d: d.update(domain=3),
        "domain",
        "wrong type: expected a string, got int",
    ),
    (
        "bad version",
        lambda d: d.update(schema_version="worldtrace.trajectory/9"),
        "schema_version",
        "unsupported schema version",
    ),
    ("missing turns", lambda d: d.pop("turns"), "turns", "missing required field"),
    ("turns not list", lambda d: d.update(turns={}), "turns", "expected a list"),
    (
        "index gap",
        lambda d: d["turns"][1].update(index=5),
        "turns[1].index",
        "turn indexes must be 0..n-1",
    ),
    (
        "obs without action",
        lambda d: d["turns"][0].update(action=None),
        "turns[0].action",
        "observation without action",
    ),
    (
        "missing observation",
        lambda d: d["turns"][0].update(observation=None),
        "turns[0].observation",
        "missing required field",
    ),
    (
        "obs text type",
        lambda d: d["turns"][0]["observation"].update(text=7),
        "turns[0].observation.text",
        "expected a string, got int",
    ),
    (
        "bool as int",
        lambda d: d["turns"][0]["observation"].update(exit_code=True),
        "turns[0].observation.exit_code",
        "got bool",
    ),
    (
        "action kind",
        lambda d: d["turns"][0]["action"].update(kind="telepathy"),
        "turns[0].action.kind",
        "unknown action kind",
    ),
    (
        "arguments json",
        lambda d: d["turns"][0]["action"].update(arguments_json="{bad"),
        "turns[0].action.arguments_json",
        "invalid JSON",
    ),
    (
        "arguments not object",
        lambda d: d["turns"][0]["action"].update(arguments_json="[1]"),
        "turns[0].action.arguments_json",
        "JSON must be dict",
    ),
    (
        "action space json",
        lambda d: d["system"].update(action_space="{"),
        "system.action_space",
        "invalid JSON",
    ),
    ("unknown field", lambda d: d.update(colour="red"), "colour", "unknown field"),
    (
        "unknown nested field",
        lambda d: d["source"].update(colour="red"),
        "source.colour",
        "unknown field",
    ),
    ("missing source", lambda d: d.pop("source"), "source", "missing required field"),
    (
        "source kind",
        lambda d: d["source"].update(kind="dream"),
        "source.kind",
        "unknown source kind",
    ),
    (
        "outcome status",
        lambda d: d["outcome"].update(status="meh"),
        "outcome.status",
        "unknown status",
    ),
    (
        "bad time",
        lambda d: d.update(started_at="yesterday"),
        "started_at",
        "not an ISO-8601 timestamp",
    ),
    (
        "time order",
        lambda d: d.update(ended_at=d["started_at"].replace(year=2000)),
        "ended_at",
        "ends before it starts",
    ),
    (
        "metadata",
        lambda d: d.update(metadata={"a": 1}),
        "metadata.a",
        "keys and values must be strings",
    ),
    ("keep range", lambda d: d["turns"][0].update(keep=1.5), "turns[0].keep", "must lie in [0, 1]"),
    (
        "category",
        lambda d: d["turns"][0].update(category="poetry"),
        "turns[0].category",
        "unknown category",
    ),
    ("turn not object", lambda d: d["turns"].__setitem__(0, "x"), "turns[0]", "expected an object"),
]


@pytest.mark.parametrize("name,fn,field,message", CASES, ids=[c[0] for c in CASES])
def test_error_paths(good, name, fn, field, message):
    found = problems(mutate(good, fn))
    assert any(f == field and message in m for f, m in found), found


def test_problem_names_the_record(good):
    bad = mutate(good, lambda d: d.update(domain="chess"))
    (p,) = validate_dict(bad, "shard.parquet:row 7")
    assert p.record.startswith("shard.parquet:row 7")
    assert good["trajectory_id"] in p.record
    assert str(p).startswith("shard.parquet:row 7")


def test_id_must_match_content(good):
    bad = mutate(good, lambda d: d["turns"][0]["observation"].update(text="tampered"))
    found = problems(bad, check_id=True)
    assert found == [("trajectory_id", f"does not match the content hash ({trajectory_id(bad)})")]
    missing = mutate(good, lambda d: d.update(trajectory_id=""))
    assert problems(missing, check_id=True) == [("trajectory_id", "missing required field")]


def test_validate_raises_with_all_problems(good):
    bad = mutate(good, lambda d: d.update(domain="chess", turns=5))
    with pytest.raises(ValidationError) as exc:
        validate(bad)
    assert len(exc.value.problems) == 2
    assert "unknown domain" in str(exc.value)


def test_non_object_record():
    assert [p.message for p in validate_dict([1, 2], "x")] == ["expected an object, got list"]
