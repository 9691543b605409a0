"""harbor's ATIF for OpenCode, Qwen Code and the OpenHands SDK keeps each tool result in the
agent's own text: OpenCode's bash notices (`(Command timed out after N ms)`,
`<bash_metadata>` / `<shell_metadata>` blocks, `(no output)`, its cuts and
`Truncate.output`'s notice), Qwen Code's Gemini-CLI-style shell framing with its own timeout
and long-run advisory, the OpenHands SDK terminal's cut and refusals. They are read without
that text (`collectors/importers/harbor_agents.py`); a call harbor kept no result for is no
turn. Our own fixtures, in the shapes harbor's converters write (src/harbor/agents/installed/
opencode.py, qwen_code.py, openhands_sdk_runner.py)."""

from __future__ import annotations

import json

from worldtrace.collectors.importers import openhands_v1

from .test_import_claude_code import obs
from .test_import_harness_text import TIMED_OUT, one

INTERRUPTED = {"interrupted": True}


def states(t):
    return [json.loads(x.observation.state_json or "null") for x in t.turns]


def acts(t):
    return [(x.action.kind, x.action.text) for x in t.turns]


def where(problems):
    return [(p.kind, p.message.split(":")[0]) for p in problems]


# -- OpenCode: harbor's OpenCode._convert_events_to_trajectory (installed/opencode.py)


def opencode_run(*calls, agent="opencode"):
    """One agent step per `step_start`..`step_finish` with its tool parts: the call from
    the part (`callID`, `tool`, `state.input`), a result only when the part has
    `state.output` (a part in state `error` has none)."""
    steps = [{"step_id": 1, "timestamp": "2026-01-20T10:00:00+00:00", "source": "user", "message": "Fix calc.py"}]  # fmt: skip
    for k, (tool, args, output) in enumerate(calls):
        cid = f"toolu_{k}"
        step = {"step_id": 2 + k, "timestamp": f"2026-01-20T10:00:0{k % 10}+00:00", "source": "agent",
                "message": "", "model_name": "anthropic/claude-sonnet-4-5", "llm_call_count": 1,
                "tool_calls": [{"tool_call_id": cid, "function_name": tool, "arguments": args}]}  # fmt: skip
        if output is not None:
            step["observation"] = {"results": [{"source_call_id": cid, "content": output}]}
        steps.append(step)
    return {"schema_version": "ATIF-v1.7", "session_id": "ses_1", "agent": {"name": agent, "version": "1.1.36", "model_name": "anthropic/claude-sonnet-4-5"}, "steps": steps}  # fmt: skip


def bash(command, output):
    return ("bash", {"command": command, "description": "Run it"}, output)


def meta(*lines, tag="bash"):
    return f"\n\n<{tag}_metadata>\n" + "\n".join(lines) + f"\n</{tag}_metadata>"


LONG_TIMEOUT = (
    "shell tool terminated command after exceeding timeout 15000 ms. If this command is"
    " expected to take longer and is not waiting for interactive input, retry with a larger"
    " timeout value in milliseconds."
)
SAVED = "The tool call succeeded but the output was truncated. Full output saved to: /root/.local/share/opencode/tool-output/tool_01"  # fmt: skip
GREP_HINT = (
    "Use Grep to search the full content or Read with offset/limit to view specific sections."
)


