"""Results of harbor's ATIF for OpenCode, Qwen Code, the OpenHands SDK and goose, read without
those agents' own text (docs/importers.md, "Harness text"); called by `atif`.

harbor (ayush-or/harbor, src/harbor/agents/installed/) keeps each agent's tool output as
the agent wrote it for its model:

- `opencode` (opencode.py `_convert_events_to_trajectory`, reading `opencode run
  --format=json`): a tool part's `state.output`; a part in state `error` (the tool threw:
  OpenCode's refusal, a permission rule, an abort, a bad argument, the tool's own error)
  has no `output`, so harbor writes no result: no turn, `harness_failure`. OpenCode's
  bash tool (anomalyco/opencode packages/opencode/src/tool/bash.ts, read at 00376c2 and
  f6bfcd2, PrimeIntellect-ai/opencode @352c6f0, and the later Effect shell tool) adds to
  the output, by version: `\\n\\n(Output was truncated due to length limit)` after the
  first 30,000 characters, `\\n\\n(Command timed out after N ms)`, `\\n\\n(Command was
  aborted)`; later a `<bash_metadata>` (since the shell tool `<shell_metadata>`) block of
  lines `bash tool truncated output as it exceeded N char limit` (after the first N),
  `bash tool terminated command after exceeding timeout N ms` (once misspelt
  `commmand`; later `shell tool ...` + `. If this command is expected to take longer
  ...`), `User aborted the command`, `Command output interrupted before completion; no
  explicit user cancel was recorded`; the shell tool's `(no output)` for an empty output
  and `...output truncated...\\n\\nFull output saved to: F\\n\\n` before the tail it kept.
  Every tool's result may be cut by `Truncate.output` (tool/truncation.ts @2e0f232):
  `\\n\\n...N bytes|lines truncated...\\n\\nThe tool call succeeded but the output was
  truncated. Full output saved to: F\\n<hint>` after the head (or that notice before the
  tail). The bash tool keeps no exit code in its output (harbor drops `metadata.exit`).
- `qwen-code` (qwen_code.py: `functionResponse.response.output`, "" for an error-only
  response): Qwen Code's shell tool (QwenLM/qwen-code packages/core/src/tools/shell.ts)
  writes Gemini CLI's older layout (`Command:`, `Directory:`, `Output:`, `Error:`, `Exit
  Code:`, `Signal:`, `Process Group PGID:`, `(none)`/`(empty)`), read by
  `gemini_cli.tool_answer`, as are its other tools; its own timeout template (`Command
  timed out after Nms before it could complete. ...`) is a timeout, the long-run
  advisory it appends (`\\n\\nNote: this foreground command ran for Ns. Next time ...`) is
  removed. Its own cut (utils/truncation.ts `truncateAndSaveToFile`: Gemini CLI's older
  notice, then head, `\\n\\n---\\n... [CONTENT TRUNCATED] ...\\n---\\n\\n`, tail) is
  truncation, the head and tail shown, read in the shell framing they hold.
- `openhands-sdk` (openhands_sdk_runner.py `build_trajectory`: an ObservationEvent's
  `observation.content` text parts joined with "\\n"; not its `metadata`, `exit_code`,
  `is_error`): a terminal result is the output alone (the SDK keeps its framing in
  `metadata`), read with `openhands_v1`'s templates: the `maybe_truncate` cut, the
  terminal's refusals (`not_run`) and failures (`harness_failure`), a reset's notice. A
  call the SDK answered with an AgentErrorEvent or a rejection gets no result from harbor
  (only ObservationEvents are kept): no turn, `unpaired_call`, as the V1 importer's
  unanswered calls. harbor drops the exit code and the timeout suffix: none are known.
- `goose` (goose.py `_convert_goose_stream_json_to_atif`, @42f02fe: a toolResponse's
  `toolResult.value.content` text parts joined with "\\n"; none for a tool error, whose
  `value` has no `content`): the developer shell tool (`shell`, `developer__shell`; block/goose
  crates/goose/src/agents/platform_extensions/developer/shell.rs @0edf230) writes the output,
  `(no output)` for none, or its last 50 lines then `\\n\\n[Output exceeded 2000 line limit
  (N lines total). Full output saved to F. Read it ...]` (or `50000 byte limit (N bytes
  total)`), then `\\n\\nCommand timed out after N seconds` or
  `\\n\\nCommand exited with code N`; it answers `Command cannot be empty.` (not run) or
  `Failed to spawn shell command: E` and its other own failures (`harness_failure`) alone.
  An empty result is goose's error harbor kept no text of: no turn, `harness_failure`.
  Older goose-mcp shells (two audience parts, which harbor joins), other versions' cut
  notices and the plain-text log fallback are kept as they are.

Only exact templates, whole and in their place, are read; anything else is kept.
"""

from __future__ import annotations

