"""OpenHands event streams (save-trajectory-path / GUI download) and eval output records."""

from __future__ import annotations

import json
import subprocess

from worldtrace.collectors.importers import detect_format, import_paths
from worldtrace.schemas import read_records, validate_dict

from .test_import_fidelity import items


def _call(cid, name, args, text=""):
    """tool_call_metadata as OpenHands serializes it (the model's whole response)."""
    return {
        "function_name": name,
        "tool_call_id": cid,
        "model_response": {
            "id": "resp-1",
            "model": "claude-sonnet-4",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text,
                        "tool_calls": [
                            {
                                "id": cid,
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                        ],
                    },
                }
            ],
        },
        "total_calls_in_response": 1,
    }


TS = "2025-05-04T10:00:{:02d}.000000"

EVENTS = [
    {
        "id": 0,
        "timestamp": TS.format(0),
        "source": "agent",
        "message": "You are OpenHands agent...",
        "action": "system",
        "args": {
            "content": "You are OpenHands agent, a helpful AI assistant.",
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "execute_bash",
                        "description": "Execute a bash command",
                        "parameters": {
                            "type": "object",
                            "properties": {"command": {"type": "string"}},
                            "required": ["command"],
                        },
                    },
                }
            ],
            "openhands_version": "0.39.0",
            "agent_class": "CodeActAgent",
        },
    },
    {
        "id": 1,
        "timestamp": TS.format(1),
        "source": "user",
        "message": "Fix the failing test in calc.py",
        "action": "message",
        "args": {"content": "Fix the failing test in calc.py", "image_urls": None},
    },
    {
        "id": 2,
        "timestamp": TS.format(1),
        "source": "user",
        "message": "",
        "action": "recall",
        "args": {"recall_type": "workspace_context", "query": "Fix the failing test"},
    },
    {
        "id": 3,
        "timestamp": TS.format(1),
        "source": "environment",
        "message": "Added workspace context",
        "cause": 2,
        "observation": "recall",
        "content": "",
        "extras": {"recall_type": "workspace_context", "repo_name": "", "date": "2025-05-04"},
    },
    {
        "id": 4,
        "timestamp": TS.format(2),
        "source": "agent",
        "message": "Running command: ls",
        "action": "run",
        "tool_call_metadata": _call("toolu_01", "execute_bash", {"command": "ls"}),
        "args": {
            "command": "ls",
            "is_input": False,
            "thought": "Let me look at the repository.",
            "blocking": False,
            "hidden": False,
            "confirmation_state": "confirmed",
        },
    },
    {
        "id": 5,
        "timestamp": TS.format(3),
        "source": "agent",
        "message": "Command `ls` executed with exit code 0.",
        "cause": 4,
        "observation": "run",
        "content": "calc.py\ntest_calc.py",
        "extras": {
            "command": "ls",
            "metadata": {"exit_code": 0, "pid": -1, "working_dir": "/workspace", "suffix": ""},
            "hidden": False,
        },
        "success": True,
    },
    {  # a failing command, the older `exit_code` in extras
        "id": 6,
        "timestamp": TS.format(4),
        "source": "agent",
        "message": "Running command: python -m pytest -q",
        "action": "run",
        "args": {"command": "python -m pytest -q", "thought": ""},
    },
    {
        "id": 7,
        "timestamp": TS.format(5),
        "source": "agent",
        "cause": 6,
        "observation": "run",
        "content": "F\nFAILED test_calc.py::test_add - assert 3 == 4",
        "extras": {"command": "python -m pytest -q", "exit_code": 1},
    },
    {
        "id": 8,
        "timestamp": TS.format(6),
        "source": "agent",
        "message": "Your thought has been logged.",
        "action": "think",
        "args": {"thought": "add() subtracts; the fix is a sign."},
    },
    {
        "id": 9,
        "timestamp": TS.format(6),
        "source": "agent",
        "cause": 8,
        "observation": "think",
        "content": "Your thought has been logged.",
        "extras": {},
    },
    {  # an edit through str_replace_editor (OH_ACI)
        "id": 10,
        "timestamp": TS.format(7),
        "source": "agent",
        "message": "",
        "action": "edit",
        "tool_call_metadata": _call(
            "toolu_02",
            "str_replace_editor",
            {
                "command": "str_replace",
                "path": "/workspace/calc.py",
                "old_str": "a - b",
                "new_str": "a + b",
            },
        ),
        "args": {
            "path": "/workspace/calc.py",
            "command": "str_replace",
            "file_text": None,
            "old_str": "a - b",
            "new_str": "a + b",
            "insert_line": None,
            "content": "",
            "start": 1,
            "end": -1,
            "thought": "Fix the operator.",
            "security_risk": -1,
            "impl_source": "oh_aci",
        },
    },
    {
        "id": 11,
        "timestamp": TS.format(8),
        "source": "agent",
        "cause": 10,
        "observation": "edit",
        "content": "The file /workspace/calc.py has been edited.",
        "extras": {
            "path": "/workspace/calc.py",
            "prev_exist": True,
            "old_content": "def add(a, b):\n    return a - b\n",
            "new_content": "def add(a, b):\n    return a + b\n",
            "impl_source": "oh_aci",
        },
    },
    {  # an IPython cell without tool metadata (older prompt-based CodeAct)
        "id": 12,
        "timestamp": TS.format(9),
        "source": "agent",
        "action": "run_ipython",
        "args": {
            "code": "import calc; calc.add(1, 2)",
            "thought": "Check it in Python.",
            "include_extra": True,
            "kernel_init_code": "",
            "confirmation_state": "confirmed",
        },
    },
    {  # an action nothing answers
        "id": 13,
        "timestamp": TS.format(10),
        "source": "agent",
        "action": "read",
        "args": {"path": "/workspace/README.md", "start": 0, "end": -1, "thought": ""},
    },
    {  # answers 12 (its cause), though it comes after 13
        "id": 14,
        "timestamp": TS.format(11),
        "source": "agent",
        "cause": 12,
        "observation": "run_ipython",
        "content": "3\n[Jupyter current working directory: /workspace]",
        "extras": {"code": "import calc; calc.add(1, 2)"},
    },
    {
        "id": 15,
        "timestamp": TS.format(12),
        "source": "agent",
        "message": "I changed `-` to `+`. Shall I also add a test?",
        "action": "message",
        "args": {
            "content": "I changed `-` to `+`. Shall I also add a test?",
            "wait_for_response": True,
        },
    },
    {
        "id": 16,
        "timestamp": TS.format(12),
        "source": "environment",
        "cause": 15,
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "awaiting_user_input", "reason": ""},
    },
    {
        "id": 17,
        "timestamp": TS.format(13),
        "source": "user",
        "action": "message",
        "args": {"content": "No, that's all. Thanks!"},
    },
    {
        "id": 18,
        "timestamp": TS.format(14),
        "source": "agent",
        "action": "finish",
        "tool_call_metadata": _call("toolu_03", "finish", {"message": "Fixed add()."}),
        "args": {
            "outputs": {},
            "thought": "",
            "final_thought": "Fixed add().",
            "task_completed": "true",
        },
    },
    {
        "id": 19,
        "timestamp": TS.format(15),
        "source": "environment",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "finished", "reason": ""},
    },
]


