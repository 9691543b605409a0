"""Config dataclasses from YAML plus `key.path=value` overrides (nested dataclasses).

Every value is checked against its field's type here (`--set dedup.threshold=abc` is an
error naming the key, not a run that fails deep inside the pipeline); ranges are checked
by the config classes themselves, in `__post_init__` with `check`. The YAML file and the
overrides are applied to each dataclass in one go, so a check across fields
(`bands x rows <= num_perm`) sees the final values whatever their order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import types
import typing
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import yaml

from .parsing import read_yaml_text, safe_load
from .text import BadText

_NO_VALUE = object()


class SettingError(ValueError):
    """A setting a config does not take: the key, the value given and what is wrong.

    `source` is the YAML file the value came from (None: a `key=value` override)."""

    def __init__(
        self, key: str, value: Any, problem: str, source: str | Path | None = None
    ) -> None:
        self.key, self.value, self.problem = key, value, problem
        self.source = None if source is None else str(source)
        super().__init__(str(self))

    def __str__(self) -> str:
        given = self.key if self.value is _NO_VALUE else f"{self.key}={show(self.value)}"
        return ": ".join(part for part in (self.source, given, self.problem) if part)

    def __reduce__(self):  # picklable, whatever process raises it
        return (SettingError, (self.key, self.value, self.problem, self.source))


def show(value: Any) -> str:
    """A value as the user wrote it: text as it is, anything else as YAML/JSON reads it."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


WORKERS_PER_CORE = 4
"""Worker processes (`process`'s `workers`, `import --workers`) at most this many per core
(`max_workers`): each is a process of its own (~90 MB) and their work is CPU-bound, so
more than one per core only waits its turn; 4 leaves room for a machine whose cores the
run does not see. `--set workers=999` forked 999 of them (> 120 s on 214 records), and
`import --workers 100000` ended in the kernel's out-of-memory killer, saying nothing."""


def max_workers() -> int:
    """The most worker processes a run takes here (`WORKERS_PER_CORE` per core)."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def check(obj: Any, name: str, ok: bool, expected: str) -> None:
    """For a config's `__post_init__`: unless `ok`, the field `name` of `obj` is an error
    naming its value and what it takes (the loader puts the key path in front)."""
    if not ok:
        raise SettingError(name, getattr(obj, name), f"expected {expected}")


@dataclasses.dataclass(frozen=True)
class _Given:
    """One value given for a field, and where it came from (a file; None: an override)."""

    value: Any
    source: str | None = None


class _Mismatch(Exception):
    """A value that is not of a type; its argument says what the type takes."""


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(map(show, typing.get_args(hint)))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text"}
    if hint in names:
        return names[hint]
    origin = typing.get_origin(hint) or hint
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def _typed(value: Any, hint: Any) -> Any:
    """`value` as a `hint` (an int is a float too), or `_Mismatch`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return _typed(value, arg)
            except _Mismatch:
                pass
        raise _Mismatch(" or ".join(_describe(a) for a in args if a is not type(None)))
    if origin is Literal:
        if value in args:
            return value
        raise _Mismatch(_describe(hint))
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        ok = False
    elif hint is str:
        ok = isinstance(value, str)
    elif (origin or hint) is list:
        if not isinstance(value, list):
            raise _Mismatch(_describe(hint))
        return [_typed(v, args[0]) for v in value] if args else value
    elif (origin or hint) is dict:
        ok = isinstance(value, dict)
    else:
        return value
    if not ok:
        raise _Mismatch(_describe(hint))
    return value


def _readings(text: str, hint: Any) -> list[Any]:
    """What a `key=value` text may mean for a field of type `hint`, in order of preference."""
    if hint is str:
        return [text]
    low = text.lower()
    readings: list[Any] = []
    if low in ("1", "true", "yes", "on"):
        readings.append(True)
    elif low in ("0", "false", "no", "off"):
        readings.append(False)
    if low in ("null", "none"):
        readings.append(None)
    with contextlib.suppress(yaml.YAMLError):
        readings.append(safe_load(text))
    with contextlib.suppress(ValueError):
        readings.append(float(text))  # a number in any form `float` reads
    return [*readings, text]


def _yaml(value: Any) -> Any:
    """A `key=value` text as YAML reads it (`0.8` the number, as in a `--config` file)."""
    if not isinstance(value, str):
        return value
    try:
        return safe_load(value)
    except yaml.YAMLError:
        return value


def _coerce(key: str, given: _Given, hint: Any) -> Any:
    """The value given for field `key`, as its type `hint`, or a `SettingError`."""
    value = given.value
    candidates = _readings(value, hint) if isinstance(value, str) else [value]
    expected = None
    for candidate in candidates:
        try:
            return _typed(candidate, hint)
        except _Mismatch as exc:
            expected = expected or str(exc)
    raise SettingError(key, value, f"expected {expected}", given.source)


