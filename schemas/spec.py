"""What a type hint cannot say about a record field, and reading it back.

The dataclasses in `records.py` and `tables.py` are the single declaration of every
stored record: their fields give names, order, Python types and defaults; `spec(...)`
in `dataclasses.field(metadata=...)` adds the rest (Arrow overrides, validation rules,
view columns). `arrow.py`, `validate.py` and `views.py` derive from them through
`fields_of`, so adding a field is one edit. Plain dataclasses rather than pydantic:
records are built by the million in collectors and importers, and the derivations need
only the field list, which `dataclasses.fields` already gives.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import MISSING, dataclass
from datetime import datetime
from typing import Any

KEY = "worldtrace"


@dataclass(frozen=True)
class Spec:
    arrow: Any = None
    """Arrow type overriding the one the hint maps to (`arrow.arrow_type`)."""
    nullable: bool = True
    """Arrow nullability; only the identity columns of a record are NOT NULL."""
    required: bool = False
    """Validation: a missing or null value is a problem."""
    enum: tuple[str, ...] | None = None
    """The accepted values of a string."""
    label: str | None = None
    """What problem messages call the value (default: the name, `_` as spaces)."""
    json: type | None = None
    """The string holds JSON whose top level is this type (dict or list)."""
    range: tuple[float | None, float | None] | None = None
    """Inclusive bounds of a number; None is open."""
    const: str | None = None
    """The only accepted value (the schema version)."""
    needed_by: str | None = None
    """A sibling field that may not be present while this one is missing."""
    position: bool = False
    """In a list of records, the value equals the record's position."""
    after: str | None = None
    """A sibling timestamp this one may not precede."""
    content_hash: bool = False
    """The content hash: validated against the content (`check_id`), not by type."""
    processed: bool = False
    """Added by processing: absent from the `raw_` views."""
    view: str | None = None
    """Also a view column of this name (trajectory views for fields of the record's
    structs, turn views for fields of a turn and its structs)."""
    flatten: bool = False
    """Side tables: the struct's fields become columns of the row."""


def spec(**kw: Any) -> dict[str, Spec]:
    """`dataclasses.field(metadata=spec(required=True, enum=F.DOMAINS))`."""
    return {KEY: Spec(**kw)}


@dataclass(frozen=True)
class FieldInfo:
    name: str
    hint: Any
    """The declared type without `| None`."""
    optional: bool
    """The hint allows None."""
    spec: Spec
    kind: str
    """`kind_of(hint)`, computed once."""
    item: Any = None
    """The element type of a list."""
    has_default: bool = True
    """The dataclass gives a default (or a default factory)."""


@functools.cache
def fields_of(cls: type) -> tuple[FieldInfo, ...]:
    """The declared fields of a record class, hints resolved, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint, optional = _strip_none(hints[f.name])
        kind = kind_of(hint)
        item = item_of(hint) if kind == "list" else None
        default = f.default is not MISSING or f.default_factory is not MISSING
        out.append(
            FieldInfo(f.name, hint, optional, f.metadata.get(KEY) or Spec(), kind, item, default)
        )
    return tuple(out)


@functools.cache
def names_of(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields_of(cls))


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:  # `X | None`; other unions have no record kind
            return args[0], True
    return hint, False


def kind_of(hint: Any) -> str:
    """str, int, float, bool, time, list, map or struct: what the derivations switch on."""
    if dataclasses.is_dataclass(hint):
        return "struct"
    origin = typing.get_origin(hint)
    if origin is list:
        return "list"
    if origin is dict:
        return "map"
    if hint is datetime:
        return "time"
    if hint in (str, int, float, bool):
        return hint.__name__
    raise TypeError(f"no record kind for type {hint!r}")


def item_of(hint: Any) -> Any:
    """The element type of `list[X]`."""
    return typing.get_args(hint)[0]


def label(f: FieldInfo) -> str:
    return f.spec.label or f.name.replace("_", " ")
