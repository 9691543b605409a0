"""Review 1203c (security), T3: one record that Parquet cannot store stopped `validate`
and `process --input` with a traceback.

A lone surrogate (JSON `"\\ud800"`, half an emoji) crashed the content hash
(`UnicodeEncodeError`) and pass 1; `exit_code` 10**30 passed `validate` and crashed the
Arrow conversion of pass 1 (`OverflowError`). Each is now a problem naming the file, the
line and the field, and a `rejects` row while the other records are processed. The
integers of every declared field are checked against their column's range (int32;
float64 columns take a Python int through int64), the strings of a record whose JSON
text held a surrogate escape against UTF-8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.schemas import TRAJECTORY_SCHEMA, Store, read_table
from worldtrace.schemas.records import from_jsonable
from worldtrace.schemas.validate import validate_dict

from .test_review_1203b import hashed, wt

SURROGATE = (
    "a lone surrogate (\\ud800) at character {at}: not storable as UTF-8 (half a UTF-16 "
    "pair, e.g. an emoji cut in two: write the whole pair, or U+FFFD)"
)
INT32 = "out of range for int32 (-2147483648 to 2147483647): {v}"
FLOAT = (
    "an integer too large for a double column (-9223372036854775808 to "
    "9223372036854775807): {v} (write it with an exponent: 1e+30)"
)


def records_file(tmp_path: Path, corpus, bad: list[dict]) -> Path:
    """A JSONL file: a good record, then each of `bad`, then another good record. Written
    as `json.dumps` writes (ASCII, a surrogate as its `\\ud800` escape)."""
    f = tmp_path / "records.jsonl"
    lines = [corpus[1].to_json(), *map(json.dumps, bad), corpus[4].to_json()]
    f.write_text("\n".join(lines) + "\n")
    return f


def with_lone_surrogate(corpus) -> tuple[dict, dict]:
    """Two records with a lone surrogate: in the observation text of turn 0 (the id of the
    record before it: no id can be computed over it), and in a metadata key."""
    a = json.loads(corpus[2].to_json())
    a["turns"][0]["observation"]["text"] = "ls\n\ud800 lone"
    b = json.loads(corpus[3].to_json())
    b["metadata"] = {"note\ud800": "x"}
    return a, b


def test_validate_names_each_lone_surrogate_and_goes_on(tmp_path, wt_env, corpus):
    a, b = with_lone_surrogate(corpus)
    f = records_file(tmp_path, corpus, [a, b])
    assert "\\ud800" in f.read_text()
    r = wt(wt_env, "validate", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    key_why = "the key: " + SURROGATE.format(at=4)
    assert r.stdout.splitlines() == [
        f"{f}:line 2 ({a['trajectory_id']}): turns[0].observation.text: " + SURROGATE.format(at=3),
        f"{f}:line 3 ({b['trajectory_id']}): metadata.note\\ud800: {key_why}",
    ]
    assert "1 file(s), 4 record(s), 2 problem(s)" in r.stderr


def test_process_rejects_each_lone_surrogate_and_keeps_the_rest(tmp_path, wt_env, corpus):
    a, b = with_lone_surrogate(corpus)
    f = records_file(tmp_path, corpus, [a, b])
    r = wt(wt_env, "process", "--create", "--input", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    rejects = read_table(store.table("rejects")).to_pylist()
    assert sorted((x["record"], x["stage"], x["reason"], x["trajectory_id"]) for x in rejects) == [
        (
            "line 2",
            "validate",
            "turns[0].observation.text: " + SURROGATE.format(at=3),
            a["trajectory_id"],
        ),
        (
            "line 3",
            "validate",
            "metadata.note\\ud800: the key: " + SURROGATE.format(at=4),
            b["trajectory_id"],
        ),
    ]
    kept = read_table(store.table("trajectories")).to_pylist()
    assert sorted(t["metadata"]["raw_trajectory_id"] for t in map(_meta, kept)) == sorted(
        [corpus[1].trajectory_id, corpus[4].trajectory_id]
    )


def _meta(t: dict) -> dict:
    return {**t, "metadata": dict(t["metadata"])}


def with_big_integers(corpus) -> list[dict]:
    """Records each with one integer its column cannot hold: an exit code of 10**30 (the
    report's), an attempt one past int32, a duration (a float column) of 10**30 written
    as an integer, a negative exit code below int32."""
    out = []
    for k, (where, v) in enumerate(
        [
            (("turns", 0, "observation", "exit_code"), 10**30),
            (("source", "attempt"), 2**31),
            (("turns", 1, "duration_ms"), 10**30),
            (("turns", 0, "observation", "exit_code"), -(2**31) - 1),
        ]
    ):
        d = json.loads(corpus[5 + k].to_json())
        node = d
        for step in where[:-1]:
            node = node[step]
        node[where[-1]] = v
        out.append(hashed(d))
    return out


def test_validate_names_integers_beyond_their_column(tmp_path, wt_env, corpus):
    bad = with_big_integers(corpus)
    f = records_file(tmp_path, corpus, bad)
    r = wt(wt_env, "validate", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:line 2 ({bad[0]['trajectory_id']}): turns[0].observation.exit_code: "
        + INT32.format(v=10**30),
        f"{f}:line 3 ({bad[1]['trajectory_id']}): source.attempt: " + INT32.format(v=2**31),
        f"{f}:line 4 ({bad[2]['trajectory_id']}): turns[1].duration_ms: " + FLOAT.format(v=10**30),
        f"{f}:line 5 ({bad[3]['trajectory_id']}): turns[0].observation.exit_code: "
        + INT32.format(v=-(2**31) - 1),
    ]
    assert "1 file(s), 6 record(s), 4 problem(s)" in r.stderr


def test_process_rejects_integers_beyond_their_column_and_keeps_the_rest(tmp_path, wt_env, corpus):
    bad = with_big_integers(corpus)
    f = records_file(tmp_path, corpus, bad)
    r = wt(wt_env, "process", "--create", "--input", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    rejects = read_table(store.table("rejects")).to_pylist()
    assert sorted((x["record"], x["stage"], x["reason"]) for x in rejects) == [
        ("line 2", "validate", "turns[0].observation.exit_code: " + INT32.format(v=10**30)),
        ("line 3", "validate", "source.attempt: " + INT32.format(v=2**31)),
        ("line 4", "validate", "turns[1].duration_ms: " + FLOAT.format(v=10**30)),
        ("line 5", "validate", "turns[0].observation.exit_code: " + INT32.format(v=-(2**31) - 1)),
    ]
    assert read_table(store.table("trajectories")).num_rows == 2


def _widened(t: pa.DataType) -> pa.DataType:
    """`t` with every int32 an int64, at any depth: a foreign writer's schema."""
    if pa.types.is_int32(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_widened(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_widened(t.value_type)))
    return t


def test_a_foreign_shard_of_int64_columns_is_checked_against_int32(tmp_path, wt_env, corpus):
    """A Parquet file whose integers are int64 (not the declared schema: walked record by
    record) holding an exit code of 2**40: a problem and a reject, not a crash when pass 1
    writes the record into its int32 column."""
    schema = pa.schema([f.with_type(_widened(f.type)) for f in TRAJECTORY_SCHEMA])
    rows = [t.to_dict() for t in corpus[:3]]
    rows[1]["turns"][0]["observation"]["exit_code"] = 2**40
    f = tmp_path / "foreign.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), f)
    r = wt(wt_env, "validate", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:row 1 ({rows[1]['trajectory_id']}): turns[0].observation.exit_code: "
        + INT32.format(v=2**40)
    ]
    r = wt(wt_env, "process", "--create", "--input", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    rejects = read_table(store.table("rejects")).to_pylist()
    assert [(x["record"], x["reason"]) for x in rejects] == [
        ("row 1", "turns[0].observation.exit_code: " + INT32.format(v=2**40))
    ]
    assert read_table(store.table("trajectories")).num_rows == 2


def test_a_json_file_with_a_lone_surrogate_is_one_problem(tmp_path, wt_env, corpus):
    """A `.json` file (a list of records) is gated as a whole: its escape marks each
    record for the check."""
    a, _ = with_lone_surrogate(corpus)
    f = tmp_path / "records.json"
    f.write_text(json.dumps([json.loads(corpus[1].to_json()), a]))
    r = wt(wt_env, "validate", str(f))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:record 1 ({a['trajectory_id']}): turns[0].observation.text: " + SURROGATE.format(at=3)
    ]


def test_the_api_checks_strings_unless_told_none_can_be_there(corpus):
    """`validate_dict` on a dict from anywhere looks for lone surrogates (and then gives
    no id check a string it cannot hash); a reader that knows its text had no surrogate
    escape passes `texts=False`."""
    a, _ = with_lone_surrogate(corpus)
    d = from_jsonable(a)
    [p] = validate_dict(d, "x")
    assert (p.field, p.message) == ("turns[0].observation.text", SURROGATE.format(at=3))
    assert str(p).isascii()
