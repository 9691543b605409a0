"""Gemini CLI session recordings: `~/.gemini/tmp/<project_hash>/chats/session-<time>-<id>.json`
(one JSON document, before v0.40) or `.jsonl` (v0.40+, one record a line), read as one
file (a session), not line by line.

Read in google-gemini/gemini-cli: packages/core/src/services/chatRecordingService.ts (the
JSON layout at 9a91371d: `writeConversation` rewrites `{sessionId, projectHash, startTime,
lastUpdated, messages, summary?, directories?}` pretty-printed; the JSONL layout at
016443b5: `appendRecord` writes the metadata line first, then each message record whole,
again whole whenever it changes (`pushMessage`: same `id`, same place), `{$set: {...}}`
metadata updates (`lastUpdated`, `summary`, `directories`, `sessionId`, `messages`) and
`{$rewindTo: id}`; `loadConversationRecord` reads them back), chatRecordingTypes.ts and
conversationRecordSchema.ts (messages `{id, timestamp, type: user|gemini|info|error|warning,
content: PartListUnion, displayContent?}`, a gemini message's `toolCalls: [{id, name, args,
result: Part[] | null, status, timestamp, resultDisplay?, ...}]`, `thoughts: [{subject,
description, timestamp}]`, `tokens`, `model`), core/geminiChat.ts
(`recordCompletedToolCalls`: `result` is the call's `responseParts`), core/client.ts (its
next-speaker check sends `Please continue.` as the user), the scheduler
(the older core/coreToolScheduler.ts, scheduler/scheduler.ts, state-manager.ts,
tool-executor.ts, policy.ts) and utils/generateContentResponseUtilities.ts
(`convertToFunctionResponse`: `[{functionResponse: {id, name, response: {output}}}, ...]`;
an error `{response: {error}}`, since tool-executor.ts also with the tool's `output`), and
tools/shell.ts in three layouts: the earliest `Command/Directory/Stdout/Stderr/Error/Exit
Code/Signal/Background PIDs/Process Group PGID` (as the tool's description still lists it
in the gemini-cli-core dist read, IanLuo/nix-config), that dist's `Command/Directory/Output/
...` with `(none)` lines, and the current `Output: ...[\\nError: ...][\\nExit Code: N]
[\\nSignal: S][\\nBackground PIDs: ...][\\nProcess Group PGID: N]`; tools/read-file.ts and
utils/fileUtils.ts (truncation headers, `formatTruncatedToolOutput`). harbor (ayush-or/harbor,
src/harbor/agents/installed/gemini_cli.py) reads `{type: "message_update", id, ...}` records
too (merged into the message with that id): read so here, though the gemini-cli versions
read do not write them.

One trajectory per session, origin id its `sessionId`. The messages in order: the JSONL
records applied as Gemini CLI applies them (a message record again replaces its earlier
self in place; `$rewindTo` removes that message and every later one: they are reported,
`message_not_imported`, never mixed in). A `$set.messages` snapshot (Gemini CLI syncing the
record with its model history: compressed, masked) is not the conversation: what the
messages recorded stays; a message only the snapshot has (a compression summary) is
reported.

Actions: each `toolCalls[]` entry of a gemini message, in order. `run_shell_command` is a
`command` (its `command`; `description`, `dir_path`, `is_background` are options), any
other tool a tool call `name(<args JSON>)` (read_file, replace, write_file, glob, ...
as the Claude Code importer keeps Read/Edit/Write). The observation is the call's
`functionResponse.response.output` (`answer`): for a command without Gemini CLI's framing
(`Command:`/`Directory:` header, `Output:`/`Stdout:`/`Stderr:` labels, `(empty)`), its exit
code from `Exit Code: N` (0 when the current layout leaves the line out and reports no
error or signal; `(none)` none), `Signal:` and `Background PIDs:` to `state_json`, the
process group id dropped. A command's text in none of those layouts is, with
`summarizeToolOutput` set, the summarizer model's summary of a long output (not the
environment's answer): the call's `resultDisplay`, the output its user was shown, is the
observation where the record kept it. A call with no result (the session ended while it
ran) is no turn, `unpaired_call`.

Gemini CLI's own text is not the environment's answer (docs/importers.md, "Harness text"):
the user's cancel before the command started, an unknown tool, arguments that failed its
schema (`params... must ...`), a policy denial or a plan-mode refusal, `[Operation
Cancelled] ...` without output, and a shell call it answered with an error alone (it
refused it, or lost its output: `harness_failure`) make no turn (`not_run`). A command the
user interrupted keeps its output so far + `[interrupted]` (an error, no exit code,
`state_json {"interrupted": true}`), one cancelled at the inactivity timeout is
`common.timed_out`, one moved to the background shows nothing (`state_json
{"background_pid": N}`). Its output cuts (`Output too large. Showing first H and last T
characters. ...`, checked against H and T; the older `Tool output was too large and has been
truncated. ... Truncated part of the output:` with its line-count split) and read_file's
headers (`IMPORTANT: The file content has been truncated. ...`, `[File content truncated:
...]`) are `observation.truncated` with the text shown; a hook's `[System] Tool input
parameters were modified by a hook before execution.` and the placeholders beside binary
parts (`Tool execution succeeded.`, `Binary content ...`) are removed; images
`non_text_part`, and an answer of images only (a `read_file` of a PNG) no turn
(`unpaired_call`, `common.no_text`). Another tool's error (a file not found, a string to
replace not found) is an error turn with its text. Only the exact templates, whole and
in their place, are read.

Text turns as the other session importers (`common.conversation`): a gemini message with
no call, answered by the user, is a `text` turn; the last unanswered one -> metadata
`final_message`. `thoughts` (`subject: description`) and the message's own text are the
reasoning of its first call. Task <- the first user message (its text parts joined as
Gemini CLI joins them, with nothing between). Not the user's words: a user message of
function responses only (a snapshot's) is passed over; `Please continue.` (Gemini CLI's
next-speaker prompt) and `error` messages (Gemini CLI's own: a failed request) are
reported, `message_not_imported`; `info` and `warning` messages (its notices) are passed
over. Metadata: project_hash, title (`summary`), directories, kind (a subagent's session),
models (if several), final_message; agent `gemini-cli` with the first model; each turn's
`started_at` <- its message's `timestamp`, the trajectory's <- `startTime`.

Gemini CLI's model history (`/chat save`'s checkpoint `{history: Content[], authType}`, a
bare `Content[]` before, read in core/logger.ts `saveCheckpoint`/`loadCheckpoint`; `/chat
share`'s JSON) is read as a session of its own (`_contents`): a model turn's `functionCall`
parts its calls, the next user turn's `functionResponse` parts their results; Gemini CLI's
session context (metadata `session_context`), its compression summary (reported) and the
model's fixed reply to either are no turn. An output its masking service replaced with a
preview (`<tool_output_masked>`) is no turn (`harness_failure`).

A line that is not JSON, or a record or message of a shape Gemini CLI does not write, is
reported naming the line (or `messages[N]`) and the field (`invalid_json`, `invalid`) and
only it is left out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from .common import (
    AGENT,
    USER,
    Document,
    ImportProblem,
    InvalidField,
    NonText,
    Said,
    build,
    conversation,
    expected,
    file_cached,
    file_warning,
    guess_domain,
    interrupted,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    line_list,
    no_text,
    origin_stem,
    plural,
    shell_or_tool,
    shown,
    timed_out,
)
from .reading import json_head, jsonl_values, read_json

NAME = "gemini-cli"

MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")
SHELL = "run_shell_command"
READ_FILE = "read_file"
SNIFF_LINES = 16
NEXT_SPEAKER = ("Please continue.",)
"""What Gemini CLI sends as the user when its next-speaker check says the model goes on
(core/client.ts `sendMessageStream`)."""
PASSED_OVER = ("info", "warning")
"""Gemini CLI's own notices: no turn, nothing lost."""
HOOK_NOTICE = "\n\n[System] Tool input parameters were modified by a hook before execution."
PLACEHOLDERS = re.compile(
    r"Tool execution succeeded\.|Binary content of type \S+ was processed\."
    r"|Binary content provided \(\d+ item\(s\)\)\."
)
"""What Gemini CLI writes as the `output` when the content is in the parts beside it."""

