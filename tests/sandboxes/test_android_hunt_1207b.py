"""Defects a hunt found in the Android collector (hunt 1207b), each through the real
uiautomator2 client against the device simulator and our real sandbox and job runner.

- List rows with the same first text were numbered by their position among themselves:
  a note saved with the title of an older one (new notes go on top) took the older
  row's id, and the older row got a new one. An agent's `tap node=9` then opened the
  new note. Rows alike now keep their ids by matching the siblings their list had
  when last seen: an unchanged row keeps its id, a new row gets a new one.
- After a device went offline, the sandbox's own refusals (`no node 999`) still
  answered from the last live screen, as if the device had: an offline device now
  gives one `device_offline` turn, and any step after it fails the attempt.
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android import AndroidSandbox
from worldtrace.sandboxes.android_sim import start
from worldtrace.sandboxes.android_view import Node, parse
from worldtrace.sandboxes.base import SandboxError
from worldtrace.schemas import Observation

from .test_android_hunt_1204e import NOTES, field, sandbox, task

SETTINGS = "com.android.settings"


def rows(obs: Observation) -> list[tuple[Node, list[Node]]]:
    """The notes list's rows in screen order, each with the nodes under it."""
    found = list(parse(obs.text))
    out = []
    for i, n in enumerate(found):
        if n.rid == "note_item":
            under = []
            for m in found[i + 1 :]:
                if m.depth <= n.depth:
                    break
                under.append(m)
            out.append((n, under))
    return out


def texts(row: tuple[Node, list[Node]]) -> list[str]:
    return [n.text for n in row[1]]


def add_note(sb: AndroidSandbox, title: str, body: str) -> Observation:
    """Write a note through the UI; leaving the editor saves it on top of the list."""
    sb.step(tool("tap", x=934, y=2128))  # New note
    sb.step(tool("tap", x=540, y=357))  # the title field
    sb.step(tool("type", text=title))
    if body:
        sb.step(tool("press", key="enter"))  # to the body
        sb.step(tool("type", text=body))
    sb.step(tool("press", key="back"))  # closes the keyboard
    return sb.step(tool("press", key="back"))  # leaves: saved


def test_a_row_keeps_its_id_when_a_row_with_its_title_comes_above(sim):
    sb = sandbox(sim)
    try:
        first = sb.reset(task(NOTES, clear_data=True))
        [old, *_] = rows(first)
        assert texts(old) == ["Shopping list", "Milk, eggs, bread"]
        seen = {n.id for n in parse(first.text)}
        after = add_note(sb, "Shopping list", "Call Dana")
        new, moved, *_ = rows(after)
        assert texts(new) == ["Shopping list", "Call Dana"]  # on top
        assert texts(moved) == texts(old)
        # the unchanged row keeps its id (and its children theirs); the new row's are new
        assert [moved[0].id] + [n.id for n in moved[1]] == [old[0].id] + [n.id for n in old[1]]
        assert not ({new[0].id} | {n.id for n in new[1]}) & seen
        # the agent's reference to the row it saw opens that row's note
        opened = sb.step(tool("tap", node=old[0].id))
        assert json.loads(opened.state_json)["activity"] == ".EditorActivity"
        assert field(opened, "body_input").text == "Milk, eggs, bread"
    finally:
        sb.close()


def test_identical_rows_keep_their_ids_in_an_episode_and_across_episodes(sim):
    """Rows alike in every text: the list around them tells which one is new."""

    def episode() -> list[str]:
        first = sb.reset(task(NOTES, clear_data=True))
        [old, *_] = rows(first)
        after = add_note(sb, "Shopping list", "Milk, eggs, bread")  # a copy, on top
        new, moved, *_ = rows(after)
        assert texts(new) == texts(moved) == texts(old)
        assert moved[0].id == old[0].id and new[0].id not in {n.id for n in parse(first.text)}
        assert moved[0].bounds[1] > new[0].bounds[1]  # the old row is the lower one
        # the copy deleted (long-press, Delete): the row left keeps the id it had
        asked = sb.step(tool("long_press", node=new[0].id))
        gone = sb.step(
            tool("tap", node=next(n for n in parse(asked.text) if n.text == "Delete").id)
        )
        [left, *_] = rows(gone)
        assert texts(left) == texts(old) and left[0].id == old[0].id
        return [first.text, after.text, gone.text]

    sb = sandbox(sim)
    try:
        assert episode() == episode()  # deterministic: the same actions, the same ids
    finally:
        sb.close()


