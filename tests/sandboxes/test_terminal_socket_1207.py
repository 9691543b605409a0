"""A terminal's socket closed under it by the docker client's garbage (found: CI on 12-03 and
12-07, an attempt failed with `ValueError: file descriptor cannot be a negative integer
(-1)` from a step's poll). docker's client keeps the socket an exec hijacked in a
reference cycle with its HTTP response (the response, its reader, the socket's file
object, and back). The cycle collector frees them in the order it holds them, and when it
finalizes the response first, the response closes its connection and, with it, the socket
the terminal reads the shell from. A loop of 400 execs lost 1 socket that way. Here every
such response is closed, as that collector may do at any moment. Real containers."""

from __future__ import annotations

import contextlib
import gc

import pytest
import requests
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

SWITCHED = 101
"""The status of the response whose connection an exec took over (`Upgrade: tcp`)."""


def hijacking_responses() -> list[requests.Response]:
    """The live responses of the docker client whose connection an exec took over. By
    `type`: `isinstance` reads `__class__` of objects that are not responses, and some
    of other tests' libraries warn on that (torch's deprecated `reduce_op`)."""
    return [
        o for o in gc.get_objects() if type(o) is requests.Response and o.status_code == SWITCHED
    ]


def close_new(before: list[requests.Response]) -> None:
    """Close the hijacking responses made since `before`, as the cycle collector does when
    it finalizes one before its reader. Older ones are other tests' garbage, some half
    closed by docker's own stream (their close raises, which a finalizer ignores)."""
    for r in hijacking_responses():
        if not any(r is b for b in before):
            with contextlib.suppress(ValueError, OSError):
                r.raw.close()


@pytest.fixture
def uncollected():
    """No cycle collection while the test runs: the responses stay as the last exec left
    them until the test closes them (the collector's timing is otherwise anyone's)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_the_docker_clients_garbage_never_closes_the_terminal(docker_engine, uncollected):
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        for round in range(2):  # a reset opens a new shell: a new exec, a new socket
            before = hijacking_responses()
            s.reset(TaskSpec(f"t{round}"))
            close_new(before)
            obs = s.step(keystrokes(f"echo still-{round}\n"))
            assert f"\nstill-{round}\n" in obs.text, obs.text
            assert s.ended is None
    finally:
        s.close()
