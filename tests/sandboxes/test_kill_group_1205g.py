"""The step timeout's kill (`KILL_GROUP`) says `killed` exactly when a process of the
group was still running: never from how the shell's `kill` builtins answered (hunt 1205g).

busybox's `kill` refuses the `--` dash wants, but kills the group named after it all the
same: the second, busybox-shaped `kill` then found the group gone once the engine had
reaped it, and a write cut at its timeout came back `timed_out` False (1-2 in 30 writes)."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.execs import _kill_group, exec_capture

from ..conftest import wait_until
from .test_exec_unseen_1204c import IMAGES

ZOMBIE = "setsid sh -c 'echo $$ > /tmp/g' & exec sleep 1000"
"""A group whose only process ended by itself and is never reaped: its parent execs
`sleep` at once (a shell waiting on anything would reap it), so the group is a zombie."""

LIVE = "setsid sh -c 'echo $$ > /tmp/g; exec sleep 1000' & exec sleep 1000"


def stat(container, pid: int) -> str:
    """The state letter of `pid` (`/proc/PID/stat`), '' when it is gone."""
    got = exec_capture(container, ["sh", "-c", f"cat /proc/{pid}/stat 2>/dev/null"], 10, 4096)
    return got[1].rsplit(") ", 1)[1].split()[0] if got[1].strip() else ""


def group_of(container, command: str) -> int:
    """Start `command` detached as root and return the group it wrote to /tmp/g."""
    api = container.client.api
    exec_capture(container, ["sh", "-c", "rm -f /tmp/g"], 10, 1024)
    api.exec_start(
        api.exec_create(container.id, ["sh", "-c", command], user="0")["Id"], detach=True
    )

    def read():
        return exec_capture(container, ["sh", "-c", "cat /tmp/g 2>/dev/null"], 10, 1024)[1]

    return int(wait_until(lambda: read().strip(), what="the group's id in /tmp/g"))


@pytest.fixture(params=IMAGES, ids=["debian", "busybox"])
def container(request, docker_engine):
    pool = ContainerPool(DockerConfig(image=request.param, warm=0))
    try:
        yield pool.acquire()
    finally:
        pool.close()


def test_a_group_that_only_ended_by_itself_was_not_killed(container):
    group = group_of(container, ZOMBIE)
    wait_until(lambda: stat(container, group) == "Z", what="the group's shell to exit")
    assert _kill_group(container, group) is False


def test_a_running_group_is_killed_and_gone_when_the_kill_returns(container):
    group = group_of(container, LIVE)
    assert stat(container, group) == "S"
    assert _kill_group(container, group) is True
    assert stat(container, group) in ("", "Z")
