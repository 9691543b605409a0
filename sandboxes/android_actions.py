"""The android action space (tool calls with JSON Schemas, checked at submit and sent to
models) and the names a job file may give: adb address, package, activity.

Targets are node ids of the current observation or screen pixels; `swipe` names the
finger's direction (up scrolls a list towards later items).
"""

from __future__ import annotations

import re
from typing import Any

from .base import ToolSpec

PACKAGE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")
ACTIVITY_RE = re.compile(r"^[A-Za-z0-9_.$]+$")
KEYS = ("back", "home", "enter", "recent", "delete")
DIRECTIONS = ("up", "down", "left", "right")


def parse_address(value: str) -> tuple[str, int]:
    """`host:port` of an adb server."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be host:port, got {value!r}")
    return host, int(port)


def check_address(value: str) -> str:
    parse_address(value)
    return value


def check_package(value: str | None) -> str | None:
    if value is not None and not PACKAGE_RE.match(value):
        raise ValueError(f"not an Android package name: {value!r}")
    return value


def check_activity(value: str | None) -> str | None:
    if value is not None and not ACTIVITY_RE.match(value):
        raise ValueError(f"not an activity class name: {value!r}")
    return value


def _target(props: dict[str, Any], what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "node": {"type": "integer", "minimum": 1, "description": f"id of the node to {what}"},
            "x": {"type": "integer", "minimum": 0, "description": "screen x in pixels (with y)"},
            "y": {"type": "integer", "minimum": 0, "description": "screen y in pixels (with x)"},
            **props,
        },
        # a node or a point: `minProperties: 1` let `{"duration": 2}` through (hunt 1205g)
        "anyOf": [{"required": ["node"]}, {"required": ["x", "y"]}],
        "dependentRequired": {"x": ["y"], "y": ["x"]},
        "additionalProperties": False,
    }


ACTION_SPACE = [
    ToolSpec("tap", "Tap a node by id, or a screen point (x, y)", _target({}, "tap")),
    ToolSpec(
        "long_press",
        "Press and hold a node or point",
        _target(
            {
                "duration": {
                    "type": "number",
                    "minimum": 0.5,
                    "maximum": 10,
                    "description": "seconds (default 1)",
                }
            },
            "press",
        ),
    ),
    ToolSpec(
        "swipe",
        "Swipe the finger in a direction inside a node (default: the screen); "
        "up scrolls a list down to later items",
        {
            "type": "object",
            "properties": {
                "direction": {"enum": list(DIRECTIONS)},
                "node": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "id of the node to swipe in",
                },
            },
            "required": ["direction"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "type",
        "Type text into the focused field",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "clear": {
                    "type": "boolean",
                    "description": "replace the field's text (default false)",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "press",
        "Press a key",
        {
            "type": "object",
            "properties": {"key": {"enum": list(KEYS)}},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "launch",
        "Open an app by package name",
        {
            "type": "object",
            "properties": {"package": {"type": "string", "pattern": PACKAGE_RE.pattern}},
            "required": ["package"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "wait",
        "Wait, then look again",
        {
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}},
            "required": ["seconds"],
            "additionalProperties": False,
        },
    ),
]
TOOLS = {t.name: t for t in ACTION_SPACE}
