"""Who owns a worker's containers, whether that owner still lives, and the sweep of
containers whose owner died.

A worker killed with SIGKILL cannot remove its sandbox containers; the next worker on
the host does. `sandboxes/docker.py` labels containers with their owner
(`worldtrace.owner.host/pid/worker`) and offers `set_owner(worker=...)` and
`sweep_orphans(client=None, is_dead=None, dry_run=False)`; this module calls those.
Until that module has them, a FALLBACK keeps the same calls working without labels: each
worker process writes an owner record (host, pid, process start, the ids of its
container pools) into a host-local directory, and the sweep removes the pools of
records whose process is gone. Delete `_Registry` once docker.py has the two functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OWNER_LABEL = "worldtrace.owner"
"""Label prefix of owner labels (`.host`, `.pid`, `.worker`) set by sandboxes/docker.py."""
POOL_LABEL = "worldtrace.sandbox.pool"
"""Label of a container's pool (sandboxes/docker.py), used by the fallback registry."""


@dataclass(frozen=True)
class Owner:
    """A worker process, identified across hosts."""

    host: str
    pid: int
    worker: str
    start: int | None = None
    """Start time of the process in clock ticks since boot (guards against pid reuse)."""


def process_start(pid: int) -> int | None:
    """Start time of `pid` (field 22 of /proc/PID/stat), None where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def this_process(worker: str) -> Owner:
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, worker, process_start(pid))


def alive(pid: int, start: int | None = None) -> bool:
    """Whether process `pid` of THIS host runs (a zombie does not; nor a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


def _docker():
    from worldtrace.sandboxes import docker

    return docker


def set_owner(worker: str) -> None:
    """Label every container this process starts from now on with `worker`."""
    fn = getattr(_docker(), "set_owner", None)
    if fn is not None:
        fn(worker=worker)
    else:
        _REGISTRY.set(this_process(worker))


def note_containers() -> None:
    """Record the container pools this process made so far (fallback only; a no-op
    when docker.py labels containers itself). Call after building a sandbox."""
    if getattr(_docker(), "set_owner", None) is None:
        _REGISTRY.note()


def sweep_orphans(
    client=None, is_dead: Callable[[dict[str, Any]], bool] | None = None, dry_run: bool = False
) -> list[dict[str, Any]]:
    """Remove containers whose owner died (dead pid on this host; `is_dead(owner)` for
    owners on other hosts); returns what was (or, with `dry_run`, would be) removed."""
    fn = getattr(_docker(), "sweep_orphans", None)
    if fn is not None:
        return fn(client=client, is_dead=is_dead, dry_run=dry_run)
    return _REGISTRY.sweep(client, dry_run)


def owned_containers(worker: str, client=None) -> list[str]:
    """Ids of the containers `worker` (a worker name) owns on this host's engine."""
    docker = _docker()
    c = client or docker.client()
    if getattr(docker, "set_owner", None) is not None:
        flt = {"label": f"{OWNER_LABEL}.worker={worker}"}
        return [i["Id"] for i in c.api.containers(all=True, filters=flt)]
    ids: list[str] = []
    for rec in _REGISTRY.records():
        if rec["worker"] == worker:
            for pool in rec["pools"]:
                flt = {"label": f"{POOL_LABEL}={pool}"}
                ids += [i["Id"] for i in c.api.containers(all=True, filters=flt)]
    return ids


class _Registry:
    """FALLBACK (delete when sandboxes/docker.py labels owners): owner records in a
    host-local directory, one JSON file per worker process."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.gettempdir()) / "worldtrace-owners"
        self.owner: Owner | None = None
        self._lock = threading.Lock()

    def _path(self, pid: int) -> Path:
        return self.dir / f"{pid}.json"

    def set(self, owner: Owner) -> None:
        self.owner = owner
        self.note()

    def note(self) -> None:
        if self.owner is None:
            return
        with self._lock:  # slots build sandboxes at once
            pools = sorted(p.pool_id for p in list(_docker()._POOLS.values()))  # private: fallback
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / f".{self.owner.pid}.tmp"
            tmp.write_text(json.dumps({**asdict(self.owner), "pools": pools}))
            os.replace(tmp, self._path(self.owner.pid))

    def records(self) -> list[dict[str, Any]]:
        out = []
        for p in sorted(self.dir.glob("*.json")) if self.dir.exists() else []:
            with contextlib.suppress(OSError, ValueError):  # removed or half-written meanwhile
                out.append({**json.loads(p.read_text()), "path": str(p)})
        return out

    def sweep(self, client, dry_run: bool) -> list[dict[str, Any]]:
        removed: list[dict[str, Any]] = []
        for rec in self.records():
            if alive(rec["pid"], rec.get("start")):
                continue
            c = client or (_docker().client() if rec["pools"] else None)
            for pool in rec["pools"]:
                flt = {"label": f"{POOL_LABEL}={pool}"}
                for info in c.api.containers(all=True, filters=flt):
                    removed.append({"id": info["Id"], "worker": rec["worker"], "pid": rec["pid"]})
                    if not dry_run:
                        with contextlib.suppress(Exception):  # removed meanwhile
                            c.api.remove_container(info["Id"], force=True)
            if not dry_run:
                Path(rec["path"]).unlink(missing_ok=True)
        return removed


_REGISTRY = _Registry()