def test_opencode_bash_results_are_read_without_its_notices(tmp_path):
    """Each version's timeout and abort notices make the output so far a timeout or an
    interrupted command; `(no output)` is the empty output; the command is the action."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        opencode_run(
            bash("ls", "a.py\n"),
            bash("sleep 99", "partial\n\n\n(Command timed out after 60000 ms)"),
            bash("make", "waiting\n" + meta("bash tool terminated commmand after exceeding timeout 120000 ms")),
            bash("npm run dev", "(no output)" + meta(LONG_TIMEOUT, tag="shell")),
            bash("yes", "y\ny" + meta("User aborted the command")),
            bash("true", "(no output)"),
            bash("tail -f log", "x\n\n\n(Command was aborted)"),
        ),
    )  # fmt: skip
    assert acts(t)[:2] == [("command", "ls"), ("command", "sleep 99")]
    assert obs(t) == [
        ("a.py\n", False, None, False),
        ("partial\n[timed out]", True, None, False),
        ("waiting\n[timed out]", True, None, False),
        ("[timed out]", True, None, False),
        ("y\ny\n[interrupted]", True, None, False),
        ("", False, None, False),
        ("x\n[interrupted]", True, None, False),
    ]
    assert states(t) == [None, TIMED_OUT, TIMED_OUT, TIMED_OUT, INTERRUPTED, None, INTERRUPTED]
    assert problems == []


def test_opencode_cuts_are_truncation(tmp_path):
    """The bash tool's cut after its limit (both notices, checked against the limit), the
    shell tool's `...output truncated...` before the tail, and `Truncate.output`'s notice
    (any tool, head or tail kept) are `observation.truncated` with the text shown."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        opencode_run(
            bash("cat big", "a" * 30000 + "\n\n(Output was truncated due to length limit)"),
            bash("cat big", "é" * 30000 + meta("bash tool truncated output as it exceeded 30000 char limit")),
            bash("seq 9999", "...output truncated...\n\nFull output saved to: /tmp/tool_02\n\n9998\n9999"),
            ("read", {"filePath": "/w/calc.py"}, f"line1\nline2\n\n...120 lines truncated...\n\n{SAVED}\n{GREP_HINT}"),
            bash("seq 5000", f"...3000 lines truncated...\n\n{SAVED}\n{GREP_HINT}\n\n4999\n5000"),
        ),
    )  # fmt: skip
    assert obs(t) == [
        ("a" * 30000, False, None, True),
        ("é" * 30000, False, None, True),
        ("9998\n9999", False, None, True),
        ("line1\nline2", False, None, True),
        ("4999\n5000", False, None, True),
    ]
    assert acts(t)[3] == ("tool_call", 'read({"filePath": "/w/calc.py"})')
    assert problems == []


