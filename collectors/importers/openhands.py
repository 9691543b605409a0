"""OpenHands (All-Hands-AI/OpenHands) event streams: what `--save-trajectory-path` writes
and the GUI's "download trajectory" saves (a JSON list of events, or `{trajectory: [...]}`
as the server's `/trajectory` route answers), and the eval harness's `output.jsonl`
records `{instance_id, instruction, history: [events], test_result, metadata, error}`.

An event is `event_to_dict`'s dict: `id`, `timestamp`, `source` (agent/user/environment),
`message`, then either `action` + `args` or `observation` + `content` + `extras`, with
`cause` (an observation's action id) and `tool_call_metadata` {function_name,
tool_call_id, model_response} when the model called a tool. Old eval histories hold
[action, observation] pairs; they are read as the events they hold.

Each agent action the environment executes (run, run_ipython, read, write, edit, browse,
browse_interactive, call_tool_mcp, ...) is a turn: `run` is a `command` (named after the
tool the model called, else `bash`; `is_input` - keys sent to the running process - is
`keystrokes`), any other a tool call named after the model's function
(`tool_call_metadata.function_name`, else the action type) with the arguments the model
wrote (its tool call in `model_response`, matched by `tool_call_id`; else `args` without
OpenHands' bookkeeping: thought, security_risk, confirmation_state, hidden, blocking,
impl_source, ... and nulls). `thought` (and `reasoning_content`) -> reasoning; a `think`
action's thought -> the next turn's reasoning (none follows: `message_not_imported`).
Observation <- the observation whose `cause` is the action's id, else the next one
without a known cause before the agent's next action: its `content` without OpenHands'
own text (below), exit code <- `extras.metadata.exit_code` (older: `extras.exit_code`;
-1, OpenHands' "no exit code", is none), non-zero, an `error` observation, a browser
`extras.error` -> is_error; `state_json` <- the command's (or cell's) working dir, the
browser's url. None: no turn, `unpaired_call` (what it answered is unknown).

Harness text (templates read in openhands-ai 0.8.3-0.62.0; only whole and in place): a
command's `extras.metadata.prefix`/`suffix` (0.19+) are what `to_agent_observation` adds for
the agent, never output: its no-change ("[The command has no new output after N
seconds. ...]") and hard ("[The command timed out after N seconds. ...]") timeout suffixes
make the output so far a timeout (`common.timed_out`), the "[Previous command outputs are
truncated. ...]" prefix a cut (`truncated`). In `content`: the cut of 0.50-0.62
(15,000 characters, "[... Observation truncated due to length ...]", 15,000) -> head and
tail, truncated; the SIGINT notice of the 0.8-0.18 runtimes ("[Command timed out after N
seconds. SIGINT was sent to interrupt ...]", then 0.8/0.9's prompt) and ssh_box's
`Command: "CMD" timed out. Sent SIGINT to the process: ...` -> timeouts (the agent's
ctrl+c: the notice is dropped); a cell's "[Jupyter current working directory: D]" /
"[Jupyter Python interpreter: P]" lines (D -> state), "[Code executed successfully with
no output]" (-> empty), "[Execution timed out (N seconds).]" (-> timeout), inlined PNGs
(reported, as `image_urls` and a browser's screenshots are: `non_text_part`); the browser's
frame (0.43+: URL, focused element, "[Action executed successfully.]", headers) around the
accessibility tree or page text. An action OpenHands never ran (the controller's "The
action has not been executed...", a `user_rejected` observation, bash.py refusing several
commands or a command while another runs, an empty command with nothing running, an action
the runtime lacks) is no turn: `not_run`; one its runtime failed on ("... due to a runtime
error ...", 0.8/0.9 "... execution failed: ...", undecodable output) is no turn:
`harness_failure`. The prompt 0.8/0.9 append to a command's output and the command 0.14-0.18
write before it are kept: they are what a terminal shows.

What the agent said to its user (an agent `message`), answered by user messages, is a
`text` turn (`common.conversation`, as for OpenAI/ATIF); the agent's last unanswered
message -> metadata `final_message`. The first user message is the task; a `system`
action -> metadata `agent_system_prompt`, its `tools` -> action space. `finish`/`reject`
are no turn: `final_thought`, `outputs`, `task_completed` -> metadata. Framework
bookkeeping (agent_state_changed, recall, null, condensation, think acknowledgements) is
skipped; any other observation that answers no agent action and has content is
`message_not_imported`, as is an action the user ran. Outcome <- `test_result.report.
resolved` (or a merged record's `report.resolved`), else unknown. Domain: web when most
turns browse, else swe (OpenHands is a coding agent; eval outputs are SWE tasks).

The server's file store (`file_store_path`, e.g. `~/.openhands-state`; since May 2024)
keeps a conversation as one file per event, `event_to_dict`'s dict:
`sessions/<sid>/events/<id>.json` (`users/<uid>/conversations/<sid>/...` with a user),
ids counted from 0; since April 2025 also `event_cache/<start>-<start + 25>.json`, a copy
of 25 events as one list; beside them `metadata.json` (title, selected_repository,
llm_model ...), `init.json`, `event_count` and pickles. A session is one trajectory,
origin id `<sid>`: its events in id order (numeric, 10 after 9), converted as above. The
import reads each file on its own, so the session is read at its lowest-numbered event
file the import reads as an event (its origin path), and its other files yield nothing:
name the session's directory, its `events/`, or one above. metadata.json's title,
selected_repository and selected_branch -> metadata (`conversation_title`, ...), its
llm_model -> the agent's model. OpenHands V1 (software-agent-sdk) writes
`events/event-00000-<uuid>.json` in another event schema: read by `openhands_v1` (format
`openhands-v1`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from worldtrace.schemas import Action, Observation, Outcome, Trajectory

from ..actions import keystrokes
from .common import (
    AGENT,
    SYSTEM,
    USER,
    ImportProblem,
    InvalidField,
    NonText,
    build,
    conversation,
    expected,
    file_cached,
    first_line,
    guess_domain,
    iso_timestamp,
    join_reasoning,
    kept_ends,
    null_or_missing,
    numbered_files,
    origin_stem,
    timed_out,
    tool_action,
    warning,
)
from .reading import read_json

NAME = "openhands"

NOT_STEPS = frozenset(
    {
        "message",
        "system",
        "finish",
        "reject",
        "think",
        "recall",
        "change_agent_state",
        "null",
        "condensation",
        "condensation_request",
        "summarize",
        "pause",
        "resume",
        "stop",
        "start",
    }
)
"""Actions that are no environment step (said, ended, logged, or framework bookkeeping)."""
CLAIMS_BY_CAUSE = frozenset({"think", "recall", "condensation", "condensation_request"})
"""Non-step actions whose acknowledgement (an observation with their id as cause) is
passed over with them."""
BOOKKEEPING = frozenset(
    {"agent_state_changed", "null", "recall", "condense", "condensation", "think"}
)
"""Observations of the framework, not of the environment: skipped when they answer nothing."""
NOT_ARGUMENTS = frozenset(
    {
        "thought",
        "reasoning_content",
        "security_risk",
        "confirmation_state",
        "is_confirmed",
        "hidden",
        "blocking",
        "impl_source",
        "is_static",
        "cwd",
        "include_extra",
        "kernel_init_code",
        "return_axtree",
        "runnable",
        "timestamp",
    }
)
"""OpenHands' bookkeeping in an action's `args`, not what the model passed."""
LLM_EDIT_ONLY = {"content": "", "start": 1, "end": -1}
ACI_EDIT_ONLY = ("command", "file_text", "old_str", "new_str", "insert_line")
BROWSE = frozenset({"browse", "browse_interactive"})


# ---------------------------------------------------------------------------- detection


def _is_event(e: Any) -> bool:
    """An `event_to_dict` dict: `action` (a string) with `args`, or `observation` with
    `content`/`extras` - never both (a SWE-agent step has both)."""
    if not isinstance(e, dict) or ("action" in e) == ("observation" in e):
        return False
    if "action" in e:
        return isinstance(e["action"], str) and isinstance(e.get("args", {}), dict)
    return isinstance(e["observation"], str) and ("content" in e or "extras" in e)


def _is_pair(p: Any) -> bool:
    return isinstance(p, list) and len(p) == 2 and all(_is_event(e) for e in p)


def _is_history(xs: Any) -> bool:
    """A non-empty list of events (or of the old [action, observation] pairs)."""
    return (
        isinstance(xs, list)
        and bool(xs)
        and (all(_is_event(e) for e in xs) or all(_is_pair(p) for p in xs))
    )


def _events_of(data: Any) -> tuple[str, Any] | None:
    """(key, events) of a whole-file trajectory: a list of events ("events"), or the
    `/trajectory` route's `{trajectory: [...]}`; None for anything else."""
    if isinstance(data, list):
        return ("events", data) if _is_history(data) and _sourced(data) else None
    if isinstance(data, dict) and _is_history(data.get("trajectory")):
        return "trajectory", data["trajectory"]
    return None