# -- what Gemini CLI answered itself ------------------------------------------------------

_NOT_FOUND = re.compile(
    r'Tool "[^"\n]*" not found(?:\.| in registry\. Tools must use the exact names that are '
    r"registered\.)(?: Did you mean .*\?)?",
    re.S,
)
_BAD_PARAMS = re.compile(r"params(?:/\S*)? must ")
"""The schema check's message (ajv `errorsText` with dataVar `params`)."""
_DENIED = re.compile(r"Tool execution denied by policy\.(?: .*)?", re.S)
PLAN_MODE = "You are in Plan Mode - adjust your prompt to only use read and search tools."
_CANCELLED = re.compile(r"\[Operation Cancelled\] (?:Reason: )?(?P<reason>.*)", re.S)
SHELL_REFUSALS = (
    "Command cannot be empty.",
    "Could not identify command root to obtain permission from user.",
    "Command is not allowed: ",
    "Directory cannot be absolute.",
)
"""The shell tool's own checks of its arguments (it ran nothing)."""

# -- shell templates (tools/shell.ts) ----------------------------------------------------

NOT_STARTED = "Command was cancelled by user before it could start."
_NO_OUTPUT = " There was no output before it was cancelled."
_USER_CANCEL = re.compile(
    r"Command was cancelled by user before it could complete\.(?: Below is the output"
    r" before it was cancelled:\n(?P<out>.*)|" + re.escape(_NO_OUTPUT) + ")",
    re.S,
)
_TIMEOUT = re.compile(
    r"Command was automatically cancelled because it exceeded the timeout of \d+(?:\.\d+)? "
    r"minutes without output\.(?: Below is the output before it was cancelled:\n(?P<out>.*)|"
    + re.escape(_NO_OUTPUT)
    + ")",
    re.S,
)
_BACKGROUND = re.compile(
    r"Command moved to background \(PID: (?P<pid>\d+)\)\. Output hidden\. Press Ctrl\+B to view\."
)
EMPTY = "(empty)"
NONE = "(none)"
_OLD_TRAILER = re.compile(
    r"\nError: (?P<error>[^\n]*)\nExit Code: (?P<code>-?\d+|\(none\))\nSignal: (?P<signal>[^\n]+)"
    r"(?:\nBackground PIDs: (?P<bg>[^\n]+))?\nProcess Group PGID: (?:\d+|\(none\))\Z"
)
"""The older layouts: every line, `(none)` where there is nothing."""
_NEW_LINES = (
    ("pgid", re.compile(r"\nProcess Group PGID: \d+\Z")),
    ("bg", re.compile(r"\nBackground PIDs: (?P<v>\d+(?:, \d+)*)\Z")),
    ("signal", re.compile(r"\nSignal: (?P<v>[^\n]+)\Z")),
    ("code", re.compile(r"\nExit Code: (?P<v>-?\d+)\Z")),
    ("error", re.compile(r"\nError: (?P<v>[^\n]*)\Z")),
)
"""The current layout's lines after the output, read from the end (each only when there is
something to say)."""

_MASKED = re.compile(r"<tool_output_masked>\n|\[Tool Output Masked\]\n<tool_output_masked_guidance")
"""Gemini CLI's masking of an old, long tool output in its model history
(services/toolOutputMaskingService.ts): a preview of it in its own wrapper, the output in a
file under its temporary directory."""

# -- cuts ---------------------------------------------------------------------------------

