"""The OpenAI importer's dialects (collectors/importers/openai.py), each read with the
same record kinds and pairing rules: Anthropic Messages (`tool_use` / `tool_result` /
`thinking` content blocks, a top-level `system`), the legacy functions API, the
Responses API's items, and the roles other chat logs use (`developer`, `ipython`,
refusals). Our own fixtures."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.sandboxes.base import ToolSpec
from worldtrace.schemas import read_records, validate_dict

from .test_import_fidelity import items


def turns(t):
    return [(x.action.kind, x.action.text, x.observation.text) for x in t.turns]


def imported(tmp_path, record, name="anthropic.jsonl"):
    f = tmp_path / name
    f.write_text(json.dumps(record) + "\n" if name.endswith(".jsonl") else json.dumps(record))
    trajs, problems = items(f)
    for t in trajs:
        assert validate_dict(t.to_dict()) == []
    return trajs, problems


def said(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def text(s):
    return {"type": "text", "text": s}


def use(cid, name, **args):
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


def answer(cid, content, **extra):
    return {"type": "tool_result", "tool_use_id": cid, "content": content, **extra}


def results(*blocks):
    return {"role": "user", "content": list(blocks)}


BASH = {
    "name": "bash",
    "description": "run",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
RECORD = {
    "id": "a1",
    "system": "You are a coding agent.",
    "tools": [BASH],
    "messages": [
        {"role": "user", "content": "List files"},
        said(text("I'll list."), use("toolu_1", "bash", command="ls")),
        results(answer("toolu_1", [text("a.txt\nb.txt")])),
        said(text("Two files.")),
    ],
}


def test_a_tool_use_is_a_turn_its_tool_result_the_observation(tmp_path):
    [t], problems = imported(tmp_path, RECORD)
    assert problems == []
    assert turns(t) == [("tool_call", 'bash({"command": "ls"})', "a.txt\nb.txt")]
    [turn] = t.turns
    assert (turn.action.name, json.loads(turn.action.arguments_json)) == ("bash", {"command": "ls"})
    assert turn.reasoning == "I'll list." and turn.observation.is_error is False
    assert t.metadata["final_message"] == "Two files."
    assert t.metadata["agent_system_prompt"] == "You are a coding agent."
    assert t.task.instruction == "List files"
    assert (t.domain, t.source.origin_format, t.source.origin_id) == ("terminal", "openai", "a1")
    [spec] = [ToolSpec.from_dict(x) for x in json.loads(t.system.action_space)]
    assert (spec.name, spec.input_schema) == ("bash", BASH["input_schema"])


def test_a_bare_list_of_messages_and_a_system_of_text_blocks(tmp_path):
    [t], problems = imported(tmp_path, RECORD["messages"], name="bare.json")
    assert problems == [] and turns(t) == [("tool_call", 'bash({"command": "ls"})', "a.txt\nb.txt")]
    record = {**RECORD, "system": [text("You are"), text("a coding agent.")]}
    [t], problems = imported(tmp_path, record)
    assert problems == [] and t.metadata["agent_system_prompt"] == "You are\na coding agent."


@pytest.mark.parametrize("order", [("t1", "t2"), ("t2", "t1")], ids=["in_order", "by_id"])
def test_parallel_tool_uses_are_answered_by_their_ids(tmp_path, order):
    out = {"t1": "a.txt", "t2": "/repo"}
    msgs = [
        {"role": "user", "content": "Where am I, what is here?"},
        said(use("t1", "bash", command="ls"), use("t2", "bash", command="pwd")),
        results(*(answer(cid, out[cid]) for cid in order)),
    ]
    [t], problems = imported(tmp_path, {"id": "p", "messages": msgs})
    assert problems == []
    assert turns(t) == [
        ("tool_call", 'bash({"command": "ls"})', "a.txt"),
        ("tool_call", 'bash({"command": "pwd"})', "/repo"),
    ]
    assert [x.reasoning for x in t.turns] == [None, None]


def test_string_content_and_is_error(tmp_path):
    msgs = [
        {"role": "user", "content": "Read it"},
        said(use("t1", "read_file", path="a.txt"), use("t2", "read_file", path="b.txt")),
        results(answer("t1", "hello"), answer("t2", "no such file", is_error=True)),
    ]
    [t], problems = imported(tmp_path, {"id": "s", "messages": msgs})
    assert problems == []
    assert [(x.observation.text, x.observation.is_error) for x in t.turns] == [
        ("hello", False),
        ("no such file", True),
    ]
    assert t.domain == "swe"


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


def test_an_image_in_a_tool_result_adds_no_text_and_is_reported(tmp_path):
    msgs = [
        {"role": "user", "content": "Screenshot"},
        said(use("t1", "screenshot")),
        results(answer("t1", [text("taken"), IMAGE, text("800x600")])),
    ]
    [t], problems = imported(tmp_path, {"id": "i", "messages": msgs})
    assert turns(t) == [("tool_call", "screenshot({})", "taken\n800x600")]
    assert [(p.kind, p.fatal, p.message) for p in problems] == [
        (
            "non_text_part",
            False,
            "turn 0 observation (messages[2].content[0].content): 1 image part not imported",
        )
    ]


@pytest.mark.parametrize("value", ["ls", ["ls"], 42])
def test_an_input_that_is_not_an_object_refuses_the_record(tmp_path, value):
    record = json.loads(json.dumps(RECORD))
    record["messages"][1]["content"][1]["input"] = value
    trajs, problems = imported(tmp_path, record)
    assert trajs == []
    assert [(p.kind, p.where, p.message) for p in problems] == [
        (
            "invalid",
            "line 1",
            f"messages[1].content[1].input: expected an object, got {json.dumps(value)}",
        )
    ]


def test_thinking_is_reasoning_and_a_user_reply_is_a_text_turn(tmp_path):
    msgs = [
        {"role": "user", "content": "Clean up"},
        said({"type": "thinking", "thinking": "which dir?", "signature": "sig"}, text("Which directory?")),
        {"role": "user", "content": [text("/tmp")]},
        said({"type": "redacted_thinking", "data": "opaque"},
             {"type": "thinking", "thinking": "remove the logs"},
             text("Removing them."),
             use("t1", "bash", command="rm /tmp/*.log")),
        results(answer("t1", "")),
        said({"type": "redacted_thinking", "data": "opaque"}, text("Done.")),
    ]  # fmt: skip
    [t], problems = imported(tmp_path, {"id": "c", "messages": msgs})
    assert problems == []  # redacted thinking holds no text to import: not reported
    assert turns(t) == [
        ("text", "Which directory?", "/tmp"),
        ("tool_call", 'bash({"command": "rm /tmp/*.log"})', ""),
    ]
    assert [x.reasoning for x in t.turns] == ["which dir?", "remove the logs\n\nRemoving them."]
    assert t.metadata["final_message"] == "Done."
    assert t.task.instruction == "Clean up"


def test_a_user_message_of_tool_results_only_is_not_a_reply(tmp_path):
    """A result with no open call is reported (not joined), and is neither part of the
    reply of a `text` turn nor a user message not imported."""
    msgs = [
        {"role": "user", "content": "Hi"},
        said(text("Hello, what now?")),
        {"role": "user", "content": "List files"},
        results(answer("t9", "stale")),
        said(use("t1", "bash", command="ls")),
        results(answer("t1", "a.txt")),
    ]
    [t], problems = imported(tmp_path, {"id": "r", "messages": msgs})
    assert turns(t) == [
        ("text", "Hello, what now?", "List files"),
        ("tool_call", 'bash({"command": "ls"})', "a.txt"),
    ]
    assert [(p.kind, p.message) for p in problems] == [
        ("unpaired_result", "messages[3].content[0]: result 't9' answers no open call")
    ]


def test_results_with_user_text_answer_calls_and_the_text_is_a_user_message(tmp_path):
    msgs = [
        {"role": "user", "content": "List files"},
        said(use("t1", "bash", command="ls")),
        results(answer("t1", "a.txt"), text("also show hidden ones")),
        said(use("t2", "bash", command="ls -a")),
        results(answer("t2", ".env\na.txt")),
    ]
    [t], problems = imported(tmp_path, {"id": "m", "messages": msgs})
    assert turns(t) == [
        ("tool_call", 'bash({"command": "ls"})', "a.txt"),
        ("tool_call", 'bash({"command": "ls -a"})', ".env\na.txt"),
    ]
    assert [(p.kind, p.message) for p in problems] == [
        (
            "message_not_imported",
            "messages[2]: a user message that answers no agent message; not imported",
        )
    ]


def test_unknown_ids_and_mixed_dialects_pair_as_openai_results_do(tmp_path):
    msgs = [
        {"role": "user", "content": "Go"},
        said(use("t1", "bash", command="ls")),
        results(answer("zz", "a.txt")),  # an unknown id answers the first open call
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c2", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}]},
        results(answer("c2", "/repo")),  # an OpenAI call, an Anthropic result
        said(use("t3", "bash", command="whoami")),
        {"role": "tool", "tool_call_id": "t3", "content": "me"},  # and the other way round
    ]  # fmt: skip
    [t], problems = imported(tmp_path, {"id": "x", "messages": msgs})
    assert [x.observation.text for x in t.turns] == ["a.txt", "/repo", "me"]
    assert [(p.kind, p.message) for p in problems] == [
        (
            "unpaired_result",
            "messages[2].content[0]: tool_use_id 'zz' matches no open call;"
            " paired with open call 't1' (bash), the first no later result names by id",
        )
    ]


def test_cli_imports_the_record_without_a_warning(tmp_path, wt_env):
    f = tmp_path / "anth.json"
    f.write_text(json.dumps(RECORD))
    r = subprocess.run(["worldtrace", "import", str(f)], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "warning" not in r.stdout
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert turns(t) == [("tool_call", 'bash({"command": "ls"})', "a.txt\nb.txt")]
    assert t.metadata["final_message"] == "Two files."


def test_an_agent_message_a_stray_result_follows_is_reported_not_lost(tmp_path):
    """Found: an agent message that a tool result answering no call followed, with nothing
    after it, was neither a turn, nor the final message, nor reported: it vanished."""
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Let me check the weather."},
        {"role": "tool", "tool_call_id": "c9", "content": "sunny"},
    ]
    f = tmp_path / "stray.json"
    f.write_text(json.dumps({"id": "s", "messages": msgs}))
    [t], problems = items(f)
    assert t.turns == [] and "final_message" not in t.metadata
    assert sorted(p.message for p in problems) == [
        "messages[1]: an agent message no user answered; not imported",
        "messages[2]: result 'c9' answers no open call",
    ]


def test_the_legacy_functions_api_is_read_as_tool_calls(tmp_path):
    """Found: chat logs of OpenAI's functions API (before `tools`: an assistant
    `function_call`, answered by a `function` message with its name; `functions` the
    action space), as older function-calling datasets keep them, were refused as
    `empty`: no (action, observation) pair found."""
    rec = {
        "id": "legacy",
        "functions": [{"name": "get_weather", "description": "now",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None,
             "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"role": "function", "name": "get_weather", "content": '{"temp": -3}'},
            {"role": "assistant", "content": "Checking Bergen too.",
             "function_call": {"name": "get_weather", "arguments": '{"city": "Bergen"}'}},
            {"role": "function", "name": "get_weather", "content": '{"temp": 4}'},
            {"role": "assistant", "content": "Oslo -3 C, Bergen 4 C."},
        ],
    }  # fmt: skip
    f = tmp_path / "legacy.json"
    f.write_text(json.dumps(rec))
    [t], problems = items(f)
    assert problems == []
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ('get_weather({"city": "Oslo"})', '{"temp": -3}'),
        ('get_weather({"city": "Bergen"})', '{"temp": 4}'),
    ]
    assert t.turns[1].reasoning == "Checking Bergen too."
    assert t.metadata["final_message"] == "Oslo -3 C, Bergen 4 C."
    assert [s["name"] for s in json.loads(t.system.action_space)] == ["get_weather"]
    assert validate_dict(t.to_dict()) == []
    rec["messages"][1]["function_call"] = "get_weather"
    f.write_text(json.dumps(rec))
    assert [str(p) for p in items(f)[1]] == [
        f'{f}: invalid: messages[1].function_call: expected an object, got "get_weather"'
    ]


def _import(tmp_path, msgs):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"id": "r", "messages": msgs}))
    [t], problems = items(f)
    assert validate_dict(t.to_dict()) == []
    return t, problems


LS = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"c": "ls"}'}}


def test_a_developer_message_is_the_system_prompt(tmp_path):
    """Found: the `developer` role (newer OpenAI models' system message) was skipped: the
    agent's system prompt was lost without a word."""
    t, problems = _import(tmp_path, [
        {"role": "developer", "content": "You are a shell agent."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [LS]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ])  # fmt: skip
    assert problems == [] and t.metadata["agent_system_prompt"] == "You are a shell agent."


def test_a_refusal_is_what_the_agent_said(tmp_path):
    """Found: an assistant message with `content: null` and a `refusal` was empty: the
    user's answer to it was reported as answering no agent message, and a refusal as the
    last word vanished."""
    t, problems = _import(tmp_path, [
        {"role": "user", "content": "hack the server"},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "ok then list files"},
        {"role": "assistant", "content": None, "tool_calls": [LS]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": None, "refusal": "I won't delete it."},
    ])  # fmt: skip
    assert problems == []
    assert [(x.action.kind, x.action.text, x.observation.text) for x in t.turns] == [
        ("text", "I can't help with that.", "ok then list files"),
        ("tool_call", 'bash({"c": "ls"})', "a.txt"),
    ]
    assert t.metadata["final_message"] == "I won't delete it."


def test_an_ipython_message_is_the_tool_result(tmp_path):
    """Found: Llama 3 chat logs answer a call with `role: ipython`; the result was lost
    (`unpaired_call`) and the message never mentioned."""
    t, problems = _import(tmp_path, [
        {"role": "user", "content": "weather in SF?"},
        {"role": "assistant", "content": "", "tool_calls": [LS]},
        {"role": "ipython", "content": '{"temp": 18}'},
        {"role": "assistant", "content": "It is 18C."},
    ])  # fmt: skip
    assert problems == [] and [x.observation.text for x in t.turns] == ['{"temp": 18}']
    assert t.metadata["final_message"] == "It is 18C."


RESPONSES = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "use ls"}]},
    {"type": "function_call", "call_id": "fc1", "name": "bash", "arguments": '{"command": "ls"}'},
    {"type": "function_call_output", "call_id": "fc1", "output": "a.txt\nb.txt"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "Reading both."}]},
    {"type": "function_call", "call_id": "fc2", "name": "cat", "arguments": '{"path": "a.txt"}'},
    {"type": "function_call", "call_id": "fc3", "name": "cat", "arguments": '{"path": "b.txt"}'},
    {"type": "function_call_output", "call_id": "fc3", "output": "B"},
    {"type": "function_call_output", "call_id": "fc2", "output": "A"},
    {"type": "web_search_call", "id": "ws1", "status": "completed"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A, B."}]},
]  # fmt: skip


