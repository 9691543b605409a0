"""Terminal defects found in a hunt (12-05, f): busybox ash's banner was recorded as the
initial state's `Prompt:`, and its prompt after output without a final newline
(`printf nonl`) was not seen: the step waited its whole duration, `prompt_returned`
false. Real containers."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes

from .test_terminal_hunt_1204 import PROMPT, sandbox

pytestmark = pytest.mark.docker


def check_prompts(s) -> None:
    """The initial state's prompt, and the prompt after output with no final newline."""
    lines = s.describe()["initial_state"].split("\n")
    assert f"Prompt: {PROMPT}" in lines, lines
    o = s.step(keystrokes("printf nonl\n", duration=10))
    state = json.loads(o.state_json)
    assert o.text == f"printf nonl\nnonl{PROMPT}", o.text
    assert state["prompt_returned"] and state["waited_s"] < 5, state
    o = s.step(keystrokes("echo next\n", duration=10))  # the next step starts clean
    assert o.text == f"echo next\nnext\n{PROMPT}", o.text


def test_busybox_prompt_is_the_prompt_and_is_seen_after_output_without_newline(docker_engine):
    """Found: `Prompt: \\n\\nBusyBox v1.35.0 ... Enter 'help' for a list of built-in
    commands.\\n\\nuser@sandbox:~$ `; `printf nonl` waited its whole duration."""
    s = sandbox("worldtrace/busybox:latest")
    try:
        assert "BusyBox v" not in s.describe()["initial_state"]
        check_prompts(s)
    finally:
        s.close()


def test_bash_sees_the_same_prompts_and_not_a_lookalike_after_output(term):
    """Bash marks its prompts: the same answers; output that ends in our PS1's look after
    other text (`xuser@sandbox:~$ `) does not end the step while the command runs on."""
    check_prompts(term)
    lookalike = "printf 'xuser@sandbox:~$ '; sleep 1; echo done\n"
    o = term.step(keystrokes(lookalike, duration=10))
    assert o.text == f"{lookalike}x{PROMPT}done\n{PROMPT}", o.text
    assert json.loads(o.state_json)["prompt_returned"]
