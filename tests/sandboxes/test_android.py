"""The android sandbox and collector end to end: real uiautomator2 over real sockets to the
device simulator, episodes through the job runner, trajectories through the pipeline.

Every sandbox here is pointed at a simulator's own loopback port (never 5037).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.policies import History
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask, doctor_check
from worldtrace.sandboxes.android_explorer import AndroidExplorer, ExplorerConfig
from worldtrace.sandboxes.android_sim import demo_jobs, start
from worldtrace.sandboxes.android_view import Node, parse
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.schemas import Observation, Turn, validate_dict
from worldtrace.schemas.parsing import ConfigError

NOTES = "com.example.notes"
SETTINGS = "com.android.settings"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def sandbox(sim, **kw) -> AndroidSandbox:
    return AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial, **kw))


def task(app: str | None = None, **kw) -> TaskSpec:
    return TaskSpec("t", "test", (), AndroidTask(app=app, **kw))


def flags(obs: Observation) -> tuple[bool | None, str | None]:
    """(changed, env_failure): the GUI flags the pipeline's filters read."""
    return obs.changed, obs.env_failure


def node(obs: Observation, **match: str) -> Node:
    found = [n for n in parse(obs.text) if all(getattr(n, k) == v for k, v in match.items())]
    assert found, f"no node {match} in:\n{obs.text}"
    return found[0]


def test_tap_navigates_typing_changes_the_field_back_returns(sim):
    sb = sandbox(sim)
    start_obs = sb.reset(task(NOTES))
    assert start_obs.text.startswith(f"[{NOTES}/.MainActivity] keyboard: hidden")
    assert json.loads(start_obs.state_json)["activity"] == ".MainActivity"
    editor = sb.step(tool("tap", node=node(start_obs, desc="New note").id))
    assert (
        json.loads(editor.state_json)["activity"] == ".EditorActivity" and flags(editor)[0] is True
    )
    title = node(editor, hint="Title")
    focused = sb.step(tool("tap", node=title.id))
    assert "keyboard: shown" in focused.text.splitlines()[0]
    assert "focused" in node(focused, id=title.id).flags
    typed = sb.step(tool("type", text="Pick up keys"))
    field = node(typed, id=title.id)  # the same field keeps its id while its text changes
    assert (field.text, field.hint) == ("Pick up keys", "")
    assert "keyboard: shown" in typed.text.splitlines()[0]  # typing leaves the keyboard up
    closed = sb.step(tool("press", key="back"))  # the first back closes the keyboard
    assert json.loads(closed.state_json)["activity"] == ".EditorActivity"
    back = sb.step(tool("press", key="back"))
    assert json.loads(back.state_json)["activity"] == ".MainActivity" and flags(back)[0] is True
    assert node(back, rid="note_title").text == "Pick up keys"
    assert [n.text for n in parse(back.text) if n.rid == "note_title"][1:] == [
        n.text for n in parse(start_obs.text) if n.rid == "note_title"
    ]
    sb.close()


def test_no_op_tap_is_flagged_no_change(sim):
    sb = sandbox(sim)
    first = sb.reset(task(SETTINGS))
    title = node(first, text="Settings")  # a label: nothing happens on tap
    same = sb.step(tool("tap", node=title.id))
    assert flags(same) == (False, None) and same.text == first.text
    moved = sb.step(tool("swipe", direction="up", node=node(first, rid="recycler_view").id))
    assert (
        flags(moved)[0] is True and "About phone" in moved.text and "About phone" not in first.text
    )
    wrong = sb.step(tool("tap", node=9999))
    assert (
        wrong.is_error
        and wrong.text == "error: no node 9999 on the screen"
        and flags(wrong)[0] is False
    )
    sb.close()


def test_node_ids_stay_stable_across_scrolling(sim):
    sb = sandbox(sim)
    first = sb.reset(task(SETTINGS))
    display = node(first, text="Display")
    scrolled = sb.step(tool("swipe", direction="up", node=node(first, rid="recycler_view").id))
    assert node(scrolled, text="Display").id == display.id
    assert node(scrolled, text="Display").bounds[1] < display.bounds[1]
    page = sb.step(tool("tap", node=node(scrolled, text="Display").id))
    dark = node(page, text="Dark theme")
    switch = next(n for n in parse(page.text) if n.cls == "Switch")
    assert "unchecked" in switch.flags
    toggled = sb.step(tool("tap", node=dark.id))
    assert "checked" in node(toggled, id=switch.id).flags and flags(toggled)[0] is True
    sb.close()