@pytest.mark.parametrize("shape", ["messages", "bare list", "input and output"])
def test_responses_api_items_are_calls_results_and_reasoning(tmp_path, shape):
    """Found: Responses API items (`function_call`, `function_call_output`, `reasoning`;
    the Agents SDK saves runs as such lists) were refused as `empty`, or not recognised
    at all under a request's `input`."""
    record = {
        "messages": {"id": "r", "messages": RESPONSES},
        "bare list": RESPONSES,
        "input and output": {"id": "r", "input": RESPONSES[:4], "output": RESPONSES[4:]},
    }[shape]
    f = tmp_path / "r.json"
    f.write_text(json.dumps(record))
    [t], problems = items(f)
    assert [(x.action.text, x.observation.text, x.reasoning) for x in t.turns] == [
        ('bash({"command": "ls"})', "a.txt\nb.txt", "use ls"),
        ('cat({"path": "a.txt"})', "A", "Reading both."),  # parallel calls, answered by id
        ('cat({"path": "b.txt"})', "B", None),
    ]
    # named as in the file (hunt 12-06b: a bare list's and the output's items were named
    # as the converted `messages`, an output item by its place in input + output)
    key = {"messages": "messages[9]", "bare list": "[9]", "input and output": "output[5]"}[shape]
    assert [p.message for p in problems] == [
        f'{key}: a Responses API item of type "web_search_call"; not imported'
    ]
    assert t.task.instruction == "list files" and t.metadata["final_message"] == "A, B."
    assert validate_dict(t.to_dict()) == []


