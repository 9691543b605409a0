"""Query: category shares through the DuckDB views against DuckDB on the files."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from .common import Context, Row, fmt, measure


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


TASKS = {"query": query}


def run(ctx: Context) -> list[Row]:
    q = measure("bench_query", "query", str(ctx.work), str(ctx.turns))
    return [(f"query: category shares over {ctx.turns:,} turns via views vs DuckDB on the files", f"{fmt(q['ours_ms'])} ms", f"{fmt(q['floor_ms'])} ms",
             f"{q['floor_ms'] / q['ours_ms']:.3f}", "median of 5; includes opening the views")]  # fmt: skip
