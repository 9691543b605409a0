"""Queued collection throughput: episodes per minute of `worldtrace worker` at concurrency
1, 2 and 4, side by side with a bare loop of `docker run` doing the same commands.
Prints one JSON line per concurrency.

Ours: a job of EPISODES episodes submitted to a SQLite job store, drained by a `Worker`
(claims with leases and heartbeats, the SWE sandbox on worldtrace/busybox with its warm
pool, a journaled turn per step, one published Parquet file per attempt). Baseline: the
same two commands per episode with `docker run --rm` and the same limits, from as many
threads as the worker's concurrency, recording nothing.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EPISODES = 12
COMMANDS = ["echo hello", "sleep 1"]
IMAGE = "worldtrace/busybox:latest"
LIMITS = ["--network", "none", "--memory", "512m", "--cpus", "1", "--pids-limit", "128"]


def _line(name: str, ours: float, baseline: float, unit: str, notes: str) -> None:
    ratio = ours / baseline if baseline else float("nan")
    print(json.dumps({"name": name, "ours": round(ours, 2), "baseline": round(baseline, 2),
                      "ratio": round(ratio, 3), "unit": unit, "notes": notes}), flush=True)  # fmt: skip


def ours(concurrency: int, episodes: int) -> float:
    from worldtrace.collectors.jobspec import JobSpec
    from worldtrace.collectors.jobstore_sql import SQLiteJobStore
    from worldtrace.collectors.worker import Worker, WorkerConfig

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "a.txt").write_text("hello\n")
        steps = [{"tool": "bash", "arguments": {"command": c}} for c in COMMANDS]
        spec = JobSpec.from_dict({
            "name": "bench", "episodes": episodes, "tasks": [{"id": "t", "actions": steps}],
            "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"image": IMAGE, "warm": concurrency}},
        })  # fmt: skip
        store = SQLiteJobStore(Path(tmp) / "jobs.db")
        store.submit(spec)
        start = time.perf_counter()
        stats = Worker(store, Path(tmp) / "raw", WorkerConfig(concurrency=concurrency)).run()
        seconds = time.perf_counter() - start
        assert stats.run == episodes and stats.failed == 0 and not stats.errors, stats
    return episodes / seconds * 60


def bare(concurrency: int, episodes: int) -> float:
    script = "; ".join(COMMANDS)

    def one(_: int) -> None:
        subprocess.run(
            ["docker", "run", "--rm", *LIMITS, IMAGE, "sh", "-c", script],
            check=True, capture_output=True,
        )  # fmt: skip

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(episodes)))
    return episodes / (time.perf_counter() - start) * 60


def main(episodes: int = EPISODES) -> None:
    for c in (1, 2, 4):
        _line(
            f"concurrency_{c}",
            ours(c, episodes),
            bare(c, episodes),
            "episodes/min",
            f"{episodes} episodes of `{'; '.join(COMMANDS)}` on {IMAGE}: worker (SQLite store, "
            f"leases, journal, one Parquet file per attempt) vs `docker run --rm` from {c} thread(s)",
        )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("episodes", type=int, nargs="?", default=EPISODES, help="episodes per run")
    main(ap.parse_args().episodes)
