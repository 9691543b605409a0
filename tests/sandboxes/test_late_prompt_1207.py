"""A prompt drawn late (found: CI on 12-07 under three test workers, a replay's trajectory
id differed from its original's while every observation was the same). bash prints our
mark (`PROMPT_COMMAND`) and then draws its prompt; a reset or a step waited at most
`MARK_WAIT` (1 s) for the prompt's text after the mark. A shell starved of CPU for longer
recorded `Prompt: ` with nothing after it in the initial state, which is part of the
trajectory's content and id; a step ended without its prompt and the next observation
began with it. Our PS1 is never empty: after a prompt of ours the next one's text is
waited for (`OURS_WAIT`). Here a shell draws it 2 s after its mark (`$(sleep 2)` in PS1).
Real containers."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import Observation, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import (
    MARK_WAIT,
    OURS_WAIT,
    PROMPT,
    TerminalConfig,
    TerminalSandbox,
)

pytestmark = pytest.mark.docker

LATE = 2
"""Seconds the shell takes to draw its prompt after the mark: over `MARK_WAIT`, under
`OURS_WAIT`."""
SHOWN = "user@sandbox:~$ "
SLOW_BASH = "/usr/local/bin/slowbash"
SCRIPT = ("#!/bin/bash", f"export PS1='$(sleep {LATE}){PROMPT}'", 'exec /bin/bash "$@"')
SETUP = f"printf '%s\\n' {' '.join(map(shlex.quote, SCRIPT))} > {SLOW_BASH} && chmod +x {SLOW_BASH}"
"""A bash that sleeps before drawing our prompt (its name ends in `bash`: it gets the mark
as bash does). A script does not inherit PS1 (bash unsets it where it is not
interactive), so ours is written into it."""


@pytest.fixture
def slow():
    """A terminal on the shell that draws its prompt late (`reset` it)."""
    s = TerminalSandbox(
        TerminalConfig(
            docker=DockerConfig(step_timeout=20), shell=(SLOW_BASH, "--norc", "--noprofile", "-i")
        )
    )
    try:
        yield s
    finally:
        s.close()


def reset(s: TerminalSandbox) -> tuple[Observation, float]:
    """The reset's observation, and the seconds it took."""
    started = time.monotonic()
    return s.reset(TaskSpec("t", setup=(SETUP,))), time.monotonic() - started


def test_a_first_prompt_drawn_late_is_in_the_initial_state(slow):
    assert MARK_WAIT < LATE < OURS_WAIT
    obs, seconds = reset(slow)
    assert slow.describe()["initial_state"].splitlines()[-1] == "Prompt: " + SHOWN
    assert obs.text.endswith(SHOWN), obs.text
    assert seconds >= LATE  # the prompt came that late
    assert slow.ended is None


def test_a_step_whose_prompt_is_drawn_late_ends_with_it(slow):
    reset(slow)
    for word in ("hi", "again"):  # the second would begin with the first's late prompt
        o = slow.step(keystrokes(f"echo {word}\n"))
        state = json.loads(o.state_json)
        assert o.text == f"echo {word}\n{word}\n{SHOWN}", o.text
        assert state["prompt_returned"] and LATE <= state["waited_s"] < OURS_WAIT, state


def test_a_prompt_emptied_by_the_agent_costs_one_longer_wait(slow):
    """Only a command that empties our PS1 meets the longer wait, once."""
    reset(slow)
    o = slow.step(keystrokes("PS1=\n", duration=1))
    assert json.loads(o.state_json)["prompt_returned"]
    o = slow.step(keystrokes("echo bare\n", duration=1))
    state = json.loads(o.state_json)
    assert o.text == "echo bare\nbare\n", o.text
    assert state["prompt_returned"] and state["waited_s"] < OURS_WAIT - 1, state