import re
from typing import Any

from worldtrace.schemas import Action, Observation
from worldtrace.schemas.actions import arguments_of
from worldtrace.schemas.validate import parse_json

from ..actions import keystrokes
from . import gemini_cli, openhands_v1
from .common import interrupted, kept_ends, shell_or_tool, shown, timed_out, tool_action

OPENCODE = "opencode"
QWEN_CODE = "qwen-code"
OPENHANDS_SDK = "openhands-sdk"
GOOSE = "goose"
AGENTS = frozenset({OPENCODE, QWEN_CODE, OPENHANDS_SDK, GOOSE})
"""`agent.name` of the agents read here."""

NoTurn = tuple[str, str]
"""(warning kind, why) for a call that makes no turn."""

# -- OpenCode ------------------------------------------------------------------------------

OPENCODE_SHELLS = frozenset({"bash"})
OPENCODE_LIMIT = 30000
"""bash.ts MAX_OUTPUT_LENGTH of the versions that cut the output themselves."""
_HINTS = (
    "Use Grep to search the full content or Read with offset/limit to view specific sections.",
    "Use the Task tool to have explore agent process this file with Grep and Read (with"
    " offset/limit). Do NOT read the full file yourself - delegate to save context.",
)
_NOTICE = (
    r"\.\.\.\d+ (?:bytes|lines) truncated\.\.\.\n\nThe tool call succeeded but the output was"
    r" truncated\. Full output saved to: [^\n]+\n(?:" + "|".join(map(re.escape, _HINTS)) + ")"
)
_CUT_HEAD = re.compile(r"(?P<out>.*)\n\n" + _NOTICE, re.S)
_CUT_TAIL = re.compile(_NOTICE + r"\n\n(?P<out>.*)", re.S)
"""Truncate.output: the head kept, then the notice (its default), or the notice, then the
tail."""
_SAVED = re.compile(r"\.\.\.output truncated\.\.\.\n\nFull output saved to: [^\n]+\n\n")
"""The shell tool's own cut: the notice, then the tail it kept."""
_META = re.compile(r"\n\n<(?P<tag>bash|shell)_metadata>\n(?P<lines>[^<]+)\n</(?P=tag)_metadata>\Z")
"""The block the bash (shell) tool appends; its lines hold no `<`, so only the last block."""
_LIMITED = re.compile(r"(?:bash|shell) tool truncated output as it exceeded (?P<n>\d+) char limit")
_EXPIRED = re.compile(
    r"(?:bash|shell) tool terminated comm?mand after exceeding timeout \d+ ms(?:\. If this"
    r" command is expected to take longer and is not waiting for interactive input, retry"
    r" with a larger timeout value in milliseconds\.)?"
)
_ABORTED = (
    "User aborted the command",
    "Command output interrupted before completion; no explicit user cancel was recorded",
)
_OLD = re.compile(
    r"(?P<cut>\n\n\(Output was truncated due to length limit\))?"
    r"(?P<expired>\n\n\(Command timed out after \d+ ms\))?(?P<aborted>\n\n\(Command was aborted\))?"
)
"""The first bash tool's notices, in the order it appends them."""
NO_OUTPUT = "(no output)"


def _u16(text: str) -> int:
    """Length in UTF-16 code units, as OpenCode (JavaScript) counts and cuts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _truncate_notice(text: str) -> tuple[str, bool]:
    """`text` without `Truncate.output`'s notice (any OpenCode tool), and whether it had one."""
    m = _CUT_HEAD.fullmatch(text) or _CUT_TAIL.fullmatch(text)
    return (m["out"], True) if m else (text, False)


def opencode_answer(name: str, text: str | None) -> Observation | NoTurn:
    """An OpenCode tool's result as harbor kept it (`text` None: no result, the tool
    ended in an error) without OpenCode's own text (module doc)."""
    if text is None:
        return (
            "harness_failure",
            "no result kept: OpenCode's tool ended in an error (a refusal, a permission rule,"
            " an abort or the tool's own error), which harbor's conversion leaves out",
        )
    text, cut = _truncate_notice(text)
    if name not in OPENCODE_SHELLS:
        return Observation(text, truncated=cut)
    expired = aborted = False
    meta = _META.search(text)
    if meta:
        lines = meta["lines"].split("\n")
        out = text[: meta.start()]
        limited = [m for x in lines if (m := _LIMITED.fullmatch(x))]
        known = all(_LIMITED.fullmatch(x) or _EXPIRED.fullmatch(x) or x in _ABORTED for x in lines)
        if not known or any(_u16(out) != int(m["n"]) for m in limited):
            return Observation(text, truncated=cut)  # not the tool's block: the program's
        text, cut = out, cut or bool(limited)
        expired = any(_EXPIRED.fullmatch(x) for x in lines)
        aborted = any(x in _ABORTED for x in lines)
    else:
        old = next((m for m in _OLD.finditer(text) if m.end() == len(text) and m.group()), None)
        if old and (not old["cut"] or _u16(text[: old.start()]) == OPENCODE_LIMIT):
            text, cut = text[: old.start()], cut or bool(old["cut"])
            expired, aborted = bool(old["expired"]), bool(old["aborted"])
    if (saved := _SAVED.match(text)) is not None:
        text, cut = text[saved.end() :], True
    text = "" if text == NO_OUTPUT else text
    if expired:
        return timed_out(text, truncated=cut)
    if aborted:
        return interrupted(text, truncated=cut)
    return Observation(text, truncated=cut)