def _write(path, obj):
    path.write_text(json.dumps(obj, indent=2))
    return path


def test_event_list_turns(tmp_path):
    [t], problems = items(_write(tmp_path / "trajectory-abc123.json", EVENTS))
    assert validate_dict(t.to_dict()) == []
    assert t.source.origin_format == "openhands" and t.source.origin_id == "trajectory-abc123"
    kinds = [(x.action.kind, x.action.name) for x in t.turns]
    assert kinds == [
        ("command", "execute_bash"),
        ("command", "bash"),
        ("tool_call", "str_replace_editor"),
        ("tool_call", "run_ipython"),
        ("text", None),
    ]  # the `read` nothing answers (events[13]) is no turn
    ls, pytest_, edit, cell, said = t.turns
    assert (ls.action.text, ls.observation.text) == ("ls", "calc.py\ntest_calc.py")
    assert (ls.observation.exit_code, ls.observation.is_error) == (0, False)
    assert json.loads(ls.observation.state_json) == {"working_dir": "/workspace"}
    assert ls.reasoning == "Let me look at the repository."
    assert ls.started_at.isoformat() == "2025-05-04T10:00:02+00:00"
    # a failing command (older extras.exit_code)
    assert (pytest_.observation.exit_code, pytest_.observation.is_error) == (1, True)
    # the edit: the model's own arguments; the think before it is its reasoning
    assert json.loads(edit.action.arguments_json) == {
        "command": "str_replace",
        "path": "/workspace/calc.py",
        "old_str": "a - b",
        "new_str": "a + b",
    }
    assert edit.reasoning == "add() subtracts; the fix is a sign.\n\nFix the operator."
    assert edit.observation.text == "The file /workspace/calc.py has been edited."
    # no metadata: the action type and args without bookkeeping
    assert json.loads(cell.action.arguments_json) == {"code": "import calc; calc.add(1, 2)"}
    # its cause, though it came after `read`; the Jupyter line the action server appends is
    # OpenHands', its directory state
    assert cell.observation.text == "3"
    assert json.loads(cell.observation.state_json) == {"working_dir": "/workspace"}
    assert said.action.text.startswith("I changed") and said.observation.text.startswith("No,")
    assert [(p.kind, p.fatal) for p in problems] == [("unpaired_call", False)]
    assert problems[0].message == (
        "events[13]: no observation for the agent's 'read' action (id 13); no turn"
    )
    assert t.task.instruction == "Fix the failing test in calc.py"
    assert t.metadata["agent_system_prompt"].startswith("You are OpenHands agent")
    assert t.metadata["final_thought"] == "Fixed add()."
    assert t.metadata["task_completed"] == "true"
    assert t.metadata["openhands_version"] == "0.39.0"
    assert "final_message" not in t.metadata  # the user answered it
    assert [s["name"] for s in json.loads(t.system.action_space)] == ["execute_bash"]
    assert t.agent.model == "claude-sonnet-4" and t.domain == "swe"
    assert t.outcome.status == "unknown"
    assert t.started_at.isoformat() == "2025-05-04T10:00:00+00:00"


