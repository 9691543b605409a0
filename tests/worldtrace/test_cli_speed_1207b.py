"""Speed defects of the CLI (1207b): `--help` loaded the command's heavy libraries (Beam
for `process --help`, ~1.5 s; pyarrow for `export`, `import`, `worker`, `scheduler`;
pydantic and YAML for `collect`) to build options generated from config dataclasses; and
`query --format json` wrote 9-21 MB/s (a third of DuckDB's own JSON writer or less), each
value of each row converted and checked in Python (`output._finite`, `json.loads` of
every nested value). Real parts: the installed
console script under `-X importtime` or cProfile, real DuckDB; no timings."""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys

import click
import pytest

from ..conftest import VENV_BIN, cli_env
from .test_no_pandas_1206w import loaded_by

HEAVY = (
    "apache_beam", "pyarrow", "duckdb", "docker", "transformers", "tokenizers", "playwright",
    "pandas", "numpy", "pydantic", "yaml", "jsonschema", "hyperscan", "ahocorasick",
    "detect_secrets", "jinja2", "plotly", "torch", "mcp", "datasketch", "rich",
)  # fmt: skip
"""What printing help must not load (each costs 0.05-1.5 s)."""


def _commands() -> list[tuple[str, ...]]:
    """Every command path of the CLI, the root's `()` first."""
    from worldtrace.cli import cli

    def walk(cmd: click.Command, path: tuple[str, ...]):
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, (*path, name))

    return list(walk(cli, ()))


COMMANDS = _commands()


def _live_help(path: tuple[str, ...]) -> str:
    """The help of `path` rendered here from the command's own options: the config
    dataclasses and registries read (imported) as a command that runs reads them."""
    from worldtrace.cli import cli

    ctx = click.Context(cli, info_name="worldtrace", **cli.context_settings)
    cmd: click.Command = cli
    for name in path:
        cmd = cmd.get_command(ctx, name)
        ctx = click.Context(cmd, info_name=name, parent=ctx, **cmd.context_settings)
    return cmd.get_help(ctx) + "\n"


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "root")
def test_help_loads_nothing_heavy_and_says_what_the_options_say(tmp_path, monkeypatch, path):
    """Every command's help, printed by the console script, loads none of `HEAVY` and is
    the text its own options give (every option named, as before)."""
    env = dict(cli_env(tmp_path / "store"), COLUMNS="80")
    r, modules = loaded_by(env, *path, "--help")
    assert r.returncode == 0, r.stderr[-2000:]
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"`worldtrace {' '.join(path)} --help` loaded {heavy[:8]}"
    monkeypatch.setenv("COLUMNS", "80")
    assert r.stdout == _live_help(path)


