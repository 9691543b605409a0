"""Benchmarks measured side by side in one run; writes a markdown table of ratios.

Each measurement runs in a fresh subprocess (`benchmarks.measure`) so that its peak
memory is its own. Baselines: the floor (pyarrow read+write, tokenizers.encode_batch
alone, DuckDB on the files directly, a bare `docker exec` loop, a cold container
start) and the peer a user would otherwise use (datatrove's MinHash stages).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENV = ROOT / ".venv-bench"


def measure(task: str, *args: str, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.measure", task, *args],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def datatrove_venv() -> Path | None:
    """datatrove lives in its own venv: it is the peer, not a dependency."""
    py = BENCH_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    r = subprocess.run(
        [str(py), "-c", "import datatrove, regex, tokenizers, xxhash, orjson"], capture_output=True
    )
    if r.returncode != 0:
        r = subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "-q",
                "datatrove",
                "regex",
                "xxhash<4",
                "tokenizers",
                "orjson",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            print(f"datatrove unavailable: {r.stderr[-500:]}", file=sys.stderr)
            return None
    return py


def run_datatrove(py: Path, text_dir: Path, work: Path, tasks: int) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    start = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/env", "time", "-f", "%M", str(py), str(ROOT / "benchmarks" / "datatrove_minhash.py"), str(text_dir), str(work), str(tasks)],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    peak_kb = (
        int(out.stderr.strip().splitlines()[-1])
        if out.stderr.strip().splitlines()[-1].isdigit()
        else 0
    )
    return {"seconds": res["seconds"], "wall": wall, "peak_mb": peak_kb / 1024}


def fmt(x: float, unit: str = "") -> str:
    return f"{x:,.1f}{unit}" if x >= 10 else f"{x:,.3g}{unit}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", default="bench-results.md")
    ap.add_argument("--trajectories", type=int, default=20000)
    ap.add_argument("--turns", type=int, default=1_000_000)
    ap.add_argument("--work", default="/tmp/worldtrace-bench")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows: list[tuple[str, str, str, str, str]] = []

    # -- pipeline -------------------------------------------------------------------
    corpus = measure("make-corpus", str(work), str(args.trajectories))
    n, mb = corpus["trajectories"], corpus["raw_mb"]
    ours = measure("process", str(work))
    floor = measure("pyarrow-floor", str(work))
    rows.append(("process: whole pipeline vs pyarrow read+write floor", f"{fmt(n / ours['seconds'])} traj/s, {fmt(mb / ours['seconds'])} MB/s, peak {fmt(ours['peak_mb'])} MB",
                 f"{fmt(n / floor['seconds'])} traj/s, {fmt(mb / floor['seconds'])} MB/s, peak {fmt(floor['peak_mb'])} MB",
                 f"{floor['seconds'] / ours['seconds']:.3f}", f"{n} trajectories, {fmt(mb)} MB zstd Parquet; {ours['kept']} kept, {ours['duplicates']} duplicates"))  # fmt: skip
    py = datatrove_venv()
    if py:
        dt = run_datatrove(py, work / "text", work / "datatrove", os.cpu_count() or 2)
        dd = measure("dedup-only", str(work))
        rows.append(("dedup: worldtrace read + exact/near dedup (Beam) vs datatrove MinHash (4 stages)", f"{fmt(dd['seconds'])} s, peak {fmt(dd['peak_mb'])} MB", f"{fmt(dt['seconds'])} s, peak {fmt(dt['peak_mb'])} MB",
                     f"{dt['seconds'] / dd['seconds']:.3f}", "same corpus (Parquet for us, rendered text JSONL for datatrove), same 5-gram 9x13 LSH, 2 workers each"))  # fmt: skip
        rows.append(("dedup: whole worldtrace pipeline vs datatrove MinHash (4 stages)", f"{fmt(ours['seconds'])} s", f"{fmt(dt['seconds'])} s",
                     f"{dt['seconds'] / ours['seconds']:.3f}", "ours also validates, filters, scores, masks and writes 4 tables"))  # fmt: skip
    else:
        rows.append(
            ("dedup vs datatrove", "-", "unavailable", "-", "datatrove could not be installed")
        )

    # -- export ---------------------------------------------------------------------
    ex = measure("export", str(work))
    enc = measure("encode-floor", str(work))
    rows.append(("export: tokens/s vs tokenizers.encode_batch alone", f"{fmt(ex['tokens'] / ex['seconds'])} tok/s", f"{fmt(enc['tokens'] / enc['seconds'])} tok/s",
                 f"{enc['seconds'] / ex['seconds']:.3f}", f"{ex['tokens']:,} tokens; ours renders, masks, writes Parquet + manifest"))  # fmt: skip

    # -- query ----------------------------------------------------------------------
    q = measure("query", str(work), str(args.turns))
    rows.append((f"query: category shares over {args.turns:,} turns via views vs DuckDB on the files", f"{fmt(q['ours_ms'])} ms", f"{fmt(q['floor_ms'])} ms",
                 f"{q['floor_ms'] / q['ours_ms']:.3f}", "median of 5; includes opening the views"))  # fmt: skip

    # -- collectors -----------------------------------------------------------------
    try:
        c = measure("collect", str(work))
        rows.append(("collect: recorder steps/s vs bare docker exec loop", f"{fmt(c['ours_steps_s'])} steps/s", f"{fmt(c['bare_steps_s'])} steps/s",
                     f"{c['ours_steps_s'] / c['bare_steps_s']:.3f}", f"{c['steps']} one-shot bash steps (SWE tool) with journaling"))  # fmt: skip
        rows.append(("collect: terminal pty steps/s vs bare docker exec loop", f"{fmt(c['pty_steps_s'])} steps/s", f"{fmt(c['bare_steps_s'])} steps/s",
                     f"{c['pty_steps_s'] / c['bare_steps_s']:.3f}", "persistent shell: one keystroke round trip per step"))  # fmt: skip
        rows.append(("collect: episode reset (warm pool) vs cold container start", f"{fmt(c['warm_reset_ms'])} ms", f"{fmt(c['cold_reset_ms'])} ms",
                     f"{c['cold_reset_ms'] / c['warm_reset_ms']:.3f}", "median of 5; both open the terminal shell"))  # fmt: skip
    except RuntimeError as exc:
        rows.append(("collect", "-", "-", "-", f"docker unavailable: {str(exc)[-200:]}"))

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
