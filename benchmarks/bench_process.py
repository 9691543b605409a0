"""Process: the whole pipeline against datatrove's MinHash stages; scaling, workers,
incremental runs and pass-1 memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from .common import ROOT, Context, Row, fmt, measure, measure_command, peak_mb

BENCH_VENV = ROOT / ".venv-bench"


def make_corpus(work: str, n: str, hold_out: str = "0") -> dict:
    """n trajectories as raw shards (and as text JSONL for datatrove); the last `hold_out`
    collected go to raw-new/ (the increment of the incremental benchmark: a collector's
    next batch, with near-duplicates and exact copies of earlier records among it)."""
    from worldtrace.collectors.synthetic import near_duplicate_corpus
    from worldtrace.schemas import ShardWriter

    total = int(n)
    groups = total // 40
    data, _ = near_duplicate_corpus(
        total - groups * 2 - total // 100, groups, 3, seed=42, exact_copies=total // 100
    )
    w = Path(work)
    held = int(hold_out)
    with ShardWriter(w / "raw", target_bytes=8 << 20, row_group_rows=1024) as sw:
        sw.write(data[: len(data) - held])
    if held:
        with ShardWriter(w / "raw-new", row_group_rows=1024) as nw:
            nw.write(data[len(data) - held :])
    text = w / "text"
    text.mkdir()
    per = (len(data) + 3) // 4
    for k in range(4):
        with open(text / f"part-{k}.jsonl", "w") as fh:
            for t in data[k * per : (k + 1) * per]:
                body = "\n".join(f"{x.action.text}\n{x.observation.text}" for x in t.turns)
                fh.write(
                    json.dumps({"id": f"{t.trajectory_id}-{t.source.episode_id}", "text": body})
                    + "\n"
                )
    mb = sum(p.stat().st_size for p in sw.paths) / 1e6
    return {"trajectories": len(data), "raw_mb": mb, "shards": len(sw.paths)}


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the worker processes)."""
    import resource

    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def process(work: str, workers: str = "2", rebuild: str = "1") -> dict:
    """`workers` 0: the CLI's default (`process.auto_workers`: in-process for the
    incremental bench's small increment)."""
    from worldtrace.pipelines.process import ProcessConfig, run

    load = os.getloadavg()[0]
    cpu = cpu_seconds()
    start = time.perf_counter()
    m = run(
        ProcessConfig(
            inputs=[f"{work}/raw"],
            output=f"{work}/processed",
            workers=int(workers),
            rebuild=rebuild == "1",
        )
    )
    return {
        "seconds": time.perf_counter() - start,
        "cpu_s": cpu_seconds() - cpu,
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "peak_mb": peak_mb(),
        "kept": m["accounting"]["kept"],
        "duplicates": m["accounting"]["duplicates"],
        "read": m["counters"]["read"],
        "rewritten": m["counters"].get("segments.rewritten", 0),
        "rewritten_clusters": m["counters"].get("segments.rewritten_clusters", 0),
        "earlier": m["counters"].get("dedup.earlier", 0),
    }


def pyarrow_floor(work: str) -> dict:
    import pyarrow.parquet as pq
    from worldtrace.schemas.store import shard_files

    out = Path(work) / "floor"
    out.mkdir(exist_ok=True)
    start = time.perf_counter()
    for f in shard_files(f"{work}/raw"):
        pq.write_table(pq.read_table(f), out / f.name, compression="zstd")
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_mb()}


def pass1_units(work: str, units: str = "8") -> dict:
    """Pass 1's own work (`units.process_unit`) on `units` units of the corpus, in this
    one process: the CPU-bound core of a run, without Beam. A first unit warms up
    untimed (the redaction rules compile on first use)."""
    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.mask import DEFAULT_POLICY, get_policy
    from worldtrace.pipelines.units import plan_run, process_unit
    from worldtrace.schemas.store import input_files

    plan = plan_run([str(f) for f in input_files([f"{work}/raw"])], 1)[: 1 + int(units)]
    args = (FilterConfig(), DedupConfig(), get_policy(DEFAULT_POLICY))
    (path, group, span, *_), *timed = plan
    process_unit(path, group, *args, span)
    start = time.perf_counter()
    n = sum(
        process_unit(path, group, *args, span).segment.num_rows for path, group, span, *_ in timed
    )
    return {"seconds": time.perf_counter() - start, "records": n}


