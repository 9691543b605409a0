"""Found (hunt 12-05): two job files the docs allow that went wrong.

- An SWE sandbox with `mount: true` under `conditions: [disk_full]` was accepted by
  `collect` and `jobs submit --dry-run`; every attempt then failed at its start with
  docker's `400 Client Error ... Duplicate mount point: /repo` (the condition's tmpfs on
  the working directory, where the repository is bound) and was retried for nothing. So
  did `[disk_full, read_only]` on a copied repository (read_only binds it there). Now the
  job file is refused at load, naming the line, the condition and why; a condition given
  a path of its own still runs.
- `sandbox: {kind: terminal, shell: /bin/zsh}`, written as docs/collect.md says ("a path,
  or a name"), was refused with `sandbox.shell: Input should be a valid tuple`. Now a
  string is a command line, as a shell splits it.

Real parts: the `worldtrace` commands a user runs, docker sandboxes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.condition_kinds import DiskFull
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.schemas.parsing import parse

CALC = str(Path(__file__).resolve().parents[2] / "examples" / "data" / "calc")
MOUNTED = (
    "disk_full puts a tmpfs on /repo, where the sandbox mounts the repository read-only "
    "(`mount: true`; `mount: false` copies it in): docker refuses two mounts on one path "
    "(`Duplicate mount point`); give disk_full another `path`"
)


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "job.yaml"
    f.write_text(text)
    return f


SWE_SLEEP = f"""name: swe-sleep
sandbox: {{kind: swe, repo: {CALC}, mount: true}}
conditions: [disk_full]
tasks: [{{id: s, instruction: x, actions: [{{tool: bash, arguments: {{command: ls}}}}]}}]
"""


@pytest.mark.parametrize("command", [["collect"], ["jobs", "submit", "--dry-run"]])
def test_a_tmpfs_on_a_mounted_repository_is_refused_at_load(tmp_path, wt_env, command):
    f = write(tmp_path, SWE_SLEEP)
    r = wt(wt_env, *command, str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == f"{f}:3: conditions[0]: {MOUNTED}", r.stderr
    assert not (Path(wt_env["WORLDTRACE_STORE"]) / "raw").exists()  # nothing ran


def test_a_tmpfs_where_another_condition_binds_the_repository_is_refused(tmp_path, wt_env):
    f = write(tmp_path, f"""name: swe-ro
sandbox: {{kind: swe, repo: {CALC}}}
conditions:
  apply:
    - {{disk_low: 1m}}
    - read_only
tasks: [{{id: s, instruction: x, actions: [{{tool: bash, arguments: {{command: ls}}}}]}}]
""")  # fmt: skip
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == (
        f"{f}:6: conditions.apply[1]: read_only conflicts with disk_low: both mount /repo, "
        "and docker refuses two mounts on one path (`Duplicate mount point`); use `pick: "
        "one` to draw one of them, or give disk_low another `path`"
    ), r.stderr
    one = f.with_name("one.yaml")  # drawn one at a time, they never meet
    one.write_text(f.read_text().replace("  apply:\n", "  pick: one\n  apply:\n"))
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(one))
    assert r.returncode == 0, (r.stdout, r.stderr)


@pytest.mark.docker
def test_a_full_disk_elsewhere_runs_beside_a_mounted_repository(docker_engine, tmp_path, wt_env):
    f = write(tmp_path, SWE_SLEEP.replace("[disk_full]", "[{disk_full: {path: /tmp}}]").replace(
        "{command: ls}", "{command: 'echo x > /tmp/f; ls'}"
    ) + "retries: 0\n")  # fmt: skip
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "s-e0 attempt 1: success (1 turns)" in r.stdout, r.stdout


@pytest.mark.docker
def test_a_sandbox_given_the_clash_in_code_fails_without_a_retry(docker_engine):
    """A job checked before this version (queued), or a sandbox driven from Python: the
    reset refuses before any container starts, as a configuration no retry mends."""
    sandbox = SWESandbox(parse(SWEConfig, {"repo": CALC, "mount": True}))
    try:
        with pytest.raises(SandboxConfigError) as caught:
            sandbox.reset(TaskSpec("s", "x"), conditions=(DiskFull(),), episode_id="s-e0")
    finally:
        sandbox.close()
    assert str(caught.value) == MOUNTED


SHELL_JOB = """name: shell
sandbox: {{kind: terminal, shell: {shell}, docker: {{image: worldtrace/busybox:latest}}}}
retries: 2
tasks: [{{id: s, instruction: x, actions: ["echo hi\\n", "pwd\\n"]}}]
"""


@pytest.mark.docker
def test_a_shell_written_as_a_string_is_the_program_the_docs_say(docker_engine, tmp_path, wt_env):
    r = wt(wt_env, "collect", str(write(tmp_path, SHELL_JOB.format(shell="/bin/zsh"))))
    assert r.returncode == 3, (r.stdout, r.stderr)
    [line] = [ln for ln in r.stdout.splitlines() if " attempt " in ln]  # not retried
    assert (
        "s-e0 attempt 1: error (0 turns): SandboxConfigError: shell /bin/zsh is not in the "
        "image worldtrace/busybox:latest"
    ) in line, line
    r = wt(wt_env, "collect", str(write(tmp_path, SHELL_JOB.format(shell="sh"))))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "s-e0 attempt 1: success (2 turns)" in r.stdout, r.stdout


@pytest.mark.parametrize(
    "shell, message",
    [
        ('""', "names no program: give a path or a name on the image's PATH"),
        ("'zsh \"-i'", "cannot split 'zsh \"-i' into a command line: No closing quotation"),
    ],
)
def test_a_shell_that_names_no_program_is_refused_at_load(tmp_path, wt_env, shell, message):
    f = write(tmp_path, SHELL_JOB.format(shell=shell))
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == f"{f}:2: sandbox.shell: {message}", r.stderr