def test_a_responses_call_whose_arguments_are_no_object_names_its_item(tmp_path):
    bad = [*RESPONSES[:2], {**RESPONSES[2], "arguments": 42}, *RESPONSES[3:4]]
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"id": "r", "messages": bad}))
    [problem] = items(f)[1]
    assert problem.kind == "invalid" and "messages[2].arguments" in problem.message


CONVERSATION = [
    {"role": "user", "content": "list files"},
    {"role": "assistant", "tool_calls": [LS]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
]
ANSWER = {"role": "assistant", "content": "Found a.txt", "tool_calls": None}


@pytest.mark.parametrize("shape", ["choices beside messages", "gateway request and response"])
def test_a_logged_completion_keeps_its_answer(tmp_path, shape):
    """Found: a logged chat completion (`{messages, choices}`) lost the model's answer
    without a word, and a gateway's `{request: {messages}, response: {choices}}` log was
    not recognised."""
    choices = [
        {"index": 0, "message": ANSWER},
        {"index": 1, "message": {"role": "assistant", "content": "b"}},
    ]
    record = {
        "choices beside messages": {"id": "g", "model": "m", "messages": CONVERSATION, "choices": choices},
        "gateway request and response": {
            "id": "g", "request": {"model": "m", "messages": CONVERSATION, "tools": [
                {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]},
            "response": {"id": "chatcmpl-1", "choices": choices},
        },
    }[shape]  # fmt: skip
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps(record) + "\n")
    [t], problems = items(f)
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ('bash({"c": "ls"})', "a.txt")
    ]
    assert t.metadata["final_message"] == "Found a.txt" and t.metadata["model"] == "m"
    where = "choices" if shape.startswith("choices") else "response.choices"
    assert [p.message for p in problems] == [f"{where}[1]: another sampled answer; not imported"]
    assert validate_dict(t.to_dict()) == []


