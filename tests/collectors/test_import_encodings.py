"""Bytes and numbers JSON cannot hold as data: lone UTF-16 surrogates, bytes that are not
UTF-8 (Latin-1, UTF-16), a UTF-8 byte order mark, numbers too large for a float, and
files a walk does not read. Each is kept, or lost alone, and said; never a crash, never
a silent change."""

from __future__ import annotations

import gzip
import json
import subprocess

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records

from .test_import_claude_code import SID, Session, shell, text, use
from .test_import_gemini_cli import fix_session, write_jsonl
from .test_import_robustness import chat


def cli(env, *args):
    return subprocess.run(
        ["worldtrace", "import", *map(str, args)], capture_output=True, text=True, env=env
    )


def stored(path):
    return {t.source.origin_id: t for t in read_records(path)}


def kinds(report):
    return sorted((p.path.rsplit("/", 1)[1], p.where, p.kind) for p in report.problems)


def message(report, kind):
    [p] = [p for p in report.problems if p.kind == kind]
    return p.message


# -- lone surrogates --------------------------------------------------------------------


def test_a_lone_surrogate_is_replaced_warned_and_nothing_else_is_lost(tmp_path, wt_env):
    """`emoji cut \\ud83d here` (a JS tool cut an emoji in two) crashed the whole run with
    a UnicodeEncodeError, and no shard was written: not even another file's records."""
    good = tmp_path / "many.jsonl"
    good.write_text("".join(json.dumps(chat(f"g{i}")) + "\n" for i in range(200)))
    cut = chat("cut", "emoji cut \ud83d here")
    said = chat("said")
    said["messages"][1]["content"] = "thinking \udc00 cut"
    sur = tmp_path / "surrogate.jsonl"
    sur.write_text(
        json.dumps(chat("ok-1")) + "\n" + json.dumps(cut) + "\n" + json.dumps(said) + "\n"
    )
    assert "\\ud83d" in sur.read_text()
    r = cli(wt_env, "--workers", "2", good, sur)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    got = stored(f"{wt_env['WORLDTRACE_STORE']}/raw/import")
    assert len(got) == 203
    assert got["cut"].turns[0].observation.text == "emoji cut \ufffd here"
    assert got["said"].turns[0].reasoning == "thinking \ufffd cut"
    warned = [line for line in r.stderr.splitlines() if "lone_surrogate" in line]
    assert warned == [
        f"{sur}:line 2: lone_surrogate: a lone UTF-16 surrogate (half a character, e.g. "
        "an emoji cut in two) replaced by U+FFFD in turns[0].observation.text",
        f"{sur}:line 3: lone_surrogate: a lone UTF-16 surrogate (half a character, e.g. "
        "an emoji cut in two) replaced by U+FFFD in turns[0].reasoning",
    ]


def test_a_lone_surrogate_in_arguments_a_file_or_a_session_is_replaced(tmp_path):
    """Every importer's records go through the same mending: a JSON string inside a
    string (arguments), a whole .json file, a Claude Code session."""
    args = chat("args")
    args["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"cmd": "echo \\ud800"}'
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "args.jsonl").write_text(json.dumps(args) + "\n")
    (tmp_path / "in" / "list.json").write_text(json.dumps([chat("l0"), chat("l1", "x\udfff")]))
    s = Session()
    s.user("list the files \ud83d")
    s.say("m1", use("t1", "Bash", command="ls"))
    s.result("t1", "a.py", tur=shell("a.py"))
    s.say("m2", text("done"))
    s.write(tmp_path / "in" / "projects" / "-home-dev-calc" / f"{SID}.jsonl")
    r = import_paths([tmp_path / "in"], tmp_path / "out")
    assert r.imported == {"openai": 3, "claude-code": 1}
    assert r.errors == {} and r.warnings["lone_surrogate"] == 3
    got = stored(tmp_path / "out")
    assert json.loads(got["args"].turns[0].action.arguments_json) == {"cmd": "echo \ufffd"}
    assert got["l1"].turns[0].observation.text == "x\ufffd"
    [cc] = [t for o, t in got.items() if o not in ("args", "l0", "l1")]
    assert cc.task.instruction == "list the files \ufffd"
    where = {p.where for p in r.problems}
    assert {"line 1", "record 1"} <= where


