"""Containers outlive a killed collector only until the next pool (or sweep) starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig, sweep_orphans
from worldtrace.sandboxes.owners import (
    EPISODE_LABEL,
    OWNER_HOST,
    OWNER_PID,
    OWNER_START,
    OWNER_WORKER,
    SCOPE_ENV,
    SCOPE_LABEL,
    owner_labels,
    process_start,
)

from ..conftest import remove_containers, wait_until

pytestmark = pytest.mark.docker

BUSYBOX = "worldtrace/busybox:latest"
COLLECTOR = textwrap.dedent(
    """
    import sys
    from worldtrace.sandboxes.docker import ContainerPool, DockerConfig, set_owner
    set_owner(worker="w-test")
    pool = ContainerPool(DockerConfig(image=sys.argv[1], warm=0))
    c = pool.acquire(episode_id="orphan-e0")
    print(c.id, flush=True)
    sys.stdin.readline()
    """
)


def _exists(docker_engine, cid: str) -> bool:
    return bool(docker_engine.containers.list(all=True, filters={"id": cid}))


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_killed_collectors_containers_are_removed_by_the_next_pool(docker_engine, sig):
    proc = subprocess.Popen(
        [sys.executable, "-c", COLLECTOR, BUSYBOX],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    cid = proc.stdout.readline().strip()
    try:
        labels = docker_engine.api.inspect_container(cid)["Config"]["Labels"]
        assert labels[OWNER_PID] == str(proc.pid) and labels[OWNER_WORKER] == "w-test"
        assert labels[EPISODE_LABEL] == "orphan-e0" and labels[OWNER_START]
        # the owner lives: its container is never touched
        assert cid not in [o["id"] for o in sweep_orphans(docker_engine)]
        assert _exists(docker_engine, cid)
        os.kill(proc.pid, sig)  # no exit hook runs: the container stays behind
        proc.wait()
        assert _exists(docker_engine, cid)
        pool = ContainerPool(DockerConfig(image=BUSYBOX, warm=0))  # a new pool sweeps
        pool.close()
        [found] = [o for o in pool.swept if o["id"] == cid]
        assert (found["worker"], found["episode"], found["reason"]) == (
            "w-test",
            "orphan-e0",
            "owner process is gone",
        )
        assert not _exists(docker_engine, cid)
    finally:
        proc.kill()
        if _exists(docker_engine, cid):
            docker_engine.api.remove_container(cid, force=True)


def _container(docker_engine, labels: dict[str, str]):
    return docker_engine.containers.run(
        BUSYBOX, ["sleep", "300"], detach=True, network_mode="none", labels=labels
    )


def test_reused_pid_and_other_hosts(docker_engine):
    """Our pid with another start time is another process (pid reuse): its container
    goes. Owners on other hosts are judged only by the caller's predicate."""
    mine = owner_labels()
    assert mine[OWNER_START] == process_start(os.getpid())
    live = _container(docker_engine, mine)
    reused = _container(docker_engine, {**mine, OWNER_START: "00000000:1"})
    remote = {**mine, OWNER_HOST: "elsewhere.invalid", OWNER_PID: "1", OWNER_WORKER: "w-gone"}
    far = _container(docker_engine, remote)
    try:
        found = {o["id"]: o for o in sweep_orphans(docker_engine, dry_run=True)}
        assert reused.id in found and live.id not in found and far.id not in found
        assert found[reused.id]["reason"] == "owner pid now runs another process"
        assert _exists(docker_engine, reused.id)  # a dry run removes nothing
        asked = []

        def lease_expired(owner: dict) -> bool:
            asked.append(owner["host"])
            return owner["worker"] == "w-gone"

        found = {o["id"]: o for o in sweep_orphans(docker_engine, is_dead=lease_expired)}
        assert set(found) >= {reused.id, far.id} and live.id not in found
        assert "elsewhere.invalid" in asked and os.uname().nodename not in asked
        assert not _exists(docker_engine, reused.id) and not _exists(docker_engine, far.id)
        assert _exists(docker_engine, live.id)
    finally:
        for c in (live, reused, far):
            if _exists(docker_engine, c.id):
                c.remove(force=True)


def test_a_sweep_judges_only_its_own_scope(docker_engine, monkeypatch):
    """Found (12-03 night): installations sharing one engine on one host (two CI jobs,
    the suite's two xdist workers) swept each other's orphans, so one's `gc` found
    nothing where its own killed collector had left a container. A sweep judges the
    containers of its scope (`WORLDTRACE_SANDBOX_SCOPE`) only; the default scope (unset)
    sees none of theirs."""
    made = {}
    for name in ("job-a", "job-b"):
        monkeypatch.setenv(SCOPE_ENV, name)
        dead = {**owner_labels(), OWNER_START: "00000000:1"}  # our pid, another start
        assert dead[SCOPE_LABEL] == name
        made[name] = _container(docker_engine, dead)
    ids = {c.id for c in made.values()}
    try:
        for name, c in made.items():
            monkeypatch.setenv(SCOPE_ENV, name)
            found = {o["id"] for o in sweep_orphans(docker_engine, dry_run=True)}
            assert found & ids == {c.id}
        monkeypatch.delenv(SCOPE_ENV)
        assert not {o["id"] for o in sweep_orphans(docker_engine, dry_run=True)} & ids
        monkeypatch.setenv(SCOPE_ENV, "job-a")
        sweep_orphans(docker_engine)
        assert not _exists(docker_engine, made["job-a"].id)
        assert _exists(docker_engine, made["job-b"].id)
    finally:
        remove_containers(docker_engine, {"id": list(ids)})


def test_warm_container_is_renamed_for_its_episode(docker_engine):
    """Labels are fixed at creation: a warm container says `pool`, and takes the episode's
    name when an episode takes it."""
    pool = ContainerPool(DockerConfig(image=BUSYBOX, warm=1))
    try:
        wait_until(lambda: bool(pool._ready), 30)
        c = pool.acquire(episode_id="task-e3")
        assert c.labels[EPISODE_LABEL] == "pool"
        wait_until(lambda: (c.reload() or c.name).startswith("wt-task-e3-"), 10)
        cold = pool.acquire(pool.config.run_kwargs(), episode_id="task-e4")
        assert cold.labels[EPISODE_LABEL] == "task-e4" and cold.name.startswith("wt-task-e4-")
    finally:
        pool.close()
    assert not _exists(docker_engine, c.id) and not _exists(docker_engine, cold.id)
