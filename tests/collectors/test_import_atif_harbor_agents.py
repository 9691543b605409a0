"""ATIF files harbor wrote for other agents carry those agents' own text.

harbor's `convert_mini_swe_agent_to_atif` (src/harbor/agents/installed/mini_swe_agent.py)
puts each tool message's rendered content, mini-swe-agent's observation template
(`<returncode>N</returncode>\\n<output>...</output>`, its long-output and timeout
branches, v2's `<exception>`), into `observation.results[].content`. The ATIF importer
kept that template as the observation; it now reads it as the mini-swe-agent importer
does. Likewise `convert_swe_agent_to_atif` (swe_agent.py) keeps each SWE-agent step's
`observation` as written (its timeouts, 0.x failure notices, "Exited (autosubmitted)"),
and `OpenHands._convert_event_to_step` (openhands.py) an observation event's `content`
without its type or extras (the controller's "not executed" messages, the 0.50+ cut,
Jupyter lines): read as the SWE-agent and OpenHands importers read them. Our own
fixtures, in the shape harbor writes.
"""

from __future__ import annotations

import json

from .test_import_harness_text import LONG, TIMED_OUT, one


def run(*contents, agent="mini-swe-agent"):
    steps = [
        {"step_id": 1, "source": "system", "message": "You are a helpful assistant."},
        {"step_id": 2, "source": "user", "message": "Please solve this issue: fix a.py"},
    ]
    for k, (command, content) in enumerate(contents):
        cid = f"call_{k}"
        steps.append(
            {"step_id": 3 + k, "source": "agent", "message": "", "model_name": "gpt-5",
             "tool_calls": [{"tool_call_id": cid, "function_name": "bash", "arguments": {"command": command}}],
             "observation": {"results": [{"content": content}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": agent, "version": "2.1.0"}, "steps": steps}  # fmt: skip


NOT_RUN = "<exception>action was not executed</exception>\n<returncode>-1</returncode>\n<output>\n</output>"
TIMEOUT = (
    "<exception>An error occurred while executing the command: Command 'sleep 100' timed out"
    " after 60 seconds</exception>\n<returncode>-1</returncode>\n<output>\nwaiting\n</output>"
)


def test_mini_swe_agent_results_are_read_as_its_template(tmp_path):
    t, problems = one(
        tmp_path,
        "trajectory.json",
        run(
            ("ls", "<returncode>0</returncode>\n<output>\na.py\n</output>"),
            (
                "cat nope",
                "<returncode>1</returncode>\n<output>\ncat: nope: No such file\n</output>",
            ),
            ("pytest", LONG.format(rc=1, head="line 0", n=12, tail="line 3")),
            ("sleep 100", TIMEOUT),
            ("cat a.py", NOT_RUN),
        ),
    )
    obs = [(x.observation.text, x.observation.exit_code, x.observation.is_error, x.observation.truncated) for x in t.turns]  # fmt: skip
    assert obs == [
        ("a.py\n", 0, False, False),
        ("cat: nope: No such file\n", 1, True, False),
        ("line 0\nline 3", 1, True, True),
        ("waiting\n[timed out]", None, True, False),
    ]
    assert [p.kind for p in problems] == ["not_run"]


def test_other_agents_results_are_kept_as_they_are(tmp_path):
    content = "<returncode>0</returncode>\n<output>\na.py\n</output>"
    t, _ = one(tmp_path, "trajectory.json", run(("ls", content), agent="my-agent"))
    assert [x.observation.text for x in t.turns] == [content]


# -- SWE-agent: harbor's convert_swe_agent_to_atif (src/harbor/agents/installed/swe_agent.py)


def swe_run(*steps, agent="swe-agent"):
    """One ATIF step per `.traj` step as harbor writes it: a `swe_agent_action` call with
    the step's action, answered by its `observation` as it is (none when empty)."""
    out = [{"step_id": 1, "timestamp": "2025-11-02T10:00:00.000001+00:00", "source": "system", "message": "SETTING: You are an autonomous programmer."}]  # fmt: skip
    for k, (action, observation) in enumerate(steps):
        sid = 2 + k
        out.append(
            {"step_id": sid, "timestamp": f"2025-11-02T10:00:0{k % 10}.000001+00:00", "source": "agent", "model_name": "gpt-4o",
             "message": f"DISCUSSION\nrun it\n\n```\n{action}```", "reasoning_content": "run it",
             "tool_calls": [{"tool_call_id": f"call_{sid}_1", "function_name": "swe_agent_action", "arguments": {"raw_action": action}}],
             "observation": {"results": [{"source_call_id": f"call_{sid}_1", "content": observation}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.5", "session_id": "0d6c", "agent": {"name": agent, "version": "1.1.0", "model_name": "gpt-4o", "extra": {"original_format": "swe-agent-traj", "environment": "main"}},
            "steps": out, "final_metrics": {}, "notes": "Converted from SWE-agent .traj format to ATIF"}  # fmt: skip


SWE_TIMEOUT_1X = (
    "The command 'sleep 100' was cancelled because it took more than 30 seconds. Please try a"
    " different command that completes more quickly."
)
SWE_TIMEOUT_0X = (
    "partial\nEXECUTION TIMED OUT BECAUSE THE COMMAND WAS RUNNING FOR MORE THAN 25 SECONDS."
)
SWE_FAILED_0X = "x\nCOMMAND FAILED TO EXECUTE. RESTARTING PROCESS."


def test_swe_agent_results_are_read_as_its_observations(tmp_path):
    t, problems = one(
        tmp_path,
        "trajectory.json",
        swe_run(
            ("ls\n", "a.py"),
            ("sleep 100\n", SWE_TIMEOUT_1X),
            ("python long.py\n", SWE_TIMEOUT_0X),
            ("cat big.bin\n", SWE_FAILED_0X),
            ("exit_cost", "Exited (autosubmitted)"),
        ),
    )
    obs = [(x.observation.text, x.observation.is_error, x.observation.exit_code) for x in t.turns]
    assert obs == [("a.py", False, None), ("[timed out]", True, None), ("partial\n[timed out]", True, None)]  # fmt: skip
    assert [json.loads(x.observation.state_json or "null") for x in t.turns] == [None, TIMED_OUT, TIMED_OUT]  # fmt: skip
    assert [p.kind for p in problems] == ["harness_failure"]
    assert "COMMAND FAILED TO EXECUTE" in problems[0].message
    assert t.metadata["exit_action"] == "exit_cost"


def test_swe_agent_exit_is_no_turn(tmp_path):
    t, problems = one(tmp_path, "trajectory.json", swe_run(("ls\n", "a.py"), ("exit\n", "Exited")))
    assert [json.loads(x.action.arguments_json) for x in t.turns] == [{"raw_action": "ls\n"}]
    assert t.metadata["exit_action"] == "exit" and problems == []


# -- OpenHands: harbor's OpenHands._convert_events_to_trajectory (installed/openhands.py)


def oh_run(*calls, agent="openhands"):
    """An agent step per OpenHands action with its observation merged in, as harbor
    writes it: the call from `tool_call_metadata`, the observation's `content` alone."""
    steps = [
        {"step_id": 1, "timestamp": "2025-11-02T10:00:00.000001", "source": "system", "message": "You are OpenHands agent, a helpful AI assistant."},
        {"step_id": 2, "timestamp": "2025-11-02T10:00:00.000002", "source": "user", "message": "Fix a.py"},
    ]  # fmt: skip
    for k, (tool, arguments, content) in enumerate(calls):
        cid = f"toolu_{k}"
        steps.append(
            {"step_id": 3 + k, "timestamp": f"2025-11-02T10:00:0{k + 1}.5", "source": "agent", "message": "Running command: x",
             "tool_calls": [{"tool_call_id": cid, "function_name": tool, "arguments": arguments}],
             "observation": {"results": [{"source_call_id": cid, "content": content}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.5", "session_id": "sessions-1", "agent": {"name": agent, "version": "0.59.0", "extra": {"agent_class": "CodeActAgent"}}, "steps": steps}  # fmt: skip


OH_CUT = "a" * 15000 + "\n[... Observation truncated due to length ...]\n" + "b" * 15000
OH_MULTIPLE = (
    "ERROR: Cannot execute multiple commands at once.\nPlease run each command separately OR"
    " chain them into a single command via && or ;\nProvided commands:\n(1) python x.py\n(2) python y.py"
)
OH_RUNTIME = (
    "The action has not been executed due to a runtime error. The runtime system may have"
    " crashed and restarted due to resource constraints. Any previously established system"
    " state, dependencies, or environment variables may have been lost."
)
OH_CELL = "1\n[Jupyter current working directory: /workspace]\n[Jupyter Python interpreter: /openhands/poetry/bin/python]"  # fmt: skip


def test_openhands_results_are_read_as_its_observations(tmp_path):
    t, problems = one(
        tmp_path,
        "trajectory.json",
        oh_run(
            ("execute_bash", {"command": "ls"}, "a.py"),
            ("execute_bash", {"command": "python gen.py"}, OH_CUT),
            ("execute_bash", {"command": "python x.py\npython y.py"}, OH_MULTIPLE),
            ("str_replace_editor", {"command": "view", "path": "/workspace/a.py"}, OH_RUNTIME),
            ("execute_ipython_cell", {"code": "print(1)"}, OH_CELL),
            ("execute_bash", {"command": "", "is_input": "true"}, "ERROR: No previous running command to retrieve logs from."),
        ),
    )  # fmt: skip
    obs = [(x.observation.text, x.observation.truncated) for x in t.turns]
    assert obs == [("a.py", False), ("a" * 15000 + "\n" + "b" * 15000, True), ("1", False)]
    assert json.loads(t.turns[2].observation.state_json) == {"working_dir": "/workspace"}
    assert [p.kind for p in problems] == ["not_run", "harness_failure", "not_run"]
    assert "OpenHands did not run" in problems[0].message


def oh_said(*calls, agent="openhands"):
    """`oh_run` with each step's `message` as given: (tool, arguments, content, message)."""
    run = oh_run(*[c[:3] for c in calls], agent=agent)
    for step, call in zip(run["steps"][2:], calls, strict=True):
        step["message"] = call[3]
    return run


OH_MCP_ARGS = {"repo_path": "/workspace", "max_count": 3}


def test_openhands_descriptions_of_its_actions_are_not_reasoning(tmp_path):
    """harbor copies each OpenHands event's `message` into the step: the action's
    description (`Running command: ls`), or the observation's (`I edited the file
    a.py.`, an error's text) where the action has none; the model's thought is not in
    it. Only a think's and a finish's thought are the model's words."""
    edit = {"command": "str_replace", "path": "/workspace/a.py", "old_str": "-", "new_str": "+"}
    edit_error = "ERROR:\nNo replacement was performed, old_str `-` did not appear verbatim."
    t, problems = one(
        tmp_path,
        "trajectory.json",
        oh_said(
            ("execute_bash", {"command": "ls -a"}, "a.py", "Running command: ls -a"),
            ("str_replace_editor", {"command": "view", "path": "/workspace/a.py"}, "1\ta", "Reading file: /workspace/a.py"),
            ("str_replace_editor", edit, "edited", "I edited the file /workspace/a.py."),
            ("str_replace_editor", edit, edit_error, edit_error),
            ("execute_ipython_cell", {"code": "print(1)"}, "1", "Running Python code interactively: print(1)"),
            ("browser", {"code": "goto('http://127.0.0.1')"}, "page", "I am interacting with the browser:\n```\ngoto('http://127.0.0.1')\n```"),
            ("git_log", OH_MCP_ARGS, "commit 1", f"I am interacting with the MCP server with name:\n```\ngit_log\n```\nand arguments:\n```\n{OH_MCP_ARGS}\n```"),
            ("task_tracker", {"command": "plan", "task_list": [{"id": "1", "title": "fix"}]}, "ok", "Managing 1 task item."),
            ("think", {"thought": "The bug is in add."}, "Your thought has been logged.", "I am thinking...: The bug is in add."),
        ),
    )  # fmt: skip
    assert [x.reasoning for x in t.turns] == [None] * 8 + ["The bug is in add."]
    assert problems == []


def test_openhands_messages_that_are_not_its_description_stay(tmp_path):
    """A message other than the exact description of the call (another command, another
    path, text around it) is kept; so is any message of another agent."""
    t, _ = one(
        tmp_path,
        "trajectory.json",
        oh_said(
            ("execute_bash", {"command": "ls"}, "a.py", "Running command: ls -a"),
            ("str_replace_editor", {"command": "view", "path": "/b.py"}, "x", "Reading file: /a.py"),
            ("execute_bash", {"command": "ls"}, "a.py", "First: Running command: ls"),
            ("think", {"thought": "t"}, "Your thought has been logged.", "I am thinking: t"),
        ),
    )  # fmt: skip
    assert [x.reasoning for x in t.turns] == [
        "Running command: ls -a",
        "Reading file: /a.py",
        "First: Running command: ls",
        "I am thinking: t",
    ]
    t, _ = one(
        tmp_path,
        "trajectory.json",
        oh_said(("execute_bash", {"command": "ls"}, "a.py", "Running command: ls"), agent="openhands-sdk"),
    )  # fmt: skip
    assert [x.reasoning for x in t.turns] == ["Running command: ls"]


def test_other_agents_harness_text_is_kept(tmp_path):
    """The same texts from another agent (the SDK's ATIF, written by harbor's runner, is
    `openhands-sdk`), and text like a template that is not the whole result, stay."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        oh_run(("execute_bash", {"command": "ls"}, OH_RUNTIME), ("execute_ipython_cell", {"code": "1"}, OH_CELL), agent="openhands-sdk"),
    )  # fmt: skip
    assert [x.observation.text for x in t.turns] == [OH_RUNTIME, OH_CELL] and problems == []
    t, problems = one(
        tmp_path,
        "trajectory.json",
        oh_run(("str_replace_editor", {"command": "view", "path": "/a"}, OH_CELL), ("execute_bash", {"command": "cat n"}, "note: " + OH_RUNTIME)),
    )  # fmt: skip
    assert [x.observation.text for x in t.turns] == [
        OH_CELL,
        "note: " + OH_RUNTIME,
    ] and problems == []
    t, problems = one(
        tmp_path,
        "trajectory.json",
        swe_run(("sleep 100\n", SWE_TIMEOUT_1X), ("cat big.bin\n", SWE_FAILED_0X), ("exit_cost", "Exited (autosubmitted)"), agent="my-agent"),
    )  # fmt: skip
    assert [x.observation.text for x in t.turns] == [SWE_TIMEOUT_1X, SWE_FAILED_0X, "Exited (autosubmitted)"]  # fmt: skip
    t, _ = one(tmp_path, "trajectory.json", swe_run(("exit\n", "bye"), ("echo EXECUTION TIMED OUT x\n", "EXECUTION TIMED OUT x")))  # fmt: skip
    assert [x.observation.text for x in t.turns] == ["bye", "EXECUTION TIMED OUT x"]


def claude_code_run(*calls):
    """harbor's ClaudeCode ATIF (`_format_tool_result`): each result's `content` joins the
    tool_result's content, harbor's own rendering of `toolUseResult` (`[stdout]`,
    `[stderr]`, `[exit_code] N`, `[metadata] ...`) and `[error] tool reported failure`;
    the raw block and `toolUseResult` are kept in `extra.tool_result_metadata`."""
    steps = [{"step_id": 1, "source": "user", "message": "Fix calc.py"}]
    for k, (name, args, raw, tur, content) in enumerate(calls):
        cid = f"toolu_{k}"
        meta = {
            "raw_tool_result": {"type": "tool_result", "tool_use_id": cid, **raw},
            "tool_use_result": tur,
        }
        steps.append(
            {"step_id": 2 + k, "source": "agent", "message": "", "model_name": "claude-sonnet-4",
             "tool_calls": [{"tool_call_id": cid, "function_name": name, "arguments": args}],
             "observation": {"results": [{"source_call_id": cid, "content": content,
                                          "extra": {"tool_result_metadata": meta, "tool_result_is_error": bool(raw.get("is_error"))}}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": "claude-code", "version": "2.1.3"}, "steps": steps}  # fmt: skip


def test_claude_code_results_are_read_from_the_raw_tool_result(tmp_path):
    ls = {"stdout": "calc.py\ntest_calc.py", "stderr": "", "interrupted": False, "isImage": False}
    reminder = "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be considered malware.\n</system-reminder>\n"
    t, problems = one(
        tmp_path,
        "trajectory.json",
        claude_code_run(
            ("Bash", {"command": "ls"}, {"content": "calc.py\ntest_calc.py", "is_error": False}, ls,
             "calc.py\ntest_calc.py\n\n[stdout]\ncalc.py\ntest_calc.py"),
            ("Read", {"file_path": "/w/calc.py"}, {"content": "     1\tx = 1" + reminder}, {"type": "text"},
             "     1\tx = 1" + reminder + "\n\n[metadata] {\"type\": \"text\"}"),
            ("Write", {"file_path": "/w/a.py", "content": "y"},
             {"content": "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", "is_error": True},
             "Error: File has not been read yet.", "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>\n\n[error] tool reported failure"),
        ),
    )  # fmt: skip
    assert [x.observation.text for x in t.turns] == ["calc.py\ntest_calc.py", "     1\tx = 1"]
    assert [p.kind for p in problems] == ["not_run"]


def codex_run(*calls):
    """harbor's Codex ATIF (`_parse_output_blob`): a structured output's `output` field is the
    content and its `metadata` (exit code) goes to the step's `extra.tool_metadata`; any
    other output (Codex's free-form framing, its refusals) is the content as it is."""
    steps = [{"step_id": 1, "source": "user", "message": "Fix calc.py"}]
    for k, (args, content, meta) in enumerate(calls):
        cid = f"call_{k}"
        steps.append(
            {"step_id": 2 + k, "source": "agent", "message": "", "model_name": "gpt-5-codex",
             "tool_calls": [{"tool_call_id": cid, "function_name": "shell", "arguments": args}],
             "observation": {"results": [{"source_call_id": cid, "content": content}]},
             **({"extra": {"tool_metadata": meta}} if meta else {})}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": "codex", "version": "0.46.0"}, "steps": steps}  # fmt: skip


def test_codex_results_are_read_without_its_framing(tmp_path):
    ls = {"command": ["bash", "-lc", "ls"]}
    t, problems = one(
        tmp_path,
        "trajectory.json",
        codex_run(
            (ls, "calc.py\n", {"exit_code": 0, "duration_seconds": 0.1}),
            ({"command": ["bash", "-lc", "pytest"]}, "Exit code: 1\nWall time: 2.5 seconds\nOutput:\nFAILED test_calc.py\n", None),
            ({"command": ["bash", "-lc", "rm -rf /"]}, "exec command rejected by user", None),
            ({"command": ["bash", "-lc", "sleep 99"]}, "command timed out after 10000 milliseconds\nwaiting\n", {"exit_code": 124}),
        ),
    )  # fmt: skip
    obs = [(x.observation.text, x.observation.exit_code, x.observation.is_error) for x in t.turns]
    assert obs == [
        ("calc.py\n", 0, False),
        ("FAILED test_calc.py\n", 1, True),
        ("waiting\n[timed out]", None, True),
    ]
    assert [p.kind for p in problems] == ["not_run"]


def test_claude_code_calls_are_the_actions_a_session_makes(tmp_path):
    """A harbor ClaudeCode step's Bash call is the command it ran, as in a Claude Code
    session (`claude_code.call_action`), not the tool call `Bash({"command": ...})`."""
    ls = {"stdout": "calc.py", "stderr": "", "interrupted": False, "isImage": False}
    t, _ = one(
        tmp_path,
        "trajectory.json",
        claude_code_run(
            ("Bash", {"command": "ls", "description": "List files"}, {"content": "calc.py"}, ls, "calc.py"),
            ("Read", {"file_path": "/w/calc.py"}, {"content": "     1\tx = 1"}, {"type": "text"}, "     1\tx = 1"),
        ),
    )  # fmt: skip
    acts = [(x.action.kind, x.action.name, x.action.text) for x in t.turns]
    assert acts == [
        ("command", "Bash", "ls"),
        ("tool_call", "Read", 'Read({"file_path": "/w/calc.py"})'),
    ]


def gemini_run(*calls):
    """harbor's `GeminiCli._convert_gemini_to_atif`: a call's result `content` is its
    `functionResponse.response.output` alone (Gemini CLI's `llmContent`; an error-only
    response has none: `content` null)."""
    steps = [{"step_id": 1, "source": "user", "message": "Fix calc.py"}]
    for k, (name, args, content) in enumerate(calls):
        cid = f"{name}-{k}"
        steps.append(
            {"step_id": 2 + k, "source": "agent", "message": "", "model_name": "gemini-2.5-pro",
             "tool_calls": [{"tool_call_id": cid, "function_name": name, "arguments": args}],
             "observation": {"results": [{"source_call_id": cid, "content": content}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": "gemini-cli", "version": "0.40.1"}, "steps": steps}  # fmt: skip


def test_gemini_cli_results_are_read_as_its_sessions_are(tmp_path):
    """Gemini CLI's shell framing (`Output: ...`, `Exit Code: N`, the process group) is not
    the output; a shell call harbor kept no content for (Gemini CLI answered with an error
    alone) is no turn; other tools' results stay as they are."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        gemini_run(
            ("run_shell_command", {"command": "pytest -q", "description": "Run tests"}, "Output: 1 failed\nExit Code: 1\nProcess Group PGID: 7"),
            ("run_shell_command", {"command": "ls"}, "Output: calc.py\nProcess Group PGID: 9"),
            ("run_shell_command", {"command": "rm -rf /"}, None),
            ("read_file", {"absolute_path": "/w/calc.py"}, "Output: x = 1"),
        ),
    )  # fmt: skip
    acts = [(x.action.kind, x.action.text) for x in t.turns]
    assert acts[:2] == [("command", "pytest -q"), ("command", "ls")]
    assert acts[2][0] == "tool_call" and acts[2][1].startswith("read_file(")
    obs = [(x.observation.text, x.observation.exit_code, x.observation.is_error) for x in t.turns]
    assert obs == [("1 failed", 1, True), ("calc.py", 0, False), ("Output: x = 1", None, False)]
    assert [(p.kind, p.message.split(":")[0]) for p in problems] == [
        ("harness_failure", "steps[3].tool_calls[0]")
    ]


def test_codex_calls_are_the_actions_a_rollout_makes(tmp_path):
    """A harbor Codex step's shell call is the command it ran (`bash -lc X` is X), as in a
    rollout (`codex.call_action`); an apply_patch argv is Codex's own patch tool."""
    t, _ = one(
        tmp_path,
        "trajectory.json",
        codex_run(
            ({"command": ["bash", "-lc", "ls -a"], "workdir": "/w"}, "calc.py\n", {"exit_code": 0}),
            ({"command": ["apply_patch", "*** Begin Patch\n*** End Patch"]}, "Done!", {"exit_code": 0}),
        ),
    )  # fmt: skip
    acts = [(x.action.kind, x.action.name, x.action.text) for x in t.turns]
    assert acts[0] == ("command", "shell", "ls -a")
    assert acts[1][:2] == ("tool_call", "apply_patch")
