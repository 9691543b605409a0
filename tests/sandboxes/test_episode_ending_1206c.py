"""An episode that ends on an environment failure is no success (hunt 1206l): an Android
explorer stops at a crash (`stop_on_failure`), a script may end on one; both said
`success`, and the demo's one Android "success" was an app crash."""

from __future__ import annotations

from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_view import parse
from worldtrace.sandboxes.base import TaskSpec

NOTES = "com.example.notes"


def node_id(screen: str, **match: str) -> int:
    [n] = [n for n in parse(screen) if all(getattr(n, k) == v for k, v in match.items())][:1]
    return n.id


def test_an_episode_that_ends_on_a_crash_is_a_failure_saying_so(sim, store):
    sb = AndroidSandbox(AndroidConfig(adb=sim.adb, serial=sim.serial))
    home = sb.reset(TaskSpec("t", "x", (), AndroidTask(app=NOTES)))
    more = node_id(home.text, desc="More options")
    menu = sb.step(tool("tap", node=more))
    sync = node_id(menu.text, text="Sync now")
    sb.close()
    sandbox = {"kind": "android", "adb": sim.adb, "serial": sim.serial}
    taps = [
        {"tool": "tap", "arguments": {"node": more}},
        {"tool": "tap", "arguments": {"node": sync}},
    ]
    job = {
        "name": "ends-on-crash",
        "sandbox": sandbox,
        "policy": "scripted",
        "retries": 2,
        "tasks": [
            {"id": "crash", "instruction": "Sync the notes.", "app": NOTES, "actions": taps},
            {"id": "menu", "instruction": "Open the menu.", "app": NOTES, "actions": taps[:1]},
        ],
    }
    result = run_job(JobSpec.from_dict(job), store.raw)
    by_task = {t.task.task_id: t for t in result.trajectories}
    crashed, fine = by_task["crash"], by_task["menu"]
    assert crashed.turns[-1].observation.env_failure == "app_crashed"
    assert crashed.outcome.status == "failure", crashed.outcome
    assert crashed.outcome.error == (
        "the episode ended on an environment failure: app_crashed (turn 2)"
    )
    assert len(result.trajectories) == 2  # the environment's answer: no retry of ours
    assert (fine.outcome.status, fine.outcome.error) == ("success", None)


def test_only_failures_an_episode_cannot_end_well_on_make_it_a_failure():
    """A page's own state a script may end on by design (a 404 it meant to reach) and a
    page guessed blank or a CAPTCHA stay the policy's end (review 1206c)."""
    from worldtrace.collectors.episode import ENDING_FAILURES, _ended_failed
    from worldtrace.schemas import Action, Observation, Turn

    def ending(failure):
        return _ended_failed(
            [Turn(0, Action("text", "go"), Observation("page", env_failure=failure))]
        )

    for failure in ("http_error:404", "http_error:503", "blank_page", "captcha", None):
        assert ending(failure) is None, failure
    for failure in ENDING_FAILURES:
        assert ending(failure) == (
            f"the episode ended on an environment failure: {failure} (turn 1)"
        ), failure
    assert {"app_crashed", "crashed", "device_offline"} <= set(ENDING_FAILURES)
