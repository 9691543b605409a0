"""Found (hunt 12-06): conditions whose record or text said what was not so, and job files
the load check let through that failed every attempt.

- `corrupt_file` with `offset: 1000` on a 32-byte file grew it to 1016 bytes (NULs, then
  the random ones) while the initial state said `16 bytes overwritten`; a file shorter
  than `bytes` was always extended. Now only the file's own bytes are overwritten: the
  record and the text say how many; an empty file or an offset past its end fails the
  attempt at set-up (a SandboxConfigError, not retried).
- A conditions entry's `rate: .inf` (`pick: one`) failed every attempt with `ValueError:
  Total of weights must be finite`; `rate: .nan` (`pick: all`) never applied the
  condition. Both passed `jobs submit --dry-run`; now refused there with their key.
- `missing_commands: [find]` in the SWE kind listed `Repository at /repo (0 files)`, and
  `[stat]` made `read`/`edit` of an existing file answer `not found`: the kind's own
  tools run those. The kind declares what its tools run (`swe.TOOL_COMMANDS`), and a job
  removing one is refused at load, naming the command (the terminal's agent may lose
  `find`).
- On worldtrace/busybox, `missing_commands: [cat, grep]` left both working (busybox sh
  runs its applets without the PATH) and the trajectory said they were gone. Now the
  attempt fails at set-up saying so; a shell builtin (`echo`) alike.
- `disk_full: {path: "//usr"}`, `read_only: ["//proc"]`, `"//etc/hosts"` passed the load
  check (a leading `//` kept by normpath) and failed every attempt with docker's 500.
- `inodes_low: {free: 2}` said `new files cannot be created` while two could be.
- `disk_low: {free: 512k, size: 1m}` after a set-up that wrote 768k recorded and said
  512k free while 256k were (the set-up used what `size` left for `free`; `inodes_low`
  had it mended already): the record and the text now say what is left (2026-12-06b).
- `missing_commands: [perl]` left `perl5.36.0` (a hard link of perl) running; versioned
  names now include a dotted version right after the name, and links named by a number
  (`ping6`), never another command (`diff3`, `sha256sum`).
- `permission: 1234` (no such user in the image) ran as `gid=0(root)` under a text
  calling the user unprivileged: it now runs with group 1234; a user of the root group
  is refused.
- docs/conditions.md said conditions were also in `metadata["conditions"]`; no writer
  puts them there.

Real parts: docker sandboxes, the `worldtrace` command a user runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.sandboxes import swe
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas.actions import keystrokes, tool_call

ROOT = Path(__file__).resolve().parents[2]
CALC = str(ROOT / "examples" / "data" / "calc")
IMAGE = "worldtrace/debian:latest"
BUSYBOX = "worldtrace/busybox:latest"
ALPHABET = "0123456789abcdefghijklmnopqrstuv"  # 32 bytes


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def job_file(tmp_path: Path, conditions: str, sandbox: str = "{kind: terminal}") -> Path:
    f = tmp_path / "job.yaml"
    f.write_text(
        f"name: c\nsandbox: {sandbox}\nconditions: {conditions}\n"
        'tasks:\n  - {id: t, instruction: x, actions: ["id\\n"]}\n'
    )
    return f


def terminal(image: str = IMAGE, **docker) -> TerminalSandbox:
    config = DockerConfig(image=image, step_timeout=20, **docker)
    return TerminalSandbox(TerminalConfig(docker=config))


def reset(s, conditions: list, setup: tuple[str, ...] = ()):
    return s.reset(TaskSpec("c", setup=setup), conditions=parse_conditions(conditions).sample(0))


def say(s: TerminalSandbox, keys: str) -> list[str]:
    """The lines a command printed (its echo and the prompt left out)."""
    return s.step(keystrokes(keys + "\n")).text.splitlines()[1:-1]


def condition_lines(s) -> list[str]:
    return [x for x in s.describe()["initial_state"].splitlines() if x.startswith("Condition:")]


# -- 1 and 9: corrupt_file overwrites, never grows; the record is where the docs say ---------
@pytest.mark.docker
def test_collect_records_what_corrupt_file_overwrote_where_the_docs_say(
    tmp_path, wt_env, docker_engine
):
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: c\nsandbox: {kind: terminal}\n"
        "conditions: [{corrupt_file: {path: f.txt, offset: 30, bytes: 8}}]\n"
        f'tasks:\n  - {{id: t, instruction: x, setup: ["printf {ALPHABET} > f.txt"],'
        ' actions: ["wc -c < f.txt; head -c 30 f.txt; echo\\n"]}\n'
    )
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == 0, (r.stdout, r.stderr)
    sql = (
        "select conditions, system.initial_state, metadata, turns[1].observation.text as seen"
        " from raw_trajectories"
    )
    r = wt(wt_env, "query", "--format", "json", sql)
    [row] = json.loads(r.stdout)
    assert json.loads(row["conditions"]) == [
        {"kind": "corrupt_file", "path": "f.txt", "bytes": 2, "offset": 30, "seed": 2146562134}
    ]
    assert "Condition: /root/f.txt is corrupted (2 bytes overwritten)" in row["initial_state"]
    assert row["seen"].splitlines()[1:3] == ["32", ALPHABET[:30]]
    # docs/conditions.md says where they are: the field, not the metadata
    assert "conditions" not in row["metadata"]
    docs = (ROOT / "docs" / "conditions.md").read_text()
    assert 'also `metadata["conditions"]`' not in docs


@pytest.mark.docker
def test_corrupt_file_stays_within_the_file_or_fails_the_set_up(docker_engine):
    s = terminal()
    try:
        reset(s, [{"corrupt_file": {"path": "f.txt", "bytes": 16}}], ("printf abcde > f.txt",))
        assert say(s, "wc -c < f.txt") == ["5"]  # a seeded place, the whole short file
        assert s.describe()["conditions"] == [
            {"kind": "corrupt_file", "path": "f.txt", "bytes": 5, "offset": 0, "seed": 0}
        ]
        assert condition_lines(s) == ["Condition: /root/f.txt is corrupted (5 bytes overwritten)"]
        reset(
            s, [{"corrupt_file": {"path": "f.txt", "offset": 31}}], (f"printf {ALPHABET} > f.txt",)
        )
        assert say(s, "wc -c < f.txt; head -c 31 f.txt; echo") == ["32", ALPHABET[:31]]
        assert condition_lines(s) == ["Condition: /root/f.txt is corrupted (1 byte overwritten)"]
        with pytest.raises(SandboxConfigError) as e:
            reset(
                s,
                [{"corrupt_file": {"path": "f.txt", "offset": 32}}],
                (f"printf {ALPHABET} > f.txt",),
            )
        assert str(e.value) == (
            "condition corrupt_file: offset 32 is past the end of /root/f.txt (32 bytes after "
            "the task's set-up): give an offset below 32, or none (a seeded place)"
        )
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"corrupt_file": "f.txt"}], (": > f.txt",))
        assert str(e.value) == (
            "condition corrupt_file: /root/f.txt is empty after the task's set-up: it has no "
            "byte to overwrite"
        )
    finally:
        s.close()


# -- 2: a rate that is not a finite number -------------------------------------------------
@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        (
            "{pick: one, apply: [{pids_low: {limit: 16, rate: .inf}}, {disk_full: {path: /data}}]}",
            "conditions.apply[0].pids_low.rate: must be a finite number >= 0",
        ),
        (
            "{pick: all, apply: [{pids_low: {limit: 16, rate: .nan}}]}",
            "conditions.apply[0].pids_low.rate: must be a finite number >= 0",
        ),
        (
            "{pick: one, apply: [{kind: disk_full, rate: 1.0e+308}, {kind: cpu_slow, rate: 1.0e+308}]}",
            "conditions.apply: the rates of `pick: one` are weights: their total must be finite",
        ),
    ],
    ids=["inf", "nan", "total"],
)
def test_a_rate_that_is_not_finite_is_refused_at_submit(tmp_path, wt_env, conditions, said):
    f = job_file(tmp_path, conditions)
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"{f}:3: {said}"], r.stderr


# -- 3: the SWE kind's own tools keep what they run ----------------------------------------
def test_swe_refuses_to_remove_what_its_tools_run(tmp_path, wt_env):
    f = job_file(tmp_path, "[{missing_commands: [git, find, stat, cat]}]", f"{{kind: swe, repo: {CALC}}}")  # fmt: skip
    f.write_text(f.read_text().replace('actions: ["id\\n"]', "actions: [{tool: bash, arguments: {command: ls}}]"))  # fmt: skip
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        f"{f}:3: conditions[0].missing_commands.commands[{i}]: {command} cannot be removed "
        f"from this sandbox: its own tools run it ({swe.TOOL_COMMANDS[command]}), and the "
        "agent would meet them failing, not a missing command"
        for i, command in ((1, "find"), (2, "stat"), (3, "cat"))
    ], r.stderr
    terminal_job = job_file(tmp_path, "[{missing_commands: [find, stat, cat]}]")
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(terminal_job))
    assert r.returncode == 0, (r.stdout, r.stderr)  # the terminal's agent may lose them


@pytest.mark.docker
def test_swe_refuses_them_from_code_and_its_tools_need_nothing_else(docker_engine, repo):
    s = SWESandbox(SWEConfig(repo=str(repo), docker=DockerConfig(step_timeout=20)))
    try:
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"missing_commands": ["stat"]}])
        assert str(e.value).startswith(
            "stat cannot be removed from this sandbox: its own tools run it ("
        )
        assert s.container is None
        keep = " ".join(f"! -name {c}" for c in ("sh", "dash", *swe.TOOL_COMMANDS))
        strip = (  # every program but sh and what the tools declare
            f"find /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin -mindepth 1 -maxdepth 1"
            f" ! -type d {keep} -delete"
        )
        obs = reset(s, [{"setup": {"commands": [strip], "description": "bare"}}])
        assert obs.text.splitlines()[:3] == ["Repository at /repo (2 files):", "README.md", "pkg/calc.py"]  # fmt: skip
        o = s.step(tool_call("bash", {"command": "ls; echo rc=$?"}))
        assert o.text.endswith("rc=127\n"), o.text  # nothing else is left
        assert s.step(tool_call("read", {"path": "pkg/calc.py"})).text == (
            "     1\tdef add(a, b):\n     2\t    return a - b"
        )
        o = s.step(tool_call("read", {"path": "pkg/calc.py", "start": 9}))
        assert o.text == "error: start 9 is past the last line of pkg/calc.py (2)"
        o = s.step(tool_call("edit", {"path": "pkg/calc.py", "old": "a - b", "new": "a + b"}))
        assert "+    return a + b" in o.text and not o.is_error, o.text
    finally:
        s.close()


# -- 4 and 7: missing_commands holds, or the attempt fails; versioned names ---------------
@pytest.mark.docker
def test_what_the_shell_runs_without_the_path_cannot_be_made_missing(docker_engine):
    s = terminal(BUSYBOX)
    try:
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"missing_commands": ["cat", "grep"]}], ("echo hi > f.txt",))
        assert str(e.value) == (
            f"condition missing_commands: cat still runs in the image {BUSYBOX} with no file "
            "of it on the PATH (`command -v cat` answers `cat`: a builtin of its shell, or an "
            "applet busybox runs itself), so it cannot be made missing"
        )
    finally:
        s.close()
    s = terminal()
    try:
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"missing_commands": ["echo"]}])
        assert str(e.value).startswith(f"condition missing_commands: echo still runs in the image {IMAGE} ")  # fmt: skip
    finally:
        s.close()


@pytest.mark.docker
def test_missing_commands_takes_versioned_names_not_other_commands(docker_engine):
    s = terminal()
    try:
        reset(s, [{"missing_commands": ["perl", "python", "ping", "diff", "sha"]}])
        gone = "perl5.36.0 perl5.36-x86_64-linux-gnu python3.11 python3 ping6 ping4"
        assert say(s, f"for c in {gone}; do command -v $c; done; echo rc=$?") == ["rc=1"]
        assert say(s, "diff3 --version | head -n 1; sha256sum < /dev/null") == [
            "diff3 (GNU diffutils) 3.8",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  -",
        ]
    finally:
        s.close()


# -- 5: a leading `//` ---------------------------------------------------------------------
NO_MOUNT = (
    "docker cannot mount over {} (the engine's own /proc, /sys, /dev, /etc/hostname, "
    "/etc/hosts and /etc/resolv.conf)"
)


@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        (
            '[{disk_full: {path: "//usr"}}]',
            "conditions[0].disk_full.path: a tmpfs on /usr would hide the image's /usr (a "
            "tmpfs starts empty), which the shell, its programs and the set-up need: give a "
            "path of the agent's files (the working directory, /data, /var/tmp)",
        ),
        (
            '[{read_only: ["//proc"]}]',
            "conditions[0].read_only.paths[0]: " + NO_MOUNT.format("/proc"),
        ),
        (
            '[{read_only: ["//etc/hosts"]}]',
            "conditions[0].read_only.paths[0]: " + NO_MOUNT.format("/etc/hosts"),
        ),
        (
            '[{file_locked: "//etc/app.lock"}, {read_only: [/etc]}]',
            "conditions[1]: read_only conflicts with file_locked: file_locked creates and locks "
            "/etc/app.lock, which read_only makes read-only (a read-only copy on /etc); use "
            "`pick: one` to draw one of them",
        ),
    ],
    ids=["usr", "proc", "hosts", "lock"],
)
def test_a_leading_double_slash_is_judged_as_one(tmp_path, wt_env, conditions, said):
    f = job_file(tmp_path, conditions)
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"{f}:3: {said}"], r.stderr


# -- 6: inodes_low says how many files can still be made -----------------------------------
@pytest.mark.docker
def test_inodes_low_says_how_many_files_can_still_be_made(docker_engine):
    s = terminal()
    try:
        reset(s, [{"inodes_low": {"path": "/data", "free": 2}}])
        assert condition_lines(s) == [
            "Condition: only 2 inodes are left in /data: at most 2 more files or directories "
            "can be created"
        ]
        assert say(s, "touch /data/a /data/b /data/c") == [
            "touch: cannot touch '/data/c': No space left on device"
        ]
        fill = "i=1; while [ $i -lt 64 ]; do touch /data/f$i; i=$((i + 1)); done"
        reset(s, [{"inodes_low": {"path": "/data", "free": 5, "inodes": 64}}], (fill,))
        assert s.describe()["conditions"][0]["free"] == 0  # the set-up used them all
        assert condition_lines(s) == [
            "Condition: no inodes are left in /data: new files cannot be created"
        ]
        # disk_low alike (2026-12-06b): a set-up that used what `size` left for `free`
        fill = "head -c 786432 /dev/zero > /data/big"
        reset(s, [{"disk_low": {"path": "/data", "free": "512k", "size": "1m"}}], (fill,))
        assert s.describe()["conditions"][0]["free"] == "256k"
        assert condition_lines(s) == ["Condition: the disk is nearly full: 256 KiB free in /data"]
        assert say(s, "head -c 300000 /dev/zero > /data/x; echo rc=$?") == [
            "head: error writing 'standard output': No space left on device",
            "rc=1",
        ]
        fill = "head -c 1048576 /dev/zero > /data/big"
        reset(s, [{"disk_low": {"path": "/data", "free": "512k", "size": "1m"}}], (fill,))
        assert s.describe()["conditions"][0]["free"] == "0k"
        assert condition_lines(s) == ["Condition: the disk is full: no space is left in /data"]
    finally:
        s.close()


# -- 8: permission's group -----------------------------------------------------------------
@pytest.mark.docker
def test_a_uid_the_image_does_not_list_gets_a_group_of_its_own(docker_engine):
    s = terminal()
    try:
        reset(s, [{"permission": 1234}])
        assert say(s, "id; stat -c %u:%g .; touch mine; echo rc=$?") == [
            "uid=1234 gid=1234 groups=1234",
            "1234:1234",
            "rc=0",
        ]
        wheel = "echo 'wheel0:x:1500:0::/tmp:/bin/sh' >> /etc/passwd"
        with pytest.raises(SandboxConfigError) as e:
            reset(s, [{"permission": "wheel0"}], (wheel,))
        assert str(e.value) == (
            f"condition permission: wheel0 is in the root group (gid 0) in the image {IMAGE}, "
            "no unprivileged user"
        )
    finally:
        s.close()
