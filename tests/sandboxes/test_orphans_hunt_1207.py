"""Found (a collection hunt, 12-07): after a worker was killed, the two workers started
next each logged `removed 3 container(s) of dead workers` for the same three containers:
a sweep counted what it listed, and a removal the other sweeper had done first (404, or
409 while it was in progress) passed as its own. The removed lines are what an operator
reads to audit leaks; the counts now add up to what was removed."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes.docker import sweep_orphans
from worldtrace.sandboxes.owners import OWNER_HOST, OWNER_PID, OWNER_WORKER, owner_labels

pytestmark = pytest.mark.docker

BUSYBOX = "worldtrace/busybox:latest"


def test_a_container_another_sweeper_removed_first_is_not_counted(docker_engine):
    gone = {**owner_labels(), OWNER_HOST: "elsewhere.invalid", OWNER_PID: "1"}
    first, ours = (
        docker_engine.containers.run(
            BUSYBOX,
            ["sleep", "300"],
            detach=True,
            network_mode="none",
            labels={**gone, OWNER_WORKER: w},
        )
        for w in ("w-first", "w-ours")
    )
    try:

        def lease_expired(owner: dict) -> bool:
            """The other worker's sweep removes `w-first`'s container between this one's
            listing and its removal."""
            if owner["worker"] == "w-first":
                docker_engine.api.remove_container(owner["id"], force=True)
            return owner["worker"] in ("w-first", "w-ours")

        found = {o["id"] for o in sweep_orphans(docker_engine, is_dead=lease_expired)}
        assert ours.id in found and first.id not in found
        assert not docker_engine.containers.list(all=True, filters={"id": ours.id})
    finally:
        for c in (first, ours):
            if docker_engine.containers.list(all=True, filters={"id": c.id}):
                c.remove(force=True)
