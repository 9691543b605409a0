"""Validation of records in their dict shape (Arrow row or decoded JSON).

The rules come from the declaration (`records.py`): each field's type from its hint,
the rest from its `spec` (required, enum, JSON, range, const, position, needed_by,
after). Every problem names the record, the field path and what is wrong, so that a
user with a million-row shard can find the row and fix the producer.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa

from .actions import a_json
from .arrow import arrow_type
from .hashing import trajectory_id
from .records import Trajectory
from .spec import FieldInfo, Spec, fields_of, kind_of, label, names_of
from .text import (  # noqa: F401  (re-exported: where they were first)
    LONE_SURROGATE,
    lone_surrogates,
    storable,
    surrogate_problem,
)


@dataclass(frozen=True)
class Problem:
    record: str
    """Where the record is: its trajectory_id, or `file:row N` when it has none."""
    field: str
    """Dotted path of the field, e.g. `turns[3].observation.text`."""
    message: str

    def __post_init__(self) -> None:
        # security: a message quotes the value it refuses ("unknown domain 'AKIA...'") and
        # is printed and kept in processed/rejects, where no record boundary redacts it
        from .redact import redactor

        # a path names a key, and `record` the record's id, as the record spells them: a
        # lone surrogate there is written as its escape, so a problem is always printable
        # and storable (a `rejects` row)
        object.__setattr__(self, "record", storable(self.record))
        red = redactor()
        for name in ("field", "message"):
            object.__setattr__(self, name, red.text(storable(getattr(self, name)))[0])

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


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# -- what a column can store ---------------------------------------------------------

INT64 = (-(2**63), 2**63 - 1)


@functools.cache
def _bounds(t: pa.DataType) -> tuple[str, int, int] | None:
    """(what, lowest, highest) integer a column of Arrow type `t` takes from Python: an
    integer type its own range; a float column converts a Python int through int64."""
    if pa.types.is_integer(t):  # by its width: `to_pandas_dtype` imports pandas (0.13 s)
        bits = t.bit_width
        if pa.types.is_signed_integer(t):
            return f"out of range for {t}", -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return f"out of range for {t}", 0, (1 << bits) - 1
    if pa.types.is_floating(t):
        return f"an integer too large for a {t} column", *INT64
    return None


def _out_of_range(v: int, bounds: tuple[str, int, int]) -> str | None:
    """Why integer `v` does not fit `bounds` (`_bounds`), or None."""
    what, lo, hi = bounds
    if lo <= v <= hi:
        return None
    shown = str(v) if v.bit_length() <= 128 else f"an integer of {v.bit_length()} bits"
    fix = "" if what.startswith("out of range") else " (write it with an exponent: 1e+30)"
    return f"{what} ({lo} to {hi}): {shown}{fix}"


class _Checker:
    """Walks a record dict along its declaration. A null optional field or a plain
    value of the right type is passed without a call or a path string (`_plan`):
    validation runs on every record a pipeline reads."""

    def __init__(
        self, record: str, micros: bool = False, declared: bool = False, texts: bool = False
    ):
        self.record, self.micros, self.texts = record, micros, texts
        self.plan = _declared_plan if declared else _plan
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.record, path, message))

    def struct(self, path: str, value: Any, cls: type, position: int | None = None) -> None:
        if not isinstance(value, dict):
            self.add(path, f"wrong type: expected an object, got {type(value).__name__}")
            return
        if self.plan is _plan:
            names = names_of(cls)
            for name in value:
                if name not in names:
                    self.add(_join(path, name), "unknown field")
        for f, exact, may_be_none in self.plan(cls):
            v = value.get(f.name)
            if (v is None and may_be_none) or type(v) is exact:
                continue  # the common cases, decided without a call
            self.field(path, v, f, value, position)
        if self.texts:  # `isascii` is O(1): only a string of wider characters is searched
            for name in _text_fields(cls):
                v = value.get(name)
                if type(v) is str and not v.isascii() and (why := surrogate_problem(v)):
                    self.add(_join(path, name), why)

    def field(self, parent_path: str, v: Any, f: FieldInfo, parent: dict, position: int | None):
        s, path = f.spec, _join(parent_path, f.name)
        if v is None:
            if s.needed_by and parent.get(s.needed_by) is not None:
                self.add(path, f"{s.needed_by} without {f.name}")
            elif s.required:
                self.add(path, "missing required field")
            return
        if f.kind == "struct":
            self.struct(path, v, f.hint)
        elif f.kind == "list":
            self.items(path, v, f.item)
        elif f.kind == "map":
            self.map(path, v)
        elif self.scalar(path, v, f.kind):
            bounds = _field_bounds(f) if type(v) is int else None
            if bounds is not None and (why := _out_of_range(v, bounds)) is not None:
                self.add(path, why)
                return
            if _has_rules(s):
                self.rules(path, v, f, parent, position)

    def items(self, path: str, value: Any, item: Any) -> None:
        if not isinstance(value, list):
            self.add(path, f"wrong type: expected a list, got {type(value).__name__}")
            return
        kind = kind_of(item)
        for i, x in enumerate(value):
            if kind == "struct":
                self.struct(f"{path}[{i}]", x, item, i)
            elif x is not None and self.scalar(f"{path}[{i}]", x, kind):
                if type(x) is int and (bounds := _bounds(arrow_type(item))) is not None:
                    why = _out_of_range(x, bounds)
                else:
                    why = surrogate_problem(x) if self.texts and type(x) is str else None
                if why is not None:
                    self.add(f"{path}[{i}]", why)

    def map(self, path: str, value: Any) -> None:
        items = (
            value.items() if isinstance(value, dict) else value if isinstance(value, list) else None
        )
        if items is None:
            self.add(path, f"wrong type: expected a map of strings, got {type(value).__name__}")
            return
        for i, pair in enumerate(items):
            if isinstance(value, list) and not (isinstance(pair, list | tuple) and len(pair) == 2):
                # an Arrow map reads as (key, value) pairs; JSON's `[13]` is no map
                self.add(f"{path}[{i}]", "wrong type: expected a map of strings, got a list")
                return
            k, v = pair
            if not isinstance(k, str) or not isinstance(v, str):
                self.add(f"{path}.{k}", "keys and values must be strings")
            elif self.texts and (why := surrogate_problem(k)):
                self.add(f"{path}.{k}", f"the key: {why}")
            elif self.texts and (why := surrogate_problem(v)):
                self.add(f"{path}.{k}", why)

    def scalar(self, path: str, value: Any, kind: str) -> bool:
        if kind == "time" and self.micros and type(value) is int:
            return True  # an Arrow timestamp read as epoch microseconds
        types, desc = _KINDS[kind]
        if isinstance(value, bool) and kind in ("int", "float"):
            self.add(path, f"wrong type: expected {desc}, got bool")
            return False
        if not isinstance(value, types):
            self.add(path, f"wrong type: expected {desc}, got {type(value).__name__}")
            return False
        if kind == "time" and isinstance(value, str):
            try:
                at = datetime.fromisoformat(value)
            except ValueError:
                self.add(path, f"not an ISO-8601 timestamp: {value!r}")
                return False
            try:  # 9999-12-31T23:59-14:00 is year 10000 in UTC: no reader could hold it
                at.astimezone(timezone.utc) if at.tzinfo else at
            except OverflowError:
                self.add(path, f"outside years 1-9999 in UTC: {value!r}")
                return False
        return True

    def rules(self, path: str, v: Any, f: FieldInfo, parent: dict, position: int | None):
        """The spec's rules on a value of the right type."""
        s = f.spec
        if s.const is not None and v != s.const:
            self.add(path, f"unsupported {label(f)} {v!r} (expected {s.const!r})")
        if s.enum is not None and v not in s.enum:
            self.add(path, f"unknown {label(f)} {v!r} (expected one of {', '.join(s.enum)})")
        if s.json is not None:
            self.json_text(path, v, s.json)
        if s.range is not None:
            self.in_range(path, v, s.range)
        if s.position and position is not None and v != position:
            self.add(
                path, f"{label(f)}es must be 0..n-1 in order: found {v} at position {position}"
            )
        if s.after:
            start, end = parent.get(s.after), v
            if not (type(start) is int and type(end) is int):  # else epoch microseconds
                start, end = _time(start), _time(end)
            if start is not None and end is not None:
                try:
                    if end < start:
                        self.add(path, "ends before it starts")
                except TypeError:
                    self.add(path, "mixes timezone-aware and naive timestamps")

    def json_text(self, path: str, value: str, expected: type) -> None:
        if (why := json_problem(value, expected)) is not None:
            self.add(path, why)

    def in_range(self, path: str, v: float, bounds: tuple[float | None, float | None]) -> None:
        lo, hi = bounds
        if lo is not None and hi is not None:
            if not lo <= v <= hi:
                self.add(path, f"must lie in [{lo}, {hi}], got {v}")
        elif lo is not None and v < lo:
            self.add(path, f"must be >= {lo}, got {v}")
        elif hi is not None and v > hi:
            self.add(path, f"must be <= {hi}, got {v}")


