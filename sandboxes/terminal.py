"""Terminal domain: a persistent interactive shell on a pty inside a container.

Actions are keystrokes with an optional duration, as in the report
(`{"keystrokes": "ls -la\\n", "duration": 0.1}`); a whole action of `C-c`, `C-d`, `C-z`,
`C-l`, `Enter`, `Escape`, `Tab`, `Up`, `Down` sends that key. The observation is what
the terminal printed (the echo of the keys, the output and the next prompt), with ANSI
control sequences removed and CRLF folded to LF. A step returns as soon as a prompt is
back, or after `duration` seconds with what was printed so far (the command may still
run: the next keystrokes reach it). Output over the cap is dropped after a C-c.
"""

from __future__ import annotations

import json
import re
import select
import time
from dataclasses import field
from typing import Annotated, Any

from pydantic import Field
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass

from .base import SandboxError, TaskSpec, ToolSpec, Unpicklable
from .docker import DockerConfig, exec_capture, run_setup, shared_pool

KEYS = {
    "C-c": b"\x03", "C-d": b"\x04", "C-z": b"\x1a", "C-l": b"\x0c", "C-u": b"\x15", "C-a": b"\x01",
    "C-e": b"\x05", "Enter": b"\r", "Escape": b"\x1b", "Tab": b"\t", "Up": b"\x1b[A", "Down": b"\x1b[B",
}  # fmt: skip
ANSI_RE = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]"
)
PROMPT = "user@sandbox:\\w$ "
PROMPT_RE = re.compile(rb"user@sandbox:[^\n]*\$ $")
TOOLS = ("bash", "sh", "python3", "git", "curl", "vim", "nano", "gcc", "make", "pip3", "node")
ACTION_SPACE = [
    ToolSpec(
        "keystrokes",
        "Keys sent to the terminal (\\n is Enter); a whole action of C-c, C-d, C-z, C-l, "
        "C-u, C-a, C-e, Enter, Escape, Tab, Up or Down sends that key",
        {
            "type": "object",
            "properties": {
                "keystrokes": {"type": "string", "description": "the keys"},
                "duration": {
                    "type": "number",
                    "minimum": 0,
                    "description": "seconds to wait for output (default 1.0)",
                },
            },
            "required": ["keystrokes"],
            "additionalProperties": False,
        },
    )
]


@configclass
class TerminalConfig:
    """A terminal sandbox."""

    docker: DockerConfig = field(default_factory=DockerConfig)
    shell: tuple[str, ...] = ("/bin/bash", "--norc", "--noprofile", "-i")
    """Interactive shell; images without bash fall back to /bin/sh -i."""
    default_duration: Annotated[float, Field(gt=0, le=3600)] = 1.0
    """Seconds a step waits for output when the action does not say."""


def parse_action(action: Action) -> tuple[bytes, float | None]:
    """Keystroke bytes and duration from an action (text or {"keystrokes", "duration"} JSON)."""
    keys, duration = action.text, None
    if action.arguments_json:
        args = json.loads(action.arguments_json)
        keys = args.get("keystrokes", keys)
        duration = args.get("duration")
    if keys in KEYS:
        return KEYS[keys], duration
    return keys.encode(), duration


def clean(raw: bytes) -> str:
    return (
        ANSI_RE.sub(b"", raw)
        .replace(b"\r\n", b"\n")
        .replace(b"\r", b"")
        .decode("utf-8", errors="replace")
    )


