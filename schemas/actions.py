"""Constructors of the actions sandboxes understand, shared by every layer.

They live in `schemas` so that sandboxes (whose explorers build actions) and collectors
render a tool call the same way: `name(<sorted JSON arguments>)`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .records import Action


def keystrokes(keys: str, duration: float | None = None) -> Action:
    """A terminal action: the keys, and how long to wait for output (finite: the
    arguments are JSON, which has no NaN or infinity)."""
    args: dict[str, Any] = {"keystrokes": keys}
    if duration is not None:
        if not 0 <= duration < math.inf:
            raise ValueError(f"duration must be a finite number of seconds >= 0, got {duration!r}")
        args["duration"] = duration
    # the keys as typed, as `tool_call` writes its arguments (never `\u00fc`)
    args_json = json.dumps(args, sort_keys=True, ensure_ascii=False)
    return Action("keystrokes", keys, arguments_json=args_json)


def tool(name: str, /, **arguments: Any) -> Action:
    """A tool call rendered as `name(<sorted JSON arguments>)`.

    `name` is positional-only so that a tool may take an argument called `name`.
    """
    return tool_call(name, arguments)


JSON_TYPES = {list: "array", tuple: "array", str: "string", bool: "boolean", int: "number",
              float: "number", type(None): "null"}  # fmt: skip
"""JSON's name for the type of a value Python's `json` reads or writes."""


def json_type(value: Any) -> str:
    """JSON's name for `value`'s type (its Python class name when JSON has none)."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def a_json(value: Any) -> str:
    """What a JSON value is, in JSON's words (`null`, `an array`, `a string`, `a number`,
    `a boolean`): a JSONL line `null` was rejected as `got NoneType`, `[1,2]` as `got list`."""
    kind = json_type(value)
    return kind if kind == "null" else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def tool_call(name: str, arguments: Mapping[str, Any] | None = None) -> Action:
    """A tool call from a name and an arguments mapping (None: no arguments). Anything
    else is refused naming what it is (`dict()` would read a list of pairs as an object),
    and so are NaN and infinities: JSON has no value for them (`json.dumps` would write
    `NaN`, which no JSON reader takes, and a server receives something else)."""
    if arguments is not None and not isinstance(arguments, Mapping):
        kind = json_type(arguments)
        if type(arguments) in JSON_TYPES:  # "a JSON array", "a string", "a number"...
            kind = "a JSON array" if kind == "array" else a_json(arguments)
        raise ValueError(f"tool call {name}: its arguments must be a JSON object, got {kind}")
    try:
        args = json.dumps(
            dict(arguments or {}), sort_keys=True, ensure_ascii=False, allow_nan=False
        )
    except ValueError:
        raise ValueError(
            f"tool call {name}: its arguments hold NaN or an infinity, which JSON has no value for"
        ) from None
    return Action("tool_call", f"{name}({args})", name=name, arguments_json=args)


def arguments_of(action: Action) -> dict[str, Any]:
    """The arguments object of a tool call (empty when it has none)."""
    if not action.arguments_json:
        return {}
    value = json.loads(action.arguments_json)
    if not isinstance(value, dict):
        raise ValueError(f"arguments of {action.name} are not a JSON object")
    return value