def no_json_constant(name: str) -> Any:
    """Python's reader takes `NaN` and `Infinity`; JSON does not."""
    raise ValueError(f"{name} is not JSON")


def finite_json_float(text: str) -> float:
    """A JSON number as a float; one too large for a float (`1e400`, which Python's reader
    makes infinity) is no JSON value, as `NaN` is not."""
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text} is too large for a number")
    return value


JSON_DEPTH = 512
"""How deep JSON text may nest where a record holds it (`arguments_json`, `state_json`,
any `spec(json=...)` field) and where `import` reads a tool call's arguments: deeper is
refused by every reader alike (`parse_json`). Python's parser recurses once a level, so
what it took depended on how deep the reading call already was: `validate` took 960
levels that `process` refused in its worker. 512 levels parse under the interpreter's
limit of 1000 from any of our callers, and no tool's arguments come near."""


class TooDeep(ValueError):
    """JSON text nested deeper than `JSON_DEPTH`: how deep, at which character."""

    def __init__(self, depth: int, pos: int):
        self.depth, self.pos = depth, pos
        super().__init__(f"nested {depth} levels deep at char {pos}, deeper than can be parsed")

    @classmethod
    def of(cls, text: str) -> TooDeep:
        from .text import deepest

        return cls(*deepest(text))


