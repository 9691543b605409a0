"""Fixtures the sandbox tests share."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.android_sim import start


@pytest.fixture
def sim():
    """A device simulator on its own loopback port (stopped after the test)."""
    s = start()
    yield s
    s.stop()


@pytest.fixture
def term(docker_engine):
    """A terminal sandbox on the local image, closed after the test."""
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.docker import DockerConfig
    from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    s.reset(TaskSpec("t"))
    yield s
    s.close()


@pytest.fixture
def make():
    """`make(**config)`: a web sandbox, closed after the test."""
    from worldtrace.sandboxes.web import WebConfig, WebSandbox
    from worldtrace.schemas.parsing import parse

    made = []

    def build(**config) -> WebSandbox:
        sb = WebSandbox(parse(WebConfig, config))
        made.append(sb)
        return sb

    yield build
    for sb in made:
        sb.close()
