"""A frozen container is our infrastructure failing, never the environment's answer (T1).

Real containers, frozen by `docker pause` (as a frozen cgroup or a host stall would). A
terminal step whose prompt does not come back, or an SWE command that does not come back,
looks at the container's state: paused, the step raises SandboxError with that reason and
the collector fails the attempt with it, recording no turn for the step. The step timeout
itself is the wait; `docker unpause` in a finally leaves nothing frozen.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.owners import EPISODE_LABEL, OWNER_PID
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

from ..conftest import wait_until
from .test_swe_review_1203 import in_flight

pytestmark = pytest.mark.docker

FROZEN = "the container is paused (docker pause or a frozen cgroup)"


def running(container, words: str) -> bool:
    """Whether a process whose command line starts with `words` runs in the container."""
    procs = container.top()
    cmd = procs["Titles"].index("CMD")
    return any(p[cmd].startswith(words) for p in procs["Processes"])


def unpause(container) -> None:
    """Thaw a container we paused (gone already, or not paused, is fine)."""
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.reload()
        if container.attrs["State"].get("Paused"):
            container.unpause()


def pause_when(docker_engine, episode: str, words: str) -> tuple[threading.Thread, list]:
    """A thread pausing the container of `episode` (ours) once `words` runs in it; the
    paused container lands in the list."""
    labels = [f"{OWNER_PID}={os.getpid()}", f"{EPISODE_LABEL}={episode}"]
    paused: list = []

    def busy():
        for c in docker_engine.containers.list(filters={"label": labels}):
            if running(c, words):
                return c
        return None

    def pause() -> None:
        c = wait_until(busy, timeout=60, what=f"{words!r} in the episode's container")
        c.pause()
        paused.append(c)

    t = threading.Thread(target=pause, daemon=True)
    t.start()
    return t, paused


# -- the sandboxes ----------------------------------------------------------------------------
def test_a_terminal_step_without_its_prompt_in_a_paused_container_raises(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=2, warm=0)))
    s.reset(TaskSpec("pause"))
    try:
        o = s.step(keystrokes("echo before\n"))
        assert json.loads(o.state_json)["prompt_returned"] and "before" in o.text
        s.container.pause()
        try:
            with pytest.raises(SandboxError, match=re.escape(f"no prompt within 2s: {FROZEN}")):
                s.step(keystrokes("echo after\n", duration=2))
        finally:
            unpause(s.container)
        assert s.ended is None  # not a shell that exited: the attempt fails
    finally:
        s.close()


def test_an_swe_command_in_a_container_paused_under_it_raises(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=1, warm=0), repo=str(repo)))
    s.reset(TaskSpec("pause"))
    try:
        assert s.step(tool("bash", command="echo before")).text == "before\n"
        t, got = in_flight(s.step, tool("bash", command="sleep 30; echo done"))
        try:
            wait_until(lambda: running(s.container, "sleep 30"), what="sleep 30 in the container")
            s.container.pause()
            t.join(timeout=20)  # the step timeout (1 s) and the watch's look (2 s) bound it
            assert not t.is_alive(), "the step still waits on the frozen container"
        finally:
            unpause(s.container)
            t.join(timeout=60)
        assert "result" not in got, got.get("result")
        with pytest.raises(SandboxError, match=r"the command got no answer in \d+s \(step "):
            raise got["error"]
        assert str(got["error"]).endswith(f"(step timeout 1s): {FROZEN}")
    finally:
        s.close()


# -- through the collector: the attempt fails, the frozen step is no turn --------------------
def test_a_paused_terminal_fails_the_attempt_without_the_step(docker_engine, store):
    spec = JobSpec.from_dict(
        {
            "name": "term-paused",
            "sandbox": {"kind": "terminal", "docker": {"step_timeout": 10, "warm": 0}},
            "retries": 0,
            "tasks": [
                {
                    "id": "p",
                    "actions": [
                        "echo before\n",
                        {"keystrokes": "sleep 30; echo done\n", "duration": 5},
                        "echo after\n",
                    ],
                }
            ],
        }
    )
    pauser, paused = pause_when(docker_engine, "p-e0", "sleep 30")
    try:
        result = run_job(spec, store.raw)
    finally:
        pauser.join(timeout=60)
        for c in paused:
            unpause(c)
    assert paused, "the container was never paused"
    (t,) = result.trajectories
    assert result.failed_attempts == 1 and t.outcome.status == "error"
    assert f"no prompt within 5s: {FROZEN}" in t.outcome.error
    assert [turn.action.text for turn in t.turns] == ["echo before\n"]
    assert "before" in t.turns[0].observation.text


def test_a_paused_swe_container_fails_the_attempt_without_the_step(docker_engine, store, repo):
    spec = JobSpec.from_dict(
        {
            "name": "swe-paused",
            "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"step_timeout": 1, "warm": 0}},
            "retries": 0,
            "tasks": [
                {
                    "id": "q",
                    "instruction": "A command; the container is frozen under the next one.",
                    "actions": [
                        {"tool": "bash", "arguments": {"command": "echo before"}},
                        {"tool": "bash", "arguments": {"command": "sleep 30; echo done"}},
                        {"tool": "bash", "arguments": {"command": "echo after"}},
                    ],
                }
            ],
        }
    )
    pauser, paused = pause_when(docker_engine, "q-e0", "sleep 30")
    job, got = in_flight(run_job, spec, store.raw)
    try:
        job.join(timeout=30)  # the step timeout (1 s) and the watch's look (2 s) bound it
        assert not job.is_alive(), "the attempt still waits on the frozen container"
    finally:
        pauser.join(timeout=60)
        for c in paused:
            unpause(c)
        job.join(timeout=60)
    assert paused, "the container was never paused"
    result = got["result"]
    (t,) = result.trajectories
    assert result.failed_attempts == 1 and t.outcome.status == "error"
    assert t.outcome.error.endswith(f"(step timeout 1s): {FROZEN}"), t.outcome.error
    assert [turn.observation.text for turn in t.turns] == ["before\n"]
    assert not any("timed out" in turn.observation.text for turn in t.turns)


# -- N1: a fixed hostname, not the random container id ---------------------------------------
def test_sandbox_containers_are_named_sandbox_inside(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=10, warm=0), repo=str(repo)))
    s.reset(TaskSpec("host"))
    try:
        o = s.step(tool("bash", command="hostname; cat /etc/hostname; echo $HOSTNAME"))
        assert o.text == "sandbox\nsandbox\nsandbox\n"
    finally:
        s.close()
