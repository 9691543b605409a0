"""A pool's close (at exit: `atexit`) leaves no container behind, even one still being
started by another thread. Found: a worker stopped at once (a second SIGTERM) left its
episodes' containers running (1 in ~5 runs under load): its slots started containers
after the exit's `close` had listed the pool's, and the exit killed the daemon threads
before anything removed them."""

from __future__ import annotations

import threading

import pytest
from worldtrace.sandboxes.base import SandboxError
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.owners import POOL_LABEL

from ..conftest import remove_containers

pytestmark = pytest.mark.docker

BUSYBOX = "worldtrace/busybox:latest"


class _GatedContainers:
    """`client.containers` whose `run` waits for `go` before it asks the engine."""

    def __init__(self, real, entered: threading.Event, go: threading.Event):
        self._real, self._entered, self._go = real, entered, go

    def run(self, *args, **kwargs):
        self._entered.set()
        assert self._go.wait(60), "the test never let the start go on"
        return self._real.run(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _GatedClient:
    """A docker client whose container starts wait for the test (all else is the real one)."""

    def __init__(self, real):
        self._real = real
        self.entered, self.go = threading.Event(), threading.Event()

    @property
    def containers(self):
        return _GatedContainers(self._real.containers, self.entered, self.go)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _pool_containers(docker_engine, pool: ContainerPool) -> list[str]:
    flt = {"label": f"{POOL_LABEL}={pool.pool_id}"}
    return [i["Id"] for i in docker_engine.api.containers(all=True, filters=flt)]


def test_a_start_in_flight_while_the_pool_closes_leaves_no_container(docker_engine, monkeypatch):
    gated = _GatedClient(docker_engine)
    pool = ContainerPool(DockerConfig(image=BUSYBOX, warm=0), docker_client=gated)
    try:
        got: list = []

        def episode() -> None:  # a slot starting its episode's container
            try:
                got.append(pool.acquire(pool.config.run_kwargs(), "e0"))
            except SandboxError as exc:
                got.append(exc)

        starter = threading.Thread(target=episode, daemon=True)
        starter.start()
        assert gated.entered.wait(60)  # the start is in flight, the engine not asked yet

        # close either returns without waiting for the start (the container would then
        # be created after its listing) or waits for it: go on once it did either
        progressed = threading.Event()

        def waiting(timeout: float) -> bool:
            progressed.set()
            return ContainerPool._wait_for_starts(pool, timeout)

        monkeypatch.setattr(pool, "_wait_for_starts", waiting, raising=False)

        def close() -> None:
            pool.close()
            progressed.set()

        closer = threading.Thread(target=close, daemon=True)
        closer.start()
        assert progressed.wait(60)
        gated.go.set()
        starter.join(60)
        closer.join(60)
        assert not starter.is_alive() and not closer.is_alive()

        assert _pool_containers(docker_engine, pool) == []
        assert len(got) == 1 and isinstance(got[0], SandboxError), got
        assert "closed" in str(got[0])
    finally:
        gated.go.set()
        remove_containers(docker_engine, {"label": f"{POOL_LABEL}={pool.pool_id}"})


def test_a_closed_pool_starts_no_container(docker_engine):
    pool = ContainerPool(DockerConfig(image=BUSYBOX, warm=0), docker_client=docker_engine)
    try:
        pool.close()
        with pytest.raises(SandboxError, match="closed"):
            pool.acquire(pool.config.run_kwargs(), "e0")
        with pytest.raises(SandboxError, match="closed"):
            pool.acquire()  # a warm one: none is left, and none is started
        assert _pool_containers(docker_engine, pool) == []
    finally:
        remove_containers(docker_engine, {"label": f"{POOL_LABEL}={pool.pool_id}"})
