"""Terminal defects found in a hunt (12-04): a command's output that looks like our
prompt ended its step while the command ran on, and a configured shell missing from the
image silently became /bin/sh."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

PROMPT = "user@sandbox:~$ "
LOOKALIKE = "printf 'user@sandbox:~$ '; sleep 2; echo done\n"
"""Output that looks like our prompt, from a command still at work for 2 s."""


def sandbox(image: str = "worldtrace/debian:latest", **config) -> TerminalSandbox:
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(image=image, step_timeout=20), **config))
    s.reset(TaskSpec("t"))
    return s


def shard_rows(store) -> list[dict]:
    return [r for f in sorted(store.raw.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.mark.docker
def test_output_that_looks_like_a_prompt_does_not_end_the_step(docker_engine, store):
    """Found: `cat` of a saved session ended the step after 4 ms (prompt_returned true)
    while the command ran on; `build-ok` was never recorded and the next action's keys
    were typed into the running command. Bash marks its prompts: only the mark ends a step."""
    job = {
        "name": "prompt2",
        "sandbox": {"kind": "terminal", "docker": {"step_timeout": 20}},
        "retries": 0,
        "tasks": [
            {
                "id": "t",
                "instruction": "Show the saved session, then build.",
                "setup": [
                    "printf 'user@sandbox:~$ ls\\nnotes.txt\\nuser@sandbox:~$ ' > /root/session.log"
                ],
                "actions": [
                    {"keystrokes": "cat session.log; sleep 3; echo build-ok\n", "duration": 10},
                    "echo next\n",
                ],
            }
        ],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert t.outcome.status == "success", t.outcome
    [row] = shard_rows(store)
    first, second = (turn["observation"] for turn in row["turns"])
    assert first["text"].endswith(f"{PROMPT}build-ok\n{PROMPT}"), first["text"]
    assert json.loads(first["state_json"])["prompt_returned"]
    assert second["text"] == f"echo next\nnext\n{PROMPT}", second["text"]


@pytest.mark.docker
def test_a_lookalike_then_a_wait_ends_at_the_real_prompt(docker_engine):
    """The simpler repro: `printf` of our PS1's look, then `sleep 2`, ended at once."""
    s = sandbox()
    try:
        o = s.step(keystrokes(LOOKALIKE, duration=10))
        assert o.text == f"{LOOKALIKE}{PROMPT}done\n{PROMPT}", o.text
        assert json.loads(o.state_json)["prompt_returned"]
        o = s.step(keystrokes("echo next\n", duration=5))
        assert o.text == f"echo next\nnext\n{PROMPT}", o.text
    finally:
        s.close()


@pytest.mark.docker
def test_the_look_still_ends_what_has_no_mark(docker_engine):
    """The fallback stays: busybox ash has no `PROMPT_COMMAND`; bash redraws its prompt
    without the mark on C-l; an agent that unsets `PROMPT_COMMAND` costs one step its
    duration, then the look ends its steps again. `waited_s` under the duration shows a
    step ended at its prompt, not by our clock."""
    s = sandbox("worldtrace/busybox:latest")
    try:
        o = s.step(keystrokes("echo hi\n", duration=10))
        state = json.loads(o.state_json)
        assert o.text == f"echo hi\nhi\n{PROMPT}" and state["prompt_returned"], o.text
        assert state["waited_s"] < 10
    finally:
        s.close()
    s = sandbox()
    try:
        o = s.step(keystrokes("C-l", duration=10))
        state = json.loads(o.state_json)
        assert state["prompt_returned"] and state["waited_s"] < 10, state
        o = s.step(keystrokes("unset PROMPT_COMMAND\n", duration=1))
        assert o.text == f"unset PROMPT_COMMAND\n{PROMPT}", o.text
        o = s.step(keystrokes("echo after\n", duration=10))
        state = json.loads(o.state_json)
        assert o.text == f"echo after\nafter\n{PROMPT}", o.text
        assert state["prompt_returned"] and state["waited_s"] < 10, state
    finally:
        s.close()


@pytest.mark.docker
def test_a_named_shell_missing_from_the_image_fails_the_attempt(docker_engine, store):
    """Found: `shell: [/bin/nonexistent]` was recorded as a success running dash, its
    prompt the unexpanded `user@sandbox:\\w$ `. A shell the job names must be there."""
    job = {
        "name": "x",
        "sandbox": {
            "kind": "terminal",
            "shell": ["/bin/nonexistent"],
            "docker": {"step_timeout": 20},
        },
        "retries": 0,
        "tasks": [{"id": "a", "instruction": "i", "actions": ["pwd\n"]}],
    }
    result = run_job(JobSpec.from_dict(job), store.raw)
    [t] = result.trajectories
    assert result.failed_attempts == 1 and t.outcome.status == "error", t.outcome
    assert "shell /bin/nonexistent is not in the image" in t.outcome.error, t.outcome.error
    assert not t.turns
    assert all(not row["turns"] for row in shard_rows(store))


@pytest.mark.docker
def test_the_default_shell_still_falls_back_and_a_named_one_is_used(docker_engine):
    """Only the default falls back (bash, else sh); a shell named by PATH is found."""
    s = sandbox("worldtrace/busybox:latest")
    try:
        o = s.step(keystrokes("echo $0\n", duration=10))
        assert o.text == f"echo $0\n/bin/sh\n{PROMPT}", o.text
    finally:
        s.close()
    s = sandbox(shell=("bash", "--norc", "--noprofile", "-i"))
    try:
        o = s.step(keystrokes("echo $0\n", duration=10))
        assert o.text == f"echo $0\nbash\n{PROMPT}", o.text
    finally:
        s.close()
    config = TerminalConfig(
        docker=DockerConfig(image="worldtrace/busybox:latest", step_timeout=20),
        shell=("/bin/bash", "-i"),
    )
    s = TerminalSandbox(config)
    try:
        with pytest.raises(SandboxError, match="shell /bin/bash is not in the image"):
            s.reset(TaskSpec("t"))
    finally:
        s.close()
