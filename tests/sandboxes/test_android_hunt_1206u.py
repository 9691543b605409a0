"""Defects a hunt found in the Android collector (hunt 1206u), each through the real
uiautomator2 and adbutils clients against the device simulator.

- A `type` of more than ~49,000 characters failed every attempt as infrastructure
  (`AdbShellError: unknown service '4shell'`): its one `am broadcast` outgrew the adb
  request's 4-hex-digit length. It now goes in broadcasts that each fit.
- uiautomator2's `dump_hierarchy` answers a dump with no window with its own blank
  `<hierarchy rotation="0" />`, recorded as a real screen without a node. A blank is
  re-read within the settle, and one that stays fails the attempt naming the device.
- A dump that is no XML (half a dump, an error line) raised a bare ParseError.
- A collector killed with -9 left its device on AdbKeyboard for good: later episodes saw
  AdbKeyboard on and never recorded the device's own input method.
- Two devices and no `serial:` failed every attempt alike, each retried.
- `android-sim --host ::1` passed the loopback check, then could not listen.
- A device that disappeared at reset was said to have gone "mid-episode".

Faults are injected into the simulator (its dump answers), never into the sandbox.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android_sim import SimConfig, Simulator, start
from worldtrace.sandboxes.android_sim.device import ADB_KEYBOARD, GBOARD
from worldtrace.sandboxes.android_view import parse
from worldtrace.sandboxes.base import SandboxError

from .test_android_hunt_1204e import NOTES, field, in_the_title_field, sandbox, task
from .test_android_type_1206 import device_shell, enabled_imes, input_method

BLANK = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\r\n<hierarchy rotation=\"0\" />"
"""What the uiautomator2 server dumps while the screen has no window (between activities),
and what uiautomator2's `dump_hierarchy` makes up when the server answers nothing."""


def fault_dumps(sim, answer: Callable[[str, int], str]) -> None:
    """The simulated uiautomator2 server answers its n-th dump from now with
    `answer(screen, n)` (n from 1) instead of the screen."""
    dev = sim.device()
    screen, count = dev.dump, itertools.count(1)
    dev.dump = lambda *a, **kw: answer(screen(*a, **kw), next(count))


def test_a_long_text_types_whole(sim):
    text = ("Grüße 👩‍👩‍👧 買い物リスト, milk; " * 3000)[:60_000]  # 2- to 4-byte characters
    sb = sandbox(sim, max_chars=1_000_000)  # a field's text is shown up to 100,000 chars
    try:
        in_the_title_field(sb)
        sb.step(tool("type", text="draft"))
        typed = sb.step(tool("type", text=text, clear=True))
        assert not typed.is_error and typed.changed
        assert field(typed, "title_input").text == text  # whole, once, in order
        assert sb.step(tool("type", text="!")).is_error is False  # the cursor is at its end
        assert field(sb.step(tool("wait", seconds=0)), "title_input").text == text + "!"
    finally:
        sb.close()
    assert input_method(sim) == GBOARD


def test_a_blank_dump_is_re_read_within_the_settle(sim):
    sb = sandbox(sim)
    try:
        sb.reset(task(NOTES, clear_data=True))
        fault_dumps(sim, lambda screen, n: BLANK if n <= 2 else screen)  # between activities
        obs = sb.step(tool("tap", x=934, y=2128))  # New note
        assert not obs.is_error and obs.changed and "#title_input" in obs.text
    finally:
        sb.close()


def test_a_blank_dump_is_re_read_under_settle_timeout_0(sim):
    """Review: `settle_timeout: 0` (allowed) failed the attempt on one blank dump between
    two activities; a blank is read again for `EMPTY_DUMP_WAIT` at least."""
    sb = sandbox(sim, settle_timeout=0)
    try:
        sb.reset(task(NOTES, clear_data=True))
        fault_dumps(sim, lambda screen, n: BLANK if n <= 2 else screen)
        obs = sb.step(tool("tap", x=934, y=2128))  # New note
        assert not obs.is_error and "#title_input" in obs.text
    finally:
        sb.close()


def test_a_hierarchy_that_stays_empty_fails_the_attempt(sim):
    sb = sandbox(sim, settle_timeout=0.5)
    try:
        sb.reset(task(NOTES, clear_data=True))
        fault_dumps(sim, lambda screen, n: BLANK)
        with pytest.raises(SandboxError) as failed:
            sb.step(tool("tap", x=934, y=2128))
        assert str(failed.value).startswith(
            f"dump hierarchy: the view hierarchy of device {sim.serial} came back empty"
        ), failed.value
    finally:
        sb.close()


