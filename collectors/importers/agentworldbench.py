"""AgentWorldBench-style JSONL: {id, task, system_str, prompt: [actions], response: [observations], turn_idx}.

Turn i = (prompt[i], response[i]); system_str -> task_description; domain <- the last
path part of `task` (e.g. "agentworld/terminal"); origin_id <- `id`; `turn_idx` (the
1-based turn to predict; a list of indices is kept too) -> metadata. Prompts and responses are strings; a null response is an answer
nobody knows: no turn (`unpaired_call`), never an empty output. Any other type refuses
the record (`invalid`, naming the field), as do an `id`, `task`, `system_str` or
`turn_idx` of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from worldtrace.schemas import Action, Observation
from worldtrace.schemas import fields as F

from .common import MissingField, build, expected, record_id, warning

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
    for key in ("task", "system_str"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise expected(key, "a string", d[key])
    idx = d.get("turn_idx")  # AgentWorldBench's: the 1-based turn to predict
    number = type(idx) is int and 1 <= idx <= len(prompts)
    if idx is not None and not number and not _ints(idx):
        raise expected("turn_idx", "a turn number (1-based) or a list of turn indices", idx)
    task = d.get("task") or ""
    dom = domain or task.rstrip("/").rsplit("/", 1)[-1]
    if dom not in F.DOMAINS:
        raise MissingField(
            f"task {task!r}: last path part is not a domain ({', '.join(F.DOMAINS)})"
        )
    kind = "keystrokes" if dom == "terminal" else "text"
    pairs = []
    for i, (a, o) in enumerate(zip(prompts, responses, strict=True)):
        if not isinstance(a, str):
            raise expected(f"prompt[{i}]", "a string", a)
        if o is None:
            yield warning(
                "unpaired_call",
                f"response[{i}]: null, the answer to prompt[{i}] is unknown; no turn",
            )
        elif not isinstance(o, str):
            raise expected(f"response[{i}]", "a string", o)
        else:
            pairs.append((Action(kind, a), Observation(o), None))
    ours = d.get(F.AWB_PROVENANCE)  # worldtrace's own export, imported again
    if ours is not None and not (
        isinstance(ours, dict) and isinstance(ours.get("synthetic", False), bool)
    ):
        raise expected(F.AWB_PROVENANCE, 'an object {"trajectory_id", "synthetic": bool}', ours)
    synthetic = bool(ours and ours.get("synthetic"))
    if synthetic:
        yield warning(
            "synthetic_source",
            "exported from a generated (synthetic) trajectory: imported as synthetic",
        )
    meta = {"task": task, "turn_idx": d.get("turn_idx")}
    if ours and ours.get("trajectory_id") is not None:
        meta["exported_from"] = ours["trajectory_id"]
    yield build(
        NAME,
        record_id(d, "id") or origin,
        dom,
        pairs,
        task_description=d.get("system_str") or None,
        metadata=meta,
        source_kind=F.SYNTHETIC if synthetic else "import",
    )


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(i) is int for i in value)


def parse_record(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    yield from to_trajectory(d, origin, domain)
