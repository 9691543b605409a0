"""Our set-up runs with the job's limits; `pids_low`, `cpu_slow` and `memory_low` hold for
the agent.

Found 12-07: a CI run failed an attempt as `docker could not start the command 'sh'
(exit 126): ... read init-p: connection reset by peer`. The container started under the
condition's process limit, so every exec of the reset (the image's probe, the task's
set-up, the conditions' own, the shell) met it: the engine's runtime, which needs threads
of its own in the container, failed now and then when few slots were left, and a task
whose set-up left processes running took the slots of our probe (its `$(...)` could not
fork) and of the shell's start. `cpu_slow` alike ran the whole reset on its share of a
core (a set-up of a second ran past its step timeout, every attempt), and `memory_low`
killed a set-up that needs more (every attempt). The limits are now the engine's
container update at the end of the reset. Real containers."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

LIMIT = 8
FILL = "for i in 1 2 3 4 5 6; do sleep 600 </dev/null >/dev/null 2>&1 & done"
"""Six processes the task's set-up leaves: with PID 1's two, the container holds `LIMIT`."""


def conditions():
    return parse_conditions([{"pids_low": LIMIT}]).sample(0)


def host_config(docker_engine, sandbox) -> dict:
    """The limits the engine holds for the sandbox's container now."""
    return docker_engine.api.inspect_container(sandbox.container.id)["HostConfig"]


def test_a_terminal_whose_setup_fills_the_limit_starts_as_any_other(docker_engine):
    s = TerminalSandbox(TerminalConfig(shell=("/bin/sh",), docker=DockerConfig(step_timeout=20)))
    try:
        first = s.reset(TaskSpec("t", setup=(FILL,)), conditions=conditions())
        initial = s.describe()["initial_state"].split("\n")
        assert initial[0].startswith("OS: Debian"), initial
        assert "Prompt: user@sandbox:/root$ " in initial, initial
        assert f"Condition: at most {LIMIT} processes can run at once" in initial, initial
        assert "fork" not in first.text.lower(), first.text
        assert host_config(docker_engine, s)["PidsLimit"] == LIMIT
        o = s.step(keystrokes("echo hi; sleep 1 & echo forked\n"))  # the agent meets it
        assert o.text == (
            "echo hi; sleep 1 & echo forked\nhi\n/bin/sh: 0: Cannot fork\nuser@sandbox:/root$ "
        ), o.text
    finally:
        s.close()


def test_a_swe_reset_whose_setup_fills_the_limit_lists_the_repository(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20), repo=str(repo)))
    try:
        first = s.reset(TaskSpec("t", setup=(FILL,)), conditions=conditions())
        assert first.text.startswith("Repository at /repo (2 files):\n"), first.text
        assert {"README.md", "pkg/calc.py"} <= set(first.text.split("\n")), first.text
        assert host_config(docker_engine, s)["PidsLimit"] == LIMIT
    finally:
        s.close()


BUSY = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"
"""A shell loop of ~0.15 s on a core here: ~7 s on 2% of one."""


def test_a_set_up_runs_at_full_speed_and_the_agent_on_the_slow_cpu(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=5)))
    slow = parse_conditions([{"cpu_slow": 0.02}]).sample(0)
    try:
        s.reset(TaskSpec("t", setup=(BUSY,)), conditions=slow)  # ran past 5 s at 2%
        assert "Condition: the CPU is slow: 0.02 of one core" in s.describe()["initial_state"]
        assert host_config(docker_engine, s)["NanoCpus"] == 2 * 10**7
        o = s.step(keystrokes(BUSY + "; echo done\n", duration=1))  # 1 s: at most ~0.1 s
        assert not json.loads(o.state_json)["prompt_returned"], o.text  # of a core's work
    finally:
        s.close()


FAT = "python3 -c \"b = b'x' * (48 << 20)\""
"""48 MiB written (a `bytearray` of zeros would map pages that are never touched)."""


def test_a_set_up_that_needs_more_memory_runs_and_the_agent_meets_the_limit(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    low = parse_conditions([{"memory_low": "32m"}]).sample(0)
    try:
        s.reset(TaskSpec("t", setup=(FAT,)), conditions=low)  # killed under 32m, exit 137
        hc = host_config(docker_engine, s)
        assert (hc["Memory"], hc["MemorySwap"]) == (32 << 20, 32 << 20)
        o = s.step(keystrokes(FAT + "; echo rc=$?\n"))
        assert o.text.endswith("\nKilled\nrc=137\nuser@sandbox:~$ "), o.text
    finally:
        s.close()


def test_a_set_up_that_leaves_more_in_memory_than_the_limit_is_the_jobs_to_fix(docker_engine):
    """What the set-up keeps in memory (a tmpfs file) cannot be given back: the limit
    cannot be set, alike on every attempt (not retried), said with the engine's numbers."""
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    low = parse_conditions([{"memory_low": "32m"}]).sample(0)
    keep = "head -c 50000000 /dev/zero > /dev/shm/kept"
    try:
        with pytest.raises(SandboxConfigError) as got:
            s.reset(TaskSpec("t", setup=(keep,)), conditions=low)
        said = str(got.value)
        assert said.startswith("condition memory_low: the container holds more memory"), said
        assert "unable to set memory limit to 33554432 (current usage: " in said, said
    finally:
        s.close()
