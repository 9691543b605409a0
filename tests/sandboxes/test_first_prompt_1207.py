"""The first prompt drawn late (found: CI on 12-07 under three test workers, a replay's
trajectory id differed from its original's while every observation was the same). bash
prints our mark (`PROMPT_COMMAND`) and then draws its prompt; a reset waited at most
`MARK_WAIT` (1 s) for the prompt's text after the mark, so a shell starved of CPU for
longer recorded `Prompt: ` with nothing after it in the initial state, which is part of
the trajectory's content and id. The first prompt is ours, never empty: the reset now waits
for its text. Here a shell draws it 2 s after its mark (`$(sleep 2)` in PS1). Real
containers."""

from __future__ import annotations

import shlex
import time

import pytest
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import MARK_WAIT, PROMPT, TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

LATE = 2
"""Seconds the shell takes to draw its prompt after the mark: over `MARK_WAIT`."""
SLOW_BASH = "/usr/local/bin/slowbash"
SCRIPT = ("#!/bin/bash", f"export PS1='$(sleep {LATE}){PROMPT}'", 'exec /bin/bash "$@"')
SETUP = f"printf '%s\\n' {' '.join(map(shlex.quote, SCRIPT))} > {SLOW_BASH} && chmod +x {SLOW_BASH}"
"""A bash that sleeps before drawing our prompt (its name ends in `bash`: it gets the mark
as bash does). A script does not inherit PS1 (bash unsets it where it is not
interactive), so ours is written into it."""


def test_a_first_prompt_drawn_late_is_in_the_initial_state():
    assert LATE > MARK_WAIT
    s = TerminalSandbox(
        TerminalConfig(
            docker=DockerConfig(step_timeout=20), shell=(SLOW_BASH, "--norc", "--noprofile", "-i")
        )
    )
    try:
        started = time.monotonic()
        obs = s.reset(TaskSpec("t", setup=(SETUP,)))
        assert s.describe()["initial_state"].splitlines()[-1] == "Prompt: user@sandbox:~$ "
        assert obs.text.endswith("user@sandbox:~$ "), obs.text
        assert time.monotonic() - started >= LATE  # the prompt came that late
        assert s.ended is None
    finally:
        s.close()
