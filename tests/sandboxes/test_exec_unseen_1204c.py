"""The agent's processes show no wrapper of ours; the step timeout still holds (1204c).

Real containers of both local images. What `ps` or `/proc/*/cmdline` lists inside the
sandbox is the environment's answer: no `timeout -s KILL N sh -c ...` line of ours may be
in it, while a command past its step timeout is still killed with its whole process group
(reported `timed_out`, exit 137), output past the cap still kills, and the exit code is
the command's own.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.execs import exec_capture, write_file
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox

from ..conftest import wait_until
from .test_swe_review_1203 import in_flight, running

pytestmark = pytest.mark.docker

IMAGES = ["worldtrace/debian:latest", "worldtrace/busybox:latest"]
LIST = 'for p in /proc/[0-9]*; do echo "${p#/proc/} $(tr "\\0" " " < $p/cmdline)"; done'
"""Every process of the container, `PID ARGS`, with shell builtins and `tr` only."""


def processes(text: str) -> dict[int, str]:
    """`PID ARGS` lines -> {pid: args} (a process gone while listed has no args)."""
    out = {}
    for line in text.splitlines():
        pid, _, args = line.partition(" ")
        if pid.isdigit() and args.strip():
            out[int(pid)] = args.strip()
    return out


@pytest.fixture(params=IMAGES, ids=["debian", "busybox"])
def swe(request, docker_engine, repo):
    s = SWESandbox(
        SWEConfig(
            docker=DockerConfig(image=request.param, step_timeout=1, output_cap=4096, warm=0),
            repo=str(repo),
        )
    )
    s.reset(TaskSpec("unseen"))
    yield s
    s.close()


def state(o) -> dict:
    return json.loads(o.state_json)


def test_the_agents_ps_shows_its_own_shell_leading_its_session_and_nothing_of_ours(swe):
    o = swe.step(tool("bash", command=f'echo "me $$ $PPID"; {LIST}'))
    me, pid, ppid = o.text.splitlines()[0].split()
    procs = processes(o.text)
    for args in procs.values():
        assert not args.startswith("timeout"), o.text
        assert "/proc/1/stat" not in args and 'cd -- "$1"' not in args, o.text  # our wrappers
    # the agent's shell was started by the engine and leads its own session: nothing of
    # ours stands above it (a real machine's `sh -c` under a login shows the same shape)
    assert (me, ppid) == ("me", "0"), o.text
    assert procs[int(pid)].startswith("sh -c echo"), o.text
    ps = "ps aux 2>/dev/null || ps"  # busybox's ps takes no options
    o = swe.step(tool("bash", command=ps))
    assert o.exit_code == 0 and "timeout" not in o.text, o.text


def test_a_timed_out_command_dies_with_its_whole_process_group(swe):
    """The step timeout kills the command and what it started (busybox's `timeout` killed
    only its child), reported as before: exit 137, `timed_out`."""
    o = swe.step(tool("bash", command="sleep 171 & sleep 172; echo unseen"))
    assert (o.exit_code, state(o)["timed_out"]) == (137, True), o
    assert o.text == "[timed out after 1s]"
    left = processes(swe.step(tool("bash", command=LIST)).text).values()
    assert not [a for a in left if a.startswith("sleep 17")], left


def test_guarantees_of_the_one_shot_command(swe):
    """The command's own exit code; output past the cap kills the command (code None);
    a command ending in time is never flagged."""
    o = swe.step(tool("bash", command="echo out; exit 3"))
    assert (o.text, o.exit_code, state(o)["timed_out"]) == ("out\n", 3, False)
    o = swe.step(tool("bash", command="sleep 173 & yes flood"))
    assert o.truncated and o.exit_code is None and len(o.text) == 4096
    left = processes(swe.step(tool("bash", command=LIST)).text).values()
    assert not [a for a in left if a.startswith(("sleep 173", "yes"))], left
    o = swe.step(tool("bash", command="kill -9 $$"))  # the agent's own kill: no timeout
    assert (o.exit_code, state(o)["timed_out"]) == (137, False)


@pytest.mark.parametrize("image", IMAGES, ids=["debian", "busybox"])
def test_a_write_on_stdin_shows_nothing_of_ours_and_times_out(docker_engine, image):
    """`write_file` (the edit tool's write) runs `cat` on stdin: while it hangs on a FIFO
    no one reads, the container's processes show `cat`'s shell and no wrapper; at the
    step timeout it is killed and reported timed out."""
    pool = ContainerPool(DockerConfig(image=image, warm=0))
    try:
        c = pool.acquire()
        assert exec_capture(c, ["sh", "-c", "mkfifo /tmp/ff"], 10, 1024)[0] == 0
        t, got = in_flight(write_file, c, "/tmp/ff", b"data", 2.0)

        def writer() -> dict[int, str]:
            procs = processes(exec_capture(c, ["sh", "-c", LIST], 10, 1 << 16)[1])
            return procs if any('cat > "$1"' in a for a in procs.values()) else {}

        procs = wait_until(writer, what="the writer in the container")
        assert not [a for a in procs.values() if a.startswith("timeout")], procs
        t.join(timeout=30)
        assert got.get("result") == ("killed by signal 9", True), got
    finally:
        pool.close()


def test_our_commands_need_only_sh(swe):
    """No `timeout` is needed in the image any more: the agent removing it changes only
    its own answers; with `sh` gone no command can start, which is our failure, raised."""
    o = swe.step(tool("bash", command="rm -f /usr/bin/timeout /bin/timeout; echo gone"))
    assert (o.text, o.exit_code) == ("gone\n", 0)
    o = swe.step(tool("bash", command="sleep 100"))
    assert (o.exit_code, state(o)["timed_out"]) == (137, True)  # still cut at the timeout
    assert swe.step(tool("read", path="pkg/calc.py")).text.startswith("     1\tdef add")
    swe.step(tool("bash", command="rm -f /usr/bin/sh /bin/sh"))
    for action in (tool("bash", command="echo hi"), tool("read", path="pkg/calc.py")):
        with pytest.raises(SandboxError, match="could not start"):
            swe.step(action)


def test_a_write_in_a_container_frozen_under_it_raises(docker_engine):
    """The timeout kept from outside cannot run in a frozen container: past the step
    timeout the container is looked at, and a paused one fails the write with that
    reason (no answer is our infrastructure's, never a timeout of the command)."""
    import docker.errors

    pool = ContainerPool(DockerConfig(warm=0))
    try:
        c = pool.acquire()
        assert exec_capture(c, ["sh", "-c", "mkfifo /tmp/ff"], 10, 1024)[0] == 0
        t, got = in_flight(write_file, c, "/tmp/ff", b"data", 1.0)
        wait_until(lambda: running(c, 'sh -c cat > "$1"'), what="the writer in the container")
        c.pause()
        try:
            t.join(timeout=20)  # the step timeout (1 s) and the watch's look (2 s) bound it
            assert not t.is_alive(), "the write still waits on the frozen container"
        finally:
            with contextlib.suppress(docker.errors.APIError):
                c.unpause()
        assert "result" not in got, got
        assert str(got["error"]).startswith("the command got no answer in ")
        assert str(got["error"]).endswith("(docker pause or a frozen cgroup)")
    finally:
        pool.close()