class TerminalSandbox(Unpicklable):
    kind = "terminal"
    domain = "terminal"
    config_class = TerminalConfig
    action_kinds = ("keystrokes",)

    @classmethod
    def static_action_space(cls, config: TerminalConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    def __init__(self, config: TerminalConfig | None = None):
        self.config = config or TerminalConfig()
        self.pool = shared_pool(self.config.docker)
        self.container = None
        self._sock = None
        self._initial = ""
        self._tools: list[str] = []
        self._os = ""

    # -- lifecycle ---------------------------------------------------------------
    def reset(self, task: TaskSpec) -> Observation:
        self._release(wait=False)  # the last episode's container goes in the background
        self.container = self.pool.acquire()
        d = self.config.docker
        run_setup(self.container, task.setup, d, d.workdir)
        facts = self._image_facts()
        self._open_shell(facts["shell"])
        first = self._read_until_prompt(self.config.docker.step_timeout)[0]
        self._tools, self._os = facts["tools"], facts["os"]
        prompt = clean(first)
        self._initial = f"OS: {self._os}\nInstalled tools: {' '.join(self._tools)}\nWorking directory: {d.workdir}\nPrompt: {prompt}"
        return Observation(prompt, state_json=json.dumps({"cwd": d.workdir}))

    def _image_facts(self) -> dict[str, Any]:
        """OS, installed tools and usable shell: the same for every container of the pool's
        image, so probed once per pool and not on every reset."""
        facts = self.pool.facts.get("terminal")
        if facts is None:
            probe = "; ".join(f"command -v {t} >/dev/null 2>&1 && echo {t}" for t in TOOLS)
            _, tools, _, _ = exec_capture(self.container, ["sh", "-c", probe], 10, 4096)
            os_cmd = ". /etc/os-release 2>/dev/null && echo $PRETTY_NAME || uname -sr"
            _, osr, _, _ = exec_capture(self.container, ["sh", "-c", os_cmd], 10, 4096)
            shell_ok = (
                exec_capture(self.container, ["test", "-x", self.config.shell[0]], 5, 64)[0] == 0
            )
            facts = self.pool.facts["terminal"] = {
                "tools": tools.split(),
                "os": osr.strip() or "unknown",
                "shell": list(self.config.shell) if shell_ok else ["/bin/sh", "-i"],
            }
        return facts

    def _open_shell(self, shell: list[str]) -> None:
        api = self.container.client.api
        env = {"PS1": PROMPT, "TERM": "dumb", "HOME": self.config.docker.workdir, "PAGER": "cat"}
        ex = api.exec_create(
            self.container.id,
            shell,
            stdin=True,
            tty=True,
            environment=env,
            workdir=self.config.docker.workdir,
        )
        self._sock = api.exec_start(ex["Id"], socket=True, tty=True)._sock
        self._sock.setblocking(False)

    def close(self) -> None:
        """Free the container and wait until it is gone."""
        self._release(wait=True)

    def _release(self, wait: bool) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
        if self.container is not None:
            self.pool.release(self.container, wait=wait)
            self.container = None

    # -- steps -------------------------------------------------------------------
    def _recv(self, wait: float) -> bytes:
        r, _, _ = select.select([self._sock], [], [], max(wait, 0))
        if not r:
            return b""
        try:
            data = self._sock.recv(1 << 16)
        except BlockingIOError:
            return b""
        if not data:
            raise SandboxError("the terminal closed (the shell exited)")
        return data

    def _read_until_prompt(self, duration: float) -> tuple[bytes, bool, bool]:
        """(output, prompt returned, truncated) read for at most `duration` seconds."""
        cap = self.config.docker.output_cap
        deadline = time.monotonic() + duration
        buf = bytearray()
        truncated = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(buf), False, truncated
            data = self._recv(left)
            if not data:
                continue
            if truncated:  # draining a flood after C-c: keep only the tail for the prompt
                tail = (bytes(buf[-256:]) + data)[-256:]
                if PROMPT_RE.search(tail):
                    return (
                        bytes(buf)
                        + b"\n[output truncated]\n"
                        + tail[tail.rfind(b"user@sandbox:") :],
                        True,
                        True,
                    )
                continue
            buf += data
            if len(buf) > cap:
                del buf[cap:]
                truncated = True
                self._sock.sendall(KEYS["C-c"])
                deadline = max(deadline, time.monotonic() + 10)
                continue
            if PROMPT_RE.search(bytes(buf[-256:])):
                return bytes(buf), True, False

    def step(self, action: Action) -> Observation:
        if self._sock is None:
            raise SandboxError("step before reset")
        keys, duration = parse_action(action)
        duration = min(
            duration if duration is not None else self.config.default_duration,
            self.config.docker.step_timeout,
        )
        self._sock.sendall(keys)
        raw, prompt, truncated = self._read_until_prompt(duration)
        return Observation(
            clean(raw),
            truncated=truncated,
            state_json=json.dumps({"prompt_returned": prompt, "waited_s": duration}),
        )

    def describe(self) -> dict[str, Any]:
        d = self.config.docker
        return {
            "backend": "docker",
            "image": d.image,
            "config": d.summary(),
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
        }
