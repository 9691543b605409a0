"""mini-swe-agent variants: a message with several action blocks (rejected, no step),
a command that timed out, v2's tool calls (`mini-swe-agent-1.1`) and code blocks in
the prose beside tool calls."""

from __future__ import annotations

import json

from worldtrace.schemas import validate_dict

from .test_import_fidelity import items

TASK = "Please solve this issue: fix a.py"
OK_LS = "<returncode>0</returncode>\n<output>\na.py\nb.py\n</output>"  # `ls`: "a.py\nb.py\n"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"
DIFF = "diff --git a/a.py b/a.py\n+x = 2\n"


def imported(tmp_path, messages, fmt="mini-swe-agent-1", **info):
    f = tmp_path / "run.traj.json"
    f.write_text(
        json.dumps(
            {
                "trajectory_format": fmt,
                "info": {"exit_status": "Submitted", **info},
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": TASK},
                    *messages,
                ],
            }
        )
    )
    [t], problems = items(f)
    assert validate_dict(t.to_dict()) == []
    return t, problems


def steps(t):
    return [(x.action.text, x.observation.text, x.observation.exit_code) for x in t.turns]


def call(cid, command, name="bash"):
    args = json.dumps({"command": command})
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool(cid, content):
    return {"role": "tool", "tool_call_id": cid, "content": content}


# -- F1: several action blocks: mini-swe-agent rejected the message, nothing ran -------


def test_two_bash_blocks_are_no_step(tmp_path):
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "Two.\n\n```bash\ncat a.py\n```\n\nand\n\n```bash\nrm -rf b.py\n```"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."},
            {"role": "assistant", "content": "One.\n\n```bash\nls\n```"},
            {"role": "user", "content": OK_LS},
        ],
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [("ls", "a.py\nb.py\n", 0)]
    assert t.turns[0].reasoning == "One."


def test_a_python_block_beside_the_bash_block_is_prose(tmp_path):
    """mini-swe-agent counts ```bash blocks only (v2: ```mswea_bash_command): one of
    them and a ```python sketch is one action, the sketch is reasoning."""
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "Run it.\n\n```bash\nls\n```\n\nthen\n```python\nreturn x + 1\n```"},
            {"role": "user", "content": OK_LS},
            {"role": "assistant", "content": "v2 tag.\n```mswea_bash_command\ncat a.py\n```\n```text\nnote\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx = 1\n</output>"},
        ],
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [("ls", "a.py\nb.py\n", 0), ("cat a.py", "x = 1\n", 0)]
    assert t.turns[0].reasoning == "Run it.\n\nthen\n```python\nreturn x + 1\n```"


# -- F2: a command that timed out: the environment's answer is kept, as an error -----

TIMEOUT = (
    "The last command <command>{cmd}</command> timed out and has been killed.\n"
    "The output of the command was:\n <output>\n{out}\n</output>\n"
    "Please try another command and make sure to avoid those requiring interactive input."
)


def test_timeout_is_an_error_observation_with_the_partial_output(tmp_path):
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "Wait.\n\n```bash\nsleep 1000\n```"},
            {"role": "user", "content": TIMEOUT.format(cmd="sleep 1000", out="")},
            {"role": "assistant", "content": "Serve.\n\n```bash\npython -m http.server\n```"},
            {"role": "user", "content": TIMEOUT.format(cmd="python -m http.server", out="Serving on 8000")},
        ],
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [
        ("sleep 1000", "[timed out]", None),
        ("python -m http.server", "Serving on 8000\n[timed out]", None),
    ]
    assert all(x.observation.is_error for x in t.turns)
    assert all(json.loads(x.observation.state_json) == {"timed_out": True} for x in t.turns)


def test_a_submit_command_that_timed_out_is_a_turn(tmp_path):
    """A timeout is the environment's answer, not the submission."""
    cmd = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && sleep 1000"
    t, _ = imported(
        tmp_path,
        [
            {"role": "assistant", "content": f"End.\n\n```bash\n{cmd}\n```"},
            {"role": "user", "content": TIMEOUT.format(cmd=cmd, out="")},
        ],
    )
    assert steps(t) == [(cmd, "[timed out]", None)]
    assert "submit_command" not in t.metadata


# -- F3: mini-swe-agent v2 (`mini-swe-agent-1.1`): tool calls --------------------------


