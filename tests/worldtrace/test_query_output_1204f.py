"""Found (a colleague's review of worldtrace/output.py, 2026-12-04): `query --format csv`
of a 5,000,000-row result (83 MB) peaked at 1.8 GB RSS, the CSV and JSON writers making
the whole text in memory; a NaN or infinity inside a list or struct printed as `NaN` /
`Infinity` in a CSV or table cell, which no strict JSON parser reads; and a runtime
error of a one-line query named `LINE 3` in table and CSV output, the writer's own
projection wrapped around the user's SQL. Real parts: the installed CLI, real DuckDB."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess

import pytest

from .test_query import wt

RICH_SQL = r"""SELECT * FROM (VALUES
  (1, 'plain', NULL::VARCHAR, [1, 2, NULL], {'a': 'x,y', 'b': [1.5, NULL]}, MAP {'k': 'v"q', 'ü': NULL}, 'ünï ☃ 𝄞 "quoted"', ''::VARCHAR, 3.25::DECIMAL(5,2), TIMESTAMP '2024-01-02 03:04:05', E'a\nb,c', '\x00\xff'::BLOB, INTERVAL 3 DAY, true, 1.0/3, 170141183460469231731687303715884105727::HUGEINT, [{'deep': ['é', NULL]}]),
  (2, NULL, 'x', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (3, 'tab	here', 'cr' || chr(13) || 'lf', [], {'a': '', 'b': []}, MAP {}, '日本語', ' ', -0.5::DECIMAL(5,2), TIMESTAMP '1999-12-31 23:59:59.123456', '"', ''::BLOB, INTERVAL '1 year 2 months 3 seconds', false, 1e300, -1::HUGEINT, [])
) AS t(id, name, other, list, struct, map, uni, empty, dec, ts, text, blob, iv, flag, dbl, huge, nested)
"""
"""Nested values, NULLs (a whole NULL row), unicode, quotes, commas, newlines, an empty
string, decimals, timestamps, a BLOB, intervals, a HUGEINT."""

GOLDEN = {  # written by the writers before they streamed (HEAD 850d1b4)
    'csv': (
        'id,name,other,list,struct,map,uni,empty,dec,ts,text,blob,iv,flag,dbl,huge,nested\n'
        '1,plain,,"[1,2,null]","{""a"":""x,y"",""b"":[1.5,null]}","{""k"":""v\\""q"",""ü"":null}","ünï ☃ 𝄞 ""quoted""","",3.25,2024-01-02 03:04:05,"a\n'
        'b,c",\\x00\\xFF,3 days,true,0.3333333333333333,170141183460469231731687303715884105727,"[{""deep"":[""é"",null]}]"\n'
        '2,,x,,,,,,,,,,,,,,\n'
        '3,tab\there,"cr\n'
        'lf",[],"{""a"":"""",""b"":[]}",{},日本語, ,-0.50,1999-12-31 23:59:59.123456,"""","",1 year 2 months 00:00:03,false,1e+300,-1,[]\n'
    ),
    'json': (
        '[{"id": 1, "name": "plain", "other": null, "list": [1, 2, null], "struct": {"a": "x,y", "b": [1.5, null]}, "map": {"k": "v\\"q", "ü": null}, "uni": "ünï ☃ 𝄞 \\"quoted\\"", "empty": "", "dec": 3.25, "ts": "2024-01-02 03:04:05", "text": "a\\nb,c", "blob": "\\\\x00\\\\xFF", "iv": "3 days", "flag": true, "dbl": 0.3333333333333333, "huge": 170141183460469231731687303715884105727, "nested": [{"deep": ["é", null]}]}, {"id": 2, "name": null, "other": "x", "list": null, "struct": null, "map": null, "uni": null, "empty": null, "dec": null, "ts": null, "text": null, "blob": null, "iv": null, "flag": null, "dbl": null, "huge": null, "nested": null}, {"id": 3, "name": "tab\\there", "other": "cr\\rlf", "list": [], "struct": {"a": "", "b": []}, "map": {}, "uni": "日本語", "empty": " ", "dec": -0.5, "ts": "1999-12-31 23:59:59.123456", "text": "\\"", "blob": "", "iv": "1 year 2 months 00:00:03", "flag": false, "dbl": 1e+300, "huge": -1, "nested": []}]\n'
    ),
    'jsonl': (
        '{"id": 1, "name": "plain", "other": null, "list": [1, 2, null], "struct": {"a": "x,y", "b": [1.5, null]}, "map": {"k": "v\\"q", "ü": null}, "uni": "ünï ☃ 𝄞 \\"quoted\\"", "empty": "", "dec": 3.25, "ts": "2024-01-02 03:04:05", "text": "a\\nb,c", "blob": "\\\\x00\\\\xFF", "iv": "3 days", "flag": true, "dbl": 0.3333333333333333, "huge": 170141183460469231731687303715884105727, "nested": [{"deep": ["é", null]}]}\n'
        '{"id": 2, "name": null, "other": "x", "list": null, "struct": null, "map": null, "uni": null, "empty": null, "dec": null, "ts": null, "text": null, "blob": null, "iv": null, "flag": null, "dbl": null, "huge": null, "nested": null}\n'
        '{"id": 3, "name": "tab\\there", "other": "cr\\rlf", "list": [], "struct": {"a": "", "b": []}, "map": {}, "uni": "日本語", "empty": " ", "dec": -0.5, "ts": "1999-12-31 23:59:59.123456", "text": "\\"", "blob": "", "iv": "1 year 2 months 00:00:03", "flag": false, "dbl": 1e+300, "huge": -1, "nested": []}\n'
    ),
    'table': (
        '┏━━━━┳━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━┓\n'
        '┃ id ┃ name    ┃ other  ┃ list       ┃ struct                     ┃ map                   ┃ uni              ┃ empty ┃   dec ┃ ts                         ┃ text ┃ blob     ┃ iv                       ┃ flag  ┃                dbl ┃                                    huge ┃ nested                ┃\n'
        '┡━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━┩\n'
        '│  1 │ plain   │        │ [1,2,null] │ {"a":"x,y","b":[1.5,null]} │ {"k":"v\\"q","ü":null} │ ünï ☃ 𝄞 "quoted" │       │  3.25 │ 2024-01-02 03:04:05        │ a    │ \\x00\\xFF │ 3 days                   │ True  │ 0.3333333333333333 │ 170141183460469231731687303715884105727 │ [{"deep":["é",null]}] │\n'
        '│    │         │        │            │                            │                       │                  │       │       │                            │ b,c  │          │                          │       │                    │                                         │                       │\n'
        '│  2 │         │ x      │            │                            │                       │                  │       │       │                            │      │          │                          │       │                    │                                         │                       │\n'
        '│  3 │ tab     │ cr\\rlf │ []         │ {"a":"","b":[]}            │ {}                    │ 日本語           │       │ -0.50 │ 1999-12-31 23:59:59.123456 │ "    │          │ 1 year 2 months 00:00:03 │ False │             1e+300 │                                      -1 │ []                    │\n'
        '│    │ here    │        │            │                            │                       │                  │       │       │                            │      │          │                          │       │                    │                                         │                       │\n'
        '└────┴─────────┴────────┴────────────┴────────────────────────────┴───────────────────────┴──────────────────┴───────┴───────┴────────────────────────────┴──────┴──────────┴──────────────────────────┴───────┴────────────────────┴─────────────────────────────────────────┴───────────────────────┘\n'
    ),
}  # fmt: skip


