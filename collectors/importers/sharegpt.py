"""ShareGPT conversations with function calls: {conversations: [{from, value}], tools?,
system?, id?}.

The calls: a `function_call`/`tool_call` message (JSON {name, arguments}, or a list for
parallel calls); a `gpt` message holding `<tool_call>` blocks (the Hermes format), one
call per block, the body JSON or a Python-literal dict with a `name` (a block that is
neither refuses the record, `invalid`, naming `conversations[n].value<tool_call>[k]`),
the text outside the blocks the first call's reasoning; likewise glaive's `<functioncall>
{...} <|endoftext|>` (the end token optional; its `arguments` may be a single-quoted JSON
string), named `<functioncall>[k]`; a `gpt` message that is a JSON object with `name`
and `arguments`. Call `arguments` are an object or a string holding one
(anything else refuses the record, `invalid`, naming the field). The results: the
`observation`/`tool`/`function`/`tool_response`/`function_response` messages right after
the call message, and glaive's `human` messages starting `FUNCTION RESPONSE:` (prefix
removed; never a user message or the task); each `<tool_response>` block (or a message
without one) answers the next call, in order; a body that is JSON {name: the call's
name, content: C} is C; one JSON list answering parallel calls is split across them; a
call nothing answers (or a null `value`) makes no turn, what it answered being unknown:
an `unpaired_call` warning names `conversations[n]` and the call. Plain `gpt` text
before a call is its reasoning; task <- first `human` message; `system` messages (after
a top-level `system`, joined with "\n\n") -> metadata `agent_system_prompt`; `tools`
(JSON string or list) is the action space; domain from tool names.

What the agent said to its user is a turn too: a `gpt` message answered by one or more
`human` messages before the agent's next message (`gpt` or a call) is a `text` turn (the
message its action, the replies joined with "\n" its observation), in order among the
tool-call turns, and is then no call's reasoning. The first `human` message stays the
task, not a turn. The agent's last `gpt` message, if nothing answered it and no call
followed it, -> metadata `final_message`. What is none of this is not imported and is
reported (`message_not_imported`, naming `conversations[n]`): a `human` message that
answers no agent message, a `gpt` message no user answered that is neither the last nor
before a call, a tool result that answers no call (or text outside its
`<tool_response>` blocks), a message of a role not named here.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Observation
from worldtrace.schemas.validate import parse_json

from .common import (
    ImportProblem,
    MissingField,
    NonText,
    build,
    content_text,
    expected,
    guess_domain,
    join_reasoning,
    json_in,
    json_text,
    message_action,
    no_text,
    null_or_missing,
    record_id,
    shown,
    textless,
    tool_action,
    tool_list,
    warning,
)

NAME = "sharegpt"
CALL_ROLES = {"function_call", "tool_call"}
OBS_ROLES = {"observation", "tool", "function", "tool_response", "function_response"}
ROLES = {"human", "gpt", "system", *CALL_ROLES, *OBS_ROLES}
ALIASES = {"user": "human", "assistant": "gpt"}
"""`from` values some ShareGPT datasets write for the user and the agent."""


def _role(m: dict[str, Any]) -> str | None:
    """A message's role (`from`), aliases resolved; None when it is not a string."""
    raw = m.get("from")
    return ALIASES.get(raw, raw) if isinstance(raw, str) else None


FUNCTION_RESPONSE = "FUNCTION RESPONSE:"
"""How glaive-function-calling data writes a tool's answer as a `human` message."""


def _kind(m: dict[str, Any]) -> str | None:
    """A message's role, a `human` message starting `FUNCTION RESPONSE:` a tool result."""
    role = _role(m)
    value = m.get("value")
    if role == "human" and isinstance(value, str) and value.lstrip().startswith(FUNCTION_RESPONSE):
        return "function_response"
    return role


# a block the model did not close runs to the end of the message
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
TOOL_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|\Z)", re.S)
# glaive: `<functioncall> {...} <|endoftext|>`, the end token optional
FUNCTIONCALL = re.compile(r"<functioncall>(.*?)(?:<\|endoftext\|>|(?=<functioncall>)|\Z)", re.S)
# glaive's arguments: a single-quoted JSON string, the body's last value
QUOTED_ARGUMENTS = re.compile(r"""("arguments"\s*:\s*)'(.*)'(\s*\}\s*)\Z""", re.S)

