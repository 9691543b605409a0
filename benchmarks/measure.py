"""One measurement per process: `python -m benchmarks.measure MODULE TASK ARGS...` prints JSON."""

from __future__ import annotations

import importlib
import json
import logging

if __name__ == "__main__":
    import argparse
    from pathlib import Path

    modules = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("module", choices=modules)
    ap.add_argument("task", help="one of the module's TASKS")
    ap.add_argument("args", nargs="*", help="the task's arguments")
    a = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    tasks = getattr(importlib.import_module(f"benchmarks.{a.module}"), "TASKS", {})
    if a.task not in tasks:
        ap.error(f"{a.module} has no task {a.task!r} (its tasks: {', '.join(tasks) or 'none'})")
    print(json.dumps(tasks[a.task](*a.args)))
