"""SWE: the environment's answers are observations; a docker/runc failure fails the attempt.

Real containers. What a shell in the container would answer (a deleted working directory,
a FIFO that never delivers, an endless device) is recorded as that answer, under the same
cap and timeout flags as the bash tool; what the engine answers when it cannot start a
process at all raises SandboxError, never becomes an observation.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox

pytestmark = pytest.mark.docker

CAP = 65536


@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(
        SWEConfig(
            docker=DockerConfig(pids_limit=64, step_timeout=2, output_cap=CAP), repo=str(repo)
        )
    )
    s.reset(TaskSpec("probe"))
    yield s
    s.close()


def state(obs) -> dict:
    return json.loads(obs.state_json) if obs.state_json else {}


def no_engine_words(obs) -> None:
    """Nothing of docker's or runc's own messages reaches the agent."""
    for words in ("OCI runtime", "config.json", ": unknown", "exec failed"):
        assert words not in obs.text, obs.text


# -- item 1: the working directory is the agent's to delete --------------------------------
def test_bash_after_the_repository_is_deleted_answers_as_a_shell(swe):
    o = swe.step(tool("bash", command="cd / && rm -rf /repo && echo gone"))
    assert (o.text, o.exit_code) == ("gone\n", 0)
    o = swe.step(tool("bash", command="echo still-here"))
    no_engine_words(o)
    assert (o.text, o.exit_code, o.is_error) == ("still-here\n", 0, False)
    o = swe.step(tool("bash", command="cat pkg/calc.py"))
    no_engine_words(o)
    assert o.exit_code == 1 and "No such file or directory" in o.text
    o = swe.step(tool("read", path="pkg/calc.py"))
    assert o.is_error and o.text == "error: cannot read pkg/calc.py: No such file or directory"
    o = swe.step(tool("edit", path="new.py", content="x = 1\n"))
    assert o.is_error and o.text.startswith("error: cannot write new.py: ")
    no_engine_words(o)
    # the agent makes the directory again: commands run in it again
    o = swe.step(tool("bash", command="mkdir /repo && echo made"))
    assert o.text == "made\n"
    o = swe.step(tool("bash", command="pwd; echo hi > f.txt"))
    assert o.text == "/repo\n"
    assert swe.step(tool("read", path="f.txt")).text == "     1\thi"


def test_read_and_edit_after_the_containers_workdir_is_deleted(swe):
    """The container's own working directory (/root) is not where read/edit run."""
    o = swe.step(tool("bash", command="rm -rf /root && echo gone"))
    assert o.text == "gone\n"
    o = swe.step(tool("read", path="pkg/calc.py"))
    assert o.text == "     1\tdef add(a, b):\n     2\t    return a - b"
    o = swe.step(tool("edit", path="pkg/calc.py", old="a - b", new="a + b"))
    assert not o.is_error and "+    return a + b" in o.text
    o = swe.step(tool("bash", command="cat pkg/calc.py"))
    assert o.text == "def add(a, b):\n    return a + b\n"


def test_a_process_that_cannot_start_fails_the_attempt(swe):
    """With `sh` gone (our wrapper's only program) no command can start: the engine's
    failure is ours, raised."""
    swe.step(tool("bash", command="rm -f /usr/bin/sh /bin/sh"))
    for action in (
        tool("bash", command="echo hi"),
        tool("read", path="pkg/calc.py"),
        tool("edit", path="pkg/calc.py", old="a - b", new="a + b"),
    ):
        with pytest.raises(SandboxError, match="could not start"):
            swe.step(action)


def test_a_command_printing_engine_words_is_still_an_observation(swe):
    """Only the engine's failure to start a process raises, never a process's own words."""
    line = "OCI runtime exec failed: exec failed: unable to start container process: unknown"
    o = swe.step(tool("bash", command=f"echo '{line}'; exit 126"))
    assert (o.text, o.exit_code) == (line + "\n", 126)


# -- item 8: read/edit answer under the cap and the timeout, with the system's reasons ----
def test_read_of_an_endless_device_is_capped_and_flagged(swe):
    o = swe.step(tool("read", path="/dev/zero"))
    assert o.truncated and not o.is_error
    assert not o.text.startswith("error")
    assert len(o.text.encode()) <= CAP
    assert o.text.startswith("     1\t\0")


