"""Controllable conditions: parsed at submit, drawn per episode, real answers in containers."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.conditions import KINDS, demo_job, parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas import validate_dict
from worldtrace.schemas.parsing import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def job(conditions, **extra) -> dict:
    return {
        "name": "cond",
        "sandbox": "terminal",
        "conditions": conditions,
        "tasks": [{"id": "t", "actions": ["ls\n"]}],
        **extra,
    }


# -- parsing and sampling (no docker) ----------------------------------------------------
def test_every_form_parses_to_the_shared_vocabulary():
    spec = parse_conditions(
        [
            "disk_full",
            {"memory_low": "64m"},
            {"read_only": "/etc"},
            {"missing_commands": ["git", "python3"]},
            {"kind": "clock", "offset": "-3y", "rate": 0.5},
            {"corrupt_file": {"path": "a.json", "bytes": 4}},
        ]
    )
    assert [e.condition.record() for e in spec.apply][:4] == [
        {"kind": "disk_full", "size": "16m", "path": None},
        {"kind": "memory_low", "limit": "64m"},
        {"kind": "read_only", "paths": ["/etc"]},
        {"kind": "missing_commands", "commands": ["git", "python3"]},
    ]
    assert spec.apply[4].rate == 0.5
    again = JobSpec.from_dict(JobSpec.from_dict(job(spec.to_dict())).to_dict())
    assert again.conditions == spec  # the stored job reads back the same


def test_bad_conditions_are_refused_at_submit_with_their_place():
    with pytest.raises(ConfigError) as e:
        JobSpec.from_dict(
            job(
                {
                    "rate": 1.5,
                    "apply": [
                        "disk_ful",
                        {"memory_low": "1m"},
                        {"clock": {"offset": "3 years"}},
                        "disk_full",
                        {"inodes_low": {"free": 3}},
                    ],
                }
            )
        )
    assert str(e.value).splitlines() == [
        "conditions.rate: must be a number from 0 to 1",
        "conditions.apply[0]: unknown condition 'disk_ful' (known: " + ", ".join(KINDS) + ")",
        "conditions.apply[1].memory_low.limit: memory '1m' is below the floor of 16m "
        "(limits cannot be removed)",
        "conditions.apply[2].clock.offset: not a clock offset: '3 years' "
        "(write e.g. -3y, +2d, -90m)",
        "conditions.apply[4]: inodes_low conflicts with condition 3 "
        "(use `pick: one` to draw one of them)",
    ]


def test_seeded_rate_applies_to_the_expected_share_reproducibly():
    spec = JobSpec.from_dict(
        job(
            {"rate": 0.5, "apply": ["disk_full", {"kind": "memory_low", "rate": 0.2}]},
            episodes=2000,
            seed=11,
        )
    )
    drawn = [spec.conditions_for(ep) for ep in spec.expand()]
    share = sum(bool(c) for c in drawn) / len(drawn)
    memory = sum(any(x.kind == "memory_low" for x in c) for c in drawn) / len(drawn)
    assert abs(share - 0.5) < 0.04 and abs(memory - 0.1) < 0.025
    assert all(c == () or c[0].kind == "disk_full" for c in drawn)  # rate 1 within the half
    again = JobSpec.from_dict(job(spec.conditions.to_dict(), episodes=2000, seed=11))
    assert [again.conditions_for(ep) for ep in again.expand()] == drawn
    other = JobSpec.from_dict(job(spec.conditions.to_dict(), episodes=2000, seed=12))
    assert [other.conditions_for(ep) for ep in other.expand()] != drawn


def test_pick_one_draws_by_weight_and_seeds_corruption_per_episode():
    spec = JobSpec.from_dict(
        job(
            {
                "pick": "one",
                "apply": [
                    {"kind": "corrupt_file", "path": "a", "rate": 3},
                    {"kind": "clock", "rate": 1},
                ],
            },
            episodes=1000,
        )
    )
    drawn = [spec.conditions_for(ep) for ep in spec.expand()]
    assert all(len(c) == 1 for c in drawn)
    corrupt = [c[0] for c in drawn if c[0].kind == "corrupt_file"]
    assert abs(len(corrupt) / 1000 - 0.75) < 0.05
    assert len({c.seed for c in corrupt}) == len(corrupt)  # each episode its own bytes


def test_every_condition_has_a_valid_example():
    files = sorted(EXAMPLES.glob("conditions-*.yaml"))
    kinds = set()
    for path in files:
        spec = JobSpec.load(path)
        kinds.update(e.condition.kind for e in spec.conditions.apply)
    assert kinds == set(KINDS)


# -- real containers ---------------------------------------------------------------------
@pytest.mark.docker
def test_terminal_under_conditions_meets_the_real_answers(docker_engine):
    """disk_full, read_only, missing_commands and memory_low at once, in one container;
    the host and another container are unaffected."""
    conditions = parse_conditions(
        ["disk_full", {"read_only": "/etc"}, {"missing_commands": ["git"]}, {"memory_low": "64m"}]
    ).sample(0)
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    plain = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20, memory="256m")))
    s.reset(TaskSpec("c", setup=("echo hello > notes.txt",)), conditions=conditions)
    plain.reset(TaskSpec("p"))
    try:
        hc = docker_engine.api.inspect_container(s.container.id)["HostConfig"]
        assert hc["Memory"] == 64 << 20  # a container of its own, not a warm one
        o = s.step(keystrokes("dd if=/dev/zero of=big bs=1k count=64; echo rc=$?\n"))
        assert "No space left on device" in o.text and "rc=1" in o.text
        o = s.step(keystrokes("cp notes.txt copy.txt; echo rc=$?\n"))
        assert "No space left on device" in o.text and "rc=1" in o.text
        o = s.step(keystrokes("touch /etc/x; echo rc=$?\n"))
        assert "touch: cannot touch '/etc/x': Read-only file system\nrc=1" in o.text
        o = s.step(keystrokes("git --version; echo rc=$?\n"))
        assert "bash: git: command not found\nrc=127" in o.text
        hog = "python3 -c 'x = bytearray(200 << 20)'; echo rc=$?\n"
        o = s.step(keystrokes(hog, duration=15))
        assert "Killed\nrc=137" in o.text and not o.is_error  # the kernel's answer
        # another container and the host: space, memory and commands as usual
        o = plain.step(  # the prompt ends the step; 15 s leave room under load
            keystrokes("dd if=/dev/zero of=big bs=1M count=8 2>&1 | tail -1; " + hog, duration=15)
        )
        assert "8388608 bytes" in o.text and "rc=0" in o.text
        assert "git version" in plain.step(keystrokes("git --version\n")).text
        assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0
        d = s.describe()
        assert d["conditions"] == [
            {"kind": "disk_full", "size": "16m", "path": "/root"},
            {"kind": "read_only", "paths": ["/etc"]},
            {"kind": "missing_commands", "commands": ["git"]},
            {"kind": "memory_low", "limit": "64m"},
        ]
        state = d["initial_state"]
        assert "Condition: the disk is full: no space is left in /root" in state
        assert "Installed tools: bash sh python3 curl" in state  # git is gone
    finally:
        s.close()
        plain.close()


@pytest.mark.docker
def test_stage_conditions_in_a_real_shell(docker_engine):
    """Conditions set up inside the container: user, clock, lock, corruption, inodes."""
    conditions = parse_conditions(
        [
            {"permission": "nobody"},
            {"clock": "-3y"},
            {"file_locked": "app.lock"},
            {"corrupt_file": {"path": "data.txt", "bytes": 8, "offset": 0, "seed": 1}},
            {"inodes_low": {"free": 2}},
            {"pids_low": 32},
            {"cpu_slow": 0.5},
            {"setup": {"commands": ["echo staged > /srv/marker"], "description": "a marker"}},
        ]
    ).sample(0)
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    s.reset(TaskSpec("c", setup=("printf 0123456789abcdef > data.txt",)), conditions=conditions)
    try:
        hc = docker_engine.api.inspect_container(s.container.id)["HostConfig"]
        assert (hc["PidsLimit"], hc["NanoCpus"]) == (32, 5 * 10**8)
        o = s.step(keystrokes("id -un; touch /etc/x; cat /srv/marker\n"))
        assert "nobody\ntouch: cannot touch '/etc/x': Permission denied\nstaged\n" in o.text
        o = s.step(keystrokes("date -u +%s\n"))  # libfaketime's `y` is 365 days, so
        behind = time.time() - int(o.text.splitlines()[1])  # `date +%Y` was a year off
        assert abs(behind - 3 * 365 * 86400) < 300  # every Dec 31 after a leap day
        o = s.step(keystrokes("flock -n app.lock true; echo rc=$?\n"))
        assert "rc=1" in o.text
        o = s.step(keystrokes("tail -c 8 data.txt; echo; wc -c < data.txt\n"))
        assert o.text.splitlines()[1:3] == ["89abcdef", "16"]  # the first 8 bytes changed
        o = s.step(keystrokes("head -c 8 data.txt | od -An -c | tr -d ' '\n"))
        assert o.text.splitlines()[1] != "01234567"
        o = s.step(keystrokes("touch a b c; echo rc=$?\n"))
        assert "touch: cannot touch 'c': No space left on device\nrc=1" in o.text  # 2 were free
    finally:
        s.close()


@pytest.mark.docker
def test_conditions_reach_the_record_and_a_kill_is_an_observation(docker_engine, store, repo):
    """A SWE job under memory_low and disk_full: the OOM kill and ENOSPC are observations
    of a successful episode, and the trajectory states its conditions."""
    spec = JobSpec.from_dict(
        {
            "name": "swe-cond",
            "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"step_timeout": 20}},
            "conditions": [{"memory_low": "64m"}, "disk_full"],
            "tasks": [
                {
                    "id": "t",
                    "actions": [
                        {"tool": "bash", "arguments": {"command": "python3 -c 'x = b\"a\" * (200 << 20)'"}},
                        {"tool": "edit", "arguments": {"path": "pkg/calc.py", "content": "y = 1\n" * 1000}},
                    ],
                }
            ],
        }
    )  # fmt: skip
    [t] = run_job(spec, store.raw).trajectories
    assert t.outcome.status == "success" and validate_dict(t.to_dict()) == []
    hog, edit = t.turns
    assert hog.observation.exit_code == 137 and hog.observation.is_error
    assert edit.observation.text == "error: cannot write pkg/calc.py: No space left on device"
    recorded = json.loads(t.conditions)
    assert recorded == [
        {"kind": "memory_low", "limit": "64m"},
        {"kind": "disk_full", "size": "16m", "path": "/repo"},
    ]
    assert "Condition: memory is limited to 64 MiB" in t.system.initial_state
    assert "Condition: the disk is full: no space is left in /repo" in t.system.initial_state


def test_demo_job_draws_each_condition_once():
    spec = JobSpec.from_dict(demo_job())
    drawn = [tuple(c.kind for c in spec.conditions_for(ep)) for ep in spec.expand()]
    assert drawn == [("disk_full",), ("memory_low",), ("missing_commands",), ()]
