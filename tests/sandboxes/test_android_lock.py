"""One episode at a time on a device: an android sandbox holds its device from reset until
close, across threads and processes, and a second episode waits for it (bounded by
`lock_timeout`) instead of driving the same screen. Real uiautomator2 against the device
simulator, on its own loopback port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig
from worldtrace.sandboxes.android import AndroidTask
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.schemas import Observation, read_records

from ..conftest import wait_until
from .test_android import NOTES, SETTINGS, sandbox

HOLDER = """
import sys
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.base import TaskSpec

sb = AndroidSandbox(AndroidConfig(adb=sys.argv[1], serial=sys.argv[2]))
print(sb.reset(TaskSpec("t", "", (), AndroidTask(app=sys.argv[3]))).text.splitlines()[0], flush=True)
for line in sys.stdin:  # "step": one more turn of its episode; "close": let the device go
    if line.strip() == "close":
        break
    print(sb.step(tool("swipe", direction="up")).text.splitlines()[0], flush=True)
sb.close()
print("closed", flush=True)
"""
"""A process holding the device for an episode of the app `argv[3]`."""


def task(app: str) -> TaskSpec:
    return TaskSpec("t", "test", (), AndroidTask(app=app))


def package(obs: Observation) -> str | None:
    return json.loads(obs.state_json)["package"]


def waiting_for_the_device(thread: threading.Thread) -> bool:
    """Whether `thread` is inside `hold_device` (read from its live stack, not mocked)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "hold_device":
            return True
        frame = frame.f_back
    return False


def in_thread(fn) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_second_sandbox_waits_for_the_first_to_close_and_each_sees_its_own_app(sim):
    first = sandbox(sim)
    second = sandbox(sim)
    try:
        start_obs = first.reset(task(NOTES))
        t, out = in_thread(lambda: second.reset(task(SETTINGS)))
        wait_until(lambda: waiting_for_the_device(t) or out, what="the second reset to wait or end")
        assert not out, f"the second reset did not wait for the device: {out}"
        turns = [first.step(tool("swipe", direction="up")) for _ in range(3)]
        assert [package(o) for o in (start_obs, *turns)] == [NOTES] * 4
        assert t.is_alive() and waiting_for_the_device(t)  # still waiting: not until close
        assert first.describe()["config"]["device_wait_s"] == 0
        first.close()
        t.join(60)
        assert not t.is_alive() and "error" not in out, out
        assert package(out["value"]) == SETTINGS
        assert second.describe()["config"]["device_wait_s"] > 0  # the wait is recorded
        assert package(second.step(tool("swipe", direction="up"))) == SETTINGS
    finally:
        first.close()
        second.close()


def test_device_held_by_another_process_times_out_naming_it_and_is_free_once_it_dies(sim):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, sim.adb, sim.serial, NOTES],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    sb = sandbox(sim, lock_timeout=0.5)
    try:
        assert holder.stdout.readline().startswith(f"[{NOTES}/")
        with pytest.raises(SandboxError) as busy:
            sb.reset(task(SETTINGS))
        assert str(busy.value) == (
            f"device {sim.serial} on {sim.adb} is in use by another episode (pid {holder.pid}); "
            "waited 0.5 s (lock_timeout)"
        )
        holder.stdin.write("step\n")
        holder.stdin.flush()  # the holder's episode went on undisturbed
        assert holder.stdout.readline().startswith(f"[{NOTES}/")
        holder.kill()  # dies holding the device: the kernel drops its flock
        holder.wait(30)
        after = sandbox(sim, lock_timeout=0.0)  # free at once, no waiting
        assert package(after.reset(task(SETTINGS))) == SETTINGS
        after.close()
    finally:
        sb.close()
        holder.kill()
        holder.wait(30)


