"""Constructors for the actions each sandbox understands, and the job-file action shapes.

A job file writes an action as a string (terminal keys), `{keystrokes, duration}`, or a
tool call `{tool: NAME, arguments: {...}}`; any other key is refused, so a typo such as
`args` fails at submit instead of running with no arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from worldtrace.schemas import Action
from worldtrace.schemas.actions import arguments_of, keystrokes, tool, tool_call

__all__ = ["arguments_of", "from_spec", "keystrokes", "tool", "tool_call"]

KEYSTROKE_KEYS = frozenset({"keystrokes", "duration"})
TOOL_KEYS = frozenset({"tool", "arguments"})


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
                isinstance(duration, bool)
                or not isinstance(duration, (int, float))
                or not 0 <= duration < math.inf  # NaN fails both
            ):
                raise ValueError(
                    f"duration must be a finite number of seconds >= 0, got {duration!r}"
                )
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
