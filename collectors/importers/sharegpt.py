"""ShareGPT conversations with function calls: {conversations: [{from, value}], tools?, id?}.

`function_call` (or gpt messages holding a JSON {name, arguments}) is the action,
paired with the next `observation`/`tool` message; plain `gpt` text before a call is
reasoning; task <- first `human` message; `tools` (JSON string or list) is the action
space; domain from tool names. Call `arguments` are an object or a string holding one
(anything else refuses the record, `invalid`, naming the field).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from worldtrace.schemas import Observation

from .common import (
    MissingField,
    NonText,
    build,
    expected,
    guess_domain,
    join_reasoning,
    tool_action,
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
    pairs, names = [], []
    prose: list[str] = []
    task = None
    parts = NonText()
    for i, (n, m) in enumerate(numbered):
        role = m.get("from")
        at = f"conversations[{n}].value"
        if role == "human" and task is None:
            task = parts.text(m.get("value"), f"task ({at})")
        if role == "gpt":
            prose.append(parts.text(m.get("value"), f"turn {len(pairs)} reasoning ({at})"))
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
        for k, (c, at) in enumerate(calls):
            names.append(c["name"])
            obs = Observation(results[k] if k < len(results) else "")
            pairs.append(
                (
                    tool_action(c["name"], c.get("arguments"), at),
                    obs,
                    join_reasoning(*prose) if k == 0 else None,
                )
            )
        prose = []
    tools = d.get("tools")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError:
            tools = None
    return [
        *parts.warnings(),
        build(
            NAME,
            origin,
            domain or guess_domain(names),
            pairs,
            task_description=task,
            instruction=task,
            action_space=tools if isinstance(tools, list) else None,
            metadata={"agent_system_prompt": d.get("system")},
        ),
    ]


def parse_record(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    yield from to_trajectory(d, origin, domain)