def test_a_refusal_on_an_offline_device_is_no_stale_screen(sim):
    sb = sandbox(sim)
    try:
        sb.reset(task(SETTINGS))
        sim.device().set_state("offline")
        obs = sb.step(tool("tap", node=999))  # no device call: the refusal asks adb first
        assert obs.env_failure == "device_offline" and obs.is_error
        assert obs.text == "error: device offline"
        assert json.loads(obs.state_json)["device"] == "offline"
        with pytest.raises(SandboxError, match="emulator-5554 went offline at step 1"):
            sb.step(tool("tap", node=999))
    finally:
        sb.close()


def test_steps_after_the_offline_turn_fail_the_attempt(sim):
    sb = sandbox(sim)
    try:
        first = sb.reset(task(SETTINGS))
        row = next(n for n in parse(first.text) if "clickable" in n.flags)
        sim.device().set_state("offline")
        obs = sb.step(tool("tap", node=row.id))  # reaches the device: the environment's turn
        assert obs.env_failure == "device_offline"
        for later in (tool("tap", node=999), tool("tap", node=row.id), tool("press", key="back"),
                      tool("swipe", direction="sideways")):  # fmt: skip
            with pytest.raises(SandboxError, match=r"went offline at step 1 .*offline"):
                sb.step(later)
    finally:
        sb.close()


def test_a_job_whose_device_goes_offline_fails_the_attempt(store):
    tap = {"tool": "tap", "arguments": {"x": 540, "y": 630}}
    with start(offline_after=12) as s:
        job = {"name": "offline", "retries": 0,
               "sandbox": {"kind": "android", "adb": s.adb, "serial": s.serial},
               "tasks": [{"id": "t", "app": SETTINGS,
                          "actions": [tap] * 4 + [{"tool": "tap", "arguments": {"node": 999}}, tap]}]}  # fmt: skip
        r = run_job(JobSpec.from_dict(job), store.raw)
    [t] = r.trajectories
    assert t.outcome.status == "error" and "went offline" in t.outcome.error, t.outcome
    said = [turn.observation.text for turn in t.turns if turn.observation]
    assert said[-1] == "error: device offline"  # one offline turn, then the attempt failed
    assert not any("no node 999" in text for text in said), said


def test_rows_alike_keep_their_ids_through_a_scroll_and_back(sim):
    """An inbox of rows with one first text (one sender): a row scrolled into view gets
    a new id, not the one a row scrolled out had; scrolled back, each has its own again."""
    notes = [{"title": "Untitled", "body": f"Note {i}"} for i in range(1, 15)]
    sim.device().apps[NOTES].data["notes"] = notes  # the app's data, as a user left it
    sb = sandbox(sim)
    try:
        first = sb.reset(task(NOTES))

        def ids(obs: Observation) -> dict[str, int]:
            return {texts(r)[1]: r[0].id for r in rows(obs) if len(r[1]) == 2}  # whole rows

        top = ids(first)
        assert len(top) > 3 and set(top) < {n["body"] for n in notes}
        down = ids(sb.step(tool("swipe", direction="up")))
        assert set(down) - set(top) and set(down) & set(top)  # partly new rows
        assert all(down[b] == top[b] for b in set(down) & set(top))  # still shown: kept
        assert not {down[b] for b in set(down) - set(top)} & set(top.values())  # new: new ids
        back = ids(sb.step(tool("swipe", direction="down")))
        assert back == top
    finally:
        sb.close()
