"""DuckDB views over a store (DESIGN.md "DuckDB views").

Views over data that does not exist yet are empty, with the same columns: each view
reads either the visible Parquet shards or an empty Arrow table of the same schema.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from worldtrace.schemas import TRAJECTORY_SCHEMA, Store
from worldtrace.schemas.store import shard_files

TRAJECTORY_COLUMNS = """
    trajectory_id, domain, source.origin_format AS origin_format, source.origin_id AS origin_id,
    len(turns) AS num_turns, source.kind AS source_kind, source.name AS source_name,
    source.job_id AS job_id, task.task_id AS task_id, outcome.status AS status, outcome.reward AS reward,
    started_at, ended_at, schema_version, source, environment, task, agent, system, turns, outcome, metadata
"""
RAW_TURN_COLUMNS = """
    trajectory_id, origin_id, domain, t.index AS turn_index, t.action.kind AS action_kind,
    t.action.name AS tool_name, length(t.action.text) AS action_chars,
    length(t.observation.text) AS obs_chars,
    coalesce(t.observation.is_error, false) OR coalesce(t.observation.exit_code, 0) != 0 AS is_error,
    coalesce(t.observation.truncated, false) AS truncated, t.duration_ms AS duration_ms,
    t.action.text AS action_text, t.observation.text AS observation_text
"""
JOBS_SCHEMA = pa.schema(
    [
        ("job_id", pa.string()), ("name", pa.string()), ("status", pa.string()),
        ("episodes", pa.int64()), ("succeeded", pa.int64()), ("failed", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")), ("finished_at", pa.timestamp("us", tz="UTC")),
    ]
)  # fmt: skip
EPISODES_SCHEMA = pa.schema(
    [
        ("job_id", pa.string()), ("episode_id", pa.string()), ("attempt", pa.int64()),
        ("status", pa.string()), ("error", pa.string()), ("trajectory_id", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")), ("ended_at", pa.timestamp("us", tz="UTC")),
    ]
)  # fmt: skip
EXPORTS_SCHEMA = pa.schema(
    [
        ("name", pa.string()), ("format", pa.string()), ("samples", pa.int64()), ("rows", pa.int64()),
        ("tokens", pa.int64()), ("loss_tokens", pa.int64()), ("tokenizer", pa.string()),
        ("template", pa.string()), ("keep_mode", pa.string()), ("seed", pa.int64()), ("path", pa.string()),
    ]
)  # fmt: skip

# name -> (description, columns) for `worldtrace query --help` and docs/query.md
VIEW_DOCS = {
    "trajectories": "processed trajectories (representatives): trajectory_id, domain, origin_format, origin_id, num_turns, status, reward, ..., turns, dedup",
    "turns": "one row per processed turn: trajectory_id, origin_id, domain, turn_index, action_kind, tool_name, action_chars, obs_chars, is_error, truncated, ol, nov, jac, r, byte_entropy, zlib_ratio, cond_novelty, corpus_surprisal, category, keep, rule, in_loss",
    "clusters": "every trajectory that reached dedup: trajectory_id, origin_id, source, domain, cluster_id, representative, role",
    "rejects": "what processing dropped: source_path, record, stage, reason, trajectory_id",
    "raw_trajectories": "raw shards: trajectory_id, domain, origin_format, origin_id, num_turns, status, reward, ..., turns (no processing fields)",
    "raw_turns": "one row per raw turn: trajectory_id, origin_id, domain, turn_index, action_kind, tool_name, action_chars, obs_chars, is_error, truncated, duration_ms, action_text, observation_text",
    "jobs": "collection jobs from jobs.db: job_id, name, status, episodes, succeeded, failed, created_at, finished_at",
    "episodes": "episodes of jobs: job_id, episode_id, attempt, status, error, trajectory_id, started_at, ended_at",
    "exports": "training exports (manifests under export/): name, format, samples, rows, tokens, loss_tokens, tokenizer, template, keep_mode, seed, path",
}


def _source(con: duckdb.DuckDBPyConnection, name: str, directory: Path, schema: pa.Schema) -> str:
    files = shard_files(directory)
    if files:
        listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        return f"read_parquet([{listed}], union_by_name = true)"
    con.register(f"_empty_{name}", schema.empty_table())
    return f"_empty_{name}"


def _processed_schema(name: str) -> pa.Schema:
    from worldtrace.pipelines.tables import CLUSTERS_SCHEMA, REJECTS_SCHEMA, TURNS_SCHEMA

    return {"turns": TURNS_SCHEMA, "clusters": CLUSTERS_SCHEMA, "rejects": REJECTS_SCHEMA}[name]


def _jobs_tables(db: Path) -> tuple[pa.Table, pa.Table]:
    if not db.exists():
        return JOBS_SCHEMA.empty_table(), EPISODES_SCHEMA.empty_table()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        out = []
        for table, schema in (("jobs", JOBS_SCHEMA), ("episodes", EPISODES_SCHEMA)):
            try:
                cur = c.execute(f"SELECT {', '.join(schema.names)} FROM {table}")
            except sqlite3.Error:
                out.append(schema.empty_table())
                continue
            rows = [
                {
                    k: _ts(v) if pa.types.is_timestamp(schema.field(k).type) else v
                    for k, v in zip(schema.names, r, strict=True)
                }
                for r in cur.fetchall()
            ]
            out.append(pa.Table.from_pylist(rows, schema=schema))
    return out[0], out[1]


def _ts(value):
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _exports_table(export_dir: Path) -> pa.Table:
    rows = []
    for m in sorted(export_dir.glob("*/manifest.json")) if export_dir.exists() else []:
        try:
            d = json.loads(m.read_text())
        except json.JSONDecodeError:
            continue
        c = d.get("counts", {})
        rows.append(
            {
                "name": m.parent.name,
                "format": d.get("format"),
                "samples": c.get("samples"),
                "rows": c.get("rows"),
                "tokens": c.get("tokens"),
                "loss_tokens": c.get("loss_tokens"),
                "tokenizer": (d.get("tokenizer") or {}).get("name"),
                "template": (d.get("template") or {}).get("name"),
                "keep_mode": d.get("keep_mode"),
                "seed": d.get("seed"),
                "path": str(m.parent),
            }
        )
    return pa.Table.from_pylist(rows, schema=EXPORTS_SCHEMA)


def connect(store: Store) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every view of the store defined."""
    con = duckdb.connect()
    traj = _source(con, "trajectories", store.table("trajectories"), TRAJECTORY_SCHEMA)
    con.execute(f"CREATE VIEW trajectories AS SELECT {TRAJECTORY_COLUMNS}, dedup FROM {traj}")
    for name in ("turns", "clusters", "rejects"):
        con.execute(
            f"CREATE VIEW {name} AS SELECT * FROM {_source(con, name, store.table(name), _processed_schema(name))}"
        )
    raw = _source(con, "raw", store.raw, TRAJECTORY_SCHEMA)
    con.execute(f"CREATE VIEW raw_trajectories AS SELECT {TRAJECTORY_COLUMNS} FROM {raw}")
    con.execute(
        f"CREATE VIEW raw_turns AS SELECT {RAW_TURN_COLUMNS} FROM "
        f"(SELECT trajectory_id, source.origin_id AS origin_id, domain, unnest(turns) AS t FROM {raw})"
    )
    jobs, episodes = _jobs_tables(store.jobs_db)
    for name, table in (
        ("jobs", jobs),
        ("episodes", episodes),
        ("exports", _exports_table(store.export)),
    ):
        con.register(f"_t_{name}", table)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM _t_{name}")
    return con
