"""Terminal and condition defects found in a hunt (12-06, v), against real containers.

- Keystrokes over ~300 KB in one action were recorded as `the shell exited (status
  None)`, the episode ended as a success: the socket to the shell is non-blocking, and
  its `EAGAIN` (the pty full while the shell was still reading) was taken for the
  shell's exit. Now every key is written, the shell's output read meanwhile.
- `file_locked` said a file was locked where no lock could be taken: under a read-only
  root the set-up's `touch` failed, and its wait loop (`while flock -n P true`) ended at
  once on flock's error; on a directory it waited out the step timeout (retried). Now
  the set-up fails (SandboxConfigError, not retried) unless the lock is really held.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker


def terminal(conditions=(), image="worldtrace/debian:latest", **docker) -> TerminalSandbox:
    config = DockerConfig(image=image, **{"step_timeout": 20, **docker})
    s = TerminalSandbox(TerminalConfig(docker=config))
    try:
        drawn = parse_conditions(list(conditions)).sample(0) if conditions else ()
        s.reset(TaskSpec("t"), conditions=drawn)
    except BaseException:
        s.close()
        raise
    return s


def test_keystrokes_of_400_kb_are_all_typed(docker_engine):
    """Found: `shell_exited: the shell exited (status None)` after a 400 KB heredoc."""
    s = terminal(step_timeout=60)
    try:
        body = "".join(f"{i:07} {'y' * 91}\n" for i in range(4000))  # 400,000 bytes
        o = s.step(keystrokes(f"cat > big.txt << 'EOF'\n{body}EOF\n", duration=60))
        state = json.loads(o.state_json)
        assert "shell_exited" not in state and state["prompt_returned"], state
        o = s.step(keystrokes("wc -c big.txt; tail -n 1 big.txt\n", duration=10))
        assert f"400000 big.txt\n0003999 {'y' * 91}\n" in o.text, o.text[-400:]
    finally:
        s.close()


def test_keys_a_program_does_not_read_end_the_step_within_its_timeout(docker_engine):
    """Review of the fix: keys a program does not read (`sleep` before a long paste) are the
    agent's doing, not our failure: the step ended as a `SandboxError` (retried, failing
    alike) after typing for a whole step timeout, and the reading then had another."""
    s = terminal(step_timeout=5)
    try:
        # raw mode: the line discipline takes keys only while a program reads them
        o = s.step(keystrokes("stty raw -echo; sleep 30\n", duration=0.5))
        assert not json.loads(o.state_json)["prompt_returned"]
        o = s.step(keystrokes("x" * 2_000_000, duration=5))
        state = json.loads(o.state_json)
        assert state["keys_untyped"] > 0 and not state["prompt_returned"], state
        assert state["waited_s"] <= 5 + 1.5, state  # one step timeout, not two
    finally:
        s.close()


def test_a_shell_exiting_while_keys_are_typed_leaves_its_last_words(docker_engine):
    """The shell ends in the middle of a long action: the step is the shell's exit, and
    what it printed before is on the screen (read as any output, not fed raw)."""
    s = terminal(step_timeout=20)
    try:
        o = s.step(keystrokes("echo last-words-$((6*7)); exit 3\n" + "y" * 1_000_000, duration=20))
        state = json.loads(o.state_json)
        assert state["shell_exited"] == "the shell exited (status 3)", state
        assert "last-words-42" in o.text, o.text[-400:]
    finally:
        s.close()


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/proc/locked", "/proc/locked"),  # no file can be made there
        ("/root", "Is a directory"),  # flock takes a directory; the holder cannot open it
        ("/opt/db.lock", "Read-only file system"),  # under read_only: true (below)
    ],
)
def test_file_locked_fails_its_set_up_unless_the_lock_is_held(docker_engine, path, said):
    """Found: `/proc/locked` and `read_only: true` set up in 0.1 s and the prompt said
    the file was locked; `/root` waited out the step timeout and was retried."""
    with pytest.raises(SandboxConfigError) as got:
        s = terminal([{"file_locked": path}], read_only=path == "/opt/db.lock", step_timeout=30)
        s.close()
        pytest.fail(f"set up: {s.describe()['initial_state']}")
    assert "file_locked" in str(got.value) and said in str(got.value), got.value


def test_file_locked_still_holds_its_lock(docker_engine):
    """The condition as it works: the lock is held while the agent runs."""
    s = terminal([{"file_locked": "data.db"}])
    try:
        o = s.step(keystrokes("flock -n data.db true; echo rc=$?\n", duration=10))
        assert "rc=1" in o.text, o.text
    finally:
        s.close()


def test_file_locked_needs_a_locker_in_the_image(docker_engine):
    """Found with the above: busybox has neither python3 nor flock, so nothing held the
    lock, and the wait ended at once on `flock: not found` (127): the prompt said the
    file was locked. Now no retry is spent on it."""
    with pytest.raises(SandboxConfigError) as got:
        terminal([{"file_locked": "data.db"}], image="worldtrace/busybox:latest").close()
    assert "neither python3 nor flock" in str(got.value), got.value