def test_opencode_call_without_result_is_no_turn(tmp_path):
    """A tool part in state `error` (OpenCode's refusal, a permission rule, an abort, the
    tool's own error) has no output: harbor writes no result, and there is no turn."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        opencode_run(bash("ls", "a.py"), bash("rm -rf /", None), ("read", {"filePath": "/nope"}, None)),
    )  # fmt: skip
    assert acts(t) == [("command", "ls")]
    assert where(problems) == [
        ("harness_failure", "steps[2].tool_calls[0]"),
        ("harness_failure", "steps[3].tool_calls[0]"),
    ]
    assert "OpenCode's tool ended in an error" in problems[0].message


OPENCODE_LOOKALIKES = [
    "x" + meta("something the program printed"),
    "short" + meta("bash tool truncated output as it exceeded 30000 char limit"),
    "x" + meta("User aborted the command") + "\nmore",
    "(Command timed out after 5 ms)\nmore",
    "short\n\n(Output was truncated due to length limit)",
    f"line1\n\n...12 lines truncated...\n\n{SAVED}\nSome other hint.",
    "(no output)\n",
    "...output truncated...\nFull output saved to: /tmp/x\n\ntail",
    "(no output)" + meta("exit code: 1"),
]


def test_opencode_lookalike_text_is_kept(tmp_path):
    """Text like OpenCode's notices that is not its exact template, whole and in its place
    (an unknown metadata line, a cut notice where no cut was, a notice before more output,
    an unknown hint), stays; so does the exact text from another agent."""
    t, problems = one(
        tmp_path, "trajectory.json", opencode_run(*[bash("run", x) for x in OPENCODE_LOOKALIKES])
    )
    assert [x.observation.text for x in t.turns] == OPENCODE_LOOKALIKES
    assert not any(x.observation.truncated or x.observation.is_error for x in t.turns)
    assert problems == []
    notices = ["partial\n\n\n(Command timed out after 60000 ms)", "(no output)"]
    t, problems = one(
        tmp_path,
        "trajectory.json",
        opencode_run(*[bash("run", x) for x in notices], bash("rm", None), agent="my-agent"),
    )
    assert [x.observation.text for x in t.turns] == notices  # `rm`: no result, no turn
    assert acts(t)[0][0] == "tool_call"
    assert [p.kind for p in problems] == ["unpaired_call"]


# -- Qwen Code: harbor's QwenCode._convert_events_to_trajectory (installed/qwen_code.py)


def qwen_run(*calls, agent="qwen-code"):
    """An assistant step per Qwen Code `assistant` record with its functionCalls, each
    answered by the `tool_result` record's `functionResponse.response.output` ("" when the
    response has only an error)."""
    steps = [{"step_id": 1, "timestamp": "2026-01-20T10:00:00.000Z", "source": "user", "message": "Fix calc.py"}]  # fmt: skip
    for k, (name, args, content) in enumerate(calls):
        cid = f"call_{k}"
        steps.append(
            {"step_id": 2 + k, "timestamp": "2026-01-20T10:00:01.000Z", "source": "agent", "message": "", "model_name": "qwen3-coder-plus",
             "tool_calls": [{"tool_call_id": cid, "function_name": name, "arguments": args}],
             "observation": {"results": [{"source_call_id": cid, "content": content}]}}
        )  # fmt: skip
    return {"schema_version": "ATIF-v1.7", "session_id": "s", "agent": {"name": agent, "version": "0.8.0", "model_name": "qwen3-coder-plus"}, "steps": steps}  # fmt: skip


def framed(command, output, code):
    return (
        f"Command: {command}\nDirectory: (root)\nOutput: {output}\nError: (none)\n"
        f"Exit Code: {code}\nSignal: (none)\nProcess Group PGID: 4242"
    )


LONG_RUN = (
    "\n\nNote: this foreground command ran for 75s. Next time you run a similar long-running"
    " process (build watchers, dev servers, soak tests, polling loops), pass `is_background:"
    " true` so the agent isn't blocked while the command runs. (This is forward-looking"
    " guidance for FUTURE invocations — do NOT re-run the command that just completed; for"
    " stateful operations like deploys, migrations, or git push, that would cause double side"
    " effects.) The output of background runs stays inspectable via /tasks (text, any mode)"
    " or the on-disk output file; in interactive mode the Background tasks dialog also has a"
    " per-entry detail view + live updates."
)
QWEN_TIMEOUT = "Command timed out after 120000ms before it could complete. Below is the output before it timed out:\nwaiting"  # fmt: skip
QWEN_SILENT = "Command timed out after 5000ms before it could complete. There was no output before it timed out."  # fmt: skip


def test_qwen_code_results_are_read_as_gemini_cli_with_its_own_templates(tmp_path):
    """Qwen Code's shell framing (Gemini CLI's older layout) is not the output; its own
    timeout template is a timeout, its long-run advisory is removed, a shell call answered
    with an error alone (harbor keeps "") is no turn; the shell call is a `command`."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        qwen_run(
            ("run_shell_command", {"command": "pytest -q", "is_background": False}, framed("pytest -q", "1 failed", 1)),
            ("run_shell_command", {"command": "make"}, framed("make", "built", 0) + LONG_RUN),
            ("run_shell_command", {"command": "npm start"}, QWEN_TIMEOUT),
            ("run_shell_command", {"command": "sleep 9"}, QWEN_SILENT),
            ("run_shell_command", {"command": "rm -rf /"}, ""),
            ("read_file", {"absolute_path": "/w/calc.py"}, "x = 1"),
        ),
    )  # fmt: skip
    assert acts(t)[:2] == [("command", "pytest -q"), ("command", "make")]
    assert acts(t)[4][0] == "tool_call"
    assert [x[:3] for x in obs(t)] == [
        ("1 failed", True, 1),
        ("built", False, 0),
        ("waiting\n[timed out]", True, None),
        ("[timed out]", True, None),
        ("x = 1", False, None),
    ]
    assert states(t) == [None, None, TIMED_OUT, TIMED_OUT, None]
    assert where(problems) == [("harness_failure", "steps[5].tool_calls[0]")]