def test_a_closed_process_holder_lets_the_waiting_episode_run(sim):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, sim.adb, sim.serial, NOTES],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    sb = sandbox(sim)
    try:
        assert holder.stdout.readline().startswith(f"[{NOTES}/")
        t, out = in_thread(lambda: sb.reset(task(SETTINGS)))
        wait_until(lambda: waiting_for_the_device(t) or out, what="the reset to wait or end")
        assert not out, f"the reset did not wait for the other process: {out}"
        holder.stdin.write("close\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "closed\n"
        t.join(60)
        assert package(out["value"]) == SETTINGS and sb.describe()["config"]["device_wait_s"] > 0
    finally:
        sb.close()
        holder.kill()
        holder.wait(30)


def test_a_thread_starting_another_episode_takes_the_device_from_its_own_idle_sandbox(sim):
    """A worker slot keeps a sandbox per job: its next job's reset must not wait for it."""
    old, new = sandbox(sim), sandbox(sim, lock_timeout=0.0)
    try:
        old.reset(task(NOTES))
        assert package(new.reset(task(SETTINGS))) == SETTINGS  # no wait, no timeout
        with pytest.raises(SandboxError, match="step before reset"):
            old.step(tool("swipe", direction="up"))  # closed: it cannot touch the device
        t, out = in_thread(lambda: sandbox(sim, lock_timeout=0.0).reset(task(NOTES)))
        t.join(60)  # another thread is excluded as before
        assert str(out["error"]) == (
            f"device {sim.serial} on {sim.adb} is in use by another episode (pid {os.getpid()}); "
            "waited 0 s (lock_timeout)"
        )
    finally:
        old.close()
        new.close()


def test_worker_with_two_slots_on_one_device_never_records_a_mixed_up_episode(sim, store):
    """`worker --concurrency 2` against one device: the episodes take turns (the worker
    closes a `close_between_episodes` sandbox after each attempt, so an idle slot keeps
    no device), and no trajectory has another episode's screens."""
    swipes = [{"tool": "swipe", "arguments": {"direction": d}} for d in ("up", "down") * 3]
    job = {
        "name": "two-slots", "retries": 0,
        "sandbox": {"kind": "android", "adb": sim.adb, "serial": sim.serial, "lock_timeout": 120},
        "tasks": [{"id": f"{name}-{i}", "app": app, "actions": swipes}
                  for i in (1, 2) for name, app in (("notes", NOTES), ("settings", SETTINGS))],
    }  # fmt: skip
    js = open_job_store(str(store.jobs_db))
    js.submit(JobSpec.from_dict(job))
    stats = Worker(js, store.raw, WorkerConfig(concurrency=2)).run()
    trajectories = list(read_records(store.raw))
    assert stats.run == len(trajectories) == 4 and stats.errors == []
    for t in trajectories:
        app = NOTES if t.task.task_id.startswith("notes") else SETTINGS
        assert t.outcome.status == "success" and f"\n[{app}/" in t.system.initial_state
        assert [package(x.observation) for x in t.turns] == [app] * len(swipes), t.task.task_id
    assert stats.failed == 0


def test_stopping_a_worker_ends_its_wait_for_the_device_and_gives_the_episode_back(sim, store):
    """Found: `worker.stop()` (SIGTERM, Ctrl-C) could not interrupt a reset waiting for a
    device another episode holds: the worker stayed until `lock_timeout` (600 s by
    default) ran out. The wait now ends at the stop and the episode goes back to the queue,
    neither failed nor recorded."""
    holder = sandbox(sim)
    job = {
        "name": "waits", "retries": 0,
        "sandbox": {"kind": "android", "adb": sim.adb, "serial": sim.serial, "lock_timeout": 600},
        "tasks": [{"id": "notes", "app": NOTES,
                   "actions": [{"tool": "swipe", "arguments": {"direction": "up"}}]}],
    }  # fmt: skip
    js = open_job_store(str(store.jobs_db))
    js.submit(JobSpec.from_dict(job))
    worker = Worker(js, store.raw, WorkerConfig(concurrency=1))
    try:
        holder.reset(task(SETTINGS))
        t, out = in_thread(worker.run)
        wait_until(
            lambda: any(waiting_for_the_device(x) for x in threading.enumerate()) or out,
            what="the worker's reset to wait for the device",
        )
        assert not out, f"the worker did not wait for the device: {out}"
        worker.stop()
        t.join(60)
        assert not t.is_alive(), "the worker still waits for the device"
    finally:
        holder.close()
    assert "error" not in out and out["value"].released == 1 and out["value"].run == 0
    assert js.pending() == {"queued": 1, "running": 0}  # back in the queue, not failed
    assert list(read_records(store.raw)) == []
