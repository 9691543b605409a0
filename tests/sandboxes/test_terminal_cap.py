"""Output over the cap: the flood is cut, and the turns after it stay aligned.

When a command prints a little more than the cap it often ends by itself before the C-c
the sandbox sends reaches the shell. That C-c then lands on the prompt (the shell prints
`^C` and a new prompt) and, if the drain stopped at the first prompt, on the next
action's keys: each later observation was the answer to the action before it.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

CAP = 20000
PROMPT = "user@sandbox:~$ "
SIZES = [CAP + 1, CAP + 100, CAP + 1000, CAP + 5000, 2 * CAP] * 3
"""Just over the cap (the command ends by itself around the cut: the race, hit in about a
third of the floods before the fix) and well over it (the C-c stops a running command)."""


@pytest.fixture(params=["worldtrace/debian:latest", "worldtrace/busybox:latest"])
def term(request, docker_engine):
    """bash (readline answers a C-c at the prompt) and busybox ash (its line editor does)."""
    s = TerminalSandbox(
        TerminalConfig(docker=DockerConfig(image=request.param, output_cap=CAP, step_timeout=20))
    )
    s.reset(TaskSpec("t"))
    yield s
    s.close()


@pytest.mark.docker
def test_turns_after_a_cut_flood_answer_their_own_action(term):
    for i, n in enumerate([*SIZES, 10**8]):
        flood = term.step(keystrokes(f"head -c {n} /dev/zero | tr '\\0' y\n", duration=20))
        assert flood.truncated, n
        assert flood.text.endswith("\n[output truncated]\n" + PROMPT), (n, flood.text[-80:])
        assert json.loads(flood.state_json)["prompt_returned"]
        for word in (f"after{i}", f"again{i}"):
            o = term.step(keystrokes(f"echo {word}\n", duration=5))
            assert o.text == f"echo {word}\n{word}\n{PROMPT}", (n, o.text)  # no ^C, no shift
            assert not o.truncated