# -- Qwen Code -----------------------------------------------------------------------------

_QWEN_TIMEOUT = re.compile(
    r"Command timed out after \d+ms before it could complete\.(?: Below is the output before"
    r" it timed out:\n(?P<out>.*)| There was no output before it timed out\.)",
    re.S,
)
_QWEN_LONG_RUN = re.compile(
    r"\n\nNote: this foreground command ran for \d+s\. Next time you run a similar"
    r" long-running process \(build watchers, dev servers, soak tests, polling loops\), pass"
    r" `is_background: true` so the agent isn't blocked while the command runs\. \(This is"
    r" forward-looking guidance for FUTURE invocations — do NOT re-run the command that just"
    r" completed; for stateful operations like deploys, migrations, or git push, that would"
    r" cause double side effects\.\) The output of background runs stays inspectable via"
    r" /tasks \(text, any mode\) or the on-disk output file; in interactive mode the"
    r" Background tasks dialog also has a per-entry detail view \+ live updates\.\Z"
)
"""shell.ts buildLongRunningForegroundHint, appended to a foreground command that ran long."""
QWEN_CUT_MARK = "\n\n---\n... [CONTENT TRUNCATED] ...\n---\n\n"
"""Qwen Code's cut of a long tool output (packages/core/src/utils/truncation.ts
`truncateAndSaveToFile`), under Gemini CLI's older notice (`Tool output was too large and
has been truncated. ... Truncated part of the output:`): head, separator, tail; the
separator ends the text when only the head is kept, starts it when only the tail is."""


def qwen_answer(name: str, args: Any, text: str) -> Observation | NoTurn:
    """A Qwen Code tool's `output` as harbor kept it, read as Gemini CLI's (its fork's)
    with Qwen Code's own timeout and long-run advisory (module doc)."""
    if name == gemini_cli.SHELL:
        text = _QWEN_LONG_RUN.sub("", text)
        if (m := _QWEN_TIMEOUT.fullmatch(text)) is not None:
            return timed_out(m["out"] or "")
    return gemini_cli.tool_answer(name, args, text, QWEN_CUT_MARK)


# -- OpenHands SDK -------------------------------------------------------------------------

SDK_TERMINALS = frozenset({"terminal", "execute_bash"})
"""TerminalTool's name (1.0: execute_bash)."""


def openhands_sdk_answer(args: Any, name: str, text: str | None) -> Observation | NoTurn:
    """An OpenHands SDK observation's `content` as harbor kept it (`text` None: no result)
    without the SDK's own text (module doc)."""
    if text is None:
        return (
            "unpaired_call",
            "no result: harbor keeps only the SDK's ObservationEvents (not its errors or a"
            " rejection), or the run ended before the call was answered",
        )
    if name not in SDK_TERMINALS:
        return Observation(text)
    if openhands_v1.TERMINAL_NOT_RUN.fullmatch(text):
        return "not_run", f"the SDK's terminal answered {shown(text)}"
    if openhands_v1.TERMINAL_FAILED.fullmatch(text):
        return "harness_failure", f"the SDK's terminal answered {shown(text)}"
    if isinstance(args, dict) and args.get("reset") in (True, "true"):
        notice = openhands_v1.RESET_NOTICE
        text = "" if text == notice else text.removeprefix(notice + "\n\n")
    head, cut = openhands_v1.CMD_HEAD, openhands_v1.CUT_NOTICE
    if len(text) == openhands_v1.CMD_CUT and text.startswith(cut, head):
        return Observation(kept_ends(text[:head], text[head + len(cut) :]), truncated=True)
    return Observation(text)


# -- goose -------------------------------------------------------------------------------

