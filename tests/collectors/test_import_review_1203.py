"""Review 1203 of the importers: commands holding ``` (mini-swe-agent, SWE-agent from
`history`), outputs holding the template's own tags, the output's last newline, OpenAI
results with an unknown id, SWE-agent's `state` after the action on both paths, typed
benchmark fields, tau-bench's user script, the top-level `model`. Our own fixtures."""

from __future__ import annotations

import json

from worldtrace.schemas import validate_dict

from .test_import_fidelity import items
from .test_import_mini_swe_variants import imported as mini

INLINE = 'echo "use ```code``` here" > README.md && cat README.md'


def one(tmp_path, name, data):
    f = tmp_path / name
    f.write_text(json.dumps(data) + ("\n" if name.endswith(".jsonl") else ""))
    trajs, problems = items(f)
    for t in trajs:
        assert validate_dict(t.to_dict()) == []
    return trajs, problems


def seen(t):
    return [(x.action.text, x.observation.text, x.observation.exit_code) for x in t.turns]


# -- 1: a command holding ``` is the whole command ----------------------------------------


def test_mini_swe_command_holding_fences_is_whole(tmp_path):
    """mini-swe-agent's `action_regex` (```bash\\s*\\n(.*?)\\n```) closes a block only at a
    line that starts with ```: backticks inside the command are part of it."""
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": f"THOUGHT: x\n\n```bash\n{INLINE}\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nuse ```code``` here\n</output>"},
            {"role": "assistant", "content": f"v2 tag\n\n```mswea_bash_command\n{INLINE}\n```\ndone"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nuse ```code``` here\n</output>"},
        ],
    )  # fmt: skip
    assert problems == []
    assert [x.action.text for x in t.turns] == [INLINE, INLINE]
    assert [x.reasoning for x in t.turns] == ["THOUGHT: x", "v2 tag\n\ndone"]


def test_mini_swe_fallback_block_holding_fences_is_whole(tmp_path):
    """A file with neither ```bash nor ```mswea_bash_command reads any one fenced block,
    closed the same way."""
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": f"run\n```sh\n{INLINE}\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nuse ```code``` here\n</output>"},
        ],
    )  # fmt: skip
    assert problems == []
    assert [x.action.text for x in t.turns] == [INLINE]


def swe_history(*messages):
    return {
        "history": [
            {"role": "system", "content": "SETTING: x"},
            {"role": "user", "content": "ISSUE: fix\n(Open file: n/a)\n(Current directory: /r)\nbash-$"},
            *messages,
        ],
        "info": {"exit_status": "submitted"},
    }  # fmt: skip


def answered(text, open_file="n/a"):
    return {
        "role": "user",
        "content": f"{text}\n(Open file: {open_file})\n(Current directory: /r)\nbash-$",
    }


def test_swe_agent_history_command_holding_fences_is_whole(tmp_path):
    """SWE-agent's ThoughtActionParser (sweagent/tools/parsing.py, 0.x agent/parsing.py):
    fences count only at the start of a line, and the action is the last top-level block
    (an earlier block, and a block nested in it, are thought)."""
    data = swe_history(
        {"role": "assistant", "content": 'Write readme.\n```\necho "see ```x``` now" > R.md\n```'},
        answered("Your command ran successfully and did not produce any output."),
        {
            "role": "assistant",
            "content": "Sketch:\n```python\nx = 1\n```\nthen\n```\ncat R.md\n```\n",
        },
        answered("see ```x``` now"),
        {
            "role": "assistant",
            "content": "Nested:\n```\nouter\n```python\ninner\n```\nstill outer\n```\nend",
        },
        answered("ok"),
    )
    [t], problems = one(tmp_path, "run.traj", data)
    assert problems == []
    assert [x.action.text for x in t.turns] == [
        'echo "see ```x``` now" > R.md',
        "cat R.md",
        "outer\n```python\ninner\n```\nstill outer",
    ]
    assert t.turns[1].reasoning == "Sketch:\n```python\nx = 1\n```\nthen"


# -- 2: an output holding the template's tags ends at the template's `</output>` ----------


def test_mini_swe_output_holding_output_tags_is_whole(tmp_path):
    xml = "<result><output>1</output><returncode>7</returncode></result>\nmore lines\n"
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": "THOUGHT: xml\n\n```bash\ncat out.xml\n```"},
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{xml}</output>"},
        ],
    )
    assert problems == []
    assert seen(t) == [("cat out.xml", xml, 0)]


