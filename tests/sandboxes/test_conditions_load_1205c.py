"""Found (hunt 1205c): conditions that cannot work passed the load check.

`permission: root` ran as uid 0 while the initial state said "commands run as the
unprivileged user root". Read-only paths over what another condition's set-up writes
(`[read_only, {missing_commands: [git]}]`: `rm: cannot remove '/usr/bin/git': Read-only
file system`; `[{read_only: [/root]}, {permission: nobody}]`: `chown ... Read-only file
system`), a tmpfs inside a read-only copy (`disk_full` on /etc/ssl under `read_only: [/etc]`:
docker's 500 `failed to create shim task`), a tmpfs over /etc (`awk: not found`: it hid
/etc/alternatives) and paths docker cannot mount over (/proc, /etc/hostname: docker 500)
were accepted, then failed every attempt, retried, recorded with `conditions: null`. Now
`collect` and `jobs submit --dry-run` refuse each at load, naming the line and the
condition; drawn one at a time (`pick: one`) the pairs are allowed.

Real parts: the installed `worldtrace` command a user runs (no docker needed: nothing
runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PICK_ONE = "use `pick: one` to draw one of them"
HIDE = (
    "a tmpfs on /etc would hide the image's /etc (a tmpfs starts empty), which the shell, "
    "its programs and the set-up need: give a path of the agent's files (the working "
    "directory, /data, /var/tmp)"
)
NO_MOUNT = (
    "docker cannot mount over {} (the engine's own /proc, /sys, /dev, /etc/hostname, "
    "/etc/hosts and /etc/resolv.conf)"
)
ROOT = (
    "the user must be unprivileged, not root (uid 0): name another (nobody), or leave the "
    "condition out to run as root"
)

REFUSED = [
    ("[{permission: root}]", f"conditions[0].permission.user: {ROOT}"),
    ("[{permission: 0}]", f"conditions[0].permission.user: {ROOT}"),
    (
        "[read_only, {missing_commands: [git]}]",
        "conditions[1]: missing_commands conflicts with read_only: missing_commands removes "
        "commands from /usr/local/sbin, which read_only makes read-only (the read-only root "
        f"on /); {PICK_ONE}",
    ),
    (
        "[{read_only: [/usr/bin]}, {missing_commands: [git]}]",
        "conditions[1]: missing_commands conflicts with read_only: missing_commands removes "
        "commands from /usr/bin, which read_only makes read-only (a read-only copy on "
        f"/usr/bin); {PICK_ONE}",
    ),
    (
        "[{read_only: [/root]}, {permission: nobody}]",
        "conditions[1]: permission conflicts with read_only: permission hands /root to the "
        "user (chown -R), which read_only makes read-only (a read-only copy on /root); "
        f"{PICK_ONE}",
    ),
    (
        "[{file_locked: /etc/app.lock}, {read_only: [/etc]}]",
        "conditions[1]: read_only conflicts with file_locked: file_locked creates and locks "
        "/etc/app.lock, which read_only makes read-only (a read-only copy on /etc); "
        f"{PICK_ONE}",
    ),
    ("[{disk_full: {path: /etc}}, {read_only: [/etc]}]", f"conditions[0].disk_full.path: {HIDE}"),
    ("[{disk_full: {path: /etc}}]", f"conditions[0].disk_full.path: {HIDE}"),
    (
        "[{disk_full: {path: /etc/ssl}}, {read_only: [/etc]}]",
        "conditions[1]: read_only conflicts with disk_full: a tmpfs on /etc/ssl would lie "
        "inside a read-only copy on /etc (docker cannot make a mount point in a read-only "
        f"mount); {PICK_ONE}",
    ),
    (
        "[{disk_low: {path: /data/x}}, {read_only: [/data]}]",
        "conditions[1]: read_only conflicts with disk_low: a tmpfs on /data/x would lie "
        "inside a read-only copy on /data (docker cannot make a mount point in a read-only "
        f"mount); {PICK_ONE}",
    ),
    ("[{read_only: [/proc]}]", "conditions[0].read_only.paths[0]: " + NO_MOUNT.format("/proc")),
    (
        "[{read_only: [/etc/hostname]}]",
        "conditions[0].read_only.paths[0]: " + NO_MOUNT.format("/etc/hostname"),
    ),
    (
        "[{read_only: [/etc, /etc/ssl]}]",
        "conditions[0].read_only: /etc/ssl lies within /etc, and docker cannot make a mount "
        "point in a read-only mount: /etc alone covers it",
    ),
    (
        "[{disk_full: {path: /usr/local}}]",
        "conditions[0].disk_full.path: a tmpfs on /usr/local would hide the image's /usr (a "
        "tmpfs starts empty), which the shell, its programs and the set-up need: give a path "
        "of the agent's files (the working directory, /data, /var/tmp)",
    ),
    (
        "[{missing_commands: [git, sh]}]",
        "conditions[0].missing_commands.commands[1]: sh cannot be removed: the sandbox runs "
        "the set-up and every command through it",
    ),
    (
        "[{disk_full: {size: 0}}]",
        "conditions[0].disk_full.size: a tmpfs of size 0 has no limit at all: give a size "
        "such as 16m",
    ),
]


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def job(
    tmp_path: Path, conditions: str, name: str = "job.yaml", sandbox: str = "{kind: terminal}"
) -> Path:
    f = tmp_path / name
    f.write_text(
        f"name: c\nsandbox: {sandbox}\nretries: 2\n"
        f"conditions: {conditions}\n"
        'tasks:\n  - {id: t, instruction: x, actions: ["id\\n", "echo two\\n"]}\n'
    )
    return f


@pytest.mark.parametrize(("conditions", "said"), REFUSED, ids=[c for c, _ in REFUSED])
def test_what_cannot_work_is_refused_at_load(tmp_path, wt_env, conditions, said):
    f = job(tmp_path, conditions)
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"{f}:4: {said}"], r.stderr


def test_collect_refuses_before_any_episode(tmp_path, wt_env):
    f = job(tmp_path, "[{read_only: [/root]}, {permission: nobody}]")
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1].startswith(f"{f}:4: conditions[1]: permission ")
    assert not (Path(wt_env["WORLDTRACE_STORE"]) / "raw").exists()  # nothing ran


@pytest.mark.parametrize(
    "apply",
    [
        "[read_only, {missing_commands: [git]}]",
        "[{read_only: [/root]}, {permission: nobody}]",
        "[{disk_full: {path: /etc/ssl}}, {read_only: [/etc]}]",
    ],
)
def test_pick_one_never_lets_them_meet(tmp_path, wt_env, apply):
    f = job(tmp_path, f"{{pick: one, apply: {apply}}}")
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_a_write_under_a_writable_mount_is_allowed(tmp_path, wt_env):
    """The read-only root with the working directory on a tmpfs: permission's chown goes to
    the tmpfs; a lock in /tmp, the read-only root's writable /tmp."""
    f = job(tmp_path, "[read_only, disk_full, {permission: nobody}, {file_locked: /tmp/a.lock}]")
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_a_write_into_a_mounted_repository_is_refused(tmp_path, wt_env):
    """SWE `mount: true` binds the repository read-only: permission's chown cannot work
    there even alone."""
    calc = Path(__file__).resolve().parents[2] / "examples" / "data" / "calc"
    f = tmp_path / "swe.yaml"
    f.write_text(
        f"name: s\nsandbox: {{kind: swe, repo: {calc}, mount: true}}\n"
        "conditions: {pick: one, apply: [{permission: nobody}]}\n"
        "tasks: [{id: s, instruction: x, actions: [{tool: bash, arguments: {command: ls}}]}]\n"
    )
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        f"{f}:3: conditions.apply[0]: permission hands /repo to the user (chown -R), where the "
        "sandbox mounts the repository read-only (`mount: true`; `mount: false` copies it in)"
    ], r.stderr
