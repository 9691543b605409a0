"""One measurement per process: `python -m benchmarks.measure TASK ARGS...` prints JSON."""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from pathlib import Path


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def make_corpus(work: str, n: str) -> dict:
    from worldtrace.collectors.synthetic import near_duplicate_corpus
    from worldtrace.schemas import ShardWriter

    total = int(n)
    groups = total // 40
    data, _ = near_duplicate_corpus(
        total - groups * 2 - total // 100, groups, 3, seed=42, exact_copies=total // 100
    )
    w = Path(work)
    with ShardWriter(w / "raw", target_bytes=8 << 20, row_group_rows=1024) as sw:
        sw.write(data)
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


def process(work: str) -> dict:
    from worldtrace.pipelines.process import ProcessConfig, run

    start = time.perf_counter()
    m = run(
        ProcessConfig(
            inputs=[f"{work}/raw"], output=f"{work}/processed", workers=0, parallel_bytes=0
        )
    )
    return {
        "seconds": time.perf_counter() - start,
        "peak_mb": peak_mb(),
        "kept": m["accounting"]["kept"],
        "duplicates": m["accounting"]["duplicates"],
    }


def dedup_only(work: str) -> dict:
    """Read + exact/near dedup only, on the same runner settings as `process`."""
    import apache_beam as beam
    from worldtrace.pipelines.dedup import DedupConfig, Deduplicate
    from worldtrace.pipelines.process import ProcessConfig, pipeline_options
    from worldtrace.pipelines.transforms import ReadTrajectories
    from worldtrace.schemas.store import input_files

    files = [str(p) for p in input_files([f"{work}/raw"])]
    start = time.perf_counter()
    p = beam.Pipeline(options=pipeline_options(ProcessConfig(), 1 << 40))
    out = p | beam.Create(files) | ReadTrajectories()
    d = out.valid | Deduplicate(DedupConfig())
    (d.clusters | beam.Filter(lambda r: not r["representative"]) | beam.combiners.Count.Globally()
     | beam.io.WriteToText(f"{work}/dedup-only/removed"))  # fmt: skip
    p.run().wait_until_finish()
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_mb()}


def pyarrow_floor(work: str) -> dict:
    import pyarrow.parquet as pq
    from worldtrace.schemas.store import shard_files

    out = Path(work) / "floor"
    out.mkdir(exist_ok=True)
    start = time.perf_counter()
    for f in shard_files(f"{work}/raw"):
        pq.write_table(pq.read_table(f), out / f.name, compression="zstd")
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_mb()}


def export(work: str) -> dict:
    from worldtrace.pipelines.export import ExportConfig
    from worldtrace.pipelines.export import export as run_export
    from worldtrace.pipelines.tokens import default_tokenizer

    start = time.perf_counter()
    m = run_export(
        ExportConfig(
            input=f"{work}/processed/trajectories",
            output=f"{work}/export",
            tokenizer=str(default_tokenizer()),
        )
    )
    return {
        "seconds": time.perf_counter() - start,
        "tokens": m["counts"]["tokens"],
        "peak_mb": peak_mb(),
    }


def encode_floor(work: str) -> dict:
    from tokenizers import Tokenizer
    from worldtrace.pipelines.render import CHATML, system_text
    from worldtrace.pipelines.tokens import default_tokenizer
    from worldtrace.schemas import read_table

    rows = read_table(f"{work}/processed/trajectories").sort_by("trajectory_id").to_pylist()
    texts = [CHATML.render(system_text(r["system"]), r["turns"]).text for r in rows]
    tok = Tokenizer.from_file(str(default_tokenizer()))
    start = time.perf_counter()
    n = 0
    for i in range(0, len(texts), 256):
        n += sum(len(e.ids) for e in tok.encode_batch(texts[i : i + 256], add_special_tokens=False))
    return {"seconds": time.perf_counter() - start, "tokens": n}


