"""`type` through the AdbKeyboard without uiautomator2's side effects (hunt 1206).

`type` called `uiautomator2.Device.send_keys`, which switches the device's input method
to uiautomator2's AdbKeyboard and never switches it back (a phone left on AdbKeyboard
after every episode), and broadcasts ADB_KEYBOARD_HIDE after the text: every recorded
`type` turn showed the keyboard closing, which the agent never asked for (and a `back`
after it left the screen instead of closing the keyboard). The sandbox now sends the
AdbKeyboard broadcasts itself, without the hide, and puts the device's own input method
back when it lets the device go (`close()`, also after a failed attempt). Real
uiautomator2 and adbutils against the device simulator.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android_device import client
from worldtrace.sandboxes.android_sim import start
from worldtrace.sandboxes.android_sim.device import ADB_KEYBOARD, GBOARD
from worldtrace.schemas import Observation

from .test_android_hunt_1204e import NOTES, field, in_the_title_field, sandbox


def device_shell(sim, cmd: str) -> str:
    """What the device answers to `cmd`, through our own adb client (not the sandbox)."""
    return client(sim.adb, 10.0).device(sim.serial).shell(cmd).strip()


def input_method(sim) -> str:
    return device_shell(sim, "settings get secure default_input_method")


def enabled_imes(sim) -> list[str]:
    return device_shell(sim, "ime list -s").split()


def keyboard_shown(obs: Observation) -> bool:
    header = obs.text.splitlines()[0]
    assert header.endswith(("keyboard: shown", "keyboard: hidden")), header
    return header.endswith("keyboard: shown") and json.loads(obs.state_json)["keyboard"]


def test_typing_leaves_the_keyboard_shown_and_the_text_in_the_field(sim):
    sb = sandbox(sim)
    try:
        in_the_title_field(sb)
        typed = sb.step(tool("type", text="Call the plumber"))
        assert not typed.is_error and typed.changed and typed.env_failure is None
        assert keyboard_shown(typed)  # uiautomator2's send_keys hid it
        title = field(typed, "title_input")
        assert (title.text, title.hint) == ("Call the plumber", "")
        assert "focused" in title.flags
        # so the next back closes the keyboard, as on a phone, and the editor stays
        back = sb.step(tool("press", key="back"))
        assert not keyboard_shown(back)
        assert json.loads(back.state_json)["activity"] == ".EditorActivity"
    finally:
        sb.close()


@pytest.mark.parametrize("enabled_before", [False, True], ids=["adbkeyboard-off", "enabled"])
def test_close_puts_the_devices_input_method_back(sim, enabled_before):
    if enabled_before:  # enabled (a user's earlier u2 session), yet not the device's IME
        device_shell(sim, f"ime enable {ADB_KEYBOARD}")
    before = enabled_imes(sim)
    assert input_method(sim) == GBOARD
    sb = sandbox(sim)
    try:
        in_the_title_field(sb)
        sb.step(tool("type", text="Call the plumber"))
        assert input_method(sim) == ADB_KEYBOARD  # while the episode types
    finally:
        sb.close()
    assert input_method(sim) == GBOARD
    assert enabled_imes(sim) == before


def test_clear_replaces_the_fields_text(sim):
    sb = sandbox(sim)
    try:
        in_the_title_field(sb)
        sb.step(tool("type", text="Shopping list"))
        appended = sb.step(tool("type", text=" for Monday"))
        assert field(appended, "title_input").text == "Shopping list for Monday"
        cleared = sb.step(tool("type", text="Call the plumber", clear=True))
        assert not cleared.is_error and cleared.changed
        assert field(cleared, "title_input").text == "Call the plumber"
        assert keyboard_shown(cleared)
    finally:
        sb.close()
    assert input_method(sim) == GBOARD


TEXTS = ["Party 🎉 at 9", "買い物リスト 牛乳", "家庭 👩‍👩‍👧 주말 ☕︎ Grüße"]


@pytest.mark.parametrize("text", TEXTS, ids=["emoji", "cjk", "mixed"])
def test_non_ascii_text_types_exactly(sim, text):
    sb = sandbox(sim)
    try:
        in_the_title_field(sb)
        typed = sb.step(tool("type", text=text))
        assert not typed.is_error
        assert field(typed, "title_input").text == text
        assert keyboard_shown(typed)
    finally:
        sb.close()
    assert input_method(sim) == GBOARD


def test_without_the_adbkeyboard_typing_pastes_and_leaves_the_device_alone():
    """`--no-ime`: the uiautomator2 server clears and pastes (JSON-RPC), as uiautomator2
    types without its IME; no input method is switched and nothing hides the keyboard."""
    with start(ime_installed=False) as s:
        sb = sandbox(s)
        try:
            in_the_title_field(sb)
            typed = sb.step(tool("type", text="Party 🎉 买"))
            assert field(typed, "title_input").text == "Party 🎉 买" and keyboard_shown(typed)
            cleared = sb.step(tool("type", text="Call", clear=True))
            assert field(cleared, "title_input").text == "Call" and keyboard_shown(cleared)
            assert input_method(s) == GBOARD
        finally:
            sb.close()
        assert input_method(s) == GBOARD and enabled_imes(s) == [GBOARD]


def test_an_attempt_that_fails_after_typing_puts_the_input_method_back(sim, store, chat_server, monkeypatch):  # fmt: skip
    """Through the job runner: the device reboots (a new boot id; settings, like the input
    method, survive a reboot) after a `type`; the attempt fails, and the episode loop's
    close still restores the input method the device had."""
    monkeypatch.setenv("TEST_KEY", "sk-local")
    steps = [
        chat_server.call("tap", x=934, y=2128),  # New note
        chat_server.call("tap", x=540, y=327),  # the title field
        chat_server.call("type", text="Call the plumber"),
        chat_server.call("wait", seconds=0),
    ]

    def replies(body: dict) -> dict:
        n = len(chat_server.requests)
        if n == len(steps):  # asked after the type turn: the device reboots
            sim.device().boot_id = "rebooted"
        return steps[n - 1]

    chat_server.replies = replies
    job = {"name": "reboot", "retries": 0, "sandbox": {"kind": "android", "adb": sim.adb, "serial": sim.serial},
           "policy": {"kind": "openai", "base_url": chat_server.base_url, "model": "m", "api_key_env": "TEST_KEY"},
           "tasks": [{"id": "note", "instruction": "Write a note.", "app": NOTES, "clear_data": True}]}  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert t.outcome.status == "error" and "restarted under the episode" in t.outcome.error
    assert [x.action.name for x in t.turns] == ["tap", "tap", "type"]
    assert keyboard_shown(t.turns[-1].observation)
    assert input_method(sim) == GBOARD and enabled_imes(sim) == [GBOARD]