def query(env, *args):
    return wt(env, "query", *args)


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_streamed_output_is_byte_for_byte_what_the_whole_text_was(wt_env, tmp_path, fmt):
    """Batch by batch, to stdout and to a file, the bytes are those the writers made when
    they built the whole text."""
    r = query(wt_env, RICH_SQL, "--format", fmt)
    assert r.returncode == 0, r.stderr
    assert r.stdout == GOLDEN[fmt]
    out = tmp_path / f"rich.{'txt' if fmt == 'table' else fmt}"
    r = query(wt_env, RICH_SQL, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == GOLDEN[fmt]


def test_a_result_of_many_batches_is_one_csv_and_one_json_array(wt_env, tmp_path):
    """Rows across batch boundaries: one header, one array (`json.dumps` of the whole
    list), no row twice or lost."""
    n = 12 * 2048 + 1  # 12 whole batches (`output.BATCH_ROWS`) and one of a single row
    sql = f"SELECT i, 'r,' || i AS s FROM range({n}) t(i)"
    r = query(wt_env, sql, "--format", "csv")
    assert r.stdout == "i,s\n" + "".join(f'{i},"r,{i}"\n' for i in range(n))
    r = query(wt_env, sql, "-o", str(tmp_path / "rows.json"))
    rows = [{"i": i, "s": f"r,{i}"} for i in range(n)]
    assert (tmp_path / "rows.json").read_text() == json.dumps(rows, ensure_ascii=False) + "\n"
    r = query(wt_env, sql + " WHERE i < 0", "--format", "json")
    assert r.stdout == "[]\n"


def peak_rss_mb(env, fmt: str, rows: int, out) -> int:
    """Peak RSS (MB) of one `worldtrace query` process writing `rows` rows as `fmt` (the
    child's own rusage, `os.wait4`)."""
    sql = f"SELECT i, 'row ' || i AS s, [i, NULL] AS l FROM range({rows}) t(i)"
    proc = subprocess.Popen(
        ["worldtrace", "query", sql, "--format", fmt, "-o", str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return usage.ru_maxrss // 1024


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_memory_stays_bounded_as_the_result_grows(wt_env, tmp_path, fmt):
    """A result 10x larger (2,000,000 rows, 67 MB of CSV, 107 MB of JSON) raised the
    peak RSS from 267 to 1070 MB (CSV), 318 to 1566 MB (JSON) when the whole text was
    made; written batch by batch it stays where the small result's is (199 -> 204 MB).
    5x here (the whole text would grow it by ~350 MB for CSV, ~550 for JSON)."""
    small = peak_rss_mb(wt_env, fmt, 200_000, tmp_path / f"small.{fmt}")
    large = peak_rss_mb(wt_env, fmt, 1_000_000, tmp_path / f"large.{fmt}")
    assert (tmp_path / f"large.{fmt}").stat().st_size > 30 << 20
    assert large < 1.5 * small, (small, large)


def test_a_query_failing_midway_leaves_no_file_and_no_temp(wt_env, tmp_path):
    """A file appears whole or not at all, though it is written as the rows come: an error
    on a row read after many batches leaves neither the name nor the temp beside it."""
    out = tmp_path / "out" / "x.csv"
    out.parent.mkdir()
    sql = "SELECT CASE WHEN i = 50000 THEN error('boom') ELSE i END AS i FROM range(90000) t(i)"
    r = query(wt_env, sql, "-o", str(out))
    assert r.returncode == 1 and "boom" in r.stderr
    assert list(out.parent.iterdir()) == []


def test_timeout_stops_a_query_while_its_rows_are_written(wt_env, tmp_path):
    out = tmp_path / "out" / "never.csv"
    out.parent.mkdir()
    r = query(wt_env, "SELECT * FROM range(1000000000000)", "-o", str(out), "--timeout", "1")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "error: query stopped after 1 s (--timeout); raise it or narrow the query"
    )
    assert list(out.parent.iterdir()) == []


NON_FINITE = (
    "SELECT [1.5, 'nan'::DOUBLE, 'inf'::DOUBLE] AS l, "
    "{'a': '-inf'::FLOAT, 'NaN': 'NaN', 'b': ['Infinity', 'x\",NaN'], 'c': ['-nan'::DOUBLE]} AS s, "
    "MAP {'k': 'nan'::DOUBLE} AS m"
)
STRICT = {
    "l": [1.5, None, None],
    "s": {"a": None, "NaN": "NaN", "b": ["Infinity", 'x",NaN'], "c": [None]},
    "m": {"k": None},
}
"""NaN and infinities inside nested values are null in every format, as JSON writes them;
the strings "NaN" and "Infinity" stay strings."""


def strict_loads(text: str):
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_nan_and_infinity_in_nested_cells_are_null_as_in_json(wt_env):
    """A CSV or table cell of a nested value held `[1.5,NaN,Infinity]` (DuckDB's
    `to_json`), which no strict JSON parser reads, where JSON and JSONL wrote null: null
    in every format now, and a string that reads "NaN" stays a string."""
    r = query(wt_env, NON_FINITE, "--format", "csv")
    assert r.returncode == 0, r.stderr
    [header, row] = list(csv.reader(io.StringIO(r.stdout)))
    assert {c: strict_loads(v) for c, v in zip(header, row, strict=True)} == STRICT
    r = query(wt_env, NON_FINITE)  # a table: each cell holds the JSON text
    for cell in (
        "[1.5,null,null]",
        '{"a":null,"NaN":"NaN","b":["Infinity","x\\",NaN"],"c":[null]}',
        '{"k":null}',
    ):
        assert cell in r.stdout, r.stdout
    assert "NaN," not in r.stdout and "Infinity]" not in r.stdout
    for fmt in ("json", "jsonl"):
        r = query(wt_env, NON_FINITE, "--format", fmt)
        doc = strict_loads(r.stdout)
        assert (doc[0] if fmt == "json" else doc) == STRICT


RUNTIME_ERROR = "SELECT CAST('x' || i AS INTEGER) AS n, [i] AS l FROM range(3) t(i)"
"""Fails when it runs (the cast of each row), not when DuckDB binds it."""


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "jsonl"])
def test_an_error_names_the_users_line(wt_env, fmt):
    r = query(wt_env, RUNTIME_ERROR, "--format", fmt)
    assert r.returncode == 1
    assert "(LINE 1, column 8: SELECT CAST('x' || i AS INTEGER)" in r.stderr, r.stderr
    two_lines = "SELECT 1 AS n,\n  CAST('x' || i AS INTEGER) AS n, [i] FROM range(3) t(i);"
    r = query(wt_env, two_lines, "--format", fmt)  # json: columns of one name, named apart
    assert r.returncode == 1
    assert "(LINE 2, column 3: CAST('x' || i AS INTEGER)" in r.stderr, r.stderr
    assert r.stdout == ""  # not even the CSV header: the query runs first


def test_columns_of_one_name_before_a_semicolon_are_named_apart(wt_env):
    """The wrapper that names them apart dropped the statement's `;` (it made SQL that did
    not parse, and the JSON kept one of the two values)."""
    r = query(wt_env, "SELECT 1 AS a, 2 AS a; -- two", "--format", "json")
    assert json.loads(r.stdout) == [{"a": 1, "a_1": 2}], r.stderr
