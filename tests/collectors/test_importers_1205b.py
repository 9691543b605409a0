"""Left over from hunt 1205 (test_importers_1205.py): the OpenAI importer passed over a
message that is not an object, and read a null system message as the empty prompt, as
mini-swe-agent did; `tool_call` called any arguments that are not a mapping "NaN or an
infinity". Importers through the real `worldtrace import` CLI, `tool_call` itself."""

from __future__ import annotations

import json
import math

import pytest
from worldtrace.schemas.actions import tool_call

from .test_importers_1205 import run_import


def chat(system="You are a shell agent."):
    """An OpenAI chat record: a system prompt, the task, one call and its result."""
    call = {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return {
        "id": "r1",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": "a.py\n"},
        ],
    }


# ------------------------------------------------------------- (a) OpenAI: a message no object


@pytest.mark.parametrize(
    ("bad", "shown"), [("hello", '"hello"'), (None, "null"), ([1], "[1]")], ids=str
)
def test_openai_message_that_is_no_object_is_invalid_naming_it(tmp_path, bad, shown):
    """Before: passed over in silence (the record imported without it), where
    mini-swe-agent now says `invalid`."""
    d = chat()
    d["messages"].insert(3, bad)
    code, out, got = run_import(tmp_path, "chats.jsonl", json.dumps(d) + "\n")
    assert f"chats.jsonl:line 1: invalid: messages[3]: expected an object, got {shown}" in out
    assert code == 1 and not got


def test_openai_bare_message_list_with_a_string_is_invalid(tmp_path):
    """A bare message list (no `messages` key) names the same index."""
    msgs = [*chat()["messages"][:3], "x", *chat()["messages"][3:]]
    code, out, got = run_import(tmp_path, "chat.json", json.dumps(msgs))
    assert 'chat.json: invalid: messages[3]: expected an object, got "x"' in out
    assert code == 1 and not got


# ------------------------------------------------------------- (b) a null system prompt


@pytest.mark.parametrize("role", ["system", "developer"])
def test_openai_null_system_prompt_is_unknown_and_said(tmp_path, role):
    """Before: imported in silence as agent_system_prompt "" (an empty prompt, which the
    record does not say)."""
    d = chat(system=None)
    d["messages"][0]["role"] = role
    code, out, got = run_import(tmp_path, "chats.jsonl", json.dumps(d) + "\n")
    assert code == 0, out
    assert (
        "chats.jsonl:line 1: message_not_imported: messages[0].content: null, the system"
        " prompt is unknown (no agent_system_prompt); not imported"
    ) in out
    t = got["r1"]
    assert "agent_system_prompt" not in t.metadata
    assert [x.observation.text for x in t.turns] == ["a.py\n"]


def test_openai_empty_system_prompt_stays_empty(tmp_path):
    """A real "" is a prompt that was empty: kept, no warning."""
    code, out, got = run_import(tmp_path, "chats.jsonl", json.dumps(chat(system="")) + "\n")
    assert code == 0 and "message_not_imported" not in out, out
    assert got["r1"].metadata.get("agent_system_prompt", "") == ""


def mini(system):
    """A mini-swe-agent run (a bare message list): system prompt, task, one command."""
    return json.dumps(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": "Please solve this issue: fix it"},
            {"role": "assistant", "content": "Look.\n\n```mswea_bash_command\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "system", "content": "a later system message"},
        ]
    )


def test_mini_swe_agent_null_system_prompt_is_unknown_and_said(tmp_path):
    """Before: imported in silence as agent_system_prompt ""."""
    code, out, got = run_import(tmp_path, "run.traj.json", mini(None))
    assert code == 0, out
    assert (
        "run.traj.json: message_not_imported: messages[0].content: null, the system prompt"
        " is unknown (no agent_system_prompt); not imported"
    ) in out
    t = got["run"]
    assert "agent_system_prompt" not in t.metadata  # nor the later system message
    assert [x.observation.text for x in t.turns] == ["a.py\n"]


def test_mini_swe_agent_system_prompt_is_the_first(tmp_path):
    code, out, got = run_import(tmp_path, "run.traj.json", mini("You are a helper."))
    assert code == 0 and "message_not_imported" not in out, out
    assert got["run"].metadata["agent_system_prompt"] == "You are a helper."


# ------------------------------------------------------------- (c) tool_call's arguments


@pytest.mark.parametrize(
    ("arguments", "what"),
    [
        ([1, 2], "a JSON array"),
        ([["a", 1]], "a JSON array"),  # dict() would have read it as {"a": 1}
        ("ab", "a string"),
        ("", "a string"),
        (7, "a number"),
        (True, "a boolean"),
        ([], "a JSON array"),
    ],
    ids=repr,
)
def test_tool_call_arguments_that_are_no_mapping_are_named(arguments, what):
    """Before: "NaN or an infinity" (a string, a list of pairs coerced, a list of numbers a
    TypeError)."""
    with pytest.raises(ValueError) as err:
        tool_call("t", arguments)
    assert str(err.value) == f"tool call t: its arguments must be a JSON object, got {what}"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_tool_call_nan_is_still_said_so(bad):
    with pytest.raises(ValueError, match="NaN or an infinity"):
        tool_call("t", {"x": [bad]})


def test_tool_call_none_is_no_arguments():
    assert tool_call("t", None).arguments_json == "{}"
    assert tool_call("t", {"b": 1, "a": 2}).arguments_json == '{"a": 2, "b": 1}'
