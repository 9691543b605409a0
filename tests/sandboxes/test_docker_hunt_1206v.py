"""Docker defects found in a hunt (12-06, v), each against real containers.

- Whatever reached PID 1's stdout (`yes > /proc/1/fd/1`, even under `read_only: true`)
  grew the container's json-file log in /var/lib/docker without bound (509 MB in 10 s),
  and a background writer kept it growing after the collector was killed: sandbox
  containers now log nothing (`docker.NO_LOGS`).
- The idle PID 1 (`sleep 3600 & wait` in a loop) spun at 100% CPU, forking, once `sleep`
  was gone (`missing_commands: [sleep]`, or killed by the agent), and its `sleep`
  inherited PID 1's ignored TERM, so `pkill sleep` did not end it. PID 1 now blocks in a
  shell builtin (`docker.IDLE_COMMAND`) and needs no program of the image.
- Job mistakes accepted or named wrong: `missing_commands: [dash]`, `tmpfs_size: '0'`.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.execs import exec_output
from worldtrace.sandboxes.terminal import TerminalSandbox
from worldtrace.schemas.parsing import ConfigError, parse

from .test_terminal_hunt_1206v import terminal

pytestmark = pytest.mark.docker

IMAGES = ("worldtrace/debian:latest", "worldtrace/busybox:latest")


def run(s: TerminalSandbox, keys: str, duration: float = 15) -> str:
    o = s.step(keystrokes(keys, duration=duration))
    assert json.loads(o.state_json)["prompt_returned"], o.text
    return o.text


@pytest.mark.parametrize("conditions", [(), ({"read_only": ["/etc"]},)])
def test_pid1_output_reaches_no_file_on_the_host(docker_engine, conditions):
    """Found: 4 MB written to /proc/1/fd/1 grew the json-file log by 4 MB; a warm
    container and one started for an episode's conditions alike."""
    s = terminal(conditions, read_only=True)
    try:
        run(s, "head -c 4000000 /dev/zero > /proc/1/fd/1; echo wrote\n")
        info = docker_engine.api.inspect_container(s.container.id)
        assert info["HostConfig"]["LogConfig"]["Type"] == "none", info["HostConfig"]["LogConfig"]
        assert info["LogPath"] == "", info["LogPath"]  # no file grows on the host
    finally:
        s.close()


def idle_cpu_ticks(docker_engine, container) -> int:
    """User and system clock ticks PID 1 has used so far (`/proc/1/stat`)."""
    ex = docker_engine.api.exec_create(container.id, ["cat", "/proc/1/stat"])
    fields = exec_output(container, ex["Id"]).decode().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.parametrize(
    ("image", "conditions"),
    [
        (IMAGES[0], ({"missing_commands": ["sleep"]},)),
        (IMAGES[1], ()),  # busybox runs its applets itself: no command can be missing
    ],
)
def test_pid1_needs_no_sleep_and_does_not_spin(docker_engine, image, conditions):
    """Found: with `sleep` removed and init's `sleep` child killed, PID 1 forked without
    end (100% sy CPU). Now PID 1's idle child is a shell builtin: killing it costs one
    fork, and no command of the image is needed."""
    s = terminal(conditions, image=image)
    try:
        # every child of PID 1 is killed (PID 1 itself ignores the signal), twice
        kill = "for p in $(cat /proc/1/task/1/children); do kill -9 $p; done; echo killed\n"
        run(s, kill)
        run(s, kill)
        before = idle_cpu_ticks(docker_engine, s.container)
        run(s, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo counted\n", 30)
        used = idle_cpu_ticks(docker_engine, s.container) - before
        assert used <= 5, f"PID 1 used {used} ticks while idle"
        out = run(s, "cat /proc/1/status | grep -i '^state'; echo alive\n")
        assert "alive" in out
    finally:
        s.close()


def test_pid1_child_takes_term(docker_engine):
    """Found: `pkill sleep` left init's `sleep 3600` running (it inherited PID 1's ignored
    TERM). PID 1's child now takes TERM as any process does."""
    s = terminal()
    try:
        out = run(s, "grep SigIgn /proc/$(cat /proc/1/task/1/children | cut -d' ' -f1)/status\n")
        ignored = int(out.split("SigIgn:")[-1].split()[0], 16)
        assert not ignored & (1 << (15 - 1)), out  # TERM (15) is not ignored
        assert not ignored & (1 << (1 - 1)), out  # nor HUP
    finally:
        s.close()


def test_job_mistakes_are_refused_at_load_naming_what_is_wrong():
    """Found: `missing_commands: [dash]` was accepted (Debian's /bin/sh is dash: every
    command of the sandbox then failed), and `tmpfs_size: '0'` was refused as `memory '0'
    is below the floor`."""
    with pytest.raises(ConfigError) as got:
        parse_conditions([{"missing_commands": ["git", "dash"]}])
    assert "commands[1]: dash cannot be removed: it is what /bin/sh commonly is" in str(got.value)
    with pytest.raises(ConfigError) as got:
        parse(DockerConfig, {"tmpfs_size": "0"})
    assert str(got.value) == "tmpfs_size: tmpfs_size '0' is below the floor of 16m"
