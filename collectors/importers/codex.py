"""OpenAI Codex CLI session rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`,
one JSON line per item, read as one file (a session), not line by line.

Two layouts (codex-rs, openai/codex). Since about 0.31 every line is a `RolloutLine`
`{timestamp, type, payload}`, `type` one of `session_meta` (`{id, timestamp, cwd,
originator, cli_version, instructions, source, model_provider, base_instructions: {text},
git: {commit_hash, branch, repository_url}}`), `response_item` (a Responses API item, as
the model saw it), `event_msg` (Codex's events: `user_message`, `agent_message`,
`agent_reasoning`, `token_count`, ..., and in some versions `exec_command_end` /
`patch_apply_end` / `mcp_tool_call_end`), `turn_context` (`{cwd, approval_policy,
sandbox_policy, model, ...}`) or `compacted` (`{message, replacement_history}`). Before,
the first line was a bare session header `{id, timestamp, instructions, git}`, then bare
response items and `{record_type: "state"}` markers. The TypeScript codex-cli (before
codex-rs) wrote one JSON document per session, `rollout-<date>-<id>.json`: `{session:
{timestamp, id, instructions[, model, provider, lastResponseId]}, items: [response
items]}` (`detect`, `parse_document`): its items are read as a rollout's response items,
each named `items[N]`, and its own answers (`aborted`, an empty output with no metadata,
`no function found`, `invalid arguments: ...`) are no turn (`_typescript_refused`).

One trajectory per rollout, origin id the session's id. The conversation is the
response items in file order; `event_msg` messages repeat them (not doubled: one that
no response item holds is reported, `message_not_imported`). A rollback
(`event_msg` `thread_rolled_back {num_turns}`, persisted since codex-rs added
`Op::ThreadRollback`) takes the last N user turns out of the conversation as Codex's
`drop_last_n_user_turns` does (from the Nth last user message that is not Codex's
context or a `!` command, to the rollback; all user turns when N is more): those items
make no turn, one `message_not_imported` per rollback names their lines (as a Claude
Code branch the conversation left). `/undo` (`undo_completed {success: true}`,
tasks/undo.rs) restores the files to a ghost snapshot and keeps the conversation: the
turns stay, metadata `undo_before_turns` lists the index of the turn after each. A
`compacted` line's `replacement_history` is the history Codex went on with (its context,
copies of earlier user messages - the oldest kept one maybe cut - and its summary, or the
server's compaction item): the rollout holds those messages and calls where they
happened, so it is not read again (no doubled turn); it is reported once with the
summary, and a message or call in it that no line holds is named
(`payload.replacement_history[i]`).

Actions: `function_call` `shell` / `container.exec` `{command: [argv], workdir,
timeout_ms}`, `shell_command` `{command: "line"}` and `local_shell_call` `{action:
{command: [argv]}}` are `command` actions (`bash -lc X` is X, other argv
shell-quoted); `["apply_patch", patch]` through the shell, and every other tool
(`custom_tool_call` `apply_patch` with its patch text, `update_plan`, MCP tools) a tool
call `name(<arguments JSON>)` (a free-form input is `{"_raw": text}`); unified exec and
MCP below. The observation is the `function_call_output` / `custom_tool_call_output` with
the call's `call_id`: for a command the `exec_command_end` event's own output and exit
code when the rollout kept it, else the output without Codex's framing (`_Reader`):
the structured `{"output", "metadata": {"exit_code"}}` JSON or the free-form `Exit code:
N\\nWall time: S seconds\\n[Total output lines: M\\n]Output:\\n...`; its cuts
(`[... omitted K of M lines ...]`, `[... output truncated to fit N bytes ...]`, `…N
tokens truncated…`, only under the `Total output lines` header that says it cut; the
older `[Output truncated after N lines: ...]`) are `observation.truncated` with the text
shown; `command timed out after N milliseconds` is a timeout (`common.timed_out`). What
Codex answered itself is no turn: the user's or the policy's rejection (`exec command
rejected by user`, `patch rejected by user`, `exec command rejected: ...`), an
interrupted call (`aborted`, `aborted by user ...`), arguments it could not read, an
unknown tool (`not_run`); a run it failed to start or whose sandbox failure it reports
without the output (`execution error: ...`, `failed in sandbox ... with execution
error: ...` other than a denial): `harness_failure`. A command the sandbox let run and
that failed (`... sandbox denied exec error, exit code: N, stdout: S, stderr: E`) is an
error turn with S + E and N. A call nothing answers is no turn (`unpaired_call`).

Unified exec (codex-rs `unified_exec`; read: core/src/tools/handlers/unified_exec.rs
and its later ExecCommandToolOutput::response_text in tools/context.rs,
core/src/unified_exec/{mod,errors,session_manager,process_manager}.rs,
utils/output-truncation formatted_truncate_text, core/tests/suite/unified_exec.rs's
parse_unified_exec_output; 0.4x-0.5x and later). `exec_command {cmd, workdir, shell,
login, tty, yield_time_ms, max_output_tokens, ...}` runs `cmd` in a terminal session and
answers after `yield_time_ms`: a `command` action (`cmd`, as the other shell tools).
`write_stdin {session_id, chars, yield_time_ms}` writes to a session that runs on: a
`keystrokes` action (the nearest kind: what the terminal sandbox and OpenHands' `is_input`
send to a running process; text `chars`, arguments `{keystrokes, session_id, duration:
yield_time_ms / 1000}`). One with empty `chars` is a poll: a turn of its own with empty
keystrokes, whose observation is what the process printed meanwhile - waiting is the
agent's action and the new output the environment's answer; appended to the command's
observation it would show output the agent had not seen when it chose its next step.
The answer's framing (`[Chunk ID: C\n]Wall time: S seconds\n[Process exited with code
N\n][Process running with session ID N\n][Original token count: T\n]Output:\n...`;
`Process running with id N` in the short-lived `process_id` variant) is removed: the
output is the observation, with exit code N (non-zero: error) when the process exited;
one still running is its output so far, `state_json {"session_id": N}`. Its cut is
`truncated` with the head and tail shown, only where Codex puts it: under
`formatted_truncate_text`'s header (`[Warning: truncated output (original token count:
T)\n]Total output lines: M\n\n`) at the top of the output or of the whole text; before
that header existed, the one `…K tokens truncated…` of an output whose `Original token
count` is not its own size (`⌈bytes/4⌉`, which newer versions give for every output).
Its `exec_command_end` is not read: it holds the whole process's output, which the polls
were shown in parts. Unified exec's own errors are no turn: `exec_command failed:
...Rejected("rejected by user")` (the approval), `...Rejected(...)` (the exec policy),
`write_stdin failed: Unknown process id N` (older `UnknownSessionId { session_id: N }`),
a closed stdin, `failed to parse exec_command|write_stdin arguments: ...`, the refused
escalation (`approval policy is P; reject command — ...`): `not_run`; any other
`exec_command failed: ...` (it could not start the process: `CreateProcess { ... }`,
`Failed to create unified exec process: ...`, an old sandbox denial without the output)
or `write_stdin failed: ...`: `harness_failure`. The v1 `unified_exec {input: [...],
session_id?, timeout_ms?}` (0.3x-0.4x, experimental): without a session `input` is a
command's argv, with one keys (joined by spaces, as Codex wrote them); its answer
`{"session_id": "N" | null, "output"}` is the output (its `Warning: requested timeout
... clamping to ...` line removed), the session while it runs; `unified exec failed:
...` as above.

MCP tools and the other tools (read in codex-rs: core/src/mcp_tool_call.rs,
core/src/tools/context.rs `McpToolOutput` / `FunctionToolOutput` / `function_tool_response`,
core/src/tools/handlers/{mcp,view_image}.rs, core/src/mcp_connection_manager.rs,
mcp-client/src/mcp_client.rs, rmcp-client's `run_with_timeout`, protocol/src/models.rs
`FunctionCallOutputPayload`, `CallToolResult::as_function_call_output_payload` and the older
`From<ResponseInputItem>`, utils/output-truncation `truncate_text`, rollout/policy.rs). An MCP
call is named `<server>__<tool>` (the first versions), `mcp__<server>__<tool>`, or, newest,
`{namespace: "mcp__<server>", name: <tool>}` (the action's name is then Codex's own
`mcp__<server>__<tool>`); a call an `mcp_tool_call_begin|end` event names is one whatever
its name. Its output, per generation: the whole `CallToolResult` JSON (`{"content",
"isError", "structuredContent"}`: the content's text, `isError` the error); then what
`as_function_call_output_payload` gives - the structured content's JSON when there is
some (kept as that text: it is what the model was shown), else the content blocks' JSON
`[{"type": "text", "text": ...}]` (their text; an image block `non_text_part`), or content
items when an image is among them; since openai/codex#17406 (2026-04) after the
`McpToolOutput` header `Wall time: S.SSSS seconds\nOutput:` and a newline (the header
alone: no text), which is removed only whole and in place on an MCP call's output (with
content items it is an `input_text` item of its own, first). `isError` is lost from these
layouts unless the rollout kept `mcp_tool_call_end` (Codex's extended history only): its
`Ok.isError` is the error, and `Err` says the output is Codex's own error. Newer Codex cuts
the framed text to its budget (`truncate_text`: half of it at each end, `…N tokens|chars
truncated…` between, through the result's JSON): `truncated`, the blocks' text at each end
(a structured result's two ends as they stand), only for a marker with as many bytes on
each side. Codex's own answers are no turn, as text (`err: {e:?}` in the first versions,
then the plain message) or, since they became results (`CallToolResult::from_error_text`),
one text block: `user rejected MCP tool call`, `user cancelled MCP tool call`, `MCP tool call
blocked by app configuration`, `Tool call was cancelled because of safety risks[: R]`,
`tool call error: unknown MCP server 'S'` / `tool 'T' is disabled for MCP server 'S'`,
`err: <serde error>` for arguments that are not JSON, an interrupt (`not_run`: Codex never
sent the call); any other `tool call error: ...` (`tool call failed for `S/T`` with its
cause when Codex wrote `{e:?}`: a server that failed to start, a broken connection, a
timeout - `request timed out`, `timed out awaiting tools/call after D`) is
`harness_failure`: the call may have run, and Codex keeps nothing of the server's answer
(no partial output, so a timeout has nothing to mark `[timed out]`). Other tools' outputs
are their text; `function_call_output.output` given as content items (newer protocol,
`[{type: input_text, text}, {type: input_image, image_url}]`) is read as the text of its
text items (a text-only list then as a string output: a shell's framing, Codex's refusals),
its images `non_text_part` (images only: no turn, `common.no_text`); over its budget
Codex cuts such a list item by item (`_items_uncut`: `truncated`, the cut item's two
ends, its `[omitted N text items ...]` left out). view_image answers `attached local
image path` and injects the image as a user message after the outputs (no user
message): its answer is that image alone, no text, so it makes no turn (`unpaired_call`
naming that message), as any answer of images only. Nothing else frames
its answer: `update_plan`'s `Plan updated`, the experimental read_file's `L<n>: <line>`
lines (that tool's own way of showing a file, as an editor tool's `cat -n`), list_dir,
grep_files and dynamic tools' text are kept as they are.

Text turns as OpenAI/ATIF (`common.conversation`): an assistant message with no call in
its response, answered by the user, is a `text` turn; the last unanswered -> metadata
`final_message`. Reasoning items' summaries (and raw `content` text; encrypted content
is not text) and the response's own prose are the reasoning of its first call (its
prose when none of its calls makes a turn: reported, `message_not_imported`). Not the
user's words: `<environment_context>` (its `<cwd>` read), `<user_instructions>` and
`# AGENTS.md instructions` (-> metadata `user_instructions`), skills, `<turn_aborted>`,
`<context_update>` and `developer` messages are Codex's context (passed over);
`<user_shell_command>` (the user's own `!` command), subagent notifications and
compaction summaries are reported (`message_not_imported`). Task <- the first real user
message. Metadata: cwd, git, codex_version, originator, models, approval_policy,
sandbox, agent_system_prompt (`base_instructions`), user_instructions, forked_from,
undo_before_turns, final_message. Each turn's `started_at` <- its call's line timestamp.

A line that is not JSON, or an item of a shape Codex does not write, is reported naming
the line and the field (`invalid_json`, `invalid`) and only that line is left out.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome
from worldtrace.schemas.validate import parse_json

from .common import (
    AGENT,
    USER,
    Document,
    ImportProblem,
    InvalidField,
    NonText,
    build,
    content_text,
    conversation,
    expected,
    file_cached,
    file_warning,
    guess_domain,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    line_list,
    no_text,
    origin_stem,
    plural,
    shown,
    textless,
    timed_out,
    tool_action,
)
from .reading import json_head, jsonl_values, read_json

NAME = "codex"

LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
        "tool_search_call",
        "tool_search_output",
    }
)
"""Response item types Codex records (others are reported)."""
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
SHELLS = ("shell", "container.exec")
"""Function tools whose `command` is an argv list run by Codex's shell."""
SHELL_LINE = "shell_command"
"""The function tool whose `command` is one shell line (newer Codex)."""
LOCAL_SHELL = "local_shell"
PATCH = "apply_patch"
EXEC = "exec_command"
"""Unified exec: runs `{cmd}` in a terminal session, answers after `yield_time_ms`."""
STDIN = "write_stdin"
"""Unified exec: writes `{session_id, chars}` to a running session, answers its new output."""
UNIFIED_V1 = "unified_exec"
"""The first unified exec tool (experimental, 0.3x-0.4x): `{input: [...], session_id?}`."""
TERMINAL = (EXEC, STDIN, UNIFIED_V1)
MCP_NAMESPACE = "mcp__"
"""How newer Codex names an MCP server's tools: `namespace: "mcp__<server>"` beside the tool's
`name` (earlier the name itself, `mcp__<server>__<tool>`, first `<server>__<tool>`)."""
MCP_EVENTS = ("mcp_tool_call_begin", "mcp_tool_call_end")
VIEW_IMAGE = "view_image"
DUPLICATES = {"user_message": "user", "agent_message": "assistant"}
ROLLBACK = "thread_rolled_back"
UNDO = "undo_completed"
SNIFF_LINES = 16

