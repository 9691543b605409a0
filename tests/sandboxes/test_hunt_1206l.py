"""Hunt 1206l: the Android collector and the new user's path.

1. An Android replay started on the home screen, not in the recording's app (the task's
   `app`, `activity` and `clear_data` were neither recorded nor restored), and was kept as
   a success under the recording's instruction; a web replay started at the job's
   `start_url`, not the recording's page.
2. An `ANDROID_ADB_SERVER_PORT` that is no number broke `doctor` (a traceback), every
   Android attempt (a bare ValueError, `adb:` set or not) and the demo's android section.
3. `android-sim --port 70000` was a traceback; `--drop-after -3` was taken.
4. A task's `activity:` or `clear_data:` without `app:` was taken and ignored.
5. The Android simulation instruction spoke of a status bar and keyboards that
   observations leave out, and never of `wait`.
6. `demo --episodes` said it counted the explorer jobs' episodes; Android's ran 6 anyway.
7. The rendered action space said `any` for enum-only arguments and left out limits and
   the `tap` alternatives; the initial state listed our own helper app.

Real simulator, real CLI, real browser: no mocks of our code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.pipelines.prompt import action_space_text, builtin_instructions
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_actions import ACTION_SPACE
from worldtrace.sandboxes.android_sim import spawn
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.schemas import ShardWriter, Store, read_records
from worldtrace.schemas.actions import tool_call

ROOT = Path(__file__).resolve().parents[2]
NOTES = "com.example.notes"
PORT = "ANDROID_ADB_SERVER_PORT"


def notes_job(sim) -> dict:
    """The example's notes task (its app, cleared), against the test's simulator."""
    data = yaml.safe_load((ROOT / "examples" / "android-notes.yaml").read_text())
    data["sandbox"]["adb"] = sim.adb
    data["tasks"] = data["tasks"][:1]
    assert data["tasks"][0]["app"] == NOTES and data["tasks"][0]["clear_data"] is True
    return data


def replay_job(sim, prefix: str, **task) -> dict:
    return {
        "name": "again",
        "sandbox": {"kind": "android", "adb": sim.adb},
        "policy": "replay",
        "tasks": [{"id": "again", "replay": prefix, **task}],
    }


# -- 1: a replay starts where the recording did ----------------------------------------
def test_an_android_replay_starts_in_the_recordings_app(sim, store):
    [original] = run_job(JobSpec.from_dict(notes_job(sim)), store.raw).trajectories
    recorded = json.loads(original.environment.config)
    assert (recorded["app"], recorded["activity"], recorded["clear_data"]) == (NOTES, None, True)
    job = replay_job(sim, original.trajectory_id[:12])
    [again] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert again.outcome.status == "success"
    assert f"[{NOTES}/.MainActivity]" in again.system.initial_state  # not the launcher
    assert [t.observation.changed for t in again.turns] == [
        t.observation.changed for t in original.turns
    ]
    assert again.trajectory_id == original.trajectory_id  # same screens: same content id
    assert json.loads(again.environment.config)["app"] == NOTES


def test_a_record_without_the_task_keys_is_refused_unless_the_task_restates_them(
    sim, store, tmp_path
):
    """A trajectory collected before the keys were recorded: its replay is refused (not
    retried) naming what to restate, rather than recorded on the home screen."""
    [original] = run_job(JobSpec.from_dict(notes_job(sim)), store.raw).trajectories
    config = json.loads(original.environment.config)
    for key in ("app", "activity", "clear_data"):
        del config[key]
    old = dataclasses.replace(
        original,
        environment=dataclasses.replace(original.environment, config=json.dumps(config)),
    )
    older = Store.at(tmp_path / "older")
    with ShardWriter(older.raw / "collect" / "old") as w:
        w.write([old])
    prefix = original.trajectory_id[:12]
    [refused] = run_job(JobSpec.from_dict(replay_job(sim, prefix)), older.raw).trajectories
    assert refused.outcome.status == "error" and not refused.turns, refused.outcome
    assert refused.outcome.error.startswith(
        f"SandboxConfigError: replay of {original.trajectory_id}: its record does not say "
        "the task's app, activity, clear_data"
    ), refused.outcome.error
    assert f"(its first screen: [{NOTES}/.MainActivity]" in refused.outcome.error
    restated = replay_job(sim, prefix, app=NOTES, clear_data=True)
    [again] = run_job(JobSpec.from_dict(restated), older.raw).trajectories
    assert again.trajectory_id == original.trajectory_id


@pytest.mark.browser
def test_a_web_replay_starts_at_the_recordings_page(store, tmp_path):
    from worldtrace.sandboxes.web_sites import start_docs_site

    for name, title, link in (("index.html", "Home", "b.html"), ("b.html", "Bee", "index.html")):
        html = f"<html><title>{title}</title><body><a href='{link}'>to {link}</a></body></html>"
        (tmp_path / name).write_text(html)
    site = start_docs_site(tmp_path)
    try:
        sandbox = {"kind": "web", "start_url": site.url + "index.html"}
        job = {"name": "w", "sandbox": sandbox, "tasks": [{
            "id": "t", "instruction": "Go home from Bee.", "url": site.url + "b.html",
            "actions": [{"tool": "click", "arguments": {"bid": "4"}},
                        {"tool": "go_back", "arguments": {}}]}]}  # fmt: skip
        [original] = run_job(JobSpec.from_dict(job), store.raw).trajectories
        assert "Title: Bee" in original.system.initial_state
        replay = {"name": "again", "sandbox": sandbox, "policy": "replay",
                  "tasks": [{"id": "again", "replay": original.trajectory_id[:12]}]}  # fmt: skip
        [again] = run_job(JobSpec.from_dict(replay), store.raw).trajectories
    finally:
        site.stop()
    assert again.environment.url == site.url + "b.html"
    assert again.trajectory_id == original.trajectory_id


# -- 2: ANDROID_ADB_SERVER_PORT that is no number ---------------------------------------
@pytest.mark.parametrize("value", ["127.0.0.1:15037", "abc", "15037x"])
def test_doctor_says_in_one_line_what_the_port_variable_must_be(value):
    """A fresh interpreter: adbutils reads the variable when it is imported."""
    code = "from worldtrace.doctor import android_devices; print(android_devices().detail)"
    env = {**os.environ, PORT: value}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == (
        f"{PORT}={value!r} is not a port number: it must be the adb server's port alone, "
        "1-65535 (e.g. 5037; the host goes in ANDROID_ADB_SERVER_HOST)\n"
    )


def test_collect_with_its_adb_is_not_broken_by_the_port_variable(sim, wt_env, tmp_path):
    job = notes_job(sim)
    job["tasks"][0]["actions"] = job["tasks"][0]["actions"][:2]
    f = tmp_path / "notes.yaml"
    f.write_text(yaml.safe_dump(job))
    r = subprocess.run(["worldtrace", "collect", str(f)], capture_output=True, text=True,
                       env={**wt_env, PORT: "127.0.0.1:15037"}, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    assert t.outcome.status == "success" and len(t.turns) == 2, t.outcome


def test_the_simulator_with_its_jar_starts_with_the_port_variable_set(monkeypatch):
    monkeypatch.setenv(PORT, "abc")
    s = spawn(["--preinstall-u2"])  # its jar comes from uiautomator2, which imports adbutils
    s.stop()


def test_the_demo_s_android_section_starts_with_the_port_variable_set():
    code = (
        "import tempfile; from pathlib import Path; from worldtrace.demo import SECTIONS\n"
        "[android] = [s for s in SECTIONS if s.name == 'android']\n"
        "jobs, stop = android.start(Path(tempfile.mkdtemp()), 1); stop(); print(len(jobs))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, PORT: "abc"}, timeout=60)  # fmt: skip
    assert r.returncode == 0 and r.stdout == "2\n", r.stderr


# -- 3: android-sim's numbers ---------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "70000"], "Invalid value for '--port': 70000 is not in the range 0<=x<=65535."),
        (["--port", "-1"], "Invalid value for '--port': -1 is not in the range 0<=x<=65535."),
        (["--port", "0", "--drop-after", "-3"], "Invalid value for '--drop-after': -3 is not in the range x>=1."),
        (["--port", "0", "--offline-after", "0"], "Invalid value for '--offline-after': 0 is not in the range x>=1."),
    ],
)  # fmt: skip
def test_android_sim_refuses_numbers_out_of_range(wt_env, args, said):
    r = subprocess.run(["worldtrace", "android-sim", *args], capture_output=True, text=True,
                       env=wt_env, timeout=20)  # fmt: skip
    assert r.returncode == 2 and r.stderr.endswith(f"Error: {said}\n"), r.stderr
    assert "Traceback" not in r.stderr


# -- 4: activity or clear_data without app ----------------------------------------------
@pytest.mark.parametrize(
    ("key", "value", "why"),
    [("activity", ".EditorActivity", "it starts app/activity"), ("clear_data", "true", "it clears its data")],
)  # fmt: skip
def test_a_task_key_that_needs_the_app_is_refused_without_it(wt_env, tmp_path, key, value, why):
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: noapp\nsandbox: {kind: android, adb: '127.0.0.1:15037'}\npolicy: scripted\n"
        "tasks:\n  - id: t\n    instruction: x\n"
        f"    {key}: {value}\n"
        "    actions: [{tool: wait, arguments: {seconds: 0}}]\n"
    )
    r = subprocess.run(["worldtrace", "jobs", "submit", "--dry-run", str(f)],
                       capture_output=True, text=True, env=wt_env, timeout=60)  # fmt: skip
    assert r.returncode == 1, r.stdout
    assert r.stderr.endswith(
        f"job.yaml:7: tasks[0].{key}: needs the task's app ({why}); without one the episode "
        f"starts from the home screen: set app:, or leave {key} out\n"
    ), r.stderr
    f.write_text(f.read_text().replace(f"    {key}:", f"    app: {NOTES}\n    {key}:"))
    r = subprocess.run(["worldtrace", "jobs", "submit", "--dry-run", str(f)],
                       capture_output=True, text=True, env=wt_env, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_a_sandbox_given_such_a_task_in_python_refuses_it():
    sb = AndroidSandbox(AndroidConfig(adb="127.0.0.1:1"))
    with pytest.raises(SandboxConfigError, match="activity or clear_data needs its app"):
        sb.reset(TaskSpec("t", params=AndroidTask(clear_data=True)))


# -- 5: the simulation instruction says what observations hold ------------------------------
def test_the_android_instruction_matches_the_observations(sim):
    text = builtin_instructions()["android"]
    sb = AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial))
    try:
        sb.reset(TaskSpec("t", params=AndroidTask(app=NOTES, clear_data=True)))
        sb.step(tool_call("tap", {"x": 934, "y": 2128}))  # New note
        screen = sb.step(tool_call("tap", {"x": 540, "y": 327})).text  # the title: keyboard up
        waited = sb.step(tool_call("wait", {"seconds": 0}))
    finally:
        sb.close()
    assert "keyboard: shown" in screen.splitlines()[0] and "keyboard: shown" in text
    assert "com.android.systemui" not in screen and "status bar time" not in text
    assert "status bar, the navigation bar and the keyboard's own keys" in text  # left out
    assert "keyboards) appear" not in text
    assert "or wait some seconds" in text and "as does a wait" in text
    assert waited.changed is False  # a wait on a settled screen leaves it as it is


# -- 6: demo --episodes says what it counts ------------------------------------------
def test_demo_help_says_which_jobs_episodes_counts(wt_env):
    r = subprocess.run(["worldtrace", "demo", "--help"], capture_output=True, text=True,
                       env=wt_env, timeout=60)  # fmt: skip
    said = " ".join(r.stdout.split())
    assert "Episodes per task of the MCP, search and web explorer jobs (the other jobs, " in said
    assert "android's explorer too, run a fixed number)" in said


# -- 7: the action space and the initial state ----------------------------------------
def test_the_action_space_states_types_limits_and_alternatives():
    text = action_space_text(json.dumps([t.to_dict() for t in ACTION_SPACE]))
    lines = text.splitlines()
    assert '- direction (string, required): one of "up", "down", "left", "right"' in lines
    assert '- key (string, required): one of "back", "home", "enter", "recent", "delete"' in lines
    assert "- seconds (number, required): 0 to 30" in lines
    assert "- duration (number): seconds (default 1); 0.5 to 10" in lines
    assert "- node (integer): id of the node to tap; at least 1" in lines
    assert text.split("\n\n")[0].endswith("\nRequired: node, or x and y.")  # tap
    assert "(any" not in text


def test_the_initial_state_leaves_our_helper_app_out(sim):
    sb = AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial))
    try:
        sb.reset(TaskSpec("t", params=AndroidTask(app=NOTES)))
        listed = sb._shell("list packages", ["pm", "list", "packages", "-3"])[0]
        initial = sb.describe()["initial_state"]
    finally:
        sb.close()
    assert "package:com.github.uiautomator" in listed  # the device has it (AdbKeyboard)
    assert f"Installed apps (third-party): {NOTES}\n" in initial
