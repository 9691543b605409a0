"""OpenAI chat messages with tool calls, and Anthropic Messages (content blocks; the two
dialects may mix): JSON or JSONL of {messages, tools?, system?, id?}, bare message lists,
and the result files of agent benchmarks (a list of runs, each with the messages under
`traj` plus `reward`, `task_id`, `trial`, `info`, as tau-bench writes).

Each assistant `tool_calls[{id, function: {name, arguments}}]` entry becomes a turn, in
listed order. A `tool` message answers the first still-unanswered call of the latest
assistant message with its `tool_call_id` (real logs reuse ids across a conversation, so
an id alone does not pair: joining every result that shares an id gave `calculate(...)`
a user profile as its observation); a result with its call's id always takes that call,
so one whose id matches no open call answers only an open call no later result names by
id: the one with its `name`, else the first (warning; none: reported, not joined); one
with no open call is reported, never joined; a call no
result answers makes no turn (`unpaired_call`: what it answered is unknown). The
assistant's content and any `reasoning_content` go to the `reasoning` of its first call
that makes a turn. A result is an error by `is_error` or `status: error` (any case); a
status none of `STATUSES` is named (`unknown_status`), not an error. An assistant message
without tool calls that the user answers is a `text` turn, the reply its observation
(`conversation`; the unanswered last word -> metadata `final_message`; a stray user or
later system message -> `message_not_imported`; docs/importers.md). `tools` is the action
space; task <- first user message; domain from tool names; a run's reward (a number)
-> outcome, its `info` (an object or a list) -> metadata, tau-bench's
`info.task.instruction` (the simulated user's script) -> the simulation instruction; a
top-level `model` string -> the agent's model.
Content parts with no text (`image_url`, `input_audio`, files) add no text and are
reported (`non_text_part`, naming the turn and the message); a call whose results hold
such parts only (a screenshot) makes no turn (`unpaired_call`): what it answered in text
is unknown, and "" would teach that it printed nothing.

A logged chat completion keeps its answer: `choices[0].message` beside the messages, or
in a gateway log `{request: {messages, tools...}, response: {choices}}`, is the next
message (other choices are reported).

Responses API items (under `messages`, a request's `input` with its `output`, or a bare
list, as the Agents SDK saves a run): a `function_call` is a call (consecutive ones, and
one right after an assistant message, are that message's parallel calls), a
`function_call_output` its result by `call_id`, a `reasoning` summary the next call's
reasoning; other item types are reported (`message_not_imported`).

A custom (free-form) tool call (`type: custom`, `custom: {name, input}`; Responses'
`custom_tool_call`) is a call whose arguments are its input text (`{"_raw": text}`).

The functions API before `tools`: an assistant's `function_call` {name, arguments} is one
call (no id), a `function` message answers it by `name`, `functions` is the action space.

Anthropic: an assistant's `tool_use` blocks {id, name, input} are its calls (after any
`tool_calls`), its `thinking` blocks reasoning (`redacted_thinking` holds none); a user
message's `tool_result` blocks {tool_use_id, content, is_error?} are results, paired as
`tool` messages are (content read as message content); a user message of results only
is no reply (it ends what the agent said, as a `tool` message does); with text, the
text is a user message. A top-level `system` (a string or text blocks) is the system
prompt when no `system` message is.

A field of the wrong type refuses the record (`invalid`, naming the field): `arguments`
must be an object or a string (as the model wrote it), `input` an object; `messages` a
list of messages, each an object (one passed over could take a result or the task with
it). A null system message is an unknown prompt, never "": reported
(`message_not_imported`), no `agent_system_prompt` (nor the top-level `system`).
A record is detected by a list of messages with roles; one that only carries the key
(`messages`, or `traj` in a benchmark run) is not imported, but `near_miss` says which
field is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from .common import (
    AGENT,
    SYSTEM,
    USER,
    ImportProblem,
    InvalidField,
    MissingField,
    NonText,
    Said,
    build,
    content_text,
    conversation,
    expected,
    guess_domain,
    join_reasoning,
    no_text,
    null_or_missing,
    record_id,
    shown,
    textless,
    tool_action,
    tool_list,
    warning,
)

NAME = "openai"
MESSAGE_KEYS = ("messages", "traj", "conversations")
"""Where a record keeps its messages: chat logs `messages`, benchmark result runs `traj`,
datasets that put role messages under ShareGPT's key `conversations`."""
RESULT_ROLES = ("tool", "function", "ipython")
"""Messages that are one tool result: `function` answers a legacy `function_call` (by
name), `ipython` is how Llama 3 chat logs answer a call."""
RUN_KEYS = ("task_id", "reward", "trial")
"""Beside `traj`, what makes a record a benchmark run (a `traj` key alone says little)."""


RESPONSES_ITEMS = (
    "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "reasoning",
)  # fmt: skip
"""Item types of the Responses API (and the Agents SDK's item lists) besides messages."""


