"""Review 1203b (fault injection), F3 and F10: record JSONL files are read strictly.

F3: a byte that is not UTF-8 was replaced with U+FFFD in silence (`validate` passed the
record when its id had been computed after such a decoding, and `process --input` kept
`insp\\ufffdct` in the training data). F10: one line nested too deep stopped `validate`
for the whole file without naming the line, and a truncated line was reported at column 1.
"""

from __future__ import annotations

import codecs
import json
import subprocess
from pathlib import Path

from worldtrace.schemas import Store, read_table
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.records import from_jsonable
from worldtrace.schemas.store import scan_file

LATIN1 = (
    "is not UTF-8: the file is in another encoding (Latin-1 or cp1252?); convert it: "
    "iconv -f cp1252 -t utf-8 {f} > {f}.utf8"
)


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def hashed(d: dict) -> dict:
    """`d` with the id a producer would have given it (its content hash)."""
    return {**d, "trajectory_id": trajectory_id(from_jsonable(d))}


def latin1_records(tmp_path: Path, corpus) -> tuple[Path, int]:
    """Three records; the second's instruction holds a Latin-1 `é` (byte 0xe9), its id
    computed as a tool that decodes with replacement would (over `insp\\ufffdct`): only
    the reader can tell. Returns the file and the byte's column."""
    d = json.loads(corpus[1].to_json())
    d["task"]["instruction"] = "insp\ufffdct the logs"
    text = json.dumps(hashed(d), ensure_ascii=False)
    col = text.index("\ufffd") + 1
    f = tmp_path / "records.jsonl"
    f.write_bytes(
        b"".join(
            (
                corpus[0].to_json().encode() + b"\n",
                text.encode().replace("\ufffd".encode(), b"\xe9") + b"\n",
                corpus[2].to_json().encode() + b"\n",
            )
        )
    )
    return f, col


def test_validate_names_the_line_that_is_not_utf8(tmp_path, wt_env, corpus):
    f, col = latin1_records(tmp_path, corpus)
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:line 2: <utf8>: byte 0xe9 at column {col} " + LATIN1.format(f=f)
    ]
    assert "1 file(s), 2 record(s), 1 problem(s)" in r.stderr


def test_process_rejects_the_line_that_is_not_utf8_and_keeps_no_replaced_text(
    tmp_path, wt_env, corpus
):
    f, col = latin1_records(tmp_path, corpus)
    r = wt(wt_env, "process", "--create", "--input", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    rejects = read_table(store.table("rejects")).to_pylist()
    assert [(x["source_path"], x["record"], x["stage"], x["reason"]) for x in rejects] == [
        (str(f), "line 2", "validate", f"<utf8>: byte 0xe9 at column {col} " + LATIN1.format(f=f))
    ]
    kept = read_table(store.table("trajectories")).to_pylist()
    assert len(kept) == 2
    assert not [t for t in kept if "\ufffd" in json.dumps(t, default=str, ensure_ascii=False)]


def test_validate_goes_on_past_a_line_nested_too_deep_and_names_it(tmp_path, wt_env, corpus):
    bad = json.loads(corpus[2].to_json())
    bad["domain"] = "chess"
    deep_args = json.loads(corpus[3].to_json())
    deep_args["turns"][0]["action"]["arguments_json"] = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    f = tmp_path / "deep-mid.jsonl"
    nested = '{"turns": ' + "[" * 3000 + "]" * 3000 + "}"
    f.write_text(
        "\n".join([corpus[0].to_json(), nested, json.dumps(bad), json.dumps(hashed(deep_args))])
        + "\n"
    )
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"{f}:line 2: <json>: nested 3001 levels deep, deeper than can be parsed (column 3010)",
        f"{f}:line 3 ({bad['trajectory_id']}): domain: unknown domain 'chess' (expected one of "
        "mcp, search, terminal, swe, android, web, os)",
        f"{f}:line 4 ({hashed(deep_args)['trajectory_id']}): turns[0].action.arguments_json: "
        "invalid JSON: nested 5001 levels deep at char 5005, deeper than can be parsed",
    ]
    assert "1 file(s), 3 record(s), 3 problem(s)" in r.stderr


def test_validate_says_where_a_truncated_line_ends(tmp_path, wt_env, corpus):
    f = tmp_path / "cut.jsonl"
    whole = corpus[0].to_json()
    f.write_text('{"truncated": \n' + whole[:100] + "\n" + '{"a" 1}\n' + whole + "\n")
    r = wt(wt_env, "validate", str(f))
    assert r.stdout.splitlines() == [
        f"{f}:line 1: <json>: invalid JSON: unexpected end at column 14 (the line may be "
        "truncated)",
        f"{f}:line 2: <json>: invalid JSON: unterminated string at column 101 (the line may "
        "be truncated)"
        if whole[:100].count('"') % 2
        else f"{f}:line 2: <json>: invalid JSON: unexpected end at column 101 (the line may "
        "be truncated)",
        f"{f}:line 3: <json>: invalid JSON: expecting ':' delimiter at column 6",
    ]
    assert "1 file(s), 1 record(s), 3 problem(s)" in r.stderr


def test_a_json_document_nested_too_deep_is_one_problem_at_its_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[\n" + "[" * 5000 + "]" * 5000 + "\n]\n")
    [(where, problem)] = list(scan_file(f))
    assert where == f"{f}:line 2"
    assert problem.message == "nested 5001 levels deep, deeper than can be parsed (column 5000)"
    g = tmp_path / "latin1.json"
    g.write_bytes(b'[\n  {"task": "caf\xe9"}\n]\n')
    [(where, problem)] = list(scan_file(g))
    assert (where, problem.field) == (f"{g}:line 2", "<utf8>")
    assert problem.message == "byte 0xe9 at column 16 " + LATIN1.format(f=g)


def test_lines_end_as_before_a_bom_is_passed_over_and_a_utf16_file_is_one_problem(tmp_path, corpus):
    """The reader now reads bytes: lines still end at `\\n`, `\\r\\n` or a bare `\\r`
    (as text mode's did), a UTF-8 byte order mark no longer makes line 1 invalid JSON,
    and a UTF-16 file is one problem instead of one garbled line each."""
    a, b = corpus[0].to_json(), corpus[1].to_json()
    f = tmp_path / "ends.jsonl"
    f.write_bytes(codecs.BOM_UTF8 + f"{a}\r\n\r\n{{oops\r{b}\n".encode())
    items = list(scan_file(f))
    assert [w for w, _ in items] == [f"{f}:line 1", f"{f}:line 3", f"{f}:line 4"]
    assert items[0][1]["trajectory_id"] == corpus[0].trajectory_id
    assert (
        items[1][1].message
        == "invalid JSON: expecting property name enclosed in double quotes at column 2"
    )
    assert items[2][1]["trajectory_id"] == corpus[1].trajectory_id
    u16 = tmp_path / "u16.jsonl"
    u16.write_bytes(f"{a}\n{b}\n".encode("utf-16"))
    [(where, problem)] = list(scan_file(u16))
    assert (where, problem.field) == (str(u16), "<file>")
    assert problem.message.startswith("the file is UTF-16 (it starts with a UTF-16 byte order")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(f"{a}\n".encode() + b'{"task": "caf\xc3')
    items = list(scan_file(cut))
    assert items[1][0] == f"{cut}:line 2"
    assert items[1][1].message == "a character cut short at column 14 (the file may be truncated)"
