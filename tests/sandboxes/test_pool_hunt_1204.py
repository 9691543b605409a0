"""Pool hunt 1204: a warm container that died while it waited is never handed out.

Real containers, the real pool and CLI. A warm container killed from outside (`docker
kill`, the OOM killer) before an episode took it was handed to that episode, whose first
exec got the engine's `409 ... is not running`: the attempt failed for good with a raw
APIError. The pool now looks at a warm container's state before handing it out (one
inspect call) and starts a fresh one when it died.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.execs import exec_capture
from worldtrace.sandboxes.owners import OWNER_PID
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas import read_records

from ..conftest import remove_containers, start_collect, wait_until

pytestmark = pytest.mark.docker


def _state(docker_engine, container_id: str) -> dict:
    return docker_engine.api.inspect_container(container_id)["State"]


def _killed(docker_engine, container) -> None:
    """`docker kill` the container and wait until docker says it stopped."""
    docker_engine.api.kill(container.id)
    wait_until(lambda: not _state(docker_engine, container.id)["Running"], what="the kill")


@pytest.fixture
def pool(docker_engine):
    p = ContainerPool(DockerConfig(warm=1))
    yield p
    p.close()


def test_a_warm_container_killed_while_it_waits_is_not_handed_out(pool, docker_engine):
    [warm] = wait_until(lambda: list(pool._ready), what="a warm container")
    _killed(docker_engine, warm)
    c = pool.acquire(episode_id="hunt-e0")
    assert c.id != warm.id
    assert _state(docker_engine, c.id)["Running"]
    assert exec_capture(c, ["echo", "alive"], 10, 1024)[1] == "alive\n"
    pool.release(c, wait=True)


def test_a_warm_container_restarted_while_it_waits_is_not_handed_out(pool, docker_engine):
    """A restart moves `StartedAt`: handed out, the first look at its state would blame
    the episode's environment for a restart that happened before the episode began."""
    [warm] = wait_until(lambda: list(pool._ready), what="a warm container")
    docker_engine.api.restart(warm.id, timeout=0)
    wait_until(
        lambda: _state(docker_engine, warm.id)["StartedAt"] != warm.attrs["State"]["StartedAt"],
        what="the restart",
    )
    c = pool.acquire(episode_id="hunt-e0")
    assert c.id != warm.id
    pool.release(c, wait=True)


def test_a_terminal_episode_after_its_warm_container_was_killed_runs(docker_engine):
    """The reported case at the sandbox's level: the second reset took the killed warm
    container and failed with `APIError: 409 ... is not running`."""
    # a step timeout no other test uses: a pool of its own (pools are shared per config)
    sb = TerminalSandbox(TerminalConfig(docker=DockerConfig(warm=1, step_timeout=21)))
    try:
        sb.reset(TaskSpec("first"), episode_id="hunt-e0")
        [warm] = wait_until(lambda: list(sb.pool._ready), what="the refilled warm container")
        _killed(docker_engine, warm)
        sb.reset(TaskSpec("second"), episode_id="hunt-e1")
        assert sb.container.id != warm.id
        obs = sb.step(keystrokes("echo two\n"))
        assert "two" in obs.text.splitlines()
    finally:
        sb.close()


def test_collect_goes_on_when_the_warm_container_is_killed(docker_engine, wt_env, tmp_path):
    """The report's run: `docker kill` of the warm container while t-e0 runs made t-e1
    fail for good (`APIError: 409 ...`, exit 3). Every episode now succeeds."""
    job = {
        "name": "warmkill",
        "sandbox": {"kind": "terminal", "docker": {"warm": 1}},
        "episodes": 3,
        "retries": 0,
        "tasks": [{"id": "t", "actions": [{"keystrokes": "sleep 3; echo one\n", "duration": 6}]}],
    }
    proc = start_collect(tmp_path, job, wt_env)
    pid = f"{OWNER_PID}={proc.pid}"

    def names(state: str) -> dict[str, str]:
        listed = docker_engine.api.containers(filters={"label": pid, "status": state})
        return {info["Names"][0].lstrip("/"): info["Id"] for info in listed}

    def warm_while_e0_runs() -> str | None:
        """The warm container started after t-e0 took (and renamed) the first one."""
        running = names("running")
        if not any(n.startswith("wt-t-e0-") for n in running):
            return None
        return next((i for n, i in running.items() if n.startswith("wt-pool-")), None)

    try:
        warm = wait_until(warm_while_e0_runs, timeout=60, what="t-e0 and a warm container")
        docker_engine.api.kill(warm)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # a failed wait: its exit hook cannot run after SIGKILL
            proc.kill()
            proc.wait()
            remove_containers(docker_engine, {"label": pid})
    assert proc.returncode == 0, out + err
    assert "APIError" not in out + err
    raw = tmp_path / "store" / "raw"
    got = {t.source.episode_id: t.outcome.status for t in read_records(raw)}
    assert got == {"t-e0": "success", "t-e1": "success", "t-e2": "success"}
