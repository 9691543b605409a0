"""Defects a user hit collecting from Android (hunt 1204e), each through the real
uiautomator2 client against the device simulator and our real sandbox and job runner.

- A typo in a task's `app:` (or `activity:`) was retried like a flaky device: every
  attempt failed alike, `retries + 1` times. No retry installs an app: the attempt fails
  with SandboxConfigError (not retried) and the message names what is installed.
- Text with control characters (typed, or shown by an app) made the simulator dump XML
  that no parser reads, and the step died with a bare `ParseError`; the device stayed
  poisoned for every later step. The uiautomator2 server replaces characters XML cannot
  carry; the simulator now does the same, and the sandbox reads such a dump anyway.
- A lone surrogate (an emoji cut in half, as apps truncating text show, or a model's
  broken `\\ud83d` escape) either failed the attempt as if the device broke (`type`) or
  crashed the observation with an unwrapped UnicodeEncodeError.
- One huge text (a long note, a log view) hid the whole rest of the screen: the
  observation cap dropped every node from the first long line on.
"""

from __future__ import annotations

import json
import re

import pytest
import uiautomator2
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_sim import start
from worldtrace.sandboxes.android_view import NodeIds, nodes, parse
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.schemas import Action, Observation

NOTES = "com.example.notes"


def sandbox(sim, **kw) -> AndroidSandbox:
    return AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial, **kw))


def task(app: str | None = None, **kw) -> TaskSpec:
    return TaskSpec("t", "test", (), AndroidTask(app=app, **kw))


def in_the_title_field(sb: AndroidSandbox) -> None:
    sb.reset(task(NOTES, clear_data=True))
    sb.step(tool("tap", x=934, y=2128))  # New note
    focused = sb.step(tool("tap", x=540, y=327))  # the title field
    assert "focused" in field(focused, "title_input").flags


def field(obs: Observation, rid: str):
    found = [n for n in parse(obs.text) if n.rid == rid]
    assert found, f"no #{rid} in:\n{obs.text}"
    return found[0]


def test_a_package_typo_fails_once_as_a_configuration_mistake(sim, store):
    job = {"name": "typo", "retries": 2, "sandbox": {"kind": "android", "adb": sim.adb, "serial": sim.serial},
           "tasks": [{"id": "app", "app": "com.example.notez", "clear_data": True,
                      "actions": [{"tool": "wait", "arguments": {"seconds": 0}}]},
                     {"id": "activity", "app": NOTES, "activity": ".MainActivty",
                      "actions": [{"tool": "wait", "arguments": {"seconds": 0}}]}]}  # fmt: skip
    r = run_job(JobSpec.from_dict(job), store.raw)
    by_task = {t.task.task_id: t for t in r.trajectories}
    assert r.failed_attempts == 2 and len(r.trajectories) == 2, [
        (t.task.task_id, t.outcome.error) for t in r.trajectories
    ]  # one attempt each, though the job allows 2 retries
    app, activity = by_task["app"].outcome.error, by_task["activity"].outcome.error
    assert app.startswith(
        "SandboxConfigError: cannot launch com.example.notez on emulator-5554: "
        "** No activities found to run, monkey aborted."
    )
    assert app.endswith("(com.example.notez is not installed; did you mean com.example.notes?)")
    assert activity.startswith(
        "SandboxConfigError: cannot launch com.example.notes on emulator-5554"
    )
    assert "Activity class {com.example.notes/.MainActivty} does not exist" in activity


def test_control_characters_on_screen_are_an_observation(sim):
    sb = sandbox(sim)
    in_the_title_field(sb)
    typed = sb.step(tool("type", text="bell\x07 esc\x1b[31m nul\x00 tab\tend"))
    assert not typed.is_error and typed.changed
    # the uiautomator2 server replaces what XML cannot carry with "." (tab is fine)
    assert field(typed, "title_input").text == "bell. esc.[31m nul. tab\tend"
    sb.step(tool("press", key="back"))  # closes the keyboard (typing leaves it up)
    later = sb.step(tool("press", key="back"))  # the saved note in the list
    assert not later.is_error and json.loads(later.state_json)["activity"] == ".MainActivity"
    assert any(n.text == "bell. esc.[31m nul. tab\tend" for n in parse(later.text))
    sb.close()


def test_a_lone_surrogate_in_typed_text_is_the_agents_error():
    with start(ime_installed=False) as s:  # typing through the clipboard, too
        sb = sandbox(s)
        in_the_title_field(sb)
        refused = sb.step(
            Action(kind="tool_call", name="type", arguments_json='{"text": "Party \\ud83c"}')
        )
        assert refused.is_error and refused.changed is False
        assert refused.text.startswith("error: text is not valid Unicode")
        fine = sb.step(tool("type", text="Party 🎉"))
        assert field(fine, "title_input").text == "Party 🎉"
        sb.close()


def test_a_half_emoji_shown_by_an_app_is_read_not_a_crash(sim):
    sb = sandbox(sim)
    in_the_title_field(sb)
    # the app shows half an emoji (a text cut inside a UTF-16 pair): pasted here with
    # the bare client's JSON-RPC, which carries it escaped as `\ud83c`
    d = uiautomator2.connect(sb._conn.client.device(sim.serial))
    d.jsonrpc.setClipboard(None, "Party \ud83c")
    d.jsonrpc.pasteClipboard()
    seen = sb.step(tool("wait", seconds=0))
    assert not seen.is_error and field(seen, "title_input").text == "Party \ufffd"
    seen.text.encode("utf-8")  # storable: no lone surrogate left
    sb.close()


def test_a_dump_with_a_lone_surrogate_or_a_raw_control_character_parses():
    """As a device may answer (JSON-escaped half pair; a server that does not strip)."""
    dump = json.loads(
        "\"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\\\"0\\\">"
        '<node class=\\"android.widget.TextView\\" text=\\"Party \\ud83c\\" package=\\"a.b\\" '
        'bounds=\\"[0,0][10,10]\\" /><node class=\\"android.widget.TextView\\" text=\\"x\\u0001y\\" '
        'package=\\"a.b\\" bounds=\\"[0,10][10,20]\\" /></hierarchy>"'
    )
    found = nodes(dump, NodeIds())
    assert [n.text for n in found] == ["Party \ufffd", "x.y"]


def test_one_huge_text_does_not_hide_the_rest_of_the_screen(sim):
    sb = sandbox(sim, max_chars=3000)
    in_the_title_field(sb)
    obs = sb.step(tool("type", text="word " * 8000))
    assert obs.truncated and len(obs.text) < 3000 + 200
    title = field(obs, "title_input")  # the field typed into is still there, cut
    assert re.fullmatch(r"(word ){10,}\S*… \(\+\d+ chars\)", title.text), title.text[-80:]
    assert field(obs, "body_input").hint == "Note"  # and so is what comes after it
    sb.close()


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_a_line_separator_in_a_text_keeps_one_line_per_node(sim, sep):
    sb = sandbox(sim)
    in_the_title_field(sb)
    obs = sb.step(tool("type", text=f"one{sep}two"))
    assert field(obs, "title_input").text == f"one{sep}two"
    assert field(obs, "body_input").hint == "Note"
    sb.close()
