"""The Arrow schema of a record, derived from its declaration, and conversion both ways.

`arrow_schema(Trajectory)` walks the dataclasses of `records.py`: a hint maps to an
Arrow type (`str` string, `int` int32, `float` float64, `bool` bool, `datetime`
timestamp[us, UTC], `list[X]` list, `dict[str, str]` map, a dataclass a struct),
`spec(arrow=...)` overrides it, `spec(nullable=False)` makes a column NOT NULL, and the
`const` of the version field becomes the schema metadata.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from .records import Trajectory, trajectory_from_dict
from .spec import fields_of, item_of, kind_of

TS = pa.timestamp("us", tz="UTC")
STR = pa.string()
VERSION_KEY = b"worldtrace.schema_version"
_SCALARS = {"str": STR, "int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "time": TS}


def arrow_type(hint: Any) -> pa.DataType:
    kind = kind_of(hint)
    if kind == "struct":
        return pa.struct(arrow_fields(hint))
    if kind == "list":
        return pa.list_(arrow_type(item_of(hint)))
    if kind == "map":
        key, value = typing.get_args(hint)
        return pa.map_(arrow_type(key), arrow_type(value))
    return _SCALARS[kind]


def arrow_fields(cls: type) -> list[pa.Field]:
    """The Arrow fields of a record class in declaration order (`flatten` inlined)."""
    out: list[pa.Field] = []
    for f in fields_of(cls):
        if f.spec.flatten:
            out.extend(arrow_fields(f.hint))
        else:
            out.append(pa.field(f.name, f.spec.arrow or arrow_type(f.hint), f.spec.nullable))
    return out


def arrow_schema(cls: type) -> pa.Schema:
    """The Arrow schema of a root record class (a trajectory or a side-table row)."""
    version = next((f.spec.const for f in fields_of(cls) if f.spec.const), None)
    return pa.schema(
        arrow_fields(cls), metadata={VERSION_KEY: version.encode()} if version else None
    )


TRAJECTORY_SCHEMA = arrow_schema(Trajectory)


def micros_casts(schema: pa.Schema) -> list[pa.Schema]:
    """The casts (in order) that turn every timestamp column of `schema`, at any depth,
    unit or zone, into int64 epoch microseconds: to microseconds first where the unit
    differs (an int64 cast keeps the unit), then to integers. Empty when it has none.

    Pass 1 wants integers (`normalize.micros`), and Python datetimes with a zone cost ~3
    us each to make: with 7 timestamps a trajectory, reading them as integers takes a
    trajectory's conversion from 45 to 17 us.
    """

    def mapped(t: pa.DataType, leaf) -> pa.DataType:
        if pa.types.is_timestamp(t):
            return leaf(t)
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(mapped(f.type, leaf)) for f in t])
        if pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(mapped(t.value_type, leaf)))
        return t  # maps and other nestings keep their datetimes (validation takes both)

    def recast(leaf) -> pa.Schema:
        fields = [f.with_type(mapped(f.type, leaf)) for f in schema]
        return pa.schema(fields, metadata=schema.metadata)

    micros = recast(lambda t: pa.timestamp("us", t.tz))
    ints = recast(lambda t: pa.int64())
    if ints.equals(schema):
        return []
    return [micros, ints] if not micros.equals(schema) else [ints]


def _time_paths(t: pa.DataType, path: tuple[str | None, ...]) -> list[tuple[str | None, ...]]:
    if pa.types.is_timestamp(t):
        return [path]
    if pa.types.is_struct(t):
        return [p for f in t for p in _time_paths(f.type, (*path, f.name))]
    if pa.types.is_list(t):
        return _time_paths(t.value_type, (*path, None))
    return []


def zoned_times(schema: pa.Schema) -> bool:
    """Whether every field the trajectory schema holds as a timestamp is, in `schema`, a
    timestamp with a zone (any unit), or absent. Only then may a file's
    timestamps be read as epoch microseconds (`micros_casts`, `validate_dict(micros=
    True)`): an int column there (epoch seconds), text or a naive time would pass for
    one."""
    for path in (p for f in TRAJECTORY_SCHEMA for p in _time_paths(f.type, (f.name,))):
        t: pa.DataType | None = schema.field(path[0]).type if path[0] in schema.names else None
        for step in path[1:]:
            if t is None:
                break
            if step is None:
                t = t.value_type if pa.types.is_list(t) or pa.types.is_large_list(t) else None
            elif pa.types.is_struct(t):
                t = t.field(step).type if t.get_field_index(step) >= 0 else None
            else:
                t = None
        if t is not None and not (pa.types.is_timestamp(t) and t.tz):
            return False
    return True


def to_table(records: Iterable[Trajectory]) -> pa.Table:
    return pa.Table.from_pylist([t.to_dict() for t in records], schema=TRAJECTORY_SCHEMA)


def to_batch(records: Iterable[Trajectory]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([t.to_dict() for t in records], schema=TRAJECTORY_SCHEMA)


def from_table(table: pa.Table | pa.RecordBatch) -> list[Trajectory]:
    return [trajectory_from_dict(r) for r in table.to_pylist()]
