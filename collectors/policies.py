"""Agent policies: who chooses the next action.

`act(history)` returns the next Action or None to end the episode. A policy that has
reasoning to record calls `history.note_reasoning(text)`: it goes to the turn's raw
`reasoning` field, never into the action.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from worldtrace.schemas import Action, Observation, Trajectory, Turn

from .actions import keystrokes, tool


@dataclass
class History:
    task: str
    initial: Observation
    action_space: list[dict[str, Any]]
    turns: list[Turn] = field(default_factory=list)
    pending_reasoning: str | None = None

    def note_reasoning(self, text: str | None) -> None:
        self.pending_reasoning = text or None


class Policy(Protocol):
    name: str

    def act(self, history: History) -> Action | None: ...


class ScriptedPolicy:
    """Plays a fixed list of actions (from a task file), then stops."""

    name = "scripted"

    def __init__(self, actions: list[Action]):
        self.actions = list(actions)

    def act(self, history: History) -> Action | None:
        n = len(history.turns)
        return self.actions[n] if n < len(self.actions) else None


class ReplayPolicy(ScriptedPolicy):
    """Re-runs the actions of a recorded trajectory against a fresh sandbox."""

    name = "replay"

    def __init__(self, trajectory: Trajectory):
        super().__init__([t.action for t in trajectory.turns])
        self.source_id = trajectory.trajectory_id


_BLOCK_RE = re.compile(r"```(?:bash|sh|shell|console)?\n(.*?)```", re.S)


@dataclass
class OpenAIChatPolicy:
    """An OpenAI-compatible chat-completions endpoint chooses the actions.

    Tool mode (the sandbox declares tools): the model's tool_calls are the actions.
    Terminal mode: the last ```bash block of the reply is typed, followed by Enter.
    A reply with neither ends the episode.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 60.0
    terminal: bool = False
    name: str = "openai-chat"

    def _messages(self, h: History) -> list[dict[str, Any]]:
        system = f"{h.task}\n\nInitial state:\n{h.initial.text}"
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": h.task},
        ]
        for i, t in enumerate(h.turns):
            if self.terminal or t.action.kind != "tool_call":
                msgs.append({"role": "assistant", "content": f"```bash\n{t.action.text}```"})
                msgs.append({"role": "user", "content": t.observation.text})
            else:
                cid = f"call_{i}"
                msgs.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": cid,
                                "type": "function",
                                "function": {
                                    "name": t.action.name,
                                    "arguments": t.action.arguments_json or "{}",
                                },
                            }
                        ],
                    }
                )
                msgs.append({"role": "tool", "tool_call_id": cid, "content": t.observation.text})
        return msgs

    def _tools(self, h: History) -> list[dict[str, Any]] | None:
        if self.terminal:
            return None
        return [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": {
                        "type": "object",
                        "properties": {
                            k: {"type": "string", "description": str(v)}
                            for k, v in (t.get("parameters") or {}).items()
                        },
                    },
                },
            }
            for t in h.action_space
        ]

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {os.environ.get(self.api_key_env, '')}",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"chat completions HTTP {exc.code}: {exc.read()[:300]!r}") from exc

    def act(self, history: History) -> Action | None:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(history),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        tools = self._tools(history)
        if tools:
            body["tools"] = tools
        msg = self.complete(body)["choices"][0]["message"]
        content = msg.get("content") or ""
        calls = msg.get("tool_calls") or []
        if calls:
            fn = calls[0]["function"]
            history.note_reasoning(
                "\n\n".join(x for x in (msg.get("reasoning_content"), content) if x)
            )
            return tool(fn["name"], **json.loads(fn.get("arguments") or "{}"))
        blocks = _BLOCK_RE.findall(content)
        if not blocks:
            return None
        prose = _BLOCK_RE.sub("", content).strip()
        history.note_reasoning("\n\n".join(x for x in (msg.get("reasoning_content"), prose) if x))
        cmd = blocks[-1].rstrip("\n")
        return keystrokes(cmd + "\n") if self.terminal else tool("bash", command=cmd)
