"""Claude Code session transcripts (`~/.claude/projects/<project>/<sessionId>.jsonl`), the
8th importer (collectors/importers/claude_code.py): one JSONL file of events is one
session, read whole; its `parentUuid` chain is the conversation; Claude Code's own text
(system reminders, refusals, interrupt/timeout/truncation notices) is not the
environment's answer. Our own fixtures, built here in the shapes Claude Code writes (one
event per content block of a response, a `user` event per tool result with
`toolUseResult` beside it)."""

from __future__ import annotations

import json
import subprocess

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records, validate_dict

from .test_import_fidelity import items

SID = "4f1c2a7e-0b9d-4e55-9a61-2c3d4e5f6a7b"
CWD = "/home/dev/calc"
MODEL = "claude-sonnet-4-20250514"
READ_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be"
    " considered malware. You CAN and SHOULD provide analysis of malware, what it is doing. But"
    " you MUST refuse to improve or augment the code. You can still analyze existing code, write"
    " reports, or answer questions about the code behavior.\n</system-reminder>\n"
)
REJECT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it"
    " was a file edit, the new_string was NOT written to the file). STOP what you are doing and"
    " wait for the user to tell you how to proceed."
)


class Session:
    """Events as Claude Code appends them to a session file: each one's `parentUuid` is the
    event written before it unless `parent` says otherwise."""

    def __init__(self, sid=SID, version="1.0.98", sidechain=False, agent=None):
        self.lines, self.last, self.sid, self.version = [], None, sid, version
        self.sidechain, self.agent = sidechain, agent

    def _event(self, kind, parent="last", **fields):
        n = len(self.lines) + 1
        uuid = f"{self.sid[:8]}-0000-4000-8000-{n:012x}"
        ev = {
            "parentUuid": self.last if parent == "last" else parent,
            "isSidechain": self.sidechain,
            "userType": "external",
            "cwd": CWD,
            "sessionId": self.sid,
            "version": self.version,
            "gitBranch": "main",
            "type": kind,
            **fields,
            "uuid": uuid,
            "timestamp": f"2025-09-30T10:{n // 60:02d}:{n % 60:02d}.000Z",
        }
        if self.agent:
            ev["agentId"] = self.agent
        self.lines.append(ev)
        self.last = uuid
        return uuid

    def user(self, content, parent="last", **fields):
        return self._event("user", parent, message={"role": "user", "content": content}, **fields)

    def say(self, mid, *blocks, parent="last", model=MODEL):
        """A response: one `assistant` event per content block, one message.id."""
        for b in blocks:
            message = {"id": mid, "type": "message", "role": "assistant", "model": model,
                       "content": [b], "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 4, "output_tokens": 12}}  # fmt: skip
            self._event("assistant", parent, message=message, requestId=f"req_{mid}")
            parent = "last"
        return self.last

    def result(self, tid, content, error=False, tur=None, parent="last"):
        block = {"tool_use_id": tid, "type": "tool_result", "content": content}
        if error:
            block["is_error"] = True
        extra = {} if tur is None else {"toolUseResult": tur}
        return self.user([block], parent, **extra)

    def raw(self, line):
        self.lines.append(line)

    def write(self, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(x if isinstance(x, str) else json.dumps(x) + "\n" for x in self.lines)
        )
        return path


def text(s):
    return {"type": "text", "text": s}


def think(s):
    return {"type": "thinking", "thinking": s, "signature": "EqQBCkYIBxgCKkB"}


def use(tid, name, **args):
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def shell(stdout, stderr="", **extra):
    """Bash's `toolUseResult`: what the shell printed, as Claude Code keeps it."""
    return {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False, **extra}


def imported(tmp_path, session, name=f"{SID}.jsonl"):
    f = session.write(tmp_path / "projects" / "-home-dev-calc" / name)
    trajs, problems = items(f)
    for t in trajs:
        assert validate_dict(t.to_dict()) == [], t
    return trajs, problems


def obs(t):
    return [
        (
            x.observation.text,
            x.observation.is_error,
            x.observation.exit_code,
            x.observation.truncated,
        )
        for x in t.turns
    ]


def warned(problems):
    return sorted((p.kind, p.where) for p in problems)


def fix_session():
    """Run the tests (they fail), read the file, edit it, run them again, tell the user."""
    s = Session()
    s.raw({"type": "summary", "summary": "Fix add() in calc.py", "leafUuid": f"{SID[:8]}-0000-4000-8000-00000000000e"})  # fmt: skip
    s.user("Fix the failing test in calc.py")
    s.say("msg_01", think("Run the tests first."), text("Let me run the tests."),
          use("toolu_01", "Bash", command="pytest -q", description="Run the test suite"))  # fmt: skip
    out = "F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s"
    s.result("toolu_01", f"Exit code 1\n{out}", error=True, tur=f"Error: Exit code 1\n{out}")
    s.say("msg_02", use("toolu_02", "Read", file_path=f"{CWD}/calc.py"))
    listing = "     1→def add(a, b):\n     2→    return a - b"
    s.result("toolu_02", listing + READ_REMINDER, tur={"type": "text", "file": {
        "filePath": f"{CWD}/calc.py", "content": "def add(a, b):\n    return a - b\n",
        "numLines": 2, "startLine": 1, "totalLines": 2}})  # fmt: skip
    s.say("msg_03", text("`add` subtracts."),
          use("toolu_03", "Edit", file_path=f"{CWD}/calc.py", old_string="a - b", new_string="a + b"))  # fmt: skip
    s.result(
        "toolu_03", f"The file {CWD}/calc.py has been updated.", tur={"filePath": f"{CWD}/calc.py"}
    )
    s.say("msg_04", use("toolu_04", "Bash", command="pytest -q"))
    s.result("toolu_04", "1 passed in 0.01s", tur=shell("1 passed in 0.01s\n"))
    s.say("msg_05", text("Fixed: `add` now adds."))  # line 14: the summary's leaf
    s.user("Thanks! Is it tested?")
    s.say("msg_06", text("Yes, test_add covers it."))
    return s


def test_a_session_file_is_one_trajectory_through_the_cli(tmp_path, wt_env):
    """Found: every line of a Claude Code session was `unrecognized`. The `.jsonl` file is
    one session now: its Bash calls are commands, its other tools tool calls, the tool
    results their observations, what the agent told the user and the reply a text turn."""
    f = fix_session().write(tmp_path / "projects" / "-home-dev-calc" / f"{SID}.jsonl")
    r = subprocess.run(
        ["worldtrace", "import", str(tmp_path / "projects")], capture_output=True, text=True, env=wt_env
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unrecognized" not in r.stdout + r.stderr and "claude-code" in r.stdout
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert validate_dict(t.to_dict()) == []
    assert (t.source.origin_format, t.source.origin_id, t.source.origin_index) == (
        "claude-code",
        SID,
        0,
    )
    assert t.source.origin_path == str(f.resolve())
    assert [(x.action.kind, x.action.name, x.action.text) for x in t.turns] == [
        ("command", "Bash", "pytest -q"),
        ("tool_call", "Read", 'Read({"file_path": "/home/dev/calc/calc.py"})'),
        ("tool_call", "Edit", 'Edit({"file_path": "/home/dev/calc/calc.py", "new_string": "a + b", "old_string": "a - b"})'),
        ("command", "Bash", "pytest -q"),
        ("text", None, "Fixed: `add` now adds."),
    ]  # fmt: skip
    assert obs(t) == [
        ("F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s", True, 1, False),
        ("     1→def add(a, b):\n     2→    return a - b", False, None, False),  # no reminder
        ("The file /home/dev/calc/calc.py has been updated.", False, None, False),
        ("1 passed in 0.01s\n", False, 0, False),  # toolUseResult: as the shell printed it
        ("Thanks! Is it tested?", False, None, False),
    ]
    assert [x.reasoning for x in t.turns] == [
        "Run the tests first.\n\nLet me run the tests.",
        None,
        "`add` subtracts.",
        None,
        None,
    ]
    assert [x.started_at.isoformat() for x in t.turns] == [
        "2025-09-30T10:00:05+00:00", "2025-09-30T10:00:07+00:00", "2025-09-30T10:00:10+00:00",
        "2025-09-30T10:00:12+00:00", "2025-09-30T10:00:14+00:00",
    ]  # fmt: skip
    assert t.started_at.isoformat() == "2025-09-30T10:00:02+00:00"
    assert (t.task.instruction, t.domain) == ("Fix the failing test in calc.py", "swe")
    assert (t.agent.name, t.agent.model) == ("claude-code", MODEL)
    assert t.system.action_space is None  # Claude Code does not record its tools
    assert t.metadata == {
        "cwd": CWD,
        "git_branch": "main",
        "claude_code_version": "1.0.98",
        "title": "Fix add() in calc.py",
        "final_message": "Yes, test_add covers it.",
    }
    # the same file again: already present
    r = subprocess.run(["worldtrace", "import", str(f)], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0 and "already present" in r.stdout, r.stdout + r.stderr


def test_format_claude_code_reads_any_file_as_a_session(tmp_path, wt_env):
    f = fix_session().write(tmp_path / "session.log")
    r = subprocess.run(
        ["worldtrace", "import", "--format", "claude-code", str(f)],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert (t.source.origin_format, len(t.turns)) == ("claude-code", 5)
    help_ = subprocess.run(
        ["worldtrace", "import", "--help"], capture_output=True, text=True, env=wt_env
    )
    assert "claude-code" in help_.stdout


def test_detection_is_per_file_and_other_jsonl_stays_line_by_line(tmp_path):
    """The session's first lines (here a summary and a file-history snapshot before the
    first message) tell it apart; a JSONL file of OpenAI records beside it is still read
    line by line."""
    s = fix_session()
    s.lines.insert(1, {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False})  # fmt: skip
    s.write(tmp_path / "a" / f"{SID}.jsonl")
    chat = {"id": "c1", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "a.txt"}]}  # fmt: skip
    (tmp_path / "a" / "chat.jsonl").write_text(
        json.dumps(chat) + "\n" + json.dumps({**chat, "id": "c2"}) + "\n"
    )
    r = import_paths([tmp_path / "a"], tmp_path / "out")
    assert (r.imported["claude-code"], r.imported["openai"]) == (1, 2), r.problems
    assert not r.errors and not r.warnings


def test_system_reminders_are_removed_whole_and_only_in_their_place(tmp_path):
    """Claude Code wraps its own context in <system-reminder> blocks: appended to a tool
    result, before or after the user's words, or a text block of their own. They are
    removed; a reminder the environment printed (inside the output, or as raw shell
    output) stays."""
    ide = "<system-reminder>\nThe user opened the file calc.py in the IDE. This may or may not be related to the current task.\n</system-reminder>"  # fmt: skip
    todo = "<system-reminder>\nThis is a reminder that your todo list is currently empty. DO NOT mention this to the user explicitly.\n</system-reminder>"  # fmt: skip
    inside = f"     1→# notes\n     2→{ide}\n     3→end"
    hook = "<user-prompt-submit-hook>\nBranch main is 2 commits ahead.\n</user-prompt-submit-hook>"
    s = Session()
    s.user([text(ide), text(f"Look at the notes\n\n{hook}"), text(todo)])
    s.say("msg_01", use("toolu_01", "Read", file_path=f"{CWD}/notes.md"))
    s.result("toolu_01", inside + READ_REMINDER)  # the file holds a reminder: kept
    s.say("msg_02", use("toolu_02", "Read", file_path=f"{CWD}/empty.md"))
    s.result("toolu_02", "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>")  # fmt: skip
    s.say("msg_03", use("toolu_03", "Bash", command="cat reminder.txt"))
    printed = f"header\n\n{todo}\n"  # the shell printed it: toolUseResult is raw output
    s.result("toolu_03", printed.strip(), tur=shell(printed))
    s.say("msg_04", use("toolu_04", "Grep", pattern="system-reminder"))
    s.result("toolu_04", f"notes.md: see {ide} above")  # not at the end of a line of its own
    s.say("msg_05", use("toolu_05", "Read", file_path=f"{CWD}/plot.png"))
    png = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}  # fmt: skip
    s.result("toolu_05", [png])
    s.say("msg_06", text("The notes mention the IDE."))
    s.user(f"{ide}\nOk, and now?\n\n{todo}")
    s.say("msg_07", text("Nothing else."))
    [t], problems = imported(tmp_path, s)
    assert t.task.instruction == "Look at the notes"
    assert [x.observation.text for x in t.turns] == [
        inside,
        "",  # an empty file
        printed,
        f"notes.md: see {ide} above",
        "Ok, and now?",  # the image Read answered is no turn: it said no text (1206w2)
    ]
    [p] = problems
    assert (p.kind, p.message) == (
        "unpaired_call",
        "Read call 'toolu_05' (line 10): message.content[0].content: 1 image part and no text: "
        "what it answered in text is unknown (non-text parts are not kept); no turn",
    )


def test_a_call_claude_code_refused_is_no_turn(tmp_path):
    """<tool_use_error> is Claude Code refusing the call before the tool ran (here Write
    before Read, an invalid input, an unknown tool): no turn, `not_run`. The same text a
    tool printed, or not the whole result, stays."""
    s = Session()
    s.user("Create hello.py")
    s.say("msg_01", use("toolu_01", "Write", file_path=f"{CWD}/hello.py", content="print('hi')\n"))
    s.result("toolu_01", "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", error=True,
             tur="Error: File has not been read yet. Read it first before writing to it.")  # fmt: skip
    s.say("msg_02", use("toolu_02", "Bash", cmd="ls"))
    s.result("toolu_02", "<tool_use_error>InputValidationError: Bash failed due to the following issue:\nThe required parameter `command` is missing</tool_use_error>", error=True)  # fmt: skip
    s.say("msg_03", use("toolu_03", "Bash", command="cat log.txt"))
    s.result("toolu_03", "<tool_use_error>old</tool_use_error>", tur=shell("<tool_use_error>old</tool_use_error>\n"))  # fmt: skip
    s.say("msg_04", use("toolu_04", "mcp__db__query", sql="select 1"))
    s.result("toolu_04", "driver said: <tool_use_error>busy</tool_use_error>", error=True)
    s.say("msg_05", use("toolu_05", "Bash", command="git push --force"))
    s.result("toolu_05", "PreToolUse:Bash hook error: [~/.claude/hooks/guard.sh]: force pushes are not allowed", error=True)  # fmt: skip
    s.say("msg_06", use("toolu_06", "Bash", command="rm -rf build"))
    s.result("toolu_06", "Permission to use Bash with command rm -rf build has been denied.", error=True)  # fmt: skip
    s.say("msg_07", use("toolu_07", "Bash", command="make deploy"))
    s.result("toolu_07", "[Tool result missing due to internal error]", error=True)
    [t], problems = imported(tmp_path, s)
    assert [x.action.text for x in t.turns] == [
        "cat log.txt",
        'mcp__db__query({"sql": "select 1"})',
    ]
    assert obs(t) == [
        ("<tool_use_error>old</tool_use_error>\n", False, 0, False),
        ("driver said: <tool_use_error>busy</tool_use_error>", True, None, False),
    ]
    assert warned(problems) == [
        ("harness_failure", "line 15"),  # Claude Code lost the result: the tool may have run
        *(("not_run", f"line {n}") for n in (11, 13, 3, 5)),
    ]
    assert [p.message.split("): ", 1)[1] for p in problems[2:]] == [
        "a PreToolUse hook blocked it; no turn",
        "permission was denied; no turn",
        "Claude Code lost its result: what it answered is unknown; no turn",
    ]
    assert (
        "Write call 'toolu_01' (line 2): Claude Code refused it before running it"
        in problems[0].message
    )
    assert "File has not been read yet" in problems[0].message and not problems[0].fatal


def test_rejections_interrupts_and_timeouts(tmp_path):
    """The user's rejection (or an interrupt before the tool answered) is no turn
    (`not_run`); Claude Code's `[Request interrupted by user for tool use]` is neither a
    turn nor the user's reply; a command interrupted while it ran keeps its output so far
    + `[interrupted]`; one killed at Claude Code's timeout is a timeout."""
    s = Session()
    s.user("Set up the dev server")
    s.say(
        "msg_01",
        use("toolu_01", "Edit", file_path=f"{CWD}/app.py", old_string="8000", new_string="80"),
    )
    s.result("toolu_01", REJECT, error=True, tur="User rejected tool use")
    s.user([text("[Request interrupted by user for tool use]")])
    s.user("Keep port 8000. Install the deps instead.")  # answers no agent message
    s.say("msg_02", use("toolu_02", "Bash", command="pip install -r requirements.txt"))
    s.result("toolu_02", "Collecting flask\n<error>Command was aborted before completion</error>", error=True,
             tur={"stdout": "Collecting flask\n", "stderr": "", "interrupted": True, "isImage": False})  # fmt: skip
    s.user([text("[Request interrupted by user for tool use]")])
    s.user("Go on")
    s.say("msg_03", use("toolu_03", "Bash", command="python app.py"))
    s.result("toolu_03", "Exit code 143\nCommand timed out after 2m 0s\n * Running on http://127.0.0.1:8000", error=True)  # fmt: skip
    s.say("msg_04", use("toolu_04", "Bash", command="npm run dev"))
    s.result("toolu_04", "Command timed out after 2m 0.0s", error=True)  # 1.0.x: no exit code line
    s.say("msg_05", use("toolu_05", "Bash", command="sleep 100"))
    s.result(
        "toolu_05", "Exit code 1\n[Request interrupted by user for tool use]\npartial", error=True
    )
    [t], problems = imported(tmp_path, s)
    assert [x.action.text for x in t.turns] == [
        "pip install -r requirements.txt", "python app.py", "npm run dev", "sleep 100"
    ]  # fmt: skip
    assert obs(t) == [
        ("Collecting flask\n[interrupted]", True, None, False),
        (" * Running on http://127.0.0.1:8000\n[timed out]", True, None, False),
        ("[timed out]", True, None, False),
        ("partial\n[interrupted]", True, None, False),
    ]
    assert [json.loads(x.observation.state_json) for x in t.turns] == [
        {"interrupted": True}, {"timed_out": True}, {"timed_out": True}, {"interrupted": True}
    ]  # fmt: skip
    assert warned(problems) == [
        ("message_not_imported", "line 5"),  # the user's words after the rejection
        ("message_not_imported", "line 9"),
        ("not_run", "line 3"),
    ]
    [rejected] = [p for p in problems if p.kind == "not_run"]
    assert rejected.message == (
        "Edit call 'toolu_01' (line 2): the user rejected it, or interrupted it before it"
        " answered; no turn"
    )
    # the interrupt markers are Claude Code's, not the user's: neither reply nor warning
    assert not any("interrupted by user" in p.message for p in problems)


def test_text_like_claude_codes_notices_stays(tmp_path):
    """Only Claude Code's exact templates, whole and in their place, are its own: a
    command printing words of them, a result that is not an error, a notice not where
    Claude Code puts it, keep them."""
    s = Session()
    s.user("Check the logs")
    cases = [
        ("toolu_01", "Exit code 1\nerror: Command timed out after 5s while connecting", True),
        ("toolu_02", REJECT, False),  # a file holding the notice, printed without an error
        ("toolu_03", "Exit code 2\nlog: [Request interrupted by user for tool use] seen", True),
        ("toolu_04", "done\n\n... [3 lines truncated] ...", False),  # short: not Bash's cut
        ("toolu_05", "Exit code 1\nShell cwd was reset to /elsewhere", True),
    ]
    for k, (tid, out, error) in enumerate(cases):
        s.say(f"msg_{k}", use(tid, "Bash", command=f"cat log{k}.txt"))
        s.result(tid, out, error=error)
    [t], problems = imported(tmp_path, s)
    assert problems == []
    assert obs(t) == [
        ("error: Command timed out after 5s while connecting", True, 1, False),
        (REJECT, False, 0, False),
        ("log: [Request interrupted by user for tool use] seen", True, 2, False),
        ("done\n\n... [3 lines truncated] ...", False, 0, False),
        ("Shell cwd was reset to /elsewhere", True, 1, False),
    ]


def test_claude_codes_output_cuts_are_truncation(tmp_path):
    """Bash keeps the first 30,000 characters and notes the lines it cut; a failed
    command's message keeps 5,000 characters on each side. The observation is what was
    kept, `truncated`. Claude Code's empty-output stand-in and its note that it moved the
    shell back to the project are not output."""
    head = "x" * 29_999 + "\n"
    s = Session()
    s.user("Dump the table")
    s.say("msg_01", use("toolu_01", "Bash", command="psql -c 'select * from t'"))
    cut = head + "\n\n... [812 lines truncated] ..."
    s.result("toolu_01", cut, tur=shell(cut))
    s.say("msg_02", use("toolu_02", "Bash", command="make"))
    a, b = "Exit code 2\n" + "a" * 4988, "b" * 5000
    s.result("toolu_02", f"{a}\n\n... [20000 characters truncated] ...\n\n{b}", error=True)
    s.say("msg_03", use("toolu_03", "Bash", command="yes | head -c 100"))
    s.result("toolu_03", "(Bash completed with no output)")
    s.say("msg_04", use("toolu_04", "Bash", command="cd /tmp && ls"))
    s.result("toolu_04", f"a.txt\nShell cwd was reset to {CWD}",
             tur=shell("a.txt\n", f"\nShell cwd was reset to {CWD}"))  # fmt: skip
    [t], problems = imported(tmp_path, s)
    assert problems == []
    assert obs(t) == [
        (head, False, 0, True),
        ("a" * 4988 + "\n" + "b" * 5000, True, 2, True),
        ("", False, 0, False),
        ("a.txt\n", False, 0, False),  # Claude Code moved its shell back: not output
    ]


def test_background_command_and_task_subagent(tmp_path):
    """A background command's notice is state, not output; a Task call's result is the
    subagent's report (Claude Code's `agentId ... <usage>` trailer removed). The
    subagent's own events (isSidechain, in the session file before 2.0.24) are not mixed
    into the conversation: they are a trajectory of their own (they were reported,
    `subagent_not_imported`, before)."""
    s = Session(version="2.0.13")
    s.user("Start the server and find where the port is set")
    s.say("msg_01", use("toolu_01", "Bash", command="python app.py", run_in_background=True))
    s.result("toolu_01", "Command running in background with ID: bash_1",
             tur=shell("", backgroundTaskId="bash_1"))  # fmt: skip
    task = s.say("msg_02", use("toolu_02", "Task", description="Find the port", prompt="Where is the port set?", subagent_type="Explore"))  # fmt: skip
    side = Session(version="2.0.13", sidechain=True)
    side.lines = s.lines  # the subagent's events go to the same file, on their own chain
    side.last = None
    side.user("Where is the port set?")
    side.say("msg_s1", use("toolu_s1", "Grep", pattern="port"))
    side.result("toolu_s1", "app.py:3: PORT = 8000")
    side.say("msg_s2", text("In app.py, line 3."))
    s.result("toolu_02", [text("In app.py, line 3."), text("agentId: a1b2c3d (for resuming to continue this agent's work if needed)\n<usage>total_tokens: 5012\ntool_uses: 1\nduration_ms: 2100</usage>")],
             parent=task)  # fmt: skip
    s.say("msg_03", text("The server runs; the port is set in app.py."))
    (t, sub), problems = imported(tmp_path, s)
    assert problems == []
    assert (t.source.origin_id, t.source.origin_index) == (SID, 0)
    assert [x.action.name for x in t.turns] == ["Bash", "Task"]
    assert obs(t) == [("", False, None, False), ("In app.py, line 3.", False, None, False)]
    assert json.loads(t.turns[0].observation.state_json) == {"background_task": "bash_1"}
    assert t.metadata["final_message"] == "The server runs; the port is set in app.py."
    # the subagent (no agentId in 2.0.13): named by its chain's root, line 5
    root = f"{SID[:8]}-0000-4000-8000-{5:012x}"
    assert (sub.source.origin_id, sub.source.origin_index) == (f"{SID}:{root}", 7)
    assert [(x.action.text, x.observation.text) for x in sub.turns] == [
        ('Grep({"pattern": "port"})', "app.py:3: PORT = 8000")
    ]
    assert sub.task.instruction == "Where is the port set?"  # the Task prompt
    assert sub.metadata == {
        "cwd": CWD,
        "git_branch": "main",
        "claude_code_version": "2.0.13",
        "parent_session": SID,
        "final_message": "In app.py, line 3.",
    }


def test_a_subagents_own_file_is_a_trajectory_of_the_subagent(tmp_path):
    """2.0.24+ writes a subagent's events to `agent-<id>.jsonl` (2.1: under
    `<session>/subagents/`): a trajectory named `<session>:<agentId>` (it imported
    nothing before). A subagent that made no call (Claude Code's warmup) is still
    reported."""
    side = Session(version="2.1.3", sidechain=True, agent="a1b2c3d")
    side.user("Where is the port set?")
    side.say("msg_s1", text("Searching."), use("toolu_s1", "Grep", pattern="port"))
    side.result("toolu_s1", "app.py:3: PORT = 8000")
    side.say("msg_s2", text("In app.py, line 3."))
    [t], problems = imported(tmp_path, side, name=f"{SID}/subagents/agent-a1b2c3d.jsonl")
    assert problems == []
    assert (t.source.origin_id, t.source.origin_index) == (f"{SID}:a1b2c3d", 4)
    assert [(x.action.text, x.observation.text, x.reasoning) for x in t.turns] == [
        ('Grep({"pattern": "port"})', "app.py:3: PORT = 8000", "Searching.")
    ]
    assert (t.task.instruction, t.agent.model) == ("Where is the port set?", MODEL)
    assert (t.metadata["parent_session"], t.metadata["agent_id"]) == (SID, "a1b2c3d")
    assert t.metadata["final_message"] == "In app.py, line 3."
    assert "resumed_from" not in t.metadata
    warmup = Session(version="2.1.3", sidechain=True, agent="e5f6a7b")
    warmup.user("Warmup")
    warmup.say("msg_w1", text("Ready."))
    trajs, problems = imported(tmp_path, warmup, name=f"{SID}/subagents/agent-e5f6a7b.jsonl")
    assert trajs == []
    [p] = problems
    assert (p.kind, p.where, p.fatal) == ("subagent_not_imported", "line 1", False)
    assert p.message == (
        "lines 1-2: 2 messages of subagent e5f6a7b (isSidechain): no (action, observation)"
        " pair; not imported"
    )


def test_inline_subagents_are_one_trajectory_each(tmp_path):
    """Two Task calls in parallel (before 2.0.24): their subagents' events interleave in
    the session file, each on its own chain (no agentId: grouped by chain); with an
    agentId, by agentId. Each is a trajectory at the line of its last message; the main
    conversation is read as before. A subagent that made no call is still reported."""
    s = Session(version="2.0.13")
    s.user("Where are the port and the host set?")
    first = s.say("msg_01", use("toolu_01", "Task", description="Port", prompt="Find the port"))
    second = s.say("msg_01", use("toolu_02", "Task", description="Host", prompt="Find the host"))
    a = Session(version="2.0.13", sidechain=True)
    b = Session(version="2.0.13", sidechain=True)
    c = Session(version="2.0.13", sidechain=True, agent="c0ffee1")
    for x in (a, b, c):
        x.lines, x.last = s.lines, None
    a.user("Find the port")  # line 4
    b.user("Find the host")  # line 5
    a.say("msg_a1", use("toolu_a1", "Grep", pattern="PORT"))
    b.say("msg_b1", use("toolu_b1", "Bash", command="grep -rn HOST ."))
    a.result("toolu_a1", "app.py:3: PORT = 8000")
    b.result("toolu_b1", "app.py:4: HOST = 'x'", tur=shell("app.py:4: HOST = 'x'\n"))
    a.say("msg_a2", text("app.py:3"))  # line 10
    b.say("msg_b2", text("app.py:4"))  # line 11
    s.result("toolu_01", "app.py:3", parent=first)
    s.result("toolu_02", "app.py:4", parent=second)
    c.user("Summarize the config")  # line 14: a subagent that made no call
    c.say("msg_c1", text("PORT and HOST are in app.py."))
    s.say("msg_02", text("Both are in app.py."))
    f = s.write(tmp_path / f"{SID}.jsonl")
    r = import_paths([f], tmp_path / "out")
    assert r.imported["claude-code"] == 3, r.problems
    assert [(p.kind, p.where, p.message) for p in r.problems] == [
        (
            "subagent_not_imported",
            "line 14",
            "lines 14-15: 2 messages of subagent c0ffee1 (isSidechain): no (action,"
            " observation) pair; not imported",
        )
    ]
    found = sorted(
        (
            t.source.origin_index,
            t.source.origin_id,
            t.task.instruction,
            [(x.action.text, x.observation.text) for x in t.turns],
        )
        for t in read_records(tmp_path / "out")
    )
    uuid = lambda n: f"{SID[:8]}-0000-4000-8000-{n:012x}"  # noqa: E731
    assert found == [
        (0, SID, "Where are the port and the host set?", [
            ('Task({"description": "Port", "prompt": "Find the port"})', "app.py:3"),
            ('Task({"description": "Host", "prompt": "Find the host"})', "app.py:4")]),
        (9, f"{SID}:{uuid(4)}", "Find the port", [
            ('Grep({"pattern": "PORT"})', "app.py:3: PORT = 8000")]),
        (10, f"{SID}:{uuid(5)}", "Find the host", [("grep -rn HOST .", "app.py:4: HOST = 'x'\n")]),
    ]  # fmt: skip


def test_a_branch_left_after_a_rewind_is_not_mixed_in(tmp_path):
    """The user went back and re-prompted: the new prompt's parent is the message before
    the old one. The conversation is the branch that reaches the last event; the one it
    left is reported, not imported."""
    s = Session()
    s.user("List the files")
    s.say("msg_01", use("toolu_01", "Bash", command="ls"))
    s.result("toolu_01", "calc.py\ntmp.txt", tur=shell("calc.py\ntmp.txt\n"))
    fork = s.say("msg_02", text("There are two files."))
    s.user("Delete tmp.txt")
    s.say("msg_03", use("toolu_03", "Bash", command="rm tmp.txt"))
    s.result("toolu_03", "", tur=shell(""))
    s.say("msg_04", text("Deleted."))
    s.user("Show tmp.txt instead", parent=fork)  # the rewound prompt
    s.say("msg_05", use("toolu_05", "Bash", command="cat tmp.txt"))
    s.result("toolu_05", "scratch", tur=shell("scratch\n"))
    s.say("msg_06", text("It says scratch."))
    [t], problems = imported(tmp_path, s)
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("ls", "calc.py\ntmp.txt\n"),
        ("There are two files.", "Show tmp.txt instead"),
        ("cat tmp.txt", "scratch\n"),
    ]
    [p] = problems
    assert (p.kind, p.where) == ("message_not_imported", "line 5")
    assert p.message.startswith(
        "lines 5-8: 4 messages of a branch the conversation left (it starts after line 4:"
    )
    assert t.metadata["final_message"] == "It says scratch."


