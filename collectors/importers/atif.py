"""Harbor ATIF `trajectory.json`: {schema_version: "ATIF-v1.x", session_id, agent, steps[]}.

Each agent step's tool_calls[{tool_call_id, function_name, arguments}] become turns in
their listed order (parallel calls keep the order the agent emitted them); each is
paired with observation.results[{source_call_id, content}] by id (a call with no result
gets an empty observation and a warning). The step's message and reasoning_content go to
the first of its turns' `reasoning`. Task <- first user step; domain from tool names.
A field of the wrong type (`arguments` neither an object nor a string holding one;
`steps` or `tool_calls` no list, a call no object) refuses the file (`invalid`, naming
the field).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Observation, Outcome

from .common import (
    ImportProblem,
    InvalidField,
    MissingField,
    build,
    expected,
    guess_domain,
    join_reasoning,
    origin_stem,
    text_of,
    tool_action,
)

NAME = "atif"
KNOWN_MAJOR = "ATIF-v1."


def detect(path: Path, head: Any) -> bool:
    return isinstance(head, dict) and str(head.get("schema_version", "")).startswith("ATIF")


def parse(path: Path, data: Any, domain: str | None = None) -> Iterator[Any]:
    version = str(data.get("schema_version", ""))
    if not version.startswith(KNOWN_MAJOR):
        yield ImportProblem(
            str(path),
            "",
            "unknown_version",
            f"{version!r} is not {KNOWN_MAJOR}x; importing best effort",
            fatal=False,
        )
    steps = data.get("steps")
    if not isinstance(steps, list):
        kind = "missing_field" if steps is None else "invalid"
        msg = "no `steps` list" if steps is None else str(expected("steps", "a list", steps))
        yield ImportProblem(str(path), "", kind, msg)
        return
    pairs = []
    names = []
    task = system = None
    for n, step in enumerate(steps):  # n: the step's index in the file, for problems
        if not isinstance(step, dict):
            continue
        src = step.get("source")
        if src == "system" and system is None:
            system = text_of(step.get("message"))
        if src == "user" and task is None:
            task = text_of(step.get("message"))
        calls = step.get("tool_calls") or []
        if src != "agent" or not calls:
            continue
        results = {}
        for r in (step.get("observation") or {}).get("results") or []:
            if isinstance(r, dict):
                results.setdefault(r.get("source_call_id"), []).append(text_of(r.get("content")))
        reasoning = join_reasoning(step.get("reasoning_content"), text_of(step.get("message")))
        bad = _call_shape(n, calls)
        if bad:
            yield ImportProblem(str(path), "", "invalid", bad)
            return
        for k, call in enumerate(calls):
            name = call.get("function_name")
            if not name:
                yield ImportProblem(
                    str(path), f"steps[{n}].tool_calls[{k}]", "missing_field", "no function_name"
                )
                return
            names.append(name)
            cid = call.get("tool_call_id")
            if cid not in results:
                yield ImportProblem(
                    str(path),
                    f"steps[{n}].tool_calls[{k}]",
                    "unpaired_call",
                    f"no result for call {cid!r}",
                    fatal=False,
                )
            obs = Observation("\n".join(results.get(cid, [])))
            try:
                action = tool_action(
                    name, call.get("arguments"), f"steps[{n}].tool_calls[{k}].arguments"
                )
            except InvalidField as exc:  # the message names the field
                yield ImportProblem(str(path), "", "invalid", str(exc))
                return
            pairs.append((action, obs, reasoning if k == 0 else None))
    agent = data.get("agent") or {}
    tools = agent.get("tool_definitions") if isinstance(agent, dict) else None
    try:
        yield build(
            NAME,
            str(data.get("session_id") or origin_stem(path)),
            domain or guess_domain(names, "terminal"),
            pairs,
            task_description=task,
            instruction=task,
            action_space=tools if isinstance(tools, list) else None,
            agent={"name": agent.get("name"), "model": agent.get("model_name")}
            if isinstance(agent, dict)
            else None,
            outcome=Outcome(),
            metadata={
                "schema_version": version,
                "agent_version": agent.get("version") if isinstance(agent, dict) else None,
            },
        )
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))


def _call_shape(n: int, calls: Any) -> str | None:
    """What is wrong with step `n`'s `tool_calls` if it is no list of objects."""
    if not isinstance(calls, list):
        return str(expected(f"steps[{n}].tool_calls", "a list", calls))
    bad = next((k for k, c in enumerate(calls) if not isinstance(c, dict)), None)
    return (
        None
        if bad is None
        else str(expected(f"steps[{n}].tool_calls[{bad}]", "an object", calls[bad]))
    )
