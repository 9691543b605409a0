"""Trajectory data model and storage: records (the one declaration), the Arrow schema
and validation derived from it, the shard store."""

import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING

from . import fields
from .spec import spec

if TYPE_CHECKING:
    from .arrow import TRAJECTORY_SCHEMA, arrow_schema, from_table, to_table
    from .hashing import trajectory_id
    from .layout import Store
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
    from .store import ShardWriter, read_records, read_table
    from .validate import Problem, ValidationError, validate, validate_dict, validator_for

_HOMES = {
    "arrow": ("TRAJECTORY_SCHEMA", "arrow_schema", "from_table", "to_table"),
    "hashing": ("trajectory_id",),
    "records": (
        "Action", "Agent", "Dedup", "Environment", "Observation", "Outcome", "Source",
        "System", "Task", "Trajectory", "Turn", "TurnStats",
    ),
    "layout": ("Store",),
    "store": ("ShardWriter", "read_records", "read_table"),
    "validate": ("Problem", "ValidationError", "validate", "validate_dict", "validator_for"),
}  # fmt: skip
_HOME = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    """The package's names load their module on first use (PEP 562): a command that needs
    only the records, the field names or the store's layout (`jobs`) loads no pyarrow (~0.15 s
    with numpy)."""
    if (module := _HOME.get(name)) is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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


class _Package(types.ModuleType):
    """A name of the package that is also its home submodule's (`validate`): the import
    system binds the package's attribute to the submodule once it is loaded, and the
    name must keep its object (as an eager `from .validate import validate` left it)."""

    def __setattr__(self, name: str, value: object) -> None:
        if _HOME.get(name) == name and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