def test_mini_swe_long_output_holding_its_tags(tmp_path):
    """The long-output template: head and tail are each read up to the template's own
    closing tag, whatever the output holds."""
    head = "h <output_head>x</output_head>\n</output_head> y"
    tail = "t </output_tail>\n</output_tail> z"
    long = (
        "<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\n"
        f"</warning><output_head>\n{head}\n</output_head>\n<elided_chars>\n12 characters"
        f" elided\n</elided_chars>\n<output_tail>\n{tail}\n</output_tail>"
    )
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": "THOUGHT: big\n\n```bash\ncat big\n```"},
            {"role": "user", "content": long},
        ],
    )
    assert problems == []
    assert seen(t) == [("cat big", f"{head}\n{tail}", 0)]
    assert t.turns[0].observation.truncated


def test_mini_swe_v2_exception_holding_its_closing_tag(tmp_path):
    """v2's `<exception>` ends at the `</exception>` before `<returncode>`."""
    cmd = "echo '</exception>\n' && sleep 99"
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": f"THOUGHT: wait\n\n```mswea_bash_command\n{cmd}\n```"},
            {
                "role": "user",
                "content": "<exception>An error occurred while executing the command: Command"
                f" '{cmd}' timed out after 5 seconds</exception>\n<returncode>-1</returncode>\n"
                "<output>\n</exception>\n\npartial\n</output>",
            },
        ],
        fmt="mini-swe-agent-1.1",
    )
    assert problems == []
    assert seen(t) == [(cmd, "</exception>\n\npartial\n[timed out]", None)]


# -- 3: only the newline after `<output>` is the template's --------------------------------


def test_mini_swe_output_keeps_its_last_newline(tmp_path):
    """`<output>\\n{{ output.output -}}\\n</output>` renders `<output>\\n` + output +
    `</output>` (the dash takes the template's newline, not the output's): `x` and `x\\n`
    are told apart, and an empty output is empty."""
    t, problems = mini(
        tmp_path,
        [
            {"role": "assistant", "content": "THOUGHT: a\n\n```bash\nprintf x\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx</output>"},
            {"role": "assistant", "content": "THOUGHT: b\n\n```bash\necho x\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx\n</output>"},
            {"role": "assistant", "content": "THOUGHT: c\n\n```bash\ntrue\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
            {"role": "assistant", "content": "THOUGHT: d\n\n```bash\necho; echo x\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n\nx\n</output>"},
        ],
    )  # fmt: skip
    assert problems == []
    assert [x.observation.text for x in t.turns] == ["x", "x\n", "", "\nx\n"]


# -- 4: OpenAI: a result with an unknown id never takes another result's call --------------


def test_openai_unknown_id_does_not_steal_a_named_call(tmp_path):
    record = {
        "id": "r2",
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "p", "type": "function", "function": {"name": "get_a", "arguments": "{}"}},
                {"id": "q", "type": "function", "function": {"name": "get_b", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "zzz", "name": "get_b", "content": "B-result"},
            {"role": "tool", "tool_call_id": "p", "name": "get_a", "content": "A-result"},
        ],
    }  # fmt: skip
    [t], problems = one(tmp_path, "chat.jsonl", record)
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("get_a", "A-result"),
        ("get_b", "B-result"),
    ]
    [warn] = problems
    assert warn.kind == "unpaired_result"
    assert "'zzz' matches no open call" in warn.message and "'q' (get_b)" in warn.message


def test_openai_unknown_id_without_name_takes_an_unclaimed_call(tmp_path):
    """No `name`: the first open call whose id no later result names."""
    record = {
        "id": "r3",
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "p", "type": "function", "function": {"name": "get_a", "arguments": "{}"}},
                {"id": "q", "type": "function", "function": {"name": "get_b", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "zzz", "content": "B-result"},
            {"role": "tool", "tool_call_id": "p", "content": "A-result"},
        ],
    }  # fmt: skip
    [t], problems = one(tmp_path, "chat.jsonl", record)
    assert [(x.action.name, x.observation.text) for x in t.turns] == [
        ("get_a", "A-result"),
        ("get_b", "B-result"),
    ]
    assert [p.kind for p in problems] == ["unpaired_result"]


# -- 5: SWE-agent: turn N's state is the state after action N, on both paths ---------------


def _swe_steps(states, **extra):
    actions = ["ls\n", "open a.py\n", "submit\n"]
    return [
        {"action": a, "observation": f"out {k}", "response": "", "thought": f"t{k}",
         "state": s, **extra}
        for k, (a, s) in enumerate(zip(actions, states, strict=True))
    ]  # fmt: skip