def _sourced(xs: list[Any]) -> bool:
    flat = [e for p in xs for e in (p if isinstance(p, list) else [p])]
    return any("source" in e or "id" in e for e in flat)


def detect(path: Path, head: Any) -> bool:
    return _events_of(head) is not None or _in_store(path, head)


def detect_record(d: Any) -> bool:
    """An eval harness record: a `history` of events (an empty one beside `instance_id`:
    the run stopped before its first event)."""
    if not isinstance(d, dict):
        return False
    history = d.get("history")
    return _is_history(history) or (history == [] and "instance_id" in d)


def near_miss(d: Any) -> tuple[str, str] | None:
    """(what is wrong, the evidence) for an eval record (`instance_id`) whose `history`
    is no list of events (another format's role messages are not taken for it)."""
    if not isinstance(d, dict) or "instance_id" not in d or "history" not in d:
        return None
    history = d["history"]
    if detect_record(d) or (
        isinstance(history, list) and any(isinstance(m, dict) and "role" in m for m in history)
    ):
        return None
    return str(expected("history", "a list of OpenHands events", history)), (
        "its `history` beside `instance_id`"
    )


# ---------------------------------------------------------------------------- file store

EVENT_FILE = re.compile(r"(0|[1-9][0-9]*)\.json")
"""An event's file, `events/<id>.json` (storage/locations.py get_conversation_event_filename)."""
CACHE_PAGE = re.compile(r"(0|[1-9][0-9]*)-(0|[1-9][0-9]*)\.json")
"""A page of the paged cache, `event_cache/<start>-<start + 25>.json`."""
SESSION_FILES = frozenset({"metadata.json", "init.json", "llm_registry.json", "exp_config.json"})
"""The conversation's other JSON files beside `events/`; only metadata.json is read."""


def _store_file(path: Path) -> tuple[Path, str] | None:
    """(session dir, "event" | "page" | "session") of a file in the file store's layout."""
    path = path.absolute()
    if path.parent.name == "events" and EVENT_FILE.fullmatch(path.name):
        return path.parent.parent, "event"
    if path.parent.name == "event_cache" and CACHE_PAGE.fullmatch(path.name):
        return path.parent.parent, "page"
    if path.name in SESSION_FILES:
        return path.parent, "session"
    return None


def session_entry(path: Path) -> Path | None:
    """The file a session of the file store is imported at (`_first`), for any of its
    files named on their own (an event file, a cache page, metadata.json): the session is
    one trajectory, so naming one of its files imports all of it. None for other files."""
    found = _store_file(path)
    return _first(found[0]) if found else None


def _stored_event(data: Any) -> bool:
    """What an event file holds: an object with `action` or `observation` (whether the
    rest is well formed is the session's to report)."""
    return isinstance(data, dict) and ("action" in data or "observation" in data)


def _in_store(path: Path, head: Any) -> bool:
    """Whether `path` is a file of a file-store session: an event file holding an event,
    a cache page (a list) or the session's metadata and settings, beside an `events/`
    directory with an event the import reads."""
    found = _store_file(path)
    if found is None:
        return False
    session, role = found
    if role == "event" and not _stored_event(head):
        return False  # not an event: the import reports the file as it is
    if role == "page" and not isinstance(head, list):
        return False
    return _first(session) is not None


def _event_files(session: Path, fresh: bool = False) -> Iterator[tuple[int, Path]]:
    """(id, file) of the session's event files in id order (`common.numbered_files`)."""
    return numbered_files(session / "events", EVENT_FILE, fresh)


