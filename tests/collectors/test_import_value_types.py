"""Values of the wrong type are named, never turned into Python's text: content that is
no text, error flags that are no booleans, messages and steps of unknown roles, null
answers, ids and metadata of the wrong type (docs/importers.md, "Bad input never stops
good data")."""

from __future__ import annotations

import json

from .conftest import found, import_written

CALL = {
    "id": "c0",
    "type": "function",
    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
}


def chat(rid, result=None, **extra):
    """An OpenAI record: the task, one call, its result (`result`: the tool message's
    fields), the agent's last word."""
    tool = {"role": "tool", "tool_call_id": "c0", "content": "a.txt", **(result or {})}
    msgs = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        tool,
        {"role": "assistant", "content": "done"},
    ]
    return {"id": rid, "messages": msgs, **extra}


# ---------------------------------------------------------------- 1. content that is no text


def test_openai_content_that_is_no_text_is_invalid_naming_the_field(tmp_path):
    records = [
        chat("obj-text", {"content": {"text": {"stdout": "hi", "rc": None}}}),
        chat("part-obj", {"content": [{"type": "text", "text": {"stdout": "hi"}}]}),
        chat("part-list", {"content": [{"type": "text", "text": ["a", 1, None]}]}),
        chat("bool", {"content": True}),
        chat("scalar-part", {"content": [1, 2]}),
        chat("number", {"content": 42}),  # documented: a number is its text
        chat("object", {"content": {"stdout": "hi"}}),  # an object is its JSON
        chat("good"),
    ]
    r, got = import_written(tmp_path, "chat.jsonl", records, lines=True)
    assert sorted(found(r, "invalid")) == [
        ("line 1", 'messages[2].content.text: expected a string, got {"stdout": "hi", "rc": null}'),
        ("line 2", 'messages[2].content[0].text: expected a string, got {"stdout": "hi"}'),
        ("line 3", 'messages[2].content[0].text: expected a string, got ["a", 1, null]'),
        ("line 4", "messages[2].content: expected a string or a list of content parts, got true"),
        ("line 5", "messages[2].content[0]: expected a string or a content part object, got 1"),
    ]
    assert set(got) == {"number", "object", "good"}
    assert got["number"].turns[0].observation.text == "42"
    assert got["object"].turns[0].observation.text == '{"stdout": "hi"}'


def test_sharegpt_value_object_is_its_content_as_json_and_a_boolean_is_invalid(tmp_path):
    def conv(rid, value):
        return {
            "id": rid,
            "conversations": [
                {"from": "human", "value": "weather?"},
                {"from": "gpt", "value": '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'},
                {"from": "tool", "value": value},
            ],
        }  # fmt: skip

    records = [conv("obj", {"name": "get_weather", "content": {"t": 20}}), conv("bool", False)]
    r, got = import_written(tmp_path, "sg.jsonl", records, lines=True)
    assert got["obj"].turns[0].observation.text == '{"t": 20}'
    assert found(r, "invalid") == [
        (
            "line 2",
            "conversations[2].value: expected a string or a list of content parts, got false",
        )
    ]


def atif(steps, **extra):
    return {"schema_version": "ATIF-v1.4", "session_id": "s1", "agent": {"name": "x"},
            "steps": steps, **extra}  # fmt: skip


def atif_call(step_id, content, source="agent"):
    return {
        "step_id": step_id,
        "source": source,
        "message": "run",
        "tool_calls": [{"tool_call_id": f"c{step_id}", "function_name": "bash",
                        "arguments": {"command": "ls"}}],
        "observation": {"results": [{"source_call_id": f"c{step_id}", "content": content}]},
    }  # fmt: skip


USER_STEP = {"step_id": 1, "source": "user", "message": "fix it"}


def test_atif_content_that_is_no_text_is_invalid(tmp_path):
    for name, content, field in [
        ("bool", True, "steps[1].observation.results[0].content: expected a string"),
        ("part", [{"type": "text", "text": {"a": None}}],
         'steps[1].observation.results[0].content[0].text: expected a string, got {"a": null}'),
    ]:  # fmt: skip
        r, got = import_written(
            tmp_path / name, "trajectory.json", atif([USER_STEP, atif_call(2, content)])
        )
        assert not got
        [(_, message)] = found(r, "invalid")
        assert message.startswith(field), message


