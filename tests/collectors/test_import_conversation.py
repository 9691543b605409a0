"""What the agent and its user said to each other, imported as OpenAI's importer does
(tests/collectors/test_import_fidelity.py): an agent message the user answers is a
`text` turn with the replies as its observation, in order among the tool calls; the
agent's unanswered last word is metadata `final_message`; what fits neither is named in
a `message_not_imported` warning. ATIF and ShareGPT, in our own fixtures."""

from __future__ import annotations

import json
from datetime import datetime

from worldtrace.schemas import validate_dict

from .test_import_fidelity import items


def turns(t):
    return [(x.action.kind, x.action.text, x.observation.text) for x in t.turns]


ATIF = {
    "schema_version": "ATIF-v1.5",
    "session_id": "talk-1",
    "agent": {"name": "terminus", "version": "2", "model_name": "m"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are a terminal agent."},
        {"step_id": 2, "source": "user", "message": "Make a hello file."},
        {"step_id": 3, "timestamp": "2025-10-11T10:30:00Z", "source": "agent",
         "message": "In which directory?", "reasoning_content": "need the place"},
        {"step_id": 4, "source": "user", "message": "/tmp"},
        {"step_id": 5, "source": "user", "message": "and call it hello.txt"},  # two replies
        {"step_id": 6, "timestamp": "2025-10-11T10:30:05Z", "source": "agent",
         "message": "Creating it.", "reasoning_content": "touch it",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "bash",
                         "arguments": {"command": "touch /tmp/hello.txt && ls /tmp"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "hello.txt"}]}},
        {"step_id": 7, "source": "user", "message": "hello?"},  # answers no agent message
        {"step_id": 8, "source": "system", "message": "reminder"},  # a later system step
        {"step_id": 9, "source": "agent", "message": "Done."},  # no user answered it
        {"step_id": 10, "source": "agent", "message": "Anything else?"},  # the last word
    ],
}  # fmt: skip


def test_atif_what_the_agent_and_its_user_said_are_turns_in_order(tmp_path):
    f = tmp_path / "trajectory.json"
    f.write_text(json.dumps(ATIF))
    [t], problems = items(f)
    assert turns(t) == [
        ("text", "In which directory?", "/tmp\nand call it hello.txt"),
        ("tool_call", 'bash({"command": "touch /tmp/hello.txt && ls /tmp"})', "hello.txt"),
    ]
    assert [x.reasoning for x in t.turns] == ["need the place", "touch it\n\nCreating it."]
    assert [x.started_at for x in t.turns] == [
        datetime.fromisoformat("2025-10-11T10:30:00+00:00"),
        datetime.fromisoformat("2025-10-11T10:30:05+00:00"),
    ]
    assert t.task.instruction == "Make a hello file."
    assert t.metadata["agent_system_prompt"] == "You are a terminal agent."
    assert t.metadata["final_message"] == "Anything else?"
    assert sorted((p.where, p.kind, p.message) for p in problems) == [
        ("steps[6]", "message_not_imported", "a user message that answers no agent message; not imported"),
        ("steps[7]", "message_not_imported", "a system message after the first; not imported"),
        ("steps[8]", "message_not_imported", "an agent message no user answered; not imported"),
    ]  # fmt: skip
    assert all(not p.fatal and str(f) in str(p) for p in problems)
    assert validate_dict(t.to_dict()) == []


SHAREGPT = {
    "id": "talk-2",
    "tools": json.dumps([{"name": "search"}]),
    "conversations": [
        {"from": "system", "value": "You answer questions about books."},
        {"from": "human", "value": "Who wrote Dune?"},
        {"from": "gpt", "value": "The novel or the film?"},
        {"from": "human", "value": "The novel."},
        {"from": "human", "value": "The 1965 one."},  # two replies: one observation
        {"from": "gpt", "value": "I should search."},  # before a call: its reasoning
        {"from": "function_call", "value": json.dumps({"name": "search", "arguments": {"q": "Dune 1965"}})},
        {"from": "observation", "value": "Frank Herbert wrote Dune (1965)."},
        {"from": "human", "value": "hello?"},  # answers no agent message
        {"from": "gpt", "value": "Frank Herbert."},  # no user answered it, not the last
        {"from": "gpt", "value": "Anything else?"},  # the last word
    ],
}  # fmt: skip


def test_sharegpt_what_the_agent_and_its_user_said_are_turns_in_order(tmp_path):
    f = tmp_path / "talk.json"
    f.write_text(json.dumps(SHAREGPT))
    [t], problems = items(f)
    assert turns(t) == [
        ("text", "The novel or the film?", "The novel.\nThe 1965 one."),
        ("tool_call", 'search({"q": "Dune 1965"})', "Frank Herbert wrote Dune (1965)."),
    ]
    # what the user answered is no call's reasoning; the prose right before the call is
    assert [x.reasoning for x in t.turns] == [None, "I should search."]
    assert t.task.instruction == "Who wrote Dune?"
    assert t.metadata["final_message"] == "Anything else?"
    assert sorted((p.kind, p.message) for p in problems) == [
        ("message_not_imported", "conversations[8]: a user message that answers no agent message; not imported"),
        ("message_not_imported", "conversations[9]: an agent message no user answered; not imported"),
    ]  # fmt: skip
    assert all(not p.fatal and str(f) in str(p) for p in problems)
    assert validate_dict(t.to_dict()) == []


def test_sharegpt_prose_before_a_call_is_reasoning_not_a_final_message(tmp_path):
    conv = [
        {"from": "human", "value": "Who wrote Dune?"},
        {"from": "gpt", "value": "Let me think."},
        {"from": "gpt", "value": "I should search."},  # both before the call: reasoning
        {"from": "function_call", "value": json.dumps({"name": "search", "arguments": {}})},
        {"from": "observation", "value": "Frank Herbert"},
    ]
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"id": "s", "conversations": conv}) + "\n")
    [t], problems = items(f)
    assert turns(t) == [("tool_call", "search({})", "Frank Herbert")]
    assert t.turns[0].reasoning == "Let me think.\n\nI should search."
    assert "final_message" not in t.metadata and problems == []