def test_parallel_calls_and_a_lagging_result_are_one_step(tmp_path):
    """Parallel tool calls are one response's blocks; a result that arrives after the next
    call is written as that call's sibling. Both are the conversation's, not a branch."""
    s = Session(version="2.0.30")
    s.user("Where am I and what is here?")
    first = s.say("msg_01", text("Two checks."), use("toolu_01", "Bash", command="pwd"))
    second = s.say("msg_01", use("toolu_02", "Bash", command="ls"))
    s.result("toolu_01", "/home/dev/calc", tur=shell("/home/dev/calc\n"), parent=first)
    s.result("toolu_02", "calc.py", tur=shell("calc.py\n"), parent=second)
    s.say("msg_02", text("In /home/dev/calc, with calc.py."))
    [t], problems = imported(tmp_path, s)
    assert problems == []
    assert [(x.action.text, x.observation.text, x.reasoning) for x in t.turns] == [
        ("pwd", "/home/dev/calc\n", "Two checks."),
        ("ls", "calc.py\n", None),
    ]
    assert t.metadata["final_message"] == "In /home/dev/calc, with calc.py."


def test_a_malformed_line_is_named_and_costs_only_itself(tmp_path):
    """A line that is not JSON, or an event Claude Code would not write, is reported by
    file, line and field; only that line is lost, the chain goes on past it."""
    s = fix_session()
    s.lines[5] = json.dumps(s.lines[5])[:70] + "\n"  # line 6 (the first result), cut short
    s.lines[6]["message"]["content"][0]["input"] = "calc.py"  # line 7 (Read): not an object
    s.lines[9]["timestamp"] = "yesterday"  # line 10 (Edit)
    f = s.write(tmp_path / f"{SID}.jsonl")
    r = import_paths([f], tmp_path / "out", ImportConfig(workers=1))
    assert r.imported["claude-code"] == 1
    errors = sorted((p.where, p.kind, p.message) for p in r.problems if p.fatal)
    assert errors == [
        ("line 10", "invalid", 'timestamp: expected an ISO 8601 timestamp, got "yesterday"'),
        ("line 6", "invalid_json", "unexpected end at column 70 (the line may be truncated)"),
        ("line 7", "invalid", 'message.content[0].input: expected an object, got "calc.py"'),
    ]
    assert all(p.path == str(f) for p in r.problems)
    [t] = list(read_records(tmp_path / "out"))
    # the first pytest lost its result, the Read and the Edit their call: no turns
    assert [x.action.text for x in t.turns] == ["pytest -q", "Fixed: `add` now adds."]
    assert t.turns[0].observation.text == "1 passed in 0.01s\n"
    assert r.warnings == {"unpaired_call": 1, "unpaired_result": 2, "message_not_imported": 1}


