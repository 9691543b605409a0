"""Review 1203b of `import`'s messages, as a new user met them: a JSONL file read as one
JSON document (a whole-file `--format`, or a `.json` name) and an empty file. Through
`import_paths` and the installed `worldtrace`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.importers import RECORD_FORMATS, ImportConfig, import_paths

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")


def chat(i: int) -> dict:
    """An OpenAI chat record with one tool call."""
    call = {"id": f"c{i}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls d{i}"})}}  # fmt: skip
    return {
        "id": f"t{i}",
        "messages": [
            {"role": "user", "content": f"list d{i}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"f{i}.txt"},
        ],
    }


def jsonl(path: Path, n: int = 3) -> Path:
    path.write_text("".join(json.dumps(chat(i)) + "\n" for i in range(n)))
    return path


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    env["WORLDTRACE_STORE"] = str(tmp_path / "store")
    return subprocess.run(
        [WT, *args, "--create"], capture_output=True, text=True, env=env, cwd=tmp_path
    )


# -- C17: JSONL under a format that reads one JSON document per file ----------------------


@pytest.mark.parametrize("fmt", ["atif", "swe-agent", "mini-swe-agent", "openhands-v1"])
def test_jsonl_under_a_whole_file_format_says_so(tmp_path, fmt):
    """Found: `import --format atif chat.jsonl` answered `chat.jsonl:line 2: invalid_json:
    extra data at column 1`, a message about the file's bytes; the format reads one JSON
    document per file and the file is JSONL."""
    f = jsonl(tmp_path / "chat.jsonl")
    r = import_paths([f], tmp_path / "out", ImportConfig(format=fmt))
    [p] = r.problems
    assert (p.kind, p.where) == ("invalid_json", "")  # the whole file, not its line 2
    assert str(p) == (
        f"{f}: invalid_json: --format {fmt} reads one JSON document per file, and this file "
        "looks like JSONL (a JSON value on each line: line 2 starts another): JSONL records "
        f"are read line by line with --format auto or a record format ({', '.join(RECORD_FORMATS)})"
    )


def test_the_cli_says_it_of_the_file_as_typed(tmp_path):
    jsonl(tmp_path / "chat.jsonl")
    r = run(tmp_path, "import", "--format", "atif", "chat.jsonl")
    assert r.returncode == 1, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("chat.jsonl")]
    assert line.startswith(
        "chat.jsonl: invalid_json: --format atif reads one JSON document per file, and this "
        "file looks like JSONL"
    ), line
    assert "extra data" not in r.stderr


@pytest.mark.parametrize("name", ["lines.json", "lines.traj"])
def test_jsonl_under_a_whole_file_name_says_to_rename_it(tmp_path, name):
    """`auto` reads a .json or .traj file whole: JSONL in one is named so, with the fix."""
    f = jsonl(tmp_path / name)
    [p] = import_paths([f], tmp_path / "out").problems
    suffix = name.rsplit(".", 1)[1]
    assert str(p) == (
        f"{f}: invalid_json: a .{suffix} file is read as one JSON document, and this file "
        "looks like JSONL (a JSON value on each line: line 2 starts another): name it .jsonl "
        "or .ndjson to read a record per line"
    )


def test_one_document_with_garbage_after_it_is_still_located(tmp_path):
    """Not every `extra data` is JSONL: a document followed by text that starts no value
    keeps the decoder's located message."""
    f = tmp_path / "doc.json"
    f.write_text(json.dumps(chat(0)) + "\nfoo\n")
    [p] = import_paths([f], tmp_path / "out").problems
    assert str(p) == f"{f}:line 2: invalid_json: extra data at column 1"
    g = tmp_path / "pretty.json"  # pretty-printed, then a second document: not JSONL
    g.write_text(json.dumps(chat(0), indent=1) + "\n" + json.dumps(chat(1)) + "\n")
    [p] = import_paths([g], tmp_path / "out2").problems
    assert p.where.startswith("line ") and "extra data" in p.message


# -- C19: an empty file has no line to cite -------------------------------------------------


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.json", "blank.jsonl"])
def test_an_empty_file_is_named_without_a_line(tmp_path, name):
    """Found: a 0-byte file was `empty.jsonl:line 1: empty_file: ...`: it has no line 1."""
    f = tmp_path / name
    f.write_text("\n \n" if name.startswith("blank") else "")
    [p] = import_paths([f], tmp_path / "out").problems
    assert (p.kind, p.where) == ("empty_file", "")
    assert str(p) == f"{f}: empty_file: the file holds no record"


def test_the_cli_names_an_empty_file_alone(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    r = run(tmp_path, "import", "empty.jsonl")
    assert r.returncode == 1
    assert "empty.jsonl: empty_file: the file holds no record" in r.stderr.splitlines()
    assert ":line 1" not in r.stderr
