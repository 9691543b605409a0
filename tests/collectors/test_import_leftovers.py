"""Three things `worldtrace import` got wrong (docs/importers.md): a tool result's
`status` read only in lower case (`ERROR` was a success) and an unknown one read as
success without a word; JSONL lines ending in a bare `\\r` (old Mac files) read as one
line; a step's reasoning dropped when its first call made no turn (OpenAI, ATIF)."""

from __future__ import annotations

import json
import lzma

from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records

from .conftest import found, import_written
from .test_import_unanswered import call as bash
from .test_import_value_types import chat


def stored(out):
    return {t.source.origin_id: t for t in read_records(out)}


# ---------------------------------------------------------------- 1. a result's status


def test_openai_status_is_read_in_any_case_and_an_unknown_one_is_named(tmp_path):
    records = [
        chat("upper", {"status": "ERROR"}),
        chat("title", {"status": "Error"}),
        chat("lower", {"status": "error"}),
        chat("success", {"status": "Success"}),  # LangChain's ToolMessage
        chat("completed", {"status": "completed"}),  # a Responses API item's
        chat("weird", {"status": "failed"}),
        chat("number", {"status": 500}),
        chat("none", {}),
    ]
    r, got = import_written(tmp_path, "chat.jsonl", records, lines=True)
    errors = {k: [x.observation.is_error for x in t.turns] for k, t in got.items()}
    assert errors == {
        "upper": [True], "title": [True], "lower": [True], "success": [False],
        "completed": [False], "weird": [False], "number": [False], "none": [False],
    }  # fmt: skip
    known = "error, success, completed, in_progress, incomplete"
    assert found(r, "unknown_status") == [
        ("line 6", f'messages[2].status: "failed" is none of {known}; not read as an error'),
        ("line 7", f"messages[2].status: 500 is none of {known}; not read as an error"),
    ]
    assert all(not p.fatal for p in r.problems)


def test_responses_function_call_output_status_is_read(tmp_path):
    """A `function_call_output` item's status is the result's: its own statuses say
    nothing of an error; another is named, one that says error is read as one."""

    def items(status):
        return [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x", "status": status},
        ]

    records = [{"id": s, "messages": items(s)} for s in ("incomplete", "ERROR", "weird")]
    r, got = import_written(tmp_path, "items.jsonl", records, lines=True)
    assert {k: t.turns[0].observation.is_error for k, t in got.items()} == {
        "incomplete": False, "ERROR": True, "weird": False,
    }  # fmt: skip
    assert [(w, m.split(" is ")[0]) for w, m in found(r, "unknown_status")] == [
        ("line 3", 'messages[2].status: "weird"'),
    ]


# ---------------------------------------------------------------- 2. line ends


def line(rid, pad=""):
    return json.dumps(chat(rid, {"content": f"out {rid}{pad}"})).encode()


def test_jsonl_lines_end_at_cr_crlf_and_lf_and_keep_their_numbers(tmp_path):
    f = tmp_path / "mac.jsonl"
    f.write_bytes(b"\r".join([line("a"), line("b"), b"{broken", line("c")]) + b"\r")
    g = tmp_path / "mixed.jsonl"  # \r\n, \r, \n and a blank \r line: each one line
    g.write_bytes(line("d") + b"\r\n" + line("e") + b"\r" + b"\r" + b"{bad\n" + line("f"))
    h = tmp_path / "latin1.jsonl"  # a byte that is not UTF-8, on line 2 of a \r file
    h.write_bytes(line("g") + b"\r" + line("h").replace(b"out h", b"caf\xe9") + b"\r" + line("i"))
    r = import_paths([f, g, h], tmp_path / "out")
    got = stored(tmp_path / "out")
    index = {k: t.source.origin_index for k, t in got.items()}
    assert index == {"a": 0, "b": 1, "c": 3, "d": 0, "e": 1, "f": 4, "g": 0, "i": 2}
    assert got["c"].turns[0].observation.text == "out c"
    assert sorted((p.path.rsplit("/", 1)[1], p.where, p.kind) for p in r.problems) == [
        ("latin1.jsonl", "line 2", "invalid_utf8"),
        ("mac.jsonl", "line 3", "invalid_json"),
        ("mixed.jsonl", "line 4", "invalid_json"),
    ]