def test_harness_user_messages_are_no_turns(tmp_path):
    """Slash commands, their output, `!` shell commands and compaction summaries are
    Claude Code's, reported; isMeta lines and its synthetic assistant messages are not
    what the agent or the user said."""
    s = Session()
    s.user("Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.", isMeta=True)  # fmt: skip
    s.user("<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>")  # fmt: skip
    s.user("<local-command-stdout>Set model to sonnet</local-command-stdout>")
    s.user("How big is the repo?")
    s.say("msg_01", text("Counting."), use("toolu_01", "Bash", command="du -sh ."))
    s.result("toolu_01", "4.0K\t.", tur=shell("4.0K\t.\n"))
    s.say("msg_02", text("4 KB."))
    s.user("<bash-input>git status</bash-input>")
    s.user("<bash-stdout>On branch main</bash-stdout><bash-stderr></bash-stderr>")
    s.say("synthetic", text("API Error: 500 Internal server error"), model="<synthetic>")
    s.user("Thanks")
    s.say("msg_03", text("You're welcome."))
    # /compact: a boundary with no parent continues its logical parent; the summary after it
    before = s.last
    s._event("system", parent=None, subtype="compact_boundary", content="Conversation compacted",
             logicalParentUuid=before, compactMetadata={"trigger": "manual", "preTokens": 24000})  # fmt: skip
    s.user("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\nThe user asked for the repo size.",
           isCompactSummary=True, isVisibleInTranscriptOnly=True)  # fmt: skip
    s.user("And the largest file?")
    s.say("msg_04", use("toolu_04", "Bash", command="ls -S | head -1"))
    s.result("toolu_04", "calc.py", tur=shell("calc.py\n"))
    [t], problems = imported(tmp_path, s)
    assert t.task.instruction == "How big is the repo?"
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("du -sh .", "4.0K\t.\n"),
        ("4 KB.", "Thanks"),
        ("You're welcome.", "And the largest file?"),  # the compaction is passed over
        ("ls -S | head -1", "calc.py\n"),
    ]
    assert warned(problems) == [
        ("message_not_imported", f"line {n}") for n in (10, 11, 15, 2, 3, 9)
    ]
    messages = {p.where: p.message for p in problems}
    assert messages["line 2"] == "a slash command the user ran; not imported"
    assert messages["line 9"] == "a shell command the user ran (! mode); not imported"
    assert (
        messages["line 11"]
        == "a message Claude Code wrote itself (model <synthetic>); not imported"
    )
    assert messages["line 15"] == (
        "the summary Claude Code wrote when it compacted the conversation; not imported"
    )


