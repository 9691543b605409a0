"""The MCP kind's explorer: collects without a model, from the tools' JSON Schemas.

Each turn it picks a tool (the least called first, seeded draws break ties) and builds
arguments that validate against the tool's input schema: enums, consts, defaults,
bounds, formats, `$ref`, `anyOf`/`oneOf`, arrays and nested objects. Strings come from
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
import uuid
from typing import Annotated, Any, ClassVar

from pydantic import Field
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import configclass

from .base import Explorer, SandboxConfigError, ToolSpec
from .mcp_client import scalars

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

log = logging.getLogger(__name__)


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
            return self.number(s, t)
        if t == "boolean":
            return rng.random() < 0.5
        if t == "null":
            return None
        return self.string(s, name)

    def obj(self, s: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
        props = s.get("properties") or {}
        required = set(s.get("required") or ())
        out = {}
        for key, sub in props.items():
            if key in required or (depth < 3 and self.rng.random() < 0.3):
                out[key] = self.value(sub if isinstance(sub, dict) else {}, key, root, depth + 1)
        return out

    def array(self, s: dict[str, Any], name: str, root: dict[str, Any], depth: int) -> list:
        lo = int(s.get("minItems", 0))
        hi = int(s.get("maxItems", lo + 2))
        n = self.rng.randint(max(lo, min(1, hi)), max(lo, min(hi, lo + 2)))
        items = s.get("items") if isinstance(s.get("items"), dict) else {}
        out: list = []
        for _ in range(n * 3):
            if len(out) == n:
                break
            v = self.value(items, name, root, depth + 1)
            if not (s.get("uniqueItems") and v in out):
                out.append(v)
        return out

    def number(self, s: dict[str, Any], t: str) -> int | float:
        """A value within the bounds, near the lower one (big values mean slow calls)."""
        step = 1 if t == "integer" else 0.01
        lo, hi = s.get("minimum"), s.get("maximum")
        if isinstance(s.get("exclusiveMinimum"), (int, float)) and lo is None:
            lo = s["exclusiveMinimum"] + step
        if isinstance(s.get("exclusiveMaximum"), (int, float)) and hi is None:
            hi = s["exclusiveMaximum"] - step
        lo = 0 if lo is None else lo
        hi = lo + 10 if hi is None else min(hi, lo + 10)
        if t == "integer":
            a, b = math.ceil(lo), math.floor(hi)
            return self.rng.randint(a, max(a, b))
        return round(self.rng.uniform(lo, max(lo, hi)), 2)

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
        return _fit(value, s, rng, pool)

    def path(self) -> str:
        paths = self.pool.paths
        if paths and (self.read_only or self.rng.random() < 0.6):
            return self.rng.choice(paths)
        dirs = self.pool.dirs or [p for p in paths if "." not in p.rsplit("/", 1)[-1]] or ["."]
        self.new_files += 1
        name = f"{self.rng.choice(WORDS)}-{self.rng.randint(1, 99)}.txt"
        return f"{self.rng.choice(dirs).rstrip('/')}/{name}"


def _fit(value: str, s: dict[str, Any], rng: random.Random, pool: Pool) -> str:
    """The string within min/maxLength; a pattern prefers a pool value that matches."""
    pattern = s.get("pattern")
    if pattern and not re.search(pattern, value):
        matching = [x for x in (*pool.strings, *pool.words, *pool.paths) if re.search(pattern, x)]
        value = rng.choice(matching) if matching else value
    lo, hi = int(s.get("minLength", 0)), s.get("maxLength")
    if len(value) < lo:
        value = value + "x" * (lo - len(value))
    return value[:hi] if hi is not None else value


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
        self.unusable: set[str] = set()
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
        while tools:
            least = min(self.calls.get(t.name, 0) for t in tools)
            tool = self.rng.choice([t for t in tools if self.calls.get(t.name, 0) == least])
            arguments = self.arguments_for(tool)
            if arguments is not None:
                self.calls[tool.name] = self.calls.get(tool.name, 0) + 1
                return tool_call(tool.name, arguments)
            self.unusable.add(tool.name)
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
            parts.append(f"no arguments valid for the schema could be made: {_names(unusable)}")
        return "; ".join(parts)

    def arguments_for(self, tool: ToolSpec) -> dict[str, Any] | None:
        """Arguments valid for the tool's schema, or None when none could be made.

        A schema the checker cannot read (a `pattern` in ECMA-262 syntax Python's `re`
        lacks, as zod and pydantic write `^\\p{L}+$`; an unknown `type`) sets the tool
        aside with a warning: arguments that cannot be checked are not sent, and the
        server's other tools are still explored (it failed every attempt alike)."""
        from jsonschema.exceptions import UnknownType

        read_only = bool((tool.annotations or {}).get("readOnlyHint"))
        gen = Generator(self.rng, self.pool, read_only)
        schema = dict(tool.input_schema)
        try:
            for _ in range(ATTEMPTS):
                args = gen.arguments(schema)
                if isinstance(args, dict) and tool.check(args) is None:
                    return args
        except re.error as exc:
            log.warning(
                "explorer: tool %s set aside: its input schema has a pattern Python's re "
                "cannot read (%r: %s)", tool.name, exc.pattern, exc,
            )  # fmt: skip
        except UnknownType as exc:
            log.warning(
                "explorer: tool %s set aside: its input schema has an unknown type %r",
                tool.name, exc.type,
            )  # fmt: skip
        return None