# -- detection ----------------------------------------------------------------------


@file_cached
def sniff(path: Path) -> bool:
    """Whether `path` is a Codex rollout: its first JSON line is a `RolloutLine`
    (`{timestamp, type: session_meta|response_item|..., payload}`), or the older bare
    session header `{id, timestamp[, instructions, git]}` followed by a bare response
    item or a `{record_type: state}` marker; or `codex exec --json` output (`exec_json`).
    Lines that are not JSON are passed over."""
    if exec_json(path):
        return True
    header = False
    for d in json_head(path, SNIFF_LINES):
        if not isinstance(d, dict):
            return False
        if header:
            return d.get("record_type") == "state" or d.get("type") in ITEM_TYPES
        if _rollout_line(d):
            return True
        if not _old_header(d):
            return False
        header = True
    return False


def _rollout_line(d: dict[str, Any]) -> bool:
    return d.get("type") in LINE_TYPES and "payload" in d and isinstance(d.get("timestamp"), str)


def _old_header(d: dict[str, Any]) -> bool:
    return (
        isinstance(d.get("id"), str)
        and isinstance(d.get("timestamp"), str)
        and "type" not in d
        and set(d) <= {"id", "timestamp", "instructions", "git"}
    )


# -- reading -------------------------------------------------------------------------


@dataclass
class _Line:
    n: int
    """Line number (1-based)."""
    kind: str
    """session_meta, response_item, event_msg, turn_context or compacted."""
    p: dict[str, Any]
    """The payload (the bare item or header in the older layout)."""
    at: datetime | None
    pre: str
    """The payload's place in the line, for problems: `payload.` or ``."""
    where: str = ""
    """Where it is, for problems: `line N` (a rollout), `items[N]` (a TypeScript
    codex-cli session)."""

    def __post_init__(self) -> None:
        self.where = self.where or f"line {self.n}"


def _line(n: int, d: Any, first: bool) -> _Line | None:
    """Line `n` as a rollout line (None: a state marker); InvalidField names what is
    wrong; `_Unknown` a line of no type Codex writes."""
    if not isinstance(d, dict):
        raise expected("the line", "a Codex rollout line (a JSON object)", d)
    if "payload" in d and d.get("type") in LINE_TYPES:
        p = d["payload"]
        if not isinstance(p, dict):
            raise expected("payload", "an object", p)
        line = _Line(n, d["type"], p, iso_timestamp(d.get("timestamp"), "timestamp"), "payload.")
    elif d.get("record_type") == "state":
        return None
    elif first and _old_header(d):
        line = _Line(n, "session_meta", d, iso_timestamp(d.get("timestamp"), "timestamp"), "")
    elif d.get("type") in ITEM_TYPES:
        line = _Line(n, "response_item", d, iso_timestamp(d.get("timestamp"), "timestamp"), "")
    else:
        raise _Unknown(shown(d.get("type")) if "type" in d else "none")
    _check(line)
    return line


class _Unknown(Exception):
    """A line of no type Codex writes (reported once per type)."""


def _str(p: dict[str, Any], key: str, at: str, required: bool = True) -> None:
    v = p.get(key)
    if (v is not None or required) and not isinstance(v, str):
        raise expected(f"{at}{key}", "a string", v)


def _tool_name(p: dict[str, Any], at: str) -> None:
    if not isinstance(p.get("name"), str) or not p["name"]:
        raise expected(f"{at}name", "a tool name", p.get("name"))


def _check(line: _Line) -> None:
    """A field of a shape Codex does not write is InvalidField naming it."""
    p, at = line.p, line.pre
    if line.kind == "session_meta":
        _str(p, "id", at)
        for key in ("cwd", "cli_version", "originator", "instructions"):
            _str(p, key, at, required=False)
        if p.get("git") is not None and not isinstance(p["git"], dict):
            raise expected(f"{at}git", "an object", p["git"])
        return
    if line.kind == "turn_context":
        for key in ("cwd", "model"):
            _str(p, key, at, required=False)
        return
    if line.kind == "event_msg":
        _str(p, "type", at)
        if p["type"] in ("exec_command_end", "patch_apply_end"):
            _str(p, "call_id", at)
            for key in ("stdout", "stderr", "aggregated_output", "status"):
                _str(p, key, at, required=False)
            code = p.get("exit_code")
            if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
                raise expected(f"{at}exit_code", "an integer", code)
        elif p["type"] == ROLLBACK:
            n = p.get("num_turns")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise expected(f"{at}num_turns", "a number of turns", n)
        elif p["type"] == UNDO and not isinstance(p.get("success"), bool):
            raise expected(f"{at}success", "a boolean", p.get("success"))
        elif p["type"] in MCP_EVENTS:
            _str(p, "call_id", at)
        return
    if line.kind == "compacted":
        _str(p, "message", at, required=False)
        history = p.get("replacement_history")
        if history is not None and not isinstance(history, list):
            raise expected(f"{at}replacement_history", "a list of response items", history)
        return
    if line.kind != "response_item":
        return
    kind = p.get("type")
    if not isinstance(kind, str):
        raise expected(f"{at}type", "a string", kind)
    if kind == "message":
        _str(p, "role", at)
        c = p.get("content")
        if c is not None and not isinstance(c, str | list):
            raise expected(f"{at}content", "a list of content items", c)
    elif kind == "function_call":
        _tool_name(p, at)
        _str(p, "call_id", at)
        _str(p, "namespace", at, required=False)
        args = p.get("arguments")
        if args is not None and not isinstance(args, str | dict):
            raise expected(f"{at}arguments", "a JSON object or a string holding one", args)
    elif kind == "custom_tool_call":
        _tool_name(p, at)
        _str(p, "call_id", at)
        _str(p, "input", at)
    elif kind == "local_shell_call":
        if not isinstance(p.get("call_id") or p.get("id"), str):
            raise expected(f"{at}call_id", "a string", p.get("call_id"))
        action = p.get("action")
        if not isinstance(action, dict):
            raise expected(f"{at}action", "an object", action)
        cmd = action.get("command")
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            raise expected(f"{at}action.command", "a list of strings", cmd)
    elif kind in OUTPUTS:
        _str(p, "call_id", at)
        out = p.get("output")
        if not isinstance(out, str | list) and not (
            isinstance(out, dict) and isinstance(out.get("content"), str)
        ):
            raise expected(f"{at}output", "a string or a list of content items", out)
    elif kind == "reasoning":
        for key in ("summary", "content"):
            if p.get(key) is not None and not isinstance(p[key], list):
                raise expected(f"{at}{key}", "a list", p[key])


def _read(path: Path) -> tuple[list[_Line], list[ImportProblem]]:
    lines: list[_Line] = []
    problems: list[ImportProblem] = []
    unknown: dict[str, list[int]] = {}
    first = True
    for n, d in jsonl_values(path):
        if isinstance(d, ImportProblem):
            problems.append(d)
            continue
        try:
            line = _line(n, d, first)
        except InvalidField as exc:  # the message names the field; only this line is lost
            problems.append(ImportProblem(str(path), f"line {n}", "invalid", str(exc)))
            continue
        except _Unknown as exc:
            unknown.setdefault(str(exc), []).append(n)
            continue
        finally:
            first = False
        if line is not None:
            lines.append(line)
    for kind, ns in unknown.items():
        problems.append(
            file_warning(
                path,
                f"line {ns[0]}",
                "message_not_imported",
                f"{plural(len(ns), 'line')} of type {kind} ({line_list(ns)}): not a Codex"
                " rollout line; not imported",
            )
        )
    return lines, problems


# -- Codex's own text ----------------------------------------------------------------

