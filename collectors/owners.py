"""Worker processes as owners: who a worker is across hosts and whether it still lives.

Container labels and the sweep of containers whose owner died are the sandboxes'
business (`sandboxes/owners.py`: `set_owner`, `sweep_orphans`); the job store records
each worker's host, pid and process start so that a lease of a worker that died on this
host is recognised at once, without waiting for it to expire.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from worldtrace.sandboxes.owners import (
    OWNER_WORKER,
    proc_stat,
    set_owner,
    sweep_orphans,
)

__all__ = ["Owner", "alive", "owned_containers", "set_owner", "sweep_orphans", "this_process"]


@dataclass(frozen=True)
class Owner:
    """A worker process, identified across hosts."""

    host: str
    pid: int
    worker: str
    start: int | None = None
    """Start time of the process in clock ticks since boot (guards against pid reuse)."""


def process_start(pid: int) -> int | None:
    fields = proc_stat(pid)
    return None if fields is None else int(fields[19])


def this_process(worker: str) -> Owner:
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, worker, process_start(pid))


def alive(pid: int, start: int | None = None) -> bool:
    """Whether process `pid` of THIS host runs (a zombie does not; nor a reused pid)."""
    fields = proc_stat(pid)
    if fields is None:
        return False
    if fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


def owned_containers(worker: str, client=None) -> list[str]:
    """Ids of the containers `worker` (a worker name) owns on this host's engine."""
    if client is None:
        from worldtrace.sandboxes.docker import client as connect

        client = connect()
    flt = {"label": f"{OWNER_WORKER}={worker}"}
    return [i["Id"] for i in client.api.containers(all=True, filters=flt)]