# -- bytes that are not UTF-8 -----------------------------------------------------------


def test_bytes_that_are_not_utf8_are_located_and_cost_only_their_line(tmp_path):
    """A Latin-1 `café` was replaced by U+FFFD without a word: the training data changed."""
    f = tmp_path / "latin1.jsonl"
    lines = [json.dumps(chat(r)).encode() for r in ("a", "b", "c")]
    lines[1] = json.dumps(chat("b", "caf\u00e9"), ensure_ascii=False).encode("latin-1")
    f.write_bytes(b"\n".join(lines) + b"\n")
    g = tmp_path / "latin1.json"
    g.write_bytes(json.dumps(chat("d", "na\u00efve"), ensure_ascii=False).encode("cp1252"))
    r = import_paths([f, g], tmp_path / "out")
    assert sorted(stored(tmp_path / "out")) == ["a", "c"]
    assert kinds(r) == [("latin1.json", "line 1", "invalid_utf8"), ("latin1.jsonl", "line 2", "invalid_utf8")]  # fmt: skip
    col = lines[1].index(b"\xe9") + 1
    assert r.problems[0].message == (
        f"byte 0xe9 at column {col} is not UTF-8: the file is in another encoding "
        f"(Latin-1 or cp1252?); convert it: iconv -f cp1252 -t utf-8 {f} > {f}.utf8"
    )
    assert "byte 0xef at column" in r.problems[1].message
    cut = tmp_path / "cut.jsonl"  # the last line cut inside a character: not Latin-1
    last = json.dumps(chat("e", "\u00e9"), ensure_ascii=False).encode()
    cut.write_bytes(lines[0] + b"\n" + last[: last.index(b"\xc3") + 1])
    r = import_paths([cut], tmp_path / "out2")
    col = last.index(b"\xc3") + 1
    assert [str(p) for p in r.problems] == [
        f"{cut}:line 2: invalid_utf8: a character cut short at column {col} (the file may be truncated)"
    ]


def test_a_utf16_file_is_one_problem_saying_so(tmp_path):
    """What PowerShell 5's `>` writes: one `invalid_json` per line before, none naming
    the encoding."""
    body = "\n".join(json.dumps(chat(r)) for r in ("a", "b", "c")) + "\n"
    f = tmp_path / "u16.jsonl"
    f.write_bytes(body.encode("utf-16"))
    g = tmp_path / "u16.json"
    g.write_bytes(json.dumps(chat("d")).encode("utf-16-be").join([b"\xfe\xff", b""]))
    r = import_paths([f, g], tmp_path / "out")
    assert kinds(r) == [("u16.json", "", "invalid_utf8"), ("u16.jsonl", "", "invalid_utf8")]
    assert r.problems[0].message == (
        "the file is UTF-16 (it starts with a UTF-16 byte order mark; PowerShell 5 writes "
        f"it), not UTF-8: convert it: iconv -f utf-16 -t utf-8 {f} > {f}.utf8"
    )


# -- a UTF-8 byte order mark ------------------------------------------------------------


def test_a_utf8_bom_is_accepted_everywhere_files_are_read(tmp_path):
    """`invalid_json: unexpected UTF-8 BOM` cost the first record, and a Claude Code
    session began with no task; a Gemini CLI session with one was not even detected."""
    d = tmp_path / "in"
    (d / "projects" / "-home-dev-calc").mkdir(parents=True)
    bom = "\ufeff"
    (d / "bom.jsonl").write_text(bom + json.dumps(chat("j0")) + "\n" + json.dumps(chat("j1")))
    (d / "bom.json").write_text(bom + json.dumps(chat("doc")))
    s = Session()
    s.user("list the files")
    s.say("m1", use("t1", "Bash", command="ls"))
    s.result("t1", "a.py", tur=shell("a.py"))
    s.raw(bom)
    s.lines.insert(0, s.lines.pop())  # the mark first, then the events
    s.write(d / "projects" / "-home-dev-calc" / f"{SID}.jsonl")
    g = fix_session()
    write_jsonl(d / "session-2025-09-30T10-00-abc.jsonl", [bom, g.metadata(), *g.messages])
    r = import_paths([d], tmp_path / "out")
    assert r.problems == [] or all(not p.fatal for p in r.problems), r.problems
    assert r.imported == {"openai": 3, "claude-code": 1, "gemini-cli": 1}
    tasks = {t.source.origin_format: t.task.instruction for t in read_records(tmp_path / "out")}
    assert tasks["claude-code"] == "list the files"
    assert tasks["gemini-cli"] == "Fix the failing test in calc.py"


