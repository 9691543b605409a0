"""Hunt 1205c (4): a step drained a flood past the step timeout. Over the output cap the
sandbox sends C-c and waits for the prompt that answers it; a flood no C-c stops held
the step 13 s under `step_timeout: 5` (each C-c re-sent after 1 s, the last waited 10 s):

- a background job's flood (`(while :; do echo FLOOD; done) &`): the prompt came back,
  but the wait for quiet after it never ended, since the flood went on;
- a flood that ignores SIGINT: no prompt ever comes.

No step waits past the step timeout, and a prompt that came back ends the drain soon
after it (readline has drawn it within `MARK_WAIT`) though the flood goes on."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox


def _sandbox(step_timeout: float) -> TerminalSandbox:
    docker = DockerConfig(output_cap=4096, step_timeout=step_timeout)
    s = TerminalSandbox(TerminalConfig(docker=docker))
    s.reset(TaskSpec("t"))
    return s


def _state(o) -> dict:
    return json.loads(o.state_json)


@pytest.mark.docker
def test_a_flood_no_c_c_stops_ends_its_step_at_the_step_timeout(docker_engine):
    s = _sandbox(step_timeout=3)
    try:
        o = s.step(keystrokes("""sh -c "trap '' INT; while :; do echo FLOOD; done"\n""", 3))
        state = _state(o)
        assert o.truncated and not state["prompt_returned"]
        assert state["waited_s"] <= 3.2, state["waited_s"]  # was 13 s
    finally:
        s.close()


@pytest.mark.docker
def test_a_background_flood_ends_its_steps_within_the_step_timeout(docker_engine):
    """The hunt's job: a C-c stops no background job, and the drain waited for quiet after
    the C-c's prompt, which never came (13 s). It ends about `MARK_WAIT` after that
    prompt now (2 s: two C-c, two prompts), and never past the step timeout."""
    s = _sandbox(step_timeout=8)
    try:
        s.step(keystrokes("(while :; do echo FLOOD; done) &\n"))
        o = s.step(keystrokes("sleep 1; echo mine\n"))  # a second of flood: over the cap
        assert o.truncated and _state(o)["waited_s"] <= 8.2, _state(o)["waited_s"]  # was 13 s
        o = s.step(keystrokes("true\n"))  # over the cap too, unless its prompt comes first
        assert _state(o)["waited_s"] <= 8.2, _state(o)["waited_s"]
    finally:
        s.close()