def query(work: str, turns: str) -> dict:
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from worldtrace.schemas import Store
    from worldtrace.schemas.fields import CATEGORIES, STATS_FIELDS
    from worldtrace.schemas.tables import TURNS_SCHEMA
    from worldtrace.schemas.views import connect

    n = int(turns)
    rng = np.random.default_rng(0)
    store = Store.at(Path(work) / "qstore")
    d = store.table("turns")
    d.mkdir(parents=True)
    domains = np.array(["mcp", "search", "terminal", "swe", "android", "web", "os"])
    cats = np.array(CATEGORIES)
    per = n // 4
    for k in range(4):
        m = per
        cols = {
            "trajectory_id": pa.array([f"t{k}-{i // 13}" for i in range(m)]),
            "origin_id": pa.nulls(m, pa.string()),
            "domain": pa.array(domains[rng.integers(0, 7, m)]),
            "turn_index": pa.array(np.arange(m) % 13, pa.int32()),
            "action_kind": pa.array(["keystrokes"] * m),
            "tool_name": pa.nulls(m, pa.string()),
            "action_chars": pa.array(rng.integers(1, 200, m)),
            "obs_chars": pa.array(rng.integers(0, 5000, m)),
            "is_error": pa.array(rng.random(m) < 0.05),
            "truncated": pa.array(rng.random(m) < 0.01),
            **{s: pa.array(rng.random(m)) for s in STATS_FIELDS},
            "category": pa.array(cats[rng.integers(0, len(cats), m)]),
            "keep": pa.array(rng.random(m)),
            "rule": pa.array(["r"] * m),
            "in_loss": pa.array(rng.random(m) < 0.7),
            "perturbation": pa.nulls(m, pa.string()),
        }
        pq.write_table(
            pa.Table.from_pydict(cols, schema=TURNS_SCHEMA),
            d / f"part-{k}.parquet",
            compression="zstd",
        )
    sql = "SELECT domain, category, count(*) AS n, sum(keep * obs_chars) / sum(obs_chars) AS eff FROM {src} GROUP BY ALL ORDER BY ALL"
    ours, floor = [], []
    for _ in range(5):
        t = time.perf_counter()
        con = connect(store)
        con.execute(sql.format(src="turns")).fetchall()
        ours.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        duckdb.connect().execute(sql.format(src=f"read_parquet('{d}/*.parquet')")).fetchall()
        floor.append((time.perf_counter() - t) * 1000)
    return {"ours_ms": statistics.median(ours), "floor_ms": statistics.median(floor)}


def collect(work: str) -> dict:
    import docker
    from worldtrace.collectors.actions import keystrokes, tool
    from worldtrace.collectors.recorder import Recorder
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.docker import IDLE_COMMAND, DockerConfig
    from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
    from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
    from worldtrace.schemas import Agent, Source

    steps = 40
    repo = Path(work) / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "a.txt").write_text("x\n")
    cfg = DockerConfig(warm=2)
    sb = SWESandbox(SWEConfig(docker=cfg, repo=str(repo)))
    sb.reset(TaskSpec("bench"))
    rec = Recorder(
        sb,
        Path(work) / "journals",
        source=Source(episode_id="b"),
        agent=Agent(name="bench"),
        task_id="b",
        instruction="",
    )
    rec.header(sb.reset(TaskSpec("bench")))
    start = time.perf_counter()
    for i in range(steps):
        rec.step(tool("bash", command=f"echo {i}"))
    ours = steps / (time.perf_counter() - start)
    container = sb.container
    start = time.perf_counter()
    for i in range(steps):
        container.exec_run(["sh", "-c", f"echo {i}"])
    bare = steps / (time.perf_counter() - start)
    sb.close()

    term = TerminalSandbox(TerminalConfig(docker=cfg))
    warm = []
    for _ in range(5):
        time.sleep(
            1.0
        )  # let the pool refill: this measures a warm reset, not a race with refilling
        t = time.perf_counter()
        term.reset(TaskSpec("bench"))
        warm.append((time.perf_counter() - t) * 1000)
    start = time.perf_counter()
    for i in range(steps):
        term.step(keystrokes(f"echo {i}\n"))
    pty = steps / (time.perf_counter() - start)
    term.close()

    client = docker.from_env()
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        c = client.containers.run(
            cfg.image, IDLE_COMMAND, labels={"worldtrace.sandbox": "1"}, **cfg.run_kwargs()
        )
        ex = client.api.exec_create(c.id, ["/bin/bash", "--norc", "-i"], stdin=True, tty=True)
        client.api.exec_start(ex["Id"], socket=True, tty=True)._sock.recv(100)
        cold.append((time.perf_counter() - t) * 1000)
        c.remove(force=True)
    return {
        "steps": steps,
        "ours_steps_s": ours,
        "bare_steps_s": bare,
        "pty_steps_s": pty,
        "warm_reset_ms": statistics.median(warm),
        "cold_reset_ms": statistics.median(cold),
    }


TASKS = {
    "make-corpus": make_corpus,
    "process": process,
    "pyarrow-floor": pyarrow_floor,
    "dedup-only": dedup_only,
    "export": export,
    "encode-floor": encode_floor,
    "query": query,
    "collect": collect,
}

if __name__ == "__main__":
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    print(json.dumps(TASKS[sys.argv[1]](*sys.argv[2:])))
