"""Benchmarks measured side by side in one run; writes a markdown table of ratios.

Each area's benchmarks live in `benchmarks/bench_<area>.py`. A module either has
`run(ctx)` returning table rows (its TASKS run in fresh processes), or is standalone:
`python -m benchmarks.bench_<area>` prints one JSON line per measurement (`name`,
`ours`, `baseline`, `ratio`, `unit`, `notes`), run here in a fresh process with the
arguments of `STANDALONE_ARGS`. This collects every module in order.
Baselines: the floor (pyarrow read+write, tokenizers.encode_batch alone, DuckDB on the
files, a bare `docker exec` loop) and the peer a user would otherwise use (datatrove).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .common import ROOT, Context, Row

STANDALONE_ARGS = {
    "bench_export": ["--trajectories", "12000"],
    "bench_import": ["--records", "3000"],
    "bench_redact": ["--synthetic", "3000", "--episodes", "5"],
    "bench_collect_jobs": ["12"],
}
"""Arguments of standalone modules in a full run (`--quick` passes none but these)."""
QUICK_ARGS = {
    "bench_export": ["--trajectories", "600", "--memory-trajectories", "200"],
    "bench_import": ["--records", "300"],
    "bench_redact": ["--synthetic", "300", "--episodes", "1"],
    "bench_collect_jobs": ["4"],
    "bench_mcp": ["--calls", "50", "--rounds", "1"],
    "bench_web": ["--rounds", "1", "--repeats", "1"],
}

ROW_KEYS = {"name", "ours", "baseline", "ratio"}
"""What every JSON line of a standalone module carries."""
FIRST = ["bench_process", "bench_export"]
"""Modules that others depend on (export reads the processed corpus) run first."""


def modules() -> list[str]:
    found = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    return [m for m in FIRST if m in found] + [m for m in found if m not in FIRST]


def standalone(name: str, argv: list[str]) -> list[Row]:
    """Rows of a module that prints JSON lines (a failed module is a row saying so)."""
    out = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *argv],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    rows: list[Row] = []
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            m = json.loads(line)
        except ValueError:
            m = None
        if not isinstance(m, dict) or not m.keys() >= ROW_KEYS:
            rows.append((f"{name}: unreadable line", "-", "-", "-", line[:200]))
            continue
        unit = f" {m['unit']}" if m.get("unit") else ""
        rows.append(
            (f"{name.removeprefix('bench_')}: {m['name']}", f"{m['ours']:,}{unit}",
             f"{m['baseline']:,}{unit}", f"{m['ratio']:.3f}", m.get("notes", ""))
        )  # fmt: skip
    if out.returncode != 0:
        rows.append((f"{name}: failed", "-", "-", "-", out.stderr.strip().splitlines()[-1][:200]))
    return rows


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
        module = importlib.import_module(f"benchmarks.{name}")
        try:
            if hasattr(module, "run"):
                rows += module.run(ctx)
            else:
                rows += standalone(
                    name, (QUICK_ARGS if args.quick else STANDALONE_ARGS).get(name, [])
                )
        except Exception as exc:  # one broken module must not lose the others' rows
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            rows.append((f"{name}: failed", "-", "-", "-", last[:200]))
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
