"""Constructors of the actions sandboxes understand, shared by every layer.

They live in `schemas` so that sandboxes (whose explorers build actions) and collectors
render a tool call the same way: `name(<sorted JSON arguments>)`.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
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


def rendered_arguments(kind: str, text: str, name: str | None) -> str | None:
    """The arguments an action's text gives back by itself: a call rendered
    `name(<arguments>)` those (`tool`, `tool_call`), keys as `keystrokes` writes them;
    else none. An AgentWorldBench line carries an action's arguments only where its text
    does not give them back (`writers.awb_turn`, `importers.agentworldbench`)."""
    if name is not None and text.startswith(name + "(") and text.endswith(")"):
        return text[len(name) + 1 : -1]
    if kind == "keystrokes":
        return keystrokes(text).arguments_json
    return None


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
    and so is, naming where it is, any value JSON cannot hold (`not_json`): NaN and
    infinities (`json.dumps` would write `NaN`, which no JSON reader takes), bytes, dates,
    sets, keys that are not strings (`json.dumps` would write `{"1": ...}` for `1`, and
    fail to sort them beside text keys)."""
    if arguments is not None and not isinstance(arguments, Mapping):
        kind = json_type(arguments)
        if type(arguments) in JSON_TYPES:  # "a JSON array", "a string", "a number"...
            kind = "a JSON array" if kind == "array" else a_json(arguments)
        raise ValueError(f"tool call {name}: its arguments must be a JSON object, got {kind}")
    given = arguments if isinstance(arguments, dict) else dict(arguments or {})
    if (problem := not_json(given, "arguments")) is not None:  # the given one: its cycles
        raise ValueError(f"tool call {name}: {problem}")
    args = json.dumps(given, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return Action("tool_call", f"{name}({args})", name=name, arguments_json=args)


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
"""A key written after a dot in a path (`arguments.repo_path`); others in brackets."""

_NOT_JSON: tuple[tuple[type, str, str], ...] = (
    (bytes, "binary data (YAML's !!binary)", "a string"),
    (bytearray, "binary data", "a string"),
    (datetime.datetime, "a timestamp (YAML's !!timestamp)", "a string"),
    (datetime.date, "a date (YAML's !!timestamp)", "a string"),
    (datetime.time, "a time of day", "a string"),
    (set, "a set (YAML's !!set)", "a list"),
    (frozenset, "a set", "a list"),
)
"""Values JSON has no value for (most of them what YAML's explicit tags build): what each
is, and what to write instead."""


def _what(value: Any) -> tuple[str, str | None]:
    """What a value is, in JSON's words when it has them, and what to write instead."""
    if type(value) in JSON_TYPES:
        return a_json(value), "a string"
    for cls, said, instead in _NOT_JSON:
        if isinstance(value, cls):
            return said, instead
    return f"a Python {type(value).__name__}", None


def _step(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return (
        f"{where}.{key}"
        if _KEY.fullmatch(key)
        else f"{where}[{json.dumps(key, ensure_ascii=False)}]"
    )


def json_problem(
    value: Any, only: tuple[type, ...] = ()
) -> tuple[tuple[str | int, ...], str, bool] | None:
    """The first place, in document order, where `value` holds what JSON has no value
    for: (its key path under `value`, what it is and what to do, whether it is a key:
    `the key 1 is a number, ...`); None when JSON holds all of it. NaN, infinities and
    keys that are not strings are such places (`json.dumps` writes `NaN`, `{"1": ...}`).
    Walked without recursion, each shared object once (a YAML alias used twice); one
    that holds itself is said so (`json.dumps`: "Circular reference detected").
    `only`: the values of these types alone are looked for (nothing else is said)."""
    stack: list[tuple[tuple[str | int, ...], Any] | int] = [((), value)]
    inside: set[int] = set()  # the containers being walked: one met again is a cycle
    done: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, int):  # a container walked to its end
            inside.discard(item)
            done.add(item)
            continue
        at, v = item
        if v is None or isinstance(v, (str, bool, int)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v) and not only:
                return at, f"{v!r}: JSON has no value for NaN or an infinity", False
            continue
        if not isinstance(v, (dict, list, tuple)):  # what `json.dumps` writes as such
            if only and not isinstance(v, only):
                continue
            what, instead = _what(v)
            write = f": write it as {instead}" if instead else ""
            return at, f"{what}, which JSON has no value for{write}", False
        if id(v) in inside and not only:
            what = "mapping" if isinstance(v, dict) else "list"
            why = "an alias inside its own anchor"
            return at, f"the {what} that holds it ({why}), which JSON cannot hold", False
        if id(v) in done or id(v) in inside:
            continue
        inside.add(id(v))
        stack.append(id(v))
        if isinstance(v, dict):
            entries = []
            for k, x in v.items():
                if not isinstance(k, str) and not only:
                    said = json.dumps(k) if type(k) in JSON_TYPES else str(k)
                    problem = (
                        f"the key {said} is {_what(k)[0]}, but a JSON object's keys are "
                        f"strings: quote it ('{said}')"
                    )
                    return at, problem, True
                entries.append(((*at, k), x))
        else:
            entries = [((*at, i), x) for i, x in enumerate(v)]
        stack.extend(reversed(entries))
    return None


def not_json(value: Any, name: str = "value") -> str | None:
    """`json_problem` said in a line, the place named from `name` (`arguments.since is a
    date (YAML's !!timestamp), which JSON has no value for: write it as a string`)."""
    if (found := json_problem(value)) is None:
        return None
    at, problem, about_a_key = found
    where = name
    for key in at:
        where = _step(where, key)
    return f"{where}: {problem}" if about_a_key else f"{where} is {problem}"


def arguments_of(action: Action) -> dict[str, Any]:
    """The arguments object of a tool call (empty when it has none)."""
    if not action.arguments_json:
        return {}
    value = json.loads(action.arguments_json)
    if not isinstance(value, dict):
        raise ValueError(f"arguments of {action.name} are not a JSON object")
    return value


@functools.lru_cache(maxsize=256)
def declared_tools(action_space: str | None) -> frozenset[str] | None:
    """Tool names of the action space; None when none is declared (nothing to check).
    Remembered: a source's trajectories share one action space, often kilobytes of
    tool schemas, which every record parsed again."""
    if not action_space:
        return None
    try:
        space = json.loads(action_space)
    except json.JSONDecodeError:
        return None
    names = set()
    for item in space if isinstance(space, list) else []:
        if isinstance(item, dict):
            fn = item.get("function") if isinstance(item.get("function"), dict) else item
            if isinstance(fn.get("name"), str):
                names.add(fn["name"])
        elif isinstance(item, str):
            names.add(item)
    return frozenset(names) or None