def openhands(content, extras=None):
    return [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
        {"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": content,
         "extras": {"command": "ls", "metadata": {"exit_code": 0}, **(extras or {})}},
    ]  # fmt: skip


def test_openhands_content_that_is_a_boolean_is_invalid(tmp_path):
    r, got = import_written(tmp_path, "events.json", openhands(True))
    assert not got
    [(_, message)] = found(r, "invalid")
    assert "[2].content: expected a string or a list of content parts, got true" in message


def swe(steps, history=None, **info):
    return {
        "environment": "swe_main",
        "trajectory": steps,
        "history": history or [{"role": "user", "content": "fix it"}],
        "info": {"exit_status": "submitted", **info},
    }


def test_swe_agent_action_that_is_no_string_is_invalid(tmp_path):
    step = {"action": ["ls", "-l"], "observation": "a\n", "thought": "look"}
    r, got = import_written(tmp_path, "run.traj", swe([step]))
    assert not got
    assert found(r, "invalid") == [
        ("", 'trajectory[0].action: expected a string, got ["ls", "-l"]')
    ]
    history = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "look", "action": ["ls"]},
        {"role": "user", "content": "a"},
    ]
    r, got = import_written(tmp_path / "h", "run.traj", {"history": history})
    assert found(r, "invalid") == [("", 'history[1].action: expected a string, got ["ls"]')]


# ---------------------------------------------------------------- 2. error flags


def test_openai_is_error_must_be_a_boolean(tmp_path):
    anthropic = {
        "id": "anth",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "bash",
                                               "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                          "content": "x", "is_error": "true"}]},
        ],
    }  # fmt: skip
    records = [chat("str", {"is_error": "false"}), anthropic, chat("real", {"is_error": True})]
    r, got = import_written(tmp_path, "chat.jsonl", records, lines=True)
    assert found(r, "invalid") == [
        ("line 1", 'messages[2].is_error: expected a boolean, got "false"'),
        ("line 2", 'messages[2].content[0].is_error: expected a boolean, got "true"'),
    ]
    assert set(got) == {"real"} and got["real"].turns[0].observation.is_error is True


def test_openhands_extras_error_must_be_a_boolean(tmp_path):
    r, got = import_written(tmp_path, "events.json", openhands("a", {"error": "no"}))
    assert not got
    [(_, message)] = found(r, "invalid")
    assert message.endswith('[2].extras.error: expected a boolean, got "no"'), message


def test_openhands_resolved_must_be_a_boolean(tmp_path):
    def record(rid, resolved):
        return {"instance_id": rid, "instruction": "fix it", "history": openhands("a")[1:],
                "test_result": {"report": {"resolved": resolved}}}  # fmt: skip

    r, got = import_written(
        tmp_path, "output.jsonl", [record("s", "false"), record("b", False)], lines=True
    )
    assert found(r, "invalid") == [
        ("line 1", 'test_result.report.resolved: expected a boolean, got "false"')
    ]
    assert set(got) == {"b"} and got["b"].outcome.status == "failure"


# ---------------------------------------------------------------- 3. what is dropped is named


def test_openai_messages_of_unknown_roles_are_named(tmp_path):
    rec = chat("roles")
    rec["messages"][3:3] = [
        {"role": "bot", "content": "what next?"},
        {"role": "Assistant", "content": "", "tool_calls": [CALL]},
        {"role": "Tool", "tool_call_id": "c0", "content": "b"},
    ]
    listed = chat("listed")
    listed["messages"][3]["role"] = ["assistant"]
    r, got = import_written(tmp_path, "chat.jsonl", [rec, listed], lines=True)
    assert found(r, "invalid") == [
        ("line 2", 'messages[3].role: expected a string, got ["assistant"]')
    ]
    assert len(got["roles"].turns) == 1
    assert [m for _, m in found(r, "message_not_imported")] == [
        'messages[3]: a message of the unknown role "bot"; not imported',
        'messages[4]: a message of the unknown role "Assistant" (roles are lower case);'
        " not imported",
        'messages[5]: a message of the unknown role "Tool" (roles are lower case); not imported',
    ]


