"""Conditions under a non-root sandbox user (hunt 12-06r). Real containers.

With `docker.user: nobody`, or an image whose own USER is non-root, every condition
whose set-up runs as root failed: the container ran as that user, and docker gives such
a container's processes no capabilities, execs as uid 0 included (`CapEff: 0`). A disk
kind's remount could not enter PID 1's mount namespace (`nsenter: can't open
'/proc/1/ns/mnt': Permission denied`, retried), `permission` could not `chown`,
`file_locked` could not make its file in a repository the user owns, nor `corrupt_file`
write into it. The container now runs as root (PID 1 is our idle loop) and every
process of the agent runs as its user: the set-up has root's usual capabilities, the
agent none, and what the set-up did holds against it.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

NOBODY = "65534"
BASE = "worldtrace/debian:latest"
CAPS = "grep -E '^Cap(Eff|Bnd)' /proc/self/status | awk '{print $2}' | tr '\\n' ' '"
"""The effective and bounding capability sets of the process that runs it."""
SETUP_CAPS = {"setup": {"commands": [f"{CAPS} > /tmp/setup-caps"], "description": "caps"}}
"""A condition that records the capabilities its own set-up ran with."""
ORIGINAL = "# calc\n" + "line of the readme\n" * 40


@pytest.fixture(scope="module")
def nobody_image(docker_engine):
    """An image whose own USER is nobody (built from the local base, no network)."""
    tag = f"worldtrace-test/user-nobody:{os.getpid()}"
    docker_engine.images.build(
        fileobj=io.BytesIO(f"FROM {BASE}\nUSER nobody\n".encode()), tag=tag, rm=True
    )
    yield tag
    docker_engine.images.remove(tag, force=True)


@pytest.fixture(params=["docker.user", "image USER"])
def agent(request) -> dict[str, str]:
    """The docker settings that make the agent nobody: `docker.user`, or the image's USER."""
    if request.param == "docker.user":
        return {"user": "nobody"}
    return {"image": request.getfixturevalue("nobody_image")}


def remount(path: str) -> str:
    """A command remounting the tmpfs at `path` with room to spare (the image has no
    `mount`): the system's answer."""
    call = f"l.mount(b'tmpfs', b'{path}', b'tmpfs', 32, b'size=64m')"  # MS_REMOUNT
    return (
        'python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); '
        f'print({call}, os.strerror(ctypes.get_errno()))"'
    )


def drawn(conditions: list) -> tuple:
    return parse_conditions(conditions).sample(0)


# -- the terminal -------------------------------------------------------------------------
def terminal(docker: dict, conditions: list, setup=()) -> TerminalSandbox:
    """A terminal in /tmp: nobody cannot enter the default /root (mode 700), and the
    task's set-up, run as the agent, starts in the working directory."""
    config = DockerConfig(step_timeout=20, warm=0, workdir="/tmp", **docker)
    s = TerminalSandbox(TerminalConfig(docker=config, cols=200))
    try:
        s.reset(TaskSpec("t", setup=tuple(setup)), conditions=drawn(conditions))
    except BaseException:
        s.close()
        raise
    return s


def said(s: TerminalSandbox, command: str) -> str:
    """What `command` printed in the agent's shell, on one line (its output's newlines as
    blanks, ends stripped): its echo on the screen never holds the `@=[` it is read by."""
    keys = f"v=$({{ {command}; }} 2>&1 | tr '\\n' ' '); printf '%s=[%s]\\n' @ \"$v\"\n"
    o = s.step(keystrokes(keys, duration=15))
    found = re.search(r"@=\[(.*)\]", o.text)
    assert found, o.text
    return found.group(1).strip()


def agent_is_nobody_without_privileges(run) -> None:
    """The agent's processes: nobody, no capability, no way to gain one; the set-up's
    (`SETUP_CAPS`): root's usual set (the container's bounding set, not empty)."""
    assert run("id -u") == NOBODY
    eff, bnd = run(CAPS).split()
    assert int(eff, 16) == 0 and int(bnd, 16) != 0
    assert run("grep NoNewPrivs /proc/self/status | awk '{print $2}'") == "1"
    setup_eff, setup_bnd = run("cat /tmp/setup-caps").split()
    assert setup_eff == setup_bnd == bnd


