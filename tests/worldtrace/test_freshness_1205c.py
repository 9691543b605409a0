"""Found (hunt 1205c), what the reading commands say of the raw data against the
processed data:

- after `process --input FILE`, `stats`, `query` and `export` said the processed data
  "leaves out N raw shard(s)" that earlier runs had processed (the last run manifest's
  `--input` list was taken for every file processed; `process`, as told, answered "no new
  input"); a raw shard only touched since it was processed was named left out too;
- trajectory JSONL under raw/, which `process` reads, was not looked at: `stats` said the
  processed data "came from files outside the store", and once such a file was damaged or
  changed, `process` refused it while `stats` gave no hint and `doctor` said every shard
  reads.

Real parts: OpenAI chat JSONL imported and processed through the real CLI, the views,
the run's index."""

from __future__ import annotations

import os

from worldtrace.schemas import Store, read_records
from worldtrace.schemas.store import write_jsonl

from worldtrace import summary

from .test_query import run_cli
from .test_report_hunt_1204d import chats

LEFT_OUT = "leaves out"


def said(r) -> str:
    return " ".join(r.output.split())


def test_process_input_of_a_new_shard_leaves_no_false_hint(tmp_path):
    store = Store.at(tmp_path / "store")
    assert (
        run_cli(store, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 6))).exit_code == 0
    )
    assert run_cli(store, "process").exit_code == 0
    first = set(store.raw.rglob("*.parquet"))
    assert run_cli(store, "import", str(chats(tmp_path / "b.jsonl", 100, 3))).exit_code == 0
    [new] = set(store.raw.rglob("*.parquet")) - first
    r = run_cli(store, "process", "--input", str(new))
    assert r.exit_code == 0 and "in 9 = kept 9" in said(r), r.output
    for args in (["stats"], ["query", "SELECT count(*) AS n FROM trajectories"]):
        r = run_cli(store, *args)
        assert r.exit_code == 0, r.output
        assert LEFT_OUT not in said(r) and "hint" not in said(r), (args, r.output)
    assert "│ 9 │" in run_cli(store, "query", "SELECT count(*) AS n FROM trajectories").output
    # a shard processed before and only touched since is not left out: process records it
    old = sorted(first)[0]
    os.utime(old, ns=(old.stat().st_atime_ns, old.stat().st_mtime_ns + 10**12))
    r = run_cli(store, "stats")
    assert LEFT_OUT not in said(r) and "have newer times, the same content" in said(r)
    assert "no new input" in said(run_cli(store, "process"))
    assert "hint" not in said(run_cli(store, "stats"))  # its time recorded
    # a new one is still named
    assert run_cli(store, "import", str(chats(tmp_path / "c.jsonl", 200, 2))).exit_code == 0
    assert f"the processed data {LEFT_OUT} 1 raw shard(s)" in said(run_cli(store, "stats"))


def jsonl_store(tmp_path) -> tuple[Store, object]:
    """A store whose raw/ holds one file of worldtrace JSONL records (3), processed."""
    src = Store.at(tmp_path / "src")
    assert run_cli(src, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 3))).exit_code == 0
    store = Store.at(tmp_path / "store")
    (store.raw / "j").mkdir(parents=True)
    f = write_jsonl(store.raw / "j" / "a.jsonl", list(read_records(src.raw)))
    r = run_cli(store, "process")
    assert r.exit_code == 0 and "in 3 = kept 3" in said(r), r.output
    return store, f


def test_jsonl_under_raw_is_said_as_such_not_as_outside_files(tmp_path):
    store, _ = jsonl_store(tmp_path)
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    assert "raw/ holds JSONL records and no Parquet shard" in said(r)
    assert f"trajectories by domain and source: {summary.RAW_JSONL_SAID}" in said(r)
    assert summary.RAW_ELSEWHERE not in said(r) and "hint" not in said(r)


def test_a_damaged_or_changed_jsonl_under_raw_is_named(tmp_path):
    store, f = jsonl_store(tmp_path)
    text = f.read_text()
    f.write_text(text + '{"broken\n')
    r = run_cli(store, "stats")
    assert f"hint: raw file {f} is damaged: it changed since it was processed" in said(r)
    assert "3 processed trajectories come only from it" in said(r)
    d = run_cli(store, "doctor", "--store-only")
    assert f"store shard {f}: line 4 is not JSON" in said(d), d.output
    assert "processed before, 3 processed trajectories come only from it" in said(d)
    f.write_text(text + text.splitlines(keepends=True)[0])  # reads, but is another file
    r = run_cli(store, "stats")
    assert f"hint: raw shard {f} changed since it was processed" in said(r), r.output
    assert run_cli(store, "process").exit_code == 1  # what the hint says it does


def test_a_raw_shard_edited_with_its_size_and_mtime_kept_is_hinted_as_changed(tmp_path):
    """Found (session 1205f): `sed -i` then `touch -r` on a processed raw file: `process`
    refuses it (its ctime moved), while `stats` compared size and mtime only and gave no
    hint, serving the old content's processed data without a word."""
    from ..pipelines.test_pipeline_hunt_1205d import sed_keeping_times

    store, f = jsonl_store(tmp_path)
    assert "hint" not in said(run_cli(store, "stats"))
    sed_keeping_times(f, tmp_path)
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    assert f"raw shard {f} changed since it was processed" in said(r), r.output
    assert "changed since it was processed" in said(run_cli(store, "process"))
