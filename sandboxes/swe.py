"""SWE domain: a repository in a container and three tools.

- `read(path, start?, end?)`: the file with line numbers (`cat -n` style);
- `edit(path, old, new)`: replace the one occurrence of `old` with `new` (or write the
  whole file with `content`), observed as a unified diff;
- `bash(command)`: a one-shot command (cwd = the repository) with its exit code, under
  the step timeout and the output cap.

The repository is copied into the container (default) or bind-mounted read-only, so an
episode never changes the host's copy.
"""

from __future__ import annotations

import difflib
import json
import posixpath
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass

from .base import SandboxError, TaskSpec, ToolSpec, Unpicklable
from .docker import (
    FORBIDDEN_HOST_PATHS,
    DockerConfig,
    exec_capture,
    put_file,
    put_tree,
    run_setup,
    shared_pool,
)

_STR = {"type": "string"}
ACTION_SPACE = [
    ToolSpec(
        "read",
        "Show a file with line numbers (cat -n style), optionally lines start..end",
        {
            "type": "object",
            "properties": {
                "path": {**_STR, "description": "file path, relative to the repository"},
                "start": {"type": "integer", "minimum": 1, "description": "first line (default 1)"},
                "end": {"type": "integer", "minimum": 1, "description": "last line (default: end)"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "edit",
        "Replace the single occurrence of `old` with `new` in a file, or write `content` to "
        "it; the answer is a unified diff",
        {
            "type": "object",
            "properties": {
                "path": {**_STR, "description": "file path, relative to the repository"},
                "old": {**_STR, "description": "text that occurs exactly once in the file"},
                "new": {**_STR, "description": "replacement for `old`"},
                "content": {**_STR, "description": "the whole new file (instead of old/new)"},
            },
            "required": ["path"],
            "oneOf": [{"required": ["old", "new"]}, {"required": ["content"]}],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "bash",
        "Run one shell command in the repository and return its output and exit code",
        {
            "type": "object",
            "properties": {"command": {**_STR, "description": "a shell command line"}},
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
]
TOOLS = {t.name: t for t in ACTION_SPACE}
TOOL_NAMES = tuple(TOOLS)


def _safe_repo(value: str) -> str:
    """An existing host directory that exposes nothing of the host's system or sockets."""
    if not value:
        raise ValueError("must name the host directory of the repository")
    real = Path(value).expanduser().resolve()
    for bad in FORBIDDEN_HOST_PATHS:
        if real == Path(bad) or (bad != "/" and real.is_relative_to(bad)):
            raise ValueError(f"{value!r} resolves to {real}, under {bad}: refused for sandboxes")
    if not real.is_dir():
        raise ValueError(f"{value!r} is not a directory on this host")
    if any(p.is_socket() for p in real.iterdir()):
        raise ValueError(f"{value!r} holds a socket: refused for sandboxes")
    return str(real)


@configclass
class SWEConfig:
    """A repository sandbox."""

    docker: DockerConfig = field(default_factory=DockerConfig)
    repo: Annotated[str, AfterValidator(_safe_repo)] = ""
    """Host directory of the repository (system paths and sockets are refused)."""
    repo_path: str = "/repo"
    """Where it appears in the container."""
    mount: bool = False
    """Bind-mount the repository read-only instead of copying it in."""


class SWESandbox(Unpicklable):
    kind = "swe"
    domain = "swe"
    config_class = SWEConfig
    action_kinds = ("tool_call",)

    @classmethod
    def static_action_space(cls, config: SWEConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    @classmethod
    def host_paths(cls, config: SWEConfig) -> list[str]:
        """Host paths the sandbox sees (checked against the store at submit)."""
        return [config.repo]

    def __init__(self, config: SWEConfig):
        if not config.repo:
            raise SandboxError("SWEConfig.repo must name a host directory")
        self.config = config
        # a bind mount is per container, so mounted repositories skip the warm pool
        self.pool = None if config.mount else shared_pool(config.docker)
        self.container = None
        self._initial = ""

    def reset(self, task: TaskSpec) -> Observation:
        self._release(wait=False)  # the last episode's container goes in the background
        d = self.config.docker
        if self.pool is not None:
            self.container = self.pool.acquire()
            put_tree(self.container, self.config.repo, self.config.repo_path)
        else:
            from .docker import IDLE_COMMAND, LABEL, client

            kw = d.run_kwargs()
            kw["working_dir"] = self.config.repo_path
            self.container = client().containers.run(
                d.image,
                IDLE_COMMAND,
                volumes={self.config.repo: {"bind": self.config.repo_path, "mode": "ro"}},
                labels={LABEL: "1"},
                **kw,
            )
        run_setup(self.container, task.setup, d, self.config.repo_path)
        _, listing, _, _ = exec_capture(
            self.container,
            ["sh", "-c", "git ls-files 2>/dev/null || find . -type f | head -200"],
            10,
            1 << 16,
            self.config.repo_path,
        )
        files = [f.removeprefix("./") for f in listing.split()]
        self._initial = (
            f"Repository at {self.config.repo_path} ({len(files)} files):\n"
            + "\n".join(sorted(files)[:200])
        )
        return Observation(self._initial, state_json=json.dumps({"cwd": self.config.repo_path}))

    def close(self) -> None:
        """Free the container and wait until it is gone."""
        self._release(wait=True)

    def _release(self, wait: bool) -> None:
        if self.container is not None:
            if self.pool is not None:
                self.pool.release(self.container, wait=wait)
            else:
                self.container.remove(force=True)
            self.container = None

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.config.repo_path, path))

    def _read(self, path: str) -> tuple[str | None, str]:
        d = self.config.docker
        code, out, _, _ = exec_capture(
            self.container, ["cat", self._path(path)], d.step_timeout, d.output_cap
        )
        if code != 0:
            return None, out
        return out, ""

    def step(self, action: Action) -> Observation:
        if self.container is None:
            raise SandboxError("step before reset")
        try:
            args = json.loads(action.arguments_json or "{}")
        except json.JSONDecodeError as exc:
            return Observation(f"error: arguments are not JSON: {exc.msg}", is_error=True)
        name = action.name
        if name not in TOOLS:
            return Observation(
                f"error: unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})", is_error=True
            )
        problem = TOOLS[name].check(args)
        if problem:  # the tool's own usage error, as a CLI would print it
            return Observation(f"error: {problem}", is_error=True)
        return getattr(self, f"_tool_{name}")(**args)

    def _tool_read(self, path: str, start: int = 1, end: int | None = None) -> Observation:
        text, err = self._read(path)
        if text is None:
            return Observation(err.strip() or f"cannot read {path}", is_error=True, exit_code=1)
        lines = text.splitlines()
        end = len(lines) if end is None else min(end, len(lines))
        body = "\n".join(f"{i:6}\t{lines[i - 1]}" for i in range(max(start, 1), end + 1))
        return Observation(body)

    def _tool_edit(
        self, path: str, old: str | None = None, new: str = "", content: str | None = None
    ) -> Observation:
        before, _ = self._read(path)
        if content is not None:
            after = content
        else:
            if before is None:
                return Observation(f"error: {path} does not exist", is_error=True)
            count = before.count(old or "")
            if not old or count != 1:
                return Observation(
                    f"error: `old` must occur exactly once in {path} (found {count if old else 0})",
                    is_error=True,
                )
            after = before.replace(old, new, 1)
        put_file(self.container, self._path(path), after.encode())
        diff = difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
        return Observation("".join(diff) or "(no change)")

    def _tool_bash(self, command: str) -> Observation:
        d = self.config.docker
        code, out, truncated, timed_out = exec_capture(
            self.container,
            ["sh", "-c", command],
            d.step_timeout,
            d.output_cap,
            self.config.repo_path,
        )
        if timed_out:
            out += f"\n[timed out after {d.step_timeout:g}s]"
        return Observation(
            out,
            exit_code=code,
            is_error=code != 0,
            truncated=truncated,
            state_json=json.dumps({"timed_out": timed_out}),
        )

    def describe(self) -> dict[str, Any]:
        d = self.config.docker
        return {
            "backend": "docker",
            "image": d.image,
            "config": {**d.summary(), "repo": self.config.repo_path, "mount": self.config.mount},
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
        }