def parse_json(text: str, **options: Any) -> Any:
    """`json.loads(text, **options)` under the one nesting limit: TooDeep for text nested
    deeper than `JSON_DEPTH` (whether Python's parser could follow it from here or not),
    else what `json.loads` returns or raises. Only text holding more opening brackets
    than the limit is measured (two C counts; then its value, without recursion)."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep.of(text) from None
    except ValueError:  # where the parser gives up on deep invalid text varies: its depth
        if _many_brackets(text) and (deep := TooDeep.of(text)).depth > JSON_DEPTH:
            raise deep from None
        raise
    if (deep := too_deep(text, value)) is not None:
        raise deep
    return value


def too_deep(text: str, value: Any) -> TooDeep | None:
    """TooDeep when `value`, parsed from (or written as) JSON `text`, nests deeper than
    `JSON_DEPTH`, else None."""
    if _many_brackets(text) and nesting(value) > JSON_DEPTH:
        return TooDeep.of(text)
    return None


def _many_brackets(text: str) -> bool:
    """Whether `text` holds more opening brackets than `JSON_DEPTH`: only such text may
    nest deeper."""
    return len(text) > JSON_DEPTH and text.count("[") + text.count("{") > JSON_DEPTH


def nesting(value: Any) -> int:
    """How deep the lists and objects of a parsed JSON value go (0: a scalar), level by
    level: no recursion, whatever the depth."""
    depth, level = 0, [value]
    while level := [x for x in level if isinstance(x, dict | list)]:
        depth += 1
        level = [y for x in level for y in (x.values() if isinstance(x, dict) else x)]
    return depth


def json_problem(value: str, expected: type) -> str | None:
    """What is wrong with `value` as JSON text whose top level is `expected`, or None."""
    try:
        parsed = parse_json(value, parse_constant=no_json_constant)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at char {exc.pos}"
    except ValueError as exc:  # TooDeep too: the record's problem, not the file's
        return f"invalid JSON: {exc}"
    if not isinstance(parsed, expected):
        return f"JSON must be {expected.__name__}, got {type(parsed).__name__}"
    return None


_EXACT = {"str": str, "int": int, "float": float, "bool": bool}


def _has_rules(s: Spec) -> bool:
    return any((s.const, s.enum, s.json, s.range, s.position, s.after))


@functools.cache
def _plan(cls: type) -> tuple[tuple[FieldInfo, type | None, bool], ...]:
    """Per field: the Python type that passes without further rules (or None), and
    whether a null passes. The content hash is left to `validate_dict`."""
    return tuple(
        (
            f,
            None if _has_rules(f.spec) or f.kind == "int" else _EXACT.get(f.kind),
            not (f.spec.required or f.spec.needed_by),
        )
        for f in fields_of(cls)
        if not f.spec.content_hash
    )


@functools.cache
def _text_fields(cls: type) -> tuple[str, ...]:
    """The string fields of `cls`: where `texts` looks for a lone surrogate."""
    return tuple(f.name for f in fields_of(cls) if f.kind == "str")


@functools.cache
def _field_bounds(f: FieldInfo) -> tuple[str, int, int] | None:
    """The integers field `f`'s column can store (`_bounds` of its Arrow type)."""
    return _bounds(f.spec.arrow or arrow_type(f.hint))