_CUT = re.compile(
    r"Output too large\. Showing first (?P<h>[\d,]+) and last (?P<t>[\d,]+) characters\. "
    r"For full output see: [^\n]*\n"
)
_CUT_MARK = re.compile(r"\n\n\.\.\. \[[\d,]+ characters omitted\] \.\.\.\n\n")
_OLD_CUT = re.compile(
    r"Tool output was too large and has been truncated\.\nThe full output has been saved to: "
    r"[^\n]*\n.*?\nTruncated part of the output:\n",
    re.S,
)
OLD_CUT_MARK = "\n... [CONTENT TRUNCATED] ...\n"
_READ_CUT = re.compile(
    r"\nIMPORTANT: The file content has been truncated\.\nStatus: Showing lines \d+-\d+ of \d+ "
    r"total lines\.\nAction:.*?\n\n--- FILE CONTENT \(truncated\) ---\n",
    re.S,
)
_READ_NOTE = re.compile(
    r"\[File content (?:truncated: showing lines \d+-\d+ of \d+ total lines\. Use offset/limit "
    r"parameters to view more\.|partially truncated: some lines exceeded maximum length of \d+ "
    r"characters\.)\]\n"
)

# -- detection ----------------------------------------------------------------------------


def detect(path: Path, data: Any) -> bool:
    """Whether a parsed `.json` file is a Gemini CLI session written whole (before v0.40):
    `{sessionId, projectHash, messages: [...]}`, or its model history (`history`)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("sessionId"), str)
        and isinstance(data.get("projectHash"), str)
        and isinstance(data.get("messages"), list)
    ) or history(data) is not None


def history(data: Any) -> tuple[list[Any], str] | None:
    """(the contents, their field) when `data` is Gemini CLI's model history as it saves it
    (`/chat save`'s checkpoint `{history: Content[], authType?}`, a bare `Content[]` before
    it, `/chat share`'s JSON): a list of `{role: user|model, parts: [...]}` with a model
    turn; else None."""
    field_, contents = "", data
    if isinstance(data, dict) and set(data) <= {"history", "authType"}:
        field_, contents = "history", data.get("history")
    if not (isinstance(contents, list) and contents):
        return None
    for c in contents:
        if not (isinstance(c, dict) and c.get("role") in ("user", "model")):
            return None
        if not isinstance(c.get("parts"), list) or set(c) - {"role", "parts"}:
            return None
    if not any(c["role"] == "model" for c in contents):
        return None
    return contents, field_


@file_cached
def sniff(path: Path) -> bool:
    """Whether `path` is a Gemini CLI JSONL session: its first JSON line is the metadata
    record `{sessionId, projectHash, startTime?, ...}` Gemini CLI writes first (no `type`,
    no message `id`). Lines that are not JSON are passed over."""
    first = next(json_head(path, SNIFF_LINES), None)
    return _metadata(first) and "id" not in first


def _metadata(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and isinstance(d.get("sessionId"), str)
        and isinstance(d.get("projectHash"), str)
        and "type" not in d
    )


# -- reading ------------------------------------------------------------------------------


@dataclass
class _Message:
    d: dict[str, Any]
    where: str
    """Where it is, for problems: `line N` (JSONL) or `messages[N]` (JSON)."""
    n: int
    """The line it was last written on (JSONL), else its position + 1."""
    at: datetime | None = None


@dataclass
class _Session:
    meta: dict[str, Any] = field(default_factory=dict)
    messages: list[_Message] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)


def _checked_call(call: Any, at: str, what: str) -> dict[str, Any]:
    """A tool call as Gemini CLI writes one (a session's `toolCalls` item, a saved
    history's `functionCall` part): an object with a `name`, and `args` an object and
    `id` a string where given; else the field's problem, named at `at`."""
    if not isinstance(call, dict):
        raise expected(at, what, call)
    if not isinstance(call.get("name"), str) or not call["name"]:
        raise expected(f"{at}.name", "a tool name", call.get("name"))
    if call.get("args") is not None and not isinstance(call["args"], dict):
        raise expected(f"{at}.args", "an object", call["args"])
    if call.get("id") is not None and not isinstance(call["id"], str):
        raise expected(f"{at}.id", "a string", call["id"])
    return call


def _check(d: Any, pre: str = "") -> tuple[str | None, datetime | None]:
    """A message's type (None: a type Gemini CLI does not write) and timestamp;
    InvalidField names a field of a shape it does not write."""
    if not isinstance(d, dict):
        raise expected(pre or "the message", "a Gemini CLI message (a JSON object)", d)
    kind = d.get("type")
    if not isinstance(kind, str):
        raise expected(f"{pre}type", "a string", kind)
    at = iso_timestamp(d.get("timestamp"), f"{pre}timestamp")
    c = d.get("content")
    if c is not None and not isinstance(c, str | list | dict):
        raise expected(f"{pre}content", "a string, a part or a list of parts", c)
    if kind not in MESSAGE_TYPES:
        return None, at
    calls = d.get("toolCalls")
    if kind == "gemini" and calls is not None:
        if not isinstance(calls, list):
            raise expected(f"{pre}toolCalls", "a list", calls)
        for k, tc in enumerate(calls):
            _checked_call(tc, f"{pre}toolCalls[{k}]", "a tool call record (an object)")
    thoughts = d.get("thoughts")
    if kind == "gemini" and thoughts is not None and not isinstance(thoughts, list):
        raise expected(f"{pre}thoughts", "a list", thoughts)
    return kind, at


def _document(path: Path, data: dict[str, Any]) -> _Session:
    """A session written whole (JSON): its messages in order."""
    s = _Session(meta={k: v for k, v in data.items() if k != "messages"})
    unknown: list[int] = []
    for i, d in enumerate(data["messages"]):
        where = f"messages[{i}]"
        try:
            kind, at = _check(d)
        except InvalidField as exc:
            s.problems.append(ImportProblem(str(path), where, "invalid", str(exc)))
            continue
        if kind is None:
            unknown.append(i)
            continue
        s.messages.append(_Message(d, where, i + 1, at))
    if unknown:
        s.problems.append(
            file_warning(
                path,
                f"messages[{unknown[0]}]",
                "message_not_imported",
                f"{plural(len(unknown), 'message')} of no type Gemini CLI writes "
                f"(messages[{', '.join(map(str, unknown))}]); not imported",
            )
        )
    return s


def _records(path: Path) -> _Session:
    """A JSONL session: the records applied in order, as Gemini CLI loads them."""
    s = _Session()
    by_id: dict[str, _Message] = {}
    pending: dict[str, list[dict[str, Any]]] = {}
    unknown: list[int] = []
    for n, d in jsonl_values(path):
        if isinstance(d, ImportProblem):
            s.problems.append(d)
            continue
        try:
            _record(path, n, d, s, by_id, pending, unknown)
        except InvalidField as exc:  # the message names the field; only this line is lost
            s.problems.append(ImportProblem(str(path), f"line {n}", "invalid", str(exc)))
    if unknown:
        s.problems.append(
            file_warning(
                path,
                f"line {unknown[0]}",
                "message_not_imported",
                f"{plural(len(unknown), 'record')} of no kind Gemini CLI writes "
                f"({line_list(unknown)}); not imported",
            )
        )
    s.messages = list(by_id.values())
    return s


def _record(
    path: Path,
    n: int,
    d: Any,
    s: _Session,
    by_id: dict[str, _Message],
    pending: dict[str, list[dict[str, Any]]],
    unknown: list[int],
) -> None:
    """Apply line `n`'s record (Gemini CLI's `loadConversationRecord` order: a rewind, a
    message, a metadata update, the metadata line)."""
    if not isinstance(d, dict):
        raise expected("the line", "a Gemini CLI record (a JSON object)", d)
    if isinstance(d.get("$rewindTo"), str):
        ids = list(by_id)
        target = d["$rewindTo"]
        gone = ids[ids.index(target) :] if target in ids else ids
        if gone:
            lines = [by_id[i].n for i in gone]
            s.problems.append(
                file_warning(
                    path,
                    f"line {n}",
                    "message_not_imported",
                    f"{plural(len(gone), 'message')} the user rewound ({line_list(lines)}); "
                    "not imported",
                )
            )
        for i in gone:
            del by_id[i]
            pending.pop(i, None)
        return
    if isinstance(d.get("id"), str) and d.get("type") == "message_update":
        m = by_id.get(d["id"])
        if m is None:
            pending.setdefault(d["id"], []).append(d)
        else:
            _update(m, d, n)
        return
    if isinstance(d.get("id"), str):
        kind, at = _check(d)
        if kind is None:
            unknown.append(n)
            return
        m = _Message(d, f"line {n}", n, at)
        by_id[d["id"]] = m  # again: in its place
        for u in pending.pop(d["id"], []):
            _update(m, u, n)
        return
    if "$set" in d:
        update = d["$set"]
        if not isinstance(update, dict):
            raise expected("$set", "an object", update)
        if "messages" in update:
            _snapshot(path, n, update["messages"], s, by_id)
        s.meta.update({k: v for k, v in update.items() if k != "messages"})
        return
    if _metadata(d):
        s.meta.update({k: v for k, v in d.items() if k != "messages"})
        return
    unknown.append(n)


def _update(m: _Message, u: dict[str, Any], n: int) -> None:
    """A `message_update` record merged into its message (as harbor merges it)."""
    d = dict(m.d)
    for key, value in u.items():
        if key in ("type", "id"):
            continue
        if isinstance(d.get(key), dict) and isinstance(value, dict):
            d[key] = {**d[key], **value}
        else:
            d[key] = value
    _, at = _check(d)
    m.d, m.n, m.at = d, n, at


def _snapshot(path: Path, n: int, messages: Any, s: _Session, by_id: dict[str, _Message]) -> None:
    """`$set.messages`: Gemini CLI's record synced with its model history (compressed,
    masked). The recorded messages stay; one only the snapshot has is reported."""
    if not isinstance(messages, list):
        raise expected("$set.messages", "a list", messages)
    new = [
        k
        for k, m in enumerate(messages)
        if isinstance(m, dict)
        and m.get("id") not in by_id
        and m.get("type") in ("user", "gemini")
        and not _results_only(m.get("content"))
    ]
    if new:
        s.problems.append(
            file_warning(
                path,
                f"line {n}",
                "message_not_imported",
                f"$set.messages[{', '.join(map(str, new))}]: {plural(len(new), 'message')} "
                "Gemini CLI wrote into its history (a compression summary); not imported",
            )
        )


SESSION_CONTEXT = (
    "<session_context>",
    "This is the Gemini CLI. We are setting up the context for our chat.",
)
"""How the user turn Gemini CLI writes first into its model history starts (the date, the
OS, the workspace's directory tree: core/client.ts `startChat`, utils/environmentContext.ts)."""
STATE_SNAPSHOT = "<state_snapshot>"
"""How its compression summary starts (services/chatCompressionService.ts): written as the
user, in place of the turns it compressed away."""
ACKS = ("Got it. Thanks for the context!", "Got it. Thanks for the additional context!")
"""The model turn Gemini CLI writes itself after its context or its summary."""


def _contents(path: Path, contents: list[dict[str, Any]], field_: str) -> _Session:
    """Gemini CLI's model history (`history`) as a session: each model turn a gemini
    message whose `functionCall` parts are its tool calls, answered by the
    `functionResponse` parts of the user turns after it (by id, else by name); a user
    turn of text the user's message. Gemini CLI's own turns are not: its context (kept as
    metadata `session_context`), its compression summary (reported) and the model turn it
    writes after either."""
    s = _Session()
    open_calls: list[dict[str, Any]] = []
    own = False  # the user turn before was Gemini CLI's own
    unpaired: list[str] = []
    for i, c in enumerate(contents):
        where = f"{field_}[{i}]"
        try:
            calls, texts = _content_parts(c["parts"], f"{where}.parts")
        except InvalidField as exc:
            s.problems.append(ImportProblem(str(path), where, "invalid", str(exc)))
            continue
        text = "".join(p["text"] for p in texts if not p.get("thought"))
        if c["role"] == "model":
            if own and not calls and text.strip() in ACKS:
                own = False
                continue
            own = False
            thoughts = [{"description": p["text"]} for p in texts if p.get("thought")]
            d = {"type": "gemini", "content": c["parts"], "toolCalls": calls, "thoughts": thoughts}
            open_calls = calls
            s.messages.append(_Message(d, where, i + 1))
            continue
        rest: list[Any] = []
        for k, p in enumerate(c["parts"]):
            fr = p.get("functionResponse")
            if not isinstance(fr, dict):
                rest.append(p)
                continue
            waiting = [tc for tc in open_calls if tc["result"] is None]
            tc = next((t for t in waiting if t["id"] is not None and t["id"] == fr.get("id")), None)
            tc = tc or next((t for t in waiting if t["name"] == fr.get("name")), None)
            if tc is None:
                unpaired.append(f"{where}.parts[{k}]")
                continue
            tc["result"] = [p]
            resp = fr.get("response")
            error = isinstance(resp, dict) and "error" in resp and "output" not in resp
            tc["status"] = "error" if error else "success"
        if len(rest) < len(c["parts"]):
            answered = [tc for tc in open_calls if tc["result"] is not None]
            if rest and not text and len(answered) == 1:  # an image beside its response
                answered[0]["result"] = [*answered[0]["result"], *rest]
                rest = []
            if not rest:
                continue
        if text.startswith(SESSION_CONTEXT):
            s.meta["session_context"] = text
            own = True
            continue
        if text.startswith(STATE_SNAPSHOT):
            own = True
            s.problems.append(
                file_warning(
                    path,
                    where,
                    "message_not_imported",
                    "Gemini CLI's summary of the turns it compressed away (those turns are "
                    "not in this file); not imported",
                )
            )
            continue
        own = False
        s.messages.append(_Message({"type": "user", "content": rest}, where, i + 1))
    if unpaired:
        s.problems.append(
            file_warning(
                path,
                unpaired[0].split(".")[0],
                "unpaired_result",
                f"{plural(len(unpaired), 'function response')} answering no call of the "
                f"model turn before ({', '.join(unpaired)}); not imported",
            )
        )
    return s


def _content_parts(parts: list[Any], pre: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A content's tool calls (as Gemini CLI's session records them) and text parts;
    InvalidField names a part of a shape the Gemini API does not have."""
    calls: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for k, p in enumerate(parts):
        if not isinstance(p, dict):
            raise expected(f"{pre}[{k}]", "a part (an object)", p)
        if "text" in p:
            if not isinstance(p["text"], str):
                raise expected(f"{pre}[{k}].text", "a string", p["text"])
            texts.append(p)
        fc = p.get("functionCall")
        if fc is None:
            continue
        _checked_call(fc, f"{pre}[{k}].functionCall", "an object")
        calls.append(
            {
                "id": fc.get("id"),
                "name": fc["name"],
                "args": fc.get("args"),
                "result": None,
                "part": f"parts[{k}].functionCall",
            }
        )
    return calls, texts


# -- content ------------------------------------------------------------------------------


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    return content if isinstance(content, list) else [content]


def _results_only(content: Any) -> bool:
    ps = _parts(content)
    return bool(ps) and all(isinstance(p, dict) and "functionResponse" in p for p in ps)


def _text(content: Any, place: str, parts: NonText) -> str:
    """The text of message content (a string, a part, or parts): text parts that are not
    thoughts, joined as Gemini CLI joins them (nothing between); images and files are
    reported (`non_text_part`); calls and responses are the tool call records'."""
    texts: list[str] = []
    left: Counter[str] = Counter()
    for p in _parts(content):
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, dict):
            if isinstance(p.get("text"), str):
                if not p.get("thought"):
                    texts.append(p["text"])
            elif "inlineData" in p or "fileData" in p:
                left["inlineData" if "inlineData" in p else "fileData"] += 1
    if left:
        parts.left.append((place, left))
    return "".join(texts)


def _result(
    tc: dict[str, Any], place: str, parts: NonText
) -> tuple[str | None, str | None] | Counter[str] | None:
    """(output, error) of a tool call record's `result` (its functionResponse's
    `response`, the text parts beside it), None when it has none; its parts by kind when
    it answered with images or files only (`read_file` of a PNG: the placeholder output,
    the `inlineData` beside it), which is no text answer (`common.no_text`)."""
    items = _parts(tc.get("result"))
    frs = [
        p["functionResponse"]
        for p in items
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]
    mine = [fr for fr in frs if tc.get("id") is not None and fr.get("id") == tc.get("id")]
    mine = mine or (frs if len(frs) == 1 else [])
    if not mine:
        return None
    fr = mine[0]
    resp = fr.get("response")
    output = error = None
    if isinstance(resp, dict):
        output = resp.get("output") if isinstance(resp.get("output"), str) else None
        error = resp.get("error") if isinstance(resp.get("error"), str) else None
        if output is None and error is None and resp:
            output = json.dumps(resp, sort_keys=True, ensure_ascii=False)
    elif resp is not None:
        output = resp if isinstance(resp, str) else json.dumps(resp, ensure_ascii=False)
    texts: list[str] = []
    left: Counter[str] = Counter()
    siblings = [p for p in items if not (isinstance(p, dict) and "functionResponse" in p)]
    for p in [*_parts(fr.get("parts")), *(siblings if len(frs) == 1 else [])]:
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p, dict) and ("inlineData" in p or "fileData" in p):
            left["inlineData" if "inlineData" in p else "fileData"] += 1
    if left and not texts and error is None and (not output or PLACEHOLDERS.fullmatch(output)):
        return left
    if left:
        parts.left.append((place, left))
    if (texts or left) and output is not None and PLACEHOLDERS.fullmatch(output):
        output = ""
    if texts:
        output = "\n".join([output, *texts] if output else texts)
    elif output is None and error is None:
        output = ""
    return output, error