CONTEXT = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions for ",
    "<instructions>",
    "<skill>",
    "<turn_aborted>",
    "<context_update>",
)
"""User messages that are Codex's context for the model (lower-cased prefixes): passed over."""
HARNESS_USER = (
    ("<user_shell_command>", "a shell command the user ran (! mode)"),
    ("<subagent_notification>", "a subagent's notification"),
    (
        "you were originally given instructions from a user over one or more turns.",
        "the summary Codex wrote when it compacted the conversation",
    ),
    (
        "another language model started to solve this problem",
        "the summary Codex wrote when it compacted the conversation",
    ),
)
"""User messages Codex writes (lower-cased prefixes): not the user's words, reported."""
_INSTRUCTIONS = re.compile(
    r"\A\s*(?:<user_instructions>\s*(?P<a>.*?)\s*</user_instructions>"
    r"|# AGENTS\.md instructions for [^\n]*\n+<INSTRUCTIONS>\n?(?P<b>.*?)\n?</INSTRUCTIONS>)\s*\Z",
    re.S,
)
_CWD = re.compile(r"<cwd>(.*?)</cwd>", re.S)

REJECTED = {
    "exec command rejected by user": "the user rejected the command at Codex's approval prompt",
    "patch rejected by user": "the user rejected the patch at Codex's approval prompt",
    "aborted": "the turn was interrupted before the call answered",
    "aborted by user": "the turn was interrupted before the call answered",
}
_ABORTED = re.compile(
    r"aborted by user after \d+(?:\.\d+)?s|Wall time: \d+(?:\.\d+)? seconds\naborted by user"
)
_NOT_RUN_PREFIX = (
    ("exec command rejected: ", "Codex's policy rejected the command"),
    ("failed to parse function arguments: ", "Codex could not read the call's arguments"),
    ("unsupported call: ", "Codex has no such tool"),
    ("unsupported custom tool call: ", "Codex has no such tool"),
)
_SANDBOX = re.compile(r"\Afailed in sandbox \w+ with execution error: (?P<error>.*)\Z", re.S)
_DENIED = re.compile(
    r"\Asandbox denied exec error, exit code: (?P<code>-?\d+), stdout: (?P<out>.*), stderr: (?P<err>.*)\Z",
    re.S,
)
_TIMEOUT = re.compile(r"\Acommand timed out after \d+ milliseconds(?:\n|\Z)")
_FREEFORM = re.compile(
    r"\AExit code: (?P<code>-?\d+)\nWall time: [\d.]+ seconds\n"
    r"(?:Total output lines: (?P<total>\d+)\n)?Output:\n(?P<body>.*)\Z",
    re.S,
)
_HEADER = re.compile(
    r"\A(?:Warning: truncated output \(original token count: \d+\)\n)?Total output lines: \d+\n\n"
)
_MARKS = re.compile(
    r"\n\[\.\.\. omitted \d+ of \d+ lines \.\.\.\]\n\n"
    r"|\n\[\.\.\. output truncated to fit \d+ bytes \.\.\.\]\n\n"
    r"|…\d+ (?:tokens|chars) truncated…\n?"
)
_OLD_CUT = re.compile(r"\n\n\[Output truncated after \d+ lines: too many lines or bytes\.\]\Z")


def _ends(head: str, tail: str) -> str:
    return head + tail if not head or head.endswith("\n") else kept_ends(head, tail)


def _uncut(body: str, header: bool) -> tuple[str, bool]:
    """An output without Codex's cut: (the text shown, whether it was cut). Its markers
    count only under the `Total output lines` header that says Codex cut it (`header`:
    the free-form layout's section, else a header at the top of `body`)."""
    if (m := _OLD_CUT.search(body)) is not None:
        return body[: m.start()], True
    if not header:
        if (h := _HEADER.match(body)) is None:
            return body, False
        body = body[h.end() :]
    marks = list(_MARKS.finditer(body))
    if len(marks) != 1:
        return body, header
    m = marks[0]
    return _ends(body[: m.start()], body[m.end() :]), True


def _exec(body: str, code: int | None, header: bool = False) -> Observation:
    """A command's output (Codex's cut and timeout notices read) and exit code."""
    timeout = (t := _TIMEOUT.match(body)) is not None
    if timeout:
        body = body[t.end() :]
    text, cut = _uncut(body, header)
    if timeout:
        return timed_out(text, truncated=cut)
    return Observation(text, is_error=bool(code), exit_code=code, truncated=cut)


def _json_object(text: str) -> dict[str, Any] | None:
    """`text` as the JSON object Codex wrote, else None (any other text is the output)."""
    if not text.startswith("{"):
        return None
    try:
        d = parse_json(text)
    except ValueError:  # TooDeep too: the output, as text
        return None
    return d if isinstance(d, dict) else None


def _framed(text: str) -> Observation | None:
    """Codex's structured (JSON) or free-form framing of a command's output, read; None
    when `text` is in neither."""
    if (m := _FREEFORM.match(text)) is not None:
        return _exec(m["body"], int(m["code"]), header=m["total"] is not None)
    d = _json_object(text)
    if d is None:
        return None
    meta = d.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    if not isinstance(d.get("output"), str) or not isinstance(code, int) or isinstance(code, bool):
        return None
    return _exec(d["output"], code)


def output_answer(text: str, exit_code: int | None = None) -> Observation | tuple[str, str]:
    """A shell call's output as another tool kept it (harbor's ATIF: the structured
    output's `output` field with its exit code beside it, else Codex's text as it is):
    the observation, or (warning kind, why) when Codex answered the call itself."""
    if (why := _refused(text)) is not None:
        return why
    seen = _framed(text)
    if seen is not None:
        return seen
    if (m := _SANDBOX.match(text)) is not None and (d := _DENIED.match(m["error"])) is not None:
        out = "\n".join(x for x in (d["out"], d["err"]) if x)
        return Observation(out, is_error=True, exit_code=int(d["code"]))
    return _exec(text, exit_code)


def _sandbox_ran(error: str) -> bool:
    """Whether a sandbox error is one where the command ran: a denial (it ran in the
    sandbox and failed) or a timeout."""
    return bool(_DENIED.match(error) or _TIMEOUT.match(error)) or error == "command timed out"


def _refused(text: str) -> tuple[str, str] | None:
    """(kind, why) when `text` is Codex answering a call it did not (or could not) run."""
    if text in REJECTED:
        return "not_run", REJECTED[text]
    if _ABORTED.fullmatch(text):
        return "not_run", "the turn was interrupted before the call answered"
    for prefix, why in _NOT_RUN_PREFIX:
        if text.startswith(prefix):
            return "not_run", f"{why} ({shown(text, 80)})"
    if text.startswith("execution error: "):
        return "harness_failure", f"Codex failed to run it ({shown(text, 80)})"
    if (m := _SANDBOX.match(text)) is not None and not _sandbox_ran(m["error"]):
        return "harness_failure", f"Codex's sandbox failed ({shown(m['error'], 80)})"
    return None


# -- unified exec (exec_command / write_stdin) ----------------------------------------

_UNIFIED = re.compile(
    r"\A(?P<cut>Total output lines: \d+\n\n)?"
    r"(?:Chunk ID: [^\n]*\n)?Wall time: \d+(?:\.\d+)? seconds\n"
    r"(?:Process exited with code (?P<code>-?\d+)\n)?"
    r"(?:Process running with (?:session ID|id) (?P<sid>\d+)\n)?"
    r"(?:Original token count: (?P<tokens>\d+)\n)?Output:\n(?P<body>.*)\Z",
    re.S,
)
"""codex-rs `format_response` (tools/handlers/unified_exec.rs; later
`ExecCommandToolOutput::response_text`): sections joined by newlines, the output last.
`Process running with id N` is the short-lived `process_id` variant. A leading `Total
output lines: N` is `formatted_truncate_text`'s header over the whole text."""
_TOKEN_CUT = re.compile(r"…\d+ tokens truncated…")
"""The cut of unified exec before `formatted_truncate_text` (`truncate_output_to_tokens`:
half the budget, the marker, half the budget), shown only with `Original token count`."""
_CLAMPED = re.compile(
    r"\AWarning: requested timeout \d+ms exceeds maximum of \d+ms; clamping to \d+ms\.\n"
)
"""The v1 `unified_exec` session manager's notice before the output."""
_REJECTED_START = re.compile(
    r'\A(?:Create(?:Process|Session) \{ message: "'
    r"|Failed to create unified exec (?:process|session): )"
    r'Rejected\(\\?"(?P<why>.*?)\\?"\)'
)
"""`exec_command failed: ` + the orchestrator's `ToolError::Rejected` (the approval or the
exec policy refused it), Debug (`{err:?}`) or Display formatted by the version."""
_UNKNOWN_SESSION = re.compile(
    r"\A(?:Unknown (?:process|session) id \d+"
    r'|Unknown(?:Process|Session)Id \{ (?:process|session)_id: "?\d+"? \})\Z'
)
_STDIN_CLOSED = re.compile(
    r"\A(?:StdinClosed|stdin is closed for this session; rerun exec_command with tty=true to"
    r" keep stdin open)\Z"
)
_UNIFIED_NOT_RUN = (
    ("failed to parse exec_command arguments: ", "Codex could not read the call's arguments"),
    ("failed to parse write_stdin arguments: ", "Codex could not read the call's arguments"),
    ("invalid session_id: ", "Codex could not read the call's session id"),
    ("unsupported unified exec function ", "Codex has no such tool"),
    ("unified_exec handler received unsupported payload", "Codex has no such tool"),
)
_ESCALATION = re.compile(
    r"\Aapproval policy is \w+; reject command — you cannot ask for escalated permissions if"
    r" the approval policy is \w+\Z"
)


def _terminal_refused(text: str) -> tuple[str, str] | None:
    """(kind, why) when `text` is unified exec's own error instead of a terminal's output
    (codex-rs `FunctionCallError::RespondToModel` in the handler, `UnifiedExecError`)."""
    for prefix, why in _UNIFIED_NOT_RUN:
        if text.startswith(prefix):
            return "not_run", f"{why} ({shown(text, 80)})"
    if _ESCALATION.match(text):
        return "not_run", "Codex's approval policy refused the escalated permissions it asked for"
    for prefix in ("exec_command failed: ", "unified exec failed: "):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if (m := _REJECTED_START.match(rest)) is not None:
                if m["why"] == "rejected by user":
                    return "not_run", "the user rejected the command at Codex's approval prompt"
                return "not_run", f"Codex's policy rejected the command ({shown(rest, 80)})"
            if _UNKNOWN_SESSION.match(rest):
                return "not_run", f"no terminal session of that id was running ({shown(rest, 80)})"
            return "harness_failure", f"Codex failed to run it ({shown(text, 80)})"
    if text.startswith("write_stdin failed: "):
        rest = text[len("write_stdin failed: ") :]
        if _UNKNOWN_SESSION.match(rest):
            return "not_run", f"no terminal session of that id was running ({shown(rest, 80)})"
        if _STDIN_CLOSED.match(rest):
            return "not_run", "the session's stdin is closed (it was started without a tty)"
        return "harness_failure", f"Codex failed to write to the session ({shown(text, 80)})"
    if text.startswith("failed to serialize unified exec output: "):
        return "harness_failure", f"Codex lost the output ({shown(text, 80)})"
    return None