# -- numbers too large for a float ------------------------------------------------------


def test_a_number_too_large_for_a_float_is_invalid_json(tmp_path):
    """`1e400` became Infinity: arguments_json `{"x": Infinity}` (not JSON), an
    observation `-inf`, a reward Infinity with status success."""
    f = tmp_path / "big.jsonl"
    args = chat("args")
    args["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"x": "X"}
    lines = [
        json.dumps(args).replace('"X"', "1e400"),
        json.dumps(chat("obs", "X")).replace('"X"', "-1e999"),
        json.dumps(chat("fine", "X")).replace('"X"', "1.5e300"),
    ]
    f.write_text("\n".join(lines) + "\n")
    g = tmp_path / "reward.json"
    g.write_text('[{"task_id": 1,\n  "reward": 1e400, "traj": []}]')
    r = import_paths([f, g], tmp_path / "out")
    assert sorted(stored(tmp_path / "out")) == ["fine"]
    assert kinds(r) == [
        ("big.jsonl", "line 1", "invalid_json"),
        ("big.jsonl", "line 2", "invalid_json"),
        ("reward.json", "line 2", "invalid_json"),
    ]
    assert [p.message for p in r.problems] == [
        f"1e400 is too large for a number: it would be Infinity, not JSON (column {lines[0].index('1e400') + 1})",
        f"-1e999 is too large for a number: it would be -Infinity, not JSON (column {lines[1].index('-1e999') + 1})",
        "1e400 is too large for a number: it would be Infinity, not JSON (column 13)",
    ]  # fmt: skip


# -- what a walk does not read ----------------------------------------------------------


def test_a_walk_says_what_it_did_not_read(tmp_path, wt_env):
    """`x.jsonl.gz`, `rec.ndjson`, `UPPER.JSON` were passed over without a word."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text(json.dumps(chat("a")) + "\n")
    (d / "rec.ndjson").write_text(json.dumps(chat("nd")) + "\n" + json.dumps(chat("nd2")) + "\n")
    (d / "UPPER.JSON").write_text(json.dumps(chat("upper")))
    (d / "x.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    (d / "notes.txt").write_text("notes")
    (d / ".hidden.jsonl").write_text("{}\n")
    r = cli(wt_env, d)
    assert r.returncode == 0, r.stderr
    assert sorted(stored(f"{wt_env['WORLDTRACE_STORE']}/raw/import")) == ["a", "nd", "nd2", "upper"]
    assert r.stderr.splitlines() == [
        f"import: 2 file(s) not read under {d} (only .json, .jsonl, .ndjson and .traj files "
        f"are): {d}/notes.txt, {d}/x.jsonl.gz (compressed: decompress it first)"
    ]


def test_a_run_that_finds_nothing_to_import_says_why(tmp_path, wt_env):
    empty = tmp_path / "emptydir"
    empty.mkdir()
    r = cli(wt_env, empty)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"import: no file to import: {empty} holds no .json, .jsonl, .ndjson or .traj file"
    ]
    (empty / "notes.md").write_text("x")
    r = cli(wt_env, empty)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == (
        f"import: no file to import: {empty} holds no .json, .jsonl, .ndjson or .traj file"
        " (1 other file(s), listed above)"
    )


def test_a_compressed_file_named_is_called_compressed(tmp_path):
    """`invalid_json: expecting value` for a .gz named on the command line."""
    f = tmp_path / "x.jsonl.gz"
    f.write_bytes(gzip.compress((json.dumps(chat("a")) + "\n").encode()))
    g = tmp_path / "y.jsonl"  # compressed under a plain name
    g.write_bytes(f.read_bytes())
    r = import_paths([f, g], tmp_path / "out")
    assert kinds(r) == [("x.jsonl.gz", "", "compressed"), ("y.jsonl", "", "compressed")]
    assert (
        r.problems[0].message == f"the file is gzip-compressed: decompress it first (gunzip -k {f})"
    )
