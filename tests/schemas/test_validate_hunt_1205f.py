"""Hunt 1205f: what `validate`, `process --input` and `import` take as JSON.

Bug 2: NaN, Infinity, -Infinity and 1e400 (a number too large for a float) were read
from a worldtrace record's JSON line as nan and infinity: `validate` passed them, process
stored them, a query's JSON showed null (an unknown value). They are refused at read,
naming the file, the line and the field, as the importers and the JSON-text fields refuse
them.

Bug 3: how deep JSON text may nest depended on how deep the reading call's stack was
(Python's parser recurses once a level): arguments 960 levels deep were imported and
passed `validate`, and `process` refused them. One limit (`validate.JSON_DEPTH`), the
same at every reader, whatever the stack.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.importers.common import InvalidField, tool_action
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.records import from_jsonable
from worldtrace.schemas.store import scan_file
from worldtrace.schemas.validate import JSON_DEPTH, json_problem, validate_dict


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def hashed(d: dict) -> dict:
    """`d` with the id a producer would have given it (its content hash)."""
    return {**d, "trajectory_id": trajectory_id(from_jsonable(d))}


def rejects(env: dict) -> list[tuple[str, str]]:
    r = wt(env, "query", "SELECT record, reason FROM rejects ORDER BY record", "--format", "json")
    assert r.returncode == 0, r.stderr
    return [(x["record"], x["reason"]) for x in json.loads(r.stdout)]


# -- bug 2: NaN and infinities -------------------------------------------------------


def with_numbers(corpus, i: int, reward: str, duration: str) -> str:
    """Record `i` as a JSON line whose reward and first turn's duration are written as
    given (`NaN`, `1e400`, ...), where a JSON writer could not have written them."""
    d = json.loads(corpus[i].to_json())
    d["outcome"]["reward"], d["turns"][0]["duration_ms"] = 0.125, 250.5
    line = json.dumps(d)
    assert line.count("0.125") == 1 and line.count("250.5") == 1
    return line.replace("0.125", reward).replace("250.5", duration)


NOT_JSON = "is not JSON: write a number, or null if it is unknown"
TOO_LARGE = "is too large for a number (a float holds up to 1.8e308)"


def test_validate_refuses_nan_and_infinities_naming_file_line_and_field(tmp_path, wt_env, corpus):
    f = tmp_path / "numbers.jsonl"
    big = hashed(json.loads(with_numbers(corpus, 4, "1e308", "-0.0")))  # finite: fine
    words = json.loads(corpus[5].to_json())
    words["turns"][0]["observation"]["text"] = "NaN Infinity -Infinity 1e400"  # text: fine
    f.write_text(
        "\n".join([
            with_numbers(corpus, 0, "NaN", "1"),
            with_numbers(corpus, 1, "2", "-Infinity"),
            with_numbers(corpus, 2, "Infinity", "1e400"),
            with_numbers(corpus, 3, "0.5", "-1E+400"),
            json.dumps(big),
            json.dumps(hashed(words)),
        ])
        + "\n"
    )  # fmt: skip
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:line 1: outcome.reward: NaN {NOT_JSON}",
        f"{f}:line 2: turns[0].duration_ms: -Infinity {NOT_JSON}",
        f"{f}:line 3: outcome.reward: Infinity {NOT_JSON} (also 1e400 at turns[0].duration_ms)",
        f"{f}:line 4: turns[0].duration_ms: -1E+400 {TOO_LARGE}",
    ]
    assert "1 file(s), 2 record(s), 4 problem(s)" in r.stderr


def test_process_input_rejects_them_with_the_same_reasons_and_stores_none(tmp_path, wt_env, corpus):
    f = tmp_path / "numbers.jsonl"
    f.write_text(
        "\n".join(
            [
                with_numbers(corpus, 0, "NaN", "1"),
                with_numbers(corpus, 1, "2", "Infinity"),
                corpus[6].to_json(),
                corpus[7].to_json(),
            ]
        )
        + "\n"
    )
    r = wt(wt_env, "process", "--input", str(f))
    assert r.returncode == 0, r.stderr
    assert rejects(wt_env) == [
        ("line 1", f"outcome.reward: NaN {NOT_JSON}"),
        ("line 2", f"turns[0].duration_ms: Infinity {NOT_JSON}"),
    ]
    sql = "SELECT count(*) AS n FROM trajectories WHERE NOT isfinite(coalesce(reward, 0))"
    q = wt(wt_env, "query", sql, "--format", "json")
    assert json.loads(q.stdout) == [{"n": 0}], q.stderr


def test_a_json_file_of_records_names_the_record_and_the_field(tmp_path, corpus):
    f = tmp_path / "records.json"
    f.write_text(f"[{corpus[0].to_json()}, {with_numbers(corpus, 1, '-Infinity', '3')}]")
    [(_, first), (where, problem)] = list(scan_file(f))
    assert isinstance(first, dict) and validate_dict(first, "record 0") == []
    assert (where, problem.field) == (f"{f}:record 1", "outcome.reward")
    assert problem.message == f"-Infinity {NOT_JSON}"


# -- bug 3: one nesting limit ---------------------------------------------------------


def nested(depth: int) -> str:
    """A JSON object `depth` levels deep (the object, then lists)."""
    return '{"x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def called_from_deeper(frames: int, fn, *args):
    """`fn(*args)` called `frames` frames deeper than here: as a Beam worker calls it."""
    return fn(*args) if frames == 0 else called_from_deeper(frames - 1, fn, *args)


@pytest.mark.parametrize("depth", [JSON_DEPTH - 1, JSON_DEPTH, JSON_DEPTH + 1, 700, 960, 5000])
def test_the_limit_is_the_same_from_any_stack(depth):
    text = nested(depth)
    here = json_problem(text, dict)
    assert called_from_deeper(300, json_problem, text, dict) == here
    if depth <= JSON_DEPTH:
        assert here is None
    else:
        assert here == f"invalid JSON: nested {depth} levels deep at char {depth + 4}, deeper than can be parsed"  # fmt: skip


def test_invalid_text_nested_too_deep_is_named_by_its_depth_from_any_stack():
    text = '{"x": ' + "[" * 700  # cut short: where the parser stops depends on its stack
    expected = "invalid JSON: nested 701 levels deep at char 705, deeper than can be parsed"
    assert json_problem(text, dict) == expected
    assert called_from_deeper(300, json_problem, text, dict) == expected


def deep_record(corpus, depth: int) -> dict:
    d = json.loads(corpus[8].to_json())
    action = d["turns"][0]["action"]
    action.update(kind="tool_call", name="deep", arguments_json=nested(depth))
    action["text"] = f"deep({action['arguments_json']})"
    return hashed(d)


def test_validate_and_process_draw_the_line_at_the_same_depth(tmp_path, wt_env, corpus):
    f = tmp_path / "deep.jsonl"
    records = [deep_record(corpus, n) for n in (JSON_DEPTH, JSON_DEPTH + 1, 980)]
    f.write_text("".join(json.dumps(d) + "\n" for d in records))
    why = "turns[0].action.arguments_json: invalid JSON: nested {n} levels deep at char {c}, deeper than can be parsed"  # fmt: skip
    problems = [(f"line {k}", why.format(n=n, c=n + 4)) for k, n in ((2, JSON_DEPTH + 1), (3, 980))]
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:{line} ({records[k - 2]['trajectory_id']}): {reason}"
        for k, (line, reason) in enumerate(problems, 3)
    ]
    r = wt(wt_env, "process", "--input", str(f))
    assert r.returncode == 0, r.stderr
    assert rejects(wt_env) == problems
    q = wt(wt_env, "query", "SELECT count(*) AS n FROM trajectories", "--format", "json")
    assert json.loads(q.stdout) == [{"n": 1}], q.stderr


def openai_line(record_id: str, arguments: str) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "deep", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "done again"},
    ]
    return json.dumps({"id": record_id, "messages": messages})


def test_import_refuses_what_validate_and_process_would_naming_the_field(tmp_path, wt_env):
    f = tmp_path / "chat.jsonl"
    f.write_text(
        openai_line("ok", nested(JSON_DEPTH)) + "\n" + openai_line("deep", nested(960)) + "\n"
    )
    r = wt(wt_env, "import", str(f))  # the other record is imported
    assert (
        f"{f.name}:line 2: invalid: messages[1].tool_calls[0].function.arguments: nested 960 "
        "levels deep at char 964, deeper than can be parsed"
    ) in r.stdout + r.stderr
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    r = wt(wt_env, "validate", str(raw))
    assert r.returncode == 0 and "1 record(s), 0 problem(s)" in r.stderr, r.stdout
    assert wt(wt_env, "process").returncode == 0
    assert rejects(wt_env) == []


def test_arguments_the_files_own_reader_took_are_held_to_the_limit_too():
    """An object (Anthropic's `input`) the file's reader parsed, and a JSON value that is
    no object, kept as `{"_value": ...}` one level deeper."""
    deep = json.loads(nested(JSON_DEPTH + 1))
    with pytest.raises(InvalidField, match=r"^input: nested 513 levels deep at char 517,"):
        tool_action("deep", deep, "input")
    assert tool_action("deep", json.loads(nested(JSON_DEPTH))).arguments_json is not None
    as_value = "[" * JSON_DEPTH + "]" * JSON_DEPTH
    with pytest.raises(InvalidField, match=r"^arguments: nested 513 levels deep"):
        tool_action("deep", as_value)
    assert tool_action("deep", as_value[1:-1]).arguments_json.startswith('{"_value": [[')


def test_metadata_that_is_a_list_of_no_pairs_is_a_problem_not_a_traceback(tmp_path, wt_env, corpus):
    """Found (1205f, the summary hunt): `"metadata": [13]` ended `validate` and `process
    --input` with a TypeError traceback (a list is how an Arrow map reads: pairs)."""
    d = json.loads(corpus[0].to_json())
    d["metadata"] = [13]
    f = tmp_path / "m.jsonl"
    f.write_text(json.dumps(d) + "\n" + corpus[1].to_json() + "\n")
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "metadata[0]: wrong type: expected a map of strings, got a list" in r.stdout + r.stderr
    r = wt(wt_env, "process", "--input", str(f), "--create")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    [(record, reason)] = rejects(wt_env)
    assert record == "line 1" and "metadata[0]: wrong type" in reason, (record, reason)