def test_v2_tool_calls_are_the_actions(tmp_path):
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "I will list files.", "tool_calls": [call("c1", "ls -la")]},
            tool("c1", "<returncode>0</returncode>\n<output>\ntotal 8\nsetup.py\n</output>"),
            {"role": "assistant", "content": "", "tool_calls": [call("c2", "cat nope")]},
            tool("c2", "<returncode>1</returncode>\n<output>\ncat: nope: No such file\n</output>"),
            {"role": "assistant", "content": "Submit.", "tool_calls": [call("c3", SUBMIT)]},
            tool("c3", DIFF),
        ],
        fmt="mini-swe-agent-1.1",
        config={"model": {"model_name": "anthropic/claude-sonnet-4-5"}},
    )  # fmt: skip
    assert problems == []  # a known version: no unknown_version warning
    assert steps(t) == [
        ("ls -la", "total 8\nsetup.py\n", 0),
        ("cat nope", "cat: nope: No such file\n", 1),
    ]
    assert [(x.action.kind, x.action.name) for x in t.turns] == [("command", "bash")] * 2
    assert [x.reasoning for x in t.turns] == ["I will list files.", None]
    assert [x.observation.is_error for x in t.turns] == [False, True]
    assert (t.metadata["submit_command"], t.metadata["submission"]) == (SUBMIT, DIFF)
    assert t.metadata["trajectory_format"] == "mini-swe-agent-1.1"
    assert t.agent.model == "anthropic/claude-sonnet-4-5"
    assert t.outcome.status == "success"


def test_v2_parallel_calls_pair_by_id_else_in_order(tmp_path):
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "Both.", "tool_calls": [call("a", "ls"), call("b", "pwd"), call("c", "id")]},
            tool("b", "<returncode>0</returncode>\n<output>\n/repo\n</output>"),
            {"role": "tool", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            tool("c", "<returncode>0</returncode>\n<output>\nuid=0\n</output>"),
            {"role": "assistant", "content": "Again.", "tool_calls": [call("d", "date")]},
        ],
        fmt="mini-swe-agent-1.1",
    )  # fmt: skip
    assert steps(t) == [
        ("ls", "a.py\n", 0),
        ("pwd", "/repo\n", 0),
        ("id", "uid=0\n", 0),
    ]  # `date`: nothing answered it, no turn
    assert [x.reasoning for x in t.turns] == ["Both.", None, None]
    assert [(p.kind, p.fatal) for p in problems] == [("unpaired_call", False)]


def test_v2_rejected_tool_call_is_no_step(tmp_path):
    """mini-swe-agent rejects a call to another tool, or one without `command`, and runs
    none of the message's calls (a format error): no step, as a message without one."""
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "x", "tool_calls": [call("a", "ls"), call("b", "ls", name="python")]},
            {"role": "user", "content": "Unknown tool 'python'."},
            {"role": "assistant", "content": "y", "tool_calls": [{"id": "c", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "user", "content": "Missing 'command' argument in bash tool call."},
            {"role": "assistant", "content": "z", "tool_calls": [call("d", "ls")]},
            tool("d", OK_LS),
        ],
        fmt="mini-swe-agent-1.1",
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [("ls", "a.py\nb.py\n", 0)]


# -- F4: v2, a fenced block in the prose of a message with tool calls is reasoning ----


def test_v2_code_block_in_prose_is_reasoning_not_the_action(tmp_path):
    prose = "The fix should look like:\n```python\nreturn x + 1\n```\nFirst let me read the file."
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": prose, "tool_calls": [call("c1", "cat app.py")]},
            tool("c1", "<returncode>0</returncode>\n<output>\ndef f(x):\n    return x\n</output>"),
        ],
        fmt="mini-swe-agent-1.1",
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [("cat app.py", "def f(x):\n    return x\n", 0)]
    assert t.turns[0].reasoning == prose


def test_v2_submission_in_the_exit_message(tmp_path):
    """v2 ends the episode with an `exit` message holding the submission, no tool result."""
    t, problems = imported(
        tmp_path,
        [
            {"role": "assistant", "content": "Look.", "tool_calls": [call("c1", "ls")]},
            tool("c1", OK_LS),
            {"role": "assistant", "content": "Submit.", "tool_calls": [call("c2", SUBMIT)]},
            {"role": "exit", "content": DIFF, "extra": {"exit_status": "Submitted"}},
        ],
        fmt="mini-swe-agent-1.1",
    )  # fmt: skip
    assert problems == []
    assert steps(t) == [("ls", "a.py\nb.py\n", 0)]
    assert (t.metadata["submit_command"], t.metadata["submission"]) == (SUBMIT, DIFF)