def test_a_resumed_session_is_one_trajectory_of_the_new_session(tmp_path):
    """`claude --resume` starts a new session file seeded with the earlier session's
    lines (their own sessionId): one chain, one trajectory, named by the new session."""
    old = "0a0b0c0d-1111-4222-8333-444455556666"
    s = Session(sid=old)
    s.user("List the files")
    s.say("msg_01", use("toolu_01", "Bash", command="ls"))
    s.result("toolu_01", "calc.py", tur=shell("calc.py\n"))
    s.say("msg_02", text("One file."))
    s.sid = SID
    s.user("Count its lines")
    s.say("msg_03", use("toolu_03", "Bash", command="wc -l calc.py"))
    s.result("toolu_03", "2 calc.py", tur=shell("2 calc.py\n"))
    [t], problems = imported(tmp_path, s)
    assert problems == []
    assert (t.source.origin_id, t.metadata["resumed_from"]) == (SID, json.dumps([old]))
    assert [x.action.text for x in t.turns] == ["ls", "One file.", "wc -l calc.py"]


def test_two_sessions_in_one_file_are_two_trajectories(tmp_path):
    """Session files joined into one: each session no chain of the other reaches is a
    trajectory of its own; the one reaching the file's last line has origin index 0, the
    other the line of its last message (0-based)."""
    other = "0a0b0c0d-1111-4222-8333-444455556666"
    a = Session(sid=other)
    a.user("Print the date")
    a.say("msg_a1", use("toolu_a1", "Bash", command="date"))
    a.result(
        "toolu_a1", "Tue Sep 30 10:00:00 UTC 2025", tur=shell("Tue Sep 30 10:00:00 UTC 2025\n")
    )
    b = Session()
    b.lines, b.last = a.lines, None  # appended after it, a chain of its own
    b.user("Print the kernel")
    b.say("msg_b1", use("toolu_b1", "Bash", command="uname -r"))
    b.result("toolu_b1", "6.8.0", tur=shell("6.8.0\n"))
    f = b.write(tmp_path / "joined.jsonl")
    r = import_paths([f], tmp_path / "out")
    assert r.imported["claude-code"] == 2 and not r.problems
    found = sorted(
        (t.source.origin_id, t.source.origin_index, t.turns[0].action.text)
        for t in read_records(tmp_path / "out")
    )
    assert found == [(other, 2, "date"), (SID, 0, "uname -r")]


