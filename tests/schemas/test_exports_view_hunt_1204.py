"""One bad `export/*/manifest.json` failed every command that opens the views (defect
hunt, 2026-12-04): `query` (even `SELECT 1`), `stats`, `report` and `explain` ended in a
traceback (a JSON array: AttributeError; a count that is a string: ArrowInvalid; bytes
that are not UTF-8: UnicodeDecodeError; `counts` an array; a count past int64:
OverflowError), and a manifest that is not JSON was dropped without a word. Such a
manifest is now left out of the `exports` view with `warning: skipped PATH: why`, as an
unreadable shard is, and every command goes on.

Real parts: a store processed by the real pipeline, a real AgentWorldBench export, the
CLI in process.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store

from worldtrace.cli import cli

BAD = {
    "array": (b"[1, 2]", "not an export manifest (a JSON array, not an object)"),
    "string-count": (
        b'{"format": "parquet", "counts": {"samples": "many"}}',
        'counts.samples is not an integer of 64 bits ("many")',
    ),
    "not-utf8": (b"\xff\xfe", "not UTF-8 text"),
    "counts-array": (b'{"counts": []}', "counts is a JSON array, not an object"),
    "huge-count": (
        b'{"counts": {"rows": 99999999999999999999999}}',
        "counts.rows is not an integer of 64 bits (99999999999999999999999)",
    ),
    "not-json": (b"nope", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    "tokenizer-string": (b'{"tokenizer": "qwen"}', "tokenizer is a JSON string, not an object"),
    "seed-bool": (b'{"seed": true}', "seed is not an integer of 64 bits (true)"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """A processed store with one good export and one bad manifest of each kind."""
    from worldtrace.collectors.synthetic import SyntheticConfig, generate

    s = Store.at(tmp_path_factory.mktemp("exports1204") / "store")
    with ShardWriter(s.raw / "x") as w:
        w.write(generate(SyntheticConfig(n=6, seed=3)))
    run(ProcessConfig(inputs=[str(s.raw)], output=str(s.processed), workers=1))
    s.export.mkdir(parents=True, exist_ok=True)
    r = cli_run(s, "export", "-o", str(s.export / "good"), "--format", "agentworldbench")
    assert r.exit_code == 0, r.output
    for name, (body, _) in BAD.items():
        (s.export / name).mkdir()
        (s.export / name / "manifest.json").write_bytes(body)
    return s


def cli_run(store: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store.root), *args])


def assert_warned(store: Store, r) -> None:
    """Ran to the end (no traceback), each bad manifest named once with why."""
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    assert r.exit_code == 0, (r.stdout, r.stderr)
    for name, (_, why) in BAD.items():
        line = f"warning: skipped {store.export / name / 'manifest.json'}: {why}"
        assert r.stderr.count(line) == 1, r.stderr


def test_query_leaves_a_bad_manifest_out_and_says_so(store):
    r = cli_run(store, "query", "SELECT 1 AS one", "--format", "json")
    assert_warned(store, r)
    assert json.loads(r.stdout) == [{"one": 1}]
    sql = "SELECT name, format, samples, tokens, loss_tokens FROM exports"
    r = cli_run(store, "query", sql, "--format", "json")
    assert_warned(store, r)
    [good] = json.loads(r.stdout)
    assert good["name"] == "good" and good["format"] == "agentworldbench" and good["samples"] > 0
    # found 12-04: shown as 0 tokens; an AgentWorldBench export is text, it counts none
    assert good["tokens"] is None and good["loss_tokens"] is None


def test_stats_report_and_explain_go_on(store, tmp_path):
    assert_warned(store, cli_run(store, "stats"))
    out = tmp_path / "report.html"
    assert_warned(store, cli_run(store, "report", "--output", str(out)))
    assert out.stat().st_size > 0
    r = cli_run(store, "query", "SELECT trajectory_id FROM trajectories LIMIT 1", "--format", "csv")
    tid = r.stdout.splitlines()[1]
    r = cli_run(store, "explain", tid)
    assert_warned(store, r)
    assert tid in r.stdout
