"""`worldtrace query` reads the store and nothing else: writes, reads outside the store,
other databases, extensions and settings are refused; runaway queries stop."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import pytest
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.lockdown import refusal
from worldtrace.schemas.views import connect


def wt(env, *args, input=None):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, input=input, timeout=120
    )


@pytest.fixture
def small_store(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus[:10])
    return store


def snapshot(root):
    return {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_writes_and_outside_reads_are_refused_and_nothing_is_written(small_store, wt_env, tmp_path):
    env = dict(wt_env, WORLDTRACE_STORE=str(small_store.root))
    shard = next(small_store.raw.rglob("*.parquet"))
    before = snapshot(tmp_path)
    for sql, expect in [  # ATTACH and INSTALL: in the shell test (each call costs a start-up)
        (f"COPY (SELECT 1 AS x) TO '{shard}' (FORMAT parquet)", "refused: COPY"),
        ("SELECT * FROM read_text('/etc/passwd')", "Permission Error"),
    ]:
        r = wt(env, "query", sql)
        assert r.returncode == 1, (sql, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0] and "Traceback" not in r.stderr, sql
    assert snapshot(tmp_path) == before  # the raw shard is intact, nothing new anywhere


def test_shell_obeys_the_same_rules(small_store, wt_env, tmp_path):
    env = dict(wt_env, WORLDTRACE_STORE=str(small_store.root))
    before = snapshot(tmp_path)
    statements = [
        f"EXPORT DATABASE '{small_store.root / 'exp'}';",
        f"COPY raw_trajectories TO '{tmp_path / 'out.csv'}';",
        f"ATTACH '{tmp_path / 'other.db'}' AS other;",
        "INSTALL httpfs;",
        "LOAD httpfs;",
        "SET threads = 1;",
        "PRAGMA enable_profiling;",
        "PREPARE p AS SELECT 1;",
        "CREATE TABLE kept AS SELECT 1 AS a;",  # only temporary objects can be made
        "DROP VIEW raw_trajectories;",
        "SELECT * FROM glob('/etc/*');",
        "CREATE TEMP TABLE mine AS SELECT count(*) AS n FROM raw_trajectories;",
        "SELECT n * 100 AS hundredfold FROM mine;",
        "PRAGMA version;",
    ]
    r = wt(env, "query", "--shell", input="\n".join(statements) + "\n.exit\n")
    assert r.returncode == 1  # piped, with refusals: the script failed (12-04)
    out = r.stderr  # refusals and errors, each on its line
    for refused in ("EXPORT DATABASE writes", "COPY reads or writes", "ATTACH opens",
                    "SET, RESET and USE", "PRAGMA ENABLE_PROFILING", "prepared statements"):  # fmt: skip
        assert f"refused: {refused}" in out, refused
    assert out.count("refused: INSTALL and LOAD") == 2
    assert out.count("read-only mode") == 2  # CREATE TABLE, DROP VIEW
    assert "Permission Error" in out  # glob outside the store
    assert "1000" in r.stdout and "v2." in r.stdout  # temp tables, reporting PRAGMAs work
    assert snapshot(tmp_path) == before


def test_runaway_query_stops_at_the_timeout(small_store, wt_env):
    env = dict(wt_env, WORLDTRACE_STORE=str(small_store.root))
    t0 = time.monotonic()
    r = wt(env, "query", "SELECT count(*) FROM range(10000000000000)", "--timeout", "2")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "error: query stopped after 2 s (--timeout); raise it or narrow the query"
    )
    assert time.monotonic() - t0 < 30


def test_refusal_uses_duckdbs_parser():
    assert refusal("SELECT 'COPY x TO y' AS not_a_copy") is None  # a string, not a statement
    assert refusal("-- COPY t TO 'x'\nSELECT 1") is None
    assert refusal("SELECT 1; COPY (SELECT 1) TO 'x.csv'").startswith("refused: COPY")
    assert refusal("UPDATE EXTENSIONS").startswith("refused")  # a type Python cannot name
    assert refusal("pragma table_info('turns')") is None
    assert refusal("IMPORT DATABASE 'x'").startswith("refused: IMPORT DATABASE")
    assert refusal("SELEC oops") is None  # DuckDB reports the syntax error itself


def test_views_connection_is_locked(small_store):
    import duckdb
    from worldtrace.schemas.lockdown import SCRATCH_PREFIX
    from worldtrace.schemas.tempfiles import _HOST

    con = connect(small_store)
    scratch = Path(con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0])
    dead = scratch.parent / f"{SCRATCH_PREFIX}4194304-{_HOST}-deadbeef-x"  # above pid_max
    dead.mkdir()
    connect(small_store)  # sweeps the views scratch of dead processes, never a live one's
    assert not dead.exists() and scratch.is_dir()
    assert con.execute("SELECT count(*) FROM raw_trajectories").fetchall() == [(10,)]
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('enable_external_access', 'lock_configuration', 'autoload_known_extensions', "
            "'autoinstall_known_extensions')"
        ).fetchall()
    )
    assert set(settings.values()) <= {"false", "true"}
    assert (
        settings["enable_external_access"] == "false" and settings["lock_configuration"] == "true"
    )
    with pytest.raises(duckdb.Error, match="locked"):
        con.execute("SET enable_external_access = true")
