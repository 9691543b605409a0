"""Left from hunt 1205: `import --format auto` called a bare list of OpenAI messages with
something else among its first three entries (what detection looks at) `unrecognized:
not a record of any known format`, and a `.json` file holding one was read as a list of
records, each `unrecognized`; the entry at fault is now named (`invalid`), as it is past
the first three. Through the real `worldtrace import` CLI."""

from __future__ import annotations

import json

import pytest

from .test_importers_1205 import run_import

USER = {"role": "user", "content": "list the files"}
ANSWER = {"role": "assistant", "content": "a.py"}


@pytest.mark.parametrize("name", ["chats.jsonl", "chat.json"])
@pytest.mark.parametrize(
    ("odd", "said"),
    [
        ("oops", 'expected an object, got "oops"'),
        (None, "expected an object, got null"),
        ({"text": "hi"}, 'expected a message with a "role", got {"text": "hi"}'),
    ],
    ids=["string", "null", "no-role"],
)
def test_bare_message_list_with_a_non_message_names_it(tmp_path, name, odd, said):
    """Before: `unrecognized: not a record of any known format` (JSONL), and one
    `unrecognized` a message for `.json` (`record 0`, `record 1`, ...)."""
    text = json.dumps([USER, odd, ANSWER])
    code, out, got = run_import(tmp_path, name, text + "\n" if name.endswith("l") else text)
    where = f"{name}:line 1" if name.endswith("l") else name
    assert f"{where}: invalid: messages[1]: {said} (taken for openai by a bare list" in out
    assert "unrecognized" not in out and "record 0" not in out
    assert code == 1 and not got


def test_json_list_of_records_is_still_a_list_of_records(tmp_path):
    """A `.json` list whose entries are records (no `role` among the first three) stays
    a list of records: each is imported or reported as its own."""
    call = {"id": "c0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    calls = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c0", "content": "a.py\n"}
    good = {"id": "r1", "messages": [USER, calls, result]}
    code, out, got = run_import(tmp_path, "runs.json", json.dumps([good, 5]))
    assert "runs.json:record 1: unrecognized: not a record of any known format" in out
    assert list(got) == ["r1"] and got["r1"].turns[0].observation.text == "a.py\n"
    assert code == 0  # something imported; `--strict` makes a problem exit 1


def test_list_of_numbers_stays_unrecognized(tmp_path):
    """Nothing of a message in it: no format is named."""
    code, out, _ = run_import(tmp_path, "nums.jsonl", "[1, 2]\n")
    assert "nums.jsonl:line 1: unrecognized: not a record of any known format" in out
    assert "taken for" not in out and code == 1