# -- answers ------------------------------------------------------------------------------


def tool_answer(
    name: str, args: Any, text: str | None, fork_mark: str | None = None
) -> Observation | tuple[str, str]:
    """What this importer makes of the result of a Gemini CLI call `name(args)` whose text
    is `text` (the functionResponse's `output`, all harbor's ATIF keeps of it: its error is
    dropped, None or "" there): the observation, or (warning kind, why) when it is no turn
    (the action is `call_action`'s). A command with no output kept is no turn: Gemini CLI
    answered it with an error alone (a refusal, a cancel, a lost output), which is not
    kept. `fork_mark`: a fork's own cut separator under Gemini CLI's older notice (`_cut`)."""
    if not text and name == SHELL:
        return (
            "harness_failure",
            "no output kept: Gemini CLI answered with an error alone (a refusal, a cancel or "
            "a lost output), which harbor's conversion leaves out",
        )
    return answer(name, args, text or "", None, None, fork_mark)


def answer(
    name: str,
    args: Any,
    output: str | None,
    error: str | None,
    status: str | None,
    fork_mark: str | None = None,
    display: str | None = None,
) -> Observation | tuple[str, str]:
    """The observation of call `name(args)` from its response's `output` and `error` and
    its `status` (None: unknown), or (warning kind, why) when it is no turn. `display`:
    the call's `resultDisplay` text, what Gemini CLI showed its user (`_shell`)."""
    args = args if isinstance(args, dict) else {}
    if output is None:
        return _error_only(name, error or "", status)
    if _MASKED.match(output):
        return (
            "harness_failure",
            "Gemini CLI masked the output in its history (it kept a preview of it; the "
            "whole output is in a file outside this record)",
        )
    output = output.removesuffix(HOOK_NOTICE)
    cancelled = error is not None and _CANCELLED.fullmatch(error) is not None
    head, tail = _cut(output, fork_mark)
    if name == SHELL:
        return _shell(head, tail, args.get("command"), status, display)
    text = head if tail is None else kept_ends(head, tail)
    cut = tail is not None
    if name == READ_FILE:
        if (m := _READ_CUT.match(text)) is not None:
            text, cut = text[m.end() :], True
        if (m := _READ_NOTE.match(text)) is not None:
            text, cut = text[m.end() :], True
    if cancelled:
        return interrupted(text, cut)
    return Observation(text, is_error=error is not None or status == "error", truncated=cut)


