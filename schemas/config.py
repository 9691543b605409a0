"""Config dataclasses from YAML plus `key.path=value` overrides (nested dataclasses)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import yaml


def _coerce(value: Any, hint: Any) -> Any:
    if isinstance(value, str):
        origin = typing.get_origin(hint)
        if hint is bool or (origin is typing.Union and bool in typing.get_args(hint)):
            low = value.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        if value.lower() in ("null", "none") and hint is not str:
            return None
        return yaml.safe_load(value) if hint is not str else value
    return value


def replace_path(obj: Any, dotted: str, value: Any) -> Any:
    """A copy of dataclass `obj` with `a.b.c` set to `value` (coerced to the field type)."""
    head, _, rest = dotted.partition(".")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    if head not in fields:
        raise KeyError(f"unknown setting {dotted!r} (known: {', '.join(fields)})")
    current = getattr(obj, head)
    if rest:
        if dataclasses.is_dataclass(current):
            return dataclasses.replace(obj, **{head: replace_path(current, rest, value)})
        if isinstance(current, dict):
            return dataclasses.replace(obj, **{head: {**current, rest: value}})
        raise KeyError(f"setting {head!r} has no sub-settings ({dotted!r})")
    hints = typing.get_type_hints(type(obj))
    if dataclasses.is_dataclass(current) and isinstance(value, dict):
        for k, v in value.items():
            current = replace_path(current, k, v)
        return dataclasses.replace(obj, **{head: current})
    return dataclasses.replace(obj, **{head: _coerce(value, hints[head])})


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def load(obj: Any, yaml_path: str | Path | None = None, overrides: list[str] = ()) -> Any:
    """Apply a YAML file (nested mapping) then `key.path=value` strings to dataclass `obj`."""
    if yaml_path:
        data = yaml.safe_load(Path(yaml_path).read_text()) or {}
        for k, v in flatten(data).items():
            obj = replace_path(obj, k, v)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key.path=value")
        obj = replace_path(obj, key.strip(), value)
    return obj


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)
