"""Found (hunt 12-06r), with the `worldtrace` command and real docker:

- `missing_commands: [rm]` never applied on worldtrace/debian: removed with `rm` itself,
  dash kept rm's place in its hash table, so the check said `rm remains at /usr/bin/rm`
  (a SandboxConfigError) with the file gone; with another command after it nothing was
  left to remove the rest.
- A disk kind on a file of the image (`disk_full: {path: /etc/passwd}`, `/root/.bashrc`)
  or `read_only: [/etc/passwd]` failed every attempt with the engine's raw 400/500
  (`not a directory`), retried: now a SandboxConfigError naming the path and the image.
- A replay job with `conditions: {rate: 0.5, ...}` ran an episode that drew none under the
  recording's conditions: a job with a conditions block gives its own.
- `docker.read_only: true` with `missing_commands` passed submit and failed at reset.
- `[{disk_full: {path: /tmp}}, {read_only: [/]}]` said both `no space is left in /tmp`
  and `/tmp stays writable`.
- On worldtrace/busybox, `permission: nobody` told to `name one it has (nobody)`: it has
  none; now the message names the users it has.
- A `corrupt_file` whose write failed hid why (dd's errors went to /dev/null, the reason
  was our own script cut at 200 characters).
- `missing_commands: ["."]` passed submit and failed at reset.
- `clock: -3000y` said `3000 years behind` while `date` printed the year -972, python
  1677 and ls 1901: an offset is now at most 50 years either way, where they agree.

Real parts: docker sandboxes, the `worldtrace` command a user runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import SandboxConfigError
from worldtrace.sandboxes.conditions import Plan, parse_conditions
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

from .test_conditions_hunt_1206 import (
    BUSYBOX,
    IMAGE,
    condition_lines,
    job_file,
    reset,
    say,
    terminal,
    wt,
)


def submit_said(tmp_path: Path, wt_env: dict, conditions: str, sandbox: str = "{kind: terminal}"):
    """What `jobs submit --dry-run` refused (its lines), or [] when it took the job."""
    f = job_file(tmp_path, conditions, sandbox)
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode in (0, 1), (r.stdout, r.stderr)
    prefix = f"{f}:3: "
    return [x.removeprefix(prefix) for x in r.stderr.strip().splitlines()] if r.returncode else []


# -- 2: rm removes itself, and what comes after it ------------------------------------------
@pytest.mark.docker
def test_missing_rm_is_missing_and_the_commands_after_it_too(docker_engine):
    s = terminal()
    try:
        reset(s, [{"missing_commands": ["rm", "git", "python3"]}])
        assert say(s, "rm x; git --version; python3 -V") == [
            "bash: rm: command not found",
            "bash: git: command not found",
            "bash: python3: command not found",
        ]
        assert say(s, "ls /usr/bin/rm /usr/bin/git /usr/bin/python3.11 2>&1 | wc -l") == ["3"]
    finally:
        s.close()


# -- 3: a mount on a file of the image -----------------------------------------------------
@pytest.mark.docker
@pytest.mark.parametrize(
    ("condition", "said"),
    [
        (
            {"disk_full": {"path": "/etc/passwd"}},
            "condition disk_full: /etc/passwd is a file in the image worldtrace/debian:latest, "
            "and docker mounts a tmpfs only on a directory: give a directory's path (or one "
            "the image lacks)",
        ),
        (
            {"disk_low": {"path": "/root/.bashrc"}},
            "condition disk_low: /root/.bashrc is a file in the image worldtrace/debian:latest, "
            "and docker mounts a tmpfs only on a directory: give a directory's path (or one "
            "the image lacks)",
        ),
        (
            {"read_only": ["/etc/passwd"]},
            "condition read_only: /etc/passwd is a file in the image worldtrace/debian:latest, "
            "and docker copies only a directory into a read-only mount: give a directory's "
            "path",
        ),
    ],
    ids=["disk_full", "disk_low", "read_only"],
)
def test_a_mount_on_a_file_of_the_image_is_the_jobs_mistake(docker_engine, condition, said):
    config = DockerConfig(image=IMAGE, warm=0)
    pool = ContainerPool(config, docker_engine)
    try:
        plan = Plan(
            parse_conditions([condition]).sample(0), TerminalSandbox.where(TerminalConfig())
        )
        with pytest.raises(SandboxConfigError) as e:  # not retried, the engine's text gone
            pool.release(plan.acquire(pool, plan.run_kwargs(config.run_kwargs()), "f"), True)
        assert str(e.value) == said
        # a directory, and a path the image lacks (docker makes it), still start
        ok = Plan(parse_conditions([{"disk_full": {"path": "/data"}}]).sample(0), plan.where)
        pool.release(ok.acquire(pool, ok.run_kwargs(config.run_kwargs()), "ok"), wait=True)
    finally:
        pool.close()


# -- 5: a replay's job gives its own conditions, even a draw of none ------------------------
@pytest.mark.docker
def test_a_replay_episode_that_drew_no_condition_runs_plain(docker_engine, store):
    record = {
        "name": "rec",
        "sandbox": "terminal",
        "conditions": [{"memory_low": "128m"}],
        "tasks": [{"id": "t", "actions": ["echo hi\n"]}],
    }
    [original] = run_job(JobSpec.from_dict(record), store.raw).trajectories
    replay = JobSpec.from_dict(
        {
            "name": "replay",
            "sandbox": "terminal",
            "policy": "replay",
            "seed": 2,
            "episodes": 2,
            "conditions": {"rate": 0.5, "apply": [{"memory_low": "64m"}]},
            "tasks": [{"id": "r", "replay": original.trajectory_id[:12]}],
        }
    )
    assert [len(replay.conditions_for(e)) for e in replay.expand()] == [0, 1]  # the draws
    got = sorted(run_job(replay, store.raw).trajectories, key=lambda t: t.source.episode_id)
    assert [json.loads(t.conditions or "[]") for t in got] == [
        [],
        [{"kind": "memory_low", "limit": "64m"}],
    ]


# -- 7: a read-only root of the job's own ----------------------------------------------------
def test_missing_commands_under_the_jobs_read_only_root_is_refused_at_submit(tmp_path, wt_env):
    said = submit_said(tmp_path, wt_env, "[{missing_commands: [git]}]", "{kind: terminal, docker: {read_only: true}}")  # fmt: skip
    assert said == [
        "conditions[0].missing_commands.commands: missing_commands removes commands from the "
        "PATH's directories, on the sandbox's read-only root (`docker.read_only: true`; only "
        "/root and /tmp stay writable)"
    ]
    said = submit_said(tmp_path, wt_env, "[{corrupt_file: /etc/passwd}, {corrupt_file: notes.txt}]", "{kind: terminal, docker: {read_only: true}}")  # fmt: skip
    assert said == [
        "conditions[0].corrupt_file.path: corrupt_file overwrites bytes in /etc/passwd, on "
        "the sandbox's read-only root (`docker.read_only: true`; only /root and /tmp stay "
        "writable)"
    ]


@pytest.mark.docker
def test_missing_commands_under_the_jobs_read_only_root_is_refused_from_code(docker_engine):
    s = terminal(read_only=True)
    try:
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"missing_commands": ["git"]}])
        assert str(e.value).startswith("missing_commands removes commands from the PATH's ")
        assert s.container is None  # said before any container starts
    finally:
        s.close()


# -- 8: a full /tmp under a read-only root ----------------------------------------------------
@pytest.mark.docker
def test_a_full_tmp_under_a_read_only_root_is_not_said_writable(docker_engine):
    s = terminal()
    try:
        reset(s, [{"disk_full": {"path": "/tmp"}}, {"read_only": ["/"]}])
        assert condition_lines(s) == [
            "Condition: the disk is full: no space is left in /tmp",
            "Condition: the file system is read-only but for /tmp",
        ]
        assert say(s, "echo x > /tmp/a; touch /root/b 2>&1 | sed 's/.*: //'") == [
            "bash: /tmp/a: No space left on device",
            "Read-only file system",
        ]
        reset(s, [{"read_only": ["/"]}])
        assert condition_lines(s) == ["Condition: the file system is read-only (/tmp stays writable)"]  # fmt: skip
    finally:
        s.close()
    s = terminal(read_only=True)  # the job's own root keeps the working directory writable
    try:
        reset(s, [{"read_only": ["/"]}])
        assert condition_lines(s) == [
            "Condition: the file system is read-only (/root and /tmp stay writable)"
        ]
        assert say(s, "touch /root/a /tmp/a && echo ok") == ["ok"]
    finally:
        s.close()


# -- 9: a user busybox lacks ------------------------------------------------------------------
@pytest.mark.docker
def test_a_missing_user_is_told_with_the_users_the_image_has(docker_engine):
    s = terminal(BUSYBOX)
    try:
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"permission": "nobody"}])
        assert str(e.value) == (
            f"condition permission: the image {BUSYBOX} has no user nobody (not in its "
            "/etc/passwd): name one it has (user) or a numeric uid"
        )
    finally:
        s.close()


# -- 10: why corrupt_file could not overwrite ------------------------------------------------
@pytest.mark.docker
def test_corrupt_file_says_why_it_cannot_overwrite(docker_engine):
    s = terminal()
    try:
        with pytest.raises(SandboxConfigError) as e:  # docker keeps /proc/sys read-only
            reset(s, [{"corrupt_file": "/proc/sys/kernel/hostname"}])
        assert str(e.value) == (
            "condition corrupt_file: cannot overwrite /proc/sys/kernel/hostname in the image "
            f"{IMAGE}: dd: failed to open '/proc/sys/kernel/hostname': Read-only file system"
        )
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"corrupt_file": "src"}], ("mkdir src",))
        assert str(e.value) == (
            "condition corrupt_file: /root/src is a directory after the task's set-up, no file"
        )
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"corrupt_file": "gone.txt"}])
        assert str(e.value) == (
            "condition corrupt_file: /root/gone.txt is no file after the task's set-up "
            "(the set-up must make it)"
        )
    finally:
        s.close()


# -- 11: names that are no command -----------------------------------------------------------
@pytest.mark.parametrize("name", [".", ".."])
def test_a_command_name_of_dots_is_refused_at_submit(tmp_path, wt_env, name):
    said = submit_said(tmp_path, wt_env, f'[{{missing_commands: [git, "{name}"]}}]')
    assert said == [
        f"conditions[0].missing_commands.commands[1]: not a command name: {name!r} (a "
        "directory's name)"
    ]


# -- 12: a clock offset the programs agree on ------------------------------------------------
@pytest.mark.parametrize("offset", ["-3000y", "+51y", "-18251d", "+438001h", "-26280001m", "+1576800001s"])  # fmt: skip
def test_a_clock_offset_past_50_years_is_refused_at_submit(tmp_path, wt_env, offset):
    said = submit_said(tmp_path, wt_env, f"[{{clock: {offset}}}]")
    assert len(said) == 1 and said[0].startswith(
        f"conditions[0].clock.offset: {offset} is more than 50 years (18250 days) off"
    ), said
    assert submit_said(tmp_path, wt_env, "[{clock: -18250d}]") == []


@pytest.mark.docker
@pytest.mark.parametrize("offset", ["-50y", "+50y"])
def test_at_the_bound_date_python_file_times_and_git_agree(docker_engine, offset):
    s = terminal()
    try:
        reset(s, [{"clock": offset}])
        years = say(
            s,
            "date +%Y; python3 -c 'import time; print(time.localtime().tm_year)';"
            " touch f; stat -c %y f | cut -c1-4; git init -q r && cd r &&"
            " git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x &&"
            " git log --format=%ad --date=format:%Y; cd ..",
        )
        assert len(set(years)) == 1 and len(years) == 4, years
        real = int(subprocess.run(["date", "+%Y"], capture_output=True, text=True).stdout)
        assert abs(int(years[0]) - (real + int(offset[:-1]))) <= 1, years
    finally:
        s.close()
