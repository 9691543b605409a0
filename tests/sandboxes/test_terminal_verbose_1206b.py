"""Found (2026-12-06b): after an agent's `set -v` every step's observation ended with our
`PROMPT_COMMAND`'s text above the prompt (`{ export -n PROMPT_COMMAND; printf
'\\033]6973;...\\007'; } 2>/dev/null`): bash echoes it before running it, and a real shell
has no such command. Now left out of the screen's text and the raw bytes; the agent's own
lines are echoed as bash does, and the variable the agent prints on purpose is still shown.
Real docker sandbox, real bash."""

from __future__ import annotations

import json

import pytest
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas.actions import keystrokes

from .test_prompt_mark_1206 import SHOWN


@pytest.mark.docker
def test_set_v_shows_the_agents_lines_and_nothing_of_ours(docker_engine):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=10)))
    try:
        s.reset(TaskSpec("v"))
        seen = []
        for keys in ("set -v\n", "echo hi\n", "set +v\n", "echo after\n"):
            o = s.step(keystrokes(keys))
            state = json.loads(o.state_json)
            assert state["prompt_returned"], keys
            assert "PROMPT_COMMAND" not in o.text + state["raw"], (keys, o.text, state["raw"])
            seen.append(o.text)
        s.step(keystrokes("set -v\n"))
        o = s.step(keystrokes('echo "$PROMPT_COMMAND"\n'))  # printed on purpose: shown
        assert (
            o.text == f'echo "$PROMPT_COMMAND"\necho "$PROMPT_COMMAND"\n{SHOWN}\nuser@sandbox:~$ '
        )
        assert seen == [
            "set -v\nuser@sandbox:~$ ",
            "echo hi\necho hi\nhi\nuser@sandbox:~$ ",
            "set +v\nset +v\nuser@sandbox:~$ ",
            "echo after\nafter\nuser@sandbox:~$ ",
        ]
    finally:
        s.close()
