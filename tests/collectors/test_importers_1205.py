"""Found (a tester's import session, 2026-12-05): mini-swe-agent messages and SWE-agent
steps of the wrong type were skipped or coerced instead of named; a null SWE-agent system
prompt was imported as an empty one; a JSONL line holding a list of records was called
`not a record of any known format`; a call id 7 answered as "7" was warned unpaired.
Each is reproduced through the real `worldtrace import` CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from worldtrace.schemas import read_records

from worldtrace.cli import cli


def run_import(tmp_path, name, text):
    """(exit code, the CLI's output, imported trajectories by origin id) of `worldtrace
    import` of one file `name` holding `text`."""
    f = tmp_path / "in" / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    store = tmp_path / "store"
    args = ["--store", str(store), "--create", "import", "--show", "50", str(f)]
    res = CliRunner().invoke(cli, args, obj={}, terminal_width=400)
    raw = store / "raw" / "import"
    got = {t.source.origin_id: t for t in read_records(raw)} if any(raw.glob("*")) else {}
    return res.exit_code, " ".join(res.output.split()), got


# ------------------------------------------------------------- F3: mini-swe-agent messages


def mini(**change):
    """A mini-swe-agent v2 run as a bare message list (the shape of its local
    `.traj.json`): one command and its output, then the submission; `change`:
    `m<index>_<key>=value` sets one field of one message."""
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: fix it"},
        {"role": "assistant", "content": "Look first.\n\n```mswea_bash_command\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
        {"role": "assistant", "content": "Done.\n\n```mswea_bash_command\ncat a.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx = 1\n</output>"},
    ]
    for key, value in change.items():
        at, field = key.split("_", 1)
        msgs[int(at[1:])][field] = value
    return json.dumps(msgs)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"m2_role": 5}, "messages[2].role: expected a string, got 5"),
        ({"m3_role": ["user"]}, 'messages[3].role: expected a string, got ["user"]'),
    ],
    ids=["assistant-role-5", "user-role-list"],
)
def test_mini_swe_agent_role_of_the_wrong_type_is_invalid_naming_it(tmp_path, change, problem):
    """Before: role 5 left no assistant message (`empty`, no field named) and ["user"] left
    the command unanswered (`unpaired_call`); as in the OpenAI importer, a role is a
    string."""
    code, out, got = run_import(tmp_path, "run.traj.json", mini(**change))
    assert f"run.traj.json: invalid: {problem}" in out
    assert "empty" not in out and "unpaired_call" not in out
    assert code == 1 and not got


def test_mini_swe_agent_message_that_is_no_object_is_invalid_naming_it(tmp_path):
    """Before: a message that is a string was passed over and its command's answer lost."""
    msgs = json.loads(mini())
    msgs[3] = "hello"
    code, out, got = run_import(tmp_path, "run.traj.json", json.dumps(msgs))
    assert 'run.traj.json: invalid: messages[3]: expected an object, got "hello"' in out
    assert code == 1 and not got


def test_mini_swe_agent_number_content_is_its_text_as_in_openai(tmp_path):
    """Documented for message content in every format (docs/importers.md): a number is
    its JSON text, as the OpenAI importer reads it; the well-typed run imports."""
    code, out, got = run_import(tmp_path, "run.traj.json", mini(m3_content=42))
    assert code == 0, out
    assert [t.observation.text for t in got["run"].turns] == ["42", "x = 1\n"]


# ---------------------------------------------------------------------- F4: SWE-agent .traj


def swe(steps=None, system="COMMANDS:\nopen:\n  docstring: opens a file\n  signature: open <f>\n"):
    """A SWE-agent 0.x `.traj`: a system prompt documenting `open`, the task, two steps."""
    steps = steps or [
        {"action": "open a.py\n", "observation": "1: x = 1", "thought": "look", "state": "{}"},
        {"action": "submit\n", "observation": "diff", "thought": "done", "state": "{}"},
    ]
    history = [
        {"role": "system", "content": system},
        {"role": "user", "content": "fix a.py"},
    ]
    return {"environment": "swe_main", "trajectory": steps, "history": history, "info": {}}


