"""Where one `process` run's wall time goes: `python -m benchmarks.timeline WORK [WORKERS]`
processes WORK/raw into WORK/processed (a rebuild; `python -m benchmarks.measure
bench_process make-corpus WORK N` makes such a corpus) and prints, in order, the
runner's set-up, each stage the runner fused (its transforms' labels) and the steps
around the pipeline, with when each started and how long it took.

The fixed cost of a run with workers is mostly per stage (docs/benchmarks.md), so the
stage list is what to read first. Timing wraps Beam's own methods in this process only
(`FnApiRunner._execute_bundle` and neighbours): a development tool, not part of a run.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from typing import Any

STEPS = ("plan_run", "merge_state", "complete_tables", "journalled_publish", "accounting")
"""`pipelines.process` functions timed around the pipeline."""


def stage_label(name: str, width: int = 90) -> str:
    """A fused stage's name (nested `(a)+(b)`) as the labels of its transforms."""
    parts = re.findall(
        r"ref_AppliedPTransform_([A-Za-z0-9_-]+?)_\d+\)|\(([A-Za-z/]+)/(?:Read|Write)", name
    )
    labels = [re.sub(r"^Process[-/]", "", a or b) for a, b in parts]
    text = " + ".join(dict.fromkeys(labels)) or name
    return text if len(text) <= width else text[: width - 3] + "..."


def timeline(work: str, workers: int = 2) -> tuple[list[tuple[float, float, str]], float]:
    """(start s, duration s, label) of each timed step of one run, and the run's seconds."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
    from worldtrace.pipelines import process as P

    marks: list[tuple[float, float, str]] = []  # (perf_counter at start, seconds, label)
    undo: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str | None = None) -> None:
        real = getattr(owner, name)

        @functools.wraps(real)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                what = label or name
                if name == "_execute_bundle":
                    what = "stage: " + stage_label(args[2].stage.name)
                marks.append((start, time.perf_counter() - start, what))

        undo.append((owner, name, real))
        setattr(owner, name, timed)

    wrap(fn_runner.FnApiRunner, "_execute_bundle")
    wrap(fn_runner.FnApiRunner, "run_pipeline", "run_pipeline (all stages)")
    wrap(worker_handlers.WorkerHandlerManager, "close_all", "stop the workers")
    for step in STEPS:
        wrap(P, step)
    try:
        origin = time.perf_counter()
        P.run(
            P.ProcessConfig(
                inputs=[f"{work}/raw"], output=f"{work}/processed", workers=workers, rebuild=True
            )
        )
        total = time.perf_counter() - origin
    finally:
        for owner, name, real in reversed(undo):
            setattr(owner, name, real)
    return sorted((start - origin, seconds, what) for start, seconds, what in marks), total


def main(argv: list[str]) -> None:
    marks, total = timeline(argv[0], int(argv[1]) if len(argv) > 1 else 2)
    for start, seconds, label in marks:
        print(f"{start:8.3f} s {seconds * 1000:9.1f} ms  {label}")
    stages = [m for m in marks if m[2].startswith("stage: ")]
    print(f"{len(stages)} stages; run {total:.3f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