def test_reading_responses_items_leaves_the_record_as_read():
    """An assistant message that calls join keeps its record's dict unchanged (a record is
    hashed for its id and may be read again)."""
    import copy

    from worldtrace.collectors.importers import openai

    record = {"id": "r", "messages": copy.deepcopy(RESPONSES)}
    [*_, t] = openai.to_trajectory(record, "o")
    assert record == {"id": "r", "messages": RESPONSES} and len(t.turns) == 3


PATCH = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** End Patch"


@pytest.mark.parametrize("shape", ["chat tool_calls", "responses items"])
def test_a_custom_tool_call_is_a_call_with_its_free_form_input(tmp_path, shape):
    """Found: a custom (free-form) tool call (`type: custom`, its `input` text, as
    apply_patch is called) refused the record with `... has no function.name`; in
    Responses items (`custom_tool_call`) it was not read."""
    msgs = {
        "chat tool_calls": [
            {"role": "user", "content": "patch it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Done"},
        ],
        "responses items": [
            {"type": "message", "role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": PATCH},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        ],
    }[shape]  # fmt: skip
    t, problems = _import(tmp_path, msgs)
    assert problems == []
    [turn] = t.turns
    assert turn.action.name == "apply_patch" and json.loads(turn.action.arguments_json) == {
        "_raw": PATCH
    }
    assert turn.observation.text == "Done"
