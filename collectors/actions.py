"""Constructors for the actions each sandbox understands, and the job-file action shapes.

A job file writes an action as a string (terminal keys), `{keystrokes, duration}`, or a
tool call `{tool: NAME, arguments: {...}}`; any other key is refused, so a typo such as
`args` fails at submit instead of running with no arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worldtrace.schemas import Action

KEYSTROKE_KEYS = frozenset({"keystrokes", "duration"})
TOOL_KEYS = frozenset({"tool", "arguments"})


def keystrokes(keys: str, duration: float | None = None) -> Action:
    """A terminal action: the keys, and how long to wait for output."""
    args: dict[str, Any] = {"keystrokes": keys}
    if duration is not None:
        args["duration"] = duration
    return Action("keystrokes", keys, arguments_json=json.dumps(args, sort_keys=True))


def tool(name: str, /, **arguments: Any) -> Action:
    """A tool call rendered as `name(<sorted JSON arguments>)`.

    `name` is positional-only so that a tool may take an argument called `name`.
    """
    return tool_call(name, arguments)


def tool_call(name: str, arguments: Mapping[str, Any] | None = None) -> Action:
    """A tool call from a name and an arguments mapping."""
    args = json.dumps(dict(arguments or {}), sort_keys=True, ensure_ascii=False)
    return Action("tool_call", f"{name}({args})", name=name, arguments_json=args)


def arguments_of(action: Action) -> dict[str, Any]:
    """The arguments object of a tool call (empty when it has none)."""
    if not action.arguments_json:
        return {}
    value = json.loads(action.arguments_json)
    if not isinstance(value, dict):
        raise ValueError(f"arguments of {action.name} are not a JSON object")
    return value


def from_spec(spec: Any) -> Action:
    """An action from a job file: keys, {keystrokes, duration} or {tool, arguments}."""
    if isinstance(spec, str):
        return keystrokes(spec)
    if isinstance(spec, Mapping):
        keys = set(spec)
        if "keystrokes" in keys:
            _only(keys, KEYSTROKE_KEYS)
            if not isinstance(spec["keystrokes"], str):
                raise ValueError("keystrokes must be a string")
            duration = spec.get("duration")
            if duration is not None and (
                isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration < 0
            ):
                raise ValueError(f"duration must be a number of seconds >= 0, got {duration!r}")
            return keystrokes(spec["keystrokes"], duration)
        if "tool" in keys:
            _only(keys, TOOL_KEYS)
            if not isinstance(spec["tool"], str) or not spec["tool"]:
                raise ValueError("tool must be a tool name")
            arguments = spec.get("arguments")
            if arguments is not None and not isinstance(arguments, Mapping):
                raise ValueError(f"arguments must be a mapping, got {type(arguments).__name__}")
            return tool_call(spec["tool"], arguments)
    raise ValueError(
        f"cannot read an action from {spec!r}: write a string (keys), "
        "{keystrokes: ..., duration: ...} or {tool: NAME, arguments: {...}}"
    )


def _only(keys: set[str], allowed: frozenset[str]) -> None:
    unknown = sorted(keys - allowed)
    if unknown:
        raise ValueError(
            f"unknown action field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )
