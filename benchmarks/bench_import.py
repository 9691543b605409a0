"""Import speed: `worldtrace import` vs `worldtrace process` on the same trajectories.

`python -m benchmarks.bench_import [--records N] [--work DIR]` generates N OpenAI-format
chat logs with tool calls (shaped like tau-bench runs: a long system prompt, 4-12 tool
calls whose ids repeat, JSON results, chat turns between them), imports them, processes
the imported raw shards, and re-imports the same file (everything already present).
One JSON line per measurement: {"name", "ours", "baseline", "ratio", "unit", "notes"};
ratio = ours / baseline (above 1: import is faster per trajectory). Both are timed
through their library calls, each with its default worker processes, so start-up
(Beam's import) is not counted; CPU seconds (self + children) are reported beside wall
time because the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

TOOLS = ("get_user_details", "get_reservation_details", "calculate", "search_flights")


def record(i: int, rng: random.Random) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "# Airline Agent Policy\n" + "Follow the policy. " * 80},
        {"role": "user", "content": f"Hi, I want to change reservation R{i}."},
    ]
    for k in range(rng.randint(4, 12)):
        cid = f"call_{rng.randint(0, 3)}"  # reused ids, as in real logs
        name = rng.choice(TOOLS)
        args = {"user_id": f"user_{i}", "step": k, "q": "x" * rng.randint(5, 40)}
        call = {
            "id": cid,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        flights = [
            {
                "flight": f"HAT{rng.randint(100, 999)}",
                "date": f"2024-05-2{j}",
                "price": rng.randint(50, 900),
            }
            for j in range(rng.randint(1, 6))
        ]
        result = {"reservation_id": f"R{i}", "flights": flights, "step": k}
        msgs.append(
            {"role": "tool", "tool_call_id": cid, "name": name, "content": json.dumps(result)}
        )
        if rng.random() < 0.4:
            msgs.append({"role": "assistant", "content": "Found: " + "ok " * rng.randint(5, 40)})
            msgs.append({"role": "user", "content": "Go on " + "please " * rng.randint(1, 10)})
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in TOOLS
    ]
    return {"id": f"conv-{i}", "messages": msgs, "tools": tools}


def write_corpus(path: Path, n: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps(record(i, rng)) + "\n")
    return path.stat().st_size


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn) -> tuple[Any, float, float]:
    cpu, wall = _cpu(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - wall, _cpu() - cpu


def line(name: str, ours: float, baseline: float, unit: str, notes: str) -> None:
    print(
        json.dumps(
            {
                "name": name,
                "ours": round(ours, 1),
                "baseline": round(baseline, 1),
                "ratio": round(ours / baseline, 3) if baseline else None,
                "unit": unit,
                "notes": notes,
            }
        ),
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--work", default=None, help="Work directory (a temp dir by default).")
    args = ap.parse_args(argv)

    from worldtrace.collectors.importers import import_paths
    from worldtrace.pipelines.process import ProcessConfig, run

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-import-"))
    try:
        data = work / "openai.jsonl"
        size = write_corpus(data, args.records)
        raw = work / "raw" / "import"
        rep, imp_wall, imp_cpu = timed(lambda: import_paths([data], raw))
        n = sum(rep.imported.values())
        assert n == args.records and not rep.errors, (rep.imported, rep.errors)
        cfg = ProcessConfig(inputs=[str(raw)], output=str(work / "processed"))
        acc, proc_wall, proc_cpu = timed(lambda: run(cfg))
        again, re_wall, _ = timed(lambda: import_paths([data], raw))
        assert sum(again.present.values()) == n and not again.imported
        notes = (
            f"{n} OpenAI records, {size / 1e6:.1f} MB JSONL; process kept "
            f"{acc['accounting']['kept']}; each with its default workers (import "
            f"{rep.workers})"
        )
        line(
            "import vs process: trajectories/s (wall)", n / imp_wall, n / proc_wall, "traj/s", notes
        )
        line(
            "import vs process: trajectories/s (CPU s)", n / imp_cpu, n / proc_cpu, "traj/s", notes
        )
        line(
            "re-import (all already present) vs first import (wall)",
            n / re_wall,
            n / imp_wall,
            "traj/s",
            "idempotent re-import: converts every record to find its id, skips validation, "
            "writes nothing",
        )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
