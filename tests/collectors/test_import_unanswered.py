"""A call nothing answered makes no turn (`unpaired_call`, naming the call): what the
environment answered is unknown, and an empty observation would train "it printed
nothing" (docs/importers.md, "Mapping rules"). The turns around it keep their
observations; its arguments are checked as any call's; a record left with no turn is
`empty`."""

from __future__ import annotations

import json

from .conftest import found, import_written


def seen(t):
    """(action text, observation text) of each turn."""
    return [(x.action.text, x.observation.text) for x in t.turns]


# ---------------------------------------------------------------- OpenAI messages


def call(cid, command):
    return {"id": cid, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}  # fmt: skip


def asks(*calls):
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def tool(cid, content):
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_openai_unanswered_call_is_no_turn(tmp_path):
    msgs = [
        {"role": "user", "content": "clean up"},
        asks(call("c0", "ls")),
        tool("c0", "a.txt"),
        asks(call("c1", "rm a.txt")),  # left open when the next call comes
        asks(call("c2", "pwd"), call("c3", "cat a.txt")),
        tool("c2", "/r"),  # c3: nothing answers it, the record ends
    ]
    r, got = import_written(tmp_path, "chat.jsonl", [{"id": "o", "messages": msgs}], lines=True)
    assert [(x.action.name, x.observation.text) for x in got["o"].turns] == [
        ("bash", "a.txt"),
        ("bash", "/r"),
    ]
    assert [json.loads(x.action.arguments_json) for x in got["o"].turns] == [
        {"command": "ls"},
        {"command": "pwd"},
    ]
    assert found(r, "unpaired_call") == [
        ("line 1", "no result for call 'c1' (bash); no turn"),
        ("line 1", "no result for call 'c3' (bash); no turn"),
    ]


def test_openai_anthropic_unanswered_tool_use_is_no_turn_but_no_content_is_empty(tmp_path):
    """An Anthropic `tool_result` without `content` is the empty result (an answer, a
    turn); a `tool_use` no result answers is no turn."""

    def use(i, cmd):
        return {"type": "tool_use", "id": i, "name": "bash", "input": {"command": cmd}}

    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("t0", "touch a"), use("t1", "ls")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0"}]},
        {"role": "assistant", "content": [use("t2", "pwd")]},
    ]
    r, got = import_written(tmp_path, "chat.jsonl", [{"id": "a", "messages": msgs}], lines=True)
    assert [json.loads(x.action.arguments_json) for x in got["a"].turns] == [{"command": "touch a"}]
    assert [x.observation.text for x in got["a"].turns] == [""]
    assert found(r, "unpaired_call") == [
        ("line 1", "no result for call 't1' (bash); no turn"),
        ("line 1", "no result for call 't2' (bash); no turn"),
    ]


def test_openai_unanswered_call_arguments_are_checked_and_no_turn_is_empty(tmp_path):
    bad = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": 42}}
    records = [
        {"id": "bad", "messages": [{"role": "user", "content": "go"}, asks(call("c0", "ls")),
                                   tool("c0", "a"), asks(bad)]},
        {"id": "none", "messages": [{"role": "user", "content": "go"}, asks(call("c0", "ls"))]},
    ]  # fmt: skip
    r, got = import_written(tmp_path, "chat.jsonl", records, lines=True)
    assert not got
    assert found(r, "invalid") == [
        ("line 1", "messages[3].tool_calls[0].function.arguments: expected a JSON object or a"
                   " string holding one, got 42"),
    ]  # fmt: skip
    assert [w for w, _ in found(r, "empty")] == ["line 2"]


# ---------------------------------------------------------------- ShareGPT