def test_crash_and_anr_dialogs_are_environment_failures(sim):
    sb = sandbox(sim)
    home = sb.reset(task(NOTES))
    menu = sb.step(tool("tap", node=node(home, desc="More options").id))
    crashed = sb.step(tool("tap", node=node(menu, text="Sync now").id))
    assert flags(crashed)[1] == "app_crashed" and not crashed.is_error
    assert "window: Application Error: com.example.notes" in crashed.text.splitlines()[0]
    assert node(crashed, text="Notes keeps stopping")
    again = sb.reset(task(NOTES))  # the next episode starts clean: the dialog is dismissed
    assert flags(again) == (None, None) and "Notes keeps stopping" not in again.text
    menu = sb.step(tool("tap", node=node(again, desc="More options").id))
    frozen = sb.step(tool("tap", node=node(menu, text="Export").id))
    assert flags(frozen)[1] == "anr" and node(frozen, text="Notes isn't responding")
    waited = sb.step(tool("tap", node=node(frozen, text="Wait").id))
    assert flags(waited)[1] is None and node(waited, text="Exported 3 notes")
    sb.close()


def test_reset_starts_a_named_activity_and_refuses_a_missing_app(sim):
    sb = sandbox(sim)
    obs = sb.reset(task(NOTES, activity=".MainActivity"))
    assert json.loads(obs.state_json)["activity"] == ".MainActivity"
    with pytest.raises(
        SandboxError, match=r"cannot launch com\.example\.nope on emulator-5554: .*monkey aborted"
    ):
        sb.reset(task("com.example.nope"))
    with pytest.raises(
        SandboxError, match=r"Activity class \{com\.example\.notes/\.Nope\} does not exist"
    ):
        sb.reset(task(NOTES, activity=".Nope"))
    home = sb.reset(task())
    assert json.loads(home.state_json)["package"] == "com.google.android.apps.nexuslauncher"
    sb.close()


def test_a_failed_launch_leaves_the_screen_unchanged(sim):
    """Found: a launch of a package not installed was `changed=True` though the screen
    stayed as it was (the comparison read the error said before the screen), and so was
    the step after it."""
    sb = sandbox(sim)
    first = sb.reset(task(NOTES))
    failed = sb.step(tool("launch", package="com.example.nope"))
    assert failed.is_error and "monkey aborted" in failed.text.splitlines()[0]
    assert failed.changed is False and failed.text.endswith(first.text)
    again = sb.step(tool("press", key="volume_up"))
    assert again.changed is False, again.text
    sb.close()


def test_offline_device_is_an_environment_failure():
    with start(offline_after=12) as s:
        sb = sandbox(s)
        obs = sb.reset(task(SETTINGS))
        for _ in range(4):
            obs = sb.step(tool("tap", x=540, y=630))
            if flags(obs)[1]:
                break
        assert (
            flags(obs) == (None, "device_offline")
            and obs.is_error
            and obs.text == "error: device offline"
        )
        assert json.loads(obs.state_json)["device"] == "offline"
        with pytest.raises(
            SandboxError, match="cannot start the episode: device emulator-5554 offline"
        ):
            sb.reset(task(SETTINGS))


def test_device_dropped_mid_episode_fails_the_attempt_with_its_reason(store):
    with start(drop_after=10) as s:
        job = {"name": "drop", "retries": 1, "sandbox": {"kind": "android", "adb": s.adb, "serial": s.serial},
               "tasks": [{"id": "t", "app": SETTINGS, "actions": [{"tool": "tap", "arguments": {"x": 540, "y": 630}}] * 6}]}  # fmt: skip
        r = run_job(JobSpec.from_dict(job), store.raw)
    first, second = r.trajectories
    assert (first.outcome.status, second.outcome.status) == (
        "error",
        "error",
    ) and r.failed_attempts == 2
    assert (
        "disappeared from the adb server" in first.outcome.error
        and "mid-episode" in first.outcome.error
    )
    assert 0 < len(first.turns) < 6  # the turns before the drop are kept
    assert "emulator-5554 is not attached" in second.outcome.error  # the retry finds no device
    assert validate_dict(first.to_dict()) == []


