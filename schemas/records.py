"""Typed trajectory records (DESIGN.md "Trajectory record").

Plain dataclasses: cheap to build in collectors and importers, convertible to the
dict shape that Arrow, JSON and the validator share (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import fields as F


@dataclass
class Action:
    kind: str = "text"
    """How the environment receives it: keystrokes, tool_call, command, text or gui."""
    text: str = ""
    """The rendered action as the world model sees it (never the agent's prose)."""
    name: str | None = None
    """Tool or command name, for tool calls."""
    arguments_json: str | None = None
    """Tool call arguments as a JSON object string."""


@dataclass
class Observation:
    text: str = ""
    is_error: bool = False
    exit_code: int | None = None
    truncated: bool = False
    """True when an output cap cut the text."""
    state_json: str | None = None
    """Environment state after the action (GUI: url/title, package/activity...)."""


@dataclass
class TurnStats:
    ol: float = 0.0
    nov: float = 0.0
    jac: float = 0.0
    r: float = 0.0
    byte_entropy: float = 0.0
    zlib_ratio: float = 0.0
    cond_novelty: float = 0.0
    corpus_surprisal: float = 0.0


@dataclass
class Turn:
    index: int
    action: Action
    observation: Observation
    started_at: datetime | None = None
    duration_ms: float | None = None
    reasoning: str | None = None
    """Agent reasoning; kept raw for provenance, stripped before CPT."""
    stats: TurnStats | None = None
    category: str | None = None
    keep: float | None = None
    rule: str | None = None


@dataclass
class Source:
    kind: str = "collector"
    name: str | None = None
    job_id: str | None = None
    episode_id: str | None = None
    attempt: int | None = None
    origin_format: str | None = None
    origin_id: str | None = None


@dataclass
class Environment:
    backend: str | None = None
    image: str | None = None
    server: str | None = None
    url: str | None = None
    device: str | None = None
    config: str | None = None
    """Backend configuration as a JSON object string."""


@dataclass
class Task:
    task_id: str | None = None
    instruction: str | None = None


@dataclass
class Agent:
    name: str | None = None
    model: str | None = None
    policy: str | None = None


@dataclass
class System:
    task_description: str | None = None
    action_space: str | None = None
    """JSON list of tool / action descriptions."""
    initial_state: str | None = None
    demonstrations: str | None = None
    """JSON list of demonstration trajectories."""
    simulation_instruction: str | None = None


@dataclass
class Outcome:
    status: str = "unknown"
    reward: float | None = None
    error: str | None = None


@dataclass
class Dedup:
    exact_hash: str | None = None
    cluster_id: str | None = None
    representative: bool | None = None


@dataclass
class Trajectory:
    domain: str
    turns: list[Turn] = field(default_factory=list)
    source: Source = field(default_factory=Source)
    environment: Environment = field(default_factory=Environment)
    task: Task = field(default_factory=Task)
    agent: Agent = field(default_factory=Agent)
    system: System = field(default_factory=System)
    outcome: Outcome = field(default_factory=Outcome)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    dedup: Dedup | None = None
    trajectory_id: str = ""
    schema_version: str = F.SCHEMA_VERSION

    def with_id(self) -> Trajectory:
        """Stamp the content hash (idempotent)."""
        from .hashing import trajectory_id

        self.trajectory_id = trajectory_id(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return trajectory_from_dict(d)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self.to_dict()), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        return trajectory_from_dict(from_jsonable(json.loads(text)))


_NESTED = {
    F.SOURCE: Source,
    F.ENVIRONMENT: Environment,
    F.TASK: Task,
    F.AGENT: Agent,
    F.SYSTEM: System,
    F.OUTCOME: Outcome,
    F.DEDUP: Dedup,
}
_TIME_FIELDS = (F.STARTED_AT, F.ENDED_AT)


def _build(cls: type, d: dict[str, Any] | None) -> Any:
    if d is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def _turn_from_dict(t: dict[str, Any]) -> Turn:
    return Turn(
        index=t["index"],
        action=_build(Action, t.get("action")) or Action(),
        observation=_build(Observation, t.get("observation")) or Observation(),
        started_at=t.get("started_at"),
        duration_ms=t.get("duration_ms"),
        reasoning=t.get("reasoning"),
        stats=_build(TurnStats, t.get("stats")),
        category=t.get("category"),
        keep=t.get("keep"),
        rule=t.get("rule"),
    )


def trajectory_from_dict(d: dict[str, Any]) -> Trajectory:
    """Build a record from the shared dict shape (Arrow row or decoded JSON)."""
    kwargs: dict[str, Any] = {
        "domain": d[F.DOMAIN],
        "turns": [_turn_from_dict(t) for t in d.get(F.TURNS) or []],
        "started_at": d.get(F.STARTED_AT),
        "ended_at": d.get(F.ENDED_AT),
        "metadata": _as_map(d.get(F.METADATA)),
        "trajectory_id": d.get(F.TRAJECTORY_ID) or "",
        "schema_version": d.get(F.SCHEMA_VERSION_F) or F.SCHEMA_VERSION,
    }
    for name, cls in _NESTED.items():
        if d.get(name) is not None:
            kwargs[name] = _build(cls, d[name])
    return Trajectory(**kwargs)


def _as_map(value: Any) -> dict[str, str]:
    """Arrow returns map columns as a list of (key, value) pairs; JSON as a dict."""
    return dict(value) if value is not None else {}


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


def to_jsonable(d: dict[str, Any]) -> dict[str, Any]:
    """Datetimes to ISO strings so the dict survives json.dumps."""
    out = dict(d)
    for k in _TIME_FIELDS:
        out[k] = _iso(out.get(k))
    if out.get(F.TURNS):
        out[F.TURNS] = [{**t, "started_at": _iso(t.get("started_at"))} for t in out[F.TURNS]]
    if isinstance(out.get(F.METADATA), list):
        out[F.METADATA] = dict(out[F.METADATA])
    return out


def from_jsonable(d: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `to_jsonable`: ISO strings back to aware datetimes."""
    out = dict(d)
    for k in _TIME_FIELDS:
        out[k] = _parse_time(out.get(k))
    if isinstance(out.get(F.TURNS), list):
        out[F.TURNS] = [
            {**t, "started_at": _parse_time(t.get("started_at"))} if isinstance(t, dict) else t
            for t in out[F.TURNS]
        ]
    return out


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
