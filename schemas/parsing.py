"""Strict parsing of YAML/JSON mappings into config dataclasses, with located errors.

Config classes are plain frozen dataclasses decorated with `@configclass`: pydantic
validates a mapping against their type hints (`Annotated[int, Field(ge=1)]` for ranges)
and refuses unknown keys. Every problem carries the key path and, for YAML files, the
line, so `jobs submit` can say `job.yaml:12: tasks[0].actions[1]: unknown key 'args'`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .text import BadText, not_text, utf8

T = TypeVar("T")
Path_ = tuple[str | int, ...]


def configclass(cls: type[T]) -> type[T]:
    """A frozen dataclass whose mappings are validated strictly (unknown keys refused;
    `.nan` and `.inf` are no setting: `step_timeout: .nan` was told `less than or equal to
    3600`, and an infinite wait overflows the clock)."""
    from pydantic import ConfigDict

    cls.__pydantic_config__ = ConfigDict(  # type: ignore[attr-defined]
        extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
    )
    return dataclass(frozen=True)(cls)


def dotted(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<top>"


@dataclass(frozen=True)
class ConfigProblem:
    path: Path_
    message: str
    line: int | None = None

    def where(self, source: str | None = None) -> str:
        loc = f"{source}:{self.line}" if source and self.line else (source or "")
        return f"{loc}: {dotted(self.path)}" if loc else dotted(self.path)

    def __str__(self) -> str:
        return f"{dotted(self.path)}: {self.message}"


class ConfigError(ValueError):
    """One or more problems in a config mapping; str() lists them one per line."""

    def __init__(self, problems: Iterable[ConfigProblem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(f"{p.where(self.source)}: {p.message}" for p in self.problems)

    def one_line(self) -> str:
        """The problems joined by `; ` (a failure reason, a warning line)."""
        return "; ".join(ln.strip() for ln in self.render().splitlines() if ln.strip())

    def located(self, lines: LineMap | None, source: str | None, prefix: Path_ = ()) -> ConfigError:
        """The problems under `prefix`, at their lines in `lines` (without a line map, a
        problem keeps the line it has), in `source` (or the one they had)."""
        probs = [
            dataclasses.replace(
                p, path=prefix + p.path, line=lines.line(prefix + p.path) if lines else p.line
            )
            for p in self.problems
        ]
        return ConfigError(probs, source or self.source)


# -- YAML with line numbers -----------------------------------------------------------
class LineMap:
    """Key path -> 1-based line of a YAML document (the nearest parent for unknown paths)."""

    def __init__(self, lines: dict[Path_, int] | None = None):
        self.lines = lines or {}

    def line(self, path: Path_) -> int | None:
        path = tuple(path)
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    @classmethod
    def of(cls, text: str) -> LineMap:
        try:
            node = yaml.compose(text, Loader=BoundedLoader)
        except yaml.YAMLError:
            return cls()
        lines: dict[Path_, int] = {}
        inside: set[int] = set()  # nodes being walked: an alias may close a cycle

        def walk(n, path: Path_) -> None:
            if n is None or id(n) in inside:
                return
            lines[path] = n.start_mark.line + 1
            inside.add(id(n))
            if isinstance(n, yaml.MappingNode):
                for k, v in n.value:
                    key = k.value
                    lines[(*path, key)] = k.start_mark.line + 1
                    walk(v, (*path, key))
                    lines[(*path, key)] = k.start_mark.line + 1
            elif isinstance(n, yaml.SequenceNode):
                for i, v in enumerate(n.value):
                    walk(v, (*path, i))
            inside.discard(id(n))

        walk(node, ())
        return cls(lines)


MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key given twice in one mapping: PyYAML would keep the last one silently (a second
    `tasks:` block would drop the first)."""

    def __init__(self, key: Any, first_line: int, mapping: yaml.Node, key_node: yaml.Node):
        super().__init__(
            "while constructing a mapping",
            mapping.start_mark,
            f"duplicate key {key!r} (first at line {first_line})",
            key_node.start_mark,
        )
        self.mapping_mark = mapping.start_mark