def _is_item(m: Any) -> bool:
    return isinstance(m, dict) and ("role" in m or m.get("type") in RESPONSES_ITEMS)


def _is_messages(msgs: Any) -> bool:
    return isinstance(msgs, list) and any(_is_item(m) for m in msgs)


def _key(d: dict[str, Any]) -> str:
    """The record's key holding its messages ("" when none does): MESSAGE_KEYS, or a
    Responses API request's `input` list."""
    keys = (*MESSAGE_KEYS, "input") if isinstance(d.get("input"), list) else MESSAGE_KEYS
    return next((k for k in keys if _is_messages(d.get(k))), "")


def _request(d: Any) -> dict[str, Any] | None:
    """A gateway log's request (`{request: {messages, ...}, response: {choices}}`), if `d`
    is one."""
    req = d.get("request") if isinstance(d, dict) else None
    return req if isinstance(req, dict) and _key(req) else None


def _answered(
    d: dict[str, Any], msgs: list[Any], key: str
) -> tuple[list[Any], list[ImportProblem]]:
    """`msgs` and the model's answer when the record logs one (`choices[0].message`
    beside the messages, or in a gateway log's `response`): a logged chat completion's
    answer is the conversation's next message. Other choices (n > 1) are reported."""
    response = d.get("response") if isinstance(d.get("response"), dict) else d
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        return msgs, []
    answers = [c.get("message") if isinstance(c, dict) else None for c in choices]
    where = "response.choices" if response is not d else "choices"
    problems = [
        warning("message_not_imported", f"{where}[{k}]: another sampled answer; not imported")
        for k in range(1, len(answers))
    ]
    if not isinstance(answers[0], dict):
        return msgs, [*problems, _not_imported(where, 0, "a choice without a message")]
    return [*msgs, answers[0]], problems  # numbered on after the messages in problems


def detect_record(d: Any) -> bool:
    if isinstance(d, dict):
        return bool(_key(d)) or _request(d) is not None
    return isinstance(d, list) and bool(d) and all(_is_item(m) for m in d[:3])


def bare_messages(d: Any) -> bool:
    """Whether `d` is a list that reads as one record, a bare list of messages: one of
    the first three entries detection looks at is a message (all three are, when it is
    imported; else `near_miss` names the one that is not). A `.json` list of anything
    else is a list of records."""
    return isinstance(d, list) and any(_is_item(m) for m in d[:3])


def _from_items(items: list[Any], key: Places) -> tuple[list[Any], list[ImportProblem]]:
    """Responses API items as chat messages, one for one (`key[n]` stays item n): a
    `function_call` is an assistant call (consecutive ones, and one right after an
    assistant message, join that message as parallel calls; their own places become
    None, which every reader skips), a `function_call_output` a `tool` message, a
    `reasoning` item's summary the next assistant message's reasoning. Messages pass as
    they are (their `input_text`/`output_text` parts are text); other item types are
    reported, not imported."""
    out: list[Any] = []
    problems: list[ImportProblem] = []
    thought: list[str] = []
    caller: dict[str, Any] | None = None  # the assistant message calls now join
    for n, it in enumerate(items):
        kind = it.get("type") if isinstance(it, dict) else None
        if not isinstance(it, dict) or ("role" in it and kind in (None, "message")):
            m = it
            if isinstance(it, dict) and it.get("role") == "assistant":
                m = dict(it)  # calls may join it: the record itself stays as read
                if thought:
                    m["reasoning_content"] = join_reasoning(it.get("reasoning_content"), *thought)
                    thought = []
            caller = m if isinstance(m, dict) and m.get("role") == "assistant" else None
            out.append(m)
        elif kind in ("function_call", "custom_tool_call"):
            own = "call_id" if it.get("call_id") is not None else "id"
            call: dict[str, Any] = {"id": call_id(it, own, key(n)), "_at": key(n)}
            if kind == "custom_tool_call":  # a free-form tool: its input is text
                call |= {
                    "type": "custom",
                    "custom": {"name": it.get("name"), "input": it.get("input")},
                }
            else:
                call["function"] = {"name": it.get("name"), "arguments": it.get("arguments")}
            if caller is not None:
                caller.setdefault("tool_calls", []).append(call)
                out.append(None)
            else:
                reasoning = join_reasoning(*thought) if thought else None
                caller = {"role": "assistant", "content": None, "tool_calls": [call],
                          "reasoning_content": reasoning}  # fmt: skip
                thought = []
                out.append(caller)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            result = {"role": "tool", "tool_call_id": it.get("call_id"), "status": it.get("status")}
            if "output" in it:  # left out, it is said missing (`_unknown`), not null
                result["content"] = it["output"]
            out.append({**result, FIELDS: ITEM_FIELDS})
            caller = None
        elif kind == "reasoning":
            summary = it.get("summary") if isinstance(it.get("summary"), list) else []
            text = content_text(summary or it.get("content"))[0]
            thought += [text] if text else []
            out.append(None)
        else:
            problems.append(_not_imported(key, n, f"a Responses API item of type {shown(kind)}"))
            out.append(None)
            caller = None
    return out, problems