def _refusal(text: str) -> tuple[str, str] | None:
    """(not_run, why) when `text` is Gemini CLI refusing the call before it ran."""
    if _NOT_FOUND.fullmatch(text):
        return "not_run", "Gemini CLI has no such tool"
    if _BAD_PARAMS.match(text):
        return "not_run", f"Gemini CLI refused its arguments ({shown(text)})"
    if _DENIED.fullmatch(text) or text == PLAN_MODE:
        return "not_run", f"Gemini CLI's policy denied it ({shown(text)})"
    return None


def _error_only(name: str, error: str, status: str | None) -> Observation | tuple[str, str]:
    """A call Gemini CLI answered with an error and no output."""
    if (why := _refusal(error)) is not None:
        return why
    if (m := _CANCELLED.fullmatch(error)) is not None:
        return "not_run", f"cancelled ({shown(m['reason'])})"
    if name == SHELL:
        if error.startswith(SHELL_REFUSALS):
            return "not_run", f"the shell tool refused it ({shown(error)})"
        return (
            "harness_failure",
            f"Gemini CLI reported an error without the output ({shown(error)})",
        )
    return Observation(error, is_error=True)  # the tool's own error: a file not found ...


def _display(value: Any) -> str | None:
    """A tool call record's `resultDisplay` as text: a string, or the shell's terminal
    lines (`AnsiOutput`: lines of `{text, bold, ...}` tokens); None for other shapes (a
    file diff) or none."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, list) for line in value):
        lines = ["".join(t.get("text", "") for t in line if isinstance(t, dict)) for line in value]
        return "\n".join(lines).rstrip("\n")
    return None


def _u16(text: str) -> int:
    """Length in UTF-16 code units, as Gemini CLI (JavaScript) counts and cuts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(text: str, fork_mark: str | None = None) -> tuple[str, str | None]:
    """(head, tail) of an output Gemini CLI cut in the middle, without its notice; (text,
    None) when it did not. Only where its cut puts the notice: the first H and last T
    characters it names (current), or the first fifth of the lines kept (older). A fork's
    own separator under the older notice (`fork_mark`: Qwen Code's, whose head and tail
    are budgets of characters, or one of them empty) is taken where it first is."""
    if (m := _CUT.match(text)) is not None:
        rest = text[m.end() :]
        h, t = (int(m[g].replace(",", "")) for g in ("h", "t"))
        for mark in _CUT_MARK.finditer(rest):
            head, tail = rest[: mark.start()], rest[mark.end() :]
            if _u16(head) == h and _u16(tail) == t:
                return head, tail
    if (m := _OLD_CUT.match(text)) is not None:
        rest = text[m.end() :]
        if fork_mark is not None and (at := rest.find(fork_mark)) >= 0:
            return rest[:at], rest[at + len(fork_mark) :]
        at = rest.find(OLD_CUT_MARK)
        while at >= 0:
            head, tail = rest[:at], rest[at + len(OLD_CUT_MARK) :]
            kept = head.count("\n") + tail.count("\n") + 2
            if head.count("\n") + 1 == kept // 5:
                return head, tail
            at = rest.find(OLD_CUT_MARK, at + 1)
    return text, None


