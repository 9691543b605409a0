"""Shared pieces of the benchmarks: run one task in a fresh process, format numbers.

Each `bench_*.py` module declares `TASKS` (functions run in their own process by
`python -m benchmarks.measure MODULE TASK ARGS...`, so each has its own peak memory) and
`run(ctx) -> list[Row]` (the rows it adds to the table). `benchmarks.run` collects them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
Row = tuple[str, str, str, str, str]
"""benchmark, worldtrace, baseline, ratio (baseline time / ours), notes."""


@dataclass
class Context:
    work: Path
    trajectories: int = 20000
    turns: int = 1_000_000
    quick: bool = False
    """Smaller sizes (for a smoke run of the harness)."""
    shared: dict = field(default_factory=dict)
    """Results one module leaves for a later one (e.g. the processed corpus)."""


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def measure_command(module: str, task: str, *args: str) -> list[str]:
    """The command that runs one task in a fresh process (`benchmarks.measure`)."""
    return [sys.executable, "-m", "benchmarks.measure", module, task, *args]


def measure(module: str, task: str, *args: str, env: dict | None = None) -> dict:
    out = subprocess.run(
        measure_command(module, task, *args),
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{module}.{task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(x: float, unit: str = "") -> str:
    return f"{x:,.1f}{unit}" if x >= 10 else f"{x:,.3g}{unit}"