def test_atif_steps_of_unknown_source_or_no_object_are_named(tmp_path):
    r, got = import_written(tmp_path, "trajectory.json", atif([USER_STEP, atif_call(2, "f", "Agent"),
                                                    atif_call(3, "g")]))  # fmt: skip
    assert len(got["s1"].turns) == 1
    assert found(r, "message_not_imported") == [
        ("steps[1]", 'a step of the unknown source "Agent" (sources are lower case); not imported')
    ]
    r, got = import_written(
        tmp_path / "b", "trajectory.json", atif([USER_STEP, 5, atif_call(3, "g")])
    )
    assert not got and found(r, "invalid") == [("", "steps[1]: expected an object, got 5")]


def test_swe_agent_trajectory_of_the_wrong_type_is_invalid(tmp_path):
    history = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "look", "action": "ls"},
        {"role": "user", "content": "a"},
    ]
    r, got = import_written(tmp_path, "run.traj", {"trajectory": "oops", "history": history})
    assert not got
    assert found(r, "invalid") == [("", 'trajectory: expected a list, got "oops"')]


def test_tools_that_are_no_list_are_invalid(tmp_path):
    conv = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"},
                              {"from": "human", "value": "bye"}]}  # fmt: skip
    spec = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    records = [
        chat("a", tools="bash"),
        chat("b", tools="[not json"),
        {**conv, "id": "c", "tools": "bash"},
        {**conv, "id": "d", "tools": "{bad"},
        chat("e", tools=json.dumps(spec)),  # a JSON string holding the list, as ShareGPT's
    ]
    r, got = import_written(tmp_path, "tools.jsonl", records, lines=True)
    assert found(r, "invalid") == [
        ("line 1", 'tools: expected a list (or a JSON string holding one), got "bash"'),
        ("line 2", 'tools: expected a list (or a JSON string holding one), got "[not json"'),
        ("line 3", 'tools: expected a list (or a JSON string holding one), got "bash"'),
        ("line 4", 'tools: expected a list (or a JSON string holding one), got "{bad"'),
    ]
    assert json.loads(got["e"].system.action_space)[0]["name"] == "bash"


# ---------------------------------------------------------------- 4. null answers


def test_openai_null_result_is_no_turn_and_empty_string_stays(tmp_path):
    second = {**CALL, "id": "c1"}
    null = chat("null", {"content": None})
    null["messages"][3:3] = [
        {"role": "assistant", "content": "", "tool_calls": [second]},
        {"role": "tool", "tool_call_id": "c1", "content": "b"},
    ]
    r, got = import_written(
        tmp_path, "chat.jsonl", [null, chat("empty", {"content": ""})], lines=True
    )
    assert [t.observation.text for t in got["null"].turns] == ["b"]
    assert [t.observation.text for t in got["empty"].turns] == [""]
    assert found(r, "unpaired_call") == [
        ("line 1", "messages[2].content: null, the answer to call 'c0' (bash) is unknown; no turn")
    ]


def test_sharegpt_null_result_is_no_turn(tmp_path):
    rec = {
        "id": "sg",
        "conversations": [
            {"from": "human", "value": "weather?"},
            {"from": "gpt", "value": '<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'},
            {"from": "tool", "value": None},
            {"from": "gpt", "value": '<tool_call>\n{"name": "w", "arguments": {"x": 1}}\n</tool_call>'},
            {"from": "tool", "value": ""},
        ],
    }  # fmt: skip
    r, got = import_written(tmp_path, "sg.jsonl", [rec], lines=True)
    assert [t.observation.text for t in got["sg"].turns] == [""]
    assert json.loads(got["sg"].turns[0].action.arguments_json) == {"x": 1}
    assert found(r, "unpaired_call") == [
        ("line 1", "conversations[2].value: null, the answer to call 'w' is unknown; no turn")
    ]


def test_swe_agent_null_observation_is_no_turn(tmp_path):
    steps = [{"action": "ls\n", "observation": None}, {"action": "pwd\n", "observation": ""}]
    r, got = import_written(tmp_path, "run.traj", swe(steps))
    assert [(t.action.text, t.observation.text) for t in got["run"].turns] == [("pwd", "")]
    assert found(r, "unpaired_call") == [
        ("", "trajectory[0].observation: null, the answer to 'ls' is unknown; no turn")
    ]


