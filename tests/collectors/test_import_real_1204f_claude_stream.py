"""Found importing real files (2026-12-04 night): Claude Code's stream-json output (`claude -p
--output-format stream-json --verbose`, the Claude Agent SDK's messages; many headless runs
keep it as the agent's log) was `unrecognized` on every line: its events carry
`session_id`, `parent_tool_use_id` and `tool_use_result` where a session file has
`sessionId`, `uuid`/`parentUuid` chains and `toolUseResult`, so no format took them, and
every call and result was lost.

Now such a file is a Claude Code session: its message lines in order on their thread's
chain (a subagent's lines, named by `parent_tool_use_id`, are that subagent's sidechain),
read by the Claude Code importer as a session is (its Bash framing, its refusals, ...); its
own lines (system init, hooks, the run's `result`, partial messages, rate limits) are
bookkeeping. Our own fixtures, in the shapes of that output (written here)."""

from __future__ import annotations

from .conftest import import_written

SID = "9753c268-9f22-44da-b0c2-2aed628498a9"


def line(kind, content=None, parent=None, uuid=None, mid=None, **extra):
    d = {"type": kind, "session_id": SID, "parent_tool_use_id": parent, **extra}
    if content is not None:
        role = "assistant" if kind == "assistant" else "user"
        d["message"] = {"role": role, "content": content, **({"id": mid} if mid else {})}
    if uuid:
        d["uuid"] = uuid
    return d


def use(tid, name, **inp):
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def result(tid, text, is_error=False):
    return {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}


INIT = {"type": "system", "subtype": "init", "cwd": "/work/app", "session_id": SID,
        "tools": ["Bash", "Task"], "model": "claude-opus-4-6", "claude_code_version": "2.1.202"}  # fmt: skip
LINES = [
    INIT,
    line("user", "make the tests pass", uuid="u0"),  # --replay-user-messages
    {"type": "stream_event", "session_id": SID, "event": {"type": "message_start"}},
    # one response, one line per content block (same message id)
    line(
        "assistant",
        [{"type": "thinking", "thinking": "Look first.", "signature": "x"}],
        uuid="a1",
        mid="m1",
    ),
    line(
        "assistant",
        [use("t1", "Bash", command="pytest -q", description="run tests")],
        uuid="a2",
        mid="m1",
    ),
    line(
        "user",
        [result("t1", "1 failed")],
        uuid="u1",
        tool_use_result={
            "stdout": "1 failed",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
        },
    ),
    line(
        "assistant",
        [use("t2", "Task", description="fix", prompt="fix calc.py", subagent_type="general")],
        uuid="a3",
    ),
    line("user", "fix calc.py", parent="t2", uuid="s0"),
    line("assistant", [use("t3", "Bash", command="sed -i s/+/-/ calc.py")], parent="t2", uuid="s1"),
    line(
        "user",
        [result("t3", "")],
        parent="t2",
        uuid="s2",
        tool_use_result={"stdout": "", "stderr": "", "interrupted": False, "isImage": False},
    ),
    line("assistant", [{"type": "text", "text": "Fixed calc.py."}], parent="t2", uuid="s3"),
    line("user", [result("t2", "Fixed calc.py.")], uuid="u2"),
    {"type": "rate_limit_event", "session_id": SID, "rate_limit_info": {"status": "allowed"}},
    line("assistant", [{"type": "text", "text": "The tests pass now."}], uuid="a4"),
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "The tests pass now.",
        "session_id": SID,
        "num_turns": 4,
        "total_cost_usd": 0.02,
    },
]


def test_stream_json_output_is_a_claude_code_session(tmp_path):
    r, got = import_written(tmp_path, "claude-code.jsonl", LINES, lines=True)
    assert not [p for p in r.problems if p.kind in ("unrecognized", "invalid")], r.problems
    main = got[SID]
    assert main.source.origin_format == "claude-code"
    assert main.task.instruction == "make the tests pass"
    assert [(x.action.kind, x.action.text, x.observation.text) for x in main.turns] == [
        ("command", "pytest -q", "1 failed"),
        ("tool_call", 'Task({"description": "fix", "prompt": "fix calc.py", "subagent_type": "general"})',
         "Fixed calc.py."),
    ]  # fmt: skip
    assert main.turns[0].reasoning == "Look first."
    assert main.metadata["cwd"] == "/work/app"  # from the init line
    assert main.metadata["claude_code_version"] == "2.1.202"
    assert main.metadata["final_message"] == "The tests pass now."
    # the subagent's lines are its own trajectory, not mixed into the main one
    (sub,) = [t for k, t in got.items() if k != SID]
    assert [(x.action.text, x.observation.text) for x in sub.turns] == [
        ("sed -i s/+/-/ calc.py", "")
    ]
    assert sub.task.instruction == "fix calc.py"


def test_a_run_without_the_replayed_prompt_has_no_task_and_keeps_its_turns(tmp_path):
    """Without `--replay-user-messages` the prompt is not in the output: the task is
    unknown, never another line's text."""
    lines = [x for x in LINES if x.get("uuid") != "u0"]
    _, got = import_written(tmp_path, "claude-code.jsonl", lines, lines=True)
    assert not got[SID].task.instruction
    assert [x.action.text for x in got[SID].turns][:1] == ["pytest -q"]


def test_a_session_file_is_still_read_by_its_chain(tmp_path):
    """A session file (`sessionId`, `parentUuid`) is not taken for stream output: a message
    whose parent is an earlier line keeps that chain, not file order."""

    def ev(uuid, parent, kind, content):
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SID,
                "message": {"role": "assistant" if kind == "assistant" else "user", "content": content}}  # fmt: skip

    session = [
        ev("u0", None, "user", "go"),
        ev("a1", "u0", "assistant", [use("t1", "Bash", command="ls")]),
        ev("u1", "a1", "user", [result("t1", "a.py")]),
        ev("a2", "u0", "assistant", [use("t9", "Bash", command="rm -rf /")]),  # a branch left
        ev("a3", "u1", "assistant", [{"type": "text", "text": "done"}]),
    ]
    _, got = import_written(tmp_path, f"{SID}.jsonl", session, lines=True)
    assert [x.action.text for x in got[SID].turns] == ["ls"]