GOOSE_SHELLS = frozenset({"shell", "developer__shell"})
"""The developer extension's shell tool, as goose names it to the model (prefixed or not)."""
GOOSE_PREVIEW = 50
GOOSE_LINES, GOOSE_BYTES = 2000, 50000
"""shell.rs OUTPUT_PREVIEW_LINES, OUTPUT_LIMIT_LINES, OUTPUT_LIMIT_BYTES."""
_GOOSE_END = re.compile(
    r"(?P<body>.*?)(?:\n\nCommand timed out after \d+ seconds"
    r"|\n\nCommand exited with code (?P<code>-?\d+))?",
    re.S,
)
"""The tool's suffix: a timeout (no exit code then) or a non-zero exit code."""
_GOOSE_CUT = re.compile(
    r"(?P<out>.*)\n\n\[Output exceeded (?:2000 line limit \((?P<lines>\d+) lines total\)"
    r"|50000 byte limit \((?P<bytes>\d+) bytes total\))\. Full output saved to [^\n]+\."
    r" Read it with shell commands like `head`, `tail`, or `sed -n '100,200p'` up to 2000"
    r" lines at a time\.\]",
    re.S,
)
"""render_output's cut: the last lines, then the notice (the limits are the constants)."""
_GOOSE_NOT_RUN = re.compile(r"Command cannot be empty\.")
_GOOSE_FAILED = re.compile(
    r"(?:Failed to spawn shell command|Failed waiting on shell command|Failed to collect shell"
    r" output|Failed to create temp file|Failed to persist temp file|Failed to write output"
    r" buffer|Lock poisoned): [^\n]+"
)
"""The tool's own failures, answered alone (error_result)."""


def _goose_cut(text: str) -> tuple[str, bool] | None:
    """(the lines shown, whether some are missing) of render_output's cut, else None."""
    m = _GOOSE_CUT.fullmatch(text)
    if m is None:
        return None
    out = m["out"]
    if m["lines"] is not None:  # the last 50 of more than 2000 lines
        ok = int(m["lines"]) > GOOSE_LINES and out.count("\n") == GOOSE_PREVIEW - 1
        return (out, True) if ok else None
    total, shown_bytes = int(m["bytes"]), len(out.encode())
    ok = total > GOOSE_BYTES and out.count("\n") < GOOSE_PREVIEW and shown_bytes <= total
    return (out, shown_bytes < total) if ok else None


def goose_answer(text: str) -> Observation | NoTurn:
    """goose's shell tool's result as harbor kept it, without goose's own text (module
    doc)."""
    if text == "":
        return (
            "harness_failure",
            "no result kept: goose answered with an error, whose text harbor's conversion"
            " leaves out",
        )
    if _GOOSE_NOT_RUN.fullmatch(text):
        return "not_run", f"goose's shell tool answered {shown(text)}"
    if _GOOSE_FAILED.fullmatch(text):
        return "harness_failure", f"goose's shell tool answered {shown(text)}"
    m = _GOOSE_END.fullmatch(text)
    body = m["body"] if m is not None else text
    if m is not None and m["code"] is not None and int(m["code"]) == 0:
        body = text  # the tool writes no line for 0: not its suffix
    cut = _goose_cut(body)
    out, truncated = cut if cut is not None else ("" if body == NO_OUTPUT else body, False)
    if body == text:
        return Observation(out, truncated=truncated)
    if m["code"] is None:
        return timed_out(out, truncated=truncated)
    return Observation(out, is_error=True, exit_code=int(m["code"]), truncated=truncated)


# -- the agents ----------------------------------------------------------------------------


def answer(agent: str, name: Any, args: Any, text: str | None) -> Observation | NoTurn | None:
    """The result of `agent`'s call `name(args)`, `text` as harbor kept it (None: no
    result); None when harbor's text is read as ATIF (a Qwen Code call with no result)."""
    if isinstance(args, str):  # ATIF allows the object as the JSON string
        try:
            args = parse_json(args)
        except ValueError:  # TooDeep too (`action` refuses it, naming the field)
            args = {}
    if agent == OPENCODE:
        return opencode_answer(name, text)
    if agent == OPENHANDS_SDK:
        return openhands_sdk_answer(args, name, text)
    if agent == GOOSE:
        return None if text is None or name not in GOOSE_SHELLS else goose_answer(text)
    return None if text is None else qwen_answer(name, args, text)


def action(agent: str, name: str, args: Any, place: str) -> Action:
    """The action `agent`'s call is: its shell tool (goose's too) with a `command` string
    a `command` (an OpenHands SDK terminal's input to the running command: `keystrokes`;
    its reset: a tool call), any other call the tool call."""
    if agent == QWEN_CODE:
        return gemini_cli.call_action(name, args, place)
    if agent != OPENHANDS_SDK:
        shells = OPENCODE_SHELLS if agent == OPENCODE else GOOSE_SHELLS
        return shell_or_tool(name, args, place, shells)
    call = tool_action(name, args, place)
    a = arguments_of(call)
    command = a.get("command")
    if name not in SDK_TERMINALS or not isinstance(command, str):
        return call
    if a.get("reset") in (True, "true"):
        return call
    if a.get("is_input") in (True, "true"):
        return keystrokes(command)
    return Action("command", command, name=name)