YAML_MAX_DEPTH = 100
"""How deep a YAML document the project reads may nest, aliases followed (a job file
needs under 10 levels, a tool call's arguments a few more). Deeper, the composer (and
every walk of the data after it) would recurse until RecursionError."""

YAML_ALIAS_VALUES = 100_000
"""How many values the aliases of one YAML document may bring in, counted as the data
they stand for once expanded (`*defaults` of 20 values, used 50 times: 1,000)."""


class YAMLBoundError(yaml.composer.ComposerError):
    """A YAML document deeper than `YAML_MAX_DEPTH`, or whose aliases expand it past
    `YAML_ALIAS_VALUES` (a `yaml.YAMLError`, at the node or alias that crossed it)."""


_CORE_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_CORE_FLOAT = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_CORE_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False,
              "FALSE": False}  # fmt: skip
_CORE_NULL = re.compile(r"~|null|Null|NULL|")
_CORE_SCALARS = (
    ("null", _CORE_NULL, ["~", "n", "N", ""]),
    ("bool", re.compile("|".join(_CORE_BOOL)), list("tTfF")),
    ("int", _CORE_INT, list("-+0123456789")),
    ("float", _CORE_FLOAT, list("-+.0123456789")),
)
"""The plain scalars YAML 1.2's core schema reads as other than text: (tag, pattern,
first characters). PyYAML's `SafeLoader` resolves YAML 1.1's, where `yes`, `no`, `on`,
`off` (and `Yes`, `OFF`...) are booleans, `2024-01-01` a date, `9:30` the number 570
(base 60), `1_000` 1000, `00123` the octal 83 and `=` a tag no safe loader builds: a job
file's tool call `{yes: 1}` went to the tool as `{"true": 1}`, `{time: 9:30}` as
`{"time": 570}`, and a date, or a key `on` beside text keys, was a traceback. Read here,
those are the text as written; `00123` is 123 and `0o17` 15."""


