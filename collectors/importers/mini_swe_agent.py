"""mini-swe-agent `.traj.json`: {info, messages[], trajectory_format} or a bare message list.

action <- the command in the assistant message's last fenced code block (never its
prose); reasoning <- the prose around it; observation <- the next user message, with
`<returncode>` -> exit_code and `<output>` -> text; task <- first user message; the
action space is one `bash` tool; domain swe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome

from .common import (
    ImportProblem,
    MissingField,
    build,
    expected,
    origin_stem,
    split_command,
    text_of,
)

NAME = "mini-swe-agent"
_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.S)
KNOWN_FORMATS = ("mini-swe-agent-1",)
BASH_TOOL = {
    "name": "bash",
    "description": "run one bash command (each in a new subshell)",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def detect(path: Path, head: Any) -> bool:
    if isinstance(head, dict):
        return str(head.get("trajectory_format", "")).startswith("mini-swe-agent") or (
            path.name.endswith(".traj.json") and isinstance(head.get("messages"), list)
        )
    return (
        path.name.endswith(".traj.json")
        and isinstance(head, list)
        and all(isinstance(m, dict) and "role" in m for m in head[:3])
    )


def _observation(text: str) -> Observation:
    rc = _RC.search(text)
    out = _OUT.search(text)
    body = out.group(1) if out else text
    code = int(rc.group(1)) if rc else None
    return Observation(body, exit_code=code, is_error=bool(code))


def parse(path: Path, data: Any) -> Iterator[Any]:
    messages = data.get("messages") if isinstance(data, dict) else data
    info = data.get("info", {}) if isinstance(data, dict) else {}
    fmt = data.get("trajectory_format") if isinstance(data, dict) else None
    if fmt and fmt not in KNOWN_FORMATS:
        yield ImportProblem(
            str(path),
            "",
            "unknown_version",
            f"trajectory_format {fmt!r} is not one of {KNOWN_FORMATS}; importing best effort",
            fatal=False,
        )
    if not isinstance(messages, list):
        if messages is None:
            yield ImportProblem(str(path), "", "missing_field", "no `messages` list")
        else:
            bad = expected("messages", "a list", messages)
            yield ImportProblem(str(path), "", "invalid", str(bad))
        return
    msgs = [m for m in messages if isinstance(m, dict)]
    task = next((text_of(m.get("content")) for m in msgs if m.get("role") == "user"), None)
    pairs = []
    for i, m in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        cmd, prose = split_command(text_of(m.get("content")))
        if cmd is None:
            continue  # a format error the agent was told about; no environment step happened
        nxt = next((x for x in msgs[i + 1 :] if x.get("role") in ("user", "tool")), None)
        obs = _observation(text_of(nxt.get("content"))) if nxt else Observation("")
        pairs.append((Action("command", cmd, name="bash"), obs, prose or None))
    try:
        status = info.get("exit_status")
        yield build(
            NAME,
            origin_stem(path),
            "swe",
            pairs,
            task_description=task,
            instruction=task,
            action_space=[BASH_TOOL],
            agent={
                "name": "mini-swe-agent",
                "model": (info.get("config") or {}).get("model", {}).get("model_name")
                if isinstance(info.get("config"), dict)
                else None,
            },
            outcome=Outcome(
                status="unknown"
                if status is None
                else ("success" if status == "Submitted" else "failure"),
                error=None if status in (None, "Submitted") else str(status),
            ),
            metadata={"trajectory_format": fmt, "exit_status": status},
        )
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))