def test_swe_agent_step_that_is_no_object_is_invalid_naming_it(tmp_path):
    """Before: `missing_field: trajectory[0] has no `action``, as if a key were missing."""
    d = swe()
    d["trajectory"][0] = "step"
    code, out, got = run_import(tmp_path, "run.traj", json.dumps(d))
    assert 'run.traj: invalid: trajectory[0]: expected an object, got "step"' in out
    assert "missing_field" not in out and code == 1 and not got


def test_swe_agent_observation_of_the_wrong_type_is_invalid_naming_it(tmp_path):
    """Before: an observation 123 was imported as the text "123", with no word."""
    d = swe()
    d["trajectory"][0]["observation"] = 123
    code, out, got = run_import(tmp_path, "run.traj", json.dumps(d))
    assert "run.traj: invalid: trajectory[0].observation: expected a string, got 123" in out
    assert code == 1 and not got


def test_swe_agent_null_system_prompt_is_unknown_and_said(tmp_path):
    """Before: a null system message imported in silence as an empty prompt (""), and the
    action space it documents was gone without a word. As a null answer is unknown (the
    OpenAI importer's null `tool` content), so is a null prompt: said, never ""."""
    d = swe(system=None)
    code, out, got = run_import(tmp_path, "run.traj", json.dumps(d))
    assert code == 0, out
    assert (
        "run.traj: message_not_imported: history[0].content: null, the system prompt is"
        " unknown (no agent_system_prompt, no action space read from it); not imported"
    ) in out
    t = got["run"]
    assert "agent_system_prompt" not in t.metadata and t.system.action_space is None
    assert [x.action.text for x in t.turns] == ["open a.py", "submit"]


# ------------------------------------------------------------- F5: a list on a JSONL line


def chat(rid, call_id="c0", result_id="c0"):
    """An OpenAI record: the task, one call (id `call_id`), its result (`result_id`)."""
    call = {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "ls"}'}}  # fmt: skip
    return {
        "id": rid,
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": result_id, "content": "a.txt"},
        ],
    }


def test_a_jsonl_line_holding_a_list_of_records_is_named_so(tmp_path):
    """Before: `unrecognized: not a record of any known format`, though each item is one.
    JSONL holds a record per line (its origin index and `line N` name one record), so
    the line is not read as records; the problem says what it holds and what to do."""
    lines = [json.dumps([chat("a"), chat("b")]), json.dumps(chat("c"))]
    code, out, got = run_import(tmp_path, "chats.jsonl", "\n".join(lines) + "\n")
    assert (
        "chats.jsonl:line 1: unrecognized: a list of 2 openai records on one line: JSONL"
        " holds one record per line; write one record per line, or name the file .json (one"
        " record or a list)"
    ) in out
    assert "not a record of any known format" not in out
    assert code == 0 and set(got) == {"c"}


# ------------------------------------------------------------- F7: numeric call ids


def test_a_numeric_call_id_answered_by_its_string_pairs_without_a_warning(tmp_path):
    """Before: id 7 answered by tool_call_id "7" paired by position and warned
    `unpaired_result: ... '7' matches no open call`. Ids are strings or numbers, as
    written: 7 and "7" are one id."""
    records = [chat("n", call_id=7, result_id="7"), chat("s", call_id="7", result_id=7)]
    code, out, got = run_import(
        tmp_path, "chats.jsonl", "".join(json.dumps(r) + "\n" for r in records)
    )
    assert code == 0 and "unpaired" not in out, out
    assert [t.observation.text for t in got["n"].turns] == ["a.txt"]
    assert [t.observation.text for t in got["s"].turns] == ["a.txt"]