def test_help_as_an_option_value_is_a_value(tmp_path):
    """`--help` given as an option's value is parsed as that value, as before: a choice
    option refuses it, naming it, and no help is printed."""
    env = cli_env(tmp_path / "store")
    (tmp_path / "a.jsonl").write_text("{}\n")
    r = subprocess.run(
        [str(VENV_BIN / "worldtrace"), "import", "--format", "--help", str(tmp_path / "a.jsonl")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "'--help' is not one of" in r.stderr
    assert "Usage:" not in r.stdout


def test_help_snapshot_is_the_configs():
    """The options help shows without loading a config's module are the config's own
    (`worldtrace.help_options`; `python -m worldtrace.options` writes them again)."""
    from worldtrace import help_options
    from worldtrace.options import help_snapshot

    assert help_snapshot() == help_options.SNAPSHOT, "run `python -m worldtrace.options`"


TRICKY_SQL = r"""SELECT
  NULL AS n,
  'é😀 "q" \ back\u001B\\u001B' || chr(92) || chr(27) || chr(27) || chr(11) || chr(31)
    || chr(0) || chr(10) || chr(8) || chr(127) || chr(8232) AS s,
  170141183460469231731687303715884105727::HUGEINT AS huge,
  18446744073709551615::UBIGINT AS ubig, (-9223372036854775807 - 1)::BIGINT AS small,
  [1.0, 'nan'::DOUBLE, 'inf'::DOUBLE, -0.0::DOUBLE, 1e16, 1e-5, NULL]::DOUBLE[] AS doubles,
  'nan'::DOUBLE AS nan, '-inf'::DOUBLE AS ninf, -0.0::DOUBLE AS nz, 0.1::DOUBLE AS d,
  1e22::DOUBLE AS big_d, 1.0::DOUBLE / 3 AS third,
  1.10::DECIMAL(5,2) AS dec, 12345678901234567890123456.123456789::DECIMAL(38,9) AS bigdec,
  TIMESTAMPTZ '2024-01-02 03:04:05.123456+00' AS tstz,
  TIMESTAMP_NS '2024-01-02 03:04:05.123456789' AS tsns, DATE '2024-01-02' AS day,
  'infinity'::TIMESTAMP AS inf_ts, INTERVAL 3 DAY AS iv, TIME '01:02:03' AS tm,
  '\x00\xff'::BLOB AS bl, '101'::BIT AS bits, '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::UUID AS id,
  true AS yes, NULL::BOOLEAN AS maybe, 7::TINYINT AS tiny,
  {'a': 1, 'b': [{'c': 'x' || chr(27), 'd': NULL, 't': true}], 'e': NULL::VARCHAR,
   'w eird"': TIMESTAMPTZ '2024-01-02 03:04:05+00', 'f': NULL::BOOLEAN} AS st,
  NULL::STRUCT(a INTEGER) AS nst,
  MAP {'k' || chr(28): 1, 'z': NULL} AS m, MAP {1: [2.5, 'nan'::DOUBLE]} AS im,
  [[1, 2], [], NULL, [NULL]] AS ll, []::INTEGER[] AS empty, [1, 2]::INTEGER[2] AS arr,
  ['\x01'::BLOB, NULL] AS blobs, [DATE '2024-01-02'] AS days,
  [1.10::DECIMAL(5,2), NULL] AS decs, [170141183460469231731687303715884105727::HUGEINT] AS huges,
  'x'::ENUM('x', 'y') AS en, '{"a": [1, 2.50]}'::JSON AS js,
  [INTERVAL 1 HOUR] AS ivs, [gen_random_uuid()] IS NOT NULL AS has_id
FROM range(2)"""
"""Values whose JSON is easy to get wrong: NULLs at every depth, unicode and every kind
of control character (the nine DuckDB writes as `\\u001B`, Python as `\\u001b`, beside a
literal `\\u001B` text), 128-bit and unsigned integers, NaN and infinities at any depth,
negative zero, decimals (a number, as Python's float writes it), timestamps (DuckDB's
text), BLOBs, intervals, UUIDs, nested lists, structs, maps and fixed arrays, an enum and
a JSON value at the top of a row (a string)."""

FALLBACK_SQL = r"""SELECT 0.1::FLOAT AS f, [0.1::FLOAT, 'nan'::FLOAT, NULL] AS fs,
  {'x': 1.5::FLOAT} AS sf, union_value(k := 1) AS u, ['{"b": [1, 2.50]}'::JSON] AS js,
  (1, 'a') AS tup, 12::BIGNUM AS bn, MAP {1.5: 'x'} AS fm, 'tab' || chr(27) AS s"""
"""Types written value by value (a FLOAT in its shortest float32 form, a union, a JSON
value inside a list, an unnamed struct, a BIGNUM, a map keyed by floats)."""

EXPECTED = {  # written by HEAD bb7d883's value-by-value writer
    'tricky.json': (
        '[{"n": null, "s": "é😀 \\"q\\" \\\\ back\\\\u001B\\\\\\\\u001B\\\\\\u001b\\u001b\\u000b\\u001f\\u0'
        '000\\n\\b\x7f\u2028", "huge": 170141183460469231731687303715884105727, "ubig": 18446744073'
        '709551615, "small": -9223372036854775808, "doubles": [1.0, null, null, -0.0, 1e+'
        '16, 1e-05, null], "nan": null, "ninf": null, "nz": -0.0, "d": 0.1, "big_d": 1e+2'
        '2, "third": 0.3333333333333333, "dec": 1.1, "bigdec": 1.2345678901234568e+25, "t'
        'stz": "2024-01-02 03:04:05.123456+00", "tsns": "2024-01-02 03:04:05.123456789", '
        '"day": "2024-01-02", "inf_ts": "infinity", "iv": "3 days", "tm": "01:02:03", "bl'
        '": "\\\\x00\\\\xFF", "bits": "101", "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "y'
        'es": true, "maybe": null, "tiny": 7, "st": {"a": 1, "b": [{"c": "x\\u001b", "d": '
        'null, "t": true}], "e": null, "w eird\\"": "2024-01-02 03:04:05+00", "f": null}, '
        '"nst": null, "m": {"k\\u001c": 1, "z": null}, "im": {"1": [2.5, null]}, "ll": [[1'
        ', 2], [], null, [null]], "empty": [], "arr": [1, 2], "blobs": ["\\\\x01", null], "'
        'days": ["2024-01-02"], "decs": [1.1, null], "huges": [17014118346046923173168730'
        '3715884105727], "en": "x", "js": "{\\"a\\": [1, 2.50]}", "ivs": ["01:00:00"], "has'
        '_id": true}, {"n": null, "s": "é😀 \\"q\\" \\\\ back\\\\u001B\\\\\\\\u001B\\\\\\u001b\\u001b\\u0'
        '00b\\u001f\\u0000\\n\\b\x7f\u2028", "huge": 170141183460469231731687303715884105727, "ubig":'
        ' 18446744073709551615, "small": -9223372036854775808, "doubles": [1.0, null, nul'
        'l, -0.0, 1e+16, 1e-05, null], "nan": null, "ninf": null, "nz": -0.0, "d": 0.1, "'
        'big_d": 1e+22, "third": 0.3333333333333333, "dec": 1.1, "bigdec": 1.234567890123'
        '4568e+25, "tstz": "2024-01-02 03:04:05.123456+00", "tsns": "2024-01-02 03:04:05.'
        '123456789", "day": "2024-01-02", "inf_ts": "infinity", "iv": "3 days", "tm": "01'
        ':02:03", "bl": "\\\\x00\\\\xFF", "bits": "101", "id": "6ba7b810-9dad-11d1-80b4-00c04'
        'fd430c8", "yes": true, "maybe": null, "tiny": 7, "st": {"a": 1, "b": [{"c": "x\\u'
        '001b", "d": null, "t": true}], "e": null, "w eird\\"": "2024-01-02 03:04:05+00", '
        '"f": null}, "nst": null, "m": {"k\\u001c": 1, "z": null}, "im": {"1": [2.5, null]'
        '}, "ll": [[1, 2], [], null, [null]], "empty": [], "arr": [1, 2], "blobs": ["\\\\x0'
        '1", null], "days": ["2024-01-02"], "decs": [1.1, null], "huges": [17014118346046'
        '9231731687303715884105727], "en": "x", "js": "{\\"a\\": [1, 2.50]}", "ivs": ["01:0'
        '0:00"], "has_id": true}]\n'
    ),
    'tricky.jsonl': (
        '{"n": null, "s": "é😀 \\"q\\" \\\\ back\\\\u001B\\\\\\\\u001B\\\\\\u001b\\u001b\\u000b\\u001f\\u00'
        '00\\n\\b\x7f\u2028", "huge": 170141183460469231731687303715884105727, "ubig": 184467440737'
        '09551615, "small": -9223372036854775808, "doubles": [1.0, null, null, -0.0, 1e+1'
        '6, 1e-05, null], "nan": null, "ninf": null, "nz": -0.0, "d": 0.1, "big_d": 1e+22'
        ', "third": 0.3333333333333333, "dec": 1.1, "bigdec": 1.2345678901234568e+25, "ts'
        'tz": "2024-01-02 03:04:05.123456+00", "tsns": "2024-01-02 03:04:05.123456789", "'
        'day": "2024-01-02", "inf_ts": "infinity", "iv": "3 days", "tm": "01:02:03", "bl"'
        ': "\\\\x00\\\\xFF", "bits": "101", "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "ye'
        's": true, "maybe": null, "tiny": 7, "st": {"a": 1, "b": [{"c": "x\\u001b", "d": n'
        'ull, "t": true}], "e": null, "w eird\\"": "2024-01-02 03:04:05+00", "f": null}, "'
        'nst": null, "m": {"k\\u001c": 1, "z": null}, "im": {"1": [2.5, null]}, "ll": [[1,'
        ' 2], [], null, [null]], "empty": [], "arr": [1, 2], "blobs": ["\\\\x01", null], "d'
        'ays": ["2024-01-02"], "decs": [1.1, null], "huges": [170141183460469231731687303'
        '715884105727], "en": "x", "js": "{\\"a\\": [1, 2.50]}", "ivs": ["01:00:00"], "has_'
        'id": true}\n{"n": null, "s": "é😀 \\"q\\" \\\\ back\\\\u001B\\\\\\\\u001B\\\\\\u001b\\u001b\\u000'
        'b\\u001f\\u0000\\n\\b\x7f\u2028", "huge": 170141183460469231731687303715884105727, "ubig": 1'
        '8446744073709551615, "small": -9223372036854775808, "doubles": [1.0, null, null,'
        ' -0.0, 1e+16, 1e-05, null], "nan": null, "ninf": null, "nz": -0.0, "d": 0.1, "bi'
        'g_d": 1e+22, "third": 0.3333333333333333, "dec": 1.1, "bigdec": 1.23456789012345'
        '68e+25, "tstz": "2024-01-02 03:04:05.123456+00", "tsns": "2024-01-02 03:04:05.12'
        '3456789", "day": "2024-01-02", "inf_ts": "infinity", "iv": "3 days", "tm": "01:0'
        '2:03", "bl": "\\\\x00\\\\xFF", "bits": "101", "id": "6ba7b810-9dad-11d1-80b4-00c04fd'
        '430c8", "yes": true, "maybe": null, "tiny": 7, "st": {"a": 1, "b": [{"c": "x\\u00'
        '1b", "d": null, "t": true}], "e": null, "w eird\\"": "2024-01-02 03:04:05+00", "f'
        '": null}, "nst": null, "m": {"k\\u001c": 1, "z": null}, "im": {"1": [2.5, null]},'
        ' "ll": [[1, 2], [], null, [null]], "empty": [], "arr": [1, 2], "blobs": ["\\\\x01"'
        ', null], "days": ["2024-01-02"], "decs": [1.1, null], "huges": [1701411834604692'
        '31731687303715884105727], "en": "x", "js": "{\\"a\\": [1, 2.50]}", "ivs": ["01:00:'
        '00"], "has_id": true}\n'
    ),
    'fallback.json': (
        '[{"f": 0.1, "fs": [0.1, null, null], "sf": {"x": 1.5}, "u": {"k": 1}, "js": [{"b'
        '": [1, 2.5]}], "tup": [1, "a"], "bn": "12", "fm": {"1.5": "x"}, "s": "tab\\u001b"'
        '}]\n'
    ),
    'fallback.jsonl': (
        '{"f": 0.1, "fs": [0.1, null, null], "sf": {"x": 1.5}, "u": {"k": 1}, "js": [{"b"'
        ': [1, 2.5]}], "tup": [1, "a"], "bn": "12", "fm": {"1.5": "x"}, "s": "tab\\u001b"}'
        '\n'
    ),
}  # fmt: skip


def query(tmp_path, fmt: str, sql: str) -> str:
    env = dict(cli_env(tmp_path / "store"), TZ="UTC")
    r = subprocess.run(
        [str(VENV_BIN / "worldtrace"), "query", "--format", fmt, sql],
        capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout.decode()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_is_written_as_before(tmp_path, name):
    """Byte for byte the text `json.dumps` made of each row (HEAD bb7d883)."""
    which, fmt = name.split(".")
    sql = {"tricky": TRICKY_SQL, "fallback": FALLBACK_SQL}[which]
    assert query(tmp_path, fmt, sql) == EXPECTED[name]


def test_the_pinned_queries_take_the_paths_they_pin():
    """`TRICKY_SQL` is written by DuckDB (`_row_json`), `FALLBACK_SQL` value by value."""
    import duckdb

    from worldtrace.output import _row_json

    con = duckdb.connect()
    assert _row_json(con.sql(TRICKY_SQL)) is not None
    assert _row_json(con.sql(FALLBACK_SQL)) is None


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_across_batches_and_empty(tmp_path, fmt):
    """Rows of several batches (2,048 rows each) are one array, or one object a line; an
    empty result is `[]` (JSON) or nothing (JSONL)."""
    rows = [f'{{"i": {i}, "s": "r{i}"}}' for i in range(5000)]
    text = "[" + ", ".join(rows) + "]\n" if fmt == "json" else "".join(r + "\n" for r in rows)
    sql = "SELECT i, 'r' || i AS s FROM range(5000) t(i) ORDER BY i"
    assert query(tmp_path, fmt, sql) == text
    assert query(tmp_path, fmt, sql + " LIMIT 0") == ("[]\n" if fmt == "json" else "")


def test_json_rows_are_written_by_duckdb(tmp_path):
    """The rows' text is made by DuckDB, a batch at a time: the Python functions of
    `worldtrace.output` run a number of times that does not grow with the rows (they
    ran several times a value: 480,112 calls here)."""
    env = dict(cli_env(tmp_path / "store"), TZ="UTC")
    prof = tmp_path / "prof"
    sql = (
        "SELECT i, 'row ' || i AS s, i / 3 AS d, [i, NULL] AS l, "
        "{'a': i, 'b': [{'c': 'x'}], 'ts': TIMESTAMPTZ '2024-01-02 00:00:00+00'} AS st, "
        "MAP {'k': i} AS m FROM range(20000) t(i)"
    )
    r = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(prof), str(VENV_BIN / "worldtrace"),
         "query", "--format", "jsonl", "-o", str(tmp_path / "out.jsonl"), sql],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == 20000 and json.loads(lines[7])["st"]["b"] == [{"c": "x"}]
    calls = sum(
        stat[1]  # primitive calls
        for (filename, _, _), stat in pstats.Stats(str(prof)).stats.items()
        if filename.endswith(os.path.join("worldtrace", "output.py"))
    )
    assert calls < 500, f"{calls} calls of worldtrace/output.py's functions for 20,000 rows"
