"""Android collector speed against the device simulator, side by side with a bare
uiautomator2 loop on the same simulator; and the observation size before and after
compaction. Prints one JSON line per measurement.

Ours: `run_job` with a scripted policy (each step: the action, dumps until two agree,
one shell for package/activity/keyboard, compaction, the journaled turn). Baseline:
the same actions with `uiautomator2` directly and one `dump_hierarchy` per step (what
a minimal script does, with no settling, no app state, no recording).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

STEPS = 60
ACTIONS = [("tap", {"x": 540, "y": 630}), ("press", {"key": "back"})]
"""Settings: open `Network & internet`, come back; every step changes the screen."""


def _line(name: str, ours: float, baseline: float, unit: str, notes: str) -> None:
    ratio = ours / baseline if baseline else float("nan")
    print(json.dumps({"name": name, "ours": round(ours, 2), "baseline": round(baseline, 2),
                      "ratio": round(ratio, 3), "unit": unit, "notes": notes}), flush=True)  # fmt: skip


def _collector_steps_per_s(adb: str, serial: str, stable_dumps: int) -> float:
    from worldtrace.collectors.jobs import JobSpec, run_job

    actions = [{"tool": t, "arguments": a} for t, a in (ACTIONS * STEPS)[:STEPS]]
    job = {"name": "bench", "max_turns": STEPS + 1, "sandbox": {"kind": "android", "adb": adb, "serial": serial, "stable_dumps": stable_dumps},
           "tasks": [{"id": "steps", "app": "com.android.settings", "actions": actions}]}  # fmt: skip
    with tempfile.TemporaryDirectory() as raw:
        [t] = run_job(JobSpec.from_dict(job), raw).trajectories
    assert t.outcome.status == "success" and len(t.turns) == STEPS, t.outcome
    return STEPS / (t.ended_at - t.turns[0].started_at).total_seconds()


def _bare_steps_per_s(d) -> float:
    d.app_start("com.android.settings", stop=True)
    start = time.perf_counter()
    for name, args in (ACTIONS * STEPS)[:STEPS]:
        if name == "tap":
            d.click(args["x"], args["y"])
        else:
            d.press(args["key"])
        d.dump_hierarchy()
    return STEPS / (time.perf_counter() - start)


def _sizes(adb: str, serial: str, d) -> tuple[float, float, int]:
    """Mean raw dump and observation sizes (chars) over the screens of explorer episodes."""
    from worldtrace.collectors.policies import History
    from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
    from worldtrace.sandboxes.android_explorer import AndroidExplorer, ExplorerConfig
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.schemas import Turn

    raw, compact = [], []
    sb = AndroidSandbox(AndroidConfig(adb=adb, serial=serial))
    for seed, app in enumerate(
        ["com.android.settings", "com.example.notes", "com.google.android.calculator"] * 2
    ):
        obs = sb.reset(TaskSpec("size", "", (), AndroidTask(app=app, clear_data=True)))
        h = History("", obs, [])
        policy = AndroidExplorer(ExplorerConfig(steps=10), seed)
        while True:
            raw.append(len(d.dump_hierarchy()))
            compact.append(len(obs.text))
            action = policy.act(h)
            if action is None:
                break
            obs = sb.step(action)
            h.turns.append(Turn(len(h.turns), action, obs))
    sb.close()
    return statistics.mean(raw), statistics.mean(compact), len(raw)


def main() -> None:
    from worldtrace.sandboxes.android_device import client  # first: it imports adbutils

    # isort: split
    import uiautomator2
    from worldtrace.sandboxes.android_sim import start, u2_jar

    with start(u2_jar=u2_jar()) as sim:
        d = uiautomator2.connect(client(sim.adb, 30.0).device(sim.serial))
        bare = _bare_steps_per_s(d)
        ours = _collector_steps_per_s(sim.adb, sim.serial, 2)
        one = _collector_steps_per_s(sim.adb, sim.serial, 1)
        raw, compact, screens = _sizes(sim.adb, sim.serial, d)
    _line("collector steps/s vs bare uiautomator2 loop", ours, bare, "steps/s",
          f"{STEPS} steps on the simulator; ours: 2 stable dumps + app state + compaction + journal; bare: action + 1 dump")  # fmt: skip
    _line("collector with stable_dumps=1 vs bare uiautomator2 loop", one, bare, "steps/s",
          "one dump per step, as the bare loop")  # fmt: skip
    _line("observation chars, compacted vs raw dump", compact, raw, "chars",
          f"mean over {screens} screens of explorer episodes in Settings, Notes, Calculator")  # fmt: skip


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    sys.exit(main())
