"""Gemini CLI session recordings (`~/.gemini/tmp/<project_hash>/chats/session-*.json` and,
since v0.40, `.jsonl`), the 10th importer (collectors/importers/gemini_cli.py): one file
is one session; each tool call record's functionResponse is its observation, without
Gemini CLI's own text (the shell tool's framing, its cancel/timeout/background templates,
its output cuts, its refusals). Our own fixtures, built here in the shapes Gemini CLI
writes (chatRecordingService: the JSON document, or the metadata line then message,
`$set` and `$rewindTo` records)."""

from __future__ import annotations

import json
import subprocess

from worldtrace.collectors.importers import ImportConfig, gemini_cli, import_paths
from worldtrace.schemas import Action, read_records, validate_dict

from .test_import_claude_code import Session as ClaudeSession
from .test_import_claude_code import obs

SID = "8c3f0a52-6d1e-4b7a-9f20-1a2b3c4d5e6f"
HASH = "5f2b9c1d0e8a7f6b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b"
MODEL = "gemini-2.5-pro"
SH = "run_shell_command"


class Session:
    """Messages as Gemini CLI records them (chatRecordingService)."""

    def __init__(self, sid=SID):
        self.sid, self.messages, self.n = sid, [], 0

    def _message(self, kind, content, **extra):
        self.n += 1
        m = {
            "id": f"m{self.n:02d}",
            "timestamp": f"2025-10-06T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
            "type": kind,
            "content": content,
            **extra,
        }
        self.messages.append(m)
        return m

    def user(self, text):
        return self._message("user", text)

    def gemini(self, text="", *calls, thoughts=(), model=MODEL):
        extra = {"thoughts": [{"subject": s, "description": d, "timestamp": "2025-10-06T09:00:00.000Z"} for s, d in thoughts]}  # fmt: skip
        if calls:
            extra["toolCalls"] = list(calls)
        return self._message("gemini", text, **extra, tokens={"input": 10, "output": 5, "cached": 0, "thoughts": 0, "tool": 0, "total": 15}, model=model)  # fmt: skip

    def notice(self, kind, text):
        return self._message(kind, text)

    def document(self):
        return {"sessionId": self.sid, "projectHash": HASH, "startTime": "2025-10-06T09:00:00.000Z",
                "lastUpdated": "2025-10-06T09:10:00.000Z", "messages": self.messages}  # fmt: skip

    def metadata(self):
        return {"sessionId": self.sid, "projectHash": HASH, "startTime": "2025-10-06T09:00:00.000Z",
                "lastUpdated": "2025-10-06T09:00:00.000Z"}  # fmt: skip


def call(cid, name, args, output=None, error=None, status="success", parts=()):
    """A ToolCallRecord: `result` is the call's responseParts."""
    response = {}
    if output is not None:
        response["output"] = output
    if error is not None:
        response["error"] = error
    result = [{"functionResponse": {"id": cid, "name": name, "response": response}}, *parts]
    return {"id": cid, "name": name, "args": args, "result": result, "status": status,
            "timestamp": "2025-10-06T09:00:30.000Z", "displayName": name, "description": "",
            "renderOutputAsMarkdown": False}  # fmt: skip


def sh(cid, command, llm, **kw):
    return call(cid, SH, {"command": command, "description": "run it"}, llm, **kw)


def framed(output, code=None, signal=None, bg=None, pgid=4242, error=None):
    """tools/shell.ts now: `Output:`, then only the lines that say something."""
    lines = [f"Output: {output or '(empty)'}"]
    if error:
        lines.append(f"Error: {error}")
    if code not in (None, 0):
        lines.append(f"Exit Code: {code}")
    if signal:
        lines.append(f"Signal: {signal}")
    if bg:
        lines.append(f"Background PIDs: {', '.join(map(str, bg))}")
    if pgid:
        lines.append(f"Process Group PGID: {pgid}")
    return "\n".join(lines)


def framed_0_1(command, output, code="0", signal="(none)", directory="(root)"):
    """tools/shell.ts before: every line, `(none)` where there is nothing."""
    return (f"Command: {command}\nDirectory: {directory}\nOutput: {output or '(empty)'}\nError: (none)\n"
            f"Exit Code: {code}\nSignal: {signal}\nBackground PIDs: (none)\nProcess Group PGID: 777")  # fmt: skip