def _shell(
    head: str, tail: str | None, command: Any, status: str | None, display: str | None = None
) -> Observation | tuple:
    """A command's observation from the shell tool's text (cut or not): its templates for
    a cancel, a timeout and the background, else what its framing says.

    Text in none of the tool's layouts is what Gemini CLI's summarizer wrote in place of
    a long output (`summarizeToolOutput`, configured per tool: the model's summary, not
    the environment's answer) or a layout not read here. Where the record keeps what the
    user was shown (`resultDisplay`: the output itself), that is the observation, its exit
    code unknown; else (harbor's ATIF keeps no display) the text is kept as it is."""
    cut = tail is not None
    whole = head if tail is None else kept_ends(head, tail)
    if whole == NOT_STARTED:
        return "not_run", "the user cancelled it before it started"
    for template, read in ((_USER_CANCEL, interrupted), (_TIMEOUT, timed_out)):
        if (m := template.fullmatch(head)) is not None and (not cut or m["out"] is not None):
            out = m["out"] or ""
            return read(kept_ends(out, tail) if cut else out, truncated=cut)
    if (m := _BACKGROUND.fullmatch(whole)) is not None:
        return Observation("", state_json=json.dumps({"background_pid": int(m["pid"])}))
    framed = _unframe(head, tail, command, status)
    if framed is not None:
        return framed
    if display is not None and display != whole:
        shown_framed = _unframe(display, None, command, status)  # debug mode: the text
        if shown_framed is not None:
            return shown_framed
        state = json.dumps({"output_from": "resultDisplay"})
        return Observation(display, is_error=status == "error", state_json=state)
    return Observation(whole, is_error=status == "error", truncated=cut)


