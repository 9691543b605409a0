"""A condition's set-up command runs with an end mark (CI 1206c: docker's client lost the
output of `missing_commands`' check, `left echo echo`, and the condition was taken to
hold while `echo` still ran). The mark never shows in what the command printed, its exit
status is its own, and output without the mark is our failure, never read as empty."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.base import SandboxError
from worldtrace.sandboxes.execs import RootRunner

BUSYBOX = "worldtrace/busybox:latest"


@pytest.fixture
def box(docker_engine):
    c = docker_engine.containers.run(
        BUSYBOX,
        ["sleep", "600"],
        detach=True,
        network_disabled=True,
        labels={"worldtrace.test": "1"},
    )
    yield c
    c.remove(force=True)


@pytest.mark.docker
def test_a_condition_command_s_output_is_its_own_with_its_status(box):
    run = RootRunner(box, 20)
    assert run("echo hi") == "hi\n"
    assert run("printf 'no newline'") == "no newline"
    assert run("true") == ""
    assert run("set -- a b\nfor x; do echo left $x; done") == "left a\nleft b\n"
    assert run("exit 0; echo never") == ""  # its own exit ends it, the mark still comes
    with pytest.raises(SandboxError) as e:
        run("echo about to fail; exit 3")
    assert "condition set-up failed (3): echo about to fail; exit 3: about to fail" in str(e.value)
    assert "worldtrace-end" not in str(e.value)


@pytest.mark.docker
def test_output_that_lost_its_mark_is_our_failure_not_an_empty_answer(box):
    """A lost stream cannot be caused at will; a command that ends the shell before the
    mark (a kill of the shell that would print it) loses it the same way: refused, not
    read as nothing."""
    run = RootRunner(box, 20)
    with pytest.raises(SandboxError) as e:
        run("echo left echo echo; kill -9 $$")
    assert "the output of 'echo left echo echo; kill -9 $$' came without its end mark" in str(
        e.value
    )
