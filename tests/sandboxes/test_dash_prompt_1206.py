"""The prompt under dash (found 12-06): every observation of a dash shell (`shell: /bin/sh`
on Debian, or the default bash removed by `missing_commands`) ended in the literal
`user@sandbox:\\w$ `, our PS1's escape, which dash does not expand: the cwd was never
shown. Every shell now shows `user@sandbox:<cwd>$ `: bash and busybox ash as `\\w` writes
it (the home directory as `~`), dash in full (`/root`: no fork at its prompts, so it
holds where no process can start). Nothing of ours (the prompt's code, bash's
`PROMPT_COMMAND`) shows under `set -x`. Real containers."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

SETUP = ["mkdir -p /root/a /rootx"]
WALK = {
    "cd /tmp\n": "cd /tmp\nuser@sandbox:/tmp$ ",
    "pwd\n": "pwd\n/tmp\nuser@sandbox:/tmp$ ",
    "cd /root/a\n": "cd /root/a\nuser@sandbox:{home}/a$ ",
    "cd /rootx\n": "cd /rootx\nuser@sandbox:/rootx$ ",
    "cd\n": "cd\nuser@sandbox:{home}$ ",
}
"""Keys and the observation they get: the cwd after each `cd`, the home directory (the
workdir, /root) as the shell's `HOME[shell]`, a directory that merely starts with its
name in full."""
TRACED = {
    "set -x\n": "set -x\nuser@sandbox:{home}$ ",
    "cd /tmp\n": "cd /tmp\n+ cd /tmp\nuser@sandbox:/tmp$ ",
    "false\n": "false\n+ false\nuser@sandbox:/tmp$ ",
    "echo $?:$PWD\n": "echo $?:$PWD\n+ echo 1:/tmp\n1:/tmp\nuser@sandbox:/tmp$ ",
}
"""Under `set -x` only the agent's commands are traced, and the prompt keeps `$?`."""
SHELLS = {
    "bash": ("worldtrace/debian:latest", TerminalConfig().shell),
    "dash": ("worldtrace/debian:latest", ("/bin/sh",)),
    "busybox": ("worldtrace/busybox:latest", TerminalConfig().shell),
}
HOME = {"bash": "~", "dash": "/root", "busybox": "~"}


def walk(shell: str, keys: dict[str, str]) -> None:
    image, command = SHELLS[shell]
    config = TerminalConfig(docker=DockerConfig(image=image, step_timeout=20), shell=command)
    s = TerminalSandbox(config)
    try:
        s.reset(TaskSpec("t", setup=tuple(SETUP)))
        prompt = f"Prompt: user@sandbox:{HOME[shell]}$ "
        assert prompt in s.describe()["initial_state"].split("\n"), shell
        for key, seen in keys.items():
            seen = seen.format(home=HOME[shell])
            o = s.step(keystrokes(key, duration=10))
            state = json.loads(o.state_json)
            assert (o.text, state["prompt_returned"]) == (seen, True), (shell, o.text)
            assert state["waited_s"] < 5, (shell, key, state)  # ended at its prompt
    finally:
        s.close()


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_every_shell_shows_the_cwd_as_bash_does(docker_engine, shell):
    """Found: dash's steps ended in `user@sandbox:\\w$ ` after each `cd`. The prompt that
    a `cd` changes is still seen as the prompt (dash and busybox by its look, bash by
    its mark), each step ending there, not at its duration."""
    walk(shell, WALK)


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_set_x_traces_the_agents_commands_only(docker_engine, shell):
    """Found with it: bash traced its `PROMPT_COMMAND` into every observation under
    `set -x` (`++ export -n PROMPT_COMMAND`, `++ printf '\\033]6973;wt-prompt\\007'`)."""
    walk(shell, TRACED)


@pytest.mark.parametrize(
    "sandbox",
    [
        {"sandbox": {"kind": "terminal", "shell": "/bin/sh"}},
        {"sandbox": "terminal", "conditions": [{"missing_commands": ["bash"]}]},
    ],
    ids=["shell-sh", "missing-bash"],
)
def test_a_dash_job_records_the_cwd_in_its_prompts(docker_engine, store, sandbox):
    """The two job files of the report, collected: the initial state's `Prompt:` and
    every turn's prompt show the cwd."""
    job = {
        "name": "dash",
        **sandbox,
        "retries": 0,
        "tasks": [{"id": "t", "instruction": "i", "setup": SETUP, "actions": list(WALK)}],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert t.outcome.status == "success", t.outcome
    assert "Prompt: user@sandbox:/root$ " in t.system.initial_state.split("\n")
    assert [x.observation.text for x in t.turns] == [
        seen.format(home="/root") for seen in WALK.values()
    ]


def test_the_dash_prompt_holds_where_no_process_can_start(docker_engine, store):
    """Under `pids_low` with every process slot taken, the prompt still shows the cwd: a
    prompt that forked (a `$(...)` for bash's `~`) was printed as its unexpanded code,
    after dash's `Cannot fork`, at every step."""
    fill = "for i in 1 2 3 4 5 6 7 8 9; do sleep 60 & done\n"
    job = {
        "name": "dash-pids",
        "sandbox": {"kind": "terminal", "shell": "/bin/sh"},
        "conditions": [{"pids_low": 8}],
        "retries": 0,
        "tasks": [{"id": "t", "instruction": "i", "actions": ["cd /tmp\n", fill, "echo hi\n"]}],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert t.outcome.status == "success", t.outcome
    cd, filled, hi = (x.observation.text for x in t.turns)
    assert cd == "cd /tmp\nuser@sandbox:/tmp$ ", cd
    assert "Cannot fork" in filled and filled.endswith("\nuser@sandbox:/tmp$ "), filled
    assert "PWD" not in filled, filled
    assert hi == "echo hi\nhi\nuser@sandbox:/tmp$ ", hi