def _unframe(head: str, tail: str | None, command: Any, status: str | None) -> Observation | None:
    """The command's output without the shell tool's framing, its exit code, signal and
    background processes; None when `head`/`tail` are not in any of its layouts."""
    old = isinstance(command, str) and head.startswith(f"Command: {command}\nDirectory: ")
    if old:
        rest = head[len(f"Command: {command}\nDirectory: ") :]
        if "\n" not in rest:
            return None
        head = rest[rest.index("\n") + 1 :]
    split = head.startswith("Stdout: ")
    if not (split and old) and not head.startswith("Output: "):
        return None
    head = head[len("Output: ") :] if not split else head[len("Stdout: ") :]
    body = head if tail is None else tail
    found: dict[str, str] = {}
    if old:
        m = _OLD_TRAILER.search(body)
        if m is None:
            return None
        body = body[: m.start()]
        found = {k: v for k, v in m.groupdict().items() if v is not None and v != NONE}
    else:
        for key, line in _NEW_LINES:
            if key == "error" and status != "error":
                continue
            if (m := line.search(body)) is not None:
                body = body[: m.start()]
                if key != "pgid":
                    found[key] = m["v"]
    if tail is None:
        output = body
    else:
        output = kept_ends(head, body)
    if split:
        stdout, sep, stderr = output.partition("\nStderr: ")
        if not sep:
            return None
        stdout, stderr = ("" if x == EMPTY else x for x in (stdout, stderr))
        output = (
            f"{stdout}\n{stderr}"
            if stdout and stderr and not stdout.endswith("\n")
            else stdout + stderr
        )
    elif output == EMPTY:
        output = ""
    code = int(found["code"]) if "code" in found else None
    if not old and code is None and not found.get("error") and "signal" not in found:
        code = 0
    state: dict[str, Any] = {}
    if "signal" in found:
        state["signal"] = found["signal"]
    if "bg" in found:
        state["background_pids"] = [int(x) for x in re.findall(r"\d+", found["bg"])]
    error = bool(found.get("error")) or "signal" in found or code not in (0, None)
    return Observation(
        output,
        is_error=error or status == "error",
        exit_code=code,
        truncated=tail is not None,
        state_json=json.dumps(state, sort_keys=True) if state else None,
    )


def call_action(name: str, args: Any, place: str = "args") -> Action:
    """The action a Gemini CLI call `name(args)` is: `run_shell_command` with a `command`
    string is a `command`, any other call a tool call (`common.shell_or_tool`); also for
    harbor's ATIF of Gemini CLI."""
    return shell_or_tool(name, args, place, (SHELL,))


# -- the trajectory -----------------------------------------------------------------------


def parse(path: Path, domain: str | None = None) -> Iterator[Any]:
    """Everything in a session file, either layout (`--format gemini-cli`, or a `.jsonl`
    file `sniff` took): the trajectory and the problems."""
    first = next(json_head(str(path), SNIFF_LINES), None)
    if isinstance(first, dict):
        yield from _trajectory(path, _records(path), domain)
        return
    data = read_json(path)
    if isinstance(data, ImportProblem):
        yield data
        return
    if not detect(path, data):
        yield ImportProblem(
            str(path), "", "unrecognized", "not a Gemini CLI session (JSON or JSONL)"
        )
        return
    yield from parse_document(path, data, domain)


def parse_document(path: Path, data: Any, domain: str | None = None) -> Iterator[Any]:
    """A session written whole, or a model history (a `.json` file `detect` took)."""
    if (h := history(data)) is not None:
        yield from _trajectory(path, _contents(path, *h), domain)
        return
    yield from _trajectory(path, _document(path, data), domain)


DOCUMENT = Document(NAME, detect, parse_document)
"""A session written as one JSON document, in the registry (`common.Document`)."""


@dataclass
class _Item:
    m: _Message
    role: str | None = None
    text: str = ""
    why: str | None = None


