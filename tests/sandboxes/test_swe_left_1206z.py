"""SWE and terminal set-up defects left by the hunts (12-06, z), against real containers.

- A repository larger than `tmpfs_size` under `read_only: true` failed every attempt with
  tar's `Wrote only 7168 of 10240 bytes`, retried as the environment's failure. Now the
  copy says the repository's size, the tmpfs's and the setting to raise, as the job's
  mistake (SandboxConfigError, not retried): measured before the copy, and tar running
  out of space in the tmpfs (its inodes) is said so too (`execs.copy_tree`).
- A task's set-up command of 128 KiB or more failed with the engine's `exec
  /usr/bin/sh: argument list too long`: it now runs in pieces as the `bash` tool's does
  (`execs.shell_argv`), and one over 1 MiB is refused before any set-up runs.
- `file_locked` on a program's file (`/bin/dash`, which the set-up shell runs) failed
  with `Text file busy`, and one on a program not running (`/usr/bin/flock`) made it
  unrunnable: the file was opened for writing. Now its lock is taken on a read-only
  descriptor, as `flock(1)` takes it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.sandboxes.base import SandboxConfigError, SandboxError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.execs import Room, copy_tree
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

EXIT_EPISODES_FAILED = 3


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def big_repo(tmp_path: Path, size: int) -> Path:
    """A repository of one file of `size` bytes (and a small one)."""
    r = tmp_path / "big"
    r.mkdir()
    (r / "data.bin").write_bytes(b"\xa5" * size)
    (r / "README.md").write_text("# big\n")
    return r


def swe(repo: Path, **docker) -> SWESandbox:
    return SWESandbox(SWEConfig(docker=DockerConfig(**{"step_timeout": 20, **docker}), repo=str(repo)))  # fmt: skip


# -- 1: a repository over the tmpfs it is copied into --------------------------------------
def test_collect_of_a_repository_over_tmpfs_size_says_what_to_raise(
    docker_engine, wt_env, tmp_path
):
    """Found: `SandboxError: cannot copy ... tar: ./data.bin: Wrote only 7168 of 10240
    bytes`, on every one of the job's attempts."""
    repo = big_repo(tmp_path, (20 << 20) - 4096)  # and README.md: a page
    f = tmp_path / "job.yaml"
    f.write_text(json.dumps({
        "name": "big", "retries": 2,
        "sandbox": {"kind": "swe", "repo": str(repo),
                    "docker": {"read_only": True, "tmpfs_size": "16m", "step_timeout": 20}},
        "tasks": [{"id": "t", "actions": [{"tool": "bash", "arguments": {"command": "ls"}}]}],
    }))  # fmt: skip
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    attempts = [ln for ln in r.stdout.splitlines() if " t-e0 attempt " in ln]
    assert len(attempts) == 1, r.stdout  # the job's mistake: no retry
    said = (
        f"SandboxConfigError: cannot copy {repo} into the container: its files take 20 MiB "
        "on a tmpfs (each in whole pages), more than the 16 MiB of the tmpfs at /repo: "
        "raise docker.tmpfs_size (16m) to at least 21m"
    )
    assert said in attempts[0], attempts[0]
    assert "Wrote only" not in r.stdout + r.stderr


def test_a_repository_that_fits_its_tmpfs_is_copied_whole(docker_engine, tmp_path):
    """The measure is the tmpfs's own: a repository one page short of it fits."""
    repo = big_repo(tmp_path, (16 << 20) - 4096)  # and README.md: a page
    s = swe(repo, read_only=True, tmpfs_size="16m")
    try:
        s.reset(TaskSpec("t"))
        o = s.step(tool("bash", command="wc -c < data.bin; df -k . | tail -n 1"))
        size, df = o.text.splitlines()
        assert size == str((16 << 20) - 4096) and df.split()[1:4] == ["16384", "16384", "0"], df
    finally:
        s.close()


def test_a_disk_condition_too_small_for_the_repository_is_named(docker_engine, tmp_path):
    """`disk_full` puts its tmpfs on the repository (the SWE kind's working directory):
    its `size` is what to raise, read_only or not."""
    repo = big_repo(tmp_path, (20 << 20) - 4096)
    s = swe(repo)
    try:
        with pytest.raises(SandboxConfigError) as got:
            s.reset(TaskSpec("t"), conditions=parse_conditions(["disk_full"]).sample(0))
        assert str(got.value).endswith(
            "of the tmpfs at /repo: raise the disk_full condition's size (16m) to at least 21m"
        ), got.value
    finally:
        s.close()


