"""The sandbox protocol, tool specs, and the registry of sandbox kinds.

A sandbox is a live environment: `reset(task)` starts an episode and returns the initial
observation, `step(action)` returns what the environment answers, `describe()` gives the
action space and initial state for the trajectory's system record, `close()` frees it.

A *kind* is one module: a Sandbox class with class attributes `kind`, `domain`,
`config_class` (a frozen dataclass parsed from the job file's `sandbox:` mapping),
optionally `task_class` (the kind's task payload, parsed from the task's extra keys),
`action_kinds` (which action kinds it takes) and a classmethod `static_action_space`
(tools known before a sandbox starts, so job files are checked at submit). Kinds are
found in `BUILTIN_KINDS` and in the entry-point group `worldtrace.sandboxes`, so a
pip-installed package can add one; both load on first use, so `import worldtrace` never
imports docker, Playwright or the MCP SDK.

Errors have owners: what the environment answers (a shell's `No such file`, an MCP
`isError` result, a 404 page) is an Observation; a failure of our code or of the
infrastructure raises (`SandboxError` or any exception) and fails the attempt.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, Protocol, TypedDict, runtime_checkable

from worldtrace.schemas import Action, Observation
from worldtrace.schemas.plugins import entries, load_ref

ENTRY_POINT_GROUP = "worldtrace.sandboxes"
BUILTIN_KINDS = {
    "terminal": "worldtrace.sandboxes.terminal:TerminalSandbox",
    "swe": "worldtrace.sandboxes.swe:SWESandbox",
    "android": "worldtrace.sandboxes.android:AndroidSandbox",
    "web": "worldtrace.sandboxes.web:WebSandbox",
    "mcp": "worldtrace.sandboxes.mcp:MCPSandbox",
}


class SandboxError(RuntimeError):
    """The environment failed (not the agent's action): the attempt fails and is retried."""


class SandboxConfigError(SandboxError):
    """The job's configuration cannot work with the environment (a `shell:` the image
    lacks): every attempt would fail alike, so the attempt fails and is not retried."""


class StopRequested(Exception):
    """The collector was asked to stop while a reset waited (for a device): neither the
    environment's answer nor its failure, so the episode goes back to the queue."""


def hold_lock(
    path: Any, timeout: float, stop: Any, holder: str, stopped: str, busy: Callable[[], str]
) -> tuple[IO[str], float]:
    """A lock a reset waits for (`tempfiles.wait_lock`: a device, a fixed folder): its
    file and the seconds waited; StopRequested(`stopped`) when `stop` ended the wait,
    SandboxError(`busy()`, which may name the holder) after `timeout` seconds."""
    from worldtrace.schemas.tempfiles import wait_lock

    fh, waited = wait_lock(path, timeout, stop, holder)
    if fh is None and stop is not None and stop.is_set():
        raise StopRequested(stopped)
    if fh is None:
        raise SandboxError(busy())
    return fh, waited


@dataclass(frozen=True)
class ToolSpec:
    """One tool of an action space, as JSON Schema (the MCP / OpenAI function shape)."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """JSON Schema of the arguments object."""
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    """Hints such as readOnlyHint or destructiveHint (MCP tool annotations)."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }
        if self.output_schema is not None:
            d["output_schema"] = dict(self.output_schema)
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolSpec:
        """Ours, MCP's (`inputSchema`) or OpenAI's (`{"function": {"parameters"}}`) shape."""
        fn = d.get("function") if isinstance(d.get("function"), Mapping) else d
        schema = fn.get("input_schema") or fn.get("inputSchema") or fn.get("parameters")
        return cls(
            name=fn["name"],
            description=fn.get("description") or "",
            input_schema=schema or {"type": "object", "properties": {}},
            output_schema=fn.get("output_schema") or fn.get("outputSchema"),
            annotations=fn.get("annotations"),
        )

    def check(self, arguments: Any) -> str | None:
        """Why `arguments` do not fit the input schema, or None when they do."""
        return check_arguments(self.input_schema, arguments, self.name)


def integral_ints(schema: Mapping[str, Any], arguments: Any) -> Any:
    """`arguments` with each integral float given to an `integer` property (`0.0`, `1e0`)
    made the int it is: JSON Schema's integer accepts it (a JSON number with no fraction
    is an integer), so the check passed and the action raised (a list indexed by 0.0
    failed the attempt with TypeError). A float with a fraction stays, for the check to
    refuse. Anything but an object of arguments is returned as it is."""
    if not isinstance(arguments, dict):
        return arguments
    props = schema.get("properties", {})
    out = dict(arguments)
    for name, value in arguments.items():
        if isinstance(value, float) and value.is_integer() and props.get(name, {}).get("type") == "integer":  # fmt: skip
            out[name] = int(value)
    return out


def check_arguments(schema: Mapping[str, Any], arguments: Any, tool: str = "") -> str | None:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    parts = []
    for e in errors[:3]:
        where = "/".join(str(p) for p in e.absolute_path)
        parts.append(f"argument {where}: {e.message}" if where else e.message)
    return f"{tool}: " * bool(tool) + "; ".join(parts)


@dataclass(frozen=True)
class TaskSpec:
    """One task as the sandbox sees it."""

    task_id: str
    instruction: str = ""
    setup: tuple[str, ...] = ()
    """Shell commands (docker kinds) run before the episode starts (not recorded as turns)."""
    params: Any = None
    """The kind's task payload (an instance of its `task_class`), e.g. a start URL."""


class Description(TypedDict, total=False):
    """What `describe()` returns (keys beyond `backend` are optional)."""

    backend: str
    image: str
    server: str
    url: str
    device: str
    config: dict[str, Any]
    action_space: list[dict[str, Any]]
    """`ToolSpec.to_dict()` of every tool (the trajectory's declared action space)."""
    initial_state: str


@runtime_checkable
class Sandbox(Protocol):
    kind: ClassVar[str]
    domain: str

    def reset(self, task: TaskSpec) -> Observation: ...

    def step(self, action: Action) -> Observation: ...

    def describe(self) -> Description: ...

    def close(self) -> None: ...


class Unpicklable:
    """Live sandboxes hold sockets and containers; a worker must create its own."""

    def __reduce__(self):
        raise TypeError(
            f"{type(self).__name__} is a live sandbox and cannot be pickled: create it in the "
            "worker (e.g. in DoFn.setup or the episode function), not in the driver"
        )


class Explorer:
    """Base of a kind's random explorer (the policy `explorer`): its config and a random
    generator seeded from the episode (`PolicyContext.seed`), so a run is reproducible."""

    kind: ClassVar[str] = "explorer"

    def __init__(self, config: Any, seed: int = 0):
        self.config = config
        self.rng = random.Random(seed)

    @classmethod
    def build(cls, config: Any, ctx: Any) -> Explorer:
        return cls(config, ctx.seed)


# -- the registry -----------------------------------------------------------------
@functools.cache
def registry() -> dict[str, str]:
    """Kind name -> "module:Class"; entry points add kinds but never replace a builtin."""
    return entries(ENTRY_POINT_GROUP, BUILTIN_KINDS)


def kinds() -> list[str]:
    """Every registered kind, without importing any of them."""
    return sorted(registry())


def load(kind: str) -> type:
    """The sandbox class of a kind (imports its module)."""
    known = registry()
    if kind not in known:
        raise KeyError(f"unknown sandbox kind {kind!r} (known: {', '.join(sorted(known))})")
    cls = load_ref(known[kind])
    if getattr(cls, "kind", kind) != kind:
        raise TypeError(f"{known[kind]} declares kind {cls.kind!r}, registered as {kind!r}")
    return cls


def action_kinds(cls: type) -> tuple[str, ...]:
    """Action kinds a sandbox class takes (tool calls unless it says otherwise)."""
    return tuple(getattr(cls, "action_kinds", ("tool_call",)))


def static_action_space(cls: type, config: Any) -> list[ToolSpec] | None:
    """Tools known before the sandbox starts (None: only the live sandbox knows, e.g. MCP)."""
    fn = getattr(cls, "static_action_space", None)
    return fn(config) if fn is not None else None
