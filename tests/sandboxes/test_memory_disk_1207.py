"""Found (12-07): a disk condition promised space the memory limit could not hold.

`[{memory_low: 24m}, {disk_low: {free: 30m, size: 64m}}]` loaded, and the initial state
said `30 MiB free in /root`; the agent's `head -c 28m /dev/zero > f` was killed (its shell
with it) before `No space left on device`: a tmpfs's files are memory, charged to the
container. The same under the job's own `docker.memory` alone. Now the job is refused
when it loads, naming the condition, and a reset handed such conditions from code raises
before any container; drawn one at a time (`pick: one`) the two never meet. Below the
limit the write still gets `No space left on device`.

Real parts: the installed `worldtrace` command a user runs, docker sandboxes."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.condition_kinds import DiskLow
from worldtrace.sandboxes.conditions import Drawn

from .test_conditions_load_1205c import job, wt
from .test_conditions_run_1205c import say, terminal, under

LOW_DISK = "{disk_low: {free: 30m, size: 64m}}"
LOW = f"[{{memory_low: 24m}}, {LOW_DISK}]"
SAID = (
    "conditions[1]: disk_low asks for 30 MiB free in a tmpfs, whose files count as the "
    "container's memory: under memory_low (24 MiB) a write is killed before `No space left "
    "on device`; ask for less free space or draw one of them (`pick: one`)"
)


def refusal(wt_env, f) -> list[str]:
    """What `jobs submit --dry-run` of the job file `f` said, refusing it."""
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    return r.stderr.strip().splitlines()


def test_more_free_space_than_memory_low_is_refused_at_load(tmp_path, wt_env):
    f = job(tmp_path, LOW)
    assert refusal(wt_env, f) == [f"{f}:4: {SAID}"]


def test_more_free_space_than_the_jobs_memory_is_refused_at_load(tmp_path, wt_env):
    memory = "{kind: terminal, docker: {memory: 32m}}"
    f = job(tmp_path, "[{disk_low: {free: 40m, size: 64m}}]", sandbox=memory)
    assert refusal(wt_env, f) == [
        f"{f}:4: conditions[0]: disk_low asks for 40 MiB free in a tmpfs, whose files count "
        "as the container's memory: under the job's memory limit (32 MiB) a write is killed "
        "before `No space left on device`; ask for less free space or raise `docker.memory`"
    ]


@pytest.mark.parametrize("conditions", [f"{{pick: one, apply: {LOW}}}", f"[{LOW_DISK}]"])
def test_space_the_memory_holds_loads(tmp_path, wt_env, conditions):
    """Drawn one at a time they never meet; 30m under the job's default 512m is free."""
    f = job(tmp_path, conditions)
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_a_reset_handed_them_from_code_raises_before_a_container(docker_engine):
    s = terminal()  # the job's memory: 512m, under which 600m cannot be free
    try:
        with pytest.raises(SandboxConfigError) as e:
            s.reset(TaskSpec("c"), conditions=Drawn([DiskLow(free="600m", size="1g")]))
        assert str(e.value).startswith("disk_low asks for 600 MiB free in a tmpfs")
        assert s.container is None
    finally:
        s.close()


def test_below_the_limit_the_write_meets_the_full_disk(docker_engine):
    s = under([{"memory_low": "24m"}, {"disk_low": {"free": "12m", "size": "64m"}}])
    try:
        assert say(s, "head -c 13m /dev/zero > f; echo rc=$?") == [
            "head: error writing 'standard output': No space left on device",
            "rc=1",
        ]
    finally:
        s.close()
