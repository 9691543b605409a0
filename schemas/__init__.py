"""Trajectory data model and storage: records, Arrow schema, validation, shard store."""

from . import fields
from .arrow import TRAJECTORY_SCHEMA, from_table, to_table
from .hashing import trajectory_id
from .records import (
    Action,
    Agent,
    Dedup,
    Environment,
    Observation,
    Outcome,
    Source,
    System,
    Task,
    Trajectory,
    Turn,
    TurnStats,
)
from .store import ShardWriter, Store, read_records, read_table
from .validate import Problem, ValidationError, validate, validate_dict

__all__ = [
    "TRAJECTORY_SCHEMA",
    "Action",
    "Agent",
    "Dedup",
    "Environment",
    "Observation",
    "Outcome",
    "Problem",
    "ShardWriter",
    "Source",
    "Store",
    "System",
    "Task",
    "Trajectory",
    "Turn",
    "TurnStats",
    "ValidationError",
    "fields",
    "from_table",
    "read_records",
    "read_table",
    "to_table",
    "trajectory_id",
    "validate",
    "validate_dict",
]