def _cut_body(body: str, tokens: int | None, header: bool) -> tuple[str, bool]:
    """A terminal's output without unified exec's cut: (the text shown, whether it was
    cut). `formatted_truncate_text` puts its header first (newer Codex); before it, only
    an `Original token count` that is not the whole output's (`⌈bytes/4⌉`, which newer
    versions give for every output) says the one `…N tokens truncated…` is the cut."""
    if header or _HEADER.match(body):
        return _uncut(body, header)
    if tokens is None or tokens == (len(body.encode()) + 3) // 4:
        return body, False
    marks = list(_TOKEN_CUT.finditer(body))
    if len(marks) != 1:
        return body, False
    m = marks[0]
    return _ends(body[: m.start()], body[m.end() :]), True


def _terminal(text: str) -> Observation | None:
    """A unified exec answer read: the output, the exit code when the process exited, its
    session id in `state_json` while it runs on; None when `text` is not in the framing."""
    m = _UNIFIED.match(text)
    if m is None:
        return None
    tokens = int(m["tokens"]) if m["tokens"] is not None else None
    out, cut = _cut_body(m["body"], tokens, m["cut"] is not None)
    if m["sid"] is not None:
        return Observation(out, truncated=cut, state_json=_session(int(m["sid"])))
    code = int(m["code"]) if m["code"] is not None else None
    return Observation(out, is_error=bool(code), exit_code=code, truncated=cut)


def _terminal_v1(text: str) -> Observation | None:
    """The v1 `unified_exec` answer `{"session_id": "N" | null, "output": ...}` read (its
    timeout-clamp notice removed); no exit code was given."""
    d = _json_object(text)
    if d is None or set(d) != {"session_id", "output"}:
        return None
    sid, out = d["session_id"], d["output"]
    if not isinstance(out, str) or not (sid is None or (isinstance(sid, str) and sid.isdigit())):
        return None
    out = _CLAMPED.sub("", out, count=1)
    return Observation(out, state_json=_session(int(sid)) if sid is not None else None)


def _session(sid: int) -> str:
    """The state of a process that runs on after its answer: its terminal session."""
    return json.dumps({"session_id": sid})


def _session_id(value: Any) -> int | None:
    """A write_stdin `session_id` (an integer; a string of digits in some versions)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _keys(chars: str, sid: int, name: str, wait_ms: Any) -> Action:
    """Keys written to terminal session `sid`: the keystrokes action, the session and how
    long Codex waited for output (`yield_time_ms`, when the model gave it) in its
    arguments. An empty write is a poll: the agent waits for more output."""
    args: dict[str, Any] = {"keystrokes": chars, "session_id": sid}
    if isinstance(wait_ms, int | float) and not isinstance(wait_ms, bool):
        args["duration"] = wait_ms / 1000
    args_json = json.dumps(args, sort_keys=True, ensure_ascii=False)  # as `tool_call` writes them
    return Action("keystrokes", chars, name=name, arguments_json=args_json)


# -- MCP tools and Codex's other tools ---------------------------------------------------

_MCP_FRAME = re.compile(r"\AWall time: \d+\.\d{4} seconds\nOutput:(?:\n(?P<body>.+))?\Z", re.S)
"""`McpToolOutput::response_payload` (tools/context.rs, since openai/codex#17406): the result's
text after `Wall time: {secs:.4} seconds\nOutput:` and a newline (the header alone when the
result has no text). With content items (an image) the header is an item of its own, first."""
_MCP_HEADER_ITEM = re.compile(r"\AWall time: \d+\.\d{4} seconds\nOutput:\Z")
_CUT = re.compile(r"…\d+ (?:tokens|chars) truncated…")
"""`truncate_text`'s marker: newer Codex cuts the framed MCP text to the context budget."""
RESULT_KEYS = frozenset(
    {"content", "isError", "is_error", "structuredContent", "structured_content", "_meta"}
)
"""A `CallToolResult` as the first versions wrote it whole (`serde_json::to_string(&result)`)."""
MCP_FAILED = "tool call error: "
"""mcp_tool_call.rs: `format!("tool call error: {e}")` (later `{e:?}`, with the error chain) of
a call the connection manager or the MCP client failed."""
_MCP_NOT_RUN = {
    "user rejected MCP tool call": "the user rejected the MCP call at Codex's approval prompt",
    "user cancelled MCP tool call": "the user cancelled the MCP call at Codex's approval prompt",
    "MCP tool call blocked by app configuration": "Codex's app configuration blocked the call",
    "mcp handler received unsupported payload": "Codex has no such tool",
    "aborted": "the turn was interrupted before the call answered",
    "aborted by user": "the turn was interrupted before the call answered",
}
_SAFETY = re.compile(r"\ATool call was cancelled because of safety risks(?:: .+)?\Z", re.S)
_MCP_NO_SERVER = re.compile(r"\Aunknown MCP server '[^']*'\Z")
_MCP_DISABLED = re.compile(r"\Atool '.*' is disabled for MCP server '[^']*'\Z", re.S)
_MCP_TIMEOUT = re.compile(r"\brequest timed out\b|\b[Tt]imed out awaiting tools/call after ")
"""The old mcp-client's and the rmcp client's timeouts, in the error chain `{e:?}` shows."""
_DEBUG_STR = re.compile(r'\A"(?P<s>(?:[^"\\]|\\.)*)"\Z', re.S)
_RUST_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|.)", re.S)
_RUST_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
IMAGE_ATTACHED = "attached local image path"
"""view_image's answer (handlers/view_image.rs): the image itself comes in a user message Codex
injects after the output."""


def _rust_str(text: str) -> str:
    """A Rust `{:?}` string literal's content, unescaped."""

    def one(m: re.Match[str]) -> str:
        e = m[1]
        return chr(int(e[2:-1], 16)) if e.startswith("u{") else _RUST_ESCAPES.get(e, m[0])

    return _RUST_ESCAPE.sub(one, text)


def _json_value(text: str) -> Any:
    """`text` as JSON (None: not JSON, or JSON `null`)."""
    try:
        return parse_json(text)
    except ValueError:  # TooDeep too
        return None


BLOCK_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
"""MCP content block types (a result's `structuredContent` is an object, never a list)."""


def _blocks(value: Any) -> bool:
    """Whether `value` is a list of MCP content blocks."""
    return isinstance(value, list) and all(
        isinstance(b, dict) and b.get("type") in BLOCK_TYPES for b in value
    )


