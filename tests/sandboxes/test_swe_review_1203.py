"""SWE review 1203: a container that stops under a step fails the attempt; edit keeps bytes.

Real containers. A command the agent kills, or the kernel OOM-kills, inside a container
that still runs is the environment's answer (exit 137); the container itself stopping
(killed from outside, its init OOM-killed) is our infrastructure failing: SandboxError
with the container's state, never a turn. `edit` changes only the bytes it replaces: a
file that is not UTF-8 keeps every other byte, and the diff shows them as `read` does.
"""

from __future__ import annotations

import json
import os
import threading

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes import execs
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.owners import EPISODE_LABEL, OWNER_PID
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox

from ..conftest import wait_until

pytestmark = pytest.mark.docker

STOPPED = r"the container stopped under the command: exited \(exit code 137, OOM killed: False\)"


@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(
        SWEConfig(docker=DockerConfig(step_timeout=60, memory="128m", warm=0), repo=str(repo))
    )
    s.reset(TaskSpec("probe"))
    yield s
    s.close()


def running(container, words: str) -> bool:
    """Whether a process whose command line starts with `words` runs in the container."""
    procs = container.top()
    cmd = procs["Titles"].index("CMD")
    return any(p[cmd].startswith(words) for p in procs["Processes"])


def in_flight(fn, *args) -> tuple[threading.Thread, dict]:
    """Run `fn(*args)` in a thread: its result or exception lands in the dict."""
    got: dict = {}

    def run() -> None:
        try:
            got["result"] = fn(*args)
        except Exception as exc:  # what the step raised is the test's to check
            got["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def killed_under(swe, docker_engine, action, words: str) -> dict:
    """Step `action`, kill the container once a process with `words` runs, and return
    what the step gave."""
    t, got = in_flight(swe.step, action)
    wait_until(lambda: running(swe.container, words), what=f"{words!r} in the container")
    docker_engine.api.kill(swe.container.id)
    t.join(timeout=60)
    assert not t.is_alive()
    return got


# -- item 1: a container that dies mid-step fails the attempt ----------------------------
def test_a_read_in_flight_when_the_container_is_killed_raises(swe, docker_engine):
    assert swe.step(tool("bash", command="mkfifo /tmp/f; echo made")).text == "made\n"
    got = killed_under(swe, docker_engine, tool("read", path="/tmp/f"), "head -c")
    assert "result" not in got, got.get("result")
    with pytest.raises(SandboxError, match=STOPPED):
        raise got["error"]


def test_a_bash_in_flight_when_the_container_is_killed_raises(swe, docker_engine):
    got = killed_under(swe, docker_engine, tool("bash", command="sleep 50; echo done"), "sleep 50")
    assert "result" not in got, got.get("result")
    with pytest.raises(SandboxError, match=STOPPED):
        raise got["error"]
    # the next step names the container's state, not docker's `409 ... is not running`
    with pytest.raises(SandboxError, match=r"the container stopped: exited \(exit code 137"):
        swe.step(tool("bash", command="echo after"))


def test_a_write_in_flight_when_the_container_is_killed_raises(swe, docker_engine):
    swe.step(tool("bash", command="mkfifo /tmp/w"))
    t, got = in_flight(execs.write_file, swe.container, "/tmp/w", b"x", 60)
    wait_until(lambda: running(swe.container, "sh -c cat"), what="the writer")
    docker_engine.api.kill(swe.container.id)
    t.join(timeout=60)
    assert "result" not in got, got.get("result")
    with pytest.raises(SandboxError, match=STOPPED):
        raise got["error"]


def test_kills_inside_a_running_container_stay_observations(swe):
    o = swe.step(tool("bash", command="echo before; kill -9 $$"))
    assert (o.text, o.exit_code, o.is_error) == ("before\n", 137, True)
    # the kernel OOM-kills the command (the largest process), the container runs on
    o = swe.step(tool("bash", command="python3 -c 'x = bytearray(1 << 30)'"))
    assert (o.exit_code, o.is_error) == (137, True)
    assert not json.loads(o.state_json)["timed_out"]
    assert swe.step(tool("bash", command="echo alive")).text == "alive\n"


def test_a_killed_container_in_a_job_fails_the_attempt_without_the_step(docker_engine, store, repo):
    """The reviewer's job: the read in flight is no turn; the attempt fails with why."""
    spec = JobSpec.from_dict(
        {
            "name": "swe-killed2",
            "sandbox": {
                "kind": "swe",
                "repo": str(repo),
                "docker": {"step_timeout": 60, "warm": 0},
            },
            "retries": 0,
            "tasks": [
                {
                    "id": "k",
                    "instruction": "Read a FIFO; the container is killed mid-step.",
                    "actions": [
                        {"tool": "bash", "arguments": {"command": "mkfifo /tmp/f; echo made"}},
                        {"tool": "read", "arguments": {"path": "/tmp/f"}},
                        {"tool": "bash", "arguments": {"command": "echo after"}},
                    ],
                }
            ],
        }
    )
    labels = [f"{OWNER_PID}={os.getpid()}", f"{EPISODE_LABEL}=k-e0"]

    def reader():
        for c in docker_engine.containers.list(filters={"label": labels}):
            if running(c, "head -c"):
                return c
        return None

    def kill_when_reading() -> None:
        docker_engine.api.kill(wait_until(reader, timeout=60, what="the read in flight").id)

    killer = threading.Thread(target=kill_when_reading, daemon=True)
    killer.start()
    result = run_job(spec, store.raw)
    killer.join(timeout=60)
    (t,) = result.trajectories
    assert result.failed_attempts == 1 and t.outcome.status == "error"
    assert "the container stopped under the command: exited (exit code 137" in t.outcome.error
    assert [turn.observation.text for turn in t.turns] == ["made\n"]


# -- item 2: edit keeps the bytes it does not change ---------------------------------------
def test_edit_of_a_latin1_file_keeps_its_other_bytes(swe):
    o = swe.step(tool("bash", command=r"printf 'caf\351 = 1\nx = 2\n' > l1.py"))
    assert o.exit_code == 0
    o = swe.step(tool("edit", path="l1.py", old="x = 2", new="x = 3"))
    assert not o.is_error
    # undecodable bytes read as `read` and `bash` show them (U+FFFD), unchanged context
    assert o.text.splitlines() == [
        "--- a/l1.py",
        "+++ b/l1.py",
        "@@ -1,2 +1,2 @@",
        " caf\ufffd = 1",
        "-x = 2",
        "+x = 3",
    ]
    o = swe.step(tool("bash", command="od -An -c l1.py | tr -s ' '"))
    assert o.text.split() == ["c", "a", "f", "351", "=", "1", r"\n", "x", "=", "3", r"\n"]
    assert swe.step(tool("read", path="l1.py")).text == "     1\tcaf\ufffd = 1\n     2\tx = 3"
    # what `read` shows for those bytes is no text `old` can match: the tool says so
    o = swe.step(tool("edit", path="l1.py", old="caf\ufffd = 1", new="cafe = 1"))
    assert o.is_error and o.text == (
        "error: `old` must occur exactly once in l1.py (found 0; U+FFFD stands for bytes "
        "that are not UTF-8, which `old` cannot match)"
    )


def test_edit_of_a_binary_file_changes_only_what_it_replaces(swe):
    swe.step(tool("bash", command=r"printf '\377\376a\000\351\n' > b.bin"))
    o = swe.step(tool("edit", path="b.bin", old="a", new="b"))
    assert not o.is_error and "+\ufffd\ufffdb\x00\ufffd" in o.text
    o = swe.step(tool("bash", command="od -An -tx1 b.bin"))
    assert o.text.split() == ["ff", "fe", "62", "00", "e9", "0a"]


def test_edit_refuses_text_that_is_no_utf8(swe):
    """A lone surrogate (a JSON `\\ud800`) is no text to write: the tool says so."""
    o = swe.step(tool("edit", path="pkg/calc.py", old="a - b", new="a \ud800 b"))
    assert o.is_error and o.text == "error: `new` is not text (a lone surrogate: '\\ud800')"
    o = swe.step(tool("edit", path="x.py", content="\udce9"))
    assert o.is_error and o.text == "error: `content` is not text (a lone surrogate: '\\udce9')"
    assert swe.step(tool("bash", command="cat pkg/calc.py; ls x.py")).exit_code == 2
