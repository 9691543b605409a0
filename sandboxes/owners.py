"""Who owns a sandbox container, and removing those whose owner died.

A collector killed with SIGKILL (or SIGTERM without a handler) never runs its exit hook,
so its containers would run forever. Every container (and read-only volume) therefore
carries its owner: host, pid, the pid's start time (a reused pid is another process),
and the worker name when `set_owner` gave one. `sweep_orphans` removes what belongs to
dead owners; every new pool sweeps once (one filtered list call). Installations that
share an engine on one host (two CI jobs, a test run beside a collector) name their scope
(`SCOPE_ENV`): each sweeps only its own.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

LABEL = "worldtrace.sandbox"
POOL_LABEL = f"{LABEL}.pool"
OWNER_HOST = "worldtrace.owner.host"
OWNER_PID = "worldtrace.owner.pid"
OWNER_START = "worldtrace.owner.start"
"""Boot id and start time (clock ticks) of the owner pid: a reused pid does not match."""
OWNER_WORKER = "worldtrace.owner.worker"
EPISODE_LABEL = "worldtrace.episode"
"""The episode a container was started for, or `pool` for a warm container (labels are
fixed at creation, so a warm container is renamed `wt-<episode>-<id>` when taken)."""
SCOPE_LABEL = "worldtrace.scope"
SCOPE_ENV = "WORLDTRACE_SANDBOX_SCOPE"
"""Names the installation whose containers these are when several share one docker engine
on one host: a sweep (a new pool's, a worker's, `gc`'s) judges only containers of its own
scope, so one installation does not remove, or report, what another one's killed process
left for its own `gc`. Unset: the default scope (containers without the label)."""
VOLUME_PREFIX = "wt-ro-"
"""Named volumes we create (read-only copies of image paths); removed with their container."""

_WORKER: dict[str, str] = {}


def set_owner(worker: str | None = None) -> None:
    """Name this process's worker on every container it starts from now on (None: none).

    A worker on another host sweeps containers by this name (its lease expired)."""
    if worker:
        _WORKER["name"] = worker
    else:
        _WORKER.pop("name", None)


@functools.cache
def _host() -> str:
    return socket.gethostname()


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return ""


def proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state first, start time at index 19); None when no
    process has that pid. The name may hold spaces and parentheses, hence rsplit."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def process_start(pid: int) -> str | None:
    """An identity of a running process that a later process reusing its pid does not
    share (boot id and start time from /proc); None when no process has that pid."""
    if not Path("/proc/self/stat").exists():  # no procfs: liveness only
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""
    fields = proc_stat(pid)
    return None if fields is None else f"{_boot_id()}:{fields[19]}"


def scope() -> str:
    """This process's sandbox scope (`SCOPE_ENV`); empty: the default one."""
    return os.environ.get(SCOPE_ENV, "")


def owner_labels() -> dict[str, str]:
    """Labels naming this process as the owner of what it creates now."""
    pid = os.getpid()
    labels = {
        LABEL: "1",
        OWNER_HOST: _host(),
        OWNER_PID: str(pid),
        OWNER_START: process_start(pid) or "",
    }
    if _WORKER.get("name"):
        labels[OWNER_WORKER] = _WORKER["name"]
    if scope():
        labels[SCOPE_LABEL] = scope()
    return labels


def _owner(kind: str, ident: str, name: str, labels: dict[str, str], state: str) -> dict:
    pid = labels.get(OWNER_PID, "")
    return {
        "kind": kind,
        "id": ident,
        "name": name,
        "host": labels.get(OWNER_HOST),
        "pid": int(pid) if pid.isdigit() else None,
        "start": labels.get(OWNER_START, ""),
        "worker": labels.get(OWNER_WORKER),
        "episode": labels.get(EPISODE_LABEL),
        "pool": labels.get(POOL_LABEL),
        "state": state,
    }


def _why_dead(owner: dict, is_dead: Callable[[dict], bool] | None) -> str | None:
    if owner["host"] == _host():
        if owner["pid"] is None:
            return None  # not ours to judge
        now = process_start(owner["pid"])
        if now is None:
            return "owner process is gone"
        if owner["start"] and now and now != owner["start"]:
            return "owner pid now runs another process"
        return None
    if is_dead is not None and is_dead(owner):
        return "owner declared dead by the caller"
    return None


def not_found_or_busy(exc: Exception) -> bool:
    import docker.errors

    return isinstance(exc, docker.errors.NotFound) or (
        isinstance(exc, docker.errors.APIError) and exc.status_code == 409
    )


def _ignore_gone(fn, *args, **kwargs) -> bool:
    """Call a removal; what is already gone (or being removed by another sweeper) is fine.
    Whether this call removed it."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        if not not_found_or_busy(exc):
            raise
        return False
    return True


def remove_container(api, container_id: str, volumes: list[str] | tuple = ()) -> bool:
    """Remove a container (killing everything in it) and the named volumes we made for it;
    whether this call removed the container (False: gone already, or going)."""
    removed = _ignore_gone(api.remove_container, container_id, force=True, v=True)
    for name in volumes:
        _ignore_gone(api.remove_volume, name)
    return removed


def our_volumes(mounts: list[dict] | None) -> list[str]:
    return [
        m["Name"]
        for m in mounts or []
        if m.get("Type") == "volume" and str(m.get("Name", "")).startswith(VOLUME_PREFIX)
    ]


def sweep_orphans(
    client=None, is_dead: Callable[[dict], bool] | None = None, dry_run: bool = False
) -> list[dict]:
    """Remove sandbox containers and volumes whose owner is dead; return what was found
    (what another sweeper removed first is not: two workers starting after a third died
    each said they removed all of its containers).

    On this host an owner is dead when its pid runs no process, or a process that started
    at another time (the pid was reused). Owners on other hosts are judged by `is_dead`
    (given the owner dict: kind, id, name, host, pid, start, worker, episode, pool,
    state; e.g. "the worker's lease expired"); without it they are left alone. Containers
    without owner labels (made by older versions), and those of another scope
    (`SCOPE_ENV`), are never touched.
    """
    if client is None:
        from .docker import client as connect

        client = connect()
    api = client.api
    found = []
    wanted = {"label": [LABEL, OWNER_PID]}
    ours = scope()
    for info in api.containers(all=True, filters=wanted):
        labels = info.get("Labels") or {}
        if labels.get(SCOPE_LABEL, "") != ours:
            continue
        name = (info.get("Names") or ["?"])[0].lstrip("/")
        owner = _owner("container", info["Id"], name, labels, info.get("State"))
        reason = _why_dead(owner, is_dead)
        if reason and (
            dry_run or remove_container(api, info["Id"], our_volumes(info.get("Mounts")))
        ):
            found.append({**owner, "reason": reason})
    for info in api.volumes(filters={**wanted, "dangling": True}).get("Volumes") or []:
        labels = info.get("Labels") or {}
        if labels.get(SCOPE_LABEL, "") != ours:
            continue
        owner = _owner("volume", info["Name"], info["Name"], labels, "dangling")
        reason = _why_dead(owner, is_dead)
        if reason and (dry_run or _ignore_gone(api.remove_volume, info["Name"])):
            found.append({**owner, "reason": reason})
    for f in found:
        log.info(
            "%s orphan %s %s (%s)",
            "found" if dry_run else "removed",
            f["kind"],
            f["name"],
            f["reason"],
        )
    return found


def ro_volume(target: str):
    """A read-only mount of `target` holding the image's content there (the engine copies
    it into a fresh named volume, removed with the container)."""
    from docker.types import Mount

    name = f"{VOLUME_PREFIX}{uuid.uuid4().hex[:16]}"
    return Mount(target, name, type="volume", read_only=True, labels=owner_labels())


def container_name(episode: str | None) -> str:
    tag = re.sub(r"[^A-Za-z0-9_.-]", "-", episode or "pool")[:60]
    return f"wt-{tag}-{uuid.uuid4().hex[:8]}"
