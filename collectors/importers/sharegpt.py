"""ShareGPT conversations with function calls: {conversations: [{from, value}], tools?, id?}.

`function_call` (or gpt messages holding a JSON {name, arguments}) is the action,
paired with the next `observation`/`tool` message; plain `gpt` text before a call is
reasoning; task <- first `human` message; `tools` (JSON string or list) is the action
space; domain from tool names. Call `arguments` are an object or a string holding one
(anything else refuses the record, `invalid`, naming the field).

What the agent said to its user is a turn too: a `gpt` message answered by one or more
`human` messages before the agent's next message (`gpt` or a call) is a `text` turn (the
message its action, the replies joined with "\n" its observation), in order among the
tool-call turns, and is then no call's reasoning. The first `human` message stays the
task, not a turn. The agent's last `gpt` message, if nothing answered it and no call
followed it, -> metadata `final_message`. What is neither is not imported and is
reported (`message_not_imported`, naming `conversations[n]`): a `human` message that
answers no agent message, a `gpt` message no user answered that is neither the last nor
before a call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from worldtrace.schemas import Observation

from .common import (
    ImportProblem,
    MissingField,
    NonText,
    build,
    expected,
    guess_domain,
    join_reasoning,
    message_action,
    tool_action,
    warning,
)

NAME = "sharegpt"
CALL_ROLES = {"function_call", "tool_call"}
OBS_ROLES = {"observation", "tool", "function", "tool_response"}


def detect_record(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("conversations"), list)


def near_miss(d: Any) -> tuple[str, str] | None:
    """(what is wrong, the evidence) for a record whose `conversations` is no list."""
    if isinstance(d, dict) and "conversations" in d and not detect_record(d):
        return str(expected("conversations", "a list", d["conversations"])), (
            "its `conversations` key"
        )
    return None


def _call(value: str, at: str) -> list[tuple[dict[str, Any], str]]:
    """The calls in a function_call message's value (at `at`), each with where its
    arguments are."""
    try:
        parsed = json.loads(value)
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


def to_trajectory(d: dict[str, Any], origin: str, domain: str | None = None):
    if "conversations" not in d:
        raise MissingField("no `conversations` list")
    if not isinstance(d["conversations"], list):
        raise expected("conversations", "a list", d["conversations"])
    # (index in the record, message): problems name the record's own index
    numbered = [(n, m) for n, m in enumerate(d["conversations"]) if isinstance(m, dict)]
    conv = [m for _, m in numbered]
    pairs: list[Any] = []
    names = []
    # gpt messages since the last call or the last answered one: (index in the record, value)
    prose: list[tuple[int, Any]] = []
    replies: dict[int, list[str]] = {}  # turn of what the agent said -> the user's replies
    answering: int | None = None  # the turn the user's messages now answer
    problems: list[ImportProblem] = []
    users = 0
    task = None
    parts = NonText()
    for i, (n, m) in enumerate(numbered):
        role = m.get("from")
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
        if role == "gpt":
            prose.append((n, m.get("value")))
        if role not in CALL_ROLES:
            continue
        value = parts.text(m.get("value"), f"turn {len(pairs)} action ({at})")
        nxt = conv[i + 1] if i + 1 < len(conv) and conv[i + 1].get("from") in OBS_ROLES else None
        if nxt:
            place = f"turn {len(pairs)} observation (conversations[{numbered[i + 1][0]}].value)"
            results = [parts.text(nxt.get("value"), place)]
        else:
            results = [""]
        calls = _call(value, f"conversations[{n}].value")
        if len(calls) > 1 and nxt:  # parallel calls answered by one JSON list of results
            try:
                parsed = json.loads(results[0])
                if isinstance(parsed, list) and len(parsed) == len(calls):
                    results = [
                        p if isinstance(p, str) else json.dumps(p, sort_keys=True) for p in parsed
                    ]
            except json.JSONDecodeError:
                pass
        turn = len(pairs)
        reasoning = join_reasoning(
            *(parts.text(v, f"turn {turn} reasoning (conversations[{g}].value)") for g, v in prose)
        )
        for k, (c, at) in enumerate(calls):
            names.append(c["name"])
            obs = Observation(results[k] if k < len(results) else "")
            pairs.append(
                (
                    tool_action(c["name"], c.get("arguments"), at),
                    obs,
                    reasoning if k == 0 else None,
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
    tools = d.get("tools")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError:
            tools = None
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
            action_space=tools if isinstance(tools, list) else None,
            metadata={"agent_system_prompt": d.get("system"), "final_message": final},
        ),
    ]


def _not_imported(n: int, what: str) -> ImportProblem:
    return warning("message_not_imported", f"conversations[{n}]: {what}; not imported")


def _unanswered(prose: list[tuple[int, Any]]) -> list[ImportProblem]:
    """gpt messages no user answered and no call followed (another gpt message did)."""
    return [_not_imported(n, "an agent message no user answered") for n, _ in prose]


def parse_record(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    yield from to_trajectory(d, origin, domain)