def test_swe_agent_0x_state_is_the_next_steps(tmp_path):
    """0.x recorded `state` before it asked the model (agents.py `run`: `state =
    env.communicate(state_command)` then `forward`): the state after action N is step
    N+1's; after the last step it is unknown. The history-only path reads the prompt
    after each output, the same state."""
    before = json.dumps({"open_file": "n/a", "working_dir": "/r"})
    opened = json.dumps({"open_file": "/r/a.py", "working_dir": "/r"})
    steps = _swe_steps([before, before, opened])
    [t], problems = one(tmp_path, "run.traj", {"environment": "swe_main", "trajectory": steps,
                                               "history": [], "info": {}})  # fmt: skip
    assert problems == []
    states = [json.loads(x.observation.state_json) if x.observation.state_json else None
              for x in t.turns]  # fmt: skip
    assert states == [json.loads(before), json.loads(opened), None]
    history = swe_history(
        {"role": "assistant", "content": "t0\n```\nls\n```", "action": "ls\n"},
        answered("out 0"),
        {"role": "assistant", "content": "t1\n```\nopen a.py\n```", "action": "open a.py\n"},
        answered("out 1", "/r/a.py"),
    )
    [h], _ = one(tmp_path, "hist.traj", history)
    assert [json.loads(x.observation.state_json) for x in h.turns] == states[:2]


def test_swe_agent_1x_state_is_its_own(tmp_path):
    """1.x sets `step.state = tools.get_state(env)` after it ran the action
    (agents.py `handle_action`): each step's own state."""
    states = [{"open_file": "n/a", "working_dir": "/r"},
              {"open_file": "/r/a.py", "working_dir": "/r"},
              {"open_file": "/r/a.py", "working_dir": "/r"}]  # fmt: skip
    steps = _swe_steps(states, execution_time=0.5)
    [t], problems = one(tmp_path, "run.traj", {"trajectory": steps, "history": [], "info": {}})
    assert problems == []
    assert [json.loads(x.observation.state_json) for x in t.turns] == states


# -- 6: OpenAI benchmark fields of the wrong type are `invalid` ----------------------------


def _run(**fields):
    return {
        "id": "m3",
        **fields,
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "a"},
        ],
    }  # fmt: skip


def test_openai_reward_and_info_of_the_wrong_type_are_invalid(tmp_path):
    f = tmp_path / "runs.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                _run(reward="1.0"),
                _run(reward=True),
                _run(info="free text"),
                _run(reward=1, info={"k": 1}),
            )
        )
        + "\n"
    )
    trajs, problems = items(f)
    assert [str(p) for p in problems] == [
        f'{f}:line 1: invalid: reward: expected a number, got "1.0"',
        f"{f}:line 2: invalid: reward: expected a number, got true",
        f'{f}:line 3: invalid: info: expected an object or a list, got "free text"',
    ]
    [t] = trajs
    assert (t.outcome.status, t.outcome.reward) == ("success", 1.0)


# -- 7: tau-bench's user script is the simulation instruction ------------------------------


def test_tau_bench_user_instruction_is_the_simulation_instruction(tmp_path):
    script = "You are Sophia Silva (with ID: sophia_silva_7557), you want to cancel H8Q05L."
    run = {
        "task_id": 3,
        "reward": 0.0,
        "info": {"task": {"user_id": "sophia_silva_7557", "instruction": script, "actions": []}},
        "traj": [
            {"role": "system", "content": "You are an airline agent."},
            {"role": "user", "content": "Hi, I want to cancel a flight."},
            {"role": "assistant", "content": "Your user id, please?"},
            {"role": "user", "content": "sophia_silva_7557"},
            {"role": "assistant", "content": "Thanks."},
        ],
        "trial": 0,
    }
    [t], problems = one(tmp_path, "results.json", [run])
    assert t.system.simulation_instruction == script
    assert t.task.instruction == "Hi, I want to cancel a flight."
    assert json.loads(t.metadata["info"])["task"]["instruction"] == script
    bad = {**run, "info": {"task": {"instruction": ["not", "text"]}}}
    trajs, problems = one(tmp_path, "bad.json", [bad])
    assert trajs == []
    assert [p.message for p in problems] == [
        'info.task.instruction: expected a string, got ["not", "text"]'
    ]


# -- 8: OpenAI's top-level `model` is the agent's model -------------------------------------


def test_openai_model_string_is_the_agents_model(tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text(
        json.dumps({**_run(), "id": "m1", "model": "gpt-4o"})
        + "\n"
        + json.dumps({**_run(), "id": "m2", "model": {"name": "gpt"}})
        + "\n"
    )
    (a, b), problems = items(f)
    assert problems == []
    assert (a.agent.model, a.metadata["model"]) == ("gpt-4o", "gpt-4o")
    assert (b.agent.model, json.loads(b.metadata["model"])) == (None, {"name": "gpt"})
