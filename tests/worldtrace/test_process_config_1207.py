"""Found (a CLI hunt, 12-07): a `--config` file's `inputs` and `beam_args` replaced the
typed `--input` and Beam options, so `process --config recipe.yaml --input wanted`
processed the file's data instead, exit 0, nothing said (typed options and `--set` won
already, 1205c); and a file's runner and Beam options were never checked: an unknown
Beam option in the file was dropped in silence, an unknown runner recorded in the
manifest or refused by Beam later as a run error, where typed ones are usage errors.

Real parts: the `worldtrace` CLI on a store of imported OpenAI chat logs."""

from __future__ import annotations

import json

import duckdb
from worldtrace.schemas import Store

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def shards(store: Store) -> set:
    return set((store.raw / "import").glob("*.parquet"))


def tasks(store: Store) -> list[str]:
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT task.instruction FROM read_parquet('{store.processed}/trajectories/*.parquet') ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def test_typed_input_and_beam_options_win_over_the_files(tmp_path):
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 2))).exit_code == 0  # fmt: skip
    wanted = shards(store)
    assert run_cli(store, "import", str(chats(tmp_path / "b.jsonl", 10, 3))).exit_code == 0
    [other] = shards(store) - wanted
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"inputs: [{other}]\nbeam_args: [--experiments=from_file]\n")
    args = ["process", "--rebuild", "--config", str(recipe), "--json"]
    r = run_cli(store, *args, *(f"--input={w}" for w in wanted), "--experiments=typed")
    assert r.exit_code == 0, r.output
    manifest = json.loads(r.output)
    assert manifest["config"]["inputs"] == [str(w) for w in wanted]
    assert manifest["config"]["beam_args"] == ["--experiments=from_file", "--experiments=typed"]
    assert tasks(store) == ["task 0", "task 1"]  # before: tasks 10-12, the file's input
    r = run_cli(store, "process", "--rebuild", "--config", str(recipe), "--json")
    assert r.exit_code == 0, r.output
    assert tasks(store) == ["task 10", "task 11", "task 12"]  # the file alone: its input


def test_a_files_runner_and_beam_options_are_checked_as_typed_ones(tmp_path):
    store = Store.at(tmp_path / "store")
    assert run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 2))).exit_code == 0  # fmt: skip
    bogus = tmp_path / "beam.yaml"
    bogus.write_text("beam_args: ['--bogus_opt=1']\n")
    r = run_cli(store, "process", "--rebuild", "--config", str(bogus))
    assert r.exit_code == 2, r.output  # before: 0, the option dropped
    assert f"no such option: --bogus_opt (given in {bogus})" in r.output
    runner = tmp_path / "runner.yaml"
    runner.write_text("runner: NopeRunner\n")
    for extra in ([], ["--rebuild"]):  # before: 0 (nothing new) and 1 (Beam's run error)
        r = run_cli(store, "process", "--config", str(runner), *extra)
        assert r.exit_code == 2, r.output
        assert "--runner" in r.output and "NopeRunner" in r.output
        assert f"(given in {runner})" in r.output
    r = run_cli(store, "process", "--config", str(runner), "--runner", "DirectRunner")
    assert r.exit_code == 0, r.output  # the typed runner wins, and it is a known one