def _has_items(msgs: list[Any]) -> bool:
    """Whether a list of messages holds Responses API items (`_from_items`)."""
    return any(isinstance(m, dict) and m.get("type") in RESPONSES_ITEMS for m in msgs)


class Places:
    """Where message `n` of the list a record is read from is in the file, as problems
    name it: `key[n]`; past a request's `input`, the response's `output[n - len(input)]`
    (`inputs`: the input's length); a bare list's items `[n]` (key "")."""

    def __init__(self, key: str, inputs: int | None = None):
        self.key, self.inputs = key, inputs

    def __call__(self, n: int) -> str:
        if self.inputs is not None and n >= self.inputs:
            return f"output[{n - self.inputs}]"
        return f"{self.key}[{n}]"


FIELDS = "\0fields"
"""The key of a message converted from a Responses API item that names its fields as the
item has them (its `content` is the item's `output`...): problems name the file's fields."""
ITEM_FIELDS = {"content": "output", "tool_call_id": "call_id"}
"""A `function_call_output`'s fields, by the names of the `tool` message made of it."""


def _field(m: dict[str, Any], name: str) -> str:
    """Message `m`'s field `name` as the file names it (`FIELDS`)."""
    return m.get(FIELDS, {}).get(name, name)


def _shape_problem(msgs: Any, key: str) -> str:
    """What is wrong with `msgs`, under `key`, that is not a list of messages."""
    if not isinstance(msgs, list):
        return f"{key}: expected a list, got {shown(msgs)}"
    first = f"{key}[0] is {shown(msgs[0])}" if msgs else "the list is empty"
    return f'{key}: no message has a "role" ({first})'


def near_miss(d: Any) -> tuple[str, str] | None:
    """(what is wrong, the evidence) for a record no format took that carries this
    format's own key with no list of messages under it, or that is a bare list of
    messages with something else among the first three detection looks at; None
    otherwise."""
    if detect_record(d):
        return None
    if isinstance(d, list):
        if not bare_messages(d):
            return None
        k, odd = next((k, m) for k, m in enumerate(d[:3]) if not _is_item(m))
        want = 'a message with a "role"' if isinstance(odd, dict) else "an object"
        return f"messages[{k}]: expected {want}, got {shown(odd)}", "a bare list of messages"
    if not isinstance(d, dict):
        return None
    if "messages" in d:
        return _shape_problem(d["messages"], "messages"), "its `messages` key"
    if "traj" in d and any(k in d for k in RUN_KEYS):
        return _shape_problem(d["traj"], "traj"), "its `traj` key in a benchmark run"
    return None


@dataclass
class _Call:
    id: Any
    name: str
    arguments: Any
    reasoning: Any
    """The assistant message's content (read as text with the call's turn known) and its
    reasoning: (content, reasoning text, thinking text, index of the message); every call
    of the message holds it, the first that makes a turn takes it (`to_trajectory`)."""
    results: list[tuple[int, int | None, dict[str, Any]]] = field(default_factory=list)
    """(message index, block index or None for a whole message, the message or block) of
    each result: its content and where it is are read when the turn is built."""
    at: str = "arguments"
    """Where `arguments` is in the record, for a problem with it."""
    msg: int = 0
    """Index of the assistant message that made the call (turns follow message order)."""


def _blocks(m: dict[str, Any], kind: str) -> list[tuple[int, dict[str, Any]]]:
    """(index, block) of each Anthropic content block of type `kind` in message `m`."""
    content = m.get("content")
    if not isinstance(content, list):
        return []
    return [(k, b) for k, b in enumerate(content) if isinstance(b, dict) and b.get("type") == kind]


TAKEN = {"assistant": ("tool_use", "thinking", "redacted_thinking"), "user": ("tool_result",)}
"""Anthropic blocks read as calls, reasoning and results, by the role of their message."""


def _said(m: dict[str, Any]) -> Any:
    """A message's content as what it says: without the blocks in TAKEN (read elsewhere);
    an assistant's `refusal` when it has no content (what the model said instead)."""
    content = m.get("content")
    if not content and isinstance(m.get("refusal"), str) and m.get("role") == "assistant":
        return m["refusal"]
    taken = TAKEN.get(m.get("role"), ())
    if not taken or not isinstance(content, list):
        return content
    return [b for b in content if not (isinstance(b, dict) and b.get("type") in taken)]


def _thinking(m: dict[str, Any]) -> str | None:
    """An assistant message's `thinking` blocks (`redacted_thinking` holds no text)."""
    if not isinstance(m.get("content"), list):  # OpenAI's string content: none
        return None
    thoughts = (b.get("thinking") for _, b in _blocks(m, "thinking"))
    return join_reasoning(*(t for t in thoughts if isinstance(t, str)))


def _makes_calls(m: dict[str, Any]) -> bool:
    return bool(m.get("tool_calls") or m.get("function_call") or _blocks(m, "tool_use"))


