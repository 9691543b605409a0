"""A press or tap that names neither a node nor a point (hunt 1205g): `long_press` with
only `duration` passed the schema (`minProperties: 1`) and failed every attempt with
a bare `KeyError: 'x'`, the agent's turns lost. The schema now wants a node or x and y:
a job file with such an action is refused, an agent's is its error (the step checks
arguments against the schema), an observation."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec
from worldtrace.schemas.parsing import ConfigError

from .test_android_hunt_1204e import NOTES, sandbox, task


@pytest.mark.parametrize("action", [("long_press", {"duration": 2}), ("tap", {})])
def test_a_job_file_without_a_target_is_refused(action):
    name, arguments = action
    with pytest.raises(ConfigError) as e:
        JobSpec.from_dict(
            {
                "name": "lp",
                "sandbox": {"kind": "android"},
                "tasks": [{"id": "t", "actions": [{"tool": name, "arguments": arguments}]}],
            }
        )
    assert "tasks[0].actions[0].arguments" in str(e.value)


def test_an_agents_press_without_a_target_is_its_error(sim):
    sb = sandbox(sim)
    try:
        sb.reset(task(NOTES, clear_data=True))
        obs = sb.step(tool("long_press", duration=2))
        assert obs.is_error and not obs.changed and obs.env_failure is None
        assert obs.text.startswith("error: long_press: {'duration': 2} is not valid")
        assert not sb.step(tool("tap", x=934, y=2128)).is_error  # the episode goes on
    finally:
        sb.close()


def test_doctor_lists_the_devices_of_the_adb_server(sim, wt_env):
    """docs/android.md said `worldtrace doctor` lists them; it never called the check."""
    host, port = sim.adb.rsplit(":", 1)
    env = {**wt_env, "ANDROID_ADB_SERVER_HOST": host, "ANDROID_ADB_SERVER_PORT": port}
    r = subprocess.run(
        ["worldtrace", "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "android devices"]
    assert check == {
        "name": "android devices",
        "ok": True,
        "detail": f"adb server at {sim.adb}: {sim.serial} (device)",
        "fix": "",
        "problem": False,
    }
