"""A device that restarts under an episode fails the attempt (infrastructure), never an
observation: found by a review that killed `android-sim` between two calls and started it
again; `type` in the note editor then answered the launcher's home screen as a successful,
changed turn, and that turn reached the loss. Real uiautomator2 against a simulator in its
own process, killed by pid and started again on the same port, the way a device reboots.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_sim import SimProcess, spawn
from worldtrace.sandboxes.base import SandboxError, TaskSpec

from ..conftest import wait_until

NOTES = "com.example.notes"


@pytest.fixture
def device():
    """A simulator process; `reboot()` kills it by pid and starts it again on its port."""

    class Device:
        def __init__(self) -> None:
            self.sim: SimProcess = spawn()
            self.adb = self.sim.adb
            self.serial = self.sim.serials[0]

        def reboot(self) -> None:
            os.kill(self.sim.pid, signal.SIGKILL)
            self.sim.proc.wait(10)
            self.sim.stop()  # closes its pipe
            self.sim = spawn(["--port", self.adb.rpartition(":")[2]])

    d = Device()
    yield d
    d.sim.stop()


def into_the_editor(sb: AndroidSandbox) -> None:
    sb.step(tool("tap", x=934, y=2128))  # New note
    sb.step(tool("tap", x=540, y=327))  # the title field
    assert json.loads(sb.step(tool("wait", seconds=0)).state_json)["activity"] == ".EditorActivity"


def test_a_step_after_the_device_restarted_fails_the_attempt(device):
    sb = AndroidSandbox(AndroidConfig(adb=device.adb, serial=device.serial, timeout=10))
    sb.reset(TaskSpec("t", "test", (), AndroidTask(app=NOTES, clear_data=True)))
    into_the_editor(sb)
    device.reboot()
    with pytest.raises(SandboxError, match="restarted under the episode"):
        sb.step(tool("type", text="Call the plumber"))
    sb.close()
    # a new episode on the restarted device is fine: its reset takes the new boot
    sb.reset(TaskSpec("t", "test", (), AndroidTask(app=NOTES)))
    assert sb.step(tool("wait", seconds=0)).env_failure is None
    sb.close()


def in_a_wait_action() -> bool:
    """Whether some thread is inside the sandbox's `wait` action (read from live stacks)."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "_do_wait":
                return True
            frame = frame.f_back
    return False


def test_the_restarted_turn_is_not_recorded(device, store):
    """Through the job runner, as `collect` runs it: the device restarts while the agent
    waits; the attempt fails with the reason and holds no turn from the restarted device."""
    job = {"name": "restart", "retries": 0, "max_turns": 10, "policy": "scripted",
           "sandbox": {"kind": "android", "adb": device.adb, "serial": device.serial, "timeout": 10},
           "tasks": [{"id": "notes", "app": NOTES, "clear_data": True, "actions": [
               {"tool": "tap", "arguments": {"x": 934, "y": 2128}},
               {"tool": "tap", "arguments": {"x": 540, "y": 327}},
               {"tool": "wait", "arguments": {"seconds": 8}},
               {"tool": "type", "arguments": {"text": "Call the plumber"}},
               {"tool": "press", "arguments": {"key": "back"}}]}]}  # fmt: skip

    def reboot_while_waiting() -> None:
        wait_until(in_a_wait_action, timeout=60, what="the wait action")
        device.reboot()

    rebooter = threading.Thread(target=reboot_while_waiting)
    rebooter.start()
    r = run_job(JobSpec.from_dict(job), store.raw)
    rebooter.join(30)
    [t] = r.trajectories
    assert t.outcome.status == "error" and "restarted under the episode" in t.outcome.error
    assert [x.action.name for x in t.turns] == ["tap", "tap"]
