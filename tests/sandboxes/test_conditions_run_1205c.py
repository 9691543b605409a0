"""Found (hunt 1205c): conditions whose run said what was not so, or failed for ever.

- `permission: ghost` (a user the image lacks) failed every attempt with `id: 'ghost': no
  such user`, retried; a set-up command of a condition that failed was retried alike.
  Now it is one SandboxConfigError naming the user and the image, not retried. A user
  that is uid 0 under another name is refused alike (the load check refuses `root`).
- `missing_commands: [bash]` on the terminal: `the shell exited before its first prompt`.
  The default shell is bash, else sh: now sh.
- `[disk_full, {missing_commands: [df]}]`: the disk's set-up ran df after it was removed.
- `missing_commands: [python3, git]` left `python3.11` working while the initial state
  said python3 was not installed: its versioned names go too, and the text says what.
- `disk_low: {free: 2k}` gave 4 KiB (a tmpfs gives pages) while the record said 2k.
- Records left out `disk_full`'s default `path` and `corrupt_file`'s seeded `offset`;
  the clock said "1 years behind".
- Conditions handed from code that cannot meet (`read_only` on /root with `permission`)
  ran the chown into a read-only copy: now the reset refuses them before any container.

Real parts: docker sandboxes, the `worldtrace` command a user runs."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

pytestmark = pytest.mark.docker

IMAGE = "worldtrace/debian:latest"
ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"


def terminal() -> TerminalSandbox:
    return TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20)))


def under(conditions: list, setup: tuple[str, ...] = ()) -> TerminalSandbox:
    s = terminal()
    try:
        s.reset(TaskSpec("c", setup=setup), conditions=parse_conditions(conditions).sample(0))
    except BaseException:
        s.close()
        raise
    return s


def say(s: TerminalSandbox, keys: str) -> list[str]:
    """The lines a command printed (its echo and the prompt left out)."""
    return s.step(keystrokes(keys + "\n")).text.splitlines()[1:-1]


def test_a_user_the_image_lacks_is_one_config_error_not_retried(tmp_path, wt_env, docker_engine):
    f = tmp_path / "ghost.yaml"
    f.write_text(
        "name: ghost\nsandbox: {kind: terminal}\nretries: 2\n"
        "conditions: [{permission: ghost}]\n"
        'tasks:\n  - {id: t, instruction: x, actions: ["id\\n", "echo two\\n"]}\n'
    )
    r = subprocess.run(
        ["worldtrace", "--store", str(tmp_path / "s"), "--create", "collect", str(f)],
        capture_output=True,
        text=True,
        env=wt_env,
        timeout=300,
    )
    said = r.stdout + r.stderr
    attempts = [line for line in said.splitlines() if " t-e0 attempt " in line]
    assert len(attempts) == 1, said  # no retry adds the user
    assert (
        "t-e0 attempt 1: error (0 turns): SandboxConfigError: condition permission: the image "
        f"{IMAGE} has no user ghost (not in its /etc/passwd): name one it has (nobody) or a "
        "numeric uid"
    ) in attempts[0], said


def test_uid_0_under_another_name_is_refused_at_reset(docker_engine):
    alias = "echo 'toor:x:0:0::/root:/bin/sh' >> /etc/passwd"
    with pytest.raises(SandboxConfigError) as e:
        under([{"permission": "toor"}], setup=(alias,))
    assert str(e.value) == (
        f"condition permission: toor is root (uid 0) in the image {IMAGE}, no unprivileged user"
    )


def test_a_failing_condition_set_up_is_a_config_error(docker_engine):
    with pytest.raises(SandboxConfigError) as e:
        under([{"setup": {"commands": ["echo nope; exit 3"], "description": "d"}}])
    assert str(e.value) == (
        f"condition setup cannot be set up in the image {IMAGE} after the task's set-up: "
        "condition set-up failed (3): cd /root && echo nope; exit 3: nope\n"
    )
    with pytest.raises(SandboxConfigError) as e:
        under([{"corrupt_file": "absent.txt"}])
    assert str(e.value) == (
        "condition corrupt_file: /root/absent.txt is no file after the task's set-up (the "
        "set-up must make it)"
    )


def test_conditions_that_cannot_meet_are_refused_from_code_before_a_container(docker_engine):
    s = terminal()
    try:
        with pytest.raises(SandboxConfigError) as e:
            s.reset(
                TaskSpec("c"),
                conditions=parse_conditions([{"read_only": "/root"}, "permission"]).sample(0),
            )
        assert str(e.value).startswith(
            "permission conflicts with read_only: permission hands /root to the user"
        )
        assert s.container is None
    finally:
        s.close()


def test_without_bash_the_terminal_opens_sh(docker_engine):
    s = under([{"missing_commands": "bash"}])
    try:
        assert say(s, "echo $0; bash -c true; echo rc=$?") == [
            "/bin/sh",
            "/bin/sh: 1: bash: not found",
            "rc=127",
        ]
        state = s.describe()["initial_state"]
        assert "Installed tools: sh python3 git curl" in state
    finally:
        s.close()


def test_missing_commands_go_with_their_versioned_names_after_the_others(docker_engine):
    s = under(["disk_full", {"missing_commands": ["python3", "git", "df"]}], ("echo a > a",))
    try:  # the disk's set-up ran df before it went
        assert say(s, "python3.11 -V; echo rc=$?; git --version; echo rc=$?") == [
            "bash: python3.11: command not found",
            "rc=127",
            "bash: git: command not found",
            "rc=127",
        ]
        assert "No space left on device" in " ".join(say(s, "head -c 8192 /dev/zero > b"))
        d = s.describe()
        assert d["conditions"][1] == {"kind": "missing_commands", "commands": ["python3", "git", "df"]}  # fmt: skip
        assert (
            "Condition: these commands are not on the PATH (removed with their versioned "
            "names): python3, git, df"
        ) in d["initial_state"]
    finally:
        s.close()


def test_records_say_what_the_agent_got(docker_engine):
    s = under(
        [{"disk_low": "2k"}, {"corrupt_file": {"path": "data.txt", "seed": 5}}, {"clock": "-1y"}],
        (f"printf {ALPHABET.decode()} > data.txt",),
    )
    try:
        d = s.describe()
        low, corrupt, clock = d["conditions"]
        assert low == {"kind": "disk_low", "free": "4k", "size": "16m", "path": "/root"}
        free = int(say(s, "df -Pk . | tail -n 1")[0].split()[3])
        assert free == 4  # what the record says: one page
        now = bytes.fromhex(say(s, "od -An -v -tx1 data.txt | tr -d ' \\n'; echo")[0])
        changed = [i for i, (a, b) in enumerate(zip(now, ALPHABET, strict=True)) if a != b]
        assert corrupt["offset"] == min(changed), (corrupt, changed)
        assert clock == {"kind": "clock", "offset": "-1y"}
        state = d["initial_state"]
        assert "Condition: the disk is nearly full: 4 KiB free in /root" in state
        assert "Condition: the system clock is 1 year behind the real time" in state
    finally:
        s.close()


def test_an_allowed_combination_runs(docker_engine):
    """The read-only root with the working directory on a full tmpfs, as nobody."""
    s = under(["read_only", "disk_full", {"permission": "nobody"}], ("echo a > a",))
    try:
        assert say(s, "id -un; touch /etc/x; echo b > b") == [
            "nobody",
            "touch: cannot touch '/etc/x': Read-only file system",
            "bash: echo: write error: No space left on device",
        ]
        assert s.describe()["conditions"][1] == {"kind": "disk_full", "size": "16m", "path": "/root"}  # fmt: skip
    finally:
        s.close()


def test_the_job_record_keeps_the_disk_path(tmp_path, wt_env, docker_engine):
    f = tmp_path / "disk.yaml"
    f.write_text(
        "name: disk\nsandbox: {kind: terminal}\nconditions: [disk_full]\n"
        'tasks:\n  - {id: t, instruction: x, actions: ["ls\\n", "echo two\\n"]}\n'
    )
    store = tmp_path / "s"
    r = subprocess.run(
        ["worldtrace", "--store", str(store), "--create", "collect", str(f)],
        capture_output=True,
        text=True,
        env=wt_env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    sql = "select conditions from raw_trajectories"
    q = subprocess.run(
        ["worldtrace", "--store", str(store), "query", sql, "--format", "json"],
        capture_output=True,
        text=True,
        env=wt_env,
        timeout=120,
    )
    [row] = json.loads(q.stdout)
    assert json.loads(row["conditions"]) == [{"kind": "disk_full", "path": "/root", "size": "16m"}]
