"""OpenHands V1 conversations (OpenHands/software-agent-sdk, `openhands-sdk` 1.x, the
OpenHands 1.x app): `<persistence_dir>/<conversation id hex>/base_state.json` and
`events/event-<index>-<event id>.json`, one `Event.model_dump_json(exclude_none=True)` per
file, each with its `kind` (collectors/importers/openhands_v1.py). Our own fixtures, built
here in the shapes openhands-sdk 1.58 writes (`parent_id`, `TerminalAction`, a
ToolDefinition dump per tool) and 1.0 writes (`ExecuteBashAction`, no top-level
`exit_code`, OpenAI-shaped tools, no `parent_id`)."""

from __future__ import annotations

import json
import subprocess
import uuid

from worldtrace.collectors.importers import ImportConfig, import_paths
from worldtrace.schemas import read_records, validate_dict

from .test_import_claude_code import obs
from .test_import_fidelity import items
from .test_import_openhands_store import events as v0_events
from .test_import_openhands_store import write_session

CID = "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
CWD = "/workspace/calc"
MODEL = "anthropic/claude-sonnet-4-5-20250929"
HINT = (
    "You may wait longer to see additional output by sending empty command '', send other"
    ' commands to interact with the current process, send keys ("C-c", "C-z", "C-d") to'
    " interrupt/kill the previous command before sending your new command, or use the"
    " timeout parameter in terminal for future commands."
)
NO_CHANGE = f"\n[The command has no new output after 30 seconds. {HINT}]"
HARD = f"\n[The command timed out after 120.0 seconds. {HINT}]"
CLIPPED = (
    "<response clipped><NOTE>Due to the max output limit, only part of the full response has"
    " been shown to you.</NOTE>"
)
RESET = (
    "Terminal session has been reset. All previous environment variables and session state"
    " have been cleared."
)


def text(s):
    """A TextContent as pydantic dumps it."""
    return {"cache_prompt": False, "type": "text", "text": s}


def meta(code=0, cwd=CWD, prefix="", suffix=None):
    """CmdOutputMetadata of a finished command (the PS1 JSON), with the SDK's framing."""
    if suffix is None:
        suffix = f"\n[The command completed with exit code {code}.]"
    return {"exit_code": code, "pid": -1, "username": "dev", "hostname": "box",
            "working_dir": cwd, "py_interpreter_path": "/usr/bin/python", "prefix": prefix,
            "suffix": suffix}  # fmt: skip


def waiting(suffix=NO_CHANGE, prefix=""):
    """CmdOutputMetadata() of a command still running at a timeout (no PS1 read)."""
    return {"exit_code": -1, "pid": -1, "prefix": prefix, "suffix": suffix}


def term(output, code=0, command="", error=False, metadata=None, v10=False):
    """A TerminalObservation (1.0: ExecuteBashObservation, no top-level exit_code)."""
    m = metadata if metadata is not None else meta(code)
    o = {"content": [text(output)], "is_error": error, "command": command}
    if not v10:
        o["exit_code"] = m["exit_code"]
    o.update({"timeout": False, "metadata": m})
    o["kind"] = "ExecuteBashObservation" if v10 else "TerminalObservation"
    return o


def editor(output, command="view", error=False):
    return {"content": [text(output)], "is_error": error, "command": command,
            "kind": "FileEditorObservation"}  # fmt: skip


