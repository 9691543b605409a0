"""Import reads JSON under the one depth limit (`validate.JSON_DEPTH`) from any stack,
names the field a too-deep value is in, and refuses a reward a float cannot hold (hunt
1205g). Before, what an import took depended on how deep the stack already was: a record
600 levels deep imported from the CLI (which `process` then refused) and not from a
deeper caller."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records
from worldtrace.schemas.validate import JSON_DEPTH


def nested(depth: int) -> str:
    """A JSON object `depth` levels deep (the object, then lists)."""
    return '{"x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def called_from_deeper(frames: int, fn, *args):
    """`fn(*args)` called `frames` frames deeper than here (a worker, a test runner)."""
    return fn(*args) if frames == 0 else called_from_deeper(frames - 1, fn, *args)


def chat_line(metadata: str) -> str:
    """An OpenAI chat record whose `metadata` is the JSON text `metadata`."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]  # fmt: skip
    return '{"id": "r", "metadata": ' + metadata + ", " + json.dumps({"messages": messages})[1:]


def imported(tmp_path, name: str, line: str, frames: int):
    f = tmp_path / name
    f.write_text(line + "\n")
    r = called_from_deeper(frames, import_paths, [f], tmp_path / f"out-{name}")
    return sum(r.imported.values()), [str(p).removeprefix(f"{f}:") for p in r.problems]


@pytest.mark.parametrize("frames", [0, 300])
def test_a_record_is_held_to_the_limit_at_any_call_depth(tmp_path, frames):
    """600 levels (the record's 601): refused alike from any stack, naming the line, the
    field and the column; 500 levels imported."""
    assert imported(tmp_path, "ok.jsonl", chat_line(nested(500)), frames) == (1, [])
    deep = "line 1: invalid_json: metadata.x: nested 601 levels deep, deeper than can be parsed (column 629)"  # fmt: skip
    assert imported(tmp_path, "deep.jsonl", chat_line(nested(600)), frames) == (0, [deep])
    assert JSON_DEPTH < 601


def test_a_json_string_field_too_deep_names_the_field(tmp_path):
    """`tools` as a JSON string (as datasets store it): nested too deep, the record's
    error naming the field, not a RecursionError's `nested too deeply to convert`."""
    call = {"id": "a", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]
    tools = '[{"type": "function", "function": {"name": "f", "parameters": ' + nested(1200) + "}}]"
    f = tmp_path / "tools.jsonl"
    f.write_text(json.dumps({"id": "r", "tools": tools, "messages": messages}) + "\n")
    r = import_paths([f], tmp_path / "out")
    assert [(p.where, p.kind, p.message) for p in r.problems] == [
        (
            "line 1",
            "invalid",
            "tools: nested 1203 levels deep at char 1266, deeper than can be parsed",
        )
    ]


def test_a_record_too_deep_to_convert_names_its_deepest_field():
    """The last resort (a parser out of stack, called from deep): the field and depth."""
    from worldtrace.collectors.importers.common import too_deep_to_convert

    record = json.loads('{"messages": [{"content": [{"input": ' + nested(5) + "}]}]}")
    assert too_deep_to_convert(record) == "messages[0].content[0].input.x: nested 10 levels deep, too deep to convert"  # fmt: skip
    assert too_deep_to_convert([[[]]]) == "the record: nested 3 levels deep, too deep to convert"


def test_a_reward_too_large_for_a_float_is_refused_naming_the_field(tmp_path):
    """A tau-bench run's reward of 400 digits: an int Python reads, Infinity as a float
    (`validate` refuses that); was `OverflowError: int too large to convert to float`."""
    traj = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]  # fmt: skip
    f = tmp_path / "runs.json"
    f.write_text(
        json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0, "traj": traj}])[:-1]
        + ', {"task_id": 2, "trial": 0, "reward": '
        + "9" * 400
        + ', "traj": '
        + json.dumps(traj)
        + "}]"
    )
    r = import_paths([f], tmp_path / "out")
    assert [(p.where, p.kind, p.message.split(", got")[0]) for p in r.problems] == [
        ("record 1", "invalid", "reward: expected a number a float can hold")
    ]
    assert [t.outcome.reward for t in read_records(tmp_path / "out")] == [1.0]
