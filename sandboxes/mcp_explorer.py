"""The MCP kind's explorer: collects without a model, from the tools' JSON Schemas.

Each turn it picks a tool (the least called first, seeded draws break ties) and builds
arguments that validate against the tool's input schema: enums, consts, defaults,
bounds, `multipleOf`, formats, `pattern` (strings drawn from the regex by `rstr`, seeded),
`$ref`, `anyOf`/`oneOf`, arrays (`uniqueItems`) and nested objects (`minProperties`). A
tool no arguments could be made for is set aside with why: one warning per process, and
the reasoning of the episode's next turn. Strings come from
what the episode has shown so far where the schema allows (paths and URLs from the
initial state and earlier observations, names and values from JSON answers, examples
quoted in the property's description), so later calls act on real state: a file
written is read back, an entity created is opened. Destructive tools are skipped
unless `allow_destructive` (per the MCP spec, a tool is destructive unless it says
`readOnlyHint` or `destructiveHint: false`).

A small generator rather than hypothesis-jsonschema: that package's last release fails
with the installed Hypothesis (`'many' object has no attribute 'more'`), built one
strategy in 1.5 s, and Hypothesis has no public seeded draw outside a test; its values
are also meant to break code, while an explorer needs plausible ones.

An explorer is a policy kept beside its kind; it builds actions with the one tool-call
constructor every layer shares, `schemas.actions.tool_call`.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, ClassVar

from pydantic import Field
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import configclass

from .base import Explorer, SandboxConfigError, ToolSpec
from .mcp_client import same, scalars

ATTEMPTS = 8
"""Generated argument sets tried per tool before the tool is set aside."""
WORDS = (
    "alpha", "beta", "gamma", "delta", "notes", "report", "config", "index", "readme", "draft",
    "summary", "archive", "project", "task", "issue", "release", "branch", "commit", "search",
    "data", "example", "test",
)  # fmt: skip
"""Fallback words when the episode has shown none yet."""
PATH_RE = re.compile(r"(?<![\w:/.])/(?:[\w.@+-]+/?)+")
URL_RE = re.compile(r"\b(?:https?|doc|file)://[^\s\"'<>()\[\]]+")
WORD_RE = re.compile(r"[A-Za-z][\w-]{2,30}")
QUOTED_RE = re.compile(r"'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"|`([^`\n]{1,60})`")
LISTING_RE = re.compile(r"^\s*(?:\[([A-Z]+)\]\s*)?([\w.@+-]{1,64})(/?)\s*$")
"""A line of a listing: a bare name, maybe after a tag such as [FILE] or [DIR]."""
PATH_HINTS = ("path", "file", "dir", "folder", "source", "destination", "root", "cwd")
URL_HINTS = ("url", "uri", "href", "link")
TEXT_FORMATS = {"uri", "url", "iri", "uri-reference"}
PATTERN_DRAWS = 8
"""Strings drawn for a `pattern` (`rstr`): the shortest that fits is taken (a `+` repeats
up to 100 times)."""
MULTIPLES = 1000
"""Multiples of a `multipleOf` looked at from the lower bound on."""

log = logging.getLogger(__name__)


class Unsatisfiable(ValueError):
    """A schema no value fits (a minimum over its maximum, more unique items than its
    items have values): its tool is set aside saying so, not tried again and again."""


_WARNED: set[tuple[str, str]] = set()
"""(tool, input schema) already said to be set aside: once per process, not per episode
(a worker's explorer job warned as often as it ran episodes)."""
_WARNED_LOCK = threading.Lock()


def _warn_once(tool: ToolSpec, reason: str) -> None:
    key = (tool.name, json.dumps(tool.input_schema, sort_keys=True, default=str))
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    log.warning("explorer: tool %s set aside: %s", tool.name, reason)


@configclass
class ExplorerConfig:
    """The MCP schema-driven explorer."""

    allow_destructive: bool = False
    """Also call tools that may destroy state (fine on a fresh per-episode workdir)."""
    exclude: tuple[str, ...] = ()
    """Tools never called (e.g. ones that wait for minutes or need a sampling client)."""
    steps: Annotated[int, Field(ge=1)] | None = None
    """Calls per episode (None: until the job's max_turns)."""
    seeds: tuple[str, ...] = ()
    """Values offered to string arguments from the start (URLs, queries, names)."""


def is_destructive(tool: ToolSpec) -> bool:
    a = tool.annotations or {}
    return not a.get("readOnlyHint", False) and a.get("destructiveHint", True) is not False


class Pool:
    """Values the episode has shown: candidates for later arguments."""

    def __init__(self, seeds: tuple[str, ...] = ()):
        self.paths: list[str] = []
        self.dirs: list[str] = []
        """Paths known to be directories (listed ones, and names tagged [DIR] or ending /)."""
        self.urls: list[str] = []
        self.strings: list[str] = []
        self.words: list[str] = []
        for s in seeds:
            self.observe(s)
            self._add(self.strings, s)

    @staticmethod
    def _add(bucket: list[str], value: str) -> None:
        if value and value not in bucket and len(bucket) < 500:
            bucket.append(value)

    def observe(self, text: str, base: str | None = None) -> None:
        """Paths, URLs, words and JSON strings of a text; `base` (the path the call was
        about) joins each listed name into a path under it."""
        for m in URL_RE.findall(text):
            self._add(self.urls, m.rstrip(".,;:"))
        for m in PATH_RE.findall(URL_RE.sub(" ", text)):
            self._add(self.paths, m.rstrip("/.,;:") or "/")
        for m in WORD_RE.findall(text):
            self._add(self.words, m)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        for s in _strings(value):
            self._add(self.strings, s)
        if base:
            listed = [m for line in text.splitlines()[:200] if (m := LISTING_RE.match(line))]
            if listed:
                self._add(self.dirs, base)
            for m in listed:
                tag, name, slash = m.groups()
                if name not in (".", ".."):
                    path = f"{base.rstrip('/')}/{name}"
                    self._add(self.paths, path)
                    if tag == "DIR" or slash:
                        self._add(self.dirs, path)

    def observe_arguments(self, arguments: dict[str, Any]) -> None:
        for s in _strings(arguments):
            self.observe(s)
            self._add(self.strings, s)


def _strings(value: Any):
    return (x for x in scalars(value) if isinstance(x, str))


class Generator:
    """Arguments for one input schema, from a seeded RNG and the pool."""

    def __init__(self, rng: random.Random, pool: Pool, read_only: bool):
        self.rng, self.pool, self.read_only = rng, pool, read_only
        self.new_files = 0

    def arguments(self, schema: dict[str, Any]) -> Any:
        return self.value(schema, "", schema, 0)

    def value(self, s: dict[str, Any], name: str, root: dict[str, Any], depth: int) -> Any:
        rng = self.rng
        if "$ref" in s:
            s = _resolve(s["$ref"], root)
        if "const" in s:
            return s["const"]
        if "enum" in s:
            return rng.choice(s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s:
                branches = [b for b in s[key] if b.get("type") != "null"] or s[key]
                return self.value({**_without(s, key), **rng.choice(branches)}, name, root, depth)
        if "allOf" in s:
            merged = _without(s, "allOf")
            for b in s["allOf"]:
                merged = _merge(merged, _resolve(b["$ref"], root) if "$ref" in b else b)
            return self.value(merged, name, root, depth)
        if "default" in s and rng.random() < 0.3:
            return s["default"]
        if s.get("examples") and rng.random() < 0.5:
            return rng.choice(s["examples"])
        t = s.get("type")
        if isinstance(t, list):
            t = rng.choice([x for x in t if x != "null"] or t)
        if t is None:
            t = "object" if "properties" in s else "string"
        if t == "object":
            return self.obj(s, root, depth)
        if t == "array":
            return self.array(s, name, root, depth)
        if t in ("integer", "number"):
            return self.number(s, t, name)
        if t == "boolean":
            return rng.random() < 0.5
        if t == "null":
            return None
        return self.string(s, name)

    def obj(self, s: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
        """The required properties, some others, and as many more as `minProperties`
        asks (an object of none required and `minProperties: 2` was made one time in
        two), at most `maxProperties`."""
        props = s.get("properties") or {}
        required = set(s.get("required") or ())
        lo, hi = int(s.get("minProperties", 0)), s.get("maxProperties")
        if hi is not None and lo > hi:
            raise Unsatisfiable(f"minProperties {lo} > maxProperties {hi}")
        out = {}
        for key, sub in props.items():
            if key in required or (depth < 3 and self.rng.random() < 0.3):
                out[key] = self.value(sub if isinstance(sub, dict) else {}, key, root, depth + 1)
        extra = s.get("additionalProperties", True)
        free = extra if isinstance(extra, dict) else {"type": "string"}
        for key in sorted(required - out.keys()):  # required, but not among the properties
            out[key] = self.value(free, key, root, depth + 1)
        if hi is not None and len(out) > hi:  # the required first, then what was drawn
            keep = sorted(out, key=lambda k: k not in required)[: max(int(hi), len(required))]
            out = {k: out[k] for k in out if k in keep}
        if len(out) < lo:  # more: the other properties, then new names where allowed
            more = [k for k in props if k not in out]
            self.rng.shuffle(more)
            if extra is not False and not s.get("patternProperties"):
                more += [w for w in WORDS if w not in props]
            for key in more[: lo - len(out)]:
                sub = props.get(key, free)
                out[key] = self.value(sub if isinstance(sub, dict) else {}, key, root, depth + 1)
        if len(out) < lo:
            raise Unsatisfiable(f"minProperties {lo}, but it takes only {len(out)} properties")
        return out

    def array(self, s: dict[str, Any], name: str, root: dict[str, Any], depth: int) -> list:
        """`minItems` to `maxItems` items; with `uniqueItems`, at most as many as its items
        have values (3 unique booleans cannot be: said, rather than tried 8 times)."""
        lo = int(s.get("minItems", 0))
        hi = int(s.get("maxItems", lo + 2))
        if lo > hi:
            raise Unsatisfiable(f"{_where(name)}: minItems {lo} > maxItems {hi}")
        n = self.rng.randint(max(lo, min(1, hi)), max(lo, min(hi, lo + 2)))
        items = s.get("items") if isinstance(s.get("items"), dict) else {}
        unique = bool(s.get("uniqueItems"))
        values = _values(items) if unique else None
        if values is not None:
            if lo > len(values):
                raise Unsatisfiable(
                    f"{_where(name)}: uniqueItems with minItems {lo}, but its items take "
                    f"only {len(values)} values ({', '.join(json.dumps(v) for v in values)})"
                )
            return self.rng.sample(values, min(n, len(values)))
        out: list = []
        for _ in range(n * 3):
            if len(out) == n:
                break
            v = self.value(items, name, root, depth + 1)
            if not (unique and any(same(v, x) for x in out)):
                out.append(v)
        return out

    def number(self, s: dict[str, Any], t: str, name: str = "") -> int | float:
        """A value within the bounds, near the lower one (big values mean slow calls), a
        multiple of `multipleOf` (any value was drawn: a multiple of 25 from 1 up was
        never made). Bounds no value meets raise `Unsatisfiable`, naming them."""
        step = 1 if t == "integer" else 0.01
        lo, hi = s.get("minimum"), s.get("maximum")
        xlo, xhi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        if xlo is True:  # draft 4: a flag on minimum
            lo, xlo = None, lo
        if xhi is True:
            hi, xhi = None, hi
        xlo = xlo if _is_number(xlo) else None
        xhi = xhi if _is_number(xhi) else None
        m = s.get("multipleOf") if _is_number(s.get("multipleOf")) else None
        m = m if m is not None and m > 0 else None

        def fits(v: float) -> bool:
            return (
                (lo is None or v >= lo) and (hi is None or v <= hi)
                and (xlo is None or v > xlo) and (xhi is None or v < xhi)
                and (m is None or _multiple(v, m))
                and (t != "integer" or float(v).is_integer())
            )  # fmt: skip

        lows = [x for x in (lo, None if xlo is None else xlo + step) if x is not None]
        highs = [x for x in (hi, None if xhi is None else xhi - step) if x is not None]
        low, high = max(lows, default=None), min(highs, default=None)
        bounds = ", ".join(
            f"{k} {s[k]}" for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
            if _is_number(s.get(k))
        )  # fmt: skip
        if low is not None and high is not None and low > high:
            raise Unsatisfiable(f"{_where(name)}: no {t} fits {bounds}")
        start = low if low is not None else (0 if high is None else min(0, high - 10))
        end = start + 10 if high is None else min(high, start + 10)
        if m is not None:
            k = math.ceil(start / m)
            last = math.floor(end / m) if high is None else math.floor(high / m)
            near = [v for i in range(k, min(last, k + MULTIPLES) + 1) if fits(v := _times(i, m, t))]
            if not near and high is None:  # none in the window: the next ones up
                near = [v for i in range(k, k + MULTIPLES) if fits(v := _times(i, m, t))][:1]
            if not near:
                raise Unsatisfiable(f"{_where(name)}: no multiple of {m} fits {bounds}")
            return self.rng.choice(near[:11])
        if t == "integer":
            a, b = math.ceil(start), math.floor(end)
            if high is not None and a > math.floor(high):
                raise Unsatisfiable(f"{_where(name)}: no integer fits {bounds}")
            return self.rng.randint(a, max(a, b))
        return round(self.rng.uniform(start, max(start, end)), 2)

    def string(self, s: dict[str, Any], name: str) -> str:
        rng, pool, low = self.rng, self.pool, name.lower()
        desc = s.get("description") or ""
        fmt = s.get("format")
        quoted = [next(g for g in m if g) for m in QUOTED_RE.findall(desc)]
        if fmt in TEXT_FORMATS or any(h in low for h in URL_HINTS):
            value = rng.choice(pool.urls) if pool.urls else "http://127.0.0.1/"
        elif fmt == "date-time":
            value = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z"
        elif fmt == "date":
            value = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        elif fmt == "email":
            value = f"{rng.choice(WORDS)}@example.com"
        elif fmt == "uuid":
            value = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        elif "HH:MM" in desc:
            value = f"{rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}"
        elif quoted and rng.random() < 0.7:
            value = rng.choice(quoted)
        elif any(h in low for h in PATH_HINTS):
            value = self.path()
        elif pool.strings and rng.random() < 0.5:
            value = rng.choice(pool.strings)
        else:
            words = pool.words or list(WORDS)
            value = " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        return _fit(value, s, rng, pool, name)

    def path(self) -> str:
        paths = self.pool.paths
        if paths and (self.read_only or self.rng.random() < 0.6):
            return self.rng.choice(paths)
        dirs = self.pool.dirs or [p for p in paths if "." not in p.rsplit("/", 1)[-1]] or ["."]
        self.new_files += 1
        name = f"{self.rng.choice(WORDS)}-{self.rng.randint(1, 99)}.txt"
        return f"{self.rng.choice(dirs).rstrip('/')}/{name}"


def _fit(value: str, s: dict[str, Any], rng: random.Random, pool: Pool, name: str = "") -> str:
    """The string within min/maxLength; a `pattern` takes a pool value that matches, else
    one drawn from the pattern (`rstr`): it took pool values only, so a required
    `^[a-z]{3}-[0-9]{2}$` was never made and its tool never called."""
    pattern = s.get("pattern")
    lo, hi = int(s.get("minLength", 0)), s.get("maxLength")
    if hi is not None and lo > hi:
        raise Unsatisfiable(f"{_where(name)}: minLength {lo} > maxLength {hi}")

    def fits(x: str) -> bool:
        return lo <= len(x) <= (hi if hi is not None else len(x)) and (
            not pattern or re.search(pattern, x) is not None
        )

    if fits(value):
        return value
    if pattern:
        matching = [x for x in (*pool.strings, *pool.words, *pool.paths) if fits(x)]
        if matching:
            return rng.choice(matching)
        drawn = _drawn(pattern, rng, hi)
        fitting = [x for x in drawn if fits(x)]
        if fitting or drawn:
            return min(fitting or drawn, key=len)
    if len(value) < lo:
        value = value + "x" * (lo - len(value))
    return value[:hi] if hi is not None else value


def _drawn(pattern: str, rng: random.Random, hi: int | None) -> list[str]:
    """Strings `pattern` matches, drawn by `rstr` from `rng` (a seeded run makes the same),
    each also cut to `hi` characters where that still matches. A construct it does not
    draw (an atomic group) gives none: the schema check then says why no argument fits;
    a pattern `re` cannot read raises `re.error`, which sets the tool aside."""
    import rstr

    re.compile(pattern)
    out: list[str] = []
    for _ in range(PATTERN_DRAWS):
        try:
            x = rstr.Rstr(rng).xeger(pattern)
        except (KeyError, IndexError):  # an opcode it has no case for
            return out
        out.append(x)
        if hi is not None and len(x) > hi and re.search(pattern, x[:hi]):
            out.append(x[:hi])
    return out


def _where(name: str) -> str:
    return f"argument {name}" if name else "the arguments"


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _values(s: dict[str, Any]) -> list | None:
    """Every value an item schema takes when they are few (a boolean, an enum, a const):
    how many unique items there can be; None for the rest."""
    if "const" in s:
        return [s["const"]]
    if isinstance(s.get("enum"), list):
        out: list = []
        for v in s["enum"]:
            if not any(same(v, x) for x in out):
                out.append(v)
        return out
    if s.get("type") == "boolean":
        return [False, True]
    return None


def _times(k: int, m: int | float, t: str) -> int | float:
    """`k` times `m` as written: `3 * 0.1` is 0.30000000000000004, rounded to m's digits."""
    if isinstance(m, int):
        return k * m
    digits = -Decimal(str(m)).as_tuple().exponent
    v = round(k * m, max(0, int(digits)))
    return int(v) if t == "integer" and float(v).is_integer() else v


def _multiple(v: float, m: int | float) -> bool:
    """`multipleOf` as the checker (jsonschema) reads it, float division and all."""
    if isinstance(m, float):
        try:
            q = v / m
            return int(q) == q
        except OverflowError:
            return (Fraction(v) / Fraction(m)).denominator == 1
    return v % m == 0


def _names(names: list[str], shown: int = 8) -> str:
    more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    node: Any = root
    for part in ref.lstrip("#/").split("/"):
        node = node.get(part, {}) if part else node
    return node if isinstance(node, dict) else {}


def _without(s: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in s.items() if k != key}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {**a, **b}
    out["properties"] = {**(a.get("properties") or {}), **(b.get("properties") or {})}
    out["required"] = sorted({*(a.get("required") or ()), *(b.get("required") or ())})
    return out


class SchemaExplorer(Explorer):
    """Tool calls with schema-valid arguments, seeded by the episode's seed."""

    config_class: ClassVar[type] = ExplorerConfig
    name = "mcp-schema-explorer"

    def __init__(self, config: ExplorerConfig, seed: int = 0):
        super().__init__(config, seed)
        self.pool = Pool(config.seeds)
        self.calls: dict[str, int] = {}
        self.unusable: dict[str, str] = {}
        """Tools set aside, with why (said once in the log, and on the episode's record)."""
        self._seen = -1

    def _learn(self, history) -> None:
        if self._seen < 0:
            self.pool.observe(history.task)
            self.pool.observe(history.initial.text)
            self._seen = 0
        for turn in history.turns[self._seen :]:
            if turn.observation.is_error:
                continue  # neither its arguments nor its error text name real state
            args = json.loads(turn.action.arguments_json or "{}")
            self.pool.observe_arguments(args)
            base = next((v for v in _strings(args) if PATH_RE.fullmatch(v)), None)
            self.pool.observe(turn.observation.text, base)
        self._seen = len(history.turns)

    def act(self, history):
        if self.config.steps is not None and len(history.turns) >= self.config.steps:
            return None
        self._learn(history)
        tools = [
            t
            for t in history.tools()
            if t.name not in self.config.exclude
            and t.name not in self.unusable
            and (self.config.allow_destructive or not is_destructive(t))
        ]
        aside = []
        while tools:
            least = min(self.calls.get(t.name, 0) for t in tools)
            tool = self.rng.choice([t for t in tools if self.calls.get(t.name, 0) == least])
            arguments = self.arguments_for(tool)
            if arguments is not None:
                self.calls[tool.name] = self.calls.get(tool.name, 0) + 1
                if aside:  # on the record: why this call and not those (the turn's reasoning)
                    history.note_reasoning("\n".join(aside))
                return tool_call(tool.name, arguments)
            aside.append(f"explorer: tool {tool.name} set aside: {self.unusable[tool.name]}")
            tools.remove(tool)
        if not history.turns:  # not one call: say why, rather than `success (0 turns)`
            raise SandboxConfigError(
                f"explorer: no tool it may call on this server: {self._why_none(history.tools())}"
            )
        return None

    def _why_none(self, tools: list[ToolSpec]) -> str:
        """Why each listed tool was left out (the same on every attempt)."""
        if not tools:
            return "the server lists no tools"
        excluded = [t.name for t in tools if t.name in self.config.exclude]
        destructive = [
            t.name
            for t in tools
            if t.name not in excluded and not self.config.allow_destructive and is_destructive(t)
        ]
        unusable = [t.name for t in tools if t.name in self.unusable]
        parts = []
        if destructive:
            parts.append(
                f"{len(destructive)} destructive (neither readOnlyHint nor destructiveHint: "
                f"false): {_names(destructive)}; `allow_destructive: true` calls them (fine "
                "on a fresh per-episode workdir)"
            )
        if excluded:
            parts.append(f"excluded: {_names(excluded)}")
        if unusable:
            why = [f"{n} ({self.unusable[n]})" for n in unusable]
            parts.append(f"no arguments valid for the schema could be made: {_names(why)}")
        return "; ".join(parts)

    def arguments_for(self, tool: ToolSpec) -> dict[str, Any] | None:
        """Arguments valid for the tool's schema, or None when none could be made: then
        the tool is set aside (`unusable`) with why, said once per process (a warning of
        logger `worldtrace.sandboxes.mcp_explorer`); it was left out without a word.

        A schema the checker cannot read (a `pattern` in ECMA-262 syntax Python's `re`
        lacks, as zod and pydantic write `^\\p{L}+$`; an unknown `type`) is set aside
        too: arguments that cannot be checked are not sent, and the server's other tools
        are still explored (it failed every attempt alike)."""
        from jsonschema.exceptions import UnknownType

        read_only = bool((tool.annotations or {}).get("readOnlyHint"))
        gen = Generator(self.rng, self.pool, read_only)
        schema = dict(tool.input_schema)
        problem = "they are no object"
        try:
            for _ in range(ATTEMPTS):
                args = gen.arguments(schema)
                if isinstance(args, dict) and (problem := tool.check(args)) is None:
                    return args
            problem = problem.removeprefix(f"{tool.name}: ")
            reason = f"no arguments valid for its input schema in {ATTEMPTS} tries ({problem})"
        except Unsatisfiable as exc:
            reason = f"no arguments fit its input schema: {exc}"
        except re.error as exc:
            reason = (
                f"its input schema has a pattern Python's re cannot read ({exc.pattern!r}: {exc})"
            )
        except UnknownType as exc:
            reason = f"its input schema has an unknown type {exc.type!r}"
        self.unusable[tool.name] = reason
        _warn_once(tool, reason)
        return None
