"""Benchmarks measured side by side in one run; writes a markdown table of ratios.

Each area's benchmarks live in `benchmarks/bench_<area>.py` (TASKS run in fresh
processes, `run(ctx)` returns table rows); this collects every such module in order.
Baselines: the floor (pyarrow read+write, tokenizers.encode_batch alone, DuckDB on the
files, a bare `docker exec` loop) and the peer a user would otherwise use (datatrove).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shutil
import time
from pathlib import Path

from .common import Context

FIRST = ["bench_process", "bench_export"]
"""Modules that others depend on (export reads the processed corpus) run first."""


def modules() -> list[str]:
    found = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    return [m for m in FIRST if m in found] + [m for m in found if m not in FIRST]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", default="bench-results.md")
    ap.add_argument("--trajectories", type=int, default=20000)
    ap.add_argument("--turns", type=int, default=1_000_000)
    ap.add_argument("--work", default="/tmp/worldtrace-bench")
    ap.add_argument("--only", nargs="*", help="module names (bench_process ...)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: check the harness")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ctx = Context(work, args.trajectories, args.turns, args.quick)
    rows = []
    for name in modules():
        if args.only and name not in args.only:
            continue
        started = time.perf_counter()
        rows += importlib.import_module(f"benchmarks.{name}").run(ctx)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    lines = [
        "# worldtrace benchmarks",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        "Ratio = baseline time / our time (> 1: we are faster).",
        "",
        "| benchmark | worldtrace | baseline | ratio | notes |",
        "|---|---|---|---|---|",
        *[f"| {' | '.join(r)} |" for r in rows],
        "",
    ]
    Path(args.output).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
