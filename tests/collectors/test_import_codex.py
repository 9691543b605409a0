"""OpenAI Codex CLI session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), the
9th importer (collectors/importers/codex.py): one rollout is one session, read whole;
Codex's own framing of a command's output (exit code, wall time, cut notices), its
refusals and its context messages are not the environment's answer. Our own fixtures,
built here in the shapes codex-rs writes: `RolloutLine`s `{timestamp, type, payload}`
(0.4x, with `event_msg` copies of the messages) and the older bare layout (a session
header, then bare Responses API items and `record_type: state` markers)."""

from __future__ import annotations

import json
import subprocess

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records, validate_dict

from .test_import_claude_code import fix_session, obs
from .test_import_fidelity import items

SID = "0199a3b2-5c1d-7e0f-8a9b-0c1d2e3f4a5b"
OLD_SID = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
CWD = "/home/dev/calc"
MODEL = "gpt-5-codex"
ENV_CONTEXT = (
    "<environment_context>\n  <cwd>/home/dev/calc</cwd>\n  <approval_policy>on-request"
    "</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>"
    "restricted</network_access>\n  <shell>bash</shell>\n</environment_context>"
)
AGENTS = "Run pytest before you finish."
PATCH = (
    "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n"
    "+    return a + b\n*** End Patch"
)


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def say(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}  # fmt: skip


def think(text):
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}],
            "content": None, "encrypted_content": "gAAAAABo-opaque"}  # fmt: skip