def deflate_floor(work: str, units: str = "4") -> dict:
    """The deflates of `units.score` alone, as it runs them (stand-alone once per distinct
    observation of a unit, one history stream per record), at zlib levels 1 and 6, and a
    1-byte stand-alone call per turn: whether the statistics' cost is per byte (the
    level would move it) or per call and block (it would not). us per trajectory, best
    of 3."""
    import zlib

    import pyarrow.parquet as pq
    from worldtrace.pipelines.units import plan_run
    from worldtrace.schemas.store import input_files

    plan = plan_run([str(f) for f in input_files([f"{work}/raw"])], 1)[: int(units)]
    records = []
    for path, group, *_ in plan:
        cols = pq.ParquetFile(path).read_row_group(group, columns=["turns"])["turns"]
        for turns in cols.to_pylist():
            acts = [t["action"]["text"].encode() for t in turns]
            obs = [t["observation"]["text"].encode() for t in turns]
            records.append(list(zip(acts, obs, strict=True)))

    def deflates(level: int) -> None:
        alone: dict[bytes, int] = {}
        for turns in records:
            h = zlib.compressobj(level, zlib.DEFLATED, -15)
            for a, o in turns:
                if o not in alone:
                    alone[o] = len(zlib.compress(o, level, -15))
                h.compress(a), h.flush(zlib.Z_BLOCK), h.compress(o), h.flush(zlib.Z_BLOCK)

    def one_byte() -> None:
        for turns in records:
            for _ in turns:
                zlib.compress(b"x", 6, -15)

    def best(fn: Callable[[], None]) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return round(min(times) / len(records) * 1e6, 1)

    n_turns = sum(map(len, records))
    return {
        "trajectories": len(records),
        "turns_per_traj": round(n_turns / len(records), 2),
        "obs_bytes": round(sum(len(o) for r in records for _, o in r) / n_turns, 1),
        "level6_us": best(lambda: deflates(6)),
        "level1_us": best(lambda: deflates(1)),
        "one_byte_call_us": best(one_byte),
    }


def pass1_stages(work: str, units: str = "8", rounds: str = "3") -> dict:
    """CPU microseconds a trajectory of each step of pass 1 (`process_unit(laps=...)`)
    on `units` units of the corpus in this one process, with the garbage collector as a
    run's worker has it (`runner.frozen_heap`, `runner.paused_gc`), the least of
    `rounds` rounds per step: the table of docs/benchmarks.md, "Where `process` spends
    its time"."""
    from collections import Counter

    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.mask import DEFAULT_POLICY, get_policy
    from worldtrace.pipelines.runner import frozen_heap, paused_gc
    from worldtrace.pipelines.units import plan_run, process_unit
    from worldtrace.schemas.store import input_files

    plan = plan_run([str(f) for f in input_files([f"{work}/raw"])], 1)[: 1 + int(units)]
    args = (FilterConfig(), DedupConfig(), get_policy(DEFAULT_POLICY))
    (path, group, span, *_), *timed = plan
    process_unit(path, group, *args, span)  # the rules compile, the caches fill
    best: dict[str, float] = {}
    with frozen_heap():
        for _ in range(int(rounds)):
            laps: Counter = Counter()
            n = 0
            for path, group, span, *_ in timed:
                with paused_gc():
                    n += process_unit(path, group, *args, span, laps=laps).segment.num_rows
            for k, v in laps.items():
                best[k] = min(best.get(k, v), v)
    us = {k: round(v / n * 1e6, 1) for k, v in best.items()}
    return {"records": n, "us_per_trajectory": us, "total": round(sum(us.values()), 1)}


def pass1_pair(work: str, units: str = "8") -> dict:
    """Two `pass1_units` processes started together: how much two processes slow each
    other on this machine (shared caches, memory bus, the host's other tenants).
    `seconds` is the slower one's."""
    cmd = measure_command("bench_process", "pass1-units", work, units)
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("pass1-units failed")
    each = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    return {
        "seconds": max(r["seconds"] for r in each),
        "each": [r["seconds"] for r in each],
        "records": each[0]["records"],
    }


TASKS = {
    "make-corpus": make_corpus,
    "process": process,
    "pyarrow-floor": pyarrow_floor,
    "pass1-units": pass1_units,
    "pass1-pair": pass1_pair,
    "pass1-stages": pass1_stages,
    "deflate-floor": deflate_floor,
}