def test_gui_download_shape_and_detection(tmp_path):
    """The server's `/trajectory` answer `{trajectory: [...]}` is OpenHands, not SWE-agent
    (which takes any `trajectory` list)."""
    f = _write(tmp_path / "t.json", {"trajectory": EVENTS})
    assert detect_format(f, json.loads(f.read_text())) == "openhands"
    [t], _ = items(f)
    assert len(t.turns) == 5 and validate_dict(t.to_dict()) == []


def test_stray_observations_and_unfollowed_think(tmp_path):
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Open example.com"}},
        {
            "id": 2,
            "source": "agent",
            "action": "browse_interactive",
            "args": {"browser_actions": 'goto("https://example.com")', "thought": "Go there."},
        },
        {  # no cause: the next observation answers it
            "id": 3,
            "source": "environment",
            "observation": "browse",
            "content": "Example Domain",
            "extras": {"url": "https://example.com/", "error": False},
        },
        {
            "id": 4,
            "source": "agent",
            "observation": "error",
            "content": "Agent got stuck in a loop",
            "extras": {},
        },
        {"id": 5, "source": "environment", "observation": "null", "content": "", "extras": {}},
        {"id": 6, "source": "agent", "action": "think", "args": {"thought": "Done, I think."}},
        {
            "id": 7,
            "source": "agent",
            "action": "message",
            "args": {"content": "The page says Example Domain."},
        },
    ]
    [t], problems = items(_write(tmp_path / "web.json", events))
    assert validate_dict(t.to_dict()) == []
    [turn] = t.turns
    assert turn.action.name == "browse_interactive" and turn.observation.text == "Example Domain"
    assert json.loads(turn.observation.state_json) == {"url": "https://example.com/"}
    assert t.domain == "web"
    assert t.metadata["final_message"] == "The page says Example Domain."
    kinds = sorted((p.kind, p.message.split(":")[0]) for p in problems)
    assert kinds == [("message_not_imported", "events[3]"), ("message_not_imported", "events[5]")]


def test_error_observation_answers_its_action(tmp_path):
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "read x"}},
        {"id": 2, "source": "agent", "action": "read", "args": {"path": "/x"}},
        {
            "id": 3,
            "source": "environment",
            "cause": 2,
            "observation": "error",
            "content": "File not found: /x",
            "extras": {"error_id": ""},
        },
    ]
    [t], problems = items(_write(tmp_path / "e.json", events))
    [turn] = t.turns
    assert turn.observation.is_error and turn.observation.text == "File not found: /x"
    assert problems == []


RECORD = {
    "instance_id": "calc__calc-42",
    "instruction": "Fix the failing test in calc.py",
    "test_result": {
        "git_patch": "diff --git a/calc.py b/calc.py\n-    return a - b\n+    return a + b\n",
        "report": {"empty_generation": False, "resolved": True, "failed_apply_patch": False},
    },
    "metadata": {
        "agent_class": "CodeActAgent",
        "llm_config": {"model": "litellm_proxy/claude-sonnet-4", "api_key": "**********"},
        "max_iterations": 100,
        "dataset": "princeton-nlp__SWE-bench_Verified-test",
        "data_split": None,
        "git_commit": "0123abcd",
    },
    "history": EVENTS[1:8],
    "metrics": {"accumulated_cost": 0.12},
    "error": None,
    "instance": {"repo": "calc/calc", "base_commit": "deadbeef"},
}