@functools.cache
def _declared_plan(cls: type) -> tuple[tuple[FieldInfo, type | None, bool], ...]:
    """`_plan` less what a column of the declared Arrow type already guarantees (each
    value's type and so an integer's range, the field names, strings that are UTF-8):
    the null checks of required fields, the rules, and the structs and lists that hold
    any. A turn's 30-odd fields come down to 15."""

    def holds_checks(f: FieldInfo) -> bool:
        if f.kind == "struct":
            return bool(_declared_plan(f.hint))
        return f.kind == "list" and kind_of(f.item) == "struct" and bool(_declared_plan(f.item))

    return tuple(
        (f, _EXACT.get(f.kind) if exact is None and not _has_rules(f.spec) else exact, none)
        for f, exact, none in _plan(cls)
        if not none or _has_rules(f.spec) or holds_checks(f)
    )


def _time(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


def validate_dict(
    d: Any,
    where: str = "record",
    check_id: bool = True,
    root: type = Trajectory,
    micros: bool = False,
    declared: bool = False,
    texts: bool = True,
) -> list[Problem]:
    """All problems of one record of `root`; an empty list means valid. `micros`: an int
    is a timestamp too (epoch microseconds, as `store.scan_file(micros=True)` reads an
    Arrow timestamp); elsewhere an int timestamp is an error (epoch seconds or millis?).
    `declared`: `d` is a row of a table of the declared Arrow schema (`store.declared`),
    so the types and names are known to be right and only the rules are checked.
    `texts`: look for strings that UTF-8 cannot store (a lone surrogate, in a string
    field, a list item, a map's key or value; a field that is not declared is a problem
    already). A reader that knows there is none passes False: a row read from
    Arrow (its strings are UTF-8), a JSON line with no `\\ud800`-`\\udfff` escape
    (`store.ESCAPED`). Every integer is checked against its column's range always (a
    declared row's column holds it already)."""
    if not isinstance(d, dict):
        return [Problem(where, "<record>", f"expected an object, got {a_json(d)}")]
    id_field = next((f.name for f in fields_of(root) if f.spec.content_hash), None)
    tid = d.get(id_field) if id_field else None
    record = f"{where} ({tid})" if isinstance(tid, str) and tid else where
    c = _Checker(record, micros, declared, texts and not declared)
    c.struct("", d, root)
    if id_field and tid is not None:  # a reader that recomputes ids still reads this one
        c.scalar(id_field, tid, "str")  # (`process` redacts it as `raw_trajectory_id`)
    if id_field and check_id and not c.problems:
        if not isinstance(tid, str) or not tid:
            c.add(id_field, "missing required field")
        elif tid != trajectory_id(d):
            c.add(id_field, f"does not match the content hash ({trajectory_id(d)})")
    return c.problems


def validator_for(root: type) -> Callable[..., list[Problem]]:
    """`validate_dict` for records of another root class (a variant of `Trajectory`)."""
    fields_of(root)  # an undeclarable type fails here, not on the first record
    return functools.partial(validate_dict, root=root)


def validate(record: Any, where: str = "record") -> None:
    """Raise ValidationError unless `record` (Trajectory or dict) is valid."""
    d = record if isinstance(record, dict) else record.to_dict()
    problems = validate_dict(d, where)
    if problems:
        raise ValidationError(problems)


# -- a batch of the declared schema, column by column -------------------------------


def suspects(batch: pa.RecordBatch, root: type = Trajectory) -> np.ndarray:
    """Per row of `batch` (a table of the declared Arrow schema, `store.declared`, its
    timestamps as read, or as epoch microseconds): whether it may break a rule that
    `validate_dict(declared=True)` checks. A row not flagged has no problem; a flagged
    one is walked record by record, which names each problem (so this may flag more
    than the walk finds, never less).

    Arrow compute on the columns instead of the walk on every record: the walk cost ~38
    us a trajectory (16 fields a turn), nearly all of it spent on valid records.
    """
    n = batch.num_rows
    bad = np.zeros(n, bool)
    columns = dict(zip(batch.schema.names, batch.columns, strict=True))
    _struct_suspects(root, columns.get, np.ones(n, bool), np.arange(n), None, bad)
    return bad


def _mask(arr: pa.Array) -> np.ndarray:
    """A boolean array as numpy, null as False."""
    import pyarrow.compute as pc  # on first use: its import makes ~0.1 s of wrappers

    return pc.fill_null(arr, False).to_numpy(zero_copy_only=False)


def _parents(arr: pa.Array) -> np.ndarray:
    """Per element of list array `arr`, the index of its list."""
    import pyarrow.compute as pc

    return pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)