def _not_of_kind(node: yaml.Node, problem: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


class CoreSchemaLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that reads plain scalars as YAML 1.2's core schema does
    (`_CORE_SCALARS`; the `<<` merge kept): null, true/false, integers (digits, 0o octal,
    0x hex), floats (`.inf`, `.nan`), and every other plain scalar text. An explicit
    `!!int`, `!!float` or `!!bool` takes the same forms, and one that is not of its kind
    is a `yaml.constructor.ConstructorError` at its line (`!!bool maybe` was a KeyError).
    `!!binary`, `!!timestamp` and `!!set` still build bytes, dates and sets: what reads
    the data says where they do not belong (a tool call's arguments are JSON). PyYAML has
    no YAML 1.2 mode; its resolvers are the documented way to choose the scalars, and
    keep the line maps and bounds every reader here relies on (ruamel.yaml would replace
    them all)."""

    yaml_implicit_resolvers: dict = {}  # this class's own: yaml.SafeLoader keeps YAML 1.1

    def construct_yaml_int(self, node):
        value = self.construct_scalar(node)
        if not _CORE_INT.fullmatch(value):
            raise _not_of_kind(node, f"!!int {value!r} is no integer (digits, 0o octal, 0x hex)")
        try:
            if value.startswith(("0o", "0x")):
                return int(value[2:], 8 if value[1] == "o" else 16)
            return int(value, 10)  # `00123` is 123, as in YAML 1.2 (1.1: the octal 83)
        except ValueError:  # past the digits Python converts (`sys.set_int_max_str_digits`)
            problem = f"an integer of {len(value)} digits, more than Python reads: quote it"
            raise _not_of_kind(node, problem) from None

    def construct_yaml_float(self, node):
        value = self.construct_scalar(node)
        if _CORE_INT.fullmatch(value):
            return float(self.construct_yaml_int(node))
        if not _CORE_FLOAT.fullmatch(value):
            raise _not_of_kind(node, f"!!float {value!r} is no number")
        return super().construct_yaml_float(node)

    def construct_yaml_bool(self, node):
        value = self.construct_scalar(node)
        if value not in _CORE_BOOL:
            raise _not_of_kind(node, f"!!bool {value!r} is no boolean (true or false)")
        return _CORE_BOOL[value]


for _tag, _pattern, _first in _CORE_SCALARS:
    CoreSchemaLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(rf"(?:{_pattern.pattern})\Z"), _first
    )
CoreSchemaLoader.add_implicit_resolver(MERGE_TAG, re.compile(r"<<\Z"), ["<"])
for _tag, _construct in (
    ("int", CoreSchemaLoader.construct_yaml_int),
    ("float", CoreSchemaLoader.construct_yaml_float),
    ("bool", CoreSchemaLoader.construct_yaml_bool),
):
    CoreSchemaLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _construct)
# `<<` where it merges nothing (a value: `[<<]`) is the text (PyYAML: "could not determine
# a constructor"); as a key, `flatten_mapping` merges it before anything constructs it
CoreSchemaLoader.add_constructor(MERGE_TAG, CoreSchemaLoader.construct_yaml_str)
del _tag, _pattern, _first, _construct


class BoundedLoader(CoreSchemaLoader):
    """`CoreSchemaLoader` (YAML 1.2's scalars) that refuses documents too deep or too big
    once their aliases are expanded, while composing (`YAMLBoundError`).

    Anchors and aliases, to mappings and lists too, are what a job file uses to share a
    block among its tasks (`set_env: &git_env {...}` in examples/mcp-git.yaml, a `<<:
    *defaults` merge), so they are kept; but PyYAML expands nothing itself and bounds
    nothing, and each walk of the data afterwards (the line map, the config checks,
    storing the job) goes through every alias: nine aliases of nine aliases of ... (a
    "billion laughs") is a few hundred bytes that grew past 2.5 GB within 30 s. So every
    node is counted as the values it stands for, an alias as all of its anchor's, and a
    document whose aliases bring in more than `YAML_ALIAS_VALUES` values, or that nests
    deeper than `YAML_MAX_DEPTH` levels (aliases followed), is refused at that alias or
    node, with its line. An alias to a collection still being composed (`a: &x [*x]`, a
    cycle) counts one value: the walks stop at a cycle."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0  # of the node being composed (the document's top is 1)
        self._reach = 0  # the deepest level composed under it so far, aliases followed
        self._values = 0  # values composed so far, aliases expanded
        self._brought = 0  # of those, what aliases brought in
        self._extent: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        depth = self._depth + 1
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            values, height = self._extent.get(id(node), (1, 1))  # being composed: a cycle
            self._values += values
            self._brought += values
            self._reach = max(self._reach, depth + height - 1)
            if self._brought > YAML_ALIAS_VALUES:
                why = (
                    f"aliases expand the document past {YAML_ALIAS_VALUES} values (aliases "
                    "of aliases: a YAML bomb?): write the values out, or share less"
                )
                raise YAMLBoundError(None, None, why, mark)
            if self._reach > YAML_MAX_DEPTH:
                why = f"nested deeper than {YAML_MAX_DEPTH} levels, with its aliases followed"
                raise YAMLBoundError(None, None, why, mark)
            return node
        if depth > YAML_MAX_DEPTH:
            raise YAMLBoundError(None, None, f"nested deeper than {YAML_MAX_DEPTH} levels", mark)
        start, reach = self._values, self._reach
        self._depth, self._reach = depth, depth
        node = super().compose_node(parent, index)
        self._values += 1
        self._extent[id(node)] = (self._values - start, self._reach - depth + 1)
        self._depth, self._reach = depth - 1, max(reach, self._reach)
        return node


class UniqueKeyLoader(BoundedLoader):
    """`BoundedLoader` that refuses duplicate keys at any depth (`DuplicateKeyError`, a
    `yaml.YAMLError`); keys a `<<` merge brings in may still be overridden."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:  # an unhashable key: the constructor says so below
                    continue
                if seen is not None:
                    raise DuplicateKeyError(key, seen, node, key_node)
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with YAML 1.2's core schema for scalars (`CoreSchemaLoader`: `yes`,
    `on`, `2024-01-01`, `9:30` are text) that refuses duplicate keys, and documents too
    deep or too big with their aliases expanded (`BoundedLoader`): every YAML the project
    reads."""
    return yaml.load(text, Loader=UniqueKeyLoader)


def _mapping_path(text: str, line: int, column: int) -> Path_:
    """The key path of the mapping that starts at (line, column), 0-based, or ()."""
    node = yaml.compose(text, Loader=BoundedLoader)
    seen: set[int] = set()  # an alias may close a cycle

    def walk(n, path: Path_) -> Path_ | None:
        if id(n) in seen:
            return None
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            if (n.start_mark.line, n.start_mark.column) == (line, column):
                return path
            items = [(k.value, v) for k, v in n.value]
        elif isinstance(n, yaml.SequenceNode):
            items = list(enumerate(n.value))
        else:
            return None
        for key, v in items:
            if (found := walk(v, (*path, key))) is not None:
                return found
        return None

    return walk(node, ()) or ()


def read_yaml_text(path: str | Path) -> str:
    """A YAML file's text, read strictly as UTF-8 (a leading byte order mark kept, which
    YAML passes over); `text.BadText` at the line and column of the first byte that is
    not UTF-8, or for a file that is no text at all (compressed, UTF-16)."""
    data = Path(path).read_bytes()
    if (why := not_text(data, path)) is not None:
        raise BadText(why, 0, 0)
    return utf8(data, path)


def load_yaml(path: str | Path) -> tuple[Any, LineMap]:
    """A YAML file's data and its line map; a syntax error, a duplicate key, bytes that
    are not UTF-8, nesting too deep or aliases that expand too far (`BoundedLoader`) are a
    ConfigError with its line."""
    try:
        text = read_yaml_text(path)
    except BadText as exc:
        raise ConfigError([ConfigProblem((), exc.message, exc.line or None)], str(path)) from None
    try:
        data = safe_load(text)
    except DuplicateKeyError as exc:
        at = exc.mapping_mark
        problem = ConfigProblem(
            _mapping_path(text, at.line, at.column), str(exc.problem), exc.problem_mark.line + 1
        )
        raise ConfigError([problem], str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        msg = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([ConfigProblem((), f"invalid YAML: {msg}", line)], str(path)) from exc
    return data, LineMap.of(text)


# -- validation ----------------------------------------------------------------------
@functools.cache
def _adapter(cls: type):
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


_MESSAGES = {
    "unexpected_keyword_argument": "unknown key",
    "missing_argument": "missing required key",
    "missing": "missing required key",
    "extra_forbidden": "unknown key",
}


def parse(cls: type[T], data: Any, path: Path_ = ()) -> T:
    """`data` (a mapping, or None for all defaults) as an instance of config class `cls`."""
    from pydantic import ValidationError

    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem(path, f"expected a mapping, got {type(data).__name__}")])
    try:
        text = json.dumps(data, allow_nan=True)
    except (TypeError, ValueError):  # not JSON's (a `!!timestamp` date): pydantic's own rules
        text = None
    if text is None:  # `!!binary` bytes: pydantic's Python rules decode them as text
        from .actions import json_problem

        if (found := json_problem(data, only=(bytes, bytearray))) is not None:
            raise ConfigError([ConfigProblem(path + found[0], found[1])])
    try:
        if text is None:
            return _adapter(cls).validate_python(dict(data))
        # strict as JSON's types: `warm: true` is no count, `pids_limit: "64"` no number,
        # `read_only: "no"` no boolean (each was taken as a Python cast would: 1, 64,
        # False); a list is a tuple, an integer a float, as JSON has no others
        return _adapter(cls).validate_json(text, strict=True)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            loc = tuple(x for x in e["loc"] if x not in ("function-after", "function-before"))
            msg = _MESSAGES.get(e["type"], e["msg"])
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            problems.append(ConfigProblem(path + loc, msg))
        raise ConfigError(problems) from None


def json_schema(cls: type) -> dict[str, Any]:
    """JSON Schema of a config class (field docstrings become descriptions)."""
    return _adapter(cls).json_schema()


def to_mapping(obj: Any) -> Any:
    """A config instance back to plain data (tuples as lists), for storage and display."""
    return _adapter(type(obj)).dump_python(obj, mode="json")