Call = tuple[dict[str, Any], str]  # a call and where its arguments are


def detect_record(d: Any) -> bool:
    """A `conversations` list, unless it holds OpenAI role messages ({role, content}, no
    `from`: many datasets keep those under this key; the OpenAI importer reads them)."""
    conv = d.get("conversations") if isinstance(d, dict) else None
    if not isinstance(conv, list):
        return False
    messages = [m for m in conv if isinstance(m, dict)]
    return not (any("role" in m for m in messages) and not any("from" in m for m in messages))


def near_miss(d: Any) -> tuple[str, str] | None:
    """(what is wrong, the evidence) for a record whose `conversations` is no list."""
    if isinstance(d, dict) and "conversations" in d and not detect_record(d):
        return str(expected("conversations", "a list", d["conversations"])), (
            "its `conversations` key"
        )
    return None


def _call(value: str, at: str) -> list[Call]:
    """The calls in a function_call message's value (at `at`), each with where its
    arguments are."""
    try:
        parsed = json_in(value, at)
    except (TypeError, json.JSONDecodeError) as exc:
        raise MissingField(f"{at}: function_call is not JSON: {value[:60]!r}") from exc
    if isinstance(parsed, list):
        calls = [(c, f"{at}[{k}]") for k, c in enumerate(parsed)]
    else:
        calls = [(parsed, at)]
    for c, _ in calls:
        if not isinstance(c, dict) or not c.get("name"):
            raise MissingField(f"{at}: function_call without a name")
    return [(c, f"{where}.arguments") for c, where in calls]


def _is_json(value: Any) -> bool:
    """A value JSON holds as it is (no set, tuple, bytes, non-string key or infinity)."""
    try:
        return parse_json(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError):
        return False


def _block_call(body: str, at: str) -> dict[str, Any]:
    """The call in a <tool_call> or <functioncall> block (at `at`): JSON; else JSON with
    its `arguments` a single-quoted string, as glaive writes it (the string kept as
    written, `\\'` an apostrophe); else a Python literal, as Hermes data writes it
    ({'arguments': {...}, 'name': ...})."""
    text = body.strip()
    call = None
    try:
        call = json_in(text, at)
    except json.JSONDecodeError:
        quoted = QUOTED_ARGUMENTS.search(text)
        if quoted:
            swapped = json.dumps(quoted.group(2).replace("\\'", "'"))
            with contextlib.suppress(json.JSONDecodeError):
                call = json_in(
                    f"{text[: quoted.start()]}{quoted.group(1)}{swapped}{quoted.group(3)}", at
                )
        if call is None:
            try:
                call = ast.literal_eval(text)
            except (ValueError, TypeError, SyntaxError, MemoryError):
                call = None
    if (
        isinstance(call, dict)
        and isinstance(call.get("name"), str)
        and call["name"]
        and _is_json(call)
    ):
        return call
    raise expected(at, "a JSON (or Python-literal) object with a `name`", body)


def _gpt_calls(text: str, n: int) -> tuple[list[Call], str] | None:
    """(the calls, the text around them) of a gpt message (conversations[n]) that makes
    calls: <tool_call> blocks, <functioncall>s, or the whole message a JSON {name,
    arguments}."""
    at = f"conversations[{n}].value"
    for tag, pattern in (("tool_call", TOOL_CALL), ("functioncall", FUNCTIONCALL)):
        blocks = list(pattern.finditer(text))
        if not blocks:
            continue
        calls = [
            (_block_call(b.group(1), f"{at}<{tag}>[{k}]"), f"{at}<{tag}>[{k}].arguments")
            for k, b in enumerate(blocks)
        ]
        edges = [0, *(x for b in blocks for x in b.span()), len(text)]
        around = (text[edges[k] : edges[k + 1]].strip() for k in range(0, len(edges), 2))
        return calls, "\n".join(p for p in around if p)
    if text.lstrip().startswith("{"):
        try:
            call = json_in(text, at)
        except json.JSONDecodeError:
            return None
        named = isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"]
        if named and "arguments" in call:
            return [(call, f"{at}.arguments")], ""
    return None