def _first(session: Path) -> Path | None:
    """The session's lowest-numbered event file the import reads as an event: the one of
    its files that imports it (the import reads each file on its own; the others yield
    nothing)."""
    return next((f for _, f in _event_files(session) if _reads_as_event(f)), None)


@file_cached
def _reads_as_event(f: Path) -> bool:
    return _stored_event(read_json(f))


def _session(session: Path, domain: str | None) -> Iterator[Any]:
    """A file-store session as one trajectory: its events in id order, from
    `events/<id>.json`, an id no event file gives taken from the `event_cache` page that
    holds it.

    The event files are the record: EventStream.add_event writes every event to its own
    file first and only then, once 25 events fill a page, the same dicts again as
    `event_cache/<start>-<start + 25>.json` ("if it is not present during reads then it
    will simply be bypassed"); EventStore reads a page only to save file reads. So the
    pages are copies: each id is taken once, from its event file when the import reads
    one, from a page only when none does (a lost file, one cut short).

    A file the import cannot read (not JSON, unreadable, not an event) is reported by the
    import as that file's problem; an event file whose event is malformed (its `id` not
    its number, `args` no object, a field a turn cannot be made of) is reported here as
    `invalid`, naming the file and the field, and only that event is left out. Ids of
    0 to the last (or the `event_count` OpenHands writes) that no event fills are one
    `missing_event` warning."""
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    last = -1
    for n, f in _event_files(session, fresh=True):
        last = n
        data = read_json(f)
        if _stored_event(data):
            found[n] = (f"events/{f.name}", data)
    for n, place, e in _cached(session):
        last = max(last, n)
        found.setdefault(n, (place, e))
    problems: list[ImportProblem] = []
    evs: list[tuple[str, dict[str, Any]]] = []
    for n in sorted(found):
        place, e = found[n]
        bad = _malformed(e, n, place)
        if bad:
            problems.append(_bad_event(session, place, bad))
        else:
            evs.append((place, e))
    end = max(last + 1, _event_count(session))
    missing = [n for n in range(end) if n not in found]
    if missing:
        many = len(missing) > 1
        them = "them" if many else "it"
        what = f"event{'s' * many} {_ranges(missing)} of 0-{end - 1} {'are' if many else 'is'}"
        problems.append(
            ImportProblem(
                str(session / "events"),
                "",
                "missing_event",
                f"{what} missing (no event file the import reads, no event_cache page holds "
                f"{them}); the session is imported without {them}",
                fatal=False,
            )
        )
    while True:  # a field no turn can be made of costs its event only
        try:
            kept = {e["id"] for _, e in evs}
            lost = [n for n in range(end) if n not in kept]
            items = list(_convert(evs, session.name, domain, None, lost))
            break
        except InvalidField as exc:
            msg = str(exc)
            k = next((k for k, (p, _) in enumerate(evs) if msg.startswith((p + ".", p + ":"))), -1)
            if k < 0:
                raise
            problems.append(_bad_event(session, evs.pop(k)[0], msg))
    yield from problems
    meta = _metadata(session)
    for item in items:
        if isinstance(item, Trajectory):
            item.agent.model = _str(meta.get("llm_model")) or item.agent.model
            for key, to in (
                ("title", "conversation_title"),
                ("selected_repository", "selected_repository"),
                ("selected_branch", "selected_branch"),
            ):
                if _str(meta.get(key)):
                    item.metadata[to] = meta[key]
            yield item
        else:
            yield item.at(str(session), "")


