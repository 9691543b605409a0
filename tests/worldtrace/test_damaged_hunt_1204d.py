"""Found (user hunt 1204d): a processed shard cut short (a bad copy, a full disk) left
`stats`, `report` and `explain` answering from the rest with `warning: skipped PATH:
unreadable Parquet (...)` and nothing on what to do, exit 0: the counts were smaller and
only `doctor` named `worldtrace process --rebuild`. An export whose `manifest.json` was
damaged was said the same way (no fix), and `doctor` said every check passed: it did not
look at manifests at all.

Stores are made as a user makes them: OpenAI chat JSONL through `worldtrace import`, the
real pipeline, the real export; the damage is real bytes cut or written."""

from __future__ import annotations

import json

import pytest
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import Store
from worldtrace.schemas.tempfiles import REBUILD_HINT

from .test_query import run_cli
from .test_report_hunt_1204d import chats


@pytest.fixture
def processed(tmp_path) -> Store:
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 12)))
    assert r.exit_code == 0, r.output
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


def warning_of(stderr: str, path) -> str:
    [line] = [x for x in stderr.splitlines() if x.startswith(f"warning: skipped {path}: ")]
    return line


def test_a_processed_shard_cut_short_is_skipped_with_what_to_do(processed, tmp_path):
    [shard] = sorted(processed.table("trajectories").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    for args in (("stats",), ("report", "-o", str(tmp_path / "r.html")), ("explain", "r1")):
        r = run_cli(processed, *args)
        assert "Traceback" not in r.output
        line = warning_of(r.stderr, shard)
        assert "unreadable Parquet (" in line and line.endswith(f"; {REBUILD_HINT}"), (args, line)


def test_a_damaged_export_manifest_is_said_with_what_to_do_and_doctor_lists_it(processed, tmp_path):
    r = run_cli(processed, "export", "--format", "agentworldbench")
    assert r.exit_code == 0, r.output
    [manifest] = processed.export.glob("*/manifest.json")
    out = manifest.parent
    doc = json.loads(manifest.read_text())
    doc["counts"]["samples"] = "many"  # a hand edit
    manifest.write_text(json.dumps(doc))
    r = run_cli(processed, "stats")
    assert r.exit_code == 0, r.output
    line = warning_of(r.stderr, manifest)
    assert 'counts.samples is not an integer of 64 bits ("many")' in line
    assert line.endswith(f"; export again into it (`worldtrace export -o {out}` with the options "
                         f"it was made with), or move {out} out of the store")  # fmt: skip
    r = run_cli(processed, "doctor", "--store-only", "--json")
    checks = json.loads(r.stdout)["checks"]
    [check] = [c for c in checks if str(manifest) in c["detail"]]
    assert not check["ok"] and "counts.samples is not an integer" in check["detail"]
    assert check["fix"].startswith("export again into it")
