"""Trajectory data model and storage: records (the one declaration), the Arrow schema
and validation derived from it, the shard store."""

from . import fields
from .arrow import TRAJECTORY_SCHEMA, arrow_schema, from_table, to_table
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
from .spec import spec
from .store import ShardWriter, Store, read_records, read_table
from .validate import Problem, ValidationError, validate, validate_dict, validator_for

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
    "arrow_schema",
    "fields",
    "from_table",
    "read_records",
    "read_table",
    "spec",
    "to_table",
    "trajectory_id",
    "validate",
    "validate_dict",
    "validator_for",
]