def test_qwen_code_lookalikes_and_other_agents_keep_the_text(tmp_path):
    """Qwen Code's templates not whole or not in place stay; Gemini CLI's ATIF keeps Qwen
    Code's timeout template (Gemini CLI never wrote it)."""
    kept = ["note: " + QWEN_TIMEOUT, LONG_RUN.strip() + "\nafter", "note" + LONG_RUN + "!"]
    t, problems = one(
        tmp_path,
        "trajectory.json",
        qwen_run(*[("run_shell_command", {"command": "x"}, x) for x in kept]),
    )
    assert [x.observation.text for x in t.turns] == kept and problems == []
    t, problems = one(
        tmp_path,
        "trajectory.json",
        qwen_run(("run_shell_command", {"command": "npm start"}, QWEN_TIMEOUT), agent="gemini-cli"),
    )
    assert obs(t) == [(QWEN_TIMEOUT, False, None, False)] and problems == []


# -- OpenHands SDK: harbor's openhands_sdk_runner.py build_trajectory


def sdk_run(*calls, agent="openhands-sdk"):
    """An agent step per ActionEvent (the model's arguments), its ObservationEvent's
    content text as the result; a call the SDK answered otherwise gets none."""
    steps = [{"step_id": 1, "timestamp": "2026-01-20T10:00:00", "source": "system", "message": "You are OpenHands agent."},
             {"step_id": 2, "timestamp": "2026-01-20T10:00:00", "source": "user", "message": "Fix calc.py"}]  # fmt: skip
    for k, (name, args, content) in enumerate(calls):
        cid = f"toolu_{k}"
        step = {"step_id": 3 + k, "timestamp": "2026-01-20T10:00:01", "source": "agent", "message": "", "model_name": "litellm_proxy/claude",
                "tool_calls": [{"tool_call_id": cid, "function_name": name, "arguments": args}]}  # fmt: skip
        if content is not None:
            step["observation"] = {"results": [{"source_call_id": cid, "content": content}]}
        steps.append(step)
    return {"schema_version": "ATIF-v1.5", "session_id": "harbor-session", "agent": {"name": agent, "version": "unknown"}, "steps": steps}  # fmt: skip


HEAD = openhands_v1.CMD_HEAD
REST = openhands_v1.CMD_CUT - HEAD - len(openhands_v1.CUT_NOTICE)
SDK_CUT = "a" * HEAD + openhands_v1.CUT_NOTICE + "b" * REST
NO_PREVIOUS = "No previous running command to retrieve logs from."
CLOSED = "[The terminal was closed while the command was running.]"


def test_openhands_sdk_results_are_read_as_its_terminal_writes_them(tmp_path):
    """The terminal's `maybe_truncate` cut is truncation; its refusals and failures make no
    turn; a reset's notice is removed; a call harbor kept no result for is no turn; the
    terminal's command is a `command`, its input to a running command keystrokes."""
    t, problems = one(
        tmp_path,
        "trajectory.json",
        sdk_run(
            ("terminal", {"command": "ls", "security_risk": "LOW"}, "a.py"),
            ("terminal", {"command": "python gen.py"}, SDK_CUT),
            ("terminal", {"command": "", "is_input": True}, NO_PREVIOUS),
            ("terminal", {"command": "C-c", "is_input": True}, "^C"),
            ("terminal", {"command": "python x.py"}, CLOSED),
            ("terminal", {"command": "pwd", "reset": True}, openhands_v1.RESET_NOTICE + "\n\n/w"),
            ("file_editor", {"command": "view", "path": "/w/a.py"}, "1\tx = 1"),
            ("terminal", {"command": "rm -rf /"}, None),
        ),
    )  # fmt: skip
    assert acts(t)[:2] == [("command", "ls"), ("command", "python gen.py")]
    assert [x.action.kind for x in t.turns[2:]] == ["keystrokes", "tool_call", "tool_call"]
    assert obs(t) == [
        ("a.py", False, None, False),
        ("a" * HEAD + "\n" + "b" * REST, False, None, True),
        ("^C", False, None, False),
        ("/w", False, None, False),
        ("1\tx = 1", False, None, False),
    ]
    assert where(problems) == [
        ("not_run", "steps[4].tool_calls[0]"),
        ("harness_failure", "steps[6].tool_calls[0]"),
        ("unpaired_call", "steps[9].tool_calls[0]"),
    ]