def _content(body: str, name: str) -> str:
    """A result body: JSON {name: the call's name, content: C} is C, anything else as
    it is."""
    if not body.lstrip().startswith("{"):
        return body
    try:
        parsed = parse_json(body)
    except ValueError:  # TooDeep too: the result as written
        return body
    if isinstance(parsed, dict) and parsed.keys() == {"name", "content"} and parsed["name"] == name:
        c = parsed["content"]
        return c if isinstance(c, str) else json_text(c)
    return body


def _results(
    numbered: list[tuple[int, dict[str, Any]]],
    i: int,
    calls: list[Call],
    turn: int,
    parts: NonText,
) -> tuple[list[str | None], int, list[ImportProblem]]:
    """The observations of `calls` (made by numbered[i], its first call turn `turn`),
    how many result messages follow the call message, and what of them answers no
    call. A null `value`, or no result at all, is an answer nobody knows: None, that
    call makes no turn (`unpaired_call`), never an empty output."""
    found: list[tuple[int, int | None, str | None]] = []  # (message, block or None, body)
    problems: list[ImportProblem] = []
    j = i + 1
    while j < len(numbered) and _kind(numbered[j][1]) in OBS_ROLES:
        n, m = numbered[j]
        k = min(len(found), len(calls) - 1)
        at = f"conversations[{n}].value"
        if m.get("value") is None or textless(m.get("value"), at):  # an answer nobody
            found.append((n, None, None))  # knows, in text (`to_trajectory`: no turn)
            j += 1
            continue
        text = parts.text(m.get("value"), f"turn {turn + k} observation (conversations[{n}].value)")
        if _role(m) == "human":  # glaive's FUNCTION RESPONSE: <result>
            text = text.lstrip()[len(FUNCTION_RESPONSE) :].strip()
        blocks = list(TOOL_RESPONSE.finditer(text))
        if not blocks:
            found.append((n, None, text))
        for b, block in enumerate(blocks):
            found.append((n, b, block.group(1).strip("\r\n")))
        if blocks and TOOL_RESPONSE.sub("", text).strip():
            problems.append(_not_imported(n, "text outside its <tool_response> blocks"))
        j += 1
    results = [body for _, _, body in found]
    if len(calls) > 1 and len(found) == 1 and results[0] is not None:  # one JSON list?
        try:
            parsed = parse_json(results[0])
        except ValueError:  # TooDeep too: one result, as written
            parsed = None
        if isinstance(parsed, list) and len(parsed) == len(calls):
            results = [p if isinstance(p, str) else json_text(p) for p in parsed]
            return results, j - i - 1, problems
    for n, b, _ in found[len(calls) :]:
        what = "a tool result" if b is None else f"<tool_response> block {b}, a tool result"
        problems.append(_not_imported(n, f"{what} that answers no call"))
    out = [
        body if body is None else _content(body, c["name"])
        for body, (c, _) in zip(results, calls, strict=False)
    ]
    messages = dict(numbered)
    for (n, _, body), (c, _) in zip(found, calls, strict=False):
        if body is None:
            at = f"conversations[{n}].value"
            left = textless(messages[n].get("value"), at)
            said = (
                no_text([(at, left)], f"call {c['name']!r}")
                if left
                else f"{null_or_missing(messages[n], 'value', f'conversations[{n}]')}, the"
                f" answer to call {c['name']!r} is unknown"
            )
            problems.append(warning("unpaired_call", f"{said}; no turn"))
    for k, (c, _) in enumerate(calls[len(out) :], start=len(out)):
        of = f" ({k + 1} of {len(calls)})" if len(calls) > 1 else ""
        problems.append(
            warning(
                "unpaired_call",
                f"conversations[{numbered[i][0]}]: no result for call {c['name']!r}{of}; no turn",
            )
        )
    return out + [None] * (len(calls) - len(out)), j - i - 1, problems


