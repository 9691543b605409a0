"""DuckDB views and the query/stats/explain commands (the report: test_report.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.collectors.synthetic import near_duplicate_corpus
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import VIEW_DOCS, connect

DOCUMENTED = {
    "trajectories": ["trajectory_id", "domain", "origin_format", "origin_id", "num_turns"],
    "turns": ["trajectory_id", "origin_id", "domain", "turn_index", "action_kind", "tool_name", "action_chars",
              "obs_chars", "ol", "nov", "jac", "r", "byte_entropy", "zlib_ratio", "cond_novelty",
              "corpus_surprisal", "category", "keep"],
    "clusters": ["trajectory_id", "origin_id", "cluster_id", "representative"],
    "rejects": ["source_path", "record", "reason"],
    "raw_trajectories": ["trajectory_id", "domain", "origin_format", "origin_id", "num_turns"],
    "raw_turns": ["trajectory_id", "domain", "turn_index", "action_chars", "obs_chars"],
    "jobs": ["job_id", "status"],
    "episodes": ["job_id", "episode_id", "status"],
    "exports": ["name", "format", "samples", "tokens", "loss_tokens"],
}  # fmt: skip


@pytest.fixture(scope="module")
def full_store(tmp_path_factory):
    store = Store.at(tmp_path_factory.mktemp("q") / "store")
    data, _ = near_duplicate_corpus(150, 10, 3, seed=4, exact_copies=3)
    with ShardWriter(store.raw / "s") as w:
        w.write(data)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    export(
        ExportConfig(
            input=str(store.table("trajectories")),
            output=str(store.export / "parquet"),
            tokenizer=str(default_tokenizer()),
        )
    )
    return store


@pytest.mark.parametrize("view", list(DOCUMENTED))
def test_views_have_documented_columns_and_rows(full_store, view):
    con = connect(full_store)
    cols = [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
    for c in DOCUMENTED[view]:
        assert c in cols, (view, c)
        assert c in VIEW_DOCS[view], f"{view}.{c} is not documented"
    n = con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
    assert n > 0 or view in ("jobs", "episodes", "rejects")


@pytest.mark.parametrize("view", list(DOCUMENTED))
def test_views_on_an_empty_store_are_empty_not_errors(tmp_path, view):
    con = connect(Store.at(tmp_path / "nothing"))
    cols = [d[0] for d in con.execute(f"SELECT * FROM {view}").description]
    assert con.execute(f"SELECT count(*) FROM {view}").fetchone()[0] == 0
    assert set(DOCUMENTED[view]) <= set(cols)


def test_views_agree(full_store):
    con = connect(full_store)
    assert (
        con.execute("SELECT count(*) FROM turns").fetchone()
        == con.execute("SELECT sum(num_turns) FROM trajectories").fetchone()
    )
    raw = con.execute("SELECT count(*) FROM raw_trajectories").fetchone()[0]
    assert raw == 150 + 20 + 3
    assert con.execute("SELECT count(*) FROM clusters").fetchone()[0] == raw


def wt(env, *args, input=None):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, input=input
    )


def test_query_formats(full_store, wt_env, tmp_path):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    sql = "SELECT domain, count(*) AS n FROM turns GROUP BY domain ORDER BY domain"
    r = wt(env, "query", sql, "--format", "json")
    rows = json.loads(r.stdout)
    assert [x["domain"] for x in rows] == ["mcp", "swe", "terminal", "web"]
    r = wt(env, "query", sql, "--format", "csv")
    assert r.stdout.splitlines()[0] == '"domain","n"'
    out = tmp_path / "q.parquet"
    r = wt(env, "query", sql, "--format", "parquet", "--output", str(out))
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 4
    f = tmp_path / "q.sql"
    f.write_text("SELECT count(*) AS n FROM exports")
    assert json.loads(wt(env, "query", "--sql-file", str(f), "--format", "json").stdout) == [
        {"n": 1}
    ]
    r = wt(env, "query", sql)
    assert "terminal" in r.stdout and "┃" in r.stdout


def test_sql_error_without_traceback(full_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(env, "query", "SELECT nope FROM turns")
    assert r.returncode == 1
    assert "Binder Error" in r.stderr and "nope" in r.stderr
    assert "Traceback" not in r.stderr


def test_shell(full_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(
        env, "query", "--shell", input="SELECT count(*) AS n\nFROM clusters;\nSELECT bad;\n.exit\n"
    )
    assert r.returncode == 0
    assert "173" in r.stdout and "error:" in r.stdout


def test_stats_sections(full_store, wt_env):
    r = wt(dict(wt_env, WORLDTRACE_STORE=str(full_store.root)), "stats")
    assert r.returncode == 0
    for section in (
        "trajectories by domain and source",
        "category shares",
        "effective keep",
        "dedup",
        "exports",
    ):
        assert section in r.stdout
    assert "jobs: no data yet" in r.stdout


def test_explain(full_store, wt_env):
    con = connect(full_store)
    tid, n = con.execute(
        "SELECT trajectory_id, num_turns FROM trajectories ORDER BY trajectory_id LIMIT 1"
    ).fetchone()
    env = dict(wt_env, WORLDTRACE_STORE=str(full_store.root))
    r = wt(env, "explain", tid[:10])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\nturn ") + r.stdout.startswith("turn ") == n
    assert "rule: " in r.stdout and "cond_novelty=" in r.stdout and "in loss=" in r.stdout
    dup = con.execute("SELECT trajectory_id FROM clusters WHERE role = 'near' LIMIT 1").fetchone()[
        0
    ]
    r = wt(env, "explain", dup)
    assert "near duplicate in cluster" in r.stdout
    assert wt(env, "explain", "zzzz").returncode == 1