def datatrove_venv() -> Path | None:
    """datatrove lives in its own venv: it is the peer, not a dependency."""
    py = BENCH_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    r = subprocess.run(
        [str(py), "-c", "import datatrove, regex, tokenizers, xxhash, orjson"], capture_output=True
    )
    if r.returncode != 0:
        pkgs = ["datatrove", "regex", "xxhash<4", "tokenizers", "orjson"]
        r = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *pkgs], capture_output=True, text=True
        )
        if r.returncode != 0:
            print(f"datatrove unavailable: {r.stderr[-500:]}", file=sys.stderr)
            return None
    return py


def run_datatrove(py: Path, text_dir: Path, work: Path, tasks: int) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    out = subprocess.run(
        ["/usr/bin/env", "time", "-f", "%M", str(py), str(ROOT / "benchmarks" / "datatrove_minhash.py"), str(text_dir), str(work), str(tasks)],
        capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    last = out.stderr.strip().splitlines()[-1]
    return {"seconds": res["seconds"], "peak_mb": (int(last) if last.isdigit() else 0) / 1024}


def corpus(ctx: Context, n: int, hold_out: int = 0) -> tuple[str, dict]:
    work = ctx.work / f"process-{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return str(work), measure("bench_process", "make-corpus", str(work), str(n), str(hold_out))


TINY = 200
"""Trajectories of the run whose seconds stand for a run's fixed start-up."""
RUNS = 3
"""Each `process` measurement is the best of this many runs, each in a fresh process
(like the other areas' best-of rows): single runs on these 2-core VMs moved by up to 10%
from one run to the next (the 20k run with 2 workers: 6.6-7.3 s), which alone flipped
the 2-vs-1 and incremental goals either way; on a slower afternoon by up to 30%
(7.7-10.1 s), and four back-to-back pairs of a 5k and a 20k run gave per-trajectory
ratios of 0.96, 1.38, 1.37 and 1.24. A third round costs ~2.5 minutes."""


def fastest(runs: list[dict]) -> dict:
    """The fastest of several runs, with the range of all of them."""
    seconds = [r["seconds"] for r in runs]
    return {**min(runs, key=lambda r: r["seconds"]), "range": [min(seconds), max(seconds)]}


def rounds(configs: dict[str, Callable[[], dict]], reset=None) -> dict[str, dict]:
    """The fastest of `RUNS` runs of each configuration (name -> a run: a `process`
    measurement, datatrove), run in rounds: every configuration once a round, so a slow
    spell of the machine (its load moved single runs by 10%) falls on all of them alike
    instead of on whichever ran in it. Independent configurations run in the order given
    and back again in turn: on this VM a run right after datatrove's was 0.09-0.12 s
    slower than the same run seconds later (5k: 1.42 against 1.30-1.33 s, twice; not
    after a CPU-bound process as long: likely the VM's host taking back the memory the
    previous run freed), and in one fixed order the 5k run always came after it
    (its best of 3 1.50-1.65 s where it ran 1.30-1.45 alone). With `reset()` (before
    every round but the first) the order stays: each round's runs build on each other."""
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for i in range(RUNS):
        if i and reset:
            reset()
        for name in names if reset or i % 2 == 0 else names[::-1]:
            runs[name].append(configs[name]())
    return {name: fastest(r) for name, r in runs.items()}


def processing(work: str, *args: str) -> Callable[[], dict]:
    """One `process` measurement of `work` (`process` task arguments), to run later."""
    return lambda: measure("bench_process", "process", work, *args)


def spread_note(*runs: dict) -> str:
    """Each run's range over its `RUNS` repeats."""
    return ", ".join(f"{r['range'][0]:.2f}-{r['range'][1]:.2f} s" for r in runs)


def goal(met: bool) -> str:
    return "goal met" if met else "goal NOT met"


def load_note(*runs: dict) -> str:
    """The 1-minute load average before and after each run (the machine may be shared)."""
    return "load " + ", ".join("-".join(f"{x:.1f}" for x in r["load"]) for r in runs)


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    n = ctx.trajectories
    sizes = [n // 4, n, n * 4] if not ctx.quick else [n // 2, n]
    per: dict[int, dict] = {}
    built = {}
    for size in sizes:
        held = size // 100 if size == sizes[-1] else 0  # the increment, added later
        built[size] = (*corpus(ctx, size, held), held)
    main_work = built[n][0]
    py = datatrove_venv()
    configs = {str(size): processing(built[size][0], "2") for size in sizes}
    configs["one"] = processing(main_work, "1")  # the 2-workers-vs-1 row, same rounds
    if py:
        text, out = Path(main_work) / "text", Path(main_work) / "datatrove"
        configs["datatrove"] = lambda: run_datatrove(py, text, out, os.cpu_count() or 2)
    measured = rounds(configs)
    for size in sizes:
        work, c, held = built[size]
        per[size] = {**measured[str(size)], **c, "work": work, "n": c["trajectories"] - held}
    main, one = per[n], measured["one"]
    ctx.shared["processed"] = main["work"]
    floor = measure("bench_process", "pyarrow-floor", main["work"])
    rows.append(("process: whole pipeline vs pyarrow read+write floor", f"{fmt(n / main['seconds'])} traj/s, peak {fmt(main['peak_mb'])} MB",
                 f"{fmt(n / floor['seconds'])} traj/s", f"{floor['seconds'] / main['seconds']:.3f}",
                 f"{n} trajectories, {fmt(main['raw_mb'])} MB zstd Parquet; {main['kept']} kept, {main['duplicates']} duplicates"))  # fmt: skip
    if py:
        dt = measured["datatrove"]
        ratio = dt["seconds"] / main["seconds"]
        rows.append(("process (read, validate, filter, dedup, stats, mask, write) vs datatrove MinHash (4 stages)", f"{fmt(main['seconds'])} s, CPU {fmt(main['cpu_s'])} s", f"{fmt(dt['seconds'])} s, peak {fmt(dt['peak_mb'])} MB",
                     f"{ratio:.3f}", f"same corpus, 5-gram shingles, 14x9 LSH, 2 workers each; best of {RUNS} each, in alternation ({spread_note(main, dt)}); goal >= 3: {goal(ratio >= 3)}; {load_note(main)}"))  # fmt: skip
    base = per[sizes[0]]["seconds"] / per[sizes[0]]["n"]
    for size in sizes:
        r = per[size]
        us, cpu = r["seconds"] / r["n"] * 1e6, r["cpu_s"] / r["n"] * 1e6
        ratio = base * 1e6 / us
        rows.append((f"process scaling: {r['n']:,} trajectories", f"{fmt(us)} us/traj (CPU {fmt(cpu)} us/traj), peak {fmt(r['peak_mb'])} MB", f"{fmt(base * 1e6)} us/traj at {per[sizes[0]]['n']:,}",
                     f"{ratio:.3f}", f"per-trajectory wall time, 2 workers, best of {RUNS} ({spread_note(r)}); goal: within 15% (0.87-1.15): {goal(0.87 <= ratio <= 1.15) if size != sizes[0] else 'the reference'}; {load_note(r)}"))  # fmt: skip
    # the same per-trajectory cost without the fixed start-up: each size step's added
    # seconds over its added trajectories, against the first step's
    steps = [(a, b, (per[b]["seconds"] - per[a]["seconds"]) / (per[b]["n"] - per[a]["n"])) for a, b in pairwise(sizes)]  # fmt: skip
    for a, b, marginal in steps:
        ratio = steps[0][2] / marginal
        rows.append((f"process scaling, marginal: {per[a]['n']:,} -> {per[b]['n']:,} trajectories", f"{fmt(marginal * 1e6)} us/traj", f"{fmt(steps[0][2] * 1e6)} us/traj from {per[sizes[0]]['n']:,} to {per[sizes[1]]['n']:,}",
                     f"{ratio:.3f}", f"added wall time / added trajectories, 2 workers (the start-up is fixed); within 15%: {goal(0.87 <= ratio <= 1.15) if (a, b) != steps[0][:2] else 'the reference'}"))  # fmt: skip
    ratio = one["seconds"] / main["seconds"]
    rows.append(("process: 2 workers vs 1", f"{fmt(main['seconds'])} s (CPU {fmt(main['cpu_s'])} s)", f"{fmt(one['seconds'])} s (CPU {fmt(one['cpu_s'])} s)", f"{ratio:.3f}",
                 f"{n} trajectories, best of {RUNS} each, in alternation ({spread_note(main, one)}); goal >= 1.7: {goal(ratio >= 1.7)} (this machine's ceiling: the row below); {load_note(main, one)}"))  # fmt: skip
    side = rounds({
        "alone": lambda: measure("bench_process", "pass1-units", main["work"]),
        "pair": lambda: measure("bench_process", "pass1-pair", main["work"]),
    })  # fmt: skip
    alone, pair = side["alone"], side["pair"]
    ceiling = 2 * alone["seconds"] / pair["seconds"]
    rows.append(("machine: pass 1's work in 2 processes side by side vs 1 alone", f"{fmt(pair['seconds'])} s ({', '.join(fmt(x) for x in pair['each'])} s)", f"{fmt(alone['seconds'])} s alone", f"{ceiling:.3f}",
                 f"`units.process_unit` on {alone['records']:,} trajectories of that corpus without Beam, twice at once (the slower) vs once, best of {RUNS} each, in alternation: the most 2 workers can gain over 1 on this machine (2.0 where cores do not slow each other)"))  # fmt: skip
    tiny, _ = corpus(ctx, TINY)
    fixed = {
        w: r["seconds"] for w, r in rounds({w: processing(tiny, w) for w in ("1", "2")}).items()
    }
    ratio = (one["seconds"] - fixed["1"]) / (main["seconds"] - fixed["2"])
    rows.append(("process: 2 workers vs 1, start-up excluded", f"{fmt(main['seconds'] - fixed['2'])} s", f"{fmt(one['seconds'] - fixed['1'])} s", f"{ratio:.3f}",
                 f"{n} trajectories minus a {TINY}-trajectory run of each ({fmt(fixed['2'])} s with 2 worker processes, {fmt(fixed['1'])} s in-process); goal >= 1.7: {goal(ratio >= 1.7)}"))  # fmt: skip
    # the scaling rows again beyond the fixed start-up: what each trajectory past the
    # TINY run costs (the raw rows are the goal's measure)
    beyond = {s: (per[s]["seconds"] - fixed["2"]) / max(1, per[s]["n"] - TINY) for s in sizes}
    worst = max(beyond[sizes[0]] / beyond[size] for size in sizes)
    rows.append(("process scaling, start-up excluded: " + " / ".join(f"{per[s]['n']:,}" for s in sizes), " / ".join(f"{fmt(beyond[s] * 1e6)}" for s in sizes) + " us/traj", f"a {TINY}-trajectory run: {fmt(fixed['2'])} s",
                 f"{worst:.3f}", f"each run's seconds past a {TINY}-trajectory run's, per trajectory past {TINY}, 2 workers; ratio: the first size's against the cheapest (the raw rows above are the goal's measure)"))  # fmt: skip
    lo, hi = per[sizes[0]], per[sizes[-1]]
    slope = (hi["peak_mb"] - lo["peak_mb"]) / (hi["n"] - lo["n"]) * 1024
    rows.append(("process: peak memory growth per trajectory", f"{fmt(slope)} KB/traj", "-", "-",
                 "largest process's peak RSS, smallest vs largest corpus; dedup's rows are ~0.26 KB/traj (9 band keys, template keys, ids; signatures stay on disk), the runner holds several copies; records never wait in memory"))  # fmt: skip
    work = hi["work"]
    shutil.move(f"{work}/raw-new", f"{work}/raw/new")
    # the CLI's defaults both times: in-process for the small increment, 2 workers for all;
    # each increment starts from the same store (a copy of it before the first)
    before = Path(work) / "processed-before"
    shutil.copytree(f"{work}/processed", before)

    def restore() -> None:
        shutil.rmtree(f"{work}/processed")
        shutil.copytree(before, f"{work}/processed")

    # in rounds: the increment on the store as it was, then the rebuild (which adds the
    # increment to the store: `restore` before the next round)
    timed = rounds({"inc": processing(work, "0", "0"), "full": processing(work, "0", "1")}, restore)
    inc, full = timed["inc"], timed["full"]
    ratio = inc["seconds"] / full["seconds"]
    rows.append(("process: incremental +1% vs full rebuild", f"{fmt(inc['seconds'])} s (read {inc['read']:,}, {inc['earlier']:,} earlier records back in dedup, rewrote {inc['rewritten']} earlier segments whole, {inc['rewritten_clusters']} only their clusters)", f"{fmt(full['seconds'])} s",
                 f"{ratio:.3f}", f"{hi['n']:,} + {hi['n'] // 99:,} trajectories, CLI default workers, best of {RUNS} each, in alternation ({spread_note(inc, full)}); share of a full run, goal <= 0.05: {goal(ratio <= 0.05)}; {load_note(inc, full)}"))  # fmt: skip
    return rows