def shell(cid, *argv, name="shell"):
    args = {"command": list(argv), "workdir": CWD, "timeout_ms": 120000}
    return {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": cid}


def bash(cid, line):
    return shell(cid, "bash", "-lc", line)


def out(cid, output):
    return {"type": "function_call_output", "call_id": cid, "output": output}


def freeform(body, code=0, total=None):
    """Codex's free-form exec output (`format_exec_output_for_model_freeform`)."""
    lines = f"Total output lines: {total}\n" if total else ""
    return f"Exit code: {code}\nWall time: 0.4 seconds\n{lines}Output:\n{body}"


def structured(body, code=0):
    """Codex's structured exec output (`format_exec_output_for_model_structured`)."""
    return json.dumps({"output": body, "metadata": {"exit_code": code, "duration_seconds": 0.3}})


class Rollout:
    """A rollout as codex-rs 0.4x writes it: `{timestamp, type, payload}` lines, each
    message also written as an `event_msg`."""

    def __init__(self, sid=SID, version="0.46.0"):
        self.lines, self.n = [], 0
        self.meta = {"id": sid, "timestamp": "2025-10-14T09:00:00.000Z", "cwd": CWD,
                     "originator": "codex_cli_rs", "cli_version": version,
                     "instructions": AGENTS, "source": "cli", "model_provider": "openai",
                     "git": {"commit_hash": "4f2a9c1", "branch": "main",
                             "repository_url": "git@github.com:dev/calc.git"}}  # fmt: skip
        self.line("session_meta", self.meta)

    def line(self, kind, payload):
        self.n += 1
        ts = f"2025-10-14T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z"
        self.lines.append({"timestamp": ts, "type": kind, "payload": payload})

    def item(self, *items):
        for it in items:
            self.line("response_item", it)
            if it.get("type") == "message" and it["role"] in ("user", "assistant"):
                text = it["content"][0]["text"]
                if it["role"] == "assistant":
                    self.line("event_msg", {"type": "agent_message", "message": text})
                elif not text.startswith("<"):
                    self.line("event_msg", {"type": "user_message", "message": text, "images": []})
        return self

    def event(self, **payload):
        self.line("event_msg", payload)
        return self

    def context(self):
        self.line("turn_context", {"cwd": CWD, "approval_policy": "on-request",
                                   "sandbox_policy": {"mode": "workspace-write"},
                                   "model": MODEL, "effort": "medium", "summary": "auto"})  # fmt: skip
        return self

    def write(self, path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(x if isinstance(x, str) else json.dumps(x) + "\n" for x in self.lines)
        )
        return path


def start(**kw):
    r = Rollout(**kw)
    r.item(user(f"<user_instructions>\n\n{AGENTS}\n\n</user_instructions>"), user(ENV_CONTEXT))
    r.context()
    return r.item(user("Fix the failing test in calc.py"))


def fix_rollout():
    r = start()
    r.item(think("**Running tests**\n\nRun them first."), say("I'll run the tests."))
    r.item(bash("call_1", "pytest -q"))
    r.item(out("call_1", freeform("F\nFAILED test_calc.py::test_add - assert -1 == 3\n", code=1)))
    r.event(type="token_count", info=None, rate_limits=None)
    r.item(think("`add` subtracts."))
    r.item({"type": "custom_tool_call", "status": "completed", "call_id": "call_2",
            "name": "apply_patch", "input": PATCH})  # fmt: skip
    r.item({"type": "custom_tool_call_output", "call_id": "call_2",
            "output": freeform("Success. Updated the following files:\nM calc.py\n")})  # fmt: skip
    r.item(shell("call_3", "pytest", "-q", "-k", "add and not slow"))
    r.item(out("call_3", freeform("1 passed in 0.01s\n")))
    r.item(say("Fixed: `add` now adds."), user("Thanks! Is it tested?"))
    r.context()
    r.item(say("Yes, test_add covers it."))
    return r


def path_of(tmp_path, sid=SID):
    return tmp_path / "sessions" / "2025" / "10" / "14" / f"rollout-2025-10-14T09-00-00-{sid}.jsonl"


def imported(tmp_path, rollout, sid=SID):
    f = rollout.write(path_of(tmp_path, sid))
    trajs, problems = items(f)
    for t in trajs:
        assert validate_dict(t.to_dict()) == [], t
    return trajs, problems


def test_a_rollout_is_one_trajectory_through_the_cli(tmp_path, wt_env):
    """Found: every line of a Codex rollout was `unrecognized`. The rollout is one
    session now: its shell calls are commands (`bash -lc X` is X), apply_patch a tool
    call, the outputs without Codex's `Exit code`/`Wall time`/`Output:` framing, what the
    agent told the user and the reply a text turn; the event_msg copies are not doubled
    and Codex's context messages are no turns."""
    f = fix_rollout().write(path_of(tmp_path))
    r = subprocess.run(
        ["worldtrace", "import", str(tmp_path / "sessions")], capture_output=True, text=True, env=wt_env
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unrecognized" not in r.stdout + r.stderr and "codex" in r.stdout
    assert "message_not_imported" not in r.stdout + r.stderr
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert validate_dict(t.to_dict()) == []
    assert (t.source.origin_format, t.source.origin_id, t.source.origin_index) == ("codex", SID, 0)
    assert t.source.origin_path == str(f.resolve())
    assert [(x.action.kind, x.action.name, x.action.text) for x in t.turns] == [
        ("command", "shell", "pytest -q"),
        ("tool_call", "apply_patch", "apply_patch(" + json.dumps({"_raw": PATCH}) + ")"),
        ("command", "shell", "pytest -q -k 'add and not slow'"),
        ("text", None, "Fixed: `add` now adds."),
    ]
    assert obs(t) == [
        ("F\nFAILED test_calc.py::test_add - assert -1 == 3\n", True, 1, False),
        ("Success. Updated the following files:\nM calc.py\n", False, 0, False),
        ("1 passed in 0.01s\n", False, 0, False),
        ("Thanks! Is it tested?", False, None, False),
    ]
    assert [x.reasoning for x in t.turns] == [
        "**Running tests**\n\nRun them first.\n\nI'll run the tests.",
        "`add` subtracts.",
        None,
        None,
    ]
    assert t.turns[0].started_at.isoformat() == "2025-10-14T09:00:10+00:00"
    assert t.started_at.isoformat() == "2025-10-14T09:00:01+00:00"
    assert (t.task.instruction, t.domain) == ("Fix the failing test in calc.py", "swe")
    assert (t.agent.name, t.agent.model) == ("codex", MODEL)
    assert t.metadata == {
        "cwd": CWD,
        "git_branch": "main",
        "git_commit": "4f2a9c1",
        "repository_url": "git@github.com:dev/calc.git",
        "codex_version": "0.46.0",
        "originator": "codex_cli_rs",
        "approval_policy": "on-request",
        "sandbox": "workspace-write",
        "user_instructions": AGENTS,
        "final_message": "Yes, test_add covers it.",
    }
    r = subprocess.run(["worldtrace", "import", str(f)], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0 and "already present" in r.stdout, r.stdout + r.stderr
    help_ = subprocess.run(["worldtrace", "import", "--help"], capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert "codex" in help_.stdout


def old_rollout():
    """The bare layout of codex-rs before RolloutLine (0.2x): a header, `record_type:
    state` markers, bare items; exec output as structured JSON (stdout on success,
    stderr on failure)."""
    lines = [
        {"id": OLD_SID, "timestamp": "2025-08-01T12:00:00.000Z", "instructions": AGENTS,
         "git": {"commit_hash": "9b1e2d3", "branch": "fix-add"}},
        {"record_type": "state"},
        user(ENV_CONTEXT.replace(CWD, "/work/calc")),
        user("Make the tests pass"),
        {"record_type": "state"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAA"},
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_a", "status": "completed",
         "action": {"type": "exec", "command": ["ls", "-a"], "timeout_ms": None,
                    "working_directory": None, "env": None, "user": None}},
        out("call_a", structured(".\n..\ncalc.py\n")),
        shell("call_b", "bash", "-lc", "python -m pytest -q 2>&1 | tail -1"),
        out("call_b", structured("1 failed in 0.02s\n", code=1)),
        shell("call_c", "apply_patch", PATCH),
        out("call_c", structured("Success. Updated the following files:\nM calc.py\n")),
        say("Done: add() adds now."),
    ]  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in lines)


def test_the_older_bare_layout_is_read_too(tmp_path):
    f = path_of(tmp_path, OLD_SID)
    f.parent.mkdir(parents=True)
    f.write_text(old_rollout())
    r = import_paths([tmp_path / "sessions"], tmp_path / "out")
    assert r.imported["codex"] == 1 and not r.errors and not r.warnings, r.problems
    [t] = list(read_records(tmp_path / "out"))
    assert t.source.origin_id == OLD_SID
    assert [(x.action.kind, x.action.name, x.action.text) for x in t.turns] == [
        ("command", "local_shell", "ls -a"),
        ("command", "shell", "python -m pytest -q 2>&1 | tail -1"),
        ("tool_call", "apply_patch", "apply_patch(" + json.dumps({"input": PATCH}) + ")"),
    ]
    assert obs(t) == [
        (".\n..\ncalc.py\n", False, 0, False),
        ("1 failed in 0.02s\n", True, 1, False),
        ("Success. Updated the following files:\nM calc.py\n", False, 0, False),
    ]
    assert t.turns[0].reasoning is None  # encrypted reasoning holds no text
    assert (t.task.instruction, t.agent.model, t.domain) == ("Make the tests pass", None, "swe")
    assert t.metadata["cwd"] == "/work/calc"  # from <environment_context>
    assert t.metadata["git_branch"] == "fix-add" and t.metadata["user_instructions"] == AGENTS
    assert t.metadata["final_message"] == "Done: add() adds now."


def test_codex_cuts_and_timeouts_are_read_only_in_their_place(tmp_path):
    """Codex's head+tail cut is `truncated` with the text shown, only under its `Total
    output lines` header; `command timed out after N milliseconds` is a timeout. The same
    words printed by a program stay."""
    lines = "".join(f"l{i}\n" for i in range(3))
    tail = "".join(f"l{i}\n" for i in range(7, 9))
    cut = f"{lines}\n[... omitted 4 of 9 lines ...]\n\n{tail}"
    r = start()
    r.item(bash("c1", "seq 9"), out("c1", freeform(cut, total=9)))  # free-form, cut
    r.item(bash("c2", "seq 9"), out("c2", structured(f"Total output lines: 9\n\n{cut}")))
    r.item(bash("c3", "cat notes"), out("c3", freeform(cut)))  # no header: the file says so
    r.item(bash("c4", "sleep 99"), out("c4", freeform("command timed out after 10000 milliseconds\nzzz\n", code=124)))  # fmt: skip
    r.item(bash("c5", "yes | head -c 9"), out("c5", structured("yyy\n\n[Output truncated after 2 lines: too many lines or bytes.]")))  # fmt: skip
    r.item(bash("c6", "cat log"), out("c6", freeform("Exit code: 3\nWall time: 1 seconds\nOutput:\nx")))  # fmt: skip
    r.item(bash("c7", "echo hi"), out("c7", "hi\n"))  # a layout Codex did not frame: as it is
    [t], problems = imported(tmp_path, r)
    assert problems == []
    assert obs(t) == [
        (f"{lines}{tail}", False, 0, True),
        (f"{lines}{tail}", False, 0, True),
        (cut, False, 0, False),
        ("zzz\n[timed out]", True, None, False),
        ("yyy", False, 0, True),
        ("Exit code: 3\nWall time: 1 seconds\nOutput:\nx", False, 0, False),
        ("hi\n", False, None, False),
    ]
    assert json.loads(t.turns[3].observation.state_json) == {"timed_out": True}


def test_calls_codex_did_not_run_are_no_turns(tmp_path):
    """Codex's own answers - the user's rejection, its policy's, an interrupted turn, a
    run it failed to start - are no turns; a command the sandbox let run and that
    failed is kept as the error it printed. A program printing `aborted` stays."""
    r = start()
    r.item(bash("c1", "rm -rf build"), out("c1", "exec command rejected by user"))
    r.item(bash("c2", "curl x"), out("c2", "exec command rejected: dangerous command"))
    r.item(bash("c3", "sleep 60"), out("c3", "aborted"))
    r.item(bash("c4", "sleep 60"), out("c4", "Wall time: 3.2 seconds\naborted by user"))
    r.item(bash("c5", "ls"), out("c5", "execution error: Io(Os { code: 2, kind: NotFound })"))
    denied = ("failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error,"
              " exit code: 1, stdout: , stderr: touch: /etc/x: Permission denied")  # fmt: skip
    r.item(bash("c6", "touch /etc/x"), out("c6", denied))
    r.item(bash("c7", "sleep 99"), out("c7", "failed in sandbox MacosSeatbelt with execution error: command timed out"))  # fmt: skip
    r.item(bash("c8", "cat status"), out("c8", freeform("aborted\n")))
    r.item({"type": "custom_tool_call", "call_id": "c9", "name": "apply_patch", "input": PATCH})
    r.item({"type": "custom_tool_call_output", "call_id": "c9", "output": "patch rejected by user"})
    r.item(bash("c10", "make"))  # nothing answered it
    [t], problems = imported(tmp_path, r)
    assert [x.action.text for x in t.turns] == ["touch /etc/x", "sleep 99", "cat status"]
    assert obs(t) == [
        ("touch: /etc/x: Permission denied", True, 1, False),
        ("[timed out]", True, None, False),
        ("aborted\n", False, 0, False),
    ]
    got = sorted((int(p.where.split()[1]), p.kind) for p in problems)
    assert got == [
        (8, "not_run"), (10, "not_run"), (12, "not_run"), (14, "not_run"),
        (16, "harness_failure"), (24, "not_run"), (25, "unpaired_call"),
    ], problems  # fmt: skip
    assert all(not p.fatal for p in problems)
    first = min(problems, key=lambda p: int(p.where.split()[1]))
    assert first.message == (
        "shell call 'c1' (line 7): the user rejected the command at Codex's approval prompt;"
        " no turn"
    )


def test_exec_command_end_is_the_output_when_the_rollout_kept_it(tmp_path):
    """Codex versions that persist `exec_command_end` keep what the command printed,
    whole, with its exit code: it is the observation instead of the cut, framed text."""
    r = start()
    r.item(bash("c1", "seq 300"), out("c1", freeform("1\n\n[... omitted 298 of 300 lines ...]\n\n300\n", total=300)))  # fmt: skip
    whole = "".join(f"{i}\n" for i in range(1, 301))
    r.event(type="exec_command_end", call_id="c1", stdout=whole, stderr="", aggregated_output=whole,
            exit_code=0, duration={"secs": 0, "nanos": 1}, formatted_output="")  # fmt: skip
    r.item(bash("c2", "rm x"), out("c2", "exec command rejected by user"))
    r.event(type="exec_command_end", call_id="c2", stdout="", stderr="exec command rejected by user",
            aggregated_output="exec command rejected by user", exit_code=-1,
            duration={"secs": 0, "nanos": 0}, formatted_output="", status="declined")  # fmt: skip
    [t], problems = imported(tmp_path, r)
    assert obs(t) == [(whole, False, 0, False)]
    assert [p.kind for p in problems] == ["not_run"]


def test_codex_context_messages_are_no_turns(tmp_path):
    """<environment_context>, <user_instructions>, AGENTS.md and <turn_aborted> messages
    are Codex's context (passed over); a `!` shell command and a compaction summary are
    reported. A user who writes such a tag later in a message is still the user."""
    r = Rollout()
    r.item(user("# AGENTS.md instructions for /home/dev/calc\n\n<INSTRUCTIONS>\nUse uv.\n</INSTRUCTIONS>"))  # fmt: skip
    r.item(user(ENV_CONTEXT), user("Why does <environment_context> show up in my log?"))
    r.item(say("Codex adds it for the model."), user("<turn_aborted>\nThe user interrupted.\n</turn_aborted>"))  # fmt: skip
    r.item(user("<user_shell_command>\n<command>ls</command>\n<result>calc.py</result>\n</user_shell_command>"))  # fmt: skip
    r.item(user("OK, and now?"))
    r.item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>..."}]})  # fmt: skip
    r.item(bash("c1", "ls"), out("c1", freeform("calc.py\n")))
    r.line("compacted", {"message": "Summary of the work so far."})
    [t], problems = imported(tmp_path, r)
    assert t.task.instruction == "Why does <environment_context> show up in my log?"
    assert [(x.action.text, x.observation.text) for x in t.turns] == [
        ("Codex adds it for the model.", "OK, and now?"),
        ("ls", "calc.py\n"),
    ]
    assert t.metadata["user_instructions"] == AGENTS  # the session's own wins
    assert sorted((p.kind, p.message) for p in problems) == [
        ("message_not_imported", "a shell command the user ran (! mode); not imported"),
        ("message_not_imported", "the summary Codex wrote when it compacted the conversation; not imported"),
    ]  # fmt: skip


def test_an_event_msg_message_no_item_holds_is_reported(tmp_path):
    r = fix_rollout()
    r.event(type="user_message", message="Also add a docstring.", images=[])
    [t], problems = imported(tmp_path, r)
    [p] = problems
    assert (p.kind, p.where) == ("message_not_imported", f"line {len(r.lines)}")
    assert len(t.turns) == 4


def test_a_malformed_line_is_named_and_costs_only_itself(tmp_path):
    r = fix_rollout()
    r.lines[10] = json.dumps(r.lines[10])[:50] + "\n"  # line 11 (the first output), cut short
    r.lines[13]["payload"]["input"] = 7  # line 14 (apply_patch): not a string
    r.lines[15]["timestamp"] = "yesterday"  # line 16 (the second pytest)
    f = r.write(path_of(tmp_path))
    res = import_paths([f], tmp_path / "out", ImportConfig(workers=1))
    assert res.imported["codex"] == 1
    errors = [(p.where, p.kind, p.message) for p in res.problems if p.fatal]
    assert errors == [
        ("line 11", "invalid_json", "unexpected end at column 50 (the line may be truncated)"),
        ("line 14", "invalid", "payload.input: expected a string, got 7"),
        ("line 16", "invalid", 'timestamp: expected an ISO 8601 timestamp, got "yesterday"'),
    ]
    assert all(p.path == str(f) for p in res.problems)
    [t] = list(read_records(tmp_path / "out"))
    assert [x.action.text for x in t.turns] == ["Fixed: `add` now adds."]
    # the text before the call line 11 answered ("I'll run the tests.") had no turn to go
    # with: said (hunt 1205g), it was lost in silence
    assert res.warnings == {"unpaired_call": 1, "unpaired_result": 2, "message_not_imported": 1}


def test_detection_is_per_file_and_keeps_the_other_formats(tmp_path):
    """A rollout, a Claude Code session and a JSONL file of OpenAI records side by side:
    each read as its own format; `--format codex` reads any file as a rollout."""
    fix_rollout().write(tmp_path / "a" / "rollout.jsonl")
    fix_session().write(tmp_path / "a" / "claude.jsonl")
    chat = {"id": "c1", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "a.txt"}]}  # fmt: skip
    (tmp_path / "a" / "chat.jsonl").write_text(json.dumps(chat) + "\n")
    (tmp_path / "a" / "header.jsonl").write_text(json.dumps({"id": "x", "timestamp": "2025-01-01T00:00:00Z"}) + "\n")  # fmt: skip
    r = import_paths([tmp_path / "a"], tmp_path / "out")
    assert (r.imported["codex"], r.imported["claude-code"], r.imported["openai"]) == (1, 1, 1)
    assert r.errors == {"unrecognized": 1}  # a bare header alone is no rollout
    f = fix_rollout().write(tmp_path / "b" / "session.log")
    r = import_paths([f], tmp_path / "out2", ImportConfig(format="codex"))
    assert r.imported["codex"] == 1 and not r.problems