def fix_session():
    """Run the tests (they fail), read the file, edit it, run them again, tell the user."""
    s = Session()
    s.user("Fix the failing test in calc.py")
    out = "F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s"
    s.gemini("Let me run the tests.", sh("c1", "pytest -q", framed(out, code=1)),
             thoughts=[("Running tests", "I should see what fails first.")])  # fmt: skip
    s.gemini("", call("c2", "read_file", {"file_path": "/home/dev/calc/calc.py"}, "def add(a, b):\n    return a - b\n"),
             thoughts=[("Reading", "Look at add().")])  # fmt: skip
    s.gemini("`add` subtracts.", call("c3", "replace", {"file_path": "/home/dev/calc/calc.py", "old_string": "a - b", "new_string": "a + b"},
             "Successfully modified file: /home/dev/calc/calc.py (1 replacements)."))  # fmt: skip
    s.gemini("", sh("c4", "pytest -q", framed("1 passed in 0.01s")), thoughts=[("Checking", "")])
    s.gemini("Fixed: `add` now adds.")
    s.user("Thanks! Is it tested?")
    s.gemini("Yes, test_add covers it.")
    return s


def write_jsonl(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(x if isinstance(x, str) else json.dumps(x) + "\n" for x in lines))
    return path


def write_doc(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def read(path):
    """The module's own reading (no registry): trajectories and problems."""
    out = list(gemini_cli.parse(path))
    trajs = [x for x in out if not isinstance(x, gemini_cli.ImportProblem)]
    for t in trajs:
        assert validate_dict(t.with_id().to_dict()) == [], t
    return trajs, [x for x in out if isinstance(x, gemini_cli.ImportProblem)]


def one(s, tmp_path, name="session.jsonl"):
    f = write_jsonl(tmp_path / name, [s.metadata(), *s.messages])
    [t], problems = read(f)
    return t, problems


def warned(problems):
    return sorted((p.kind, p.where) for p in problems)


def test_a_session_is_one_trajectory(tmp_path):
    """Both layouts (the JSON document before v0.40, the JSONL records since) read alike:
    the shell calls are commands without Gemini CLI's framing, the other tools tool calls,
    what the agent told the user and the reply a text turn, thoughts the reasoning."""
    s = fix_session()
    f = write_doc(tmp_path / "chats" / "session-2025-10-06T09-00-8c3f0a52.json", s.document())
    g = write_jsonl(tmp_path / "chats" / "session-2025-10-06T09-00-8c3f0a52.jsonl",
                    [s.metadata(), *s.messages, {"$set": {"lastUpdated": "2025-10-06T09:10:00.000Z"}}])  # fmt: skip
    for path in (f, g):
        [t], problems = read(path)
        assert problems == []
        assert (t.source.origin_format, t.source.origin_id) == ("gemini-cli", SID)
        assert [(x.action.kind, x.action.name, x.action.text) for x in t.turns] == [
            ("command", SH, "pytest -q"),
            ("tool_call", "read_file", 'read_file({"file_path": "/home/dev/calc/calc.py"})'),
            ("tool_call", "replace", 'replace({"file_path": "/home/dev/calc/calc.py", "new_string": "a + b", "old_string": "a - b"})'),
            ("command", SH, "pytest -q"),
            ("text", None, "Fixed: `add` now adds."),
        ]  # fmt: skip
        assert obs(t) == [
            ("F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s", True, 1, False),
            ("def add(a, b):\n    return a - b\n", False, None, False),
            ("Successfully modified file: /home/dev/calc/calc.py (1 replacements).", False, None, False),
            ("1 passed in 0.01s", False, 0, False),  # no Exit Code line: 0
            ("Thanks! Is it tested?", False, None, False),
        ]  # fmt: skip
        assert [x.reasoning for x in t.turns] == [
            "Running tests: I should see what fails first.\n\nLet me run the tests.",
            "Reading: Look at add().",
            "`add` subtracts.",
            "Checking",
            None,
        ]
        assert [x.started_at.isoformat() for x in t.turns] == [
            "2025-10-06T09:00:02+00:00", "2025-10-06T09:00:03+00:00", "2025-10-06T09:00:04+00:00",
            "2025-10-06T09:00:05+00:00", "2025-10-06T09:00:06+00:00",
        ]  # fmt: skip
        assert t.started_at.isoformat() == "2025-10-06T09:00:00+00:00"
        assert (t.task.instruction, t.domain) == ("Fix the failing test in calc.py", "swe")
        assert (t.agent.name, t.agent.model) == ("gemini-cli", MODEL)
        assert t.metadata == {"project_hash": HASH, "final_message": "Yes, test_add covers it."}


def test_both_layouts_import_through_the_cli(tmp_path, wt_env):
    """Needs the registration (/tmp/gemini-init.diff): a `.json` session is a whole-file
    format, a `.jsonl` one a session format told by its first line; a Claude Code session
    and an OpenAI JSONL file beside them keep their formats; the same files again are
    already present."""
    s = fix_session()
    chats = tmp_path / "gemini" / "tmp" / HASH / "chats"
    write_doc(chats / "session-2025-10-06T09-00-8c3f0a52.json", s.document())
    write_jsonl(chats / "session-2025-10-07T09-00-11112222.jsonl",
                [{**s.metadata(), "sessionId": "11112222-aaaa"}, *s.messages])  # fmt: skip
    from .test_import_claude_code import fix_session as claude_session

    claude_session().write(tmp_path / "gemini" / "claude.jsonl")
    chat = {"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "x", "content": "a.txt"}]}  # fmt: skip
    (tmp_path / "gemini" / "chat.jsonl").write_text(json.dumps(chat) + "\n")
    r = subprocess.run(["worldtrace", "import", str(tmp_path / "gemini")], capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gemini-cli" in r.stdout and "unrecognized" not in r.stdout + r.stderr
    got = sorted((t.source.origin_format, t.source.origin_id, len(t.turns)) for t in read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))  # fmt: skip
    assert got == [
        ("claude-code", "4f1c2a7e-0b9d-4e55-9a61-2c3d4e5f6a7b", 5),
        ("gemini-cli", "11112222-aaaa", 5),
        ("gemini-cli", SID, 5),
        ("openai", "c1", 1),
    ]
    r = subprocess.run(["worldtrace", "import", str(tmp_path / "gemini")], capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert r.returncode == 0 and "already present" in r.stdout, r.stdout + r.stderr
    # --format gemini-cli reads any file as a session; the help lists it
    f = write_jsonl(tmp_path / "other" / "session.log", [s.metadata(), *s.messages])
    r = import_paths([f], tmp_path / "out", ImportConfig(format="gemini-cli"))
    assert r.imported["gemini-cli"] == 1 and not r.errors, r.problems
    help_ = subprocess.run(["worldtrace", "import", "--help"], capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert "gemini-cli" in help_.stdout


def test_detection(tmp_path):
    """A JSONL session is told by its first record (the metadata line: `sessionId` and
    `projectHash`, no `type`); a JSON one by its parsed document. Claude Code events and
    Codex rollouts are not Gemini CLI's."""
    s = fix_session()
    g = write_jsonl(tmp_path / "a.jsonl", ["not json\n", s.metadata(), *s.messages])
    c = ClaudeSession()
    c.user("hi")
    claude = c.write(tmp_path / "c.jsonl")
    codex = write_jsonl(tmp_path / "r.jsonl", [{"timestamp": "2025-10-06T09:00:00Z", "type": "session_meta", "payload": {"id": "x"}}])  # fmt: skip
    assert [gemini_cli.sniff(p) for p in (g, claude, codex)] == [True, False, False]
    assert gemini_cli.detect(tmp_path, s.document())
    assert not gemini_cli.detect(tmp_path, {"sessionId": SID, "messages": []})  # no projectHash
    assert not gemini_cli.sniff(write_jsonl(tmp_path / "m.jsonl", s.messages))  # a message first


def test_shell_framing_of_each_layout(tmp_path):
    """The shell tool's framing is removed: the current lines (exit code only when not 0,
    signal and background processes to state_json, the process group dropped), the older
    `Command`/`Directory` header and `(none)` lines, the earliest `Stdout`/`Stderr`."""
    s = Session()
    s.user("go")
    stdout_form = ("Command: make\nDirectory: (root)\nStdout: built\nStderr: warning: x\nError: (none)\n"
                   "Exit Code: 0\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 12")  # fmt: skip
    s.gemini("", sh("a", "ls", framed("")),
             sh("b", "sleep 9 &", framed("started", bg=[301, 302])),
             sh("c", "yes", framed("y\ny", signal="SIGTERM")),
             sh("d", "cat x", framed_0_1("cat x", "", code="1")),
             sh("e", "kill -9 $$", framed_0_1("kill -9 $$", "", code="(none)", signal="9")),
             sh("f", "make", stdout_form),
             sh("g", "x", framed("boom", error="spawn /bin/bash ENOENT"), status="error", error="spawn /bin/bash ENOENT"))  # fmt: skip
    t, problems = one(s, tmp_path)
    assert problems == []
    assert [(*o, x.observation.state_json) for o, x in zip(obs(t), t.turns, strict=True)] == [
        ("", False, 0, False, None),
        ("started", False, 0, False, '{"background_pids": [301, 302]}'),
        ("y\ny", True, None, False, '{"signal": "SIGTERM"}'),
        ("", True, 1, False, None),
        ("", True, None, False, '{"signal": "9"}'),
        ("built\nwarning: x", False, 0, False, None),
        ("boom", True, None, False, None),  # the spawn error: an error, no exit code
    ]


def test_text_like_the_framing_stays(tmp_path):
    """Only Gemini CLI's framing, whole and in its place, is read: an output whose last line
    reads `Error: ...` (a successful call has no Error line), a header naming another
    command, text in no layout, and a template inside the output are kept as they are."""
    s = Session()
    s.user("go")
    s.gemini("", sh("a", "./check", framed("ok\nError: not really", code=2)),
             sh("b", "ls", framed_0_1("pwd", "/x")),
             sh("c", "ls", "summarized: 3 files"),
             sh("d", "cat notes", framed("Command moved to background (PID: 1). Output hidden. Press Ctrl+B to view.")))  # fmt: skip
    t, _ = one(s, tmp_path)
    assert obs(t) == [
        ("ok\nError: not really", True, 2, False),
        (framed_0_1("pwd", "/x"), False, None, False),
        ("summarized: 3 files", False, None, False),
        (
            "Command moved to background (PID: 1). Output hidden. Press Ctrl+B to view.",
            False,
            0,
            False,
        ),
    ]


def test_a_summarized_output_is_replaced_by_what_the_user_was_shown(tmp_path):
    """Found: with `summarizeToolOutput` set for the shell, Gemini CLI sends the model its
    summarizer's text in place of a long output (tools/shell.ts, utils/summarizer.ts);
    that summary, the model's words, was imported as what the environment answered. The
    record keeps the output itself in `resultDisplay` (a string, or the terminal's lines
    in newer versions; the framed text in debug mode): that is the observation."""
    output = "\n".join(f"line {i}: test_{i} PASSED" for i in range(120))
    summary = "The test suite ran 120 tests and all passed. <warning>none</warning>"
    ansi = [
        [{"text": f"line {i}: ", "bold": False}, {"text": f"test_{i} PASSED"}] for i in range(3)
    ]
    calls = [sh("a", "pytest", summary), sh("b", "pytest -q", summary), sh("c", "make", summary),
             sh("d", "ls", summary)]  # fmt: skip
    calls[0]["resultDisplay"] = output
    calls[1]["resultDisplay"] = ansi
    calls[2]["resultDisplay"] = framed("built", code=2)  # debug mode: the text itself
    s = Session()
    s.user("go")
    s.gemini("", *calls)
    t, problems = one(s, tmp_path)
    assert problems == []
    shown = "\n".join(f"line {i}: test_{i} PASSED" for i in range(3))
    assert obs(t) == [
        (output, False, None, False), (shown, False, None, False), ("built", True, 2, False),
        (summary, False, None, False),  # no display kept: the text as it is
    ]  # fmt: skip
    assert [x.observation.state_json for x in t.turns] == [
        '{"output_from": "resultDisplay"}', '{"output_from": "resultDisplay"}', None, None
    ]  # fmt: skip


def test_cancels_timeouts_and_the_background(tmp_path):
    """The shell tool's templates: the user's cancel keeps the output so far +
    `[interrupted]`; the inactivity timeout is a timeout; a command moved to the background
    showed nothing; a cancel before it started, and a call cancelled with no output
    (`[Operation Cancelled] ...`), are no turns."""
    s = Session()
    s.user("go")
    s.gemini("", sh("a", "npm test", "Command was cancelled by user before it could complete. Below is the output before it was cancelled:\nPASS a.test.js\n", status="cancelled", error="[Operation Cancelled] User cancelled tool execution."),
             sh("b", "npm test", "Command was cancelled by user before it could complete. There was no output before it was cancelled.", status="cancelled", error="[Operation Cancelled] User cancelled tool execution."),
             sh("c", "tail -f log", "Command was automatically cancelled because it exceeded the timeout of 5.0 minutes without output. Below is the output before it was cancelled:\nline 1"),
             sh("d", "npm start", "Command moved to background (PID: 5150). Output hidden. Press Ctrl+B to view."),
             sh("e", "rm -rf build", "Command was cancelled by user before it could start."),
             sh("f", "rm -rf /", None, status="cancelled", error="[Operation Cancelled] Reason: User did not allow tool call"),
             call("g", "write_file", {"file_path": "a", "content": "x"}, None, status="cancelled", error="[Operation Cancelled] Reason: User cancelled operation"))  # fmt: skip
    t, problems = one(s, tmp_path)
    assert [(*o, x.observation.state_json) for o, x in zip(obs(t), t.turns, strict=True)] == [
        ("PASS a.test.js\n[interrupted]", True, None, False, '{"interrupted": true}'),
        ("[interrupted]", True, None, False, '{"interrupted": true}'),
        ("line 1\n[timed out]", True, None, False, '{"timed_out": true}'),
        ("", False, None, False, '{"background_pid": 5150}'),
    ]
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("not_run", "line 3", "toolCalls[4] run_shell_command call 'e': the user cancelled it before it started; no turn"),
        ("not_run", "line 3", 'toolCalls[5] run_shell_command call \'f\': cancelled ("User did not allow tool call"); no turn'),
        ("not_run", "line 3", 'toolCalls[6] write_file call \'g\': cancelled ("User cancelled operation"); no turn'),
    ]  # fmt: skip


def test_calls_gemini_cli_refused_are_no_turns(tmp_path):
    """An unknown tool, arguments its schema refused, a policy denial, the shell tool's own
    checks: nothing ran, no turn (`not_run`); a shell call answered with an error alone
    lost its output (`harness_failure`). Another tool's error is its answer: an error turn
    (error-only, as before tool-executor.ts, or with the tool's output)."""
    s = Session()
    s.user("go")
    s.gemini("", call("a", "run_shell", {"command": "ls"}, None, status="error", error='Tool "run_shell" not found in registry. Tools must use the exact names that are registered. Did you mean one of: "run_shell_command", "read_file"?'),
             call("b", "grep", {}, None, status="error", error='Tool "grep" not found. Did you mean "grep_search"?'),
             call("c", "read_file", {}, None, status="error", error="params must have required property 'file_path'"),
             sh("d", "curl x", None, status="error", error="Tool execution denied by policy."),
             sh("e", "", None, status="error", error="Command cannot be empty."),
             sh("f", "ls", None, status="error", error="spawn EAGAIN"),
             call("g", "read_file", {"file_path": "/x"}, None, status="error", error="File not found: /x"),
             call("h", "replace", {"file_path": "/y"}, "Failed to edit, 0 occurrences found for old_string in /y.", status="error", error="Failed to edit, 0 occurrences found"))  # fmt: skip
    t, problems = one(s, tmp_path)
    assert [(x.action.name, *o) for o, x in zip(obs(t), t.turns, strict=True)] == [
        ("read_file", "File not found: /x", True, None, False),
        ("replace", "Failed to edit, 0 occurrences found for old_string in /y.", True, None, False),
    ]
    assert [(p.kind, p.message.split(":")[0]) for p in problems] == [
        ("not_run", "toolCalls[0] run_shell call 'a'"),
        ("not_run", "toolCalls[1] grep call 'b'"),
        ("not_run", "toolCalls[2] read_file call 'c'"),
        ("not_run", "toolCalls[3] run_shell_command call 'd'"),
        ("not_run", "toolCalls[4] run_shell_command call 'e'"),
        ("harness_failure", "toolCalls[5] run_shell_command call 'f'"),
    ]
    assert problems[3].message.endswith(
        'policy denied it ("Tool execution denied by policy."); no turn'
    )


def test_output_cuts_are_truncation(tmp_path):
    """Gemini CLI's cuts keep the head and the tail, `observation.truncated`: the current
    notice (checked against the counts it names: other counts stay text), the older
    line-based one, read_file's headers; a hook's notice is removed."""
    out = "".join(f"line {i}\n" for i in range(400))
    text = framed(out.rstrip("\n"), code=1)
    h, t_ = 200, 800
    current = (f"Output too large. Showing first {h} and last {t_} characters. For full output see: /tmp/o.txt\n"
               f"{text[:h]}\n\n... [{len(text) - h - t_:,} characters omitted] ...\n\n{text[-t_:]}")  # fmt: skip
    wrong = current.replace("first 200", "first 201")
    lines = text.split("\n")
    old = ("Tool output was too large and has been truncated.\nThe full output has been saved to: /tmp/c.output\n"
           "To read the complete output, use the read_file tool with the absolute file path above.\n"
           "The truncated output below shows the beginning and end of the content. The marker '... [CONTENT TRUNCATED] ...' indicates where content was removed.\n"
           "Truncated part of the output:\n" + "\n".join(lines[:20]) + "\n... [CONTENT TRUNCATED] ...\n" + "\n".join(lines[-80:]))  # fmt: skip
    header = ("\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 1-2000 of 5000 total lines.\n"
              "Action: To read more of the file, you can use the 'start_line' and 'end_line' parameters in a subsequent 'read_file' call.\n\n"
              "--- FILE CONTENT (truncated) ---\nimport os\n")  # fmt: skip
    note = "[File content truncated: showing lines 1-2 of 9 total lines. Use offset/limit parameters to view more.]\na\nb\n"
    s = Session()
    s.user("go")
    s.gemini("", sh("a", "gen", current), sh("b", "gen", wrong), sh("c", "gen", old),
             call("d", "read_file", {"file_path": "/big.py"}, header),
             call("e", "read_file", {"file_path": "/n.txt"}, note),
             sh("f", "ls", framed("a") + "\n\n[System] Tool input parameters were modified by a hook before execution."))  # fmt: skip
    t, _ = one(s, tmp_path)
    head = text[len("Output: ") : h]
    tail = text[-t_:].removesuffix("\nExit Code: 1\nProcess Group PGID: 4242")
    assert (
        obs(t)
        == [
            (f"{head}\n{tail}", True, 1, True),
            (wrong, False, None, False),  # not where the cut puts it: text
            (
                "\n".join(lines[:20])[len("Output: ") :] + "\n" + "\n".join(lines[-80:-2]),
                True,
                1,
                True,
            ),
            ("import os\n", False, None, True),
            ("a\nb\n", False, None, True),
            ("a", False, 0, False),
        ]
    )


def test_rewinds_rerecorded_messages_and_metadata_records(tmp_path):
    """The JSONL records as Gemini CLI applies them: a message recorded again replaces its
    earlier self in place (tokens, then its tool calls); `$rewindTo` drops that message and
    the later ones (reported, never mixed in); `message_update` merges; `$set` updates the
    metadata; a `$set.messages` snapshot does not rewrite what was recorded, and a message
    only it has (a compression summary) is reported."""
    s = Session()
    u = s.user("List the files")
    g1 = s.gemini("I'll list them.")
    g1_calls = {**g1, "toolCalls": [sh("a", "ls", framed("a.txt"))]}
    wrong = s.user("No, delete them")  # rewound below
    g2 = s.gemini("", sh("b", "rm -f *", framed("")))
    g3 = s.gemini("Here they are: a.txt.")
    reply = s.user("thanks")
    lines = [
        s.metadata(),
        u,
        g1,  # line 3: recorded first without calls...
        wrong,  # 4
        g2,  # 5
        {"$rewindTo": wrong["id"]},  # 6: drops lines 4-5
        {**g1_calls, "tokens": {"input": 1, "output": 1, "cached": 0, "total": 2}},  # 7: ... then again, in its place
        g3,  # 8
        {"type": "message_update", "id": g3["id"], "model": "gemini-2.5-flash"},  # 9
        {"$set": {"summary": "List files", "directories": ["/home/dev/x"]}},  # 10
        {"$set": {"messages": [u, {"id": "sum1", "type": "user", "content": "<state_snapshot>...", "timestamp": "2025-10-06T09:09:00.000Z"}, g1_calls]}},  # 11
        reply,  # 12
    ]  # fmt: skip
    f = write_jsonl(tmp_path / "s.jsonl", lines)
    [t], problems = read(f)
    assert [(x.action.kind, x.action.text) for x in t.turns] == [
        ("command", "ls"),
        ("text", "Here they are: a.txt."),
    ]
    assert obs(t) == [("a.txt", False, 0, False), ("thanks", False, None, False)]
    assert t.turns[0].reasoning == "I'll list them."
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("message_not_imported", "line 6", "2 messages the user rewound (lines 4-5); not imported"),
        ("message_not_imported", "line 11", "$set.messages[1]: 1 message Gemini CLI wrote into its history (a compression summary); not imported"),
    ]  # fmt: skip
    assert t.metadata == {
        "project_hash": HASH,
        "title": "List files",
        "directories": '["/home/dev/x"]',
        "models": '["gemini-2.5-pro", "gemini-2.5-flash"]',
    }
    # a rewind to a message the file does not hold drops all (as Gemini CLI's loader)
    f = write_jsonl(tmp_path / "t.jsonl", [s.metadata(), u, g1_calls, {"$rewindTo": "gone"}, g3])
    [t], problems = read(f)
    assert (len(t.turns), warned(problems)) == (0, [("message_not_imported", "line 4")])
    assert (t.task.instruction, t.metadata["final_message"]) == (None, "Here they are: a.txt.")


def test_gemini_clis_own_messages_are_no_turns(tmp_path):
    """`info` and `warning` messages (its notices) are passed over; an `error` message (a
    failed request) and `Please continue.` (its next-speaker prompt) are reported; the
    user's own reply to the agent is a text turn."""
    s = Session()
    s.user("What is in this repo?")
    s.notice("info", "Switched to fallback model gemini-2.5-flash")
    s.gemini("It is a calculator.")
    s.user("Please continue.")
    s.gemini("It has tests too.")
    s.notice("error", "[API Error: 429 Resource exhausted]")
    s.notice("warning", "Loop detected")
    s.user("Which tests?")
    s.gemini("", sh("a", "ls tests", framed("test_calc.py")))
    s.gemini("test_calc.py.")
    t, problems = one(s, tmp_path)
    assert [(x.action.kind, x.action.text, x.observation.text) for x in t.turns] == [
        ("text", "It has tests too.", "Which tests?"),
        ("command", "ls tests", "test_calc.py"),
    ]
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("message_not_imported", "line 5", "Gemini CLI's own prompt to go on (its next-speaker check); not imported"),
        ("message_not_imported", "line 7", 'Gemini CLI\'s error message ("[API Error: 429 Resource exhausted]"); not imported'),
        ("message_not_imported", "line 4", "an agent message no user answered; not imported"),
    ]  # fmt: skip
    assert t.metadata["final_message"] == "test_calc.py."


def test_a_malformed_record_costs_only_itself(tmp_path):
    """A line that is not JSON, a message of a shape Gemini CLI does not write (named by
    its field), a message of an unknown type: reported, and only that one is left out; a
    call with no result (the session ended while it ran) is no turn; images are reported."""
    s = Session()
    s.user("go")
    ok = s.gemini("", sh("a", "ls", framed("a.txt")))
    bad_calls = {**s.gemini("x"), "toolCalls": {"id": "b"}}
    bad_args = {
        **s.gemini("y"),
        "toolCalls": [{"id": "c", "name": SH, "args": "ls", "status": "success"}],
    }
    running = s.gemini("", {"id": "d", "name": SH, "args": {"command": "sleep 99"}, "status": "executing", "timestamp": "2025-10-06T09:00:30.000Z"})  # fmt: skip
    image = s.gemini("", call("e", "read_file", {"file_path": "/p.png"}, "Binary content of type image/png was processed.",
                              parts=[{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]))  # fmt: skip
    lines = [s.metadata(), s.messages[0], ok, '{"id": "m9", "type": "gemini", "content": "cut\n', bad_calls, bad_args,
             {"id": "z", "type": "compression", "timestamp": "2025-10-06T09:00:00.000Z"}, running, image]  # fmt: skip
    f = write_jsonl(tmp_path / "s.jsonl", lines)
    [t], problems = read(f)
    assert obs(t) == [("a.txt", False, 0, False)]  # the image read said no text: no turn
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("invalid_json", "line 4", "unterminated string at column 47 (the line may be truncated)"),
        ("invalid", "line 5", 'toolCalls: expected a list, got {"id": "b"}'),
        ("invalid", "line 6", 'toolCalls[0].args: expected an object, got "ls"'),
        ("message_not_imported", "line 7", "1 record of no kind Gemini CLI writes (line 7); not imported"),
        ("unpaired_call", "line 8", "toolCalls[0] run_shell_command call 'd': no result (status \"executing\"); no turn (what the environment answered is unknown)"),
        ("unpaired_call", "line 9", "toolCalls[0] read_file call 'e': toolCalls[0].result: 1 inlineData part and no text: what it answered in text is unknown (non-text parts are not kept); no turn"),
    ]  # fmt: skip
    # the JSON layout names the message by its place
    doc = {**s.document(), "messages": [s.messages[0], ok, {**ok, "timestamp": "yesterday"}]}
    [t], problems = read(write_doc(tmp_path / "s.json", doc))
    assert len(t.turns) == 1
    assert [(p.kind, p.where, p.message) for p in problems] == [
        ("invalid", "messages[2]", 'timestamp: expected an ISO 8601 timestamp, got "yesterday"')
    ]


def test_parallel_results_synced_into_one_record_pair_by_id(tmp_path):
    """Gemini CLI may sync a batch's whole response turn into each call's `result`: each
    call takes the functionResponse with its own id."""
    both = [{"functionResponse": {"id": i, "name": SH, "response": {"output": framed(o)}}} for i, o in (("a", "A"), ("b", "B"))]  # fmt: skip
    s = Session()
    s.user("go")
    s.gemini(
        "", {**sh("a", "echo A", None), "result": both}, {**sh("b", "echo B", None), "result": both}
    )
    t, problems = one(s, tmp_path)
    assert (obs(t), problems) == ([("A", False, 0, False), ("B", False, 0, False)], [])


def test_tool_answer_reads_a_result_as_harbors_atif_keeps_it():
    """For atif.py: harbor keeps `functionResponse.response.output` alone; the same reading
    (the action by `call_action`; the observation, or a no-turn reason)."""
    cmd = {"command": "pytest -q", "description": "tests"}
    action = gemini_cli.call_action(SH, cmd, "arguments")
    o = gemini_cli.tool_answer(SH, cmd, framed("1 failed", code=1))
    assert (action, (o.text, o.is_error, o.exit_code)) == (
        Action("command", "pytest -q", name=SH),
        ("1 failed", True, 1),
    )
    o = gemini_cli.tool_answer(SH, cmd, "Command was automatically cancelled because it exceeded the timeout of 5.0 minutes without output. There was no output before it was cancelled.")  # fmt: skip
    assert (o.text, o.state_json) == ("[timed out]", '{"timed_out": true}')
    why = gemini_cli.tool_answer(SH, cmd, None)
    assert why[0] == "harness_failure"
    why = gemini_cli.tool_answer(SH, cmd, "Command was cancelled by user before it could start.")
    assert why == ("not_run", "the user cancelled it before it started")
    action = gemini_cli.call_action("read_file", {"file_path": "/a"}, "arguments")
    o = gemini_cli.tool_answer("read_file", {"file_path": "/a"}, "[File content truncated: showing lines 1-1 of 3 total lines. Use offset/limit parameters to view more.]\nx\n")  # fmt: skip
    assert (action.text, o.text, o.truncated) == ('read_file({"file_path": "/a"})', "x\n", True)
    o = gemini_cli.tool_answer("glob", {"pattern": "*.md"}, "")
    assert (o.text, o.is_error) == ("", False)