def to_trajectory(d: dict[str, Any], origin: str, domain: str | None = None):
    if not isinstance(d, dict):  # `--format sharegpt` on a list, a number...
        raise expected("record", "an object with a `conversations` list", d)
    if "conversations" not in d:
        raise MissingField("no `conversations` list")
    if not isinstance(d["conversations"], list):
        raise expected("conversations", "a list", d["conversations"])
    # (index in the record, message): problems name the record's own index
    numbered = [(n, m) for n, m in enumerate(d["conversations"]) if isinstance(m, dict)]
    pairs: list[Any] = []
    names = []
    # gpt messages since the last call or the last answered one: (index in the record, value)
    prose: list[tuple[int, Any]] = []
    replies: dict[int, list[str]] = {}  # turn of what the agent said -> the user's replies
    answering: int | None = None  # the turn the user's messages now answer
    problems: list[ImportProblem] = []
    systems: list[str] = []
    users = 0
    task = None
    parts = NonText()
    taken = 0  # result messages still ahead that a call took
    for i, (n, m) in enumerate(numbered):
        role = _kind(m)
        at = f"conversations[{n}].value"
        if role == "human":
            users += 1
            if task is None:
                task = parts.text(m.get("value"), f"task ({at})")
            if answering is None and prose:  # the last gpt message is answered
                problems += _unanswered(prose[:-1])
                said, value = prose[-1]
                answering, prose = len(pairs), []
                text = parts.text(value, f"turn {answering} action (conversations[{said}].value)")
                pairs.append((message_action(text), None, None))  # observation: its replies
                replies[answering] = []
            if answering is not None:
                place = f"turn {answering} observation ({at})"
                replies[answering].append(parts.text(m.get("value"), place))
            elif users > 1:
                problems.append(_not_imported(n, "a user message that answers no agent message"))
            continue
        answering = None  # anything else ends what the user says to the agent
        if role in OBS_ROLES:
            if taken:
                taken -= 1
            else:
                problems.append(_not_imported(n, "a tool result that answers no call"))
            continue
        if role == "system":
            systems.append(parts.text(m.get("value"), f"agent system prompt ({at})"))
            continue
        if role not in ROLES:
            problems.append(
                _not_imported(n, f"a message of the unknown role {shown(m.get('from'))}")
            )
            continue
        turn = len(pairs)
        if role == "gpt":
            made = _gpt_calls(content_text(m.get("value"))[0], n)
            if made is None:
                prose.append((n, m.get("value")))
                continue
            parts.text(m.get("value"), f"turn {turn} action ({at})")  # its non-text parts
            calls, around = made
        else:
            calls, around = _call(parts.text(m.get("value"), f"turn {turn} action ({at})"), at), ""
        results, taken, found = _results(numbered, i, calls, turn, parts)
        problems += found
        reasoning = join_reasoning(
            *(parts.text(v, f"turn {turn} reasoning (conversations[{g}].value)") for g, v in prose),
            around,
        )
        for k, (c, where) in enumerate(calls):
            names.append(c["name"])
            action = tool_action(c["name"], c.get("arguments"), where)
            if results[k] is None:
                continue
            pairs.append(
                (
                    action,
                    Observation(results[k]),
                    reasoning if len(pairs) == turn else None,
                )
            )
        prose = []
    for turn, texts in replies.items():
        action, _, _ = pairs[turn]
        pairs[turn] = (action, Observation("\n".join(texts)), None)
    final = None
    if prose:  # the agent's last word, no call after it and no user answering it
        problems += _unanswered(prose[:-1])
        said, value = prose[-1]
        final = parts.text(value, f"final message (conversations[{said}].value)")
    tools = tool_list(d.get("tools"))
    record_id(d, "id")  # the import loop's origin id: str(id)
    return [
        *problems,
        *parts.warnings(),
        build(
            NAME,
            origin,
            domain or guess_domain(names),
            pairs,
            task_description=task,
            instruction=task,
            action_space=tools,
            metadata={
                "agent_system_prompt": _system_prompt(d.get("system"), systems),
                "final_message": final,
            },
        ),
    ]


def _system_prompt(top: Any, systems: list[str]) -> str | None:
    """The top-level `system` (one that is no string: its JSON), then the `system`
    messages."""
    first = [] if top is None else [top if isinstance(top, str) else json_text(top)]
    if not systems:
        return first[0] if first else None
    return "\n\n".join(t for t in [*first, *systems] if t) or None


def _not_imported(n: int, what: str) -> ImportProblem:
    return warning("message_not_imported", f"conversations[{n}]: {what}; not imported")


def _unanswered(prose: list[tuple[int, Any]]) -> list[ImportProblem]:
    """gpt messages no user answered and no call followed (another gpt message did)."""
    return [_not_imported(n, "an agent message no user answered") for n, _ in prose]


def parse_record(
    d: Any, origin: str, domain: str | None = None, path: Path | None = None
) -> Iterator[Any]:
    """`path`: the file the record is in (unused here: see `agentworldbench`)."""
    yield from to_trajectory(d, origin, domain)