def _calls(m: dict[str, Any], at: str) -> list[tuple[Any, str, Any, str]]:
    """(id, name, arguments, where the arguments are) of each call of assistant message
    `m` (at `at` in the record): its legacy `function_call`, its OpenAI `tool_calls` (a
    Responses API `function_call` item among them names its own place, `_at`), then its
    `tool_use` blocks."""
    out = []
    if m.get("function_call"):  # the functions API before tools: one call, no id
        fn = m["function_call"]
        if not isinstance(fn, dict):
            raise expected(f"{at}.function_call", "an object", fn)
        out.append((None, _name(fn, f"{at}.function_call", "name"), fn.get("arguments"),
                    f"{at}.function_call.arguments"))  # fmt: skip
    if m.get("tool_calls"):
        if not isinstance(m["tool_calls"], list):
            raise expected(f"{at}.tool_calls", "a list", m["tool_calls"])
        for k, call in enumerate(m["tool_calls"]):
            if not isinstance(call, dict):
                raise expected(f"{at}.tool_calls[{k}]", "an object", call)
            item = call.get("_at")
            there = item or f"{at}.tool_calls[{k}]"
            if call.get("type") == "custom":  # a custom (free-form) tool: its input is text
                fn = call.get("custom")
                if not isinstance(fn, dict):
                    raise expected(f"{there}.custom", "an object", fn)
                name = _name(fn, there, "name" if item else "custom.name")
                args_at = f"{there}.input" if item else f"{there}.custom.input"
                out.append((call_id(call, "id", there), name, fn.get("input"), args_at))
                continue
            flat = "function" not in call and "name" in call  # tau2-bench's `{id, name, arguments}`
            fn = call if flat else call.get("function") or {}
            if not isinstance(fn, dict):
                raise expected(f"{there}.function", "an object", fn)
            name = _name(fn, there, "name" if item or flat else "function.name")
            args_at = f"{there}.arguments" if item or flat else f"{there}.function.arguments"
            out.append((call_id(call, "id", there), name, fn.get("arguments"), args_at))
    for k, block in _blocks(m, "tool_use"):
        there = f"{at}.content[{k}]"
        arguments = block.get("input")
        if arguments is not None and not isinstance(arguments, dict):
            raise expected(f"{there}.input", "an object", arguments)
        cid = call_id(block, "id", there)
        out.append((cid, _name(block, there, "name"), arguments, f"{there}.input"))
    return out


def call_id(holder: dict[str, Any], key: str, there: str) -> str | None:
    """A call's or a result's id (`holder[key]`, at `there`) as `record_id` reads one: a
    string, or a number's JSON, so that a call 7 and its result "7" pair as one id;
    anything else is the record's error naming `there.key`."""
    try:
        return record_id(holder, key)
    except InvalidField:
        raise expected(f"{there}.{key}", "a string or a number", holder[key]) from None


def _name(holder: dict[str, Any], there: str, field_: str) -> str:
    """A call's name (`holder["name"]`), a string; else the record's error at `there`."""
    name = holder.get("name")
    if not name:
        raise MissingField(f"{there} has no {field_}")
    if not isinstance(name, str):
        raise expected(f"{there}.{field_}", "a string", name)
    return name


def _place(key: Places, n: int, block: int | None) -> str:
    """Where a result is: a message `key[n]`, or its content block `key[n].content[k]`."""
    return key(n) if block is None else f"{key(n)}.content[{block}]"


STATUSES = {
    "error": True, "success": False, "completed": False, "in_progress": False, "incomplete": False,
}  # fmt: skip
"""A result's `status`, lower case (some exporters write `ERROR`) -> whether it is an error:
LangChain's ToolMessage writes `success` or `error`; the Responses API's item statuses
(a `function_call_output`'s) say how far the item was generated, not how the tool fared."""


def _status(r: dict[str, Any]) -> str:
    """A result's `status` in lower case ("": none, or not a string)."""
    status = r.get("status")
    return status.lower() if isinstance(status, str) else ""


def _error(r: dict[str, Any], at: str) -> bool:
    """A result's error flag: `is_error` a boolean (a string "false" is not false), or
    `status: error` in any case."""
    flag = r.get("is_error")
    if flag is not None and not isinstance(flag, bool):
        raise expected(f"{at}.is_error", "a boolean", flag)
    return bool(flag) or STATUSES.get(_status(r), False)


def _unknown_statuses(c: _Call, key: Places) -> Iterator[ImportProblem]:
    """A warning for each result of call `c` whose `status` is none of the known ones: it
    is not read as an error, and that reading is said, not silent."""
    for n, k, r in c.results:
        if r.get("status") is not None and _status(r) not in STATUSES:
            yield warning(
                "unknown_status",
                f"{_place(key, n, k)}.status: {shown(r['status'])} is none of"
                f" {', '.join(STATUSES)}; not read as an error",
            )