@pytest.mark.parametrize(
    "answer",
    [lambda screen, n: screen[: len(screen) // 2], lambda screen, n: "ERROR: could not get idle state."],
    ids=["half", "error-line"],
)  # fmt: skip
def test_a_dump_that_is_no_xml_fails_the_attempt_naming_the_device(sim, answer):
    sb = sandbox(sim)
    try:
        sb.reset(task(NOTES, clear_data=True))
        fault_dumps(sim, answer)
        with pytest.raises(SandboxError) as failed:
            sb.step(tool("tap", x=934, y=2128))
        said = str(failed.value)
        assert said.startswith(f"dump hierarchy failed on {sim.serial} (device): "), said
        assert "not XML" in said and ("line 1, column" in said or "line 2, column" in said)
    finally:
        sb.close()


TYPIST = """
import sys
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.base import TaskSpec

sb = AndroidSandbox(AndroidConfig(adb=sys.argv[1], serial=sys.argv[2]))
sb.reset(TaskSpec("t", "", (), AndroidTask(app="com.example.notes", clear_data=True)))
sb.step(tool("tap", x=934, y=2128))
sb.step(tool("tap", x=540, y=327))
print(sb.step(tool("type", text="Call")).text.splitlines()[0], flush=True)
sys.stdin.read()  # killed here, mid-episode
"""
"""A collector process that types, then waits to be killed."""


def test_a_keyboard_left_by_a_killed_collector_is_put_back(sim):
    before = enabled_imes(sim)
    typist = subprocess.Popen(
        [sys.executable, "-c", TYPIST, sim.adb, sim.serial],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert typist.stdout.readline().endswith("keyboard: shown\n")
        os.kill(typist.pid, signal.SIGKILL)
        typist.wait(30)
    finally:
        typist.kill()
        typist.wait(30)
    assert input_method(sim) == ADB_KEYBOARD  # what the killed episode left
    sb = sandbox(sim)
    try:
        first = sb.reset(task(NOTES, clear_data=True))
        assert not first.is_error
        assert input_method(sim) == GBOARD  # the episode starts on the device's own
        in_the_title_field(sb)
        assert field(sb.step(tool("type", text="Milk")), "title_input").text == "Milk"
    finally:
        sb.close()
    assert input_method(sim) == GBOARD
    assert enabled_imes(sim) == before  # the mark said AdbKeyboard was not enabled


def test_a_keyboard_the_owner_chose_is_left_as_it_is(sim):
    """Review: AdbKeyboard on with no mark of ours (the owner's choice) was switched away
    at every reset, taken for a killed collector's leftover."""
    device_shell(sim, f"ime enable {ADB_KEYBOARD}")
    device_shell(sim, f"ime set {ADB_KEYBOARD}")
    sb = sandbox(sim)
    try:
        assert not sb.reset(task(NOTES, clear_data=True)).is_error
        assert input_method(sim) == ADB_KEYBOARD
    finally:
        sb.close()
    assert input_method(sim) == ADB_KEYBOARD


def test_two_devices_and_no_serial_fail_once_as_a_configuration_mistake(store):
    with start(SimConfig(devices=2)) as s:
        job = {"name": "two", "retries": 2, "sandbox": {"kind": "android", "adb": s.adb},
               "tasks": [{"id": "t", "actions": [{"tool": "wait", "arguments": {"seconds": 0}}]}]}  # fmt: skip
        r = run_job(JobSpec.from_dict(job), store.raw)
    [t] = r.trajectories
    assert r.failed_attempts == 1, [x.outcome.error for x in r.trajectories]
    assert t.outcome.error == (
        f"SandboxConfigError: the adb server at {s.adb} has 2 online devices; set `serial:` "
        "(devices: emulator-5554, emulator-5556)"
    )


def test_the_simulator_refuses_ipv6_loopback_up_front(wt_env):
    r = subprocess.run(
        ["worldtrace", "android-sim", "--host", "::1", "--port", "0"],
        env=wt_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == (
        "Error: Invalid value for --host: the simulator listens on IPv4 loopback only "
        "(127.0.0.1 or localhost), not ::1: adb clients (adbutils) reach an adb server over IPv4"
    )
    with pytest.raises(ValueError, match="IPv4 loopback only"):
        Simulator(SimConfig(host="::1"))


def test_a_device_dropped_at_reset_says_so():
    with start() as s:
        dev = s.device()

        def unplug(screen: str, n: int) -> str:
            dev.set_state("gone")  # the device leaves during the reset's first dump
            return screen

        fault_dumps(s, unplug)
        sb = sandbox(s)
        try:
            with pytest.raises(SandboxError) as failed:
                sb.reset(task())
        finally:
            sb.close()
    said = str(failed.value)
    assert f"device {s.serial} disappeared from the adb server at {s.adb} at reset" in said
    assert "mid-episode" not in said
    assert not list(parse(said))
