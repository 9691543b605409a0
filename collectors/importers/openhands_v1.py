"""OpenHands V1 conversations (OpenHands/software-agent-sdk, `openhands-sdk`; the OpenHands
1.x app and agent-server run on it): a conversation is the directory
`<persistence_dir>/<conversation id hex>/` holding `base_state.json` (the
ConversationState: `id`, `agent` {kind, llm {model ...}, tools}, `workspace`
{working_dir}, `execution_status`, `tags`, `leaf_event_id` ...) and `events/`, one event
per file, `event-<index, 5+ digits>-<event id>.json`, each `Event.model_dump_json(
exclude_none=True)`: a pydantic dump with a `kind` discriminator (`ActionEvent`,
`ObservationEvent`, `MessageEvent` ...), as are the action and observation inside
(`TerminalAction`, `FileEditorObservation` ...). Read in the openhands-sdk and
openhands-tools 1.0.0 and 1.58.2 wheels (and conversations they wrote), and in
OpenHands/software-agent-sdk (event_store.py @01fa30d, impl/local_conversation.py
@01359d4, agent/agent.py @00ad7f0, tools/terminal/terminal/terminal_session.py @0e1b70e):
conversation/persistence_const.py, event_store.py, state.py, impl/local_conversation.py,
event/*.py, agent/agent.py, agent/parallel_executor.py, tool/schema.py, tool/builtins,
mcp/definition.py, llm/mixins/fn_call_converter.py, utils/truncate.py, and
openhands/tools/terminal (1.0: `ExecuteBashAction`/`ExecuteBashObservation`, later
`TerminalAction`/`TerminalObservation`), file_editor, browser_use, task_tracker.

One trajectory per conversation, origin id its `id` (a UUID; without base_state.json the
directory's hex name read as one). The import reads each file on its own, so the
conversation is read at its lowest-numbered event file (its origin path) and its other
files (events, base_state.json, the task tracker's TASKS.json) yield nothing; one of them
named alone stands for the whole conversation. Events in index order; since events carry
`parent_id` (a tree: `navigate_to` re-roots it) the conversation is the branch from
base_state's `leaf_event_id` (else the last event) to its root, and the events of the
branches it left are reported, `message_not_imported`.

Turns: each `ActionEvent` the SDK executed, answered by the `ObservationEvent` (or
`UserRejectObservation`) with its `action_id`, or the `AgentErrorEvent` with its
`tool_call_id`. A terminal call (`TerminalAction`/`ExecuteBashAction`) is a `command` (its
`command`; `is_input`: `keystrokes`; `reset`: a tool call), any other a tool call
`tool_name(<the model's arguments>)` (`tool_call.arguments` without the SDK's own
`security_risk` and `summary`): file_editor, browser_*, task_tracker, MCP tools ...
Reasoning <- the call's `reasoning_content` (else its thinking blocks, else a Responses
reasoning summary) and `thought`; a `think` call's thought -> the next turn's reasoning.
What the agent said to its user (`MessageEvent` from the agent, or the `finish` call's
`message`), answered by the user, is a `text` turn (`common.conversation`); the last
unanswered -> metadata `final_message`. Task <- the first user message (its
`llm_message.content`; the SDK's `extended_content`, skills and rules, is not the user's).

Harness text (only exact templates, whole and in place): a command's `content` is its
output alone; the SDK's framing is in `metadata` (`prefix`, `suffix`) and is added,
with `[Current working directory: D]`, `[Python interpreter: P]` and `[Command finished
with exit code N]`, only when the observation is shown to the model, so none of it is
output: the suffix `[The command has no new output after N seconds. ...]` or `[The
command timed out after N seconds. ...]` makes the output so far a timeout
(`common.timed_out`), `[The command was interrupted by user request. ...]` an interrupted
command (`[interrupted]`, as Claude Code's), `[Your command "C" is NOT executed. ...]`
means it was not sent (`not_run`), the prefix `[Previous command outputs are truncated.
...]` makes it truncated; the exit code is `exit_code` (else `metadata.exit_code`; -1:
none), the working dir -> `state_json`. Later terminals (1.58; 1.0 stored the whole
output) cut an output over 30,000 characters to 14,944 + the `<response clipped><NOTE>
...</NOTE>` notice + 14,943 (`maybe_truncate`): head and tail, truncated, only with the
notice exactly there. The terminal's refusals (`No previous running command to ...`,
`Cannot execute multiple commands at once. ...`, a refused foreground timeout) are
`not_run`; its failures (`[The terminal was closed while the command was running.]`, the
tmux-recovery notice) are `harness_failure` (both only in an error observation); a
reset's `Terminal session has been reset. ...` notice is removed.
An MCP result's leading `[Tool 'T' executed.]` part is removed; an observation of images
only (an MCP screenshot) is no turn (`unpaired_call`, `common.no_text`); a browser
screenshot beside its text is `non_text_part`, `Browser operation failed: Operation
timed out ...` a timeout; the planning editor's `Operation 'C' is not allowed on file
...` is `not_run`.
`AgentErrorEvent` is the SDK's own text, never a tool's answer: for a call it made no
action of (`action` absent: an unknown tool, arguments that failed validation) or
skipped (`Tool call cancelled by interrupt.`) no turn, `not_run`; for one it ran (the
tool raised, or it was interrupted in flight) no turn, `harness_failure`. A
`UserRejectObservation` (the user, or a PreToolUse hook) is `not_run`; a call nothing
answered is no turn, `unpaired_call`. User messages the SDK wrote itself (the
content-filter nudge, prompt-mode function-call validation errors) and messages from the
`environment` (the stuck detector's nudge, stop-hook feedback) are
`message_not_imported`, as are condensations (`Condensation`, its summary),
`ACPToolCallEvent`s and unknown kinds; state updates, pauses, tokens and logs are
bookkeeping. A `ConversationErrorEvent` -> `outcome.error`.

Metadata: base_state's agent llm `model` -> the agent's model, `agent.kind` ->
`agent_class`, `workspace.working_dir`, `execution_status`, `tags.title` ->
`conversation_title`; the system prompt (with its dynamic context) ->
`agent_system_prompt`, its tools -> action space. Domain: web when most turns browse,
else swe. A file that is not JSON or cannot be read is the import's to report; an event
of a shape the SDK does not write is `invalid`, naming its file and the field, and only
that event is left out; indices from 0 to the last that no event fills are one
`missing_event` warning. The conversation's other problems are reported on its
directory, naming the event file.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome
from worldtrace.schemas.validate import parse_json

from ..actions import keystrokes
from .common import (
    AGENT,
    SYSTEM,
    USER,
    ImportProblem,
    InvalidField,
    NonText,
    build,
    content_text,
    conversation,
    expected,
    file_cached,
    first_line,
    interrupted,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    no_text,
    numbered_files,
    textless,
    timed_out,
    tool_action,
)
from .openhands import BUSY, HISTORY_CUT, WAITED, NoTurn, _ranges
from .reading import read_json

NAME = "openhands-v1"

BASE_STATE = "base_state.json"
EVENTS = "events"
EVENT_FILE = re.compile(r"event-(?P<index>\d{5,})-(?P<id>[0-9a-fA-F-]{8,})\.json")
"""persistence_const.EVENT_NAME_RE (EVENT_FILE_PATTERN `event-{idx:05d}-{event_id}.json`)."""
CONVERSATION_FILES = frozenset({BASE_STATE, "TASKS.json"})
"""JSON files the SDK writes beside `events/` (the state; the task tracker's list)."""
ROOT_PARENT = "__root__"
"""event/types.py ROOT_PARENT_ID: a root made after `navigate_to(None)`."""

TERMINAL_ACTIONS = frozenset({"TerminalAction", "ExecuteBashAction"})
TERMINAL_OBSERVATIONS = frozenset({"TerminalObservation", "ExecuteBashObservation"})
QUIET_ACTIONS = frozenset({"FinishAction", "ThinkAction"})
"""Builtins that are no environment step; their observations echo them."""
BOOKKEEPING = frozenset(
    {
        "CondensationRequest",
        "ConversationStateUpdateEvent",
        "PauseEvent",
        "InterruptEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
        "HookExecutionEvent",
        "SecurityAnalysisEvent",
        "StreamingDeltaEvent",
    }
)
"""Events that carry no conversation content (requests, state sync, logs)."""
NOT_TREE_NODES = frozenset({"ConversationStateUpdateEvent", "ConversationErrorEvent"})
"""ConversationState._resolve_active_leaf: artifacts, not on any branch."""
ANSWERS = ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
SDK_ARGUMENTS = ("security_risk", "summary")
"""Keys the SDK asks the model for beside a tool's arguments (agent.py pops them)."""

# ---------------------------------------------------------------------------- harness text

CUT_NOTICE = (
    "<response clipped><NOTE>Due to the max output limit, only part of the full response"
    " has been shown to you.</NOTE>"
)
CMD_CUT = 30000
"""utils/truncate.py maybe_truncate(output, MAX_CMD_OUTPUT_SIZE): head + notice + tail."""
CMD_HEAD = (CMD_CUT - len(CUT_NOTICE) + 1) // 2
INTERRUPTED = (
    "\n[The command was interrupted by user request. The process received SIGINT (Ctrl+C).]"
)
RESET_NOTICE = (
    "Terminal session has been reset. All previous environment variables and session state"
    " have been cleared."
)
TMUX_RECOVERY = (
    "The terminal session was reset because the underlying tmux server/session disappeared"
    " while running the previous command. This often happens when a command terminates the"
    " persistent shell, for example by ending with a top-level `exit` such as `exit $code`,"
    " or otherwise kills tmux. OpenHands rebuilt the terminal pool, but the interrupted"
    " command's result is not reliable and was not retried. Avoid top-level `exit` in future"
    ' terminal commands; use a non-shell-exiting status check like `test "$code" -eq 0` or'
    " conditional shell logic instead. Please rerun any needed command."
)
TERMINAL_NOT_RUN = re.compile(
    "|".join(
        (
            r"No previous running command to (?:retrieve logs from|interact with)\.",
            r"Cannot execute multiple commands at once\.\nPlease run each command separately OR"
            r" chain them into a single command via && or ;\nProvided commands:\n\(1\) .*",
            r"Refusing to run foreground terminal command with timeout=[^\n]*s\.\n\nThis"
            r" runtime is subject to idle cleanup after .*",
        )
    ),
    re.S,
)
"""terminal_session.py execute: error observations for a command it did not send."""
TERMINAL_FAILED = re.compile(
    r"\[The terminal was closed while the command was running\.\]"
    rf"|{re.escape(TMUX_RECOVERY)}\n\nOriginal tmux error: .*",
    re.S,
)
"""terminal_session.py / impl.py: the terminal failed under the command (it may have run)."""
BROWSER_TIMEOUT = re.compile(
    r"Browser operation failed: Operation timed out(?: after \d+ seconds)?(?:\n\nThe browser"
    r" session has been reset after multiple consecutive failures \(possible crash\)\. The"
    r" browser will be restarted on the next action\. Please retry your action\.)?"
)
"""browser_use/impl.py `_format_browser_operation_error` of a TimeoutError."""
EDIT_REFUSED = re.compile(
    r"Operation '[a-z_]+' is not allowed on file '[^'\n]*'\. Only the following files can be"
    r" edited: \[.*\]",
    re.S,
)
"""file_editor/impl.py `allowed_edits_files` (the planning agent's editor)."""
MCP_HEADER = re.compile(r"\[Tool '[^'\n]*' executed\.\]")
"""mcp/definition.py MCPToolObservation.from_call_tool_result's first content part."""
NOT_EXECUTED = "Tool call cancelled by interrupt."
"""parallel_executor.py: a call skipped before it ran (other AgentErrorEvents: it ran)."""
SDK_USER_MESSAGES = re.compile(
    "|".join(
        (
            # agent.py on LLMContentPolicyViolationError
            r"Your previous response was blocked by the model's content filter\. Please"
            r" continue, rephrasing to avoid the flagged content\.",
            # fn_call_converter.py FunctionCallValidationError (prompt-mode tool calls)
            r"Parameter '[^'\n]*' is not allowed for function '[^'\n]*'\. Allowed parameters: .*",
            r"Parameter '[^'\n]*' is expected to be (?:an integer|an array|one of .*)\.",
            r"Missing required parameters for function '[^'\n]*': .*",
            r"Function '[^'\n]*' not found in available tools: .*",
        )
    ),
    re.S,
)
"""User messages the SDK writes itself (agent.py emits them with source "user")."""


# ---------------------------------------------------------------------------- layout


def _conversation_file(path: Path) -> tuple[Path, str] | None:
    """(conversation dir, "event" | "state") of a file in the V1 layout."""
    path = path.absolute()
    if path.parent.name == EVENTS and EVENT_FILE.fullmatch(path.name):
        return path.parent.parent, "event"
    if path.name in CONVERSATION_FILES and (path.parent / EVENTS).is_dir():
        return path.parent, "state"
    return None


def _stored_event(data: Any) -> bool:
    """What an event file holds: an object with a `kind` (whether the rest is well formed
    is the conversation's to report)."""
    return isinstance(data, dict) and isinstance(data.get("kind"), str)


def _event_files(conv: Path, fresh: bool = False) -> Iterator[tuple[int, Path]]:
    """(index, file) of the conversation's event files in index order
    (`common.numbered_files`)."""
    return numbered_files(conv / EVENTS, EVENT_FILE, fresh)


@file_cached
def _reads_as_event(f: Path) -> bool:
    return _stored_event(read_json(f))


def _first(conv: Path) -> Path | None:
    """The conversation's lowest-numbered event file that reads as an event: the file
    that imports it (the others yield nothing)."""
    return next((f for _, f in _event_files(conv) if _reads_as_event(f)), None)


def session_entry(path: Path) -> Path | None:
    """The file a conversation is imported at, for any of its files named on its own (an
    event file, base_state.json): one conversation, one trajectory. None for others."""
    return session_entries([path])[0]


def session_entries(files: list[Path]) -> list[Path | None]:
    """`session_entry` of each of `files`, each conversation's entry found once: a walk
    lists every event file of a conversation (thousands)."""
    firsts: dict[Path, Path | None] = {}
    out: list[Path | None] = []
    for f in files:
        found = _conversation_file(f)
        if found is not None and found[0] not in firsts:
            firsts[found[0]] = _first(found[0])
        out.append(firsts[found[0]] if found is not None else None)
    return out


def detect(path: Path, data: Any) -> bool:
    """A file of a V1 conversation: an event file holding an event, or its state, beside
    an `events/` directory with an event the import reads."""
    found = _conversation_file(path)
    if found is None or (found[1] == "event" and not _stored_event(data)):
        return False
    return _first(found[0]) is not None


def parse(path: Path, data: Any, domain: str | None = None) -> Iterator[Any]:
    found = _conversation_file(path)
    if found is None or not detect(path, data):  # --format openhands-v1 on something else
        yield ImportProblem("", "", "unrecognized", "not a file of an OpenHands V1 conversation")
        return
    if path.absolute() == _first(found[0]):
        yield from _conversation(found[0], domain)


# ---------------------------------------------------------------------------- events


@dataclass
class _Event:
    n: int
    """Its index in the store."""
    place: str
    """`events/<file name>`, for problems."""
    d: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.d["kind"]

    @property
    def id(self) -> str:
        return self.d["id"]


def _field(d: dict[str, Any], key: str, types: Any, what: str, place: str, need=False) -> Any:
    """`d[key]` when it is of `types` (absent or null: None, unless `need`); else the
    file's error, naming `place.key`."""
    value = d.get(key)
    if value is None and not need:
        return None
    if not isinstance(value, types) or isinstance(value, bool):
        raise expected(f"{place}.{key}", what, value)
    return value


def _content(value: Any, field: str) -> None:
    """Message or observation content: a list of content parts (objects), or a string."""
    if isinstance(value, str) or value is None:
        return
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise expected(field, "a list of content parts", value)


def _check(d: dict[str, Any], place: str, file_id: str) -> None:
    """Raise InvalidField (naming `place.field`) when event `d` is not of a shape the SDK
    writes, as far as a turn is made of it."""
    if d.get("id") != file_id:
        raise expected(f"{place}.id", f"{file_id!r} (the id in its file name)", d.get("id"))
    _field(d, "source", str, "a string", place)
    _field(d, "parent_id", str, "an event id (a string)", place)
    iso_timestamp(d.get("timestamp"), f"{place}.timestamp")
    kind = d["kind"]
    if kind == "ActionEvent":
        _field(d, "tool_name", str, "a string", place, need=True)
        _field(d, "tool_call_id", str, "a string", place, need=True)
        call = _field(d, "tool_call", dict, "an object", place, need=True)
        _field(call, "arguments", str, "a JSON string", f"{place}.tool_call", need=True)
        for p, part in enumerate(_field(d, "thought", list, "a list", place) or []):
            if not isinstance(part, dict):
                raise expected(f"{place}.thought[{p}]", "a content part", part)
        action = _field(d, "action", dict, "an object", place)
        if action is not None:
            at = f"{place}.action"
            akind = _field(action, "kind", str, "a string", at, need=True)
            if akind in TERMINAL_ACTIONS:
                _field(action, "command", str, "a string", at, need=True)
            elif akind == "FinishAction":
                _field(action, "message", str, "a string", at, need=True)
            elif akind == "ThinkAction":
                _field(action, "thought", str, "a string", at, need=True)
    elif kind in ("ObservationEvent", "UserRejectObservation"):
        _field(d, "action_id", str, "an event id (a string)", place, need=True)
        if kind == "ObservationEvent":
            obs = _field(d, "observation", dict, "an object", place, need=True)
            at = f"{place}.observation"
            _content(obs.get("content"), f"{at}.content")
            if obs.get("kind") in TERMINAL_OBSERVATIONS:
                meta = _field(obs, "metadata", dict, "an object", at) or {}
                _field(obs, "exit_code", int, "an integer", at)
                _field(meta, "exit_code", int, "an integer", f"{at}.metadata")
                _field(meta, "prefix", str, "a string", f"{at}.metadata")
                _field(meta, "suffix", str, "a string", f"{at}.metadata")
    elif kind == "AgentErrorEvent":
        _field(d, "tool_call_id", str, "a string", place, need=True)
        _field(d, "error", str, "a string", place, need=True)
    elif kind == "MessageEvent":
        _field(d, "source", str, "a string", place, need=True)
        msg = _field(d, "llm_message", dict, "an object", place, need=True)
        _content(msg.get("content"), f"{place}.llm_message.content")
    elif kind == "SystemPromptEvent":
        prompt = _field(d, "system_prompt", dict, "an object", place, need=True)
        _field(prompt, "text", str, "a string", f"{place}.system_prompt", need=True)
        context = _field(d, "dynamic_context", dict, "an object", place)
        if context is not None:
            _field(context, "text", str, "a string", f"{place}.dynamic_context", need=True)
        _field(d, "tools", list, "a list", place)


def _load(conv: Path) -> tuple[list[_Event], list[ImportProblem]]:
    """The conversation's events in index order, each from its own file; problems: a file
    that cannot be read (as reading it alone reports it: `invalid_json`, ...) or holds no
    event, a malformed event (`invalid`, naming its file), a second file of one index, the
    indices no event fills (`missing_event`)."""
    evs: list[_Event] = []
    problems: list[ImportProblem] = []
    seen: set[int] = set()
    last = -1
    for n, f in _event_files(conv, fresh=True):
        last = max(last, n)
        data = read_json(f)
        place = f"{EVENTS}/{f.name}"
        if isinstance(data, ImportProblem):  # unreadable, empty, not JSON: as the file's own
            problems.append(data)
            continue
        if not _stored_event(data):
            problems.append(_bad(conv, place, f"{place}: holds no event (no `kind`)"))
            continue
        if n in seen:
            problems.append(_bad(conv, place, f"{place}: a second event file of index {n}"))
            continue
        seen.add(n)
        try:
            _check(data, place, EVENT_FILE.fullmatch(f.name)["id"])
        except InvalidField as exc:
            problems.append(_bad(conv, place, str(exc)))
            continue
        evs.append(_Event(n, place, data))
    missing = [n for n in range(last + 1) if n not in seen]
    if missing:
        many = len(missing) > 1
        them = "them" if many else "it"
        problems.append(
            ImportProblem(
                str(conv / EVENTS),
                "",
                "missing_event",
                f"event{'s' * many} {_ranges(missing)} of 0-{last} {'are' if many else 'is'}"
                f" missing (no event file the import reads); the conversation is imported"
                f" without {them}",
                fatal=False,
            )
        )
    return evs, problems


def _bad(conv: Path, place: str, message: str) -> ImportProblem:
    """`invalid` for the event file at `place`, naming the field (`action.command: ...`)."""
    rest = message[len(place) :] if message.startswith(place) else message
    return ImportProblem(
        str(conv / place), "", "invalid", rest.removeprefix(".").removeprefix(": ")
    )


def _state(conv: Path) -> dict[str, Any]:
    """base_state.json (the ConversationState); {} when there is none or it is no object."""
    f = conv / BASE_STATE
    data = read_json(f) if f.is_file() else None
    return data if isinstance(data, dict) else {}


def _conversation_id(conv: Path, state: dict[str, Any]) -> str:
    """base_state's `id` (a UUID), else the directory's name (`conversation_id.hex`)
    read as one, else the name as it is."""
    for value, read in ((state.get("id"), uuid.UUID), (conv.name, lambda x: uuid.UUID(hex=x))):
        try:
            return str(read(value))
        except (TypeError, ValueError, AttributeError):
            continue
    return _str(state.get("id")) or conv.name


def _branch(evs: list[_Event], leaf: Any) -> tuple[list[_Event], list[_Event]]:
    """(the events of the conversation's branch in index order, those of the branches it
    left). The branch is `path_to_root(leaf)` (EventLog): each event's `parent_id`, or for
    an event without one (written before the tree) the event before it; the leaf is
    base_state's `leaf_event_id`, else the last event that is a tree node. A walk that
    cannot finish (a parent no event read gives) keeps every event."""
    nodes = [e for e in evs if e.kind not in NOT_TREE_NODES]
    if not any("parent_id" in e.d for e in nodes):
        return evs, []
    by_id = {e.id: e for e in evs}
    by_index = {e.n: e for e in evs}
    cur = by_id.get(leaf) if isinstance(leaf, str) else None
    cur = cur or (nodes[-1] if nodes else None)
    on: set[int] = set()
    while cur is not None:
        if cur.n in on:
            return evs, []  # a cycle
        on.add(cur.n)
        parent = cur.d.get("parent_id")
        if parent == ROOT_PARENT or (parent is None and cur.n == 0):
            break
        cur = by_id.get(parent) if parent is not None else by_index.get(cur.n - 1)
        if cur is None:
            return evs, []  # its parent was not read
    keep = [e for e in evs if e.n in on or e.kind in NOT_TREE_NODES]
    return keep, [e for e in nodes if e.n not in on]


# ---------------------------------------------------------------------------- conversion


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _action(e: _Event) -> dict[str, Any] | None:
    return e.d.get("action") if e.kind == "ActionEvent" else None


def _action_kind(e: _Event) -> str | None:
    action = _action(e)
    return action.get("kind") if action else None


def _answers(evs: list[_Event]) -> dict[int, int]:
    """Position of each ActionEvent -> the position of its answer: the ObservationEvent or
    UserRejectObservation with its id as `action_id`, or the AgentErrorEvent with its
    `tool_call_id` (the latest such call before it still open)."""
    by_id = {e.id: k for k, e in enumerate(evs) if e.kind == "ActionEvent"}
    out: dict[int, int] = {}
    for k, e in enumerate(evs):
        if e.kind in ("ObservationEvent", "UserRejectObservation"):
            a = by_id.get(e.d["action_id"])
        elif e.kind == "AgentErrorEvent":
            calls = [
                j
                for j in range(k)
                if evs[j].kind == "ActionEvent"
                and evs[j].d["tool_call_id"] == e.d["tool_call_id"]
                and j not in out
            ]
            a = calls[-1] if calls else None
        else:
            continue
        if a is not None and a < k and a not in out:
            out[a] = k
    return out


def _text(parts: Any) -> str:
    return content_text(parts)[0]


def _message_text(e: _Event) -> Any:
    """A MessageEvent's content (its `extended_content` is the SDK's, not the sender's)."""
    return e.d["llm_message"].get("content")


def _sdk_message(e: _Event) -> str | None:
    """Why a user or environment MessageEvent is no one's words but the SDK's, or None."""
    if e.kind != "MessageEvent":
        return None
    if e.d["source"] == "environment":
        return "a message from the environment (the SDK's nudge or hook feedback)"
    if e.d["source"] == "user" and SDK_USER_MESSAGES.fullmatch(_text(_message_text(e))):
        return "a message the SDK wrote as the user's"
    return None


def _reasoning(e: _Event) -> list[str | None]:
    """What an ActionEvent or agent MessageEvent carries besides its call or text: the
    reasoning (`reasoning_content`, else thinking blocks, else a Responses reasoning
    summary), then the thought."""
    d = e.d["llm_message"] if e.kind == "MessageEvent" else e.d
    thinking = [_object(b).get("thinking") for b in _list(d.get("thinking_blocks"))]
    summary = _list(_object(d.get("responses_reasoning_item")).get("summary"))
    why = (
        _str(d.get("reasoning_content"))
        or join_reasoning(*(t for t in thinking if isinstance(t, str)))
        or join_reasoning(*(s for s in summary if isinstance(s, str)))
    )
    thought = _text(e.d.get("thought")) if e.kind == "ActionEvent" else None
    return [why, thought]


def _arguments(e: _Event) -> Any:
    """The arguments the model wrote (`tool_call.arguments`), without the SDK's own
    `security_risk` and `summary` (unless the tool itself takes a `summary`)."""
    raw = e.d["tool_call"]["arguments"]
    try:
        args = parse_json(raw)
    except ValueError:  # TooDeep too: `tool_action` refuses it, naming the field
        return raw
    if not isinstance(args, dict):
        return raw
    action = _action(e) or {}
    own = {*action, *_object(action.get("data"))}  # an MCP action's arguments are its data
    return {k: v for k, v in args.items() if k not in SDK_ARGUMENTS or k in own}


def _step(e: _Event) -> Action:
    """The action of an executed ActionEvent."""
    name = e.d["tool_name"]
    action = _action(e) or {}
    if action.get("kind") in TERMINAL_ACTIONS and action.get("reset") is not True:
        if action.get("is_input") is True:
            return keystrokes(action["command"])
        return Action("command", action["command"], name=name)
    return tool_action(name, _arguments(e), f"{e.place}.tool_call.arguments")


def _observation(o: _Event, e: _Event, turn: int, parts: NonText) -> Observation | NoTurn:
    """The environment's answer in `o` to ActionEvent `e` (turn `turn`) without the SDK's
    own text (module doc); `NoTurn` when the SDK did not run the call or failed to."""
    if o.kind == "UserRejectObservation":
        by = "a hook" if o.d.get("rejection_source") == "hook" else "the user"
        return NoTurn("not_run", f"{by} rejected it ({_str(o.d.get('rejection_reason'))!r})")
    if o.kind == "AgentErrorEvent":
        error = o.d["error"]
        if _action(e) is None or error == NOT_EXECUTED:
            return NoTurn("not_run", f"the SDK answered {first_line(error)!r}")
        return NoTurn("harness_failure", f"the SDK answered {first_line(error)!r}")
    obs = o.d["observation"]
    okind = obs.get("kind")
    content = obs.get("content")
    error = obs.get("is_error") is True
    at = f"turn {turn} observation ({o.place}.observation.content)"
    if okind == "MCPToolObservation" and isinstance(content, list) and content:
        head = content[0]
        if head.get("type") == "text" and MCP_HEADER.fullmatch(_str(head.get("text")) or ""):
            content = content[1:]
    if (left := textless(content, f"{o.place}.observation.content")) is not None:
        return NoTurn(
            "unpaired_call", no_text([(f"{o.place}.observation.content", left)], _named(e))
        )
    text = parts.text(content, at)
    if okind in TERMINAL_OBSERVATIONS:
        return _terminal(obs, text, error, _action(e) or {})
    if okind == "BrowserObservation":
        if _str(obs.get("screenshot_data")):
            parts.text([{"type": "image"}], f"turn {turn} observation ({o.place}.observation"
                       ".screenshot_data)")  # fmt: skip
        if error and BROWSER_TIMEOUT.fullmatch(text):
            return timed_out("")
    if error and EDIT_REFUSED.fullmatch(text):
        return NoTurn("not_run", f"it answered {first_line(text)!r}")
    return Observation(text, is_error=error)


def _terminal(
    obs: dict[str, Any], text: str, error: bool, action: dict[str, Any]
) -> Observation | NoTurn:
    """A terminal observation: `content` is the output; the framing in `metadata` says
    what happened to it (module doc)."""
    meta = obs.get("metadata") or {}
    prefix, suffix = meta.get("prefix") or "", meta.get("suffix") or ""
    if error and TERMINAL_NOT_RUN.fullmatch(text):
        return NoTurn("not_run", f"it answered {first_line(text)!r}")
    if error and TERMINAL_FAILED.fullmatch(text):
        return NoTurn("harness_failure", f"it answered {first_line(text)!r}")
    if BUSY.fullmatch(suffix):
        return NoTurn(
            "not_run",
            "the previous command was still running (the output it showed of that one is not"
            " imported)",
        )
    code = obs.get("exit_code")
    code = meta.get("exit_code") if code is None else code
    code = None if code == -1 else code  # the SDK's "no exit code" (still running)
    if action.get("reset") is True:
        text = "" if text == RESET_NOTICE else text.removeprefix(RESET_NOTICE + "\n\n")
    cut = False
    if len(text) == CMD_CUT and text.startswith(CUT_NOTICE, CMD_HEAD):
        text, cut = kept_ends(text[:CMD_HEAD], text[CMD_HEAD + len(CUT_NOTICE) :]), True
    cut = cut or bool(HISTORY_CUT.fullmatch(prefix))
    cwd = _str(meta.get("working_dir"))
    state = json.dumps({"working_dir": cwd}) if cwd else None
    if WAITED.fullmatch(suffix):
        return timed_out(text, state, cut)
    if suffix == INTERRUPTED:
        return interrupted(text, cut)
    return Observation(
        text, is_error=error or bool(code), exit_code=code, truncated=cut, state_json=state
    )


def _tool_spec(tool: Any) -> Any:
    """A tool of the SystemPromptEvent: OpenAI's shape (1.0-1.x: `to_openai_tool`) as it
    is, a ToolDefinition dump (`kind`, `description`, `annotations`; no schema) as
    {name, description}, its name the one the model calls (the class name in snake case
    without `_tool`; an MCP tool's own name)."""
    if not isinstance(tool, dict) or "function" in tool or not isinstance(tool.get("kind"), str):
        return tool
    mcp = tool.get("mcp_tool") if isinstance(tool.get("mcp_tool"), dict) else {}
    name = _str(mcp.get("name")) or _snake(tool["kind"]).removesuffix("_tool")
    spec = {"name": name, "description": _str(tool.get("description")) or ""}
    schema = mcp.get("inputSchema") or mcp.get("input_schema")
    return {**spec, "input_schema": schema} if isinstance(schema, dict) else spec


def _snake(name: str) -> str:
    """tool/tool.py `_camel_to_snake`."""
    s1 = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", s1).lower()


def _conversation(conv: Path, domain: str | None) -> Iterator[Any]:
    """The conversation in `conv` as one trajectory; its problems first."""
    evs, problems = _load(conv)
    state = _state(conv)
    evs, left = _branch(evs, state.get("leaf_event_id"))
    for item in _convert(conv, evs, left, state, domain, problems):
        yield item.at(str(conv), "") if isinstance(item, ImportProblem) else item


def _roles(evs: list[_Event], answers: dict[int, int]) -> dict[int, str | None]:
    """Who wrote each event, for `common.conversation`: the user's and the agent's
    messages, the system prompt, the agent's calls (a think passes over, as do the echoes
    of finish and think), tool results (they end what the agent said)."""
    quiet = {
        answers[k] for k, e in enumerate(evs) if _action_kind(e) in QUIET_ACTIONS and k in answers
    }
    roles: dict[int, str | None] = {}
    for k, e in enumerate(evs):
        if e.kind == "MessageEvent" and _sdk_message(e) is None:
            roles[k] = {"agent": AGENT, "user": USER}.get(e.d["source"])
        elif e.kind == "SystemPromptEvent":
            roles[k] = SYSTEM
        elif e.kind == "ActionEvent":
            roles[k] = None if _action_kind(e) == "ThinkAction" else AGENT
        elif e.kind in ANSWERS:
            roles[k] = None if k in quiet else "tool"
    return roles


def _named(e: _Event) -> str:
    """ActionEvent `e`'s call, as problems name it."""
    return f"the agent's call to {e.d['tool_name']!r} ({e.d['tool_call_id']})"


def _call(
    evs: list[_Event], k: int, answers: dict[int, int], turn: int, parts: NonText
) -> tuple[Action, Observation] | tuple[str, str]:
    """(action, observation) of the agent's call `evs[k]`, or (warning kind, message)
    when it makes no turn."""
    e = evs[k]
    call = _named(e)
    o = answers.get(k)
    if o is None and _action(e) is None:
        return "not_run", f"{e.place}: the SDK made no action of {call}; no turn"
    if o is None:
        return "unpaired_call", f"{e.place}: no observation for {call}; no turn"
    answer = _observation(evs[o], e, turn, parts)
    if isinstance(answer, NoTurn) and answer.kind == "unpaired_call":  # images only
        return answer.kind, f"{answer.why}; no turn"
    if isinstance(answer, NoTurn):
        did = "did not run" if answer.kind == "not_run" else "failed to run"
        return answer.kind, f"{evs[o].place}: OpenHands {did} {call}: {answer.why}; no turn"
    return _step(e), answer


def _convert(
    conv: Path,
    evs: list[_Event],
    left: list[_Event],
    state: dict[str, Any],
    domain: str | None,
    problems: list[ImportProblem],
) -> Iterator[Any]:
    answers = _answers(evs)
    answered = set(answers.values())
    roles = _roles(evs, answers)
    position = {id(e.d): k for k, e in enumerate(evs)}
    said_to, last, unsaid = conversation(
        [e.d for e in evs],
        lambda m: roles.get(position[id(m)]),
        lambda m: _said(evs[position[id(m)]]) is not None,
    )
    said = {x.at: x for x in said_to}
    parts = NonText()
    warn: list[tuple[str, str]] = []  # (kind, message), reported on the conversation dir
    pairs: list[tuple[Action, Observation, str | None]] = []
    starts: list[datetime | None] = []
    times: list[datetime] = []
    names: list[str] = []  # tool names of the turns ("" for a text turn), for the domain
    thinks: list[tuple[str, str | None]] = []  # (place, thought) waiting for a turn
    task = system = tools = error = None
    tools_at = "tools"

    def reply(n: int) -> tuple[Any, str]:
        return _said(evs[n]) or (_message_text(evs[n]), f"{evs[n].place}.llm_message.content")

    for k, e in enumerate(evs):
        at = iso_timestamp(e.d.get("timestamp"), f"{e.place}.timestamp")
        times += [at] if at else []
        kind, akind = e.kind, _action_kind(e)
        if kind == "SystemPromptEvent" and system is None:
            prompt = [e.d["system_prompt"], e.d.get("dynamic_context")]
            system = _text([p for p in prompt if isinstance(p, dict)])
            tools = [_tool_spec(t) for t in e.d.get("tools") or []]
            tools_at = f"{e.place}.tools"
        elif kind == "MessageEvent" and (why := _sdk_message(e)):
            warn.append(("message_not_imported", f"{e.place}: {why}; not imported"))
        elif kind == "MessageEvent" and e.d["source"] == "user" and task is None:
            task = parts.text(_message_text(e), f"task ({e.place}.llm_message.content)")
        elif akind == "ThinkAction":
            thinks.append((e.place, join_reasoning(e.d["action"]["thought"], *_reasoning(e))))
        elif kind == "ActionEvent" and akind != "FinishAction":
            got = _call(evs, k, answers, len(pairs), parts)
            if isinstance(got[0], str):
                warn.append(got)
            else:
                why = join_reasoning(*(t for _, t in thinks), *_reasoning(e))
                pairs.append((*got, why))
                thinks = []
                starts.append(at)
                names.append(e.d["tool_name"])
        elif kind in ANSWERS and k not in answered:
            what = f"a {kind} that answers no call of the agent"
            warn.append(("message_not_imported", f"{e.place}: {what}; not imported"))
        elif kind == "ConversationErrorEvent":
            code, detail = _str(e.d.get("code")), _str(e.d.get("detail"))
            error = ": ".join(x for x in (code, detail) if x) or error
        elif (what := _unread(e)) is not None:
            warn.append(("message_not_imported", f"{e.place}: {what}; not imported"))
        if k in said:
            why = join_reasoning(*(t for _, t in thinks), *_reasoning(e))
            pairs.append(said[k].turn(reply, len(pairs), parts, why))
            thinks = []
            starts.append(at)
            names.append("")
    for place, _ in thinks:
        warn.append(
            ("message_not_imported", f"{place}: a think call no turn follows; not imported")
        )
    for n, what in unsaid:
        warn.append(("message_not_imported", f"{evs[n].place}: {what}; not imported"))
    if left:
        more = f" and {len(left) - 1} more" if len(left) > 1 else ""
        warn.append(
            (
                "message_not_imported",
                f"{left[0].place}{more}: {len(left)} event(s) of a branch the conversation"
                " left; not imported",
            )
        )
    final = None
    if last is not None:
        content, where = reply(last.at)
        final = parts.text(content, f"final message ({where})")
    yield from problems
    for kind, message in warn:
        yield ImportProblem(str(conv), "", kind, message, fatal=False)
    yield from parts.warnings()
    agent = _object(state.get("agent"))
    t = build(
        NAME,
        _conversation_id(conv, state),
        domain or _domain(names),
        pairs,
        task_description=task,
        instruction=task,
        action_space=tools,
        tools_field=tools_at,
        agent={"name": "OpenHands", "model": _str(_object(agent.get("llm")).get("model"))},
        outcome=Outcome(error=error),
        metadata={
            "agent_class": _str(agent.get("kind")),
            "working_dir": _str(_object(state.get("workspace")).get("working_dir")),
            "execution_status": _str(state.get("execution_status")),
            "conversation_title": _str(_object(state.get("tags")).get("title")),
            "agent_system_prompt": system,
            "final_message": final,
        },
    )
    for x, when in zip(t.turns, starts, strict=True):
        x.started_at = when
    t.started_at = min(times) if times else None
    t.ended_at = max(times) if times else None
    yield t


def _object(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _unread(e: _Event) -> str | None:
    """What an event that is neither a turn nor a conversation's message is, when it is
    reported (condensations, ACP tool calls, kinds not read); None for bookkeeping."""
    if e.kind == "Condensation":
        n = len(_list(e.d.get("forgotten_event_ids")))
        summary = " with a summary" if _str(e.d.get("summary")) else ""
        return f"a condensation of the agent's history ({n} event(s) forgotten{summary})"
    if e.kind == "CondensationSummaryEvent":
        return "a condensation summary"
    if e.kind == "ACPToolCallEvent":
        return "an ACP agent's tool call (not read)"
    known = ("MessageEvent", "SystemPromptEvent", "ActionEvent", *ANSWERS)
    if e.kind in BOOKKEEPING or e.kind in known:
        return None
    return f"an event of kind {e.kind!r} (not read)"


def _said(e: _Event) -> tuple[Any, str] | None:
    """(content, where) of what the agent said to its user in `e` (an agent message with
    text, or the `finish` call's message), else None."""
    if e.kind == "MessageEvent" and e.d["source"] == "agent":
        content = _message_text(e)
        return (content, f"{e.place}.llm_message.content") if _text(content) else None
    if _action_kind(e) == "FinishAction":
        return e.d["action"]["message"], f"{e.place}.action.message"
    return None


def _plural_events(evs: list[_Event]) -> str:
    return f"{len(evs)} event{'s' if len(evs) > 1 else ''}"


def _domain(names: list[str]) -> str:
    """web when most environment steps browse, else swe (OpenHands is a coding agent)."""
    env = [n for n in names if n]
    if env and sum(n.startswith("browser") for n in env) * 2 > len(env):
        return "web"
    return "swe"


__all__ = ["NAME", "detect", "parse", "session_entry"]
