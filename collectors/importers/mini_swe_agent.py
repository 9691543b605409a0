"""mini-swe-agent `.traj.json`: {info, messages[], trajectory_format} or a bare message list.

action <- the command in the assistant message's last fenced code block (never its
prose); reasoning <- the prose around it; observation <- the user message right after
it, with `<returncode>` -> exit_code and `<output>` -> text (none: an empty observation
and an `unpaired_call` warning); task <- first user message; the system message ->
metadata `agent_system_prompt`; the action space is one `bash` tool; domain swe.

The submission is not a turn: when the last command prints a finish marker
(`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`, or MINI_SWE_AGENT_FINAL_OUTPUT) and what
follows it is no command output (no `<returncode>`), mini-swe-agent saw the marker as
the output's first line, ended the episode and wrote the rest of the output as the last
user message: the agent's end-of-episode signal, not an answer from the environment. The
command -> metadata `submit_command`, that message -> metadata `submission` (else
`info.submission`). A marker the environment answered with a `<returncode>` (not on the
output's first line, or the command failed) is an ordinary turn.
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
    NonText,
    build,
    expected,
    origin_stem,
    split_command,
    warning,
)

NAME = "mini-swe-agent"
_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.S)
KNOWN_FORMATS = ("mini-swe-agent-1",)
FINISH_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
"""A command output whose first line is one of these ends the episode (mini-swe-agent's
`has_finished`)."""
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


def _is_submit(cmd: str, reply: str | None) -> bool:
    """Whether `cmd`, the last command, is the agent's submission: it prints a finish
    marker, and what answered it is no command output (mini-swe-agent ends the episode
    when the output's first line is the marker, with the rest of the output as the
    submission message, no `<returncode>`); nothing answered it at all in a cut file."""
    return any(marker in cmd for marker in FINISH_MARKERS) and (
        reply is None or _RC.search(reply) is None
    )


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
    # (index in the file, message): problems name the file's own index
    msgs = [(n, m) for n, m in enumerate(messages) if isinstance(m, dict)]
    parts = NonText()
    task = system = None
    for n, m in msgs:
        if m.get("role") == "system" and system is None:
            system = parts.text(m.get("content"), f"system prompt (messages[{n}].content)")
        if m.get("role") == "user" and task is None:
            task = parts.text(m.get("content"), f"task (messages[{n}].content)")
    pairs = []
    submit: dict[str, str] = {}
    last = max((i for i, (_, m) in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    for i, (n, m) in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        turn = len(pairs)
        cmd, prose = split_command(
            parts.text(m.get("content"), f"turn {turn} action (messages[{n}].content)")
        )
        if cmd is None:
            continue  # a format error the agent was told about; no environment step happened
        k, nxt = msgs[i + 1] if i + 1 < len(msgs) else (None, None)
        answered = nxt is not None and nxt.get("role") in ("user", "tool")
        reply = (
            parts.text(nxt.get("content"), f"turn {turn} observation (messages[{k}].content)")
            if answered
            else None
        )
        if i == last and _is_submit(cmd, reply):
            # the end-of-episode signal: mini-swe-agent took what the command printed
            # after the marker line as the submission and showed the agent no output
            submit = {"submit_command": cmd}
            if reply is not None:
                submit["submission"] = reply
            continue
        if reply is None:
            yield warning("unpaired_call", f"messages[{n}]: no output after {cmd!r}")
        pairs.append(
            (Action("command", cmd, name="bash"), _observation(reply or ""), prose or None)
        )
    yield from parts.warnings()
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
            metadata={
                "trajectory_format": fmt,
                "exit_status": status,
                "agent_system_prompt": system,
                "submission": info.get("submission"),
                **submit,
            },
        )
    except MissingField as exc:
        yield ImportProblem(str(path), "", "missing_field", str(exc))
