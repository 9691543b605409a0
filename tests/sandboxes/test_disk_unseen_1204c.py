"""A full disk holds nothing the agent did not put there (1204c).

Real containers of both local images under the disk conditions. A filler file in the
working directory was ours, not the environment's: `ls -a` and `du` showed it, and
deleting it gave the space back, which no real full disk allows. The tmpfs itself is
sized to what the set-up left plus the free bytes asked for: the agent sees its own
files only, `df` and `du` agree, and deleting everything it sees frees only what that
took.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox

pytestmark = pytest.mark.docker

IMAGES = ["worldtrace/debian:latest", "worldtrace/busybox:latest"]
SETUP = ("echo notes > notes.txt", "mkdir -p data && head -c 100000 /dev/zero > data/blob")
SEEN = {"README.md", "pkg", "notes.txt", "data"}
"""What the repository and the task's set-up put in the working directory."""


def swe_under(repo, image: str, condition) -> SWESandbox:
    s = SWESandbox(SWEConfig(docker=DockerConfig(image=image, step_timeout=20), repo=str(repo)))
    s.reset(TaskSpec("disk", setup=SETUP), conditions=parse_conditions([condition]).sample(0))
    return s


def bash(s: SWESandbox, command: str) -> str:
    o = s.step(tool("bash", command=command))
    return o.text


def df(s: SWESandbox, flag: str = "-k") -> tuple[int, int, int]:
    """(size, used, free) of the working directory's file system, `df -P` style."""
    size, used, free = bash(s, f"df -P {flag} . | tail -n 1").split()[1:4]
    return int(size), int(used), int(free)


@pytest.mark.parametrize("image", IMAGES, ids=["debian", "busybox"])
def test_a_full_disk_shows_only_the_agents_files_and_cannot_be_emptied(docker_engine, repo, image):
    s = swe_under(repo, image, "disk_full")
    try:
        assert set(bash(s, "ls -A").split()) == SEEN
        size, used, free = df(s)
        assert free == 0 and used == size
        du = int(bash(s, "du -sk . | cut -f1").split()[0])
        assert abs(used - du) <= 8, (used, du)  # df and du agree: no hidden bytes
        answer = bash(s, "dd if=/dev/zero of=more bs=1k count=8 2>&1; echo rc=$?")
        assert "No space left on device" in answer and "rc=1" in answer
        # the agent deletes all it sees: what it gets back is what its files took
        bash(s, "rm -rf -- * .[!.]* more")
        assert bash(s, "ls -A") == ""
        size, used, free = df(s)
        assert free <= 160, free  # ~100 KB of the set-up's blob and notes, no 16 MiB
        answer = bash(s, "dd if=/dev/zero of=big bs=1k count=1024 2>&1; echo rc=$?")
        assert "No space left on device" in answer and "rc=1" in answer
        assert "Condition: the disk is full" in s.describe()["initial_state"]
    finally:
        s.close()


@pytest.mark.parametrize("image", IMAGES, ids=["debian", "busybox"])
def test_a_nearly_full_disk_leaves_the_free_bytes_asked_for(docker_engine, repo, image):
    s = swe_under(repo, image, {"disk_low": "256k"})
    try:
        assert set(bash(s, "ls -A").split()) == SEEN
        assert df(s)[2] == 256
        answer = bash(s, "dd if=/dev/zero of=a bs=1k count=200 2>&1; echo rc=$?")
        assert "rc=0" in answer
        answer = bash(s, "dd if=/dev/zero of=b bs=1k count=100 2>&1; echo rc=$?")
        assert "No space left on device" in answer and "rc=1" in answer
    finally:
        s.close()


@pytest.mark.parametrize("image", IMAGES, ids=["debian", "busybox"])
def test_no_inodes_left_without_files_of_ours(docker_engine, repo, image):
    s = swe_under(repo, image, {"inodes_low": {"free": 2}})
    try:
        assert set(bash(s, "ls -A").split()) == SEEN
        answer = bash(s, "touch a b c 2>&1; echo rc=$?")
        assert "No space left on device" in answer and "rc=1" in answer
        assert set(bash(s, "ls -A").split()) == SEEN | {"a", "b"}
        assert df(s, "-i")[2] == 0
    finally:
        s.close()


def test_an_empty_full_disk_takes_no_file_at_all(docker_engine, tmp_path):
    """Nothing in the working directory and no space asked for: the smallest tmpfs is a
    page, so no file may be made there (its inodes are used up) and none can grow."""
    empty = tmp_path / "empty"
    empty.mkdir()
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20), repo=str(empty)))
    s.reset(TaskSpec("empty"), conditions=parse_conditions(["disk_full"]).sample(0))
    try:
        assert bash(s, "ls -A") == ""
        for write in ("echo x > a", "mkdir d", "dd if=/dev/zero of=b bs=1k count=1"):
            answer = bash(s, f"{write} 2>&1; echo rc=$?")
            assert "No space left on device" in answer and "rc=0" not in answer, answer
        assert bash(s, "ls -A") == ""
    finally:
        s.close()


def test_the_remount_runs_no_program_of_the_sandbox(docker_engine, repo):
    """Our mounter has CAP_SYS_ADMIN inside the sandbox's mount namespace: a `mount` the
    task (or image) put on the sandbox's PATH must never be what runs there."""
    plant = (
        "for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do"
        " printf '#!/bin/sh\\necho planted > /tmp/planted\\n' > $d/mount; chmod +x $d/mount;"
        " done"
    )
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20), repo=str(repo)))
    s.reset(TaskSpec("plant", setup=(plant,)), conditions=parse_conditions(["disk_full"]).sample(0))
    try:
        assert bash(s, "cat /usr/bin/mount").startswith("#!/bin/sh")  # planted, not run:
        assert bash(s, "ls /tmp") == ""
        assert df(s)[2] == 0  # and the disk is full all the same
    finally:
        s.close()