def test_a_tmpfs_out_of_inodes_is_said_with_tars_words(docker_engine, tmp_path):
    """Its files fit the tmpfs's bytes but not its inodes: tar's `No space left on
    device`, said as the job's mistake with the tree's numbers."""
    repo = tmp_path / "many"
    repo.mkdir()
    for i in range(100):
        (repo / f"f{i:03}").write_text(f"{i}\n")
    s = swe(repo)
    try:
        drawn = parse_conditions([{"inodes_low": {"inodes": 64}}]).sample(0)
        with pytest.raises(SandboxConfigError) as got:
            s.reset(TaskSpec("t"), conditions=drawn)
        said = str(got.value)
        assert "the tmpfs at /repo, sized by the inodes_low condition's size (16m)" in said
        assert "its 101 files and directories (400 KiB)" in said
        assert said.endswith("Cannot open: No space left on device"), said
    finally:
        s.close()


def test_a_copy_failing_otherwise_keeps_tars_words(docker_engine, repo):
    """Into a tmpfs too, a failure that is no lack of space stays the environment's,
    said as the container said it."""
    t = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        t.reset(TaskSpec("t"))
        with pytest.raises(SandboxError) as got:
            copy_tree(t.container, str(repo), "/proc/x", 20, room=Room(16 << 20, "x (16m)"))
        assert not isinstance(got.value, SandboxConfigError)
        said = str(got.value)
        assert said.startswith(f"cannot copy {repo} into the container: mkdir: "), said
        assert said.endswith("/proc/x’: No such file or directory"), said
    finally:
        t.close()


# -- 2: long set-up commands -----------------------------------------------------------------
def test_a_set_up_command_over_128_kib_runs(docker_engine, repo):
    """Found: a 160 KB heredoc in `setup` failed the attempt with the engine's `argument
    list too long`; the `bash` tool ran the same command."""
    body = "".join(f"line {i:06} {'x' * 87}\n" for i in range(1600))  # 160,000 bytes
    s = swe(repo)
    try:
        s.reset(TaskSpec("t", setup=(f"cat > big.txt << 'EOF'\n{body}EOF\necho $0 $#",)))
        o = s.step(tool("bash", command="wc -c < big.txt; tail -n 1 big.txt"))
        assert o.text == f"160000\nline 001599 {'x' * 87}\n", o.text[:300]
        failing = f": {'y' * 140_000}; echo no-such-thing >&2; exit 4"
        with pytest.raises(SandboxError) as got:
            s.reset(TaskSpec("t", setup=(failing,)))
        said = str(got.value)  # the command shown cut, its error whole
        assert said.startswith("task setup failed (4): : yyy") and len(said) < 600, said[:700]
        assert said.endswith("… (140034 characters): no-such-thing\n"), said[-200:]
    finally:
        s.close()


def test_a_set_up_command_over_1_mib_is_the_jobs_mistake(docker_engine, tmp_path):
    """Over the longest command line (`LONGEST_COMMAND`): refused before any set-up runs,
    with its size, and not retried."""
    t = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        setup = ("touch ran-first", "#" * (2 << 20))
        with pytest.raises(SandboxConfigError) as got:
            t.reset(TaskSpec("t", setup=setup))
        assert str(got.value).startswith("task setup: command 2 (####"), got.value
        assert "is 2 MiB: at most 1 MiB" in str(got.value), got.value
        t.reset(TaskSpec("t"))  # the first command never ran: a fresh container has none
        o = t.step(keystrokes("ls ran-first\n", duration=10))
        assert "No such file" in o.text, o.text
    finally:
        t.close()


# -- 3: file_locked on a program's file --------------------------------------------------------
@pytest.mark.parametrize("path", ["/bin/dash", "/usr/bin/flock", "/usr/bin/python3"])
def test_file_locked_locks_a_programs_file_and_leaves_it_runnable(docker_engine, path):
    """Found: `/bin/dash` (the set-up's own shell) failed `Text file busy`, so did
    `/usr/bin/python3` (the holder itself), and `/usr/bin/flock` could no longer run."""
    t = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        t.reset(TaskSpec("t"), conditions=parse_conditions([{"file_locked": path}]).sample(0))
        o = t.step(keystrokes(f"flock -n {path} true; echo rc=$?; {path} --version\n", duration=10))  # fmt: skip
        assert "rc=1" in o.text and "Text file busy" not in o.text, o.text
    finally:
        t.close()


def test_file_locked_still_holds_fcntls_write_lock_on_a_data_file(docker_engine):
    """A file that is no program keeps both locks (sqlite's writers meet fcntl's)."""
    t = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))
    try:
        t.reset(TaskSpec("t"), conditions=parse_conditions([{"file_locked": "data.db"}]).sample(0))
        probe = (
            "python3 -c \"import fcntl; fcntl.lockf(open('data.db', 'r'), fcntl.LOCK_SH | "
            'fcntl.LOCK_NB)" 2>&1 | tail -n 1; flock -n data.db true; echo rc=$?\n'
        )
        o = t.step(keystrokes(probe, duration=10))
        assert "Resource temporarily unavailable" in o.text and "rc=1" in o.text, o.text
    finally:
        t.close()