def test_a_crlf_split_across_reads_is_one_line_end(tmp_path):
    """Lines are streamed in chunks: a `\\r` that ends one read and the `\\n` that starts
    the next are one line end, not an empty line between two (which would shift every
    later line's number)."""
    data = b""
    for k, boundary in enumerate((8192, 16384, 65536, 131072)):
        pad = "x" * (boundary - 1 - len(data) - len(line(str(k))))
        data += line(str(k), pad) + b"\r\n"
        assert data.index(b"\r\n", boundary - 2) == boundary - 1  # \r last, \n first
    f = tmp_path / "crlf.jsonl"
    f.write_bytes(data + line("last"))
    r = import_paths([f], tmp_path / "out")
    assert r.problems == []
    index = {k: t.source.origin_index for k, t in stored(tmp_path / "out").items()}
    assert index == {"0": 0, "1": 1, "2": 2, "3": 3, "last": 4}


def test_a_json_file_of_cr_lines_names_the_right_line(tmp_path):
    f = tmp_path / "mac.json"
    f.write_bytes(b'{\r  "id": "x",\r  "messages": [\r    nope\r  ]\r}\r')
    g = tmp_path / "mac_latin1.json"
    g.write_bytes(b'{\r  "id": "x",\r  "task": "caf\xe9"\r}')
    r = import_paths([f, g], tmp_path / "out")
    assert sorted((p.path.rsplit("/", 1)[1], p.where, p.message[:28]) for p in r.problems) == [
        ("mac.json", "line 4", "expecting value at column 5"),
        ("mac_latin1.json", "line 3", "byte 0xe9 at column 15 is no"),
    ]


def test_an_xz_file_is_called_compressed(tmp_path):
    """xz's magic is six bytes; only four were looked at, so an xz file was two lines of
    `invalid_utf8`."""
    f = tmp_path / "x.jsonl"
    f.write_bytes(lzma.compress(line("a") + b"\n"))
    r = import_paths([f], tmp_path / "out")
    assert [(p.kind, p.message) for p in r.problems] == [
        (
            "compressed",
            "the file is xz-compressed: decompress it first "
            f"(xz -dc {f} > {tmp_path / 'x.decompressed.jsonl'})",
        )
    ]


# ---------------------------------------------------------------- 3. a step's reasoning


def test_openai_reasoning_goes_to_the_first_call_that_makes_a_turn(tmp_path):
    msgs = [
        {"role": "user", "content": "look around"},
        {
            "role": "assistant",
            "content": "I will look first.",
            "reasoning_content": "both",
            "tool_calls": [bash("a", "ls"), bash("b", "pwd"), bash("c", "id")],
        },
        {"role": "tool", "tool_call_id": "b", "content": "/root"},  # a: unanswered
        {"role": "tool", "tool_call_id": "c", "content": "uid=0"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "again"},
                {"type": "tool_use", "id": "d", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "e", "name": "bash", "input": {"command": "df"}},
            ],
        },
        {"role": "tool", "tool_call_id": "d", "content": None},  # unknown: no turn
        {"role": "tool", "tool_call_id": "e", "content": "disk"},
    ]
    r, got = import_written(tmp_path, "chat.jsonl", [{"id": "o", "messages": msgs}], lines=True)
    assert [(x.action.text, x.reasoning) for x in got["o"].turns] == [
        ('bash({"command": "pwd"})', "both\n\nI will look first."),
        ('bash({"command": "id"})', None),
        ('bash({"command": "df"})', "again"),
    ]
    assert [w for _, w in found(r, "unpaired_call")] == [
        "no result for call 'a' (bash); no turn",
        "messages[5].content: null, the answer to call 'd' (bash) is unknown; no turn",
    ]


def test_atif_reasoning_goes_to_the_first_call_that_makes_a_turn(tmp_path):
    def call(cid, command):
        return {"tool_call_id": cid, "function_name": "bash", "arguments": {"command": command}}

    step = {"step_id": 2, "source": "agent", "message": "Let me see.", "reasoning_content": "think",
            "tool_calls": [call("a", "ls"), call("b", "pwd"), call("c", "id")],
            "observation": {"results": [{"source_call_id": "b", "content": "/root"},
                                        {"source_call_id": "c", "content": "uid=0"}]}}  # fmt: skip
    data = {
        "schema_version": "ATIF-v1.4",
        "session_id": "s",
        "agent": {"name": "some-agent", "version": "1", "model_name": "m"},
        "steps": [{"step_id": 1, "source": "user", "message": "look around"}, step],
    }
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(data))
    r = import_paths([f], tmp_path / "out")
    [t] = read_records(tmp_path / "out")
    assert [(x.action.text, x.reasoning) for x in t.turns] == [
        ('bash({"command": "pwd"})', "think\n\nLet me see."),
        ('bash({"command": "id"})', None),
    ]
    assert [(p.where, p.kind) for p in r.problems] == [("steps[1].tool_calls[0]", "unpaired_call")]
