"""Hunt 1206: a store whose raw/ holds Parquet shards and, beside them, a file of
worldtrace JSONL records. `process` reads both; the raw views read the shards alone, so
`stats` counted the JSONL records as `processed_not_in_raw` ("read from a file outside
the store, or from a raw shard since removed": neither) without a word; the note was
said only when raw/ held no shard at all. Real CLI, real files, the real views."""

from __future__ import annotations

import json

from worldtrace.schemas import Store, read_records
from worldtrace.schemas.store import write_jsonl

from worldtrace import summary

from .test_freshness_1205c import said
from .test_query import run_cli
from .test_report_hunt_1204d import chats


def test_jsonl_records_beside_raw_shards_are_said_in_the_sources_table(tmp_path):
    src = Store.at(tmp_path / "src")
    assert run_cli(src, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 3))).exit_code == 0
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "import", "--create", str(chats(tmp_path / "b.jsonl", 100, 4))).exit_code
        == 0
    )
    (store.raw / "j").mkdir(parents=True)
    write_jsonl(store.raw / "j" / "a.jsonl", list(read_records(src.raw)))
    assert "in 7 = kept 7" in said(run_cli(store, "process"))
    assert summary.store_state(store) == summary.RAW_BESIDE
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    assert f"trajectories by domain and source: {summary.RAW_BESIDE_SAID}" in said(r)
    assert summary.RAW_UNREAD not in said(r) and summary.RAW_JSONL_SAID not in said(r)
    doc = json.loads(run_cli(store, "stats", "--json").output)
    [row] = doc["sections"]["sources"]
    assert f"sources: {summary.RAW_BESIDE_SAID}" in doc["notes"]  # `--json` says it too
    assert (row["raw"], row["processed"], row["processed_not_in_raw"]) == (4, 7, 3)


def test_a_store_of_shards_alone_says_nothing_of_jsonl(tmp_path):
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "import", "--create", str(chats(tmp_path / "b.jsonl", 100, 4))).exit_code
        == 0
    )
    assert run_cli(store, "process").exit_code == 0
    assert summary.store_state(store) == "processed"
    assert summary.RAW_BESIDE_SAID not in said(run_cli(store, "stats"))