def test_recorded_trajectories_validate_and_run_through_the_pipeline(sim, store):
    from worldtrace.pipelines.process import ProcessConfig, run

    scripted, explore = demo_jobs(sim.adb, sim.serial)
    explore["tasks"], explore["episodes"] = explore["tasks"][:3], 1
    trajectories = [
        t
        for job in (scripted, explore)
        for t in run_job(JobSpec.from_dict(job), store.raw).trajectories
    ]
    assert len(trajectories) == 4 and all(
        t.outcome.status in ("success", "incomplete") for t in trajectories
    )
    for t in trajectories:
        assert validate_dict(t.to_dict()) == [] and t.domain == "android"
        assert t.environment.backend == "adb" and t.environment.device == sim.serial
        assert "Device: WorldTrace Simulator, Android 14" in t.system.initial_state
        assert {a["name"] for a in json.loads(t.system.action_space)} >= {
            "tap",
            "swipe",
            "type",
            "press",
        }
        assert all(x.observation.state_json for x in t.turns)
    note = trajectories[0]
    assert [x.action.name for x in note.turns] == [
        "tap", "tap", "type", "press", "type", "press", "press"
    ]  # fmt: skip
    assert node(note.turns[2].observation, rid="title_input").text == "Call the plumber"
    assert node(note.turns[4].observation, rid="body_input").text == "Tuesday 9am"
    assert node(note.turns[-1].observation, rid="note_title").text == "Call the plumber"
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert m["accounting"]["in"] == 4 and m["accounting"]["balanced"]
    import duckdb

    turns = f"read_parquet('{store.processed / 'turns'}/*.parquet')"
    [(kept,)] = duckdb.sql(f"select count(*) from {turns} where domain = 'android'").fetchall()
    assert kept > 0 and m["accounting"]["kept"] >= 1


def test_explorer_is_reproducible_from_the_seed(sim):
    def episode(seed: int) -> list[str]:
        sb = sandbox(sim)
        obs = sb.reset(task(NOTES, clear_data=True))
        h = History("explore", obs, [])
        policy = AndroidExplorer(ExplorerConfig(steps=8), seed)
        actions = []
        while (a := policy.act(h)) is not None:
            obs = sb.step(a)
            h.turns.append(Turn(len(h.turns), a, obs))
            actions.append(a.text)
        sb.close()
        return actions

    first, again, other = episode(3), episode(3), episode(4)
    assert first == again and len(first) == 8 and first != other