def _cached(session: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(id, place, event) of the events in the session's cache pages; page `<start>-...`
    holds ids start, start + 1, ... in order (EventStore reads it so)."""
    pages = []
    for f in (session / "event_cache").glob("*.json"):
        m = CACHE_PAGE.fullmatch(f.name)
        if m:
            pages.append((int(m[1]), f))
    for start, f in sorted(pages):
        data = read_json(f)
        for i, e in enumerate(data if isinstance(data, list) else []):
            if _stored_event(e):
                yield start + i, f"event_cache/{f.name}[{i}]", e


def _malformed(e: dict[str, Any], n: int, place: str) -> str | None:
    """What makes a stored event unusable, as `place.field: ...`; None when it is not."""
    eid = e.get("id")
    if type(eid) is not int or eid != n:
        return str(expected(f"{place}.id", f"{n} (its number in the store)", eid))
    if "action" in e and "observation" in e:
        return f"{place}: holds both `action` and `observation`"
    for key in ("action", "observation", "source"):
        if key in e and not isinstance(e[key], str) and (key != "source" or e[key] is not None):
            return str(expected(f"{place}.{key}", "a string", e[key]))
    if e.get("cause") is not None and type(e["cause"]) is not int:
        return str(expected(f"{place}.cause", "an event id (an integer)", e["cause"]))
    try:  # what converting it would refuse (`_convert` is the judge: see `_session`)
        iso_timestamp(e.get("timestamp"), f"{place}.timestamp")
        if "action" in e:
            _args(e, place)
            if _steps(e) and _by_agent(e):
                _step(e, place, [])
        else:
            _observation(e, place, 0, NonText())
    except InvalidField as exc:
        return str(exc)
    return None


def _bad_event(session: Path, place: str, message: str) -> ImportProblem:
    """`invalid` for the file holding the event at `place`, naming the field: for
    `events/4.json` `args: ...`, for a cache page's event `[3].args: ...`."""
    file = place.partition("[")[0]
    rest = place[len(file) :] + message[len(place) :]
    return ImportProblem(
        str(session / file), "", "invalid", rest.removeprefix(".").removeprefix(": ")
    )


def _ranges(ns: list[int]) -> str:
    """`3, 7-9` of sorted ids."""
    runs: list[list[int]] = []
    for n in ns:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _event_count(session: Path) -> int:
    """The number of events newer OpenHands records in `event_count` (0: none)."""
    try:
        return int((session / "event_count").read_text().strip())
    except (OSError, ValueError):
        return 0


def _metadata(session: Path) -> dict[str, Any]:
    """metadata.json (ConversationMetadata: title, selected_repository, llm_model ...);
    {} when there is none (CLI sessions write none) or it is no object."""
    f = session / "metadata.json"
    data = read_json(f) if f.is_file() else None
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------------------- parsing


def parse(path: Path, data: Any, domain: str | None = None) -> Iterator[Any]:
    if _in_store(path, data):  # a file of a session in the file store
        session = _store_file(path)[0]
        if path.absolute() == _first(session):
            yield from _session(session, domain)
        return  # any other file of the session is read with it, at its first event file
    found = _events_of(data)
    if found is None:  # --format openhands on something else
        yield ImportProblem("", "", "unrecognized", "not an OpenHands event list")
        return
    key, events = found
    yield from _convert(_flatten(key, events), origin_stem(path), domain, None)


def parse_record(
    d: Any, origin: str, domain: str | None = None, path: Path | None = None
) -> Iterator[Any]:
    """`path`: the file the record is in (unused here: see `agentworldbench`)."""
    if not isinstance(d, dict):
        raise expected("record", "an object with a `history` list", d)
    history = d.get("history")
    if not isinstance(history, list):
        raise expected("history", "a list of OpenHands events", history)
    iid = d.get("instance_id")
    origin = str(iid) if iid is not None else origin
    yield from _convert(_flatten("history", history), origin, domain, d)


def _flatten(key: str, events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """(place, event) in order; old pair histories give `history[n][0]`, `[1]`."""
    out = []
    for n, e in enumerate(events):
        if isinstance(e, list):
            out += [(f"{key}[{n}][{j}]", x) for j, x in enumerate(e) if isinstance(x, dict)]
        elif isinstance(e, dict):
            out.append((f"{key}[{n}]", e))
        else:
            raise expected(f"{key}[{n}]", "an OpenHands event (an object)", e)
    return out


def _kind(e: dict[str, Any]) -> str | None:
    return e.get("action") if "action" in e else None


def _by_agent(e: dict[str, Any]) -> bool:
    """An agent's action (old histories may lack `source`: not a message, so the agent's)."""
    src = e.get("source")
    return src == "agent" or (src is None and e.get("action") != "message")


def _steps(e: dict[str, Any]) -> bool:
    """Whether `e` is an action the environment executes."""
    return "action" in e and e["action"] not in NOT_STEPS


def _answers(evs: list[tuple[str, dict[str, Any]]], lost: Collection[Any] = ()) -> dict[int, int]:
    """Position of each action -> the position of the observation that answers it: the
    first with its id as `cause`, else (an executed action) the next observation without
    a known cause (an action's, or one of the `lost` ids) before the agent's next action."""
    ids = {e["id"] for _, e in evs if "action" in e and "id" in e} | set(lost)
    by_cause: dict[Any, list[int]] = {}
    for k, (_, e) in enumerate(evs):
        if "observation" in e and e.get("cause") is not None:
            by_cause.setdefault(e["cause"], []).append(k)
    out: dict[int, int] = {}
    claimed: set[int] = set()
    for k, (_, e) in enumerate(evs):
        kind = _kind(e)
        if kind is None or not (_steps(e) or kind in CLAIMS_BY_CAUSE):
            continue
        got = next((j for j in by_cause.get(e.get("id"), []) if j not in claimed), None)
        if got is None and _steps(e):
            for j in range(k + 1, len(evs)):
                x = evs[j][1]
                if "action" in x and _by_agent(x):
                    break
                if "observation" in x and j not in claimed and x.get("cause") not in ids:
                    got = j
                    break
        if got is not None:
            out[k] = got
            claimed.add(got)
    return out


def _role(e: dict[str, Any]) -> str | None:
    kind = _kind(e)
    if kind == "message":
        return {"agent": AGENT, "user": USER}.get(e.get("source"))
    if kind == "system":
        return SYSTEM
    if kind is not None and _steps(e) and _by_agent(e):
        return AGENT  # a step of the agent's ends what it said
    return None


def _says(e: dict[str, Any]) -> bool:
    return _kind(e) == "message" and bool(_args(e, "").get("content"))


def _args(e: dict[str, Any], place: str) -> dict[str, Any]:
    args = e.get("args", {})
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise expected(f"{place}.args", "an object", args)
    return args


def _content(e: dict[str, Any], place: str) -> Any:
    """A message's `content` with its `image_urls` as parts (reported, not imported)."""
    args = _args(e, place)
    urls = args.get("image_urls") or args.get("images_urls") or []
    if not urls:
        return args.get("content")
    return [args.get("content") or "", *({"type": "image_url"} for _ in urls)]


def _thought(args: dict[str, Any]) -> list[str | None]:
    """The reasoning an action carries: `reasoning_content`, then `thought` (a string, or
    newer OpenHands' {text, reasoning_content})."""
    t = args.get("thought")
    if isinstance(t, dict):
        return [_str(t.get("reasoning_content")), _str(t.get("text"))]
    return [_str(args.get("reasoning_content")), _str(t)]


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _model_call(meta: Any, place: str) -> tuple[str | None, Any, str]:
    """(the function the model called, the arguments it wrote or None, their place) from
    `tool_call_metadata`: its tool call in `model_response` with `tool_call_id`."""
    if not isinstance(meta, dict):
        return None, None, ""
    name = _str(meta.get("function_name")) or None
    cid = meta.get("tool_call_id")
    response = meta.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for c, choice in enumerate(choices if isinstance(choices, list) else []):
        msg = choice.get("message") if isinstance(choice, dict) else None
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        for j, call in enumerate(calls if isinstance(calls, list) else []):
            fn = call.get("function") if isinstance(call, dict) else None
            if cid is not None and isinstance(fn, dict) and call.get("id") == cid:
                where = (
                    f"{place}.tool_call_metadata.model_response.choices[{c}]"
                    f".message.tool_calls[{j}].function.arguments"
                )
                return name or _str(fn.get("name")), fn.get("arguments"), where
    return name, None, ""


def _model_name(meta: Any) -> str | None:
    response = meta.get("model_response") if isinstance(meta, dict) else None
    return _str(response.get("model")) if isinstance(response, dict) else None


def _arguments(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """`args` as the model passed them: OpenHands' bookkeeping and nulls left out, and an
    edit's fields of the other editing mode at their defaults."""
    out = {k: v for k, v in args.items() if k not in NOT_ARGUMENTS and v is not None}
    if kind == "edit":
        if args.get("impl_source", "oh_aci") == "oh_aci":
            out = {k: v for k, v in out.items() if LLM_EDIT_ONLY.get(k, object()) != v}
        elif not out.get("command"):
            out = {k: v for k, v in out.items() if k not in ACI_EDIT_ONLY}
    return out


def _step(
    e: dict[str, Any], place: str, reasoning: list[str | None]
) -> tuple[Action, str | None, str]:
    """(action, reasoning, tool name for the domain) of an executed agent action."""
    kind = e["action"]
    args = _args(e, place)
    name, written, where = _model_call(e.get("tool_call_metadata"), place)
    why = join_reasoning(*reasoning, *_thought(args))
    if kind == "run":
        cmd = args.get("command")
        if not isinstance(cmd, str):
            raise expected(f"{place}.args.command", "a string", cmd)
        if args.get("is_input") is True:  # keys sent to the running process
            return keystrokes(cmd), why, name or "bash"
        return Action("command", cmd, name=name or "bash"), why, name or "bash"
    if kind == "call_tool_mcp" and written is None:
        name = name or _str(args.get("name"))
        written, where = args.get("arguments"), f"{place}.args.arguments"
    name = name or kind
    if written is None:
        written, where = _arguments(kind, args), f"{place}.args"
    return tool_action(name, written, where), why, name


def _observation(
    o: dict[str, Any],
    place: str,
    turn: int,
    parts: NonText,
    command: str | None = None,
) -> Observation | NoTurn:
    """The environment's answer in observation `o` (of the agent's action at turn `turn`;
    `command`: the command a `run` action sent), without OpenHands' own text (module doc,
    "Harness text"); `NoTurn` when OpenHands did not run the action or failed to."""
    extras = o.get("extras") if isinstance(o.get("extras"), dict) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    at = (
        f"{place}.extras.metadata.exit_code" if "exit_code" in meta else f"{place}.extras.exit_code"
    )
    code = meta["exit_code"] if "exit_code" in meta else extras.get("exit_code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise expected(at, "an integer", code)
    if code == -1:  # OpenHands' "no exit code" (still running, timed out)
        code = None
    failed = extras.get("error")
    if failed is not None and not isinstance(failed, bool):  # "false" is not false
        raise expected(f"{place}.extras.error", "a boolean", failed)
    typ = o.get("observation")
    raw = o.get("content")
    if raw is None and typ != "user_rejected":  # what it answered is unknown: never ""
        return NoTurn("unpaired_call", "")
    prefix, suffix = _str(meta.get("prefix")) or "", _str(meta.get("suffix")) or ""
    framed = isinstance(extras.get("metadata"), dict)  # 0.19+: the framing is in the metadata
    skip = _not_answered(typ, raw, suffix, code, framed)
    if skip:
        return skip
    text = parts.text(raw, f"turn {turn} observation ({place}.content)")
    state = {}
    if _str(meta.get("working_dir")):
        state["working_dir"] = meta["working_dir"]
    if typ in BROWSE and _str(extras.get("url")):
        state["url"] = extras["url"]
    cut = timeout = False
    if typ == "run" and framed:
        text, cut = _uncut(text)
        cut = cut or bool(HISTORY_CUT.fullmatch(prefix))
        timeout = bool(WAITED.fullmatch(suffix))
    elif typ == "run" and isinstance(raw, str):  # older runtimes wrote theirs in `content`
        text, code, timeout = _old_command(text, code, command)
    elif typ == "run_ipython" and isinstance(raw, str):
        text, cwd, timeout, images = _cell(text)
        state.update({"working_dir": cwd} if cwd else {})
        _images(parts, images, turn, f"{place}.content")
        _images(parts, _count(extras.get("image_urls")), turn, f"{place}.extras.image_urls")
    elif typ == "browse" and isinstance(raw, str):
        text = _page(text)
        for key in ("screenshot", "set_of_marks"):
            _images(parts, int(bool(_str(extras.get(key)))), turn, f"{place}.extras.{key}")
    elif typ == "error" and isinstance(raw, str) and CLIENT_TIMEOUT.fullmatch(raw):
        text, timeout = "", True
    state_json = json.dumps(state, sort_keys=True) if state else None
    if timeout:
        return timed_out(text, state_json, cut)
    return Observation(
        text,
        is_error=typ == "error" or bool(code) or failed is True,
        exit_code=code,
        truncated=cut,
        state_json=state_json,
    )


def observation(
    o: dict[str, Any], place: str, turn: int, parts: NonText, command: str | None = None
) -> Observation | NoTurn:
    """`_observation`, for files other tools wrote from OpenHands' observation events
    (harbor's ATIF keeps an observation's `content`, not its type or extras)."""
    return _observation(o, place, turn, parts, command)


# ---------------------------------------------------------------------------- harness text
# Templates read in OpenHands' source (openhands-ai 0.8.3 - 0.62.0 on PyPI, the V0 code of
# All-Hands-AI/OpenHands, now OpenHands/OpenHands); each is read only whole and in its place.


class NoTurn(NamedTuple):
    """An action OpenHands answered with its own text instead of running it: `not_run`
    (it did not run it) or `harness_failure` (its runtime failed on it); or one whose
    observation has null `content` (`unpaired_call`: the answer is unknown)."""

    kind: str
    why: str


NOT_RUN = re.compile(
    "|".join(
        (
            # controller/agent_controller.py `_reset` (0.19-0.2x; 0.3x-0.50; 0.51+ when stopped)
            r"The action has not been executed\.",
            r"The action has not been executed\. This may have occurred because the user pressed"
            r" the stop button, or because the runtime system crashed and restarted due to"
            r" resource constraints\. Any previously established system state, dependencies, or"
            r" environment variables may have been lost\.",
            r"Stop button pressed\. The action has not been executed\.",
            # runtime/utils/bash.py (0.19+; windows_bash.py: PowerShell operators)
            r"ERROR: Cannot execute multiple commands at once\.\nPlease run each command"
            r" separately OR chain them into a single command via (?:&& or ;|PowerShell operators"
            r" \(e\.g\., ; or \|\))\nProvided commands:\n\(1\) .*",
            r"ERROR: No previous running command to (?:retrieve logs from|interact with)\.",
            # runtime/base.py, impl/*: an action the runtime does not offer
            r"(?:\[Runtime \(ID=[^)\n]*\)\] )?Action [a-z_]+ is not supported in the current"
            r" runtime\.",
            r"Browser functionality is not supported or disabled\.",
        )
    ),
    re.S,
)
"""ErrorObservation contents saying OpenHands did not run the action."""
NO_PREVIOUS = frozenset(
    {
        # runtime/utils/bash.py: an empty command or input with no command running (0.19-0.2x;
        # 0.2x+), answered as a CmdOutputObservation with no exit code
        "ERROR: No previous command to continue from. Previous command has to be timeout to be"
        " continued.",
        "ERROR: No previous running command to retrieve logs from.",
        "ERROR: No previous running command to interact with.",
    }
)
BUSY = re.compile(
    r"\n?\[Your command \".*\" is NOT executed\. The previous command is still running - You"
    r" CANNOT send new commands until the previous command is completed\. .*\]",
    re.S,
)
"""bash.py's suffix for a command sent while the previous one runs: it was not sent."""
FAILED = re.compile(
    "|".join(
        (
            # controller/agent_controller.py `_reset` after a runtime error (0.51+)
            r"The action has not been executed due to a runtime error\. The runtime system may"
            r" have crashed and restarted due to resource constraints\. Any previously"
            r" established system state, dependencies, or environment variables may have been"
            r" lost\.",
            # runtime/client/runtime.py (0.8.x "Command ...", 0.9.x "Action ..."): the sandbox
            # server's error or the request's exception
            r"(?:Command|Action) execution failed: .*",
            # runtime/utils/bash.py (0.10-0.18): the output could not be read
            r"Runtime bash execution failed: Command output could not be decoded as utf-8\. .*",
        )
    ),
    re.S,
)
"""ErrorObservation contents saying OpenHands' runtime failed on the action."""
CLIENT_TIMEOUT = re.compile(
    r"Command execution timed out|Action execution timed out after \d+(?:\.\d+)? seconds\."
)
"""runtime/client/runtime.py (0.8.x; 0.9.x): no answer from the sandbox within the timeout."""
WAITED = re.compile(
    r"\n?\[The command (?:has no new output after|timed out after) \d+(?:\.\d+)? seconds\.(?: .*)?\]",
    re.S,
)
"""bash.py's no-change and hard timeout suffixes (CLIRuntime: `[The command timed out after
N.N seconds.]`): OpenHands stopped waiting; `content` is the output so far."""
HISTORY_CUT = re.compile(
    r"\[Previous command outputs are truncated\. Showing the last \d+ lines of the output"
    r" below\.\]\n"
)
"""bash.py's prefix when tmux's history limit dropped the start of the output."""
CUTS = (
    (15000, re.compile(re.escape("\n[... Observation truncated due to length ...]\n"))),
    (4750, re.compile(r"\n\[\.\.\. Command output truncated: removed \d+ characters from the middle \.\.\.\]\n")),
)  # fmt: skip
"""(half, notice) of CmdOutputObservation's cut of `content`: content[:half] + notice +
content[-half:] (0.50.0-0.62.0: MAX_CMD_OUTPUT_SIZE 30000; All-Hands-AI/OpenHands@0a67621c:
9500, never released)."""
SIGINT = re.compile(
    r"(?P<out>.*)\r\n\r\n\[(?P<timeout>Command timed out after \d+(?:\.\d+)? seconds\. )?SIGINT"
    r" was sent to interrupt (?:it|the command(?:, but failed\. The command was killed)?)\.\]"
    r"(?P<prompt>\r\n(?:\[Python Interpreter: [^\]\r\n]*\]\n|\n)?[a-z0-9_-]*@[a-zA-Z0-9.-]*:[^\r\n]+ [#$] )?",
    re.S,
)  # fmt: skip
"""The pexpect runtimes' notice (0.8.x runtime/client/client.py "... interrupt it.]", 0.10-0.18
runtime/utils/bash.py "... interrupt the command.]" or "..., but failed. ..."), after the
output and before the prompt they re-assemble (`\\u@\\h:\\w # `, 0.9: after "[Python
Interpreter: P]"): a timeout, or the agent's own ctrl+c (no "Command timed out")."""
SSH_TIMEOUT = re.compile(
    r'Command: "(?P<cmd>.*?)" timed out(?:\. Sent SIGINT to the process: (?P<out>.*))?', re.S
)
"""OpenDevin's ssh_box `_send_interrupt` (`Command: "CMD" timed out. Sent SIGINT to the
process: ` + "\\n" + the output so far) and the e2b sandbox (`Command: "CMD" timed out`),
exit code -1."""
JUPYTER = re.compile(
    r"(?P<out>.*)\n\[Jupyter current working directory: (?P<cwd>[^\n]*)\]"
    r"(?:\n\[Jupyter Python interpreter: [^\n]*\])?",
    re.S,
)
"""What the action server appends to a cell's output (0.8: the directory; 0.9+: and the
interpreter; runtime/client/client.py, then runtime/action_execution_server.py)."""
NO_OUTPUT = "[Code executed successfully with no output]"
CELL_TIMEOUT = re.compile(r"\[Execution timed out \(\d+(?:\.\d+)? seconds\)\.\]")
"""runtime/plugins/jupyter/execute_server.py: a cell without output; one interrupted at its
timeout (instead of any output)."""
INLINE_IMAGE = re.compile(r"\n!\[image\]\(data:image/png;base64,[A-Za-z0-9+/=]*\)(\n|$)")
"""execute_server.py before 0.40: a PNG the cell displayed, inlined as markdown."""
_NOTE = (
    r":\nNote: \[bid\] is the unique alpha-numeric identifier at the beginning of lines for each"
    r" element in the AXTree\. Always use bid to refer to elements in your actions\.\n"
)
PAGE = re.compile(
    r"\[Current URL: [^\n]*\]\n\[Focused element bid: [^\n]*\]\n(?:\[Screenshot saved to: [^\n]*\]\n)?\n"
    r"(?:================ BEGIN error message ===============\nThe following error occurred when"
    r" executing the last action:\n(?P<error>.*?)\n================ END error message ===============\n"
    r"|\[Action executed successfully\.\]\n)"
    r"(?:Accessibility tree of the (?:COMPLETE webpage|VISIBLE portion of the webpage \(accessibility"
    r" tree of complete webpage is too large and you may need to scroll to view remaining portion"
    r" of the webpage\))" + _NOTE + r")?"
    r"============== BEGIN accessibility tree ==============\n(?P<page>.*)\n"
    r"============== END accessibility tree ==============\n"
    r"|\[Current URL: [^\n]*\]\n"
    r"(?:================ BEGIN error message ===============\nThe following error occurred when"
    r" trying to visit the URL:\n(?P<url_error>.*?)\n================ END error message ===============\n)?"
    r"============== BEGIN webpage content ==============\n(?P<text>.*)\n"
    r"============== END webpage content ==============\n",
    re.S,
)  # fmt: skip
"""runtime/browser/utils.py `get_agent_obs_text` (0.43+): the frame the browser's answer is
stored in (browse_interactive: the accessibility tree; browse: the page's text)."""


def _not_answered(typ: Any, raw: Any, suffix: str, code: int | None, framed: bool) -> NoTurn | None:
    """Whether the observation says OpenHands did not run the action, or failed to (`framed`:
    a command's observation with `extras.metadata`, 0.19+)."""
    if typ == "user_rejected":
        return NoTurn("not_run", "the user rejected it")
    if not isinstance(raw, str):
        return None
    if typ == "error" and NOT_RUN.fullmatch(raw):
        return NoTurn("not_run", f"it answered {first_line(raw)!r}")
    if typ == "error" and FAILED.fullmatch(raw):
        return NoTurn("harness_failure", f"it answered {first_line(raw)!r}")
    if typ == "run" and framed and code is None and raw in NO_PREVIOUS:
        return NoTurn("not_run", f"it answered {raw!r}")
    if typ == "run" and framed and BUSY.fullmatch(suffix):
        return NoTurn(
            "not_run",
            "the previous command was still running (the output it showed of that one is not"
            " imported)",
        )
    return None


def _uncut(text: str) -> tuple[str, bool]:
    """(what was shown, cut) of a command's `content` OpenHands cut in the middle: its head
    and tail when the notice sits exactly between them, else the text as it is."""
    for half, notice in CUTS:
        m = notice.match(text, half)
        if m and len(text) - m.end() == half:
            return kept_ends(text[:half], text[m.end() :]), True
    return text, False


def _old_command(text: str, code: int | None, command: str | None) -> tuple[str, int | None, bool]:
    """(output, exit code, timed out) of a command's `content` from a runtime before 0.19,
    which wrote its notices there (no `extras.metadata`)."""
    m = SIGINT.fullmatch(text)
    if m and m["timeout"]:
        return m["out"], None, True
    if m:  # the agent's ctrl+c: the output after it, and the prompt as any command's
        return m["out"] + (m["prompt"] or ""), code, False
    m = SSH_TIMEOUT.fullmatch(text)
    if m and code is None and command is not None and m["cmd"] == command.strip():
        return (m["out"] or "").removeprefix("\n"), None, True
    return text, code, False


def _cell(text: str) -> tuple[str, str | None, bool, int]:
    """(output, working dir, timed out, images) of an IPython cell's `content`."""
    m = JUPYTER.fullmatch(text)
    cwd = None
    if m:
        text, cwd = m["out"], m["cwd"]
    text, images = INLINE_IMAGE.subn(lambda x: x[1], text)
    if text == NO_OUTPUT:
        text = ""
    return ("", cwd, True, images) if CELL_TIMEOUT.fullmatch(text) else (text, cwd, False, images)


def _page(text: str) -> str:
    """The browser's answer in its frame: the error it reported, then the accessibility tree
    (or the page's text); text not in the whole frame is kept as it is."""
    m = PAGE.fullmatch(text)
    if not m:
        return text
    if m["text"] is not None:
        return "\n".join(x for x in (m["url_error"], m["text"]) if x)
    return "\n".join(x for x in (m["error"], m["page"]) if x)


def _count(xs: Any) -> int:
    return len(xs) if isinstance(xs, list) else 0


def _images(parts: NonText, n: int, turn: int, place: str) -> None:
    """Report `n` images of the observation at `place` (not imported: records are text)."""
    if n:
        parts.text([{"type": "image"}] * n, f"turn {turn} observation ({place})")


def _convert(
    evs: list[tuple[str, dict[str, Any]]],
    origin: str,
    domain: str | None,
    record: dict[str, Any] | None,
    lost: Collection[Any] = (),
) -> Iterator[Any]:
    """The trajectory of events in order, (place, event) each; problems first. `lost`:
    ids of events left out (an observation naming one as its cause answers nothing)."""
    events = [e for _, e in evs]
    answers = _answers(evs, lost)
    answered = set(answers.values())
    said_to, last, unsaid = conversation(events, _role, _says)
    said = {x.at: x for x in said_to}
    parts = NonText()
    pairs: list[tuple[Action, Observation, str | None]] = []
    starts: list[datetime | None] = []
    times: list[datetime] = []
    steps: list[str] = []  # action types of the turns, for the domain
    names: list[str] = []
    thinks: list[tuple[str, str | None]] = []  # (place, thought) waiting for a turn
    task = system = tools = version = agent_class = model = None
    tools_at = "tools"
    ended: dict[str, Any] = {}
    user_ids: set[Any] = set()
    problems = []
    for k, (place, e) in enumerate(evs):
        at = iso_timestamp(e.get("timestamp"), f"{place}.timestamp")
        times += [at] if at else []
        model = model or _model_name(e.get("tool_call_metadata"))
        kind = _kind(e)
        if kind is None:  # an observation: it answers an action, or it is reported below
            if k not in answered:
                problems += _stray(e, place, user_ids, parts)
            continue
        args = _args(e, place)
        if kind == "system":
            if system is None:
                system = parts.text(args.get("content"), f"system prompt ({place}.args.content)")
                tools = args.get("tools") if isinstance(args.get("tools"), list) else None
                tools_at = f"{place}.args.tools"
                version = _str(args.get("openhands_version"))
                agent_class = _str(args.get("agent_class"))
        elif kind == "message":
            if e.get("source") == "user" and task is None:
                task = parts.text(_content(e, place), f"task ({place}.args.content)")
            if k in said:
                pairs.append(
                    said[k].turn(
                        lambda n: (_content(evs[n][1], evs[n][0]), f"{evs[n][0]}.args.content"),
                        len(pairs),
                        parts,
                        join_reasoning(*(t for _, t in thinks)),
                    )
                )
                thinks = []
                starts.append(at)
                steps.append("message")
        elif kind == "think":
            thinks.append((place, join_reasoning(*_thought(args))))
        elif kind in ("finish", "reject"):
            ended = {
                "end_action": kind,
                "final_thought": _str(args.get("final_thought")) or join_reasoning(*_thought(args)),
                "end_outputs": args.get("outputs") or None,
                "task_completed": args.get("task_completed"),
            }
        elif kind in NOT_STEPS:
            continue  # framework bookkeeping: recall, state changes, condensation
        elif not _by_agent(e):
            user_ids.add(e.get("id"))
            problems.append(
                warning(
                    "message_not_imported",
                    f"{place}: a {kind!r} action by the {e.get('source')}, not the agent's; "
                    "not imported",
                )
            )
        else:
            turn = len(pairs)
            action, why, name = _step(e, place, [t for _, t in thinks])
            thinks = []
            o = answers.get(k)
            if o is None:  # what the environment answered is unknown: never ""
                problems.append(
                    warning(
                        "unpaired_call",
                        f"{place}: no observation for the agent's {kind!r} action "
                        f"(id {e.get('id')}); no turn",
                    )
                )
                continue
            obs_place, obs = evs[o]
            command = args.get("command") if kind == "run" else None
            answer = _observation(obs, obs_place, turn, parts, _str(command))
            if answer == NoTurn("unpaired_call", ""):
                problems.append(
                    warning(
                        "unpaired_call",
                        f"{null_or_missing(obs, 'content', obs_place)}, the answer to the"
                        f" agent's {kind!r} action "
                        f"(id {e.get('id')}) is unknown; no turn",
                    )
                )
                continue
            if isinstance(answer, NoTurn):
                did = "did not run" if answer.kind == "not_run" else "failed to run"
                problems.append(
                    warning(
                        answer.kind,
                        f"{obs_place}: OpenHands {did} the agent's {kind!r} action "
                        f"(id {e.get('id')}): {answer.why}; no turn",
                    )
                )
                continue
            pairs.append((action, answer, why))
            starts.append(at)
            steps.append(kind)
            names.append(name)
    for place, _ in thinks:
        problems.append(
            warning(
                "message_not_imported", f"{place}: a think action no turn follows; not imported"
            )
        )
    for n, what in unsaid:
        problems.append(warning("message_not_imported", f"{evs[n][0]}: {what}; not imported"))
    final = last and parts.text(
        _content(events[last.at], evs[last.at][0]),
        f"final message ({evs[last.at][0]}.args.content)",
    )
    yield from problems
    yield from parts.warnings()
    rec = record or {}
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    llm = meta.get("llm_config") if isinstance(meta.get("llm_config"), dict) else {}
    instance = rec.get("instance") if isinstance(rec.get("instance"), dict) else {}
    instruction = _str(rec.get("instruction")) or task
    t = build(
        NAME,
        origin,
        domain or _domain(steps, names, record is not None),
        pairs,
        task_description=task,
        instruction=instruction,
        action_space=tools,
        tools_field=tools_at,
        agent={"name": "OpenHands", "model": _str(llm.get("model")) or model},
        outcome=_outcome(rec),
        metadata={
            "agent_class": _str(meta.get("agent_class")) or agent_class,
            "openhands_version": version,
            "agent_system_prompt": system,
            "final_message": final,
            **{k: v for k, v in ended.items() if v not in (None, "", {})},
            "dataset": meta.get("dataset"),
            "data_split": meta.get("data_split"),
            "max_iterations": meta.get("max_iterations"),
            "git_commit": meta.get("git_commit"),
            "repo": instance.get("repo"),
            "base_commit": instance.get("base_commit"),
            "test_result": rec.get("test_result") or None,
            "eval_error": rec.get("error"),
        },
    )
    for x, when in zip(t.turns, starts, strict=True):
        x.started_at = when
    t.started_at = min(times) if times else None
    t.ended_at = max(times) if times else None
    yield t


def _stray(e: dict[str, Any], place: str, user_ids: set[Any], parts: NonText) -> list[Any]:
    """An observation no agent action claimed: framework bookkeeping, or the answer to
    an action the user ran (reported with it), passes; one with content is reported."""
    typ = e.get("observation")
    if typ in BOOKKEEPING or (e.get("cause") is not None and e.get("cause") in user_ids):
        return []
    content = e.get("content")
    if not (content.strip() if isinstance(content, str) else content):
        return []
    return [
        warning(
            "message_not_imported",
            f"{place}: a {typ!r} observation that answers no agent action; not imported",
        )
    ]


def _domain(steps: list[str], names: list[str], eval_record: bool) -> str:
    """web when most environment steps browse; MCP tools only: from their names; else
    swe (OpenHands is a coding agent, its eval outputs SWE tasks)."""
    env = [s for s in steps if s != "message"]
    if env and sum(s in BROWSE for s in env) * 2 > len(env):
        return "web"
    if env and not eval_record and all(s == "call_tool_mcp" for s in env):
        return guess_domain([n for s, n in zip(env, names, strict=True)], "mcp")
    return "swe"


def _outcome(rec: dict[str, Any]) -> Outcome:
    """success/failure from the SWE-bench report's `resolved` (in `test_result.report`,
    or a merged output's `report`); unknown without one."""
    error = _str(rec.get("error"))
    result = rec.get("test_result")
    report = result.get("report") if isinstance(result, dict) else None
    at = "test_result.report.resolved"
    if not isinstance(report, dict):
        report, at = rec.get("report"), "report.resolved"
    resolved = report.get("resolved") if isinstance(report, dict) else None
    if resolved is not None and not isinstance(resolved, bool):  # "false" is not false
        raise expected(at, "a boolean", resolved)
    if isinstance(resolved, bool):
        return Outcome(
            status="success" if resolved else "failure", reward=float(resolved), error=error
        )
    return Outcome(error=error)
