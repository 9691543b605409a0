"""`query` output whose columns share a name, and statements before the last one.

Found (hunt of 12-04): `SELECT t.domain, u.domain FROM ... JOIN ...` as JSON or JSONL
kept one `domain` key and dropped the other value in silence, and as Parquet wrote a
file no reader opens (pyarrow: `Multiple matches for FieldRef.Name(domain)`); and
`CREATE TEMP TABLE t AS ...; SELECT ... FROM t`, the way docs/query.md gives to keep
an intermediate result, warned that statement 1 returns rows that are not shown."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import generate
from worldtrace.schemas import ShardWriter

from worldtrace.cli import cli

JOIN = (
    "SELECT r.domain, t.domain, r.trajectory_id FROM raw_trajectories r "
    "JOIN raw_turns t USING (trajectory_id) ORDER BY r.trajectory_id, t.turn_index"
)


@pytest.fixture
def raw_store(store, corpus):
    with ShardWriter(store.raw / "s") as w:
        w.write(corpus)
    return store


def run(store, *args):
    r = CliRunner().invoke(cli, ["--store", str(store.root), "query", *args])
    return r


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_keeps_both_columns_of_one_name(raw_store, fmt):
    r = run(raw_store, JOIN, "--format", fmt)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout) if fmt == "json" else [json.loads(x) for x in r.stdout.splitlines()]
    turns = sum(len(t.turns) for t in generate_corpus())
    assert len(rows) == turns
    assert all(set(row) == {"domain", "domain_1", "trajectory_id"} for row in rows)
    assert all(row["domain"] == row["domain_1"] for row in rows)
    ids = [row["trajectory_id"] for row in rows]
    assert ids == sorted(ids)  # the order the query asked for
    assert (
        f"note: columns of one name are named apart in the {fmt} output, as DuckDB names "
        "them: domain -> domain_1 (give each an alias with AS to choose the names)"
    ) in r.stderr


def generate_corpus():
    from worldtrace.collectors.synthetic import SyntheticConfig

    return generate(SyntheticConfig(n=40, seed=3))  # the `corpus` fixture's


def test_parquet_with_columns_of_one_name_reads_back(raw_store, tmp_path):
    out = tmp_path / "x.parquet"
    r = run(raw_store, "SELECT 1 AS a, 2 AS a, 3 AS b", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).to_pylist() == [{"a": 1, "a_1": 2, "b": 3}]
    assert "a -> a_1" in r.stderr


def test_distinct_names_are_left_alone_and_csv_shows_both(raw_store):
    r = run(raw_store, "SELECT 1 AS a, 2 AS b", "--format", "json")
    assert (r.exit_code, r.stdout, r.stderr) == (0, '[{"a": 1, "b": 2}]\n', "")
    r = run(raw_store, "SELECT 1 AS a, 2 AS a", "--format", "csv")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "a,a\n1,2\n", "")


def test_a_temp_table_made_before_binds_and_is_not_a_hidden_result(raw_store):
    """The last statement reads what an earlier one made: its columns are named apart
    too, and the CREATE and INSERT (DuckDB answers them with a `Count`) are not said
    to return rows; a SELECT or an `INSERT ... RETURNING` left unshown still is."""
    r = run(
        raw_store,
        "CREATE TEMP TABLE q AS SELECT 1 AS a; INSERT INTO q VALUES (2); "
        "SELECT a, a FROM q ORDER BY a",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"a": 1, "a_1": 1}, {"a": 2, "a_1": 2}]
    assert "returns rows that are not shown" not in r.stderr
    r = run(
        raw_store,
        "CREATE TEMP TABLE q AS SELECT 1 AS a; INSERT INTO q VALUES (2) RETURNING *; "
        "SELECT 5 AS x; SELECT count(*) AS n FROM q",
        "--format",
        "csv",
    )
    assert (r.exit_code, r.stdout) == (0, "n\n2\n"), r.output
    warned = [ln for ln in r.stderr.splitlines() if "returns rows that are not shown" in ln]
    assert [w.split(" returns")[0] for w in warned] == [
        "warning: statement 2 of 4",
        "warning: statement 3 of 4",
    ]


def test_an_error_while_it_runs_is_duckdbs_line(raw_store):
    r = run(
        raw_store, "SELECT s AS a, CAST(s AS INT) AS a FROM (VALUES ('y')) v(s)", "--format", "json"
    )
    assert (r.exit_code, r.stdout) == (1, "")
    [error] = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert error.startswith("error: Conversion Error: Could not convert string 'y' to INT32")
    # the user's line and column, not the wrapper's that names the columns apart
    assert error.endswith(
        "(LINE 1, column 16: SELECT s AS a, CAST(s AS INT) AS a FROM (VALUES ('y')) v(s))"
    )