def test_read_of_a_big_file_stays_within_the_cap(swe):
    swe.step(tool("bash", command="yes abcdefghij | head -c 200000 > big.txt"))
    o = swe.step(tool("read", path="big.txt"))
    assert o.truncated and not o.is_error
    assert len(o.text.encode()) <= CAP and o.text.startswith("     1\tabcdefghij\n")


def test_read_and_edit_of_a_fifo_time_out_like_bash(swe):
    swe.step(tool("bash", command="mkfifo /tmp/ff"))
    bash = swe.step(tool("bash", command="cat /tmp/ff"))
    assert state(bash)["timed_out"] and bash.exit_code == 137
    assert "[timed out after 2s]" in bash.text
    for action in (tool("read", path="/tmp/ff"), tool("edit", path="/tmp/ff", content="x")):
        o = swe.step(action)
        assert o.is_error and o.exit_code == 137 and state(o)["timed_out"] is True
        assert o.text.endswith("\n[timed out after 2s]")
        assert o.text.startswith("error: cannot read /tmp/ff")
        assert "failed" not in o.text


def test_edit_through_a_symlink_to_a_huge_file_is_refused_without_its_content(docker_engine, repo):
    """A symbolic link to a file over the edit limit is too large too; the answer never
    carries the file's bytes as a 'reason'."""
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20), repo=str(repo)))
    s.reset(TaskSpec("big"))
    try:
        s.step(tool("bash", command="truncate -s 17M huge.bin && ln -s huge.bin link.bin"))
        o = s.step(tool("edit", path="link.bin", old="x", new="y"))
        assert o.is_error and o.text == "error: link.bin is too large to edit (over 16 MiB)"
        o = s.step(tool("edit", path="/dev/zero", content="x"))
        assert o.is_error and o.text == "error: /dev/zero is too large to edit (over 16 MiB)"
    finally:
        s.close()


def test_reasons_are_the_systems_messages_never_content(swe):
    o = swe.step(tool("read", path="missing.py"))
    assert o.text == "error: cannot read missing.py: No such file or directory"
    o = swe.step(tool("read", path="pkg"))
    assert o.text == "error: cannot read pkg: Is a directory"
    o = swe.step(tool("read", path="/proc/self/mem"))  # fails at its first byte
    assert o.text == "error: cannot read /proc/self/mem: Input/output error"


def test_a_fractional_step_timeout_still_flags_the_timeout(docker_engine, repo):
    """The in-container `timeout` takes whole seconds: rounded up, never down, so a
    command it cuts is known to have run out its time."""
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=1.5), repo=str(repo)))
    s.reset(TaskSpec("t"))
    try:
        o = s.step(tool("bash", command="sleep 100"))
        assert o.exit_code == 137 and state(o)["timed_out"] is True
        assert o.text == "[timed out after 1.5s]"
        s.step(tool("bash", command="mkfifo /tmp/ff"))
        o = s.step(tool("read", path="/tmp/ff"))
        assert state(o)["timed_out"] is True and o.text.endswith("[timed out after 1.5s]")
    finally:
        s.close()


@pytest.mark.parametrize(
    ("name", "args", "key"),
    [
        ("bash", {"command": "echo a\x00b"}, "command"),
        ("read", {"path": "calc\x00.py"}, "path"),
        ("edit", {"path": "x\x00y", "content": "z"}, "path"),
    ],
)
def test_a_nul_in_a_command_line_is_the_tool_s_usage_error_not_the_engine_s(swe, name, args, key):
    """Hunt 1206: `echo a\\x00b` was answered `exec /usr/bin/sh: invalid argument`, the
    engine's words (its exec got a pid, so it read as the command's), exit 1."""
    obs = swe.step(tool(name, **args))
    at = args[key].index("\x00")
    assert obs.is_error and obs.text == (
        f"error: {key} holds a NUL byte (\\x00) at position {at}: no command line or file name can"
    )
    assert "invalid argument" not in obs.text
    assert swe.step(tool("bash", command="echo ok")).text.startswith("ok")  # the sandbox goes on