def _nest(
    changes: dict[str, Any],
    obj: Any,
    dotted: str,
    given: _Given,
    prefix: str = "",
    unlisted: Collection[str] = (),
) -> None:
    """Record `dotted` = `given` in `changes`, nested as the dataclasses of `obj` are.
    `unlisted`: fields of `obj` an unknown key's `known:` list leaves out (what the
    source may not give)."""
    head, _, rest = dotted.partition(".")
    names = [f.name for f in dataclasses.fields(obj)]
    key = prefix + head
    if head not in names:
        known = ", ".join(prefix + n for n in names if n not in unlisted)
        raise SettingError(
            prefix + dotted, given.value, f"unknown setting (known: {known})", given.source
        )
    current = getattr(obj, head)
    if dataclasses.is_dataclass(current):
        sub = changes.setdefault(head, {})
        if rest:
            _nest(sub, current, rest, given, key + ".")
            return
        value = _yaml(given.value)
        if not isinstance(value, dict):
            raise SettingError(
                key, given.value, f"expected its settings, e.g. {key}.NAME=VALUE", given.source
            )
        for k, v in flatten(value).items():
            _nest(sub, current, k, _Given(v, given.source), key + ".")
        return
    if rest:
        if not isinstance(current, dict):
            raise SettingError(
                prefix + dotted, given.value, f"{key} has no sub-settings", given.source
            )
        sub = changes.setdefault(head, {})
        if isinstance(sub, _Given):  # the whole mapping given earlier: this key on top
            whole = _coerce(key, sub, dict)
            sub = changes[head] = {k: _Given(v, sub.source) for k, v in whole.items()}
        sub[rest] = given
        return
    changes[head] = given


def _apply(obj: Any, changes: dict[str, Any], prefix: str = "") -> Any:
    """A copy of dataclass `obj` with `changes` (`_nest`) made at once, each value checked
    against its field's type, then the ranges by the class (`__post_init__`)."""
    hints = typing.get_type_hints(type(obj))
    updates: dict[str, Any] = {}
    sources = []
    for name, change in changes.items():
        key = prefix + name
        current = getattr(obj, name)
        if isinstance(change, _Given):
            sources.append(change.source)
            updates[name] = _coerce(key, change, hints[name])
        elif dataclasses.is_dataclass(current):
            updates[name] = _apply(current, change, key + ".")
        else:  # keys inside a mapping field: `policy_settings.echo_ol=0.8` read as YAML
            sources.extend(g.source for g in change.values())
            given = {k: g.value if g.source else _yaml(g.value) for k, g in change.items()}
            updates[name] = {**current, **given}
    try:
        return dataclasses.replace(obj, **updates)
    except SettingError as exc:
        given = changes.get(exc.key)
        head, _, key = exc.key.partition(".")
        if given is None and key and isinstance(changes.get(head), dict):
            given = changes[head].get(key)  # a key inside a mapping (`policy_settings.x`)
        if isinstance(given, _Given):
            raise SettingError(prefix + exc.key, given.value, exc.problem, given.source) from None
        source = sources[-1] if sources else None
        raise SettingError(prefix + exc.key, exc.value, exc.problem, source) from None


def replace_path(obj: Any, dotted: str, value: Any) -> Any:
    """A copy of dataclass `obj` with `a.b.c` set to `value` (checked against the field)."""
    changes: dict[str, Any] = {}
    _nest(changes, obj, dotted, _Given(value))
    return _apply(obj, changes)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def yaml_problem(exc: Exception) -> str:
    """A YAML error as one line, `line N: problem` (PyYAML's own text is several, with a
    copy of the line and a caret)."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    return (f"line {mark.line + 1}: " if mark else "") + str(problem or exc).splitlines()[0]


def load(
    obj: Any,
    yaml_path: str | Path | None = None,
    overrides: list[str] = (),
    unlisted: Collection[str] = (),
) -> Any:
    """Apply a YAML file (nested mapping) then `key.path=value` strings to dataclass `obj`
    (the later value of a key wins). A value its field does not take, by type or by range,
    raises `SettingError`; an unknown key lists the fields of `obj` but `unlisted` (those
    the caller refuses from a file and the overrides: `process`'s `output`)."""
    changes: dict[str, Any] = {}
    if yaml_path:
        source = str(yaml_path)
        try:
            data = safe_load(read_yaml_text(yaml_path)) or {}
        except BadText as exc:  # bytes that are not UTF-8: where, never a traceback
            where = f"line {exc.line}: " if exc.line else ""
            raise SettingError("", _NO_VALUE, where + exc.message, source) from None
        except yaml.YAMLError as exc:
            raise SettingError("", _NO_VALUE, f"not YAML ({yaml_problem(exc)})", source) from None
        if not isinstance(data, dict):
            raise SettingError(
                "", _NO_VALUE, "expected a mapping of settings (dedup: {threshold: 0.7})", source
            )
        for k, v in flatten(data).items():
            _nest(changes, obj, str(k), _Given(v, source), unlisted=unlisted)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingError(item, _NO_VALUE, "expected KEY=VALUE, e.g. dedup.threshold=0.7")
        _nest(changes, obj, key.strip(), _Given(value), unlisted=unlisted)
    return _apply(obj, changes)


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def as_overrides(settings: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The `key=value` overrides (for `--set`) that make `defaults` into `settings`, both
    nested dicts as `to_dict` makes them: how to say which settings a run used."""
    now, base = flatten(settings), flatten(defaults)
    return [f"{k}={show(v)}" for k, v in now.items() if k not in base or base[k] != v]
