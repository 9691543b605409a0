"""Constructors for the actions each sandbox understands."""

from __future__ import annotations

import json
from typing import Any

from worldtrace.schemas import Action


def keystrokes(keys: str, duration: float | None = None) -> Action:
    """A terminal action: the keys, and how long to wait for output."""
    args: dict[str, Any] = {"keystrokes": keys}
    if duration is not None:
        args["duration"] = duration
    return Action("keystrokes", keys, arguments_json=json.dumps(args, sort_keys=True))


def tool(name: str, **arguments: Any) -> Action:
    """A tool call rendered as `name(<sorted JSON arguments>)`."""
    args = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    return Action("tool_call", f"{name}({args})", name=name, arguments_json=args)


def from_spec(spec: Any) -> Action:
    """An action from a task file: a string (keys), {keystrokes, duration}, or {tool, args}."""
    if isinstance(spec, str):
        return keystrokes(spec)
    if isinstance(spec, dict) and "keystrokes" in spec:
        return keystrokes(spec["keystrokes"], spec.get("duration"))
    if isinstance(spec, dict) and "tool" in spec:
        return tool(spec["tool"], **(spec.get("args") or {}))
    raise ValueError(
        f"cannot read an action from {spec!r} (a string, {{keystrokes, duration}} or {{tool, args}})"
    )