TERMINAL_CASES = {
    "disk_low": (
        [{"disk_low": {"free": "1m", "path": "/data"}}],
        (),
        [
            ("df -k /data | tail -n 1 | awk '{print $4}'", lambda v: int(v) <= 1024),
            ("head -c 2000000 /dev/zero > /data/big; echo rc=$?", "No space left on device"),
            # the agent cannot give itself space back
            (remount("/data"), "-1 Operation not permitted"),
            ("df -k /data | tail -n 1 | awk '{print $4}'", lambda v: int(v) <= 1024),
        ],
    ),
    "permission": (
        [{"permission": "1234"}],
        (),
        [
            ("id -u", "1234"),
            ("stat -c %u /tmp", "1234"),
            ("touch /etc/x; echo rc=$?", "Permission denied"),
            ("chown 0 /tmp; echo rc=$?", "Operation not permitted"),
        ],
    ),
    "file_locked": (
        [{"file_locked": "/tmp/l"}],
        (),
        [
            ("flock -n /tmp/l true; echo rc=$?", "rc=1"),
            ("kill -9 $(pgrep python3); echo rc=$?", "Operation not permitted"),
            ("flock -n /tmp/l true; echo rc=$?", "rc=1"),
        ],
    ),
    "corrupt_file": (
        [{"corrupt_file": "/tmp/data"}],
        # the task's set-up runs as the agent's user, as it always did
        ["head -c 4096 /dev/urandom > /tmp/data", "cp /tmp/data /tmp/orig"],
        [
            ("stat -c %U /tmp/orig /tmp/data", "nobody nobody"),
            ("cmp -s /tmp/data /tmp/orig; echo rc=$?", "rc=1"),
            ("wc -c < /tmp/data", "4096"),
        ],
    ),
}


def check(run, checks) -> None:
    for command, want in checks:
        got = run(command)
        ok = want(got) if callable(want) else want in got
        assert ok, (command, got)


@pytest.mark.parametrize("kind", list(TERMINAL_CASES))
def test_a_terminal_condition_holds_for_a_non_root_agent(docker_engine, agent, kind):
    conditions, setup, checks = TERMINAL_CASES[kind]
    s = terminal(agent, [*conditions, SETUP_CAPS], setup)
    try:
        run = lambda command: said(s, command)  # noqa: E731
        if kind == "permission":  # the condition's user, not the sandbox's
            assert run("id -u") == "1234"
        else:
            agent_is_nobody_without_privileges(run)
            assert s.describe()["initial_state"].count("Condition: ") == 2
        check(run, checks)
    finally:
        s.close()


def test_a_terminal_without_conditions_looks_as_under_docker_run_user(docker_engine, agent):
    """What the agent sees of itself is what `docker run --user nobody` gave it: its ids,
    `$HOME` (the terminal sets it to the working directory), no `$USER`; the task's
    set-up runs as it."""
    s = terminal(agent, [SETUP_CAPS], ["id -un > /tmp/setup-user"])
    try:
        run = lambda command: said(s, command)  # noqa: E731
        assert run("id") == "uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)"
        assert run("cat /tmp/setup-user; echo $HOME; pwd") == "nobody /tmp /tmp"
        assert run("env | grep -c '^USER='") == "0"
    finally:
        s.close()


# -- SWE ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nonroot") / "repo"
    root.mkdir()
    (root / "README.md").write_text(ORIGINAL)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@x"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return root


def swe(docker: dict, repo: Path, conditions: list) -> SWESandbox:
    config = DockerConfig(step_timeout=20, warm=0, **docker)
    s = SWESandbox(SWEConfig(docker=config, repo=str(repo)))
    try:
        s.reset(TaskSpec("t"), conditions=drawn(conditions))
    except BaseException:
        s.close()
        raise
    return s