def _lone_text(value: Any) -> str | None:
    """The text of a result that is one text block alone (how `CallToolResult::from_error_text`
    writes Codex's own errors since they became results), else None."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        b = value[0]
        if set(b) == {"type", "text"} and b["type"] == "text" and isinstance(b["text"], str):
            return b["text"]
    return None


def _args_read(args: Any) -> bool:
    """Whether Codex could read a call's arguments as JSON (mcp_tool_call.rs answers
    `err: <serde error>` when it cannot; empty is none)."""
    if not isinstance(args, str) or not args.strip():
        return True
    try:
        parse_json(args)
    except ValueError:  # TooDeep too (`tool_action` names the field)
        return False
    return True


def _mcp_error(text: str, args_read: bool) -> tuple[str, str] | None:
    """(kind, why) when `text` is Codex's own answer to an MCP call instead of the server's
    result (mcp_tool_call.rs, mcp_connection_manager.rs, the MCP clients); None otherwise.
    Codex never sent a call it rejected, cancelled or could not route (`not_run`); one it sent
    and whose answer it lost - a timeout, a broken connection - may have run, and nothing of
    what the server did is kept (`harness_failure`)."""
    if text in _MCP_NOT_RUN:
        return "not_run", _MCP_NOT_RUN[text]
    if _ABORTED.fullmatch(text):
        return "not_run", "the turn was interrupted before the call answered"
    if _SAFETY.match(text):
        return "not_run", f"Codex's safety monitor cancelled the call ({shown(text, 80)})"
    if text.startswith("err: "):
        rest = text[len("err: ") :]
        if (m := _DEBUG_STR.match(rest)) is not None:  # the first versions: err: {e:?}
            inner = _rust_str(m["s"])
            return _mcp_error(inner, args_read) or (
                "harness_failure",
                f"Codex's MCP call failed ({shown(inner, 80)})",
            )
        if not args_read:
            return "not_run", f"Codex could not read the call's arguments ({shown(text, 80)})"
        return None
    if text.startswith(MCP_FAILED):
        rest = text[len(MCP_FAILED) :]
        if _MCP_NO_SERVER.match(rest):
            return "not_run", f"no MCP server of that name was running ({shown(rest, 80)})"
        if _MCP_DISABLED.match(rest):
            return "not_run", f"Codex's configuration disables the tool ({shown(rest, 80)})"
        if _MCP_TIMEOUT.search(rest):
            return "harness_failure", f"Codex stopped waiting for the MCP server's answer; nothing of it was kept ({shown(rest, 80)})"  # fmt: skip
        return "harness_failure", f"Codex's call to the MCP server failed ({shown(rest, 80)})"
    return None


def _budget_cut(text: str) -> tuple[int, int] | None:
    """Where `truncate_text` cut a framed MCP text (its marker's span), else None. It keeps
    half its byte budget at each end (split_budget; neither end splits a character), so the
    one marker has as many bytes before it as after, give or take a character; a marker
    anywhere else is the server's text."""
    cuts = list(_CUT.finditer(text))
    if len(cuts) != 1:
        return None
    head, tail = text[: cuts[0].start()], text[cuts[0].end() :]
    if abs(len(head.encode()) - len(tail.encode())) > 4:
        return None
    return cuts[0].span()


_OMITTED = re.compile(r"\[omitted \d+ text items \.\.\.\]")
"""What `truncate_function_output_items_with_policy` appends for the text items it left out."""


def _items_uncut(items: list[Any]) -> tuple[list[Any], bool]:
    """Content items without Codex's cut, and whether it cut them. Over its budget
    (`truncate_function_output_items_with_policy`: an MCP result with an image, a code-mode
    result) Codex keeps the text items that fit, cuts the one that does not with
    `truncate_text` (the marker between two halves of what was left of the budget) and
    leaves the rest out, saying so in one text item last (`[omitted N text items ...]`);
    images stay. The marker counts only in the last text item and with as many bytes on
    each side (`_budget_cut`); anywhere else it is the tool's text."""
    out = list(items)
    cut = False
    if out and _is_text_item(out[-1]) and _OMITTED.fullmatch(out[-1]["text"]):
        out.pop()
        cut = True
    last = next((i for i in reversed(range(len(out))) if _is_text_item(out[i])), None)
    if last is not None and (span := _budget_cut(text := out[last]["text"])) is not None:
        out[last] = {**out[last], "text": _ends(text[: span[0]], text[span[1] :])}
        cut = True
    return out, cut


def _is_text_item(x: Any) -> bool:
    return (
        isinstance(x, dict)
        and x.get("type") in ("input_text", "output_text", "text")
        and isinstance(x.get("text"), str)
    )


def _text_only(items: list[Any]) -> bool:
    """Whether a list output holds text items only (read as the text they join to)."""
    return bool(items) and all(_is_text_item(x) for x in items)


# -- items -----------------------------------------------------------------------------


@dataclass
class _Call:
    group: int
    line: _Line
    name: str
    call_id: str
    action: Action
    shell: bool
    """A command (or apply_patch): its output is in Codex's exec framing."""
    output: _Line | None = None
    terminal: bool = False
    """A unified exec call (exec_command, write_stdin, unified_exec): its output is in the
    terminal framing."""
    mcp: bool = False
    """A call of an MCP server's tool: its output is the server's result as Codex framed it."""


@dataclass
class _Group:
    """One entry of the conversation: a model response (its consecutive items), a user
    or developer message, or the tool outputs between them."""

    role: str | None
    lines: list[_Line] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    said: list[Any] = field(default_factory=list)
    """Content parts: the agent's text, or the user's words."""
    why: str | None = None

    @property
    def n(self) -> int:
        return self.lines[0].n

    @property
    def where(self) -> str:
        return self.lines[0].where


def _texts(p: dict[str, Any]) -> list[Any]:
    c = p.get("content")
    return [c] if isinstance(c, str) else list(c or [])


def _plain(parts: list[Any]) -> str:
    return content_text(parts)[0]


def _shell_line(argv: list[str]) -> str:
    if (
        len(argv) == 3
        and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
        and argv[1]
        in (
            "-lc",
            "-c",
        )
    ):
        return argv[2]
    return shlex.join(argv)


def _call(group: int, line: _Line) -> _Call:
    p, at = line.p, line.pre
    kind = p["type"]
    where = f"{line.where}: {at}"
    if kind == "local_shell_call":
        argv = p["action"]["command"]
        cid = p.get("call_id") or p.get("id")
        return _Call(group, line, LOCAL_SHELL, cid, Action("command", _shell_line(argv), name=LOCAL_SHELL), True)  # fmt: skip
    name, cid = p["name"], p["call_id"]
    if kind == "custom_tool_call":
        return _Call(group, line, name, cid, tool_action(name, p["input"], f"{where}input"), name == PATCH)  # fmt: skip
    space = p.get("namespace")
    if space is not None and space.startswith(MCP_NAMESPACE):
        # Codex's own full name of a namespaced MCP tool (join_tool_name in handlers/mcp.rs)
        name = f"{space.rstrip('_')}__{name.lstrip('_')}"
    name, action, shell, terminal = _function_call(name, p.get("arguments"), f"{where}arguments")
    mcp = not (shell or terminal) and (space is None or space.startswith(MCP_NAMESPACE)) and "__" in name  # fmt: skip
    return _Call(group, line, name, cid, action, shell, terminal=terminal, mcp=mcp)


def call_action(name: str, args: Any, place: str = "arguments") -> Action:
    """The action a Codex function call `name(args)` is, as in a rollout (module doc); also
    for files other tools wrote from a rollout (harbor's ATIF keeps a call's
    `function_name` and `arguments`)."""
    return _function_call(name, args, place)[1]


def _function_call(name: str, args: Any, place: str) -> tuple[str, Action, bool, bool]:
    """(name, action, whether its output is in the exec framing, in the terminal framing)
    of a `function_call` `name(args)`: a shell's argv or line is a command (an
    `apply_patch` argv Codex's own patch tool), unified exec the terminal's input (its
    arguments it could not read stay a tool call: Codex refused it), any other function
    a tool call."""
    parsed = args
    if isinstance(args, str):
        try:
            parsed = parse_json(args) if args.strip() else {}
        except ValueError:  # TooDeep too: a tool call, which `tool_action` refuses
            parsed = None
    command = parsed.get("command") if isinstance(parsed, dict) else None
    if name in SHELLS and isinstance(command, list) and command and all(isinstance(a, str) for a in command):  # fmt: skip
        if command[0] == PATCH and len(command) == 2:  # Codex applies it, not the shell
            return PATCH, tool_action(PATCH, {"input": command[1]}), True, False
        return name, Action("command", _shell_line(command), name=name), True, False
    if name == SHELL_LINE and isinstance(command, str):
        return name, Action("command", command, name=name), True, False
    if name in TERMINAL:
        action = _terminal_action(name, parsed) or tool_action(name, args, place)
        return name, action, False, True
    return name, tool_action(name, args, place), name == PATCH, False


def _terminal_action(name: str, args: Any) -> Action | None:
    """A unified exec call as what the terminal received: `exec_command`'s `cmd` is a
    command (as the other shell tools'); `write_stdin`'s `chars` are keystrokes to its
    session; v1 `unified_exec` is a command without a `session_id` (its `input` is the
    argv), else keystrokes (its `input` joined by spaces, as Codex wrote them). None:
    arguments Codex could not read (it answered so: no turn)."""
    if not isinstance(args, dict):
        return None
    if name == EXEC and isinstance(args.get("cmd"), str):
        return Action("command", args["cmd"], name=name)
    if name == STDIN:
        sid = _session_id(args.get("session_id", args.get("process_id")))
        chars = args.get("chars", "")
        if sid is not None and isinstance(chars, str):
            return _keys(chars, sid, name, args.get("yield_time_ms"))
    if name == UNIFIED_V1:
        argv = args.get("input")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return None
        sid = args.get("session_id")
        if sid is None and argv:
            return Action("command", _shell_line(argv), name=name)
        if (sid := _session_id(sid)) is not None:
            return _keys(" ".join(argv), sid, name, args.get("timeout_ms"))
    return None


def _user(g: _Group, meta: dict[str, Any]) -> None:
    """A user message: the user's words (role USER), Codex's context (role None, read into
    `meta`), or text Codex wrote (role None, `why`)."""
    text = _plain(g.said)
    low = text.lstrip().lower()
    if low.startswith(CONTEXT):
        if (m := _INSTRUCTIONS.match(text)) is not None:
            meta.setdefault("user_instructions", m["a"] if m["a"] is not None else m["b"])
        if low.startswith("<environment_context>") and (c := _CWD.search(text)) is not None:
            meta.setdefault("context_cwd", c[1].strip())
        g.role = None
        return
    for prefix, why in HARNESS_USER:
        if low.startswith(prefix):
            g.role, g.why = None, why
            return
    if not text.strip() and not content_text(g.said)[1]:
        g.role = None
        return
    g.role = USER


def _groups(lines: list[_Line], meta: dict[str, Any]) -> tuple[list[_Group], list[_Call]]:
    groups: list[_Group] = []
    calls: list[_Call] = []
    for line in lines:
        if line.kind != "response_item":
            continue
        p = line.p
        kind = p["type"]
        model = kind in (*CALLS, "reasoning") or (kind == "message" and p["role"] == "assistant")
        if model:
            last = groups[-1] if groups else None
            if last is None or last.role != AGENT:
                last = _Group(AGENT)
                groups.append(last)
            last.lines.append(line)
            if kind in CALLS:
                c = _call(len(groups) - 1, line)
                last.calls.append(c)
                calls.append(c)
            elif kind == "message":
                last.said += _texts(p)
        elif kind in OUTPUTS:
            if not groups or groups[-1].role != "tool":
                groups.append(_Group("tool"))
            groups[-1].lines.append(line)
        elif kind == "message" and p["role"] == "user":
            g = _Group(USER, [line], said=_texts(p))
            _user(g, meta)
            groups.append(g)
        elif kind == "message":  # developer / system: Codex's instructions to the model
            groups.append(_Group(None, [line]))
    return groups, calls


# -- observations ------------------------------------------------------------------------


class _Reader:
    def __init__(
        self,
        parts: NonText,
        ends: dict[str, dict[str, Any]],
        mcp_ends: dict[str, dict[str, Any]] | None = None,
        images: dict[str, tuple[list[Any], str]] | None = None,
        typescript: bool = False,
    ):
        self.parts, self.ends = parts, ends
        self.typescript = typescript
        """A TypeScript codex-cli session: its own answers read first (`_typescript_answer`)."""
        self.mcp_ends = mcp_ends or {}
        """`mcp_tool_call_end` by call id (persisted only in Codex's extended history)."""
        self.images = images or {}
        """The image message Codex injected for a view_image call: (its content, where)."""

    def answer(self, c: _Call, turn: int) -> tuple[Observation | None, tuple[str, str] | None]:
        """(observation, None) or (None, (kind, why)) when no turn is made."""
        assert c.output is not None
        o = c.output.p["output"]
        place = f"turn {turn} observation ({c.output.where}: {c.output.pre}output)"
        if isinstance(o, dict):
            o = o["content"]
        if self.typescript and isinstance(o, str) and (why := _typescript_refused(c, o)):
            return None, why
        if isinstance(o, str) and (why := _refused(o)) is not None:
            return None, why
        if c.mcp:
            return self._mcp(o, c, place)
        if isinstance(o, list):
            if not _text_only(o):  # an image, a dynamic tool's content items
                o, cut = _items_uncut(o)
                return self._said(o, c, place, truncated=cut)
            o = content_text(o)[0]  # text items: the text the tool answered
            if (why := _refused(o)) is not None:
                return None, why
        if c.name == VIEW_IMAGE and o == IMAGE_ATTACHED:  # its answer is the image alone
            content, where = self.images.get(c.call_id, ([], ""))
            if (left := textless(content, where)) is not None:
                return None, ("unpaired_call", no_text([(where, left)]))
            why = f"Codex answered {IMAGE_ATTACHED!r} and kept no image after it"
            return None, ("unpaired_call", f"{why}: what it answered is unknown")
        end = self.ends.get(c.call_id)
        if end is not None and end.get("status") == "declined":
            return None, ("not_run", "the user declined it (exec_command_end status declined)")
        if c.terminal:
            return self._terminal(o, c)
        if c.shell:
            return self._shell(o, end), None
        return self._tool(o, c, place)

    def _said(
        self, content: Any, c: _Call, place: str, **observed: Any
    ) -> tuple[Observation | None, tuple[str, str] | None]:
        """The observation of call `c` whose answer is content parts (items, MCP blocks):
        their text, its other parts `non_text_part`; no turn when they hold no text (an
        image only: `common.no_text`), which is no empty output."""
        field_ = f"{c.output.pre}output"
        if (left := textless(content, field_)) is not None:
            return None, ("unpaired_call", no_text([(field_, left)]))
        return Observation(self.parts.text(content, place), **observed), None

    def _shell(self, text: str, end: dict[str, Any] | None) -> Observation:
        seen = _framed(text)
        if seen is None:
            if (m := _SANDBOX.match(text)) is not None:
                error = m["error"]
                if (d := _DENIED.match(error)) is not None:
                    out = "\n".join(x for x in (d["out"], d["err"]) if x)
                    return Observation(out, is_error=True, exit_code=int(d["code"]))
                return timed_out("")  # the sandbox's timeout (the others are refused)
            if _TIMEOUT.fullmatch(text.rstrip("\n")):
                return timed_out("")
            seen = Observation(text)  # no framing (an error Codex wrote, a custom tool)
        if end is None:
            return seen
        out = end.get("aggregated_output")
        if not isinstance(out, str) or not out:
            out = "".join(x for x in (end.get("stdout"), end.get("stderr")) if isinstance(x, str))
        state = seen.state_json
        if state and parse_json(state).get("timed_out"):
            return timed_out(out)
        if end.get("type") == "patch_apply_end":
            return Observation(out, is_error=end.get("success") is False)
        code = end.get("exit_code")
        return Observation(out, is_error=bool(code), exit_code=code)

    @staticmethod
    def _terminal(text: str, c: _Call) -> tuple[Observation | None, tuple[str, str] | None]:
        """A unified exec answer: its own error is no turn; else the output in its
        framing (an exec_command Codex answered as apply_patch: the exec framing), or the
        text as it is. Its `exec_command_end` is not read: it holds the whole process's
        output, which later write_stdin calls were shown in parts."""
        if (why := _terminal_refused(text)) is not None:
            return None, why
        seen = _terminal_v1(text) if c.name == UNIFIED_V1 else _terminal(text)
        if seen is None and c.name == EXEC:
            seen = _framed(text)
        return seen or Observation(text), None

    def _mcp(
        self, o: str | list[Any], c: _Call, place: str
    ) -> tuple[Observation | None, tuple[str, str] | None]:
        """An MCP call's answer: the server's result without Codex's framing - its content's
        text (images `non_text_part`), its structured content as Codex showed it (the JSON
        text), `isError` as the error when the rollout kept it - or no turn when Codex
        answered itself. Codex's `mcp_tool_call_end`, when the rollout kept it, says which:
        `Err` is Codex's own error, `Ok` the server's result (whatever its text)."""
        end = self.mcp_ends.get(c.call_id)
        result = end.get("result") if end is not None else None
        ok = result.get("Ok") if isinstance(result, dict) else None
        err = result.get("Err") if isinstance(result, dict) else None
        args_read = _args_read(c.line.p.get("arguments"))
        if isinstance(err, str):
            why = _mcp_error(err, args_read)
            return None, why or ("harness_failure", f"Codex's MCP call failed ({shown(err, 80)})")
        error = isinstance(ok, dict) and ok.get("isError", ok.get("is_error")) is True
        if isinstance(o, list):  # content items: the header an item of its own
            first = o[0] if o else None
            if isinstance(first, dict) and _MCP_HEADER_ITEM.match(str(first.get("text"))):
                o = o[1:]
            o, cut = _items_uncut(o)
            return self._said(o, c, place, is_error=error, truncated=cut)
        m = _MCP_FRAME.match(o)
        body = o if m is None else m["body"] or ""
        if m is not None and (cut := _budget_cut(o)) is not None:
            at = m.start("body")
            return self._cut(body, (cut[0] - at, cut[1] - at), place, error), None
        value = _json_value(body)
        said = body if m is None and value is None else _lone_text(value)
        if ok is None and said is not None and (why := _mcp_error(said, args_read)) is not None:
            return None, why
        if _blocks(value):
            return self._said(value, c, place, is_error=error)
        if isinstance(value, dict) and isinstance(value.get("content"), list) and set(value) <= RESULT_KEYS:  # fmt: skip
            error = error or value.get("isError", value.get("is_error")) is True
            return self._said(value["content"], c, place, is_error=error)
        return Observation(body, is_error=error), None  # structured content, or plain text

    def _cut(self, body: str, cut: tuple[int, int], place: str, error: bool) -> Observation:
        """An MCP result Codex cut to its budget (`truncate_text` over the framed text, `cut`
        the marker's span in `body`): the head and the tail shown, `truncated`; the blocks'
        text when both ends read as the content blocks they cut, else the two ends as they
        stand."""
        head, tail = body[: cut[0]], body[cut[1] :]
        before = _json_value(head + '"}]')
        after = _json_value('[{"type":"text","text":"' + tail)
        if _blocks(before) and _blocks(after):
            head, left = content_text(before)
            tail, right = content_text(after)
            if left + right:
                self.parts.left.append((place, left + right))
        return Observation(_ends(head, tail), is_error=error, truncated=True)

    def _tool(
        self, text: str, c: _Call, place: str
    ) -> tuple[Observation | None, tuple[str, str] | None]:
        """Another tool's output: an MCP result's content (`{content, isError}` JSON), else
        the text."""
        if text.startswith("{"):
            try:
                d = parse_json(text)
            except ValueError:  # TooDeep too: the output, as text
                d = None
            if isinstance(d, dict) and isinstance(d.get("content"), list) and set(d) <= {"content", "isError", "is_error", "structuredContent", "structured_content", "_meta"}:  # fmt: skip
                error = d.get("isError", d.get("is_error")) is True
                return self._said(d["content"], c, place, is_error=error)
        return Observation(text), None


# -- the trajectory ------------------------------------------------------------------


def parse(path: Path, domain: str | None = None) -> Iterator[tuple[int, Any]]:
    """(origin index, Trajectory | ImportProblem) of everything in a rollout file, or in a
    TypeScript codex-cli session (`--format codex` on a `.json` file `detect` takes), or
    in `codex exec --json` output (`exec_json`)."""
    if not path.name.endswith(".json") and exec_json(path):
        yield from ((0, x) for x in _exec_events(path, domain))
        return
    if path.name.endswith(".json"):  # a codex-cli session, never a rollout's lines
        data = read_json(path)
        if not isinstance(data, ImportProblem) and not detect(path, data):
            why = "not a codex-cli session ({session, items})"
            data = ImportProblem(str(path), "", "unrecognized", why)
        if isinstance(data, ImportProblem):
            yield 0, data
            return
        yield from ((0, x) for x in parse_document(path, data, domain))
        return
    lines, problems = _read(path)
    yield from ((0, p) for p in problems)
    if not any(line.kind == "response_item" for line in lines):
        if not any(p.fatal for p in problems):  # warnings alone would end it at exit 0
            yield 0, ImportProblem(str(path), "", "empty", "no Codex response item in the file")
        return
    yield from ((0, x) for x in _trajectory(path, lines, domain))


# -- the TypeScript codex-cli's sessions ---------------------------------------------

TS_SESSION = frozenset({"timestamp", "id", "instructions", "model", "provider", "lastResponseId"})
"""The `session` header the TypeScript codex-cli wrote (codex-cli/src/utils/storage/
save-rollout.ts: `timestamp, id, instructions`; later `model, provider, lastResponseId`)."""


TS_OWN_CHARS = 512
"""Longer than any answer codex-cli wrote itself (`aborted` with its metadata: ~120
characters)."""


def detect(path: Path, data: Any) -> bool:
    """A TypeScript codex-cli session (`~/.codex/sessions/rollout-<date>-<id>.json`, the
    CLI before codex-rs): one JSON document `{session: {timestamp, id, ...}, items:
    [Responses API items]}`, rewritten whole after every turn."""
    if not isinstance(data, dict) or set(data) != {"session", "items"}:
        return False
    head = data["session"]
    return (
        isinstance(head, dict)
        and set(head) <= TS_SESSION
        and isinstance(head.get("id"), str)
        and isinstance(head.get("timestamp"), str)
        and isinstance(data["items"], list)
    )


def parse_document(path: Path, data: dict[str, Any], domain: str | None = None) -> Iterator[Any]:
    """A TypeScript codex-cli session (a `.json` file `detect` took): its items read as a
    rollout's response items, each named `items[N]`."""
    lines, problems = _document_lines(path, data)
    yield from problems
    if not any(line.kind == "response_item" for line in lines):
        if not any(p.fatal for p in problems):
            yield ImportProblem(str(path), "", "empty", "no codex-cli item in the session")
        return
    yield from _trajectory(path, lines, domain, typescript=True)


def _document_lines(path: Path, data: dict[str, Any]) -> tuple[list[_Line], list[ImportProblem]]:
    head = data["session"]
    at = iso_timestamp(head.get("timestamp"), "session.timestamp")
    meta = {k: head[k] for k in ("id", "timestamp", "instructions") if k in head}
    lines = [_Line(0, "session_meta", meta, at, "session.", "session")]
    if isinstance(head.get("model"), str):  # the model of the whole session
        lines.append(_Line(0, "turn_context", {"model": head["model"]}, at, "session.", "session"))
    problems: list[ImportProblem] = []
    unknown: dict[str, list[int]] = {}
    for i, d in enumerate(data["items"]):
        where = f"items[{i}]"
        if not isinstance(d, dict) or d.get("type") not in ITEM_TYPES:
            kind = shown(d.get("type")) if isinstance(d, dict) else type(d).__name__
            unknown.setdefault(kind, []).append(i)
            continue
        line = _Line(i + 1, "response_item", d, None, "", where)
        try:
            _check(line)
        except InvalidField as exc:  # the message names the field; only this item is lost
            problems.append(ImportProblem(str(path), where, "invalid", str(exc)))
            continue
        lines.append(line)
    for kind, ns in unknown.items():
        problems.append(
            file_warning(
                path,
                f"items[{ns[0]}]",
                "message_not_imported",
                f"{plural(len(ns), 'item')} of type {kind} (items {', '.join(map(str, ns))}):"
                " not a type codex-cli recorded; not imported",
            )
        )
    return lines, problems


DOCUMENT = Document(NAME, detect, parse_document)
"""A session written as one JSON document, in the registry (`common.Document`)."""


def _typescript_refused(c: _Call, text: str) -> tuple[str, str] | None:
    """(kind, why) when codex-cli answered a call itself (agent-loop.ts
    `handleFunctionCall`, handle-exec-command.ts): `aborted` (the user declined the
    command, its policy rejected it, or a cancel came before it answered), an empty output
    with no metadata (cancelled while it ran), `no function found`, `invalid arguments:
    ...`. Else None: a command's `{"output", "metadata": {"exit_code",
    "duration_seconds"}}` is read as a rollout's (its output, stdout else stderr, and
    exit code)."""
    if text == "no function found":
        return ("not_run", "codex-cli has no such tool")
    if text.startswith("invalid arguments: "):
        return ("not_run", "codex-cli could not read the call's arguments")
    # codex-cli's own answers are short; a command's output is parsed once, by `_framed`
    d = _json_object(text) if c.shell and len(text) <= TS_OWN_CHARS else None
    if d is None or set(d) != {"output", "metadata"}:
        return None  # read as a rollout's
    meta = d["metadata"] if isinstance(d["metadata"], dict) else {}
    if d["output"] == "aborted":
        if meta.get("error") == "command rejected":
            return ("not_run", "codex-cli's approval policy rejected the command")
        if not meta:
            return ("not_run", "the user declined the command at codex-cli's prompt")
        return ("not_run", "the turn was cancelled before the call answered")
    if d["output"] == "" and not meta:
        return ("not_run", "the turn was cancelled while the command ran; no output kept")
    return None


def _trajectory(
    path: Path, lines: list[_Line], domain: str | None, typescript: bool = False
) -> Iterator[Any]:
    metas = [line.p for line in lines if line.kind == "session_meta"]
    meta0 = metas[0] if metas else {}
    ctx: dict[str, Any] = {}
    kept, dropped = _rolled_back(path, lines)
    yield from dropped
    groups, calls = _groups(kept, ctx)
    by_id: dict[str, _Call] = {}
    for c in calls:
        by_id.setdefault(c.call_id, c)
    ends: dict[str, dict[str, Any]] = {}
    mcp_ends: dict[str, dict[str, Any]] = {}
    for line in kept:
        p = line.p
        if line.kind == "event_msg" and p["type"] in ("exec_command_end", "patch_apply_end"):
            ends.setdefault(p["call_id"], p)
        elif line.kind == "event_msg" and p["type"] in MCP_EVENTS:
            c = by_id.get(p["call_id"])
            if c is not None and not (c.shell or c.terminal):
                c.mcp = True  # a call Codex routed to an MCP server, whatever its name
            if p["type"] == "mcp_tool_call_end":
                mcp_ends.setdefault(p["call_id"], p)
        elif line.kind == "response_item" and p["type"] in OUTPUTS:
            c = by_id.get(p["call_id"])
            if c is None or c.output is not None:
                why = (
                    "answers no call of the rollout"
                    if c is None
                    else "answers a call already answered"
                )
                yield file_warning(path, line.where, "unpaired_result", f"{p['type']} for {p['call_id']!r} {why}; not imported")  # fmt: skip
                continue
            c.output = line
    yield from _left_out(path, lines, kept, groups)
    images = _attached_images(groups, calls)

    said, last, unsaid = conversation(
        [{"i": i} for i in range(len(groups))],
        lambda m: groups[m["i"]].role,
        lambda m: not groups[m["i"]].calls and bool(_plain(groups[m["i"]].said).strip()),
    )
    for n, what in unsaid:
        yield file_warning(path, groups[n].where, "message_not_imported", f"{what}; not imported")
    parts = NonText()
    reader = _Reader(parts, ends, mcp_ends, images, typescript)
    turns: list[tuple[int, int, Any]] = [(c.group, j, c) for j, c in enumerate(calls)]
    turns = sorted([*turns, *((x.at, -1, x) for x in said)], key=lambda t: (t[0], t[1]))
    pairs: list[tuple[Action, Observation, str | None]] = []
    starts: list[datetime | None] = []
    at_lines: list[int] = []
    reasoned: set[int] = set()
    names: list[str] = []
    for gi, _, x in turns:
        g = groups[gi]
        if not isinstance(x, _Call):
            pairs.append(
                x.turn(
                    lambda n: (
                        groups[n].said,
                        f"{groups[n].where}: {groups[n].lines[0].pre}content",
                    ),
                    len(pairs),
                    parts,
                    _thought(g),
                )
            )
            starts.append(g.lines[-1].at)
            at_lines.append(g.n)
            continue
        c = x
        if c.output is None:
            yield file_warning(path, c.line.where, "unpaired_call", f"{c.name} call {c.call_id!r}: no output; no turn (what the environment answered is unknown)")  # fmt: skip
            continue
        obs, no_turn = reader.answer(c, len(pairs))
        if obs is None:
            kind, why = no_turn
            yield file_warning(path, c.output.where, kind, f"{c.name} call {c.call_id!r} ({c.line.where}): {why}; no turn")  # fmt: skip
            continue
        names.append(c.name)
        reasoning = None
        if gi not in reasoned:
            reasoned.add(gi)
            prose = parts.text(g.said, f"turn {len(pairs)} reasoning ({g.where}: content)")
            reasoning = join_reasoning(_thought(g), prose)
        pairs.append((c.action, obs, reasoning))
        starts.append(c.line.at)
        at_lines.append(c.line.n)

    for gi, g in enumerate(groups):  # its text is a turn's reasoning: none took it
        if g.calls and gi not in reasoned and _plain(g.said).strip():
            at = next((x.where for x in g.lines if x.p.get("type") == "message"), g.where)
            yield file_warning(path, at, "message_not_imported", "the agent's text in a response whose calls made no turn; not imported")  # fmt: skip
    task = next(
        (
            parts.text(g.said, f"task ({g.where}: {g.lines[0].pre}content)")
            for g in groups
            if g.role == USER
        ),
        None,
    )
    final = last and parts.text(
        groups[last.at].said, f"final message ({groups[last.at].where}: content)"
    )
    yield from parts.warnings()
    contexts = [line.p for line in lines if line.kind == "turn_context"]
    models = list(dict.fromkeys(p["model"] for p in contexts if isinstance(p.get("model"), str)))
    git = meta0.get("git") if isinstance(meta0.get("git"), dict) else {}
    base = meta0.get("base_instructions")
    base = base.get("text") if isinstance(base, dict) else base
    cwd = meta0.get("cwd") or next(
        (p["cwd"] for p in contexts if isinstance(p.get("cwd"), str)), None
    )
    first_ctx = contexts[0] if contexts else {}
    sandbox = first_ctx.get("sandbox_policy")
    sandbox = sandbox.get("mode", sandbox.get("type")) if isinstance(sandbox, dict) else sandbox
    origin = meta0.get("id") or origin_stem(path)
    t = build(
        NAME,
        origin,
        domain or guess_domain((_bare(n) for n in names), "swe"),
        pairs,
        task_description=task,
        instruction=task,
        agent={"name": "codex", "model": models[0] if models else None},
        outcome=Outcome(),
        metadata={
            "cwd": cwd or ctx.get("context_cwd"),
            "git_branch": git.get("branch"),
            "git_commit": git.get("commit_hash"),
            "repository_url": git.get("repository_url"),
            "codex_version": meta0.get("cli_version"),
            "originator": meta0.get("originator"),
            "models": models if len(models) > 1 else None,
            "approval_policy": first_ctx.get("approval_policy"),
            "sandbox": sandbox,
            "agent_system_prompt": base if isinstance(base, str) else None,
            "user_instructions": meta0.get("instructions") or ctx.get("user_instructions"),
            "forked_from": meta0.get("forked_from_id"),
            "undo_before_turns": _undos(lines, at_lines),
            "final_message": final,
        },
    )
    for turn, at in zip(t.turns, starts, strict=True):
        turn.started_at = at
    times = [line.at for line in lines if line.at is not None]
    t.started_at = min(times) if times else None
    yield t


def _attached_images(groups: list[_Group], calls: list[_Call]) -> dict[str, tuple[list[Any], str]]:
    """The image each view_image call attached: Codex answers the call `attached local image
    path` and injects the image as a user message of its own after the outputs
    (handlers/view_image.rs). That message is the tool's answer, not the user's: it leaves the
    conversation (role None) and its content goes with the call (call id -> (content, where))."""
    group_of = {line.n: i for i, g in enumerate(groups) for line in g.lines}
    images: dict[str, tuple[list[Any], str]] = {}
    for c in calls:
        if c.name != VIEW_IMAGE or c.output is None or c.output.p["output"] != IMAGE_ATTACHED:
            continue
        n = group_of.get(c.output.n, len(groups)) + 1
        # parallel calls: their images follow the outputs in the order of the calls
        while n < len(groups) and groups[n].role is None and groups[n].lines[0].p.get("role") == "user" and not _plain(groups[n].said).strip():  # fmt: skip
            n += 1
        g = groups[n] if n < len(groups) else None
        if g is None or g.role != USER or _plain(g.said).strip():
            continue
        g.role = None
        images[c.call_id] = (g.said, f"{g.where}: {g.lines[0].pre}content")
    return images


def _turn_start(line: _Line) -> bool:
    """Whether a response item begins a user turn, as Codex counts them to roll back
    (`is_user_turn_boundary`): a user message that is not its context or a `!` command."""
    p = line.p
    if p["type"] != "message" or p["role"] != "user":
        return False
    low = _plain(_texts(p)).lstrip().lower()
    return not low.startswith((*CONTEXT, "<user_shell_command>"))


def _rolled_back(path: Path, lines: list[_Line]) -> tuple[list[_Line], list[ImportProblem]]:
    """The lines without what a rollback took out of the conversation, and a warning per
    rollback. `thread_rolled_back {num_turns}` drops the last N user turns from Codex's
    history (`drop_last_n_user_turns`): every item from the Nth last user message on
    (all user turns when N is more; none without a user message). Those turns ran, but
    the conversation that went on is the one without them."""
    live: list[_Line] = []
    gone: set[int] = set()
    problems: list[ImportProblem] = []
    for line in lines:
        if line.kind == "response_item":
            live.append(line)
            continue
        if line.kind != "event_msg" or line.p["type"] != ROLLBACK:
            continue
        starts = [i for i, x in enumerate(live) if _turn_start(x)]
        n = line.p["num_turns"]
        if not n or not starts:
            continue
        cut = starts[0] if n >= len(starts) else starts[-n]
        ns = [x.n for x in live[cut:]]
        live = live[:cut]
        gone.update(ns)
        turns = plural(min(n, len(starts)), "user turn")
        problems.append(
            file_warning(
                path,
                f"line {ns[0]}",
                "message_not_imported",
                f"{line_list(ns)}: {plural(len(ns), 'item')} of {turns} rolled back"
                f" (thread_rolled_back at line {line.n}: Codex took them out of the"
                " conversation); not imported",
            )
        )
    return [x for x in lines if x.n not in gone], problems


def _left_out(
    path: Path, lines: list[_Line], kept: list[_Line], groups: list[_Group]
) -> Iterator[ImportProblem]:
    """What the rollout holds that is neither a turn nor Codex's bookkeeping, named
    (`kept`: the lines no rollback took out)."""
    for g in groups:
        if g.why:
            yield file_warning(path, g.where, "message_not_imported", f"{g.why}; not imported")
    said = {_plain(_texts(line.p)).strip() for line in lines if line.kind == "response_item" and line.p["type"] == "message"}  # fmt: skip
    called = {line.p.get("call_id") for line in lines if line.kind == "response_item" and line.p["type"] in (*CALLS, *OUTPUTS)}  # fmt: skip
    for line in lines:
        p = line.p
        if line.kind == "compacted":
            yield from _compacted(path, line, said, called)
        elif line.kind == "event_msg" and p["type"] in DUPLICATES:
            text = p.get("message")
            if isinstance(text, str) and text.strip() and text.strip() not in said:
                who = DUPLICATES[p["type"]]
                yield file_warning(path, f"line {line.n}", "message_not_imported", f"an event_msg {p['type']} ({who}) no response item holds; not imported")  # fmt: skip
    for line in kept:
        p = line.p
        if line.kind == "response_item" and p["type"] not in (*CALLS, *OUTPUTS, "message", "reasoning", "ghost_snapshot"):  # fmt: skip
            yield file_warning(path, line.where, "message_not_imported", f"a response item of type {shown(p['type'])} (no output Codex recorded); not imported")  # fmt: skip


def _compacted(
    path: Path, line: _Line, said: set[str], called: set[Any]
) -> Iterator[ImportProblem]:
    """A `compacted` line: Codex's summary (`message`) and the history it went on with
    (`replacement_history`: its context, copies of earlier user messages - the oldest
    one kept maybe cut by `truncate_text` - and the summary; from the server's compaction,
    its `compaction` item and the messages it kept). The rollout holds those messages and
    calls where they happened, so the replacement is not read again (it would double
    them): one warning, and one more for each message or call in it that no line of the
    rollout holds (a real user message or call then lost, not a copy)."""
    history = line.p.get("replacement_history") or []
    held = f" and the history it went on with ({plural(len(history), 'item')})" if history else ""
    yield file_warning(path, f"line {line.n}", "message_not_imported", f"the summary Codex wrote when it compacted the conversation{held}; not imported")  # fmt: skip
    for i, item in enumerate(history):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and not isinstance(item.get("content"), str | list):
            continue
        if item.get("type") in (*CALLS, *OUTPUTS):
            if item.get("call_id") in called:
                continue
            what = f"a {shown(item.get('type'))} no other line holds"
        elif item.get("type") == "message" and item.get("role") in ("user", "assistant"):
            text = _plain(_texts(item)).strip()
            low = text.lower()
            if not text or _copied(text, said) or low.startswith((*CONTEXT, *(h for h, _ in HARNESS_USER))):  # fmt: skip
                continue
            what = f"a {item['role']} message no other line holds"
        else:
            continue
        yield file_warning(path, f"line {line.n}", "message_not_imported", f"payload.replacement_history[{i}]: {what}; not imported")  # fmt: skip


def _copied(text: str, said: set[str]) -> bool:
    """Whether a message of a replacement history is one the rollout holds: the same text,
    or its head and tail around `truncate_text`'s `…N tokens truncated…`."""
    if text in said:
        return True
    marks = list(_TOKEN_CUT.finditer(text))
    if len(marks) != 1:
        return False
    head, tail = text[: marks[0].start()], text[marks[0].end() :]
    return any(x.startswith(head) and x.endswith(tail) for x in said)


def _undos(lines: list[_Line], at_lines: list[int]) -> list[int] | None:
    """Where the user's `/undo` restored the working tree (`undo_completed` with success):
    the index of the turn after each, i.e. the count of turns before it. Codex keeps the
    conversation (only its ghost snapshot item goes), so the turns stay; the files changed
    between them with no action (tasks/undo.rs)."""
    undone = [x.n for x in lines if x.kind == "event_msg" and x.p["type"] == UNDO and x.p["success"]]  # fmt: skip
    return [sum(1 for n in at_lines if n < u) for u in undone] or None


def _thought(g: _Group) -> str | None:
    texts: list[str] = []
    for line in g.lines:
        p = line.p
        if p.get("type") != "reasoning":
            continue
        for key in ("summary", "content"):
            text = content_text([x for x in p.get(key) or [] if isinstance(x, dict | str)])[0]
            texts += [text] if text.strip() else []
    return join_reasoning(*texts)


def _bare(name: str) -> str:
    """A tool name for the domain: Codex's shells as `shell`, an MCP tool of the older
    `server__tool` naming without its server (`guess_domain` reads `mcp__server__tool`)."""
    if name in (*SHELLS, SHELL_LINE, LOCAL_SHELL, *TERMINAL):
        return "shell"
    return name if name.startswith(MCP_NAMESPACE) else name.split("__", 1)[-1]


# -- `codex exec --json` ---------------------------------------------------------------

EXEC_NOT_TURNS = {
    "file_change": "a file change (the output names the files and their kind, not the patch)",
    "web_search": "a web search (the output keeps its query, not what it found)",
    "todo_list": "Codex's to-do list (its plan tool)",
    "plan": "a plan (plan mode's proposal)",
    "collab_tool_call": "a call of another agent (collab tool)",
    "error": "Codex's own error notice",
}
"""Items of `codex exec --json` that make no turn, and why (codex-rs/exec/src/
exec_events.rs `ThreadItemDetails`)."""


@file_cached
def exec_json(path: Path) -> bool:
    """Whether `path` is `codex exec --json` output (codex-rs/exec
    event_processor_with_jsonl_output.rs, `ThreadEvent`s): its first JSON line is
    `{type: thread.started, thread_id}`."""
    d = next(json_head(path, SNIFF_LINES), None)
    return (
        isinstance(d, dict)
        and d.get("type") == "thread.started"
        and isinstance(d.get("thread_id"), str)
    )


def _exec_events(path: Path, domain: str | None) -> Iterator[Any]:
    """`codex exec --json` output as one trajectory: each item in the order it first
    appeared, as its last state (`item.completed`, else the latest `item.started` /
    `item.updated`). A `command_execution` is a `command` (`bash -lc X` is X) answered by
    its `aggregated_output` (the process's own output, whole) and `exit_code`; `declined`
    (the user's or the policy's refusal): no turn, `not_run`; never completed: no turn,
    `unpaired_call`. An `mcp_tool_call` is the tool call `mcp__server__tool(arguments)`
    answered by its result's text content (an error with no result: no turn,
    `harness_failure`). `reasoning` and `agent_message` items before a call are its
    reasoning; the last agent message, after every call, is metadata `final_message`.
    `EXEC_NOT_TURNS` items and `turn.failed` / `error` events are reported. The prompt is
    not in the output: the task is unknown."""
    items: dict[str, tuple[int, dict[str, Any]]] = {}
    thread: str | None = None
    problems: list[ImportProblem] = []
    failed: list[tuple[int, str]] = []
    for n, d in jsonl_values(path):
        if isinstance(d, ImportProblem):
            problems.append(d)
            continue
        kind = d.get("type") if isinstance(d, dict) else None
        if kind == "thread.started" and thread is None:
            thread = d.get("thread_id") if isinstance(d.get("thread_id"), str) else None
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = d.get("item")
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                problems.append(
                    ImportProblem(
                        str(path),
                        f"line {n}",
                        "invalid",
                        str(expected("item", "an item with an id", item)),
                    )
                )
                continue
            first = items.get(item["id"], (n, item))[0]
            items[item["id"]] = (first, item)
        elif kind in ("turn.failed", "error"):
            err = d.get("error") if kind == "turn.failed" else d
            message = err.get("message") if isinstance(err, dict) else None
            failed.append((n, f"{kind}: {shown(message)}"))
    yield from problems
    for n, what in failed:
        yield file_warning(
            path, f"line {n}", "message_not_imported", f"{what} (Codex's own error); not imported"
        )
    pairs: list[tuple[Action, Observation, str | None]] = []
    names: list[str] = []
    said: list[str] = []
    final: str | None = None
    parts = NonText()
    for n, item in sorted(items.values(), key=lambda x: x[0]):
        kind, where, status = item.get("type"), f"line {n}", item.get("status")
        if kind in ("reasoning", "agent_message"):
            text = item.get("text")
            if isinstance(text, str) and text.strip():
                said.append(text)
                final = text if kind == "agent_message" else final
            continue
        if kind in EXEC_NOT_TURNS:
            yield file_warning(
                path,
                where,
                "message_not_imported",
                f"item {item['id']}: {EXEC_NOT_TURNS[kind]}; not imported",
            )
            continue
        if kind == "command_execution":
            command = item.get("command")
            if not isinstance(command, str):
                yield ImportProblem(
                    str(path), where, "invalid", str(expected("item.command", "a string", command))
                )
                continue
            try:
                argv = shlex.split(command)
            except ValueError:
                argv = []
            action = Action("command", _shell_line(argv) if argv else command, name="exec_command")
            if status == "declined":
                yield file_warning(
                    path,
                    where,
                    "not_run",
                    f"item {item['id']} ({shown(command)}): declined, never run; no turn",
                )
                continue
            output, code = item.get("aggregated_output"), item.get("exit_code")
            if status not in ("completed", "failed") or not isinstance(output, str):
                yield file_warning(
                    path,
                    where,
                    "unpaired_call",
                    f"item {item['id']} ({shown(command)}): status {shown(status)}, no output; no turn (what the environment answered is unknown)",
                )
                continue
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            obs = Observation(output, exit_code=code, is_error=code != 0 or status == "failed")
        elif kind == "mcp_tool_call":
            server, tool = item.get("server"), item.get("tool")
            if not isinstance(server, str) or not isinstance(tool, str) or not tool:
                yield ImportProblem(
                    str(path),
                    where,
                    "invalid",
                    str(expected("item.tool", "a server and a tool name", [server, tool])),
                )
                continue
            name = f"{MCP_NAMESPACE}{server}__{tool}"
            try:
                action = tool_action(name, item.get("arguments") or {}, "item.arguments")
            except InvalidField as exc:
                yield ImportProblem(str(path), where, "invalid", str(exc))
                continue
            result, error = item.get("result"), item.get("error")
            if not isinstance(result, dict):
                why = error.get("message") if isinstance(error, dict) else None
                kind_ = "harness_failure" if status == "failed" else "unpaired_call"
                yield file_warning(
                    path,
                    where,
                    kind_,
                    f"item {item['id']} ({name}): status {shown(status)}, no result ({shown(why)}); no turn",
                )
                continue
            place = f"turn {len(pairs)} observation ({where}: item.result.content)"
            try:
                left = textless(result.get("content"), "item.result.content")
                text = "" if left else parts.text(result.get("content") or [], place)
            except InvalidField as exc:
                yield ImportProblem(str(path), where, "invalid", str(exc))
                continue
            if left:  # a screenshot: what it answered in text is unknown, never ""
                why = no_text([("item.result.content", left)])
                yield file_warning(path, where, "unpaired_call", f"item {item['id']} ({name}): {why}; no turn")  # fmt: skip
                continue
            obs = Observation(text, is_error=status == "failed")
        else:
            yield file_warning(
                path,
                where,
                "message_not_imported",
                f"item {item['id']} of type {shown(kind)}; not imported",
            )
            continue
        names.append(action.name or "")
        pairs.append((action, obs, join_reasoning(*said)))
        said, final = [], None
    for w in parts.warnings():
        yield file_warning(path, "", w.kind, w.message)
    if not pairs:
        yield ImportProblem(str(path), "", "empty", "no command or tool call in the output")
        return
    yield build(
        NAME,
        thread or origin_stem(path),
        domain or guess_domain((_bare(x) for x in names), "swe"),
        pairs,
        agent={"name": NAME, "model": None},
        outcome=Outcome(),
        metadata={"final_message": final, "output": "codex exec --json"},
    )
