"""Query: category shares through the DuckDB views against DuckDB on the files; `query
--format json` of every processed trajectory against DuckDB's own JSON writer."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import Context, Row, fmt, measure, measure_command


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
        }
        # columns the query does not read (added to the schema over time) stay null
        cols = {f.name: cols.get(f.name, pa.nulls(m, f.type)) for f in TURNS_SCHEMA}
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


JSON_SQL = "SELECT * FROM trajectories"
"""Every processed trajectory: nested turns (structs of strings, doubles, timestamps)."""
JSON_RUNS = 3


def json_floor(store: str, out: str) -> dict:
    """DuckDB's own JSON writer (`COPY ... (FORMAT JSON, ARRAY true)`) of `JSON_SQL` read
    through the same views; they refuse COPY (locked down), so the rows reach a plain
    connection as Arrow. The caller times the process, start-up included, as the command."""
    import duckdb
    from worldtrace.schemas import Store
    from worldtrace.schemas.views import connect

    result = connect(Store.at(store)).sql(JSON_SQL).to_arrow_table()
    plain = duckdb.connect()
    plain.register("result", result)
    plain.execute(f"COPY (SELECT * FROM result) TO '{out}' (FORMAT JSON, ARRAY true)")
    return {"rows": result.num_rows}


def _wall(cmd: list[str], env: dict | None = None) -> float:
    """The best of `JSON_RUNS` runs of `cmd`, seconds of wall time."""
    best = float("inf")
    for _ in range(JSON_RUNS):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        best = min(best, time.perf_counter() - start)
    return best


def json_store(ctx: Context) -> str:
    """A processed store: `bench_process`'s main corpus when it ran, else a quarter of
    that size made and processed here (`--only bench_query`)."""
    if "processed" in ctx.shared:
        return ctx.shared["processed"]
    work = ctx.work / "query-json-store"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    n = max(ctx.trajectories // 4, 200)
    measure("bench_process", "make-corpus", str(work), str(n))
    measure("bench_process", "process", str(work), "2")
    return str(work)


def json_row(ctx: Context) -> Row:
    store = json_store(ctx)
    out = ctx.work / "query-json"
    out.mkdir(parents=True, exist_ok=True)
    ours_out, floor_out = out / "ours.json", out / "duckdb.json"
    script = str(Path(sys.executable).with_name("worldtrace"))
    env = {**os.environ, "WORLDTRACE_STORE": store}
    ours = _wall([script, "query", "--format", "json", "-o", str(ours_out), JSON_SQL], env)
    floor = _wall(measure_command("bench_query", "json-floor", store, str(floor_out)))
    mb, floor_mb = ours_out.stat().st_size / 1e6, floor_out.stat().st_size / 1e6
    return ("query: `query --format json` of every processed trajectory vs DuckDB's JSON writer", f"{fmt(mb / ours)} MB/s", f"{fmt(floor_mb / floor)} MB/s",
            f"{floor / ours:.3f}", f"{mb:,.1f} MB of JSON in {ours:.2f} s (DuckDB's, compact: {floor_mb:,.1f} MB in {floor:.2f} s); each a fresh process, start-up included, best of {JSON_RUNS}")  # fmt: skip


TASKS = {"query": query, "json-floor": json_floor}


def run(ctx: Context) -> list[Row]:
    q = measure("bench_query", "query", str(ctx.work), str(ctx.turns))
    return [(f"query: category shares over {ctx.turns:,} turns via views vs DuckDB on the files", f"{fmt(q['ours_ms'])} ms", f"{fmt(q['floor_ms'])} ms",
             f"{q['floor_ms'] / q['ours_ms']:.3f}", "median of 5; includes opening the views"),
            json_row(ctx)]  # fmt: skip