def _items(s: _Session, parts: NonText) -> list[_Item]:
    items: list[_Item] = []
    for m in s.messages:
        it = _Item(m)
        kind, content = m.d["type"], m.d.get("content")
        if kind == "gemini":
            it.role = AGENT
            it.text = _text(content, f"{m.where}: content", parts)
        elif kind == "user" and not _results_only(content):
            it.text = _text(content, f"{m.where}: content", parts)
            if it.text.strip() in NEXT_SPEAKER:
                it.why = "Gemini CLI's own prompt to go on (its next-speaker check)"
            elif it.text.strip():
                it.role = USER
        elif kind == "error":
            it.why = f"Gemini CLI's error message ({shown(_text(content, '', NonText()))})"
        items.append(it)
    return items


def _thoughts(d: dict[str, Any]) -> str | None:
    said = []
    for t in d.get("thoughts") or []:
        if not isinstance(t, dict):
            continue
        subject, description = t.get("subject"), t.get("description")
        subject = subject if isinstance(subject, str) else ""
        description = description if isinstance(description, str) else ""
        said.append(
            f"{subject}: {description}" if subject and description else subject or description
        )
    return join_reasoning(*said)


def _trajectory(path: Path, s: _Session, domain: str | None) -> Iterator[Any]:
    yield from s.problems
    parts = NonText()
    items = _items(s, parts)
    for it in items:
        if it.why:
            yield file_warning(path, it.m.where, "message_not_imported", f"{it.why}; not imported")
    said, last, unsaid = conversation(
        [{"i": i} for i in range(len(items))],
        lambda m: items[m["i"]].role,
        lambda m: _speaks(items[m["i"]]),
    )
    for n, what in unsaid:
        yield file_warning(path, items[n].m.where, "message_not_imported", f"{what}; not imported")
    calls = [
        (i, k, tc)
        for i, it in enumerate(items)
        if it.role == AGENT
        for k, tc in enumerate(it.m.d.get("toolCalls") or [])
    ]
    turns = sorted(
        [*((i, k, tc) for i, k, tc in calls), *((x.at, -1, x) for x in said)],
        key=lambda t: (t[0], t[1]),
    )
    pairs: list[tuple[Action, Observation, str | None]] = []
    starts: list[datetime | None] = []
    names: list[str] = []
    reasoned: set[int] = set()
    for i, k, x in turns:
        it = items[i]
        if isinstance(x, Said):
            pairs.append(
                x.turn(
                    lambda n: (items[n].text, f"{items[n].m.where}: content"),
                    len(pairs),
                    parts,
                    _thoughts(it.m.d),
                )
            )
            starts.append(it.m.at)
            continue
        tc, where = x, it.m.where
        name = tc["name"]
        names.append(name)
        field_ = tc.get("part") or f"toolCalls[{k}]"  # a model history's: its part
        label = f"{field_} {name} call {tc.get('id')!r}"
        place = f"turn {len(pairs)} observation ({where}: {field_}.result)"
        result = _result(tc, place, parts)
        if isinstance(result, Counter):  # images only: what it answered in text is unknown
            why = no_text([(f"{field_}.result", result)])
            yield file_warning(path, where, "unpaired_call", f"{label}: {why}; no turn")
            continue
        if result is None:
            yield file_warning(
                path,
                where,
                "unpaired_call",
                f"{label}: no result (status {shown(tc.get('status'))}); no turn (what the "
                "environment answered is unknown)",
            )
            continue
        status = tc.get("status") if isinstance(tc.get("status"), str) else None
        display = _display(tc.get("resultDisplay"))
        obs = answer(name, tc.get("args"), *result, status, display=display)
        if isinstance(obs, tuple):
            kind, why = obs
            yield file_warning(path, where, kind, f"{label}: {why}; no turn")
            continue
        try:
            action = call_action(name, tc.get("args") or {}, f"{where}: {field_}.args")
        except InvalidField as exc:
            yield ImportProblem(str(path), where, "invalid", str(exc))
            continue
        reasoning = None
        if i not in reasoned:
            reasoned.add(i)
            reasoning = join_reasoning(_thoughts(it.m.d), it.text)
        pairs.append((action, obs, reasoning))
        starts.append(it.m.at)
    task = next((it.text for it in items if it.role == USER), None)
    final = last and items[last.at].text
    yield from parts.warnings()
    models = list(
        dict.fromkeys(
            it.m.d["model"]
            for it in items
            if it.role == AGENT and isinstance(it.m.d.get("model"), str) and it.m.d["model"]
        )
    )
    meta = s.meta
    kind = meta.get("kind")
    t = build(
        NAME,
        meta["sessionId"] if isinstance(meta.get("sessionId"), str) else origin_stem(path),
        domain or guess_domain(names, "swe"),
        pairs,
        task_description=task,
        instruction=task,
        agent={"name": NAME, "model": models[0] if models else None},
        outcome=Outcome(),
        metadata={
            "project_hash": meta.get("projectHash"),
            "title": meta.get("summary") if isinstance(meta.get("summary"), str) else None,
            "directories": meta.get("directories") or None,
            "kind": kind if kind == "subagent" else None,
            "session_context": meta.get("session_context"),
            "models": models if len(models) > 1 else None,
            "final_message": final,
        },
    )
    for turn, at in zip(t.turns, starts, strict=True):
        turn.started_at = at
    try:
        t.started_at = iso_timestamp(meta.get("startTime"), "startTime")
    except InvalidField as exc:
        yield ImportProblem(str(path), "", "invalid", str(exc))
        t.started_at = None
    if t.started_at is None:
        times = [m.at for m in s.messages if m.at is not None]
        t.started_at = min(times) if times else None
    yield t


def _speaks(it: _Item) -> bool:
    return not it.m.d.get("toolCalls") and bool(it.text.strip())