def test_openai_policy_drives_the_device(sim, store, chat_server, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sk-local")
    call = lambda name, args: {"role": "assistant", "content": None, "tool_calls": [  # noqa: E731
        {"id": name, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}  # fmt: skip
    chat_server.replies = [
        call("tap", {"x": 540, "y": 630}),
        call("press", {"key": "back"}),
        {"role": "assistant", "content": "Done."},
    ]
    job = {"name": "llm", "sandbox": {"kind": "android", "adb": sim.adb, "serial": sim.serial},
           "policy": {"kind": "openai", "base_url": chat_server.base_url, "model": "m", "api_key_env": "TEST_KEY"},
           "tasks": [{"id": "wifi", "instruction": "Open Network & internet.", "app": SETTINGS}]}  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.action.name for x in t.turns] == ["tap", "press"] and t.outcome.status == "success"
    assert "Airplane mode" in t.turns[0].observation.text
    tools = {
        x["function"]["name"]: x["function"]["parameters"]
        for x in chat_server.requests[0]["body"]["tools"]
    }
    assert set(tools) == {"tap", "long_press", "swipe", "type", "press", "launch", "wait"}
    assert tools["press"]["properties"]["key"]["enum"] == [
        "back",
        "home",
        "enter",
        "recent",
        "delete",
    ]
    sent = chat_server.requests[1]["body"]["messages"]
    assert sent[-1]["role"] == "tool" and "Airplane mode" in sent[-1]["content"]
    assert "[com.android.settings/.Settings]" in sent[0]["content"]  # the initial screen


def test_job_files_are_checked_before_anything_runs():
    for path in sorted(EXAMPLES.glob("android-*.yaml")):
        spec = JobSpec.load(path)
        assert spec.sandbox.kind == "android" and spec.domain == "android"

    def problems(sandbox: dict, task: dict) -> str:
        with pytest.raises(ConfigError) as e:
            JobSpec.from_dict(
                {
                    "name": "bad",
                    "sandbox": {"kind": "android", **sandbox},
                    "tasks": [{"id": "t", **task}],
                }
            )
        return str(e.value)

    msg = problems(
        {"adb": "nohost"},
        {"app": "not a package", "actions": [{"tool": "wait", "arguments": {"seconds": 1}}]},
    )
    assert (
        "sandbox.adb: must be host:port" in msg
        and "tasks[0].app: not an Android package name" in msg
    )
    msg = problems(
        {}, {"actions": [{"tool": "tap", "arguments": {"x": 1}}, {"tool": "fly", "arguments": {}}]}
    )
    assert "tasks[0].actions[0].arguments" in msg and "'y' is a dependency of 'x'" in msg
    assert "tasks[0].actions[1].tool: unknown tool 'fly'" in msg


def test_example_job_does_what_its_instructions_say(sim, store):
    import yaml

    data = yaml.safe_load((EXAMPLES / "android-notes.yaml").read_text())
    data["sandbox"]["adb"] = sim.adb  # the example names the simulator's default port
    note, dark = run_job(JobSpec.from_dict(data), store.raw).trajectories
    assert node(note.turns[-1].observation, rid="note_title").text == "Call the plumber"
    assert node(note.turns[-1].observation, rid="note_snippet").text == "Tuesday 9am"
    page = dark.turns[-1].observation
    assert "Display" in page.text and "checked" in node(page, rid="switch_widget").flags


def test_doctor_lists_devices_and_explains_a_missing_server(sim):
    ok, detail, fix = doctor_check(sim.adb)
    assert ok and f"{sim.serial} (device)" in detail and not fix
    sim.stop()
    ok, detail, fix = doctor_check(sim.adb, timeout=1.0)
    assert not ok and "no adb server answers" in detail and "android-sim" in fix


def test_compaction_keeps_what_matters_and_shrinks_the_dump(sim):
    sb = sandbox(sim)
    obs = sb.reset(task(SETTINGS))
    raw = sb._d.dump_hierarchy()
    assert len(raw) > 8 * len(obs.text)
    assert "Network & internet" in obs.text and "status_bar" not in obs.text  # systemui hidden
    lines = [n.line() for n in parse(obs.text)]
    assert lines == obs.text.splitlines()[1:]  # parse() reads back exactly what was rendered
    sb.close()


@pytest.mark.android_device
@pytest.mark.skipif(
    not os.environ.get("ANDROID_SERIAL"),
    reason="no real device: set ANDROID_SERIAL (and ANDROID_ADB_SERVER_PORT if not 5037)",
)
def test_same_scenario_on_a_real_device():  # pragma: no cover - needs hardware
    adb = f"{os.environ.get('ANDROID_ADB_SERVER_HOST', '127.0.0.1')}:{os.environ.get('ANDROID_ADB_SERVER_PORT', '5037')}"
    sb = AndroidSandbox(AndroidConfig(adb=adb, serial=os.environ["ANDROID_SERIAL"]))
    first = sb.reset(task(SETTINGS))
    assert json.loads(first.state_json)["package"] == SETTINGS
    row = next(n for n in parse(first.text) if "clickable" in n.flags and n.bounds[1] > 400)
    opened = sb.step(tool("tap", node=row.id))
    assert flags(opened)[0] is True
    back = sb.step(tool("press", key="back"))
    assert json.loads(back.state_json)["package"] == SETTINGS and flags(back)[0] is True
    label = next(n for n in parse(back.text) if not n.flags and n.text)
    assert flags(sb.step(tool("tap", node=label.id)))[0] is False
    sb.close()