class Conv:
    """Events as an SDK conversation appends them: ids are UUIDs, each event's
    `parent_id` the event before it (1.58; 1.0 writes none), file `event-<n:05d>-<id>`."""

    def __init__(self, cid=CID, tree=True, v10=False):
        self.cid, self.tree, self.v10 = cid, tree, v10
        self.events: list[dict] = []
        self.calls = 0
        self.leaf = None

    def add(self, kind, source, parent="last", **fields):
        n = len(self.events)
        ev = {"id": str(uuid.UUID(int=(n + 1) << 64 | 0x4000_8000_0000_0000 | n)),
              "timestamp": f"2026-01-05T10:{n // 60:02d}:{n % 60:02d}.123456", "source": source}  # fmt: skip
        if self.tree:
            parent = self.leaf if parent == "last" else parent
            if parent is not None:
                ev["parent_id"] = parent
        ev.update(fields)
        ev["kind"] = kind
        self.events.append(ev)
        self.leaf = ev["id"]
        return ev

    def system(self, prompt="You are OpenHands agent.", context=None):
        if self.v10:
            tools = [{"type": "function", "function": {"name": n, "description": f"The {n} tool.",
                      "parameters": {"type": "object", "properties": {}}}}
                     for n in ("terminal", "file_editor", "finish")]  # fmt: skip
        else:
            tools = [{"description": f"The {n} tool.", "action_type": a, "observation_type": o,
                      "annotations": {"title": n, "readOnlyHint": False}, "kind": k, "title": n}
                     for n, k, a, o in (
                         ("terminal", "TerminalTool", "TerminalAction", "TerminalObservation"),
                         ("file_editor", "FileEditorTool", "FileEditorAction",
                          "FileEditorObservation"),
                         ("finish", "FinishTool", "FinishAction", "FinishObservation"))]  # fmt: skip
        fields = {"system_prompt": text(prompt), "tools": tools}
        if context is not None:
            fields["dynamic_context"] = text(context)
        return self.add("SystemPromptEvent", "agent", **fields)

    def message(self, source, content, reasoning=None):
        role = {"agent": "assistant"}.get(source, "user")
        msg = {"role": role, "content": [text(content)] if isinstance(content, str) else content,
               "thinking_blocks": []}  # fmt: skip
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        return self.add("MessageEvent", source, llm_message=msg, activated_skills=[],
                        extended_content=[])  # fmt: skip

    def user(self, content):
        return self.message("user", content)

    def say(self, content, reasoning=None):
        return self.message("agent", content, reasoning)

    def call(self, name, action=None, args=None, thought="", reasoning=None, response=None):
        """An ActionEvent: the model's tool call (`args`, as it wrote them) and the action
        the SDK made of it (None: it could not)."""
        self.calls += 1
        cid = f"toolu_{self.calls:02d}"
        fields = {"thought": [text(thought)] if thought else []}
        if reasoning is not None:
            fields["reasoning_content"] = reasoning
        fields["thinking_blocks"] = []
        if action is not None:
            fields["action"] = action
        if args is None:
            args = {k: v for k, v in (action or {}).items() if k != "kind"}
        fields.update(
            tool_name=name,
            tool_call_id=cid,
            tool_call={"id": cid, "name": name, "arguments": json.dumps(args),
                       "origin": "completion"},
            llm_response_id=response or f"resp_{self.calls}",
            security_risk="UNKNOWN",
        )  # fmt: skip
        return self.add("ActionEvent", "agent", **fields)

    def result(self, call, observation):
        return self.add("ObservationEvent", "environment", tool_name=call["tool_name"],
                        tool_call_id=call["tool_call_id"], observation=observation,
                        action_id=call["id"], extended_content=[])  # fmt: skip

    def error(self, call, error):
        return self.add("AgentErrorEvent", "agent", tool_name=call["tool_name"],
                        tool_call_id=call["tool_call_id"], error=error)  # fmt: skip

    def reject(self, call, reason="User rejected the action", source="user"):
        return self.add("UserRejectObservation", "environment", tool_name=call["tool_name"],
                        tool_call_id=call["tool_call_id"], rejection_reason=reason,
                        rejection_source=source, action_id=call["id"])  # fmt: skip

    def run(self, command, output, code=0, thought="", reasoning=None, **kw):
        """A terminal call and its observation."""
        kind = "ExecuteBashAction" if self.v10 else "TerminalAction"
        action = {"command": command, "is_input": kw.pop("is_input", False),
                  "reset": kw.pop("reset", False), "kind": kind}  # fmt: skip
        args = {"command": command, **kw.pop("args", {})}
        c = self.call("terminal", action, args, thought, reasoning)
        self.result(c, term(output, code, command, v10=self.v10, **kw))
        return c

    def finish(self, message):
        c = self.call("finish", {"message": message, "kind": "FinishAction"})
        self.result(c, {"content": [text(message)], "is_error": False,
                        "kind": "FinishObservation"})  # fmt: skip
        return c

    def think(self, thought):
        c = self.call("think", {"thought": thought, "kind": "ThinkAction"})
        self.result(c, {"content": [text("Your thought has been logged.")], "is_error": False,
                        "kind": "ThinkObservation"})  # fmt: skip
        return c

    def state(self, **extra):
        state = {"id": self.cid,
                 "agent": {"llm": {"model": MODEL, "api_key": "**********", "usage_id": "agent"},
                           "tools": [{"name": "terminal", "params": {}},
                                     {"name": "file_editor", "params": {}}],
                           "kind": "Agent"},
                 "workspace": {"working_dir": CWD, "kind": "LocalWorkspace"},
                 "persistence_dir": f"/root/.openhands/conversations/{uuid.UUID(self.cid).hex}",
                 "max_iterations": 500, "stuck_detection": True, "execution_status": "finished",
                 "confirmation_policy": {"kind": "NeverConfirm"}, "tags": {"title": "Fix add()"},
                 "stats": {"usage_to_metrics": {}}, "secret_registry": {"secret_sources": {}}}  # fmt: skip
        if self.tree:
            state["leaf_event_id"] = self.leaf
        return {**state, **extra}

    def write(self, root, state=True):
        """`root/<id hex>/` with base_state.json (unless `state` is False) and events/."""
        d = root / uuid.UUID(self.cid).hex
        (d / "events").mkdir(parents=True)
        for n, ev in enumerate(self.events):
            (d / "events" / f"event-{n:05d}-{ev['id']}.json").write_text(json.dumps(ev))
        if state:
            (d / "base_state.json").write_text(json.dumps(self.state() if state is True else state))
        return d

    def file(self, d, n):
        return d / "events" / f"event-{n:05d}-{self.events[n]['id']}.json"


def imported(paths, out):
    r = import_paths(paths, out, ImportConfig(workers=1))
    return r, sorted(read_records(out), key=lambda t: t.source.origin_id) if r.shards else []


def read(d):
    """(trajectories, problems) of the conversation in `d`, read at its first event file."""
    first = sorted((d / "events").glob("event-00000-*.json"))[0]
    trajs, problems = items(first)
    for t in trajs:
        assert validate_dict(t.to_dict()) == [], t
    return trajs, problems


def warned(problems):
    return [(p.kind, p.message) for p in problems]


def fix_conversation(v10=False):
    """Fix add() in calc.py: run the tests, edit the file, run them again, tell the user,
    who answers; finish."""
    c = Conv(tree=not v10, v10=v10)
    c.system("You are OpenHands agent.", context="<REPOSITORY>acme/calc</REPOSITORY>")
    c.user("Fix the failing test in calc.py")
    out = "F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s"
    c.run("pytest -q", out, 1, thought="Let me run the tests.", reasoning="Start with tests.",
          args={"security_risk": "LOW", "summary": "run the test suite"})  # fmt: skip
    edit = {"command": "str_replace", "path": f"{CWD}/calc.py", "old_str": "a - b",
            "new_str": "a + b", "kind": "FileEditorAction"}  # fmt: skip
    e = c.call("file_editor", edit, {**{k: v for k, v in edit.items() if k != "kind"},
                                     "security_risk": "MEDIUM"}, "`add` subtracts.")  # fmt: skip
    c.result(e, editor(f"The file {CWD}/calc.py has been edited.", "str_replace"))
    c.run("pytest -q", "1 passed in 0.01s", 0)
    c.say("Fixed: `add` now adds.")
    c.user("Thanks! Is it tested?")
    c.finish("Yes, test_add covers it.")
    return c


