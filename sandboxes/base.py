"""The sandbox protocol and a lazy registry of backends.

A sandbox is a live environment: `reset(task)` starts an episode and returns the initial
observation, `step(action)` returns what the environment answers, `describe()` gives the
action space and initial state for the trajectory's system record, `close()` frees it.
Backends load on first use, so `import worldtrace` never imports docker or Playwright.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from worldtrace.schemas import Action, Observation


class SandboxError(RuntimeError):
    """The environment failed (not the agent's action): the episode is retried or failed."""


@dataclass(frozen=True)
class TaskSpec:
    task_id: str
    instruction: str = ""
    setup: tuple[str, ...] = ()
    """Shell commands run before the episode starts (not recorded as turns)."""


@runtime_checkable
class Sandbox(Protocol):
    domain: str

    def reset(self, task: TaskSpec) -> Observation: ...

    def step(self, action: Action) -> Observation: ...

    def describe(self) -> dict[str, Any]:
        """backend, target (image/server/url/device), config, action_space, initial_state."""
        ...

    def close(self) -> None: ...


class Unpicklable:
    """Live sandboxes hold sockets and containers; a worker must create its own."""

    def __reduce__(self):
        raise TypeError(
            f"{type(self).__name__} is a live sandbox and cannot be pickled: create it in the "
            "worker (e.g. in DoFn.setup or the episode function), not in the driver"
        )


REGISTRY = {
    "terminal": "worldtrace.sandboxes.terminal:TerminalSandbox",
    "swe": "worldtrace.sandboxes.swe:SWESandbox",
}


def load(kind: str) -> type:
    if kind not in REGISTRY:
        raise KeyError(f"unknown sandbox kind {kind!r} (known: {', '.join(REGISTRY)})")
    module, _, name = REGISTRY[kind].partition(":")
    return getattr(importlib.import_module(module), name)
