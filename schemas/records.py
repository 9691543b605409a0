"""Typed trajectory records (DESIGN.md "Trajectory record"): THE declaration.

These dataclasses are the one place a record field is declared: name, order, type,
default, docstring, and in `spec(...)` what a type hint cannot say (validation rules,
view columns, Arrow overrides). The Arrow schema (`arrow.py`), validation
(`validate.py`) and the DuckDB views (`views.py`) are derived from them, so adding a
field is one edit here (docs/design.md "Records"). Field order is the Arrow column
order: a new field goes last in its class so existing shards keep reading.

Plain dataclasses: cheap to build in collectors and importers, convertible to the dict
shape that Arrow, JSON and the validator share (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import fields as F
from .spec import FieldInfo, fields_of, spec


@dataclass
class Action:
    kind: str = field(
        default="text",
        metadata=spec(required=True, enum=F.ACTION_KINDS, label="action kind", view="action_kind"),
    )
    """How the environment receives it: keystrokes, tool_call, command, text or gui."""
    text: str = field(default="", metadata=spec(required=True, view="action_text"))
    """The rendered action as the world model sees it (never the agent's prose)."""
    name: str | None = field(default=None, metadata=spec(view="tool_name"))
    """Tool or command name, for tool calls."""
    arguments_json: str | None = field(default=None, metadata=spec(json=dict))
    """Tool call arguments as a JSON object string."""


@dataclass
class Observation:
    text: str = field(default="", metadata=spec(required=True, view="observation_text"))
    is_error: bool = False
    exit_code: int | None = None
    truncated: bool = False
    """True when an output cap cut the text."""
    state_json: str | None = field(default=None, metadata=spec(json=dict))
    """Environment state after the action (GUI: url/title, package/activity...)."""
    env_failure: str | None = field(default=None, metadata=spec(view="env_failure"))
    """An environment failure the sandbox reported (GUI: `http_error:404`,
    `navigation_failed`, `blank_page`, `captcha`, `crashed`, `device_offline`,
    `app_crashed`, `anr`...); None = none reported."""
    changed: bool | None = field(default=None, metadata=spec(view="changed"))
    """Whether the environment's state changed with this action (GUI no-change
    detection); None = unknown."""


@dataclass
class TurnStats:
    ol: float = field(default=0.0, metadata=spec(required=True))
    nov: float = field(default=0.0, metadata=spec(required=True))
    jac: float = field(default=0.0, metadata=spec(required=True))
    r: float = field(default=0.0, metadata=spec(required=True))
    byte_entropy: float = field(default=0.0, metadata=spec(required=True))
    zlib_ratio: float = field(default=0.0, metadata=spec(required=True))
    cond_novelty: float = field(default=0.0, metadata=spec(required=True))
    corpus_surprisal: float | None = None
    """Bits of rarity of the observation's template in the processed corpus. A corpus
    count: null in stored processed rows, filled by the views at read time from
    processed/_index/templates.parquet (docs/pipeline.md), so new data rewrites no file."""


@dataclass
class Turn:
    index: int = field(
        metadata=spec(required=True, position=True, label="turn index", view="turn_index")
    )
    action: Action = field(metadata=spec(required=True, needed_by="observation"))
    observation: Observation = field(metadata=spec(required=True))
    started_at: datetime | None = None
    duration_ms: float | None = field(default=None, metadata=spec(view="duration_ms"))
    reasoning: str | None = None
    """Agent reasoning; kept raw for provenance, stripped before CPT."""
    stats: TurnStats | None = field(default=None, metadata=spec(processed=True))
    category: str | None = field(default=None, metadata=spec(enum=F.CATEGORIES, processed=True))
    keep: float | None = field(default=None, metadata=spec(range=(0, 1), processed=True))
    rule: str | None = field(default=None, metadata=spec(processed=True))
    perturbation: str | None = field(default=None, metadata=spec(json=dict, view="perturbation"))
    """JSON object `{"kind": ..., ...}` when an injected fault or an applied condition
    shaped this turn."""


@dataclass
class Source:
    kind: str = field(
        default="collector",
        metadata=spec(required=True, enum=F.SOURCE_KINDS, label="source kind", view="source_kind"),
    )
    name: str | None = field(default=None, metadata=spec(view="source_name"))
    job_id: str | None = field(default=None, metadata=spec(view="job_id"))
    episode_id: str | None = None
    attempt: int | None = None
    origin_format: str | None = field(default=None, metadata=spec(view="origin_format"))
    origin_id: str | None = field(default=None, metadata=spec(view="origin_id"))
    """The record's id in its origin."""
    origin_path: str | None = field(default=None, metadata=spec(view="origin_path"))
    """The file an imported trajectory came from."""
    origin_index: int | None = field(
        default=None, metadata=spec(range=(0, None), view="origin_index")
    )
    """The record's index in `origin_path` (0-based)."""


@dataclass
class Environment:
    backend: str | None = None
    image: str | None = None
    server: str | None = None
    url: str | None = None
    device: str | None = None
    config: str | None = field(default=None, metadata=spec(json=dict))
    """Backend configuration as a JSON object string."""


@dataclass
class Task:
    task_id: str | None = field(default=None, metadata=spec(view="task_id"))
    instruction: str | None = None


@dataclass
class Agent:
    name: str | None = None
    model: str | None = None
    policy: str | None = None


@dataclass
class System:
    """The recipe's five system prompt parts (`fields.SYSTEM_FIELDS`, hashed in order)."""

    task_description: str | None = None
    action_space: str | None = field(default=None, metadata=spec(json=list))
    """JSON list of tool / action descriptions."""
    initial_state: str | None = None
    demonstrations: str | None = field(default=None, metadata=spec(json=list))
    """JSON list of demonstration trajectories."""
    simulation_instruction: str | None = None


@dataclass
class Outcome:
    status: str = field(
        default="unknown",
        metadata=spec(required=True, enum=F.OUTCOME_STATUSES, view="status"),
    )
    reward: float | None = field(default=None, metadata=spec(view="reward"))
    error: str | None = None


@dataclass
class Dedup:
    exact_hash: str | None = None
    cluster_id: str | None = None
    representative: bool | None = None


@dataclass
class Trajectory:
    schema_version: str = field(
        default=F.SCHEMA_VERSION,
        kw_only=True,
        metadata=spec(nullable=False, required=True, const=F.SCHEMA_VERSION),
    )
    """Also written as the Arrow schema's metadata (`arrow.arrow_schema`)."""
    trajectory_id: str = field(
        default="", kw_only=True, metadata=spec(nullable=False, content_hash=True)
    )
    """Content hash (`hashing.trajectory_id`); empty until `with_id`."""
    domain: str = field(metadata=spec(nullable=False, required=True, enum=F.DOMAINS))
    _: KW_ONLY
    source: Source = field(default_factory=Source, metadata=spec(required=True))
    environment: Environment = field(default_factory=Environment)
    task: Task = field(default_factory=Task)
    agent: Agent = field(default_factory=Agent)
    system: System = field(default_factory=System)
    turns: list[Turn] = field(default_factory=list, metadata=spec(required=True))
    outcome: Outcome = field(default_factory=Outcome)
    started_at: datetime | None = None
    ended_at: datetime | None = field(default=None, metadata=spec(after="started_at"))
    metadata: dict[str, str] = field(default_factory=dict)
    dedup: Dedup | None = field(default=None, metadata=spec(processed=True))
    conditions: str | None = field(default=None, metadata=spec(json=list))
    """JSON list of the conditions applied to the episode (`[{"kind": "disk_full", ...}]`)."""
    redactions: int | None = field(default=None, metadata=spec(range=(0, None)))
    """How many secrets were replaced in this record."""

    def with_id(self) -> Trajectory:
        """Stamp the content hash (idempotent)."""
        from .hashing import trajectory_id

        self.trajectory_id = trajectory_id(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return record_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return trajectory_from_dict(d)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self.to_dict()), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        return trajectory_from_dict(from_jsonable(json.loads(text)))


@functools.cache
def _dict_plan(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(name, kind, holds records) per field of `cls`, computed once."""
    return tuple(
        (f.name, f.kind, _is_record(f.hint if f.kind == "struct" else f.item))
        for f in fields_of(cls)
    )


def record_to_dict(record: Any) -> dict[str, Any]:
    """`dataclasses.asdict` along the declaration: lists and maps are new, values shared
    (they are immutable), so no deep copy of every string (~4x faster, on every record
    an importer or collector writes)."""
    out: dict[str, Any] = {}
    for name, kind, nested in _dict_plan(type(record)):
        v = getattr(record, name)
        if v is None:
            out[name] = None
        elif kind == "struct":
            out[name] = record_to_dict(v)
        elif kind == "list":
            out[name] = [record_to_dict(x) for x in v] if nested else list(v)
        elif kind == "map":
            out[name] = dict(v)
        else:
            out[name] = v
    return out


def record_from_dict(cls: type, d: dict[str, Any]) -> Any:
    """Build a record of `cls` from the dict shape; unknown keys are ignored.

    A missing or null struct, list or map takes its default (a struct without one is
    built empty); a null version or id takes its default; other values pass as they are
    (a null the type forbids is the validator's to report).
    """
    kwargs: dict[str, Any] = {}
    for f in fields_of(cls):
        kind = f.kind
        if f.name not in d and (f.has_default or kind != "struct"):
            if not f.has_default:
                raise KeyError(f.name)
            continue
        value = d.get(f.name)
        if kind == "struct":
            if value is None:
                if f.has_default:
                    continue
                value = f.hint()
            else:
                value = record_from_dict(f.hint, value)
        elif kind == "list":
            if not value:
                continue
            if _is_record(f.item):
                value = [record_from_dict(f.item, x) for x in value]
        elif kind == "map":
            if value is None:
                continue
            value = dict(value)  # Arrow returns a map as (key, value) pairs, JSON as a dict
        elif (f.spec.const or f.spec.content_hash) and not value:
            continue
        kwargs[f.name] = value
    return cls(**kwargs)


def trajectory_from_dict(d: dict[str, Any]) -> Trajectory:
    """Build a record from the shared dict shape (Arrow row or decoded JSON)."""
    return record_from_dict(Trajectory, d)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _parse_time(value: Any) -> Any:
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return value  # left for the validator to report
        return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return value


def _is_record(hint: Any) -> bool:
    return dataclasses.is_dataclass(hint)


@functools.cache
def _timed(cls: type) -> tuple[FieldInfo, ...]:
    """The fields of `cls` that hold a timestamp or a map, directly or nested."""
    out = []
    for f in fields_of(cls):
        nested = f.hint if f.kind == "struct" else f.item if _is_record(f.item) else None
        if f.kind in ("time", "map") or (nested is not None and _timed(nested)):
            out.append(f)
    return tuple(out)


def _convert(cls: type, d: dict[str, Any], time_fn, maps_to_dict: bool) -> dict[str, Any]:
    """Apply `time_fn` to every timestamp of a record dict, following the declaration."""
    out = dict(d)
    for f in _timed(cls):
        if f.name not in out:
            continue
        value = out[f.name]
        if f.kind == "time":
            out[f.name] = time_fn(value)
        elif f.kind == "struct" and isinstance(value, dict):
            out[f.name] = _convert(f.hint, value, time_fn, maps_to_dict)
        elif f.kind == "list" and isinstance(value, list):
            out[f.name] = [
                _convert(f.item, x, time_fn, maps_to_dict) if isinstance(x, dict) else x
                for x in value
            ]
        elif f.kind == "map" and maps_to_dict and isinstance(value, list):
            out[f.name] = dict(value)
    return out


def to_jsonable(d: dict[str, Any], root: type = Trajectory) -> dict[str, Any]:
    """Datetimes to ISO strings (and Arrow map pairs to dicts) so the dict survives
    json.dumps."""
    return _convert(root, d, _iso, maps_to_dict=True)


def from_jsonable(d: dict[str, Any], root: type = Trajectory) -> dict[str, Any]:
    """Inverse of `to_jsonable`: ISO strings back to aware datetimes."""
    return _convert(root, d, _parse_time, maps_to_dict=False)


def is_synthetic(rec: Mapping[str, Any]) -> bool:
    """Whether a record was made by the bundled generator (`collectors/synthetic.py`):
    `source.kind = "synthetic"`, or in files written before that kind existed,
    `environment.backend = "synthetic"`. Generated text is not an environment's answer:
    export, import and `stats` count it by this one rule."""
    source, env = rec.get(F.SOURCE) or {}, rec.get(F.ENVIRONMENT) or {}
    return source.get("kind") == F.SYNTHETIC or env.get("backend") == F.SYNTHETIC


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