def test_a_conversation_directory_is_one_trajectory_through_the_cli(tmp_path, wt_env):
    """Found: V1 conversations were not read (each event file was `unrecognized`). The
    directory is one trajectory: calls paired with their observations by `action_id`, the
    terminal's framing (in `metadata`) not in the output, the SDK's `security_risk` and
    `summary` not in the arguments, the agent's message the user answered a `text` turn,
    the finish message the final one."""
    c = fix_conversation()
    d = c.write(tmp_path / "conversations")
    r = subprocess.run(["worldtrace", "import", str(d)], capture_output=True, text=True,
                       env=wt_env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unrecognized" not in r.stdout + r.stderr
    [t] = list(read_records(f"{wt_env['WORLDTRACE_STORE']}/raw/import"))
    assert validate_dict(t.to_dict()) == []
    assert (t.source.origin_format, t.source.origin_id) == ("openhands-v1", CID)
    assert t.source.origin_path == str(c.file(d, 0).resolve())
    assert (t.domain, t.agent.name, t.agent.model) == ("swe", "OpenHands", MODEL)
    assert t.task.instruction == "Fix the failing test in calc.py"
    args = {"command": "str_replace", "new_str": "a + b", "old_str": "a - b",
            "path": f"{CWD}/calc.py"}  # fmt: skip
    assert [(x.action.kind, x.action.text, x.action.name) for x in t.turns] == [
        ("command", "pytest -q", "terminal"),
        ("tool_call", f"file_editor({json.dumps(args, sort_keys=True)})", "file_editor"),
        ("command", "pytest -q", "terminal"),
        ("text", "Fixed: `add` now adds.", None),
    ]
    out = "F\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.02s"
    assert obs(t) == [
        (out, True, 1, False),
        (f"The file {CWD}/calc.py has been edited.", False, None, False),
        ("1 passed in 0.01s", False, 0, False),
        ("Thanks! Is it tested?", False, None, False),
    ]
    assert [x.observation.state_json for x in t.turns] == [json.dumps({"working_dir": CWD}), None,
                                                            json.dumps({"working_dir": CWD}), None]  # fmt: skip
    assert [x.reasoning for x in t.turns] == [
        "Start with tests.\n\nLet me run the tests.",
        "`add` subtracts.",
        None,
        None,
    ]
    assert [x.started_at.isoformat() for x in t.turns] == [
        f"2026-01-05T10:00:{n:02d}.123456+00:00" for n in (2, 4, 6, 8)
    ]
    assert t.metadata == {
        "agent_class": "Agent",
        "working_dir": CWD,
        "execution_status": "finished",
        "conversation_title": "Fix add()",
        "agent_system_prompt": "You are OpenHands agent.\n<REPOSITORY>acme/calc</REPOSITORY>",
        "final_message": "Yes, test_add covers it.",
    }
    assert [s["name"] for s in json.loads(t.system.action_space)] == ["terminal", "file_editor",
                                                                      "finish"]  # fmt: skip
    # its events directory, base_state.json or one event file names the same conversation
    for again in (d / "events", d / "base_state.json", c.file(d, 7)):
        r = subprocess.run(["worldtrace", "import", str(again)], capture_output=True, text=True,
                           env=wt_env)  # fmt: skip
        assert r.returncode == 0 and "already present" in r.stdout, r.stdout + r.stderr


def test_sdk_1_0_shapes(tmp_path):
    """1.0 wrote `ExecuteBashAction`/`ExecuteBashObservation` with the exit code only in
    `metadata`, tools in OpenAI's shape and no `parent_id`: read the same."""
    c = fix_conversation(v10=True)
    [t], problems = read(c.write(tmp_path))
    assert problems == []
    assert [x.action.text for x in t.turns][::2] == ["pytest -q", "pytest -q"]
    assert [x.observation.exit_code for x in t.turns] == [1, None, 0, None]
    assert json.loads(t.system.action_space)[0] == {
        "name": "terminal", "description": "The terminal tool.",
        "input_schema": {"type": "object", "properties": {}},
    }  # fmt: skip


def test_the_terminal_framing_is_metadata_not_output(tmp_path):
    """The SDK keeps its framing of a command in `metadata` (prefix, suffix): a timeout
    suffix makes the output so far a timeout, the history-cut prefix a cut, the interrupt
    suffix an interrupted command; its own cut of a long output (head + notice + tail,
    30,000 characters) is the head and the tail, truncated; a reset's notice is removed;
    the exit code -1 is none."""
    c = Conv()
    c.user("Run the suite")
    c.run("make test", "compiling...", metadata=waiting())
    c.run("", "still compiling", is_input=True, metadata=waiting(prefix="[Below is the output of"
                                                                  " the previous command.]\n"))  # fmt: skip
    c.run("sleep 200", "zzz", metadata=waiting(HARD), args={"timeout": 120.0})
    c.run("make test", "ok", metadata=meta(0, prefix="[Previous command outputs are truncated."
                                              " Showing the last 2 lines of the output below.]\n"))  # fmt: skip
    interrupted = "\n[The command was interrupted by user request. The process received SIGINT (Ctrl+C).]"  # fmt: skip
    c.run("yes", "y\ny", metadata=waiting(interrupted))
    head, tail = "h" * 14944, "t" * 14943
    c.run("cat big.log", head + CLIPPED + tail)
    c.run("", RESET, reset=True, metadata=waiting(""))
    c.run("pwd", f"{RESET}\n\n{CWD}", reset=True)
    c.run("C-c", "^C", 130, is_input=True, metadata=meta(130, suffix="\n[The command completed "
                                                          "with exit code 130. CTRL+C was sent.]"))  # fmt: skip
    [t], problems = read(c.write(tmp_path))
    assert problems == []
    assert [(x.action.kind, x.action.text) for x in t.turns] == [
        ("command", "make test"),
        ("keystrokes", ""),
        ("command", "sleep 200"),
        ("command", "make test"),
        ("command", "yes"),
        ("command", "cat big.log"),
        ("tool_call", 'terminal({"command": ""})'),
        ("tool_call", 'terminal({"command": "pwd"})'),
        ("keystrokes", "C-c"),
    ]
    assert obs(t) == [
        ("compiling...\n[timed out]", True, None, False),
        ("still compiling\n[timed out]", True, None, False),
        ("zzz\n[timed out]", True, None, False),
        ("ok", False, 0, True),
        ("y\ny\n[interrupted]", True, None, False),
        (f"{head}\n{tail}", False, 0, True),
        ("", False, None, False),
        (CWD, False, 0, False),
        ("^C", True, 130, False),
    ]
    assert [json.loads(x.observation.state_json or "{}") for x in t.turns][:5] == [
        {"timed_out": True}, {"timed_out": True}, {"timed_out": True}, {"working_dir": CWD},
        {"interrupted": True},
    ]  # fmt: skip


def test_text_like_the_sdks_framing_stays(tmp_path):
    """Only the SDK's templates in their place are its text: a program that prints lines
    like them, a refusal's words in a command's output (no error), a cut notice anywhere
    but where the SDK's cut puts it, an MCP `[Tool 'x' executed.]` line that is not the
    result's first part, a user message longer than the SDK's nudge are all kept."""
    c = Conv()
    c.user("Check")
    framed = ("[The command completed with exit code 0.]\n[Current working directory: /tmp]\n"
              "[Python interpreter: /usr/bin/python]\n[Command finished with exit code 0]\n"
              f"[The command timed out after 120.0 seconds. {HINT}]")  # fmt: skip
    c.run("cat notes.txt", framed)
    c.run("echo 'No previous running command to interact with.'",
          "No previous running command to interact with.")  # fmt: skip
    c.run("cat clipped.txt", "a" * 100 + CLIPPED + "b" * 100)
    notice_early = "h" * 14943 + CLIPPED + "t" * 14944
    c.run("cat big.log", notice_early)
    c.run("cat reset.txt", RESET)
    m = c.call("lookup", {"data": {"q": "x"}, "kind": "MCPToolAction"}, {"q": "x"})
    c.result(m, {"content": [text("found:"), text("[Tool 'lookup' executed.]")],
                 "is_error": False, "tool_name": "lookup", "kind": "MCPToolObservation"})  # fmt: skip
    b = c.call("browser_get_content", {"extract_links": False, "kind": "BrowserGetContentAction"})
    page = "Browser operation failed: Operation timed out after 30 seconds"  # the page says so
    c.result(b, {"content": [text(page)], "is_error": False, "kind": "BrowserObservation"})
    refusal = ("Operation 'create' is not allowed on file '/w/x.py'. Only the following files"
               " can be edited: ['/w/PLAN.md']")  # fmt: skip
    e = c.call(
        "file_editor", {"command": "view", "path": "/w/notes.md", "kind": "FileEditorAction"}
    )
    c.result(e, editor(refusal))
    c.say("Done?")
    nudge = "Your previous response was blocked by the model's content filter. Please continue."
    c.user(nudge)
    [t], problems = read(c.write(tmp_path))
    assert problems == []
    assert [x.observation.text for x in t.turns] == [
        framed,
        "No previous running command to interact with.",
        "a" * 100 + CLIPPED + "b" * 100,
        notice_early,
        RESET,
        "found:\n[Tool 'lookup' executed.]",
        page,
        refusal,
        nudge,
    ]
    assert not any(x.observation.truncated for x in t.turns)


def test_calls_the_sdk_did_not_run_or_failed_are_no_turns(tmp_path):
    """AgentErrorEvent is the SDK's own text: a call it made no action of (an unknown tool,
    arguments that fail validation) or skipped is `not_run`, one whose tool raised or was
    interrupted in flight `harness_failure`; a rejection (the user's, a hook's) and the
    terminal's refusals are `not_run`, a terminal that died under the command
    `harness_failure`; a call nothing answered is `unpaired_call`. None is a turn."""
    c = Conv()
    c.user("Go")
    u = c.call("web_search", None, {"query": "calc"})
    c.error(u, "Tool 'web_search' not found. Available: ['terminal', 'file_editor']")
    v = c.call("file_editor", None, {"command": "view"})
    c.error(v, "Error validating tool 'file_editor': 1 validation error for FileEditorAction\n"
               "path\n  Field required. Parameters provided: ['command']")  # fmt: skip
    cmd = {"command": "rm -rf build", "is_input": False, "reset": False, "kind": "TerminalAction"}
    r = c.call("terminal", cmd)
    c.reject(r)
    h = c.call("terminal", cmd)
    c.reject(h, "Blocked by policy: no rm -rf", "hook")
    s = c.call("terminal", {**cmd, "command": "ls"})
    c.error(s, "Tool call cancelled by interrupt.")
    x = c.call("terminal", {**cmd, "command": "ls", "reset": True, "is_input": True})
    c.error(x, "Error executing tool 'terminal': Cannot use reset=True with is_input=True")
    i = c.call("terminal", {**cmd, "command": "make"})
    c.error(i, "Tool call interrupted before completion. The conversation was paused.")
    busy = (f'\n[Your command "ls" is NOT executed. The previous command is still running - You'
            f" CANNOT send new commands until the previous command is completed. By setting"
            f" `is_input` to `true`, you can interact with the current process: {HINT}]")  # fmt: skip
    c.run("ls", "Downloading...", error=True, metadata=waiting(busy, "[Below is the output of the"
                                                                  " previous command.]\n"))  # fmt: skip
    c.run("ls; pwd", "Cannot execute multiple commands at once.\nPlease run each command "
          "separately OR chain them into a single command via && or ;\nProvided commands:\n"
          "(1) ls\n(2) pwd", error=True, metadata=waiting(""))  # fmt: skip
    c.run("", "No previous running command to retrieve logs from.", error=True,
          metadata=waiting(""))  # fmt: skip
    c.run("make", "[The terminal was closed while the command was running.]", error=True,
          metadata=waiting(""))  # fmt: skip
    refused = ("Refusing to run foreground terminal command with timeout=3600s.\n\nThis runtime"
               " is subject to idle cleanup after 1800s. Foreground terminal commands are capped"
               " at 90% of that threshold, currently 1620s, so commands can return control before"
               " the runtime is considered idle.\n\nFor long-running work, use a shorter timeout,"
               " omit the timeout to use the terminal soft-timeout/polling flow, or start the"
               " command in the background and poll its log file.")  # fmt: skip
    c.run("make all", refused, error=True, metadata=waiting(""), args={"timeout": 3600})
    tmux = ("The terminal session was reset because the underlying tmux server/session"
            " disappeared while running the previous command. This often happens when a command"
            " terminates the persistent shell, for example by ending with a top-level `exit` such"
            " as `exit $code`, or otherwise kills tmux. OpenHands rebuilt the terminal pool, but"
            " the interrupted command's result is not reliable and was not retried. Avoid"
            " top-level `exit` in future terminal commands; use a non-shell-exiting status check"
            ' like `test "$code" -eq 0` or conditional shell logic instead. Please rerun any'
            " needed command.\n\nOriginal tmux error: session not found: openhands")  # fmt: skip
    c.run("exit 3", tmux, error=True, metadata=waiting(""))
    c.run("echo ok", "ok")
    c.call("terminal", {**cmd, "command": "sleep 9"})
    d = c.write(tmp_path)
    [t], problems = read(d)
    assert [x.action.text for x in t.turns] == ["echo ok"]
    p = [c.file(d, n).name for n in range(len(c.events))]
    call = "OpenHands did not run the agent's call to"
    failed = "OpenHands failed to run the agent's call to"
    assert warned(problems) == [
        ("not_run", f"events/{p[2]}: {call} 'web_search' (toolu_01): the SDK answered \"Tool"
                    " 'web_search' not found. Available: ['terminal', 'file_editor']\"; no turn"),
        ("not_run", f"events/{p[4]}: {call} 'file_editor' (toolu_02): the SDK answered \"Error"
                    " validating tool 'file_editor': 1 validation error for FileEditorAction\"; "
                    "no turn"),
        ("not_run", f"events/{p[6]}: {call} 'terminal' (toolu_03): the user rejected it ('User"
                    " rejected the action'); no turn"),
        ("not_run", f"events/{p[8]}: {call} 'terminal' (toolu_04): a hook rejected it ('Blocked"
                    " by policy: no rm -rf'); no turn"),
        ("not_run", f"events/{p[10]}: {call} 'terminal' (toolu_05): the SDK answered 'Tool call"
                    " cancelled by interrupt.'; no turn"),
        ("harness_failure", f"events/{p[12]}: {failed} 'terminal' (toolu_06): the SDK answered"
                            " \"Error executing tool 'terminal': Cannot use reset=True with"
                            " is_input=True\"; no turn"),
        ("harness_failure", f"events/{p[14]}: {failed} 'terminal' (toolu_07): the SDK answered"
                            " 'Tool call interrupted before completion. The conversation was"
                            " paused.'; no turn"),
        ("not_run", f"events/{p[16]}: {call} 'terminal' (toolu_08): the previous command was"
                    " still running (the output it showed of that one is not imported); no turn"),
        ("not_run", f"events/{p[18]}: {call} 'terminal' (toolu_09): it answered 'Cannot execute"
                    " multiple commands at once.'; no turn"),
        ("not_run", f"events/{p[20]}: {call} 'terminal' (toolu_10): it answered 'No previous"
                    " running command to retrieve logs from.'; no turn"),
        ("harness_failure", f"events/{p[22]}: {failed} 'terminal' (toolu_11): it answered '[The"
                            " terminal was closed while the command was running.]'; no turn"),
        ("not_run", f"events/{p[24]}: {call} 'terminal' (toolu_12): it answered 'Refusing to"
                    " run foreground terminal command with timeout=3600s.'; no turn"),
        ("harness_failure", f"events/{p[26]}: {failed} 'terminal' (toolu_13): it answered 'The"
                            " terminal session was reset because the underlying tmux"
                            " server/session disappeared while runni...'; no turn"),
        ("unpaired_call", f"events/{p[29]}: no observation for the agent's call to 'terminal'"
                          " (toolu_15); no turn"),
    ]  # fmt: skip
    assert all(not x.fatal and x.path == str(d) for x in problems)


def test_what_is_no_turn_is_reported_or_bookkeeping(tmp_path):
    """Condensations, the SDK's messages in the user's name or the environment's, an ACP
    tool call and a kind not read are reported (`message_not_imported`), never turns or
    replies; state updates and pauses are bookkeeping; a think's thought is the next
    turn's reasoning (one no turn follows is reported); a ConversationErrorEvent is the
    outcome's error."""
    c = Conv()
    c.user("Go")
    c.add("ConversationStateUpdateEvent", "environment", key="execution_status", value="running")
    c.think("Check the tests first.")
    c.run("pytest -q", "1 passed", 0)
    c.add("Condensation", "environment", forgotten_event_ids=["a", "b"], summary="ran tests",
          llm_response_id="resp_c")  # fmt: skip
    c.add("CondensationRequest", "environment")
    c.add("CondensationSummaryEvent", "environment", summary="ran tests")
    c.say("All green. Anything else?")
    c.user("Parameter 'path' is expected to be an array.")
    c.user("Your previous response was blocked by the model's content filter. Please continue,"
           " rephrasing to avoid the flagged content.")  # fmt: skip
    c.message("environment", "You keep repeating the same action. Try something else.")
    c.user("Yes: lint it.")
    c.add("ACPToolCallEvent", "agent", tool_call_id="t1", title="Bash", status="completed")
    c.add("AskUserEvent", "agent", question="?")
    c.add("PauseEvent", "user")
    c.think("Lint next.")
    c.add("ConversationErrorEvent", "environment", code="MaxIterationsReached",
          detail="Agent reached maximum iterations limit (500).")  # fmt: skip
    d = c.write(tmp_path)
    [t], problems = read(d)
    assert [(x.action.text, x.observation.text, x.reasoning) for x in t.turns] == [
        ("pytest -q", "1 passed", "Check the tests first."),
        ("All green. Anything else?", "Yes: lint it.", None),
    ]
    assert t.outcome.error == "MaxIterationsReached: Agent reached maximum iterations limit (500)."
    p = [c.file(d, n).name for n in range(len(c.events))]
    assert warned(problems) == [
        ("message_not_imported", f"events/{p[6]}: a condensation of the agent's history (2"
                                 " event(s) forgotten with a summary); not imported"),
        ("message_not_imported", f"events/{p[8]}: a condensation summary; not imported"),
        ("message_not_imported", f"events/{p[10]}: a message the SDK wrote as the user's; not"
                                 " imported"),
        ("message_not_imported", f"events/{p[11]}: a message the SDK wrote as the user's; not"
                                 " imported"),
        ("message_not_imported", f"events/{p[12]}: a message from the environment (the SDK's"
                                 " nudge or hook feedback); not imported"),
        ("message_not_imported", f"events/{p[14]}: an ACP agent's tool call (not read); not"
                                 " imported"),
        ("message_not_imported", f"events/{p[15]}: an event of kind 'AskUserEvent' (not read);"
                                 " not imported"),
        ("message_not_imported", f"events/{p[17]}: a think call no turn follows; not imported"),
    ]  # fmt: skip


def test_a_branch_the_conversation_left_is_not_mixed_in(tmp_path):
    """`navigate_to` re-roots the tree: the conversation is the branch from base_state's
    `leaf_event_id` to the root; the events of the branch it left are reported."""
    c = Conv()
    c.user("Go")
    c.run("ls", "a.txt")
    seen = c.leaf  # the observation of `ls`
    c.run("rm a.txt", "", 0)  # the branch the user left
    c.leaf = seen  # navigate_to(it)
    c.run("cat a.txt", "hello")
    d = c.write(tmp_path)
    [t], problems = read(d)
    assert [x.action.text for x in t.turns] == ["ls", "cat a.txt"]
    assert warned(problems) == [
        ("message_not_imported", f"events/{c.file(d, 3).name} and 1 more: 2 event(s) of a"
                                 " branch the conversation left; not imported"),
    ]  # fmt: skip
    # a leaf in base_state that no event read gives: the last event's branch
    state = c.state(leaf_event_id="00000000-0000-4000-8000-00000000dead")
    (d / "base_state.json").write_text(json.dumps(state))
    [t], _ = read(d)
    assert [x.action.text for x in t.turns] == ["ls", "cat a.txt"]


def test_browser_mcp_and_a_planning_editor(tmp_path):
    """A browser call is a tool call with its text; its screenshot is `non_text_part`, the
    SDK's timeout of a browser operation a timeout; an MCP result's leading `[Tool 'T'
    executed.]` part is removed; the planning editor's refusal is `not_run`. Most calls
    browse: web."""
    c = Conv()
    c.user("Find the docs page")
    nav = c.call("browser_navigate", {"url": "https://example.com", "new_tab": False,
                                      "kind": "BrowserNavigateAction"})  # fmt: skip
    c.result(nav, {"content": [text("Navigated to https://example.com")], "is_error": False,
                   "screenshot_data": "iVBORw0KGgo=", "kind": "BrowserObservation"})  # fmt: skip
    click = c.call("browser_click", {"index": 3, "new_tab": False, "kind": "BrowserClickAction"})
    c.result(click, {"content": [text("Browser operation failed: Operation timed out after 30"
                                      " seconds")], "is_error": True,
                     "kind": "BrowserObservation"})  # fmt: skip
    m = c.call("fetch_docs", {"data": {"topic": "api"}, "kind": "MCPToolAction"},
               {"topic": "api", "summary": "fetch"})  # fmt: skip
    c.result(m, {"content": [text("[Tool 'fetch_docs' executed.]"), text("API docs")],
                 "is_error": False, "tool_name": "fetch_docs", "kind": "MCPToolObservation"})  # fmt: skip
    plan = {"command": "create", "path": "/workspace/x.py", "file_text": "x",
            "kind": "PlanningFileEditorAction"}  # fmt: skip
    e = c.call("planning_file_editor", plan)
    c.result(e, editor("Operation 'create' is not allowed on file '/workspace/x.py'. Only the"
                       " following files can be edited: ['/workspace/PLAN.md']", "create", True))  # fmt: skip
    d = c.write(tmp_path)
    [t], problems = read(d)
    assert t.domain == "web"
    assert [x.action.text for x in t.turns] == [
        'browser_navigate({"new_tab": false, "url": "https://example.com"})',
        'browser_click({"index": 3, "new_tab": false})',
        'fetch_docs({"topic": "api"})',
    ]
    assert obs(t) == [
        ("Navigated to https://example.com", False, None, False),
        ("[timed out]", True, None, False),
        ("API docs", False, None, False),
    ]
    p = [c.file(d, n).name for n in range(len(c.events))]
    assert warned(problems) == [
        ("not_run", f"events/{p[8]}: OpenHands did not run the agent's call to"
                    " 'planning_file_editor' (toolu_04): it answered \"Operation 'create' is"
                    " not allowed on file '/workspace/x.py'. Only the following files can be"
                    " edit...\"; no turn"),
        ("non_text_part", f"turn 0 observation (events/{p[2]}.observation.screenshot_data): 1"
                          " image part not imported"),
    ]  # fmt: skip


def test_a_malformed_event_is_named_and_costs_only_itself(tmp_path):
    """An event of a shape the SDK does not write is `invalid`, naming its file and the
    field; a file that is not JSON is the import's `invalid_json`; the indices no event
    fills are `missing_event`; the rest of the conversation is imported."""
    c = fix_conversation()
    d = c.write(tmp_path / "conversations")
    bad = dict(c.events[4], action={**c.events[4]["action"], "path": 5})  # not checked: kept
    c.file(d, 4).write_text(json.dumps(bad))
    run = dict(c.events[6], action={**c.events[6]["action"], "command": ["pytest"]})
    c.file(d, 6).write_text(json.dumps(run))
    c.file(d, 3).write_text(json.dumps(c.events[3])[:50])  # cut short
    other = dict(c.events[8], id="00000000-0000-4000-8000-000000000bad")
    c.file(d, 8).write_text(json.dumps(other))
    r, [t] = imported([d], tmp_path / "out")
    assert r.imported["openhands-v1"] == 1
    got = sorted((p.path, p.kind, p.fatal, p.message) for p in r.problems)
    cut = next(g for g in got if g[1] == "invalid_json")
    assert cut[:3] == (str(c.file(d, 3)), "invalid_json", True)
    assert "unterminated string" in cut[3]
    assert [g for g in got if g is not cut] == [
        (str(d), "message_not_imported", False, f"events/{c.file(d, 7).name}: a ObservationEvent"
                                                " that answers no call of the agent; not imported"),
        (str(d), "message_not_imported", False, f"events/{c.file(d, 9).name}: a user message"
                                                " that answers no agent message; not imported"),
        (str(d), "unpaired_call", False, f"events/{c.file(d, 2).name}: no observation for the"
                                         " agent's call to 'terminal' (toolu_01); no turn"),
        (str(d / "events"), "missing_event", False, "event 3 of 0-11 is missing (no event file the"
                                                    " import reads); the conversation is imported"
                                                    " without it"),
        (str(c.file(d, 6)), "invalid", True, 'action.command: expected a string, got ["pytest"]'),
        (str(c.file(d, 8)), "invalid", True, f"id: expected '{c.events[8]['id']}' (the id in its"
                                              ' file name), got "00000000-0000-4000-8000-000000000bad"'),
    ]  # fmt: skip
    # the first command's observation (3) is lost: that call is no turn; the second's
    # action (6): its observation (7) answers nothing; the agent's message (8): the user's
    # reply (9) answers nothing
    assert [x.action.kind for x in t.turns] == ["tool_call"]
    assert t.metadata["final_message"] == "Yes, test_add covers it."


def test_a_walked_conversation_is_read_once_at_its_entry(tmp_path):
    """Found: a directory walk read every event file of a V1 conversation twice, once as
    a file of the walk (to find it adds nothing) and once by the conversation (3,000
    events: 0.57 s, against 0.25 s for the conversation named at one of its files). The
    walk now reads the conversation once, at its entry; the files it cannot read are
    reported by the conversation, as reading them alone reports them."""
    c = fix_conversation()
    d = c.write(tmp_path / "conversations")
    c.file(d, 3).write_text(json.dumps(c.events[3])[:50])  # cut short
    c.file(d, 8).write_text(json.dumps({"note": "not an event"}))
    r, [_] = imported([tmp_path / "conversations"], tmp_path / "out")
    assert r.files == 1 and r.imported["openhands-v1"] == 1
    got = {(p.path, p.kind) for p in r.problems}
    assert (str(c.file(d, 3)), "invalid_json") in got
    assert (str(c.file(d, 8)), "invalid") in got
    [bad] = [p for p in r.problems if p.path == str(c.file(d, 8))]
    assert bad.message == "holds no event (no `kind`)"
    named, _ = imported([c.file(d, 5)], tmp_path / "o2")  # named alone: the same report
    assert sorted((p.path, p.kind, p.message) for p in named.problems) == sorted(
        (p.path, p.kind, p.message) for p in r.problems
    )


def test_v0_and_v1_conversations_in_one_directory(tmp_path):
    """A directory of OpenHands V0 file-store sessions (`sessions/<sid>/events/<id>.json`)
    and V1 conversations: each is its own format's trajectory, no file unrecognized (the
    V1 conversation's base_state.json and TASKS.json add nothing)."""
    root = tmp_path / "openhands-state"
    write_session(root, "v0-sid", v0_events(["ls", "pwd", "whoami"], task="old one"))
    d = fix_conversation().write(root / "v1_conversations")
    (d / "TASKS.json").write_text(json.dumps([{"title": "fix", "notes": "", "status": "done"}]))
    two = Conv(cid="0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f")
    two.user("Say hi")
    two.run("echo hi", "hi")
    two.write(root / "v1_conversations", state=False)  # no base_state.json: the dir's name
    r, ts = imported([root], tmp_path / "out")
    assert (dict(r.imported), dict(r.errors), dict(r.warnings)) == (
        {"openhands": 1, "openhands-v1": 2},
        {},
        {},
    ), r.problems
    assert [(t.source.origin_format, t.source.origin_id, t.task.instruction) for t in ts] == [
        ("openhands-v1", "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f", "Say hi"),
        ("openhands-v1", CID, "Fix the failing test in calc.py"),
        ("openhands", "v0-sid", "old one"),
    ]
    assert ts[0].agent.model is None and ts[0].metadata == {}


def test_one_event_file_named_alone_imports_its_conversation(tmp_path):
    """A file of a conversation named on its own (a later event file, base_state.json)
    stands for the conversation: it imports all of it, once, and says nothing."""
    c = fix_conversation()
    d = c.write(tmp_path / "conversations")
    r, [t] = imported([c.file(d, 9)], tmp_path / "out")
    assert r.imported["openhands-v1"] == 1 and not r.errors and not r.warnings, r.problems
    assert len(t.turns) == 4 and t.source.origin_path == str(c.file(d, 0).resolve())
    r, ts = imported([d / "base_state.json", c.file(d, 3), c.file(d, 0)], tmp_path / "o2")
    assert r.imported["openhands-v1"] == 1 and len(ts) == 1 and not r.problems


def test_format_openhands_v1_on_another_file_is_unrecognized(tmp_path):
    f = tmp_path / "event-00000-6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.json"
    f.write_text(json.dumps(fix_conversation().events[0]))  # not under events/
    r = import_paths([f], tmp_path / "out", ImportConfig(format="openhands-v1", workers=1))
    assert [(p.kind, p.message) for p in r.problems] == [
        ("unrecognized", "not a file of an OpenHands V1 conversation")
    ]


def test_reasoning_replies_to_finish_and_images(tmp_path):
    """Reasoning is the call's `reasoning_content`, else its thinking blocks, else a
    Responses reasoning summary, then its thought; an agent message's own reasoning goes
    with its text turn; a finish message the user answers is a `text` turn; a tool's own
    `summary` argument is kept; images (a user's, a tool's) are `non_text_part`; a second
    file of one index is `invalid`."""
    c = Conv()
    image = {"cache_prompt": False, "type": "image", "image_urls": ["data:image/png;base64,iVB="]}
    c.user([text("What is on this screenshot?"), image])
    a = c.run("ls", "shot.png")
    a["thinking_blocks"] = [{"type": "thinking", "thinking": "List first.", "signature": "Eq"}]
    b = c.run("file shot.png", "shot.png: PNG image data")
    b["responses_reasoning_item"] = {"id": "rs_1", "summary": ["Check the type."]}
    j = c.call("jira_create", {"data": {"summary": "Bug", "body": "x"}, "kind": "MCPToolAction"},
               {"summary": "Bug", "body": "x", "security_risk": "LOW"})  # fmt: skip
    c.result(j, {"content": [text("[Tool 'jira_create' executed.]"), text("JIRA-1"), image],
                 "is_error": False, "tool_name": "jira_create", "kind": "MCPToolObservation"})  # fmt: skip
    c.say("A login form.", reasoning="It shows fields.")
    c.user("Thanks")
    c.finish("Filed JIRA-1.")
    c.user("Great, close it.")
    d = c.write(tmp_path)
    dup = dict(c.events[5], id="00000000-0000-4000-8000-00000000beef")
    dup_file = d / "events" / f"event-00005-{dup['id']}.json"
    dup_file.write_text(json.dumps(dup))
    [t], problems = read(d)
    assert t.task.instruction == "What is on this screenshot?"
    assert [(x.action.text, x.observation.text, x.reasoning) for x in t.turns] == [
        ("ls", "shot.png", "List first."),
        ("file shot.png", "shot.png: PNG image data", "Check the type."),
        ('jira_create({"body": "x", "summary": "Bug"})', "JIRA-1", None),
        ("A login form.", "Thanks", "It shows fields."),
        ("Filed JIRA-1.", "Great, close it.", None),
    ]
    assert t.metadata.get("final_message") is None
    assert sorted(warned(problems)) == [
        ("invalid", "a second event file of index 5"),
        ("non_text_part", f"task (events/{c.file(d, 0).name}.llm_message.content): 1 image part"
                          " not imported"),
        ("non_text_part", f"turn 2 observation (events/{c.file(d, 6).name}.observation.content):"
                          " 1 image part not imported"),
    ]  # fmt: skip
    assert [p.path for p in problems if p.kind == "invalid"] == [str(dup_file)]


def test_domain_option_is_passed_to_the_conversation(tmp_path):
    d = fix_conversation().write(tmp_path / "conversations")
    cfg = ImportConfig(domain="terminal", workers=1)
    assert import_paths([d], tmp_path / "out", cfg).imported["openhands-v1"] == 1
    [t] = list(read_records(tmp_path / "out"))
    assert t.domain == "terminal"
