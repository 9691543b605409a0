"""Container faults 1204: a restart from outside fails the attempt; `kill 1` inside is a no-op.

Real containers. A container restarted under an episode (`docker restart`) lost its
processes and state: the turn in flight is no answer of the environment, so the step
raises SandboxError naming the restart. The agent signalling PID 1 from inside (`kill 1`,
`pkill -x sh`) cannot stop the sandbox, as it cannot stop a real init: its turn is the
environment's answer. Our code still stops containers at once.
"""

from __future__ import annotations

import threading
import time

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.execs import exec_capture
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox

from ..conftest import wait_until
from .test_swe_review_1203 import running

pytestmark = pytest.mark.docker

RESTARTED = r"the container was restarted under the episode"


@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=60, warm=0), repo=str(repo)))
    s.reset(TaskSpec("probe"))
    yield s
    s.close()


def restarted_under(step, action, container, docker_engine, words: str) -> dict:
    """Step `action` in a thread, `docker restart -t 0` the container once `words` runs
    in it, and return what the step gave (`result` or `error`)."""
    got: dict = {}

    def run() -> None:
        try:
            got["result"] = step(action)
        except Exception as exc:  # what the step raised is the test's to check
            got["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: running(container, words), what=f"{words!r} in the container")
    docker_engine.api.restart(container.id, timeout=0)
    t.join(timeout=60)
    assert not t.is_alive()
    return got


# -- defect 1: a restart from outside is our infrastructure failing -------------------------
def test_swe_command_in_flight_when_the_container_restarts_fails(swe, docker_engine):
    assert swe.step(tool("bash", command="echo hello")).text == "hello\n"
    c = swe.container
    got = restarted_under(
        swe.step, tool("bash", command="sleep 50; echo slept"), c, docker_engine, "sleep 50"
    )
    assert "result" not in got, got.get("result")
    with pytest.raises(SandboxError, match=RESTARTED):
        raise got["error"]
    # the restarted container runs on, but no step of it is an answer either
    wait_until(
        lambda: docker_engine.api.inspect_container(c.id)["State"]["Running"], what="restart"
    )
    with pytest.raises(SandboxError, match=RESTARTED):
        swe.step(tool("bash", command="kill -9 $$"))


def test_swe_step_after_a_restart_between_steps_fails(swe, docker_engine):
    """Found: a container restarted between two steps, with no command in flight, went
    unseen: the next command ran in the reset sandbox (its processes and tmpfs gone) and
    its answer was recorded as the episode's environment's."""
    assert swe.step(tool("bash", command="echo kept > /tmp/note; echo hello")).text == "hello\n"
    docker_engine.api.restart(swe.container.id, timeout=0)
    with pytest.raises(SandboxError, match=RESTARTED):
        swe.step(tool("bash", command="cat /tmp/note"))


def test_terminal_shell_ended_by_a_restart_fails(term, docker_engine):
    assert "hello" in term.step(keystrokes("echo hello\n")).text
    act = keystrokes("sleep 50; echo slept\n", 60)
    got = restarted_under(term.step, act, term.container, docker_engine, "sleep 50")
    assert "result" not in got, got.get("result")
    with pytest.raises(SandboxError, match=RESTARTED):
        raise got["error"]


def test_a_shell_killed_inside_a_container_not_restarted_stays_an_observation(term):
    o = term.step(keystrokes("kill -9 $$\n"))
    assert term.ended == "the shell exited (status 137)", o.text


# -- defect 2: the agent cannot stop the sandbox from inside -------------------------------
def test_terminal_kill_1_from_inside_is_the_environments_answer(term):
    o = term.step(keystrokes("kill 1; kill -9 1; pkill -x sh; echo still-here\n"))
    assert "still-here" in o.text and term.ended is None
    assert "after" in term.step(keystrokes("echo after\n")).text


def test_swe_pkill_sh_is_the_environments_answer(swe):
    o = swe.step(tool("bash", command="kill 1; kill -INT 1; echo done"))
    assert (o.text, o.exit_code) == ("done\n", 0)
    o = swe.step(tool("bash", command="pkill -x sh; echo unseen"))  # its own shell too
    assert (o.text, o.exit_code) == ("", 143)
    assert swe.step(tool("bash", command="echo after")).text == "after\n"


@pytest.mark.parametrize("image", ["worldtrace/debian:latest", "worldtrace/busybox:latest"])
def test_init_ignores_signals_from_inside_and_stops_at_once_from_outside(docker_engine, image):
    pool = ContainerPool(DockerConfig(image=image, warm=0))
    try:
        c = pool.acquire()
        kills = "for s in TERM INT HUP QUIT USR1 USR2 KILL; do kill -s $s 1; done; echo x"
        assert exec_capture(c, ["sh", "-c", kills], 10, 1024)[:2] == (0, "x\n")
        assert exec_capture(c, ["sh", "-c", "kill -9 -1; echo y"], 10, 1024)[1] in ("", "y\n")
        assert docker_engine.api.inspect_container(c.id)["State"]["Running"]
        started = time.monotonic()
        docker_engine.api.stop(c.id)  # a person's `docker stop`: no 10 s grace wait
        assert time.monotonic() - started < 5
        started = time.monotonic()
        pool.release(pool.acquire(), wait=True)
        assert time.monotonic() - started < 5
    finally:
        pool.close()


def test_a_command_whose_session_line_the_engine_lost_keeps_its_status(swe, docker_engine):
    """Found (CI, 12-04 evening): `ps ... | grep -c ...` printed `0` and exited 1, the
    engine lost the session line (stderr) of the short exec, and the step failed the
    attempt as `docker could not start the command 'sh' (exit 1): 0`. Without the line, a
    status other than the wrapper's own 127 is the command's; 127 is still ours, and a
    restart is still seen."""
    from worldtrace.sandboxes.execs import _no_session_line

    c = swe.container
    _no_session_line(c, ["sh"], 1, b"0\n")  # the command's answer: no error
    with pytest.raises(SandboxError, match=r"docker could not start the command 'sh' \(exit 127\)"):
        _no_session_line(c, ["sh"], 127, b"")
    docker_engine.api.restart(c.id, timeout=0)
    wait_until(lambda: docker_engine.api.inspect_container(c.id)["State"]["Running"],
               what="the restarted container")  # fmt: skip
    with pytest.raises(SandboxError, match=RESTARTED):
        _no_session_line(c, ["sh"], 1, b"0\n")
