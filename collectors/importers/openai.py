"""OpenAI chat messages with tool calls: JSON or JSONL of {messages, tools?, id?} or of
bare message lists.

Each assistant `tool_calls[{id, function: {name, arguments}}]` entry becomes a turn, in
listed order, paired with the `tool` message whose `tool_call_id` matches; the
assistant's content and any `reasoning_content` go to `reasoning`. `tools` is the
action space; task <- first user message; domain from tool names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from worldtrace.schemas import Observation

from .common import MissingField, build, guess_domain, join_reasoning, text_of, tool_action

NAME = "openai"


def detect_record(d: Any) -> bool:
    if isinstance(d, dict):
        msgs = d.get("messages")
        return isinstance(msgs, list) and any(isinstance(m, dict) and "role" in m for m in msgs)
    return (
        isinstance(d, list) and bool(d) and all(isinstance(m, dict) and "role" in m for m in d[:3])
    )


def to_trajectory(d: Any, origin: str, domain: str | None = None):
    msgs = d.get("messages") if isinstance(d, dict) else d
    if not isinstance(msgs, list):
        raise MissingField("no `messages` list")
    msgs = [m for m in msgs if isinstance(m, dict)]
    tool_results: dict[str, list[str]] = {}
    errors: set[str] = set()
    for m in msgs:
        if m.get("role") == "tool":
            cid = m.get("tool_call_id")
            tool_results.setdefault(cid, []).append(text_of(m.get("content")))
            if m.get("is_error") or m.get("status") == "error":
                errors.add(cid)
    pairs, names = [], []
    for m in msgs:
        if m.get("role") != "assistant":
            continue
        reasoning = join_reasoning(
            m.get("reasoning_content") or m.get("reasoning"), text_of(m.get("content"))
        )
        for k, call in enumerate(m.get("tool_calls") or []):
            fn = call.get("function") or {}
            name = fn.get("name")
            if not name:
                raise MissingField("a tool call has no function.name")
            names.append(name)
            cid = call.get("id")
            obs = Observation("\n".join(tool_results.get(cid, [])), is_error=cid in errors)
            pairs.append(
                (tool_action(name, fn.get("arguments")), obs, reasoning if k == 0 else None)
            )
    task = next((text_of(m.get("content")) for m in msgs if m.get("role") == "user"), None)
    system = next((text_of(m.get("content")) for m in msgs if m.get("role") == "system"), None)
    tools = d.get("tools") if isinstance(d, dict) else None
    return build(
        NAME,
        origin,
        domain or guess_domain(names),
        pairs,
        task_description=task,
        instruction=task,
        action_space=tools if isinstance(tools, list) else None,
        metadata={
            "agent_system_prompt": system,
            "model": d.get("model") if isinstance(d, dict) else None,
        },
    )


def parse_record(d: Any, origin: str, domain: str | None = None) -> Iterator[Any]:
    yield to_trajectory(d, origin, domain)