def bash(s: SWESandbox, command: str) -> str:
    o = s.step(tool("bash", command=command))
    return " ".join(o.text.split())


SWE_CASES = {
    "disk_low": (
        [{"disk_low": "1m"}],
        [
            ("df -k /repo | tail -n 1 | awk '{print $4}'", lambda v: int(v) <= 1024),
            ("head -c 2000000 /dev/zero > big; echo rc=$?", "No space left on device"),
            (remount("/repo"), "-1 Operation not permitted"),
            ("df -k /repo | tail -n 1 | awk '{print $4}'", lambda v: int(v) <= 1024),
        ],
    ),
    "permission": (
        [{"permission": "1234"}],
        [
            ("id -u; stat -c %u /repo/README.md", "1234 1234"),
            ("touch /etc/x; echo rc=$?", "Permission denied"),
            ("git status --short; echo rc=$?", "rc=0"),
        ],
    ),
    "file_locked": (
        [{"file_locked": ".git/my.lock"}],
        [
            ("flock -n .git/my.lock true; echo rc=$?", "rc=1"),
            ("kill -9 $(pgrep python3); echo rc=$?", "Operation not permitted"),
            ("flock -n .git/my.lock true; echo rc=$?", "rc=1"),
        ],
    ),
    "corrupt_file": (
        [{"corrupt_file": "README.md"}],
        [
            ("git status --short", "M README.md"),
            ("wc -c < README.md", str(len(ORIGINAL))),
            ("stat -c %U README.md", "nobody"),
        ],
    ),
}


@pytest.mark.parametrize("kind", list(SWE_CASES))
def test_a_swe_condition_holds_for_a_non_root_agent(docker_engine, agent, checkout, kind):
    conditions, checks = SWE_CASES[kind]
    s = swe(agent, checkout, [*conditions, SETUP_CAPS])
    try:
        run = lambda command: bash(s, command)  # noqa: E731
        if kind != "permission":
            agent_is_nobody_without_privileges(run)
        check(run, checks)
        if kind == "corrupt_file":  # the tools read and write as the agent
            o = s.step(tool("edit", path="calc.py", old="a + b", new="a - b"))
            assert not o.is_error, o.text
            assert run("stat -c %U calc.py; git diff --stat | tail -n 1").startswith("nobody 2 ")
    finally:
        s.close()


def test_a_swe_command_of_a_non_root_agent_is_killed_at_its_step_timeout(
    docker_engine, agent, checkout
):
    """The kill at the step timeout is root's (`execs.KILL_GROUP`): without capabilities it
    could not signal the agent's processes."""
    s = SWESandbox(
        SWEConfig(docker=DockerConfig(step_timeout=2, warm=0, **agent), repo=str(checkout))
    )
    try:
        s.reset(TaskSpec("t"))
        o = s.step(tool("bash", command="sleep 8 & sleep 8; echo never"))
        assert o.exit_code == 137 and "never" not in o.text, o.text
        # as under `docker run --user nobody`: its ids and home
        assert bash(s, "id -u; echo $HOME; pgrep -c sleep") == f"{NOBODY} /nonexistent 0"
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["terminal", "swe"])
def test_a_user_the_image_lacks_is_the_jobs_mistake_said_so(docker_engine, checkout, kind):
    """The engine says nothing of an exec's unknown user (exit 126, no output): the pool
    asks once and names the setting (was `docker could not start the command 'sh'`)."""
    config = DockerConfig(step_timeout=20, warm=0, user="ghost")
    if kind == "terminal":
        s = TerminalSandbox(TerminalConfig(docker=config))
    else:
        s = SWESandbox(SWEConfig(docker=config, repo=str(checkout)))
    try:
        with pytest.raises(SandboxConfigError) as e:
            s.reset(TaskSpec("t"))
        assert str(e.value) == (
            "docker.user 'ghost': no process can run as it in the image "
            f"{BASE} (a user or group its /etc/passwd and /etc/group do not list): name one "
            "it has, or a numeric uid"
        )
    finally:
        s.close()