def _struct_suspects(
    cls: type,
    child: Callable[[str], pa.Array | None],
    present: np.ndarray,
    rows: np.ndarray,
    position: np.ndarray | None,
    bad: np.ndarray,
) -> None:
    """Flag in `bad` the records (`rows`, per element) of the present elements of a
    struct array of `cls` (fields by `child`) that break a rule; `position`: each
    element's index in its list, for `Spec.position`."""
    for f, _, may_be_none in _declared_plan(cls):
        arr = child(f.name)
        if arr is None:  # not a column here: the walk decides
            bad[rows[present]] = True
            continue
        valid = _mask(arr.is_valid())
        s = f.spec
        if not may_be_none:
            missing = present & ~valid
            if s.needed_by and not s.required:
                other = child(s.needed_by)
                missing &= _mask(other.is_valid()) if other is not None else False
            bad[rows[missing]] = True
        here = present & valid
        if not here.any():
            continue
        if f.kind == "struct":
            _struct_suspects(f.hint, arr.field, here, rows, None, bad)
        elif f.kind == "list" and kind_of(f.item) == "struct":
            flat = arr.flatten()  # null lists hold no elements
            parent = _parents(arr)
            at = here[parent]
            null_items = at & ~_mask(flat.is_valid())  # the walk: "expected an object"
            bad[rows[parent[null_items]]] = True
            pos = np.arange(len(parent)) - np.searchsorted(parent, parent)
            _struct_suspects(f.item, flat.field, at & ~null_items, rows[parent], pos, bad)
        elif f.kind not in ("list", "map") and _has_rules(s):  # the walk's rules: scalars
            bad[rows[here & _breaks(arr, f, child, position)]] = True


def _breaks(
    arr: pa.Array, f: FieldInfo, child: Callable[[str], pa.Array | None], position
) -> np.ndarray:
    """Per value of `arr` (those that are null included, as False or True): whether it
    may break a rule of `f`'s spec."""
    import pyarrow.compute as pc

    s, out = f.spec, np.zeros(len(arr), bool)
    if s.const is not None:
        out |= _mask(pc.not_equal(arr, pa.scalar(s.const, arr.type)))
    if s.enum is not None:
        out |= ~_mask(pc.is_in(arr, value_set=pa.array(s.enum, arr.type)))
    if s.range is not None:
        lo, hi = s.range
        v = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        with np.errstate(invalid="ignore"):  # NaN breaks both bounds, as in the walk
            ok = np.ones(len(v), bool) if lo is None else v >= lo
            ok &= True if hi is None else v <= hi
        out |= ~ok
    if s.position and position is not None:
        out |= arr.to_numpy(zero_copy_only=False) != position
    if s.after:
        start = child(s.after)
        try:
            out |= _mask(pc.less(arr, start)) if start is not None else False
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # types apart: the walk tells
            out[:] = True
    if s.json is not None:
        good: set[str] = set()  # tool arguments repeat within a batch
        for i, text in enumerate(arr.to_pylist()):
            if text is None or text in good:
                continue
            if json_problem(text, s.json) is None:
                good.add(text)
            else:
                out[i] = True
    return out
