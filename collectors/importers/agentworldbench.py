"""AgentWorldBench-style JSONL: {id, task, system_str, prompt: [actions], response: [observations], turn_idx}.

Turn i = (prompt[i], response[i]); system_str -> task_description; domain <- the last
path part of `task` (e.g. "agentworld/terminal"); origin_id <- `id`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from worldtrace.schemas import Action, Observation
from worldtrace.schemas import fields as F

from .common import MissingField, NonText, build, expected

NAME = "agentworldbench"


def detect_record(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and "prompt" in d
        and "response" in d
        and ("system_str" in d or "task" in d)
    )


def near_miss(d: Any) -> tuple[str, str] | None:
    """None: detection already takes any record with the keys (`to_trajectory` then
    names a field of the wrong type)."""
    return None


def to_trajectory(d: dict[str, Any], origin: str, domain: str | None = None):
    for key in ("prompt", "response"):
        if key not in d:
            raise MissingField(f"no `{key}` list")
        if not isinstance(d[key], list):
            raise expected(key, "a list", d[key])
    prompts, responses = d["prompt"], d["response"]
    if len(prompts) != len(responses):
        raise MissingField(f"{len(prompts)} prompts but {len(responses)} responses")
    task = str(d.get("task") or "")
    dom = domain or task.rstrip("/").rsplit("/", 1)[-1]
    if dom not in F.DOMAINS:
        raise MissingField(
            f"task {task!r}: last path part is not a domain ({', '.join(F.DOMAINS)})"
        )
    kind = "keystrokes" if dom == "terminal" else "text"
    parts = NonText()
    pairs = [
        (
            Action(kind, parts.text(a, f"turn {i} action (prompt[{i}])")),
            Observation(parts.text(o, f"turn {i} observation (response[{i}])")),
            None,
        )
        for i, (a, o) in enumerate(zip(prompts, responses, strict=True))
    ]
    yield from parts.warnings()
    yield build(
        NAME,
        str(d.get("id") or origin),
        dom,
        pairs,
        task_description=d.get("system_str") or None,
        metadata={"task": task, "turn_idx": d.get("turn_idx")},
    )


def parse_record(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    yield from to_trajectory(d, origin, domain)