def hermes(name, **args):
    return {"from": "gpt",
            "value": f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'}  # fmt: skip


def test_sharegpt_unanswered_call_is_no_turn(tmp_path):
    conv = [
        {"from": "human", "value": "weather?"},
        hermes("w", city="a"),
        {"from": "tool", "value": "sun"},
        hermes("w", city="b"),  # nothing answers it
        {"from": "function_call", "value": json.dumps(
            [{"name": "w", "arguments": {"city": "c"}}, {"name": "w", "arguments": {"city": "d"}}]
        )},
        {"from": "observation", "value": "rain"},  # answers the first of the two only
        hermes("t", tz="UTC"),  # the record ends
    ]  # fmt: skip
    r, got = import_written(tmp_path, "sg.jsonl", [{"id": "sg", "conversations": conv}], lines=True)
    turns = got["sg"].turns
    assert [(json.loads(x.action.arguments_json), x.observation.text) for x in turns] == [
        ({"city": "a"}, "sun"),
        ({"city": "c"}, "rain"),
    ]
    assert found(r, "unpaired_call") == [
        ("line 1", "conversations[3]: no result for call 'w'; no turn"),
        ("line 1", "conversations[4]: no result for call 'w' (2 of 2); no turn"),
        ("line 1", "conversations[6]: no result for call 't'; no turn"),
    ]


def test_sharegpt_unanswered_call_arguments_are_checked(tmp_path):
    conv = [{"from": "human", "value": "go"},
            {"from": "function_call", "value": json.dumps({"name": "w", "arguments": 42})}]  # fmt: skip
    r, got = import_written(tmp_path, "sg.jsonl", [{"id": "sg", "conversations": conv}], lines=True)
    assert not got
    assert found(r, "invalid") == [
        ("line 1", "conversations[1].value.arguments: expected a JSON object or a string"
                   " holding one, got 42"),
    ]  # fmt: skip


# ---------------------------------------------------------------- Harbor ATIF


def atif(agent, *steps):
    return {"schema_version": "ATIF-v1.4", "session_id": "s1", "agent": {"name": agent},
            "steps": [{"step_id": 1, "source": "user", "message": "fix it"}, *steps]}  # fmt: skip


def step(sid, command, content="<none>", name="bash"):
    """An agent step of one call; `content` "<none>": no result at all."""
    s = {"step_id": sid, "source": "agent", "message": f"run {command}",
         "tool_calls": [{"tool_call_id": f"c{sid}", "function_name": name,
                         "arguments": {"command": command}}]}  # fmt: skip
    if content != "<none>":
        s["observation"] = {"results": [{"source_call_id": f"c{sid}", "content": content}]}
    return s


def test_atif_unanswered_call_is_no_turn(tmp_path):
    data = atif("x", step(2, "ls", "a"), step(3, "rm a"), step(4, "pwd", "/r"), step(5, "cat a"))
    r, got = import_written(tmp_path, "trajectory.json", data)
    turns = got["s1"].turns
    assert [(json.loads(x.action.arguments_json), x.observation.text) for x in turns] == [
        ({"command": "ls"}, "a"),
        ({"command": "pwd"}, "/r"),
    ]
    assert turns[1].reasoning == "run pwd"
    assert found(r, "unpaired_call") == [
        ("steps[2].tool_calls[0]", "no result for call 'c3' (bash); no turn"),
        ("steps[4].tool_calls[0]", "no result for call 'c5' (bash); no turn"),
    ]


def test_atif_agents_read_their_own_way_make_no_turn_of_an_unanswered_call(tmp_path):
    """goose, Gemini CLI and Qwen Code (read by their own rules) make no turn of a call
    with no result either; OpenCode's stays `harness_failure`."""
    for agent, shell in [("goose", "shell"), ("gemini-cli", "run_shell_command"),
                         ("qwen-code", "run_shell_command"), ("opencode", "bash")]:  # fmt: skip
        data = atif(agent, step(2, "ls", "a", shell), step(3, "rm a", name=shell),
                    step(4, "pwd", "/r", shell), step(5, "cat a", name=shell))  # fmt: skip
        r, got = import_written(tmp_path / agent, "trajectory.json", data)
        assert [x.action.text for x in got["s1"].turns] == ["ls", "pwd"], agent
        kind = "harness_failure" if agent == "opencode" else "unpaired_call"
        assert [w or m.split(":")[0] for w, m in found(r, kind)] == [
            "steps[2].tool_calls[0]",
            "steps[4].tool_calls[0]",
        ], agent


def test_atif_calls_answered_together_leave_the_earlier_ones_unpaired(tmp_path):
    """Terminus-2's one result without a call id is the screen after all the step's calls:
    it answers the last; what the earlier ones printed is unknown, so they make no turn
    (`unpaired_call`; until 12-06b each was a turn answered "" and trained as printing
    nothing)."""
    s = {"step_id": 2, "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": f"k{i}", "function_name": "bash_command",
                         "arguments": {"keystrokes": k}} for i, k in enumerate(["cd /\n", "ls\n"])],
         "observation": {"results": [{"content": "bin etc"}]}}  # fmt: skip
    r, got = import_written(tmp_path, "trajectory.json", atif("terminus-2", s))
    assert [x.observation.text for x in got["s1"].turns] == ["bin etc"]
    assert len(found(r, "unpaired_call")) == 1