def _results(
    m: dict[str, Any], key: Places, n: int
) -> list[tuple[Any, Any, int | None, dict[str, Any]]]:
    """(call id, tool name, block index or None, the result) of each result in message
    `m` (`key[n]`, where a bad id is named): a `tool` message is one (None), a user
    message holds a `tool_result` block for each."""
    if m.get("role") in RESULT_ROLES:
        cid = m.get("tool_call_id")
        if cid is not None and cid.__class__ is not str:  # the place is said only then
            named = _field(m, "tool_call_id")
            cid = call_id({named: cid}, named, _place(key, n, None))
        return [(cid, m.get("name"), None, m)]
    out = []
    for k, b in _blocks(m, "tool_result"):
        cid = b.get("tool_use_id")
        if cid is not None and cid.__class__ is not str:
            cid = call_id(b, "tool_use_id", _place(key, n, k))
        out.append((cid, None, k, b))
    return out


def _later_ids(msgs: list[Any], n: int, k: int | None, key: Places) -> Counter[Any]:
    """The call ids the results after result `k` of message `n` name (up to the next
    assistant message that makes calls, which closes the open calls), each counted."""
    later: Counter[Any] = Counter()
    for j in range(n, len(msgs)):
        m = msgs[j]
        if not isinstance(m, dict):
            continue
        if j > n and m.get("role") == "assistant" and _makes_calls(m):
            break
        if m.get("role") in RESULT_ROLES or (
            m.get("role") == "user" and isinstance(m.get("content"), list)
        ):
            after = (r for r in _results(m, key, j) if j > n or (k is not None and (r[2] or 0) > k))
            later.update(cid for cid, _, _, _ in after)
    return later


def _unclaimed(open_calls: list[_Call], later: Counter[Any]) -> list[_Call]:
    """The open calls no later result names by id (`later`): a result with an unknown id
    may answer only these, so that a result with a call's own id always finds it. Of
    calls sharing an id, the first are claimed (results pair by position)."""
    left = Counter(later)
    free = []
    for c in open_calls:
        if c.id is not None and left[c.id] > 0:
            left[c.id] -= 1
        else:
            free.append(c)
    return free