def test_eval_output_records(tmp_path):
    unresolved = {
        **RECORD,
        "instance_id": "calc__calc-43",
        "test_result": {"git_patch": "", "report": {"resolved": False}},
    }
    no_report = {**RECORD, "instance_id": "calc__calc-44", "test_result": {"git_patch": ""}}
    lines = [json.dumps(x) for x in (RECORD, unresolved, no_report)]
    f = tmp_path / "output.jsonl"
    f.write_text("\n".join(lines) + "\n")
    ts, problems = items(f)
    assert problems == []
    assert [(t.source.origin_id, t.outcome.status, t.outcome.reward) for t in ts] == [
        ("calc__calc-42", "success", 1.0),
        ("calc__calc-43", "failure", 0.0),
        ("calc__calc-44", "unknown", None),
    ]
    t = ts[0]
    assert validate_dict(t.to_dict()) == []
    assert (t.task.task_id, t.domain, t.agent.model) == (
        "calc__calc-42",
        "swe",
        "litellm_proxy/claude-sonnet-4",
    )
    assert [x.action.text for x in t.turns] == ["ls", "python -m pytest -q"]
    assert t.metadata["agent_class"] == "CodeActAgent" and t.metadata["repo"] == "calc/calc"
    assert json.loads(t.metadata["test_result"])["report"]["resolved"] is True
    assert t.source.origin_index == 0 and ts[2].source.origin_index == 2


def test_old_pair_history_and_bad_record(tmp_path):
    pairs = [
        [
            {"source": "user", "action": "message", "args": {"content": "count files"}},
            {"source": "user", "observation": "null", "content": "", "extras": {}},
        ],
        [
            {"source": "agent", "action": "run", "args": {"command": "ls | wc -l", "thought": ""}},
            {"source": "agent", "observation": "run", "content": "2", "extras": {"exit_code": 0}},
        ],
    ]
    bad = {"instance_id": "x-1", "history": None, "error": "runtime failed", "test_result": {}}
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({"instance_id": "x-0", "history": pairs}) + "\n" + json.dumps(bad))
    [t], [problem] = items(f)
    [turn] = t.turns
    assert (turn.action.text, turn.observation.text, turn.observation.exit_code) == (
        "ls | wc -l",
        "2",
        0,
    )
    assert (problem.kind, problem.where) == ("invalid", "line 2")
    assert "history: expected a list of OpenHands events" in problem.message


def test_mixed_directory_cli(tmp_path, wt_env):
    d = tmp_path / "in"
    d.mkdir()
    _write(d / "oh.json", EVENTS)
    (d / "chat.jsonl").write_text(
        json.dumps(
            {
                "id": "c1",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "a",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "a", "content": "42"},
                ],
            }
        )
        + "\n"
    )
    r = subprocess.run(["worldtrace", "import", str(d)], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stderr
    assert "openhands" in r.stdout and "openai" in r.stdout
    trajs = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert sorted(t.source.origin_format for t in trajs) == ["openai", "openhands"]


def test_forced_format_reads_records_and_lists(tmp_path):
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps(RECORD) + "\n")
    r = import_paths([f], tmp_path / "out", _cfg("openhands"))
    assert r.imported["openhands"] == 1 and not r.errors
    g = _write(tmp_path / "events.json", EVENTS)
    r = import_paths([g], tmp_path / "out2", _cfg("openhands"))
    assert r.imported["openhands"] == 1 and not r.errors


def _cfg(fmt):
    from worldtrace.collectors.importers import ImportConfig

    return ImportConfig(format=fmt, workers=1)


def test_json_list_of_eval_records(tmp_path):
    """A `.json` list of eval outputs is a list of records, each detected on its own."""
    other = {**RECORD, "instance_id": "calc__calc-45"}
    f = _write(tmp_path / "outputs.json", [RECORD, other])
    assert detect_format(f, json.loads(f.read_text())) == "openhands"
    ts, problems = items(f)
    assert problems == [] and [t.source.origin_id for t in ts] == ["calc__calc-42", "calc__calc-45"]
    assert [t.source.origin_index for t in ts] == [0, 1]