def test_a_file_check_that_read_the_file_system_is_a_turn(tmp_path):
    """The file tools' input checks that looked at the file system ("File does not
    exist.", "String to replace not found in file.", several matches, the file already
    exists) tell the environment's state: an error turn with the text inside the tags.
    A check of Claude Code's own rules ran nothing: no turn."""
    s = Session()
    s.user("Fix calc.py")
    s.say("msg_01", use("toolu_01", "Edit", file_path=f"{CWD}/calc.py", old_string="x = 1", new_string="x = 2"))  # fmt: skip
    s.result("toolu_01", "<tool_use_error>String to replace not found in file.\nString: x = 1</tool_use_error>", error=True)  # fmt: skip
    s.say("msg_02", use("toolu_02", "Read", file_path=f"{CWD}/calk.py"))
    s.result("toolu_02", f"<tool_use_error>File does not exist. Current working directory: {CWD}</tool_use_error>", error=True)  # fmt: skip
    s.say("msg_03", use("toolu_03", "Edit", file_path=f"{CWD}/calc.py", old_string="a", new_string="a"))  # fmt: skip
    s.result("toolu_03", "<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>", error=True)  # fmt: skip
    [t], problems = imported(tmp_path, s)
    assert obs(t) == [
        ("String to replace not found in file.\nString: x = 1", True, None, False),
        (f"File does not exist. Current working directory: {CWD}", True, None, False),
    ]
    assert [k for k, _ in warned(problems)] == ["not_run"]
