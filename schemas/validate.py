"""Validation of trajectory records in their dict shape (Arrow row or decoded JSON).

Every problem names the record, the field path and what is wrong, so that a user with
a million-row shard can find the row and fix the producer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import fields as F
from .hashing import trajectory_id


@dataclass(frozen=True)
class Problem:
    record: str
    """Where the record is: its trajectory_id, or `file:row N` when it has none."""
    field: str
    """Dotted path of the field, e.g. `turns[3].observation.text`."""
    message: str

    def __str__(self) -> str:
        return f"{self.record}: {self.field}: {self.message}"


class ValidationError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


# Scalar kinds: name -> (accepted Python types, description).
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "a string"),
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "bool": ((bool,), "a boolean"),
    "time": ((datetime, str), "a timestamp"),
}
# Nested structs: field -> {subfield: (kind, required)}.
_STRUCTS: dict[str, dict[str, tuple[str, bool]]] = {
    F.SOURCE: {
        "kind": ("str", True),
        "name": ("str", False),
        "job_id": ("str", False),
        "episode_id": ("str", False),
        "attempt": ("int", False),
        "origin_format": ("str", False),
        "origin_id": ("str", False),
    },
    F.ENVIRONMENT: {n: ("str", False) for n in F.ENVIRONMENT_FIELDS},
    F.TASK: {n: ("str", False) for n in F.TASK_FIELDS},
    F.AGENT: {n: ("str", False) for n in F.AGENT_FIELDS},
    F.SYSTEM: {n: ("str", False) for n in F.SYSTEM_FIELDS},
    F.OUTCOME: {"status": ("str", True), "reward": ("float", False), "error": ("str", False)},
    F.DEDUP: {
        "exact_hash": ("str", False),
        "cluster_id": ("str", False),
        "representative": ("bool", False),
    },
}
_ACTION = {
    "kind": ("str", True),
    "text": ("str", True),
    "name": ("str", False),
    "arguments_json": ("str", False),
}
_OBSERVATION = {
    "text": ("str", True),
    "is_error": ("bool", False),
    "exit_code": ("int", False),
    "truncated": ("bool", False),
    "state_json": ("str", False),
}
_TURN_SCALARS = {
    "started_at": ("time", False),
    "duration_ms": ("float", False),
    "reasoning": ("str", False),
    "category": ("str", False),
    "keep": ("float", False),
    "rule": ("str", False),
}
# JSON-in-string fields: path -> expected top-level JSON type (None = any).
_JSON_FIELDS = {
    (F.SYSTEM, "action_space"): list,
    (F.SYSTEM, "demonstrations"): list,
    (F.ENVIRONMENT, "config"): dict,
}


class _Checker:
    def __init__(self, record: str):
        self.record = record
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.record, path, message))

    def scalar(self, path: str, value: Any, kind: str, required: bool) -> bool:
        if value is None:
            if required:
                self.add(path, "missing required field")
            return False
        types, desc = _KINDS[kind]
        if isinstance(value, bool) and kind in ("int", "float"):
            self.add(path, f"wrong type: expected {desc}, got bool")
            return False
        if not isinstance(value, types):
            self.add(path, f"wrong type: expected {desc}, got {type(value).__name__}")
            return False
        if kind == "time" and isinstance(value, str):
            try:
                datetime.fromisoformat(value)
            except ValueError:
                self.add(path, f"not an ISO-8601 timestamp: {value!r}")
                return False
        return True

    def struct(self, path: str, value: Any, spec: dict[str, tuple[str, bool]], required: bool):
        if value is None:
            if required:
                self.add(path, "missing required field")
            return None
        if not isinstance(value, dict):
            self.add(path, f"wrong type: expected an object, got {type(value).__name__}")
            return None
        for name in value:
            if name not in spec:
                self.add(f"{path}.{name}", "unknown field")
        for name, (kind, req) in spec.items():
            self.scalar(f"{path}.{name}", value.get(name), kind, req)
        return value

    def enum(self, path: str, value: Any, allowed: tuple[str, ...], what: str) -> None:
        if isinstance(value, str) and value not in allowed:
            self.add(path, f"unknown {what} {value!r} (expected one of {', '.join(allowed)})")

    def json_text(self, path: str, value: Any, expected: type | None) -> Any:
        if not isinstance(value, str):
            return None
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            self.add(path, f"invalid JSON: {exc.msg} at char {exc.pos}")
            return None
        if expected is not None and not isinstance(parsed, expected):
            self.add(path, f"JSON must be {expected.__name__}, got {type(parsed).__name__}")
        return parsed


def _time(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


def validate_dict(d: Any, where: str = "record", check_id: bool = True) -> list[Problem]:
    """All problems of one record; an empty list means valid."""
    if not isinstance(d, dict):
        return [Problem(where, "<record>", f"expected an object, got {type(d).__name__}")]
    tid = d.get(F.TRAJECTORY_ID)
    c = _Checker(f"{where} ({tid})" if isinstance(tid, str) and tid else where)

    known = {
        F.SCHEMA_VERSION_F, F.TRAJECTORY_ID, F.DOMAIN, F.TURNS, F.STARTED_AT, F.ENDED_AT,
        F.METADATA, *_STRUCTS,
    }  # fmt: skip
    for name in d:
        if name not in known:
            c.add(name, "unknown field")

    version = d.get(F.SCHEMA_VERSION_F)
    if c.scalar(F.SCHEMA_VERSION_F, version, "str", True) and version != F.SCHEMA_VERSION:
        c.add(
            F.SCHEMA_VERSION_F,
            f"unsupported schema version {version!r} (expected {F.SCHEMA_VERSION!r})",
        )
    domain = d.get(F.DOMAIN)
    if c.scalar(F.DOMAIN, domain, "str", True):
        c.enum(F.DOMAIN, domain, F.DOMAINS, "domain")

    for name, spec in _STRUCTS.items():
        c.struct(name, d.get(name), spec, required=name == F.SOURCE)
    for struct, name, allowed, what in (
        (F.SOURCE, "kind", F.SOURCE_KINDS, "source kind"),
        (F.OUTCOME, "status", F.OUTCOME_STATUSES, "status"),
    ):
        sub = d.get(struct)
        if isinstance(sub, dict):
            c.enum(f"{struct}.{name}", sub.get(name), allowed, what)
    for (struct, name), expected in _JSON_FIELDS.items():
        sub = d.get(struct)
        if isinstance(sub, dict):
            c.json_text(f"{struct}.{name}", sub.get(name), expected)

    c.scalar(F.STARTED_AT, d.get(F.STARTED_AT), "time", False)
    c.scalar(F.ENDED_AT, d.get(F.ENDED_AT), "time", False)
    start, end = _time(d.get(F.STARTED_AT)), _time(d.get(F.ENDED_AT))
    if start and end:
        try:
            if end < start:
                c.add(F.ENDED_AT, "ends before it starts")
        except TypeError:
            c.add(F.ENDED_AT, "mixes timezone-aware and naive timestamps")

    meta = d.get(F.METADATA)
    if meta is not None:
        items = meta.items() if isinstance(meta, dict) else meta if isinstance(meta, list) else None
        if items is None:
            c.add(F.METADATA, f"wrong type: expected a map of strings, got {type(meta).__name__}")
        else:
            for k, v in items:
                if not isinstance(k, str) or not isinstance(v, str):
                    c.add(f"{F.METADATA}.{k}", "keys and values must be strings")

    turns = d.get(F.TURNS)
    if turns is None:
        c.add(F.TURNS, "missing required field")
    elif not isinstance(turns, list):
        c.add(F.TURNS, f"wrong type: expected a list, got {type(turns).__name__}")
    else:
        for i, t in enumerate(turns):
            _check_turn(c, i, t)

    if check_id and not c.problems:
        if not isinstance(tid, str) or not tid:
            c.add(F.TRAJECTORY_ID, "missing required field")
        elif tid != trajectory_id(d):
            c.add(F.TRAJECTORY_ID, f"does not match the content hash ({trajectory_id(d)})")
    return c.problems


def _check_turn(c: _Checker, i: int, t: Any) -> None:
    p = f"turns[{i}]"
    if not isinstance(t, dict):
        c.add(p, f"wrong type: expected an object, got {type(t).__name__}")
        return
    for name in t:
        if name not in F.TURN_FIELDS:
            c.add(f"{p}.{name}", "unknown field")
    index = t.get("index")
    if c.scalar(f"{p}.index", index, "int", True) and index != i:
        c.add(f"{p}.index", f"turn indexes must be 0..n-1 in order: found {index} at position {i}")
    action = t.get("action")
    if action is None and t.get("observation") is not None:
        c.add(f"{p}.action", "observation without action")
    else:
        a = c.struct(f"{p}.action", action, _ACTION, required=True)
        if a is not None:
            c.enum(f"{p}.action.kind", a.get("kind"), F.ACTION_KINDS, "action kind")
            if a.get("arguments_json") is not None:
                c.json_text(f"{p}.action.arguments_json", a["arguments_json"], dict)
    o = c.struct(f"{p}.observation", t.get("observation"), _OBSERVATION, required=True)
    if o is not None and o.get("state_json") is not None:
        c.json_text(f"{p}.observation.state_json", o["state_json"], dict)
    for name, (kind, req) in _TURN_SCALARS.items():
        c.scalar(f"{p}.{name}", t.get(name), kind, req)
    keep = t.get("keep")
    if isinstance(keep, (int, float)) and not isinstance(keep, bool) and not 0 <= keep <= 1:
        c.add(f"{p}.keep", f"must lie in [0, 1], got {keep}")
    c.enum(f"{p}.category", t.get("category"), F.CATEGORIES, "category")
    stats = t.get("stats")
    if stats is not None:
        c.struct(f"{p}.stats", stats, {n: ("float", True) for n in F.STATS_FIELDS}, False)


def validate(record: Any, where: str = "record") -> None:
    """Raise ValidationError unless `record` (Trajectory or dict) is valid."""
    d = record if isinstance(record, dict) else record.to_dict()
    problems = validate_dict(d, where)
    if problems:
        raise ValidationError(problems)