def pair_calls(msgs: list[Any], key: Places) -> tuple[list[_Call], list[ImportProblem]]:
    """Every tool call in order, each with the results that answer it (`msgs` as the
    record has them, under `key`: problems name `key[n]`; non-messages are skipped)."""
    calls: list[_Call] = []
    open_calls: list[_Call] = []
    problems: list[ImportProblem] = []
    for n, m in enumerate(msgs):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "assistant" and _makes_calls(m):
            problems += [_unanswered(c) for c in open_calls]
            reasoning = (
                _said(m),
                m.get("reasoning_content") or m.get("reasoning"),
                _thinking(m),
                n,
            )
            open_calls = []
            for cid, name, arguments, at in _calls(m, key(n)):
                c = _Call(cid, name, arguments, reasoning, at=at, msg=n)
                calls.append(c)
                open_calls.append(c)
        elif role in RESULT_ROLES or (role == "user" and isinstance(m.get("content"), list)):
            for cid, name, k, result in _results(m, key, n):
                same = [c for c in open_calls if c.id == cid]
                if name:
                    same = [c for c in same if c.name == name] or same
                if same:
                    match = same[0]
                elif open_calls:
                    free = _unclaimed(open_calls, _later_ids(msgs, n, k, key))
                    named = [c for c in free if name and c.name == name]
                    field_ = _field(result, "tool_call_id") if k is None else "tool_use_id"
                    if not free:
                        problems.append(
                            warning(
                                "unpaired_result",
                                f"{_place(key, n, k)}: {field_} {cid!r} matches no open call,"
                                " and a later result names each open call's id; not imported",
                            )
                        )
                        continue
                    match = (named or free)[0]
                    if cid is not None:
                        how = "by name" if named else "the first no later result names by id"
                        problems.append(
                            warning(
                                "unpaired_result",
                                f"{_place(key, n, k)}: {field_} {cid!r} matches no open call;"
                                f" paired with open call {match.id!r} ({match.name}), {how}",
                            )
                        )
                else:
                    problems.append(
                        warning(
                            "unpaired_result",
                            f"{_place(key, n, k)}: result {cid!r} answers no open call",
                        )
                    )
                    continue
                match.results.append((n, k, result))
                open_calls.remove(match)
    problems += [_unanswered(c) for c in open_calls]
    repeated = sorted(str(i) for i, k in Counter(c.id for c in calls if c.id).items() if k > 1)
    if repeated:
        problems.append(
            warning(
                "repeated_call_id",
                f"tool-call id(s) reused: {', '.join(repeated[:5])}"
                + (f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
                + "; results paired by position among open calls",
            )
        )
    return calls, problems


def _unanswered(c: _Call) -> ImportProblem:
    """A call no result answered: what the tool answered is unknown, so it makes no turn
    (`to_trajectory`; an empty output would pose as what it printed)."""
    return warning("unpaired_call", f"no result for call {c.id!r} ({c.name}); no turn")


ROLES = {"assistant": AGENT, "user": USER, "system": SYSTEM, "developer": SYSTEM}
"""`developer`: what newer OpenAI models call the system message."""


def _role(m: dict[str, Any]) -> str | None:
    """Who wrote `m`, for `conversation`: a user message of `tool_result` blocks only is
    a tool result (it ends what the agent said, as a `tool` message does), no reply; the
    messages tau2-bench's results hold that are no one's turn (`NO_TURN`) are passed over."""
    if m.get("role") == NO_TURN:
        return None
    role = ROLES.get(m.get("role"), "other")
    if (
        role == USER
        and isinstance(m.get("content"), list)
        and not _said(m)
        and _blocks(m, "tool_result")
    ):
        return "other"
    return role


def _speaks(m: dict[str, Any]) -> bool:
    return not _makes_calls(m) and bool(_said(m))


def _not_imported(key: Places, n: int, what: str) -> ImportProblem:
    return warning("message_not_imported", f"{key(n)}: {what}; not imported")


def _unknown(c: _Call, key: Places) -> ImportProblem | None:
    """The warning for call `c` when a `tool` message answered it with null content: what
    the tool answered is unknown, so the call makes no turn (an empty output would pose as
    what it printed). Anthropic's `tool_result` may leave `content` out: that is empty."""
    null = next(((n, r) for n, k, r in c.results if k is None and r.get("content") is None), None)
    if null is None:
        return None
    n, r = null
    return warning(
        "unpaired_call",
        f"{null_or_missing(r, 'content', key(n), _field(r, 'content'))}, the answer to call"
        f" {c.id!r} ({c.name}) is unknown; no turn",
    )


def _no_text(c: _Call, key: Places) -> ImportProblem | None:
    """The warning for call `c` when its results hold no text, only images (a
    `screenshot` answered with an `image_url`, a `tool_result` of an image block): what the
    tool answered in text is unknown, so the call makes no turn (`""` would teach that it
    printed nothing), as with a null answer (`_unknown`)."""
    found = []
    for n, k, r in c.results:
        at = f"{_place(key, n, k)}.{_field(r, 'content')}"
        left = textless(r.get("content"), at)
        if left is None:
            return None
        found.append((at, left))
    return warning("unpaired_call", f"{no_text(found, f'call {c.id!r} ({c.name})')}; no turn")


def _turn(
    c: _Call, turn: int, key: Places, parts: NonText, first: bool
) -> tuple[Action, Observation, str | None]:
    """Call `c` as turn `turn`: its action, its results as the observation, and, when it
    is the `first` turn its assistant message makes, the message's reasoning (an earlier
    call that made no turn leaves it to this one); content parts that hold no text go to
    `parts`."""
    action = tool_action(c.name, c.arguments, c.at)
    text = "\n".join(
        parts.text(
            r.get("content"),
            f"turn {turn} observation ({_place(key, n, k)}.{_field(r, 'content')})",
        )
        for n, k, r in c.results
    )
    error = [_error(r, _place(key, n, k)) for n, k, r in c.results]
    observation = Observation(text, is_error=any(error))
    if not first:
        return action, observation, None
    content, reasoning, thinking, n = c.reasoning
    said = parts.text(content, f"turn {turn} reasoning ({key(n)}.content)")
    return action, observation, join_reasoning(reasoning, thinking, said)


def _exchange(
    x: Said, msgs: list[Any], turn: int, key: Places, parts: NonText
) -> tuple[Action, Observation, str | None]:
    """What the agent said as turn `turn`'s action, the user's replies as its observation,
    its reasoning_content and thinking blocks as reasoning."""
    m = msgs[x.at]
    reasoning = m.get("reasoning_content") or m.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else None
    thinking = _thinking(m)
    return x.turn(
        lambda n: (_said(msgs[n]), f"{key(n)}.content"),
        turn,
        parts,
        join_reasoning(reasoning, thinking) if thinking else reasoning,
    )


def _outcome(rec: dict[str, Any]) -> Outcome | None:
    """A benchmark run's reward: success at full reward (>= 1), failure below; none:
    unknown. A reward that is not a number (`"1.0"`, `true`) is the record's error, and so
    is an integer too large for a float (400 digits: it would be Infinity, which
    `validate` refuses; the reader refuses `1e400` so)."""
    reward = rec.get("reward")
    if reward is None:
        return None
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise expected("reward", "a number", reward)
    try:
        value = float(reward)
    except OverflowError:
        raise expected("reward", "a number a float can hold", reward) from None
    return Outcome(status="success" if reward >= 1 else "failure", reward=value)


def _info(rec: dict[str, Any]) -> Any:
    """A benchmark run's `info` (an object, or a list), for metadata; else the record's
    error."""
    info = rec.get("info")
    if info is not None and not isinstance(info, dict | list):
        raise expected("info", "an object or a list", info)
    return info


def _user_script(info: Any) -> str | None:
    """tau-bench's script for its simulated user (`info.task.instruction`: who the user
    is and what they want), the environment's side of the conversation: the record's
    simulation instruction. Not a string: the record's error."""
    task = info.get("task") if isinstance(info, dict) else None
    script = task.get("instruction") if isinstance(task, dict) else None
    if script is not None and not isinstance(script, str):
        raise expected("info.task.instruction", "a string", script)
    return script or None


def to_trajectory(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    key: Any = "messages"
    msgs = d  # a bare list of messages
    logged: list[ImportProblem] = []
    if (req := _request(d)) is not None:  # its request's fields, then the record's own
        d = {**req, **{k: v for k, v in d.items() if k != "request"}}
    if isinstance(d, dict):
        key = _key(d)
        if not key:
            present = [k for k in MESSAGE_KEYS if k in d]
            if present:
                raise InvalidField(_shape_problem(d[present[0]], present[0]))
            raise MissingField("no `messages` (or `traj`) list")
        msgs = d[key]
        inputs = None
        if key == "input" and isinstance(d.get("output"), list):  # a response with its request
            msgs, inputs = [*msgs, *d["output"]], len(msgs)  # named output[k] in problems
        msgs, logged = _answered(d, msgs, key) if isinstance(msgs, list) else (msgs, [])
        key = Places(f"request.{key}" if req is not None else key, inputs)
    else:  # a bare list: a list of Responses items names its items `[n]`, as the file has them
        key = Places("" if isinstance(msgs, list) and _has_items(msgs) else "messages")
    if not isinstance(msgs, list):  # `--format openai` on a number, a string
        raise expected("record", "an object with a `messages` list, or a list of messages", msgs)
    for n, m in enumerate(msgs):  # passed over, a message could take a result or the task
        if not isinstance(m, dict):
            raise expected(key(n), "an object", m)
        if not isinstance(m.get("role"), str | None):
            raise expected(f"{key(n)}.role", "a string", m["role"])
    items: list[ImportProblem] = []
    if _has_items(msgs):
        msgs, items = _from_items(msgs, key)
    calls, problems = pair_calls(msgs, key)
    problems = [*logged, *items, *problems]
    said, last, unsaid = conversation(msgs, _role, _speaks)
    yield from problems
    yield from (_not_imported(key, n, what) for n, what in unsaid)
    yield from _unknown_roles(msgs, key)
    parts = NonText()
    events = sorted([*((c.msg, c) for c in calls), *((x.at, x) for x in said)], key=lambda e: e[0])
    pairs = []
    reasoned: set[int] = set()  # assistant messages whose reasoning a turn has taken
    for _, e in events:
        if isinstance(e, _Call):
            unknown = _unknown(e, key) or (_no_text(e, key) if e.results else None)
            if unknown is not None or not e.results:  # unanswered: `pair_calls` warned
                tool_action(e.name, e.arguments, e.at)  # its arguments are checked all the same
                yield from [unknown] if unknown else []
                continue
            yield from _unknown_statuses(e, key)
        turn = len(pairs)
        if isinstance(e, _Call):
            pairs.append(_turn(e, turn, key, parts, e.msg not in reasoned))
            reasoned.add(e.msg)
        else:
            pairs.append(_exchange(e, msgs, turn, key, parts))
    numbered = [(n, m) for n, m in enumerate(msgs) if isinstance(m, dict)]
    task = next(
        (parts.text(_said(m), f"task ({key(n)}.content)") for n, m in numbered if _role(m) == USER),
        None,
    )
    rec = d if isinstance(d, dict) else {}
    at, first = next(((n, m) for n, m in numbered if ROLES.get(m.get("role")) == SYSTEM), (0, None))
    system = None
    if first is not None and first.get("content") is None:  # unknown, never the empty prompt
        yield warning(
            "message_not_imported",
            f"{null_or_missing(first, 'content', key(at))}, the system prompt is unknown (no"
            " agent_system_prompt); not imported",
        )
    elif first is not None:
        system = parts.text(first.get("content"), f"system prompt ({key(at)}.content)")
    elif rec.get("system"):  # Anthropic's: a string or text blocks
        system = parts.text(rec["system"], "system prompt (system)")
    yield from parts.warnings()
    tools_key = "tools" if rec.get("tools") is not None else "functions"
    tools = tool_list(rec.get(tools_key), tools_key)
    task_id, trial = (record_id(rec, k) for k in ("task_id", "trial"))
    record_id(rec, "id")  # the import loop's origin id: str(id)
    info, model = _info(rec), rec.get("model")
    traj = build(
        NAME,
        origin,
        domain or guess_domain(c.name for c in calls),
        pairs,
        task_description=task,
        instruction=task,
        action_space=tools,
        tools_field=tools_key,
        agent={"model": model if isinstance(model, str) else None},
        outcome=_outcome(rec),
        task_id=task_id,
        metadata={
            "agent_system_prompt": system,
            "final_message": last
            and parts.text(_said(msgs[last.at]), f"final message ({key(last.at)}.content)"),
            "model": model,  # a gateway's model object too (no agent model is read from it)
            "trial": trial,
            "info": info,
        },
    )
    traj.system.simulation_instruction = _user_script(info)
    yield traj


def _unknown_roles(msgs: list[Any], key: Places) -> Iterator[ImportProblem]:
    """A warning for each message of a role this format does not have (none of ROLES or
    RESULT_ROLES): it is not imported. Roles are matched as OpenAI writes them, lower
    case; an `Assistant` is named with that hint, never guessed."""
    for n, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role == NO_TURN:
            yield _not_imported(key, n, m["why"])
            continue
        if isinstance(m, dict) and role not in ROLES and role not in RESULT_ROLES:
            known = isinstance(role, str) and (
                role.lower() in ROLES or role.lower() in RESULT_ROLES
            )
            hint = " (roles are lower case)" if known else ""
            yield _not_imported(key, n, f"a message of the unknown role {shown(role)}{hint}")


# -- tau2-bench ---------------------------------------------------------------------------

NO_TURN = "\0tau2-no-turn"
"""The role `simulations` gives a message that is no one's turn: the simulated user's own
tool use, the orchestrator's greeting (a role no file writes: it begins with a NUL)."""
GREETING = "Hi! How can I help you today?"
"""tau2-bench's `DEFAULT_FIRST_AGENT_MESSAGE`: its orchestrator opens the conversation with
it as the agent (orchestrator.py), the agent's model never wrote it."""


def simulations(data: Any) -> list[dict[str, Any]] | None:
    """The runs of a tau2-bench results file (sierra-research/tau2-bench, data_model
    simulation.py `Results`: `{timestamp, info, tasks, simulations: [SimulationRun]}`),
    each as a benchmark run this format reads (`_simulation`); None when `data` is not
    one."""
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        return None
    runs = data["simulations"]
    if not runs or not all(
        isinstance(r, dict) and "task_id" in r and isinstance(r.get("messages"), list) for r in runs
    ):
        return None
    tasks = data.get("tasks") if isinstance(data.get("tasks"), list) else []
    by_id = {str(t["id"]): t for t in tasks if isinstance(t, dict) and t.get("id") is not None}
    return [_simulation(r, by_id) for r in runs]


def _simulation(run: dict[str, Any], tasks: dict[str, Any]) -> dict[str, Any]:
    """A tau2-bench `SimulationRun` as a benchmark run: its messages (data_model
    message.py) as chat messages - an assistant's `tool_calls` `{id, name, arguments,
    requestor}` are read as they are (`_calls`), a `tool` message `{id, content,
    requestor, error}` answers the call of its `id` (`tool_call_id`, `is_error`); the
    simulated user's own tool use (`requestor: user`: its device's tools in the telecom
    domain, no action of the agent) and the orchestrator's greeting (`GREETING`, the first
    message) are reported, `message_not_imported`; a user message's words beside such
    calls stay its reply. `reward_info.reward` is the reward;
    the task, `termination_reason` and the costs are `info`."""
    msgs: list[Any] = []
    for n, m in enumerate(run["messages"]):
        if not isinstance(m, dict):
            msgs.append(m)
            continue
        m = dict(m)
        role = m.get("role")
        if (
            n == 0
            and role == "assistant"
            and m.get("content") == GREETING
            and not m.get("tool_calls")
        ):
            why = "tau2-bench's greeting, which its orchestrator writes as the agent"
            m = {"role": NO_TURN, "why": why}
        elif role == "tool":
            if m.get("requestor") == "user":
                m = {"role": NO_TURN, "why": "a result of the simulated user's own tool call"}
            else:
                m.setdefault("tool_call_id", m.get("id"))
                if "error" in m and "is_error" not in m:
                    m["is_error"] = m["error"]
        elif role == "user" and m.get("tool_calls"):
            if _said(m):
                m.pop("tool_calls")  # its words are its reply; its calls are its own
            else:
                m = {"role": NO_TURN, "why": "the simulated user's own tool call(s)"}
        msgs.append(m)
    info = {
        k: run.get(k)
        for k in ("termination_reason", "seed", "agent_cost", "user_cost", "reward_info")
        if run.get(k) is not None
    }
    task = tasks.get(str(run.get("task_id")))
    if task is not None:
        info["task"] = task
    reward_info = run.get("reward_info")
    reward = reward_info.get("reward") if isinstance(reward_info, dict) else None
    return {
        "id": run.get("id"),
        "task_id": run.get("task_id"),
        "trial": run.get("trial"),
        "reward": reward,
        "info": info or None,
        "messages": msgs,
    }


def parse_record(
    d: Any, origin: str, domain: str | None = None, path: Path | None = None
) -> Iterator[Any]:
    """`path`: the file the record is in (unused here: see `agentworldbench`)."""
    yield from to_trajectory(d, origin, domain)