def test_mini_swe_agent_null_output_is_no_turn(tmp_path):
    data = {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "```bash\nls\n```"},
            {"role": "user", "content": None},
            {"role": "assistant", "content": "```bash\npwd\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n/r\n</output>"},
        ],
    }
    r, got = import_written(tmp_path, "run.traj.json", data)
    assert [t.action.text for t in got["run"].turns] == ["pwd"]
    assert found(r, "unpaired_call") == [
        ("", "messages[3].content: null, the answer to 'ls' is unknown; no turn")
    ]


def test_atif_null_result_is_no_turn(tmp_path):
    r, got = import_written(tmp_path, "trajectory.json", atif([USER_STEP, atif_call(2, None),
                                                    atif_call(3, "")]))  # fmt: skip
    assert [t.observation.text for t in got["s1"].turns] == [""]
    assert found(r, "unpaired_call") == [
        ("steps[1].tool_calls[0]",
         "steps[1].observation.results[0].content: null, the answer to call 'c2' is unknown;"
         " no turn"),
    ]  # fmt: skip


def test_openhands_null_content_is_no_turn(tmp_path):
    r, got = import_written(tmp_path, "events.json", openhands(None))
    assert not got or not got["events"].turns
    [(_, message)] = found(r, "unpaired_call")
    assert message.endswith("[2].content: null, the answer to the agent's 'run' action (id 1)"
                            " is unknown; no turn"), message  # fmt: skip


def awb(rid, **fields):
    return {"id": rid, "task": "worldtrace/terminal", "system_str": "You are a terminal.",
            "prompt": ["ls\n", "pwd\n"], "response": ["a b\n", "/root\n"], "turn_idx": [0, 1],
            **fields}  # fmt: skip


def test_agentworldbench_null_response_is_no_turn(tmp_path):
    r, got = import_written(
        tmp_path, "awb.jsonl", [awb("a", response=[None, "/root\n"])], lines=True
    )
    assert [t.action.text for t in got["a"].turns] == ["pwd\n"]
    assert found(r, "unpaired_call") == [
        ("line 1", "response[0]: null, the answer to prompt[0] is unknown; no turn")
    ]


# ---------------------------------------------------------------- 5. ids and metadata


def test_ids_and_metadata_of_the_wrong_type_are_invalid(tmp_path):
    records = [
        chat(["x"]),
        {**chat("t"), "task_id": {"k": 1}},
        awb("a1", turn_idx="all"),
        awb("a2", prompt=["ls", 5]),
        awb("a3", id=[1]),
        awb("a4", turn_idx=3),  # 1-based: there are 2 turns
        chat(7),  # a number is an id as written
    ]
    r, got = import_written(tmp_path, "mixed.jsonl", records, lines=True)
    assert found(r, "invalid") == [
        ("line 1", 'id: expected a string or a number, got ["x"]'),
        ("line 2", 'task_id: expected a string or a number, got {"k": 1}'),
        (
            "line 3",
            'turn_idx: expected a turn number (1-based) or a list of turn indices, got "all"',
        ),
        ("line 4", "prompt[1]: expected a string, got 5"),
        ("line 5", "id: expected a string or a number, got [1]"),
        ("line 6", "turn_idx: expected a turn number (1-based) or a list of turn indices, got 3"),
    ]
    assert set(got) == {"7"}


def test_exit_status_of_the_wrong_type_is_invalid(tmp_path):
    data = {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"exit_status": ["Submitted"]},
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na\n</output>"},
        ],
    }
    r, got = import_written(tmp_path, "run.traj.json", data)
    assert not got
    assert found(r, "invalid") == [("", 'info.exit_status: expected a string, got ["Submitted"]')]
    r, got = import_written(tmp_path / "s", "run.traj", swe([{"action": "ls\n", "observation": "a"}],
                                                 exit_status=0))  # fmt: skip
    assert not got
    assert found(r, "invalid") == [("", "info.exit_status: expected a string, got 0")]