def test_atif_unanswered_call_arguments_are_checked_and_no_turn_is_empty(tmp_path):
    bad = step(3, "rm")
    bad["tool_calls"][0]["arguments"] = 42
    r, got = import_written(tmp_path / "bad", "trajectory.json", atif("x", step(2, "ls", "a"), bad))
    assert not got
    assert found(r, "invalid") == [
        ("", "steps[2].tool_calls[0].arguments: expected a JSON object or a string holding"
             " one, got 42"),
    ]  # fmt: skip
    r, got = import_written(tmp_path / "none", "trajectory.json", atif("x", step(2, "ls")))
    assert not got and [k for k in r.errors] == ["empty"]


# ---------------------------------------------------------------- mini-swe-agent


def mini(*messages):
    return {"trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted"},
            "messages": [{"role": "system", "content": "sys"},
                         {"role": "user", "content": "fix it"}, *messages]}  # fmt: skip


def bash(cmd):
    return {"role": "assistant", "content": f"go\n```bash\n{cmd}\n```"}


def out(text, rc=0):
    return {
        "role": "user",
        "content": f"<returncode>{rc}</returncode>\n<output>\n{text}\n</output>",
    }


def test_mini_swe_agent_unanswered_command_is_no_turn(tmp_path):
    data = mini(bash("ls"), out("a"), bash("rm a"), bash("pwd"), out("/r"), bash("cat a"))
    r, got = import_written(tmp_path, "run.traj.json", data)
    assert seen(got["run"]) == [("ls", "a\n"), ("pwd", "/r\n")]
    assert found(r, "unpaired_call") == [
        ("", "messages[4]: no result for 'rm a'; no turn"),
        ("", "messages[7]: no result for 'cat a'; no turn"),
    ]


def test_mini_swe_agent_v2_unanswered_tool_call_is_no_turn_and_submit_stays(tmp_path):
    """v2 tool calls: the one no `tool` message answers is no turn, its message's
    reasoning goes to the next call's turn; the final submit nothing answered is still
    the submission, not an unanswered call."""
    calls = [{"id": i, "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
             for i, c in (("t0", "rm a"), ("t1", "ls"))]  # fmt: skip
    data = mini(
        {"role": "assistant", "content": "two", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "t1", "content": "<returncode>0</returncode>\n<output>\nb\n</output>"},
        bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    )  # fmt: skip
    data["trajectory_format"] = "mini-swe-agent-1.1"
    r, got = import_written(tmp_path, "run.traj.json", data)
    t = got["run"]
    assert seen(t) == [("ls", "b\n")] and t.turns[0].reasoning == "two"
    assert t.metadata["submit_command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert found(r, "unpaired_call") == [("", "messages[2]: no result for 'rm a'; no turn")]


def test_mini_swe_agent_all_unanswered_is_empty(tmp_path):
    r, got = import_written(tmp_path, "run.traj.json", mini(bash("ls")))
    assert not got and list(r.errors) == ["empty"]


# ---------------------------------------------------------------- OpenHands


def act(i, command):
    return {"id": i, "source": "agent", "action": "run", "args": {"command": command}}


def obs(i, cause, content):
    return {"id": i, "source": "agent", "cause": cause, "observation": "run", "content": content,
            "extras": {"command": "", "metadata": {"exit_code": 0}}}  # fmt: skip


def test_openhands_unanswered_action_is_no_turn(tmp_path):
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        act(1, "ls"), obs(2, 1, "a"),
        act(3, "rm a"),  # nothing answers it
        act(4, "pwd"), obs(5, 4, "/r"),
        act(6, "cat a"),  # the run ends
    ]  # fmt: skip
    r, got = import_written(tmp_path, "events.json", events)
    assert seen(got["events"]) == [("ls", "a"), ("pwd", "/r")]
    assert found(r, "unpaired_call") == [
        ("", "events[3]: no observation for the agent's 'run' action (id 3); no turn"),
        ("", "events[6]: no observation for the agent's 'run' action (id 6); no turn"),
    ]


def test_openhands_unanswered_action_arguments_are_checked_and_no_turn_is_empty(tmp_path):
    go = {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}}
    r, got = import_written(
        tmp_path / "bad", "events.json", [go, act(1, "ls"), obs(2, 1, "a"), act(3, 42)]
    )
    assert not got
    assert found(r, "invalid") == [("", "events[3].args.command: expected a string, got 42")]
    r, got = import_written(tmp_path / "none", "events.json", [go, act(1, "ls")])
    assert not got and list(r.errors) == ["empty"]
