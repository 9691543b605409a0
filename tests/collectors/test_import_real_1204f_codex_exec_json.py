"""Found importing real files (2026-12-04 night): `codex exec --json` output (the JSONL of
`ThreadEvent`s Codex prints headless: `thread.started`, `turn.started`, `item.started` /
`item.completed` of `command_execution`, `mcp_tool_call`, `agent_message`, `reasoning`,
`file_change` ..., `turn.completed`; many repos keep it as the agent's log) was
`unrecognized` on every line: no command and no output of the run was imported.

Now such a file is one Codex trajectory: each command with its `aggregated_output` and
`exit_code`, each MCP call with its result, reasoning and the agent's words before a call
its reasoning; what makes no turn is said (a declined command, a file change whose patch
the output does not hold, Codex's own errors). Our own fixtures, in the shapes of
codex-rs/exec/src/exec_events.rs (written here)."""

from __future__ import annotations

from .conftest import found, import_written

TID = "019c8299-88f5-7931-9430-48246b934214"


def item(event, iid, kind, **fields):
    return {"type": f"item.{event}", "item": {"id": iid, "type": kind, **fields}}


def command(iid, cmd, output, code, status="completed"):
    return [
        item(
            "started",
            iid,
            "command_execution",
            command=cmd,
            aggregated_output="",
            exit_code=None,
            status="in_progress",
        ),
        item(
            "completed",
            iid,
            "command_execution",
            command=cmd,
            aggregated_output=output,
            exit_code=code,
            status=status,
        ),
    ]


RUN = [
    {"type": "thread.started", "thread_id": TID},
    {"type": "turn.started"},
    item("completed", "item_0", "reasoning", text="**Checking** the tests first."),
    *command("item_1", "/bin/bash -lc 'pytest -q'", "1 failed, 3 passed\n", 1, status="failed"),
    item("completed", "item_2", "agent_message", text="Fixing calc.py now."),
    item(
        "completed",
        "item_3",
        "file_change",
        changes=[{"path": "calc.py", "kind": "update"}],
        status="completed",
    ),
    item(
        "started",
        "item_4",
        "mcp_tool_call",
        server="docs",
        tool="search",
        arguments={"q": "calc"},
        result=None,
        error=None,
        status="in_progress",
    ),
    item(
        "completed",
        "item_4",
        "mcp_tool_call",
        server="docs",
        tool="search",
        arguments={"q": "calc"},
        result={
            "content": [{"type": "text", "text": "calc.subtract(a, b)"}],
            "structured_content": None,
        },
        error=None,
        status="completed",
    ),
    item(
        "completed",
        "item_5",
        "command_execution",
        command="bash -lc 'rm -rf /tmp/x'",
        aggregated_output="",
        exit_code=None,
        status="declined",
    ),
    item(
        "completed", "item_6", "error", message="Falling back from WebSockets to HTTPS transport."
    ),
    *command("item_7", "bash -lc 'pytest -q'", "4 passed\n", 0),
    item("completed", "item_8", "agent_message", text="All tests pass."),
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5},
    },
]


def test_exec_json_output_is_one_codex_trajectory(tmp_path):
    r, got = import_written(tmp_path, "codex.jsonl", RUN, lines=True)
    assert not found(r, "unrecognized") and not found(r, "invalid")
    t = got[TID]
    assert t.source.origin_format == "codex"
    turns = [(x.action.kind, x.action.text, x.observation.text, x.observation.exit_code, x.observation.is_error)
             for x in t.turns]  # fmt: skip
    assert turns == [
        ("command", "pytest -q", "1 failed, 3 passed\n", 1, True),
        ("tool_call", 'mcp__docs__search({"q": "calc"})', "calc.subtract(a, b)", None, False),
        ("command", "pytest -q", "4 passed\n", 0, False),
    ]
    assert t.turns[0].reasoning == "**Checking** the tests first."
    assert t.turns[1].reasoning == "Fixing calc.py now."  # the agent's words before the call
    assert t.metadata["final_message"] == "All tests pass."
    assert not t.task.instruction  # the prompt is not in the output
    assert [m for _, m in found(r, "not_run")] == [
        "item item_5 (\"bash -lc 'rm -rf /tmp/x'\"): declined, never run; no turn"
    ]
    assert [m for _, m in found(r, "message_not_imported")] == [
        "item item_3: a file change (the output names the files and their kind, not the patch); not imported",
        "item item_6: Codex's own error notice; not imported",
    ]


def test_a_command_still_running_at_the_end_is_no_turn(tmp_path):
    lines = [RUN[0], RUN[1], command("item_1", "bash -lc 'sleep 100'", "", None)[0]]
    r, got = import_written(tmp_path, "codex.jsonl", lines, lines=True)
    assert not got
    assert found(r, "unpaired_call") == [
        ("line 3", "item item_1 (\"bash -lc 'sleep 100'\"): status \"in_progress\", no output; "
                   "no turn (what the environment answered is unknown)")
    ]  # fmt: skip
    assert [k for k, _ in found(r, "empty")] == [""]


def test_a_failed_turn_is_said(tmp_path):
    lines = [*RUN[:5], {"type": "turn.failed", "error": {"message": "stream disconnected"}}]
    r, got = import_written(tmp_path, "codex.jsonl", lines, lines=True)
    assert [x.action.text for x in got[TID].turns] == ["pytest -q"]
    assert found(r, "message_not_imported") == [
        ("line 6", 'turn.failed: "stream disconnected" (Codex\'s own error); not imported')
    ]


def test_an_image_in_an_mcp_result_is_said_not_dropped(tmp_path):
    shot = item(
        "completed", "item_1", "mcp_tool_call", server="pw", tool="screenshot", arguments={},
        result={"content": [{"type": "text", "text": "shot taken"}, {"type": "image", "data": "AAA"}]},
        error=None, status="completed",
    )  # fmt: skip
    r, got = import_written(tmp_path, "codex.jsonl", [RUN[0], shot], lines=True)
    assert [x.observation.text for x in got[TID].turns] == ["shot taken"]
    assert [m for _, m in found(r, "non_text_part")] == [
        "turn 0 observation (line 2: item.result.content): 1 image part not imported"
    ]
