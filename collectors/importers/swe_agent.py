"""SWE-agent `.traj`: {environment, trajectory[{action, observation, response, thought, state}], history, info}.

action <- `action` (the executed command, trailing newline dropped); observation <-
`observation`; reasoning <- `thought` (else `response`); state_json <- `state`;
task <- first non-demo user message of `history`; demonstrations <- demo messages;
outcome <- info.exit_status; domain swe.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from .common import ImportProblem, MissingField, build, origin_stem, text_of

NAME = "swe-agent"


def detect(path: Path, head: Any) -> bool:
    return isinstance(head, dict) and isinstance(head.get("trajectory"), list)


def _state(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):
        return json.dumps(raw, sort_keys=True)
    try:
        parsed = json.loads(raw)
    except (TypeError, json.JSONDecodeError):
        return json.dumps({"raw": str(raw)})
    return json.dumps(parsed if isinstance(parsed, dict) else {"value": parsed}, sort_keys=True)


def to_trajectory(d: dict[str, Any], origin: str):
    steps = d.get("trajectory")
    if not isinstance(steps, list):
        raise MissingField("no `trajectory` list")
    pairs = []
    for n, s in enumerate(steps):
        if not isinstance(s, dict) or "action" not in s:
            raise MissingField(f"trajectory[{n}] has no `action`")
        cmd = str(s.get("action") or "").rstrip("\n")
        name = cmd.split(maxsplit=1)[0] if cmd.strip() else None
        obs = Observation(text_of(s.get("observation")), state_json=_state(s.get("state")))
        pairs.append(
            (Action("command", cmd, name=name), obs, s.get("thought") or s.get("response"))
        )
    history = [h for h in d.get("history") or [] if isinstance(h, dict)]
    demos = [text_of(h.get("content")) for h in history if h.get("is_demo")]
    users = [h for h in history if h.get("role") == "user" and not h.get("is_demo")]
    task = text_of(users[0].get("content")) if users else None
    info = d.get("info") or {}
    status = info.get("exit_status")
    outcome = Outcome(
        status="success" if status == "submitted" else ("unknown" if status is None else "failure"),
        error=None if status in (None, "submitted") else str(status),
    )
    return build(
        NAME,
        origin,
        "swe",
        pairs,
        task_description=task,
        instruction=task,
        demonstrations=demos or None,
        agent={"name": "swe-agent", "model": (info.get("model_stats") or {}).get("model")},
        outcome=outcome,
        metadata={
            "environment": d.get("environment"),
            "exit_status": status,
            "submission": info.get("submission"),
        },
    )


def parse(path: Path, data: Any) -> Iterator[Any]:
    try:
        yield to_trajectory(data, origin_stem(path))
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))
