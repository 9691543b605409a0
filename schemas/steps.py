"""A terminal session's steps as the streams they continue (`Redactor.across_steps`).

A terminal's steps are one session cut in time: keys typed over several steps, output
cut where a step stopped waiting. These read and write, on a record's turns (Arrow-row
dicts or `Turn`s alike), the texts that run on from one step to the next.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

KEYSTROKES = "keystrokes"
STEP_STREAMS = (
    ("action", "text", None),
    ("action", "arguments_json", KEYSTROKES),
    ("observation", "text", None),
    ("observation", "state_json", "raw"),
)
"""What a terminal session's steps continue one another in (`Redactor.across_steps`): its
keys (the action's text, and its arguments when they were JSON), its screen, its raw
stream (kept in the observation's `state_json`). (part, field, key of a JSON field)."""


def get_field(obj: Any, name: str) -> Any:
    """`obj[name]` of a dict, else the attribute (None where there is none)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def with_field(obj: Any, name: str, value: Any) -> Any:
    """A copy of `obj` (a dict or a dataclass) with `name` set to `value`."""
    if isinstance(obj, dict):
        return {**obj, name: value}
    return dataclasses.replace(obj, **{name: value})


def keystroke_runs(turns: list[Any]) -> list[list[int]]:
    """Indexes of each run of two or more consecutive keystroke steps."""
    runs: list[list[int]] = []
    for i, t in enumerate(turns):
        action = get_field(t, "action")
        if action is not None and get_field(action, "kind") == KEYSTROKES:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
    return [r for r in runs if len(r) > 1]


def stream_text(holder: Any, name: str, key: str | None) -> str:
    """A step's text of one stream ("" where it has none)."""
    value = get_field(holder, name) if holder is not None else None
    if key is None or not isinstance(value, str):
        return value if isinstance(value, str) else ""
    if f'"{key}"' not in value:
        return ""
    try:
        inner = json.loads(value).get(key)
    except (ValueError, AttributeError):
        return ""
    return inner if isinstance(inner, str) else ""


def set_stream(holder: Any, name: str, key: str | None, text: str) -> Any:
    """A copy of `holder` with the stream's text set (a JSON field written again, ASCII
    escapes kept where it had them)."""
    if key is None:
        return with_field(holder, name, text)
    doc = json.loads(get_field(holder, name))
    value = json.dumps({**doc, key: text}, ensure_ascii=get_field(holder, name).isascii())
    return with_field(holder, name, value)