def test_openhands_sdk_lookalikes_are_kept(tmp_path):
    """The cut notice not exactly where the SDK puts it, a refusal with more text, and the
    SDK's texts under another agent, stay."""
    kept = ["a" * 10 + openhands_v1.CUT_NOTICE + "b" * 10, "x\n" + NO_PREVIOUS, CLOSED + "\n"]
    t, problems = one(tmp_path, "trajectory.json", sdk_run(*[("terminal", {"command": "x"}, x) for x in kept]))  # fmt: skip
    assert [x.observation.text for x in t.turns] == kept and problems == []
    t, problems = one(
        tmp_path,
        "trajectory.json",
        sdk_run(("terminal", {"command": "x"}, SDK_CUT), ("terminal", {"command": ""}, NO_PREVIOUS), agent="my-agent"),
    )  # fmt: skip
    assert [x.observation.text for x in t.turns] == [SDK_CUT, NO_PREVIOUS] and problems == []
    assert acts(t)[0][0] == "tool_call"


QWEN_NOTICE = (
    "Tool output was too large and has been truncated.\n"
    "The full output has been saved to: /root/.qwen/tmp/ab12/run_shell_command_3f9a.output\n"
    "To read the complete output, use the read_file tool with the absolute file path above.\n"
    "The truncated output below shows the beginning and end of the content. The marker"
    " '... [CONTENT TRUNCATED] ...' indicates where content was removed.\n\n"
    "Truncated part of the output:\n"
)
QWEN_SEP = "\n\n---\n... [CONTENT TRUNCATED] ...\n---\n\n"


def qwen_cut(text, head_lines, tail_lines):
    """truncation.ts `truncateAndSaveToFile` over a whole tool text: the notice, then the
    first and last lines kept around its separator (one side empty for keep head/tail)."""
    lines = text.split("\n")
    head = "\n".join(lines[:head_lines])
    tail = "\n".join(lines[len(lines) - tail_lines :]) if tail_lines else ""
    return QWEN_NOTICE + head + QWEN_SEP + tail


def test_qwen_code_cut_is_truncation_read_in_its_shell_framing(tmp_path):
    """Found: Qwen Code's own cut of a long output stayed in the observation: its notice
    (where it saved the whole output, how to read it), the `---` separator and the shell
    framing around the output. Now it is truncation: the head and tail of the output it
    kept, with the exit code the framing's tail holds; another tool's head-only cut is
    its head."""
    seq = "\n".join(str(i) for i in range(1, 1001))
    whole = framed("seq 1 1000", seq, 0)
    t, problems = one(
        tmp_path,
        "trajectory.json",
        qwen_run(
            ("run_shell_command", {"command": "seq 1 1000"}, qwen_cut(whole, 6, 9)),
            ("grep_search", {"pattern": "TODO"}, qwen_cut(seq, 5, 0)),
        ),
    )
    assert problems == []
    both, head = t.turns[0].observation, t.turns[1].observation
    assert (both.text, both.exit_code, both.is_error, both.truncated) == (
        "1\n2\n3\n4\n996\n997\n998\n999\n1000", 0, False, True)  # fmt: skip
    assert (head.text, head.truncated) == ("1\n2\n3\n4\n5\n", True)


def test_qwen_code_cut_is_qwen_codes_own(tmp_path):
    """Gemini CLI never wrote Qwen Code's separator: its ATIF keeps such a text as it is."""
    cut = qwen_cut(framed("seq 1 1000", "\n".join(map(str, range(1, 1001))), 0), 6, 9)
    t, _ = one(
        tmp_path,
        "trajectory.json",
        qwen_run(("run_shell_command", {"command": "seq 1 1000"}, cut), agent="gemini-cli"),
    )
    assert "... [CONTENT TRUNCATED] ..." in t.turns[0].observation.text
    assert not t.turns[0].observation.truncated
