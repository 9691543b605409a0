"""Found (hunt 1205c, the docs as the contract), through the real CLI:

- `export --help` showed `--seed ... [default: 0]` where the default is the processing
  run's seed (the prose said so, the bracket did not);
- a binder or catalog error of `query` (`SELECT nosuch FROM turns`) lost the `(LINE N,
  column C: ...)` docs/query.md promises: DuckDB's relation API leaves it out of them;
- `export -o STORE/export/mine` said `directory STORE/export does not exist (create it
  first)` on a store never exported, where `export -o STORE/processed` had sent the user:
  "name a directory under STORE/export";
- an export of a processing run whose seed is past 64 bits (written before `process`
  refused one) said why and not what to do."""

from __future__ import annotations

import json

from worldtrace.schemas import Store

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def said(r) -> str:
    return " ".join(r.output.split())


def processed(tmp_path) -> Store:
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 3))).exit_code == 0
    )
    assert run_cli(store, "process").exit_code == 0
    return store


def test_export_help_says_the_seed_default_is_the_processing_runs():
    from click.testing import CliRunner

    from worldtrace.cli import cli

    r = CliRunner().invoke(cli, ["export", "--help"], terminal_width=400)
    line = next(x for x in r.output.splitlines() if x.strip().startswith("--seed "))
    assert "[default: (the processing run's, else 0)]" in line, line
    assert "[default: 0]" not in line


def test_a_binder_error_names_its_line_and_column(tmp_path):
    store = processed(tmp_path)
    r = run_cli(store, "query", "SELECT nosuch FROM turns")
    assert 'Referenced column "nosuch" not found' in said(r)
    assert "(LINE 1, column 8: SELECT nosuch FROM turns)" in said(r), r.output
    r = run_cli(store, "query", "SELECT 1 AS x;\nSELECT x FROM nosuchtable", "--format", "json")
    assert "Table with name nosuchtable does not exist" in said(r)
    assert "(LINE 2, column 15: SELECT x FROM nosuchtable)" in said(r), r.output


def test_export_into_the_stores_own_export_directory_makes_it(tmp_path):
    store = processed(tmp_path)
    assert not store.export.exists()
    out = store.export / "mine"
    r = run_cli(store, "export", "--format", "agentworldbench", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert (out / "manifest.json").is_file()
    r = run_cli(store, "export", "--format", "agentworldbench", "-o", str(tmp_path / "no" / "x"))
    assert r.exit_code == 1 and "does not exist (create it first)" in said(
        r
    )  # elsewhere: as before


def test_a_processing_seed_past_64_bits_says_what_to_do(tmp_path):
    store = processed(tmp_path)
    manifest = store.processed / "manifest.json"
    m = json.loads(manifest.read_text())
    m["config"]["seed"] = 2**70  # as a run before the check wrote it
    manifest.write_text(json.dumps(m))
    r = run_cli(store, "export", "--format", "agentworldbench", "-o", str(tmp_path / "e"))
    assert r.exit_code == 1
    assert (
        "pass --seed N, or process again with `worldtrace process --rebuild --set seed=N`"
        in said(r)
    )
