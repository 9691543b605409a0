"""End to end: raw shards -> processed shards, counts adding up, bad input accounted for."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, read_records, validate_dict
from worldtrace.schemas.store import shard_files


def raw_store(store, n=120):
    data, _ = near_duplicate_corpus(n_unique=n, n_groups=6, group_size=3, seed=2, exact_copies=4)
    data.append(build("terminal", [("ls\n", "a")]))  # filtered: one turn
    with ShardWriter(store.raw / "c", row_group_rows=32) as w:
        w.write(data)
    return data


def count(store, table):
    return (
        duckdb.connect()
        .execute(f"select count(*) from read_parquet('{store.processed / table}/*.parquet')")
        .fetchone()[0]
    )


def test_end_to_end_counts_add_up(store):
    data = raw_store(store)
    bad = store.raw / "c" / "broken.jsonl"
    bad.write_text(
        data[0].to_json() + "\n{nope\n" + json.dumps({"domain": "chess", "turns": []}) + "\n"
    )
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    acc = m["accounting"]
    assert acc["in"] == len(data) + 3
    assert acc["rejected"] == 2 and acc["filtered"] == 1
    assert acc["in"] == acc["kept"] + acc["filtered"] + acc["duplicates"] + acc["rejected"]
    assert acc["balanced"]
    assert m["counters"]["duplicates.exact"] >= 5  # 4 planted copies + the JSONL copy of data[0]

    assert count(store, "trajectories") == acc["kept"]
    assert count(store, "clusters") == acc["kept"] + acc["duplicates"]
    assert count(store, "rejects") == acc["rejected"] + acc["filtered"]
    turns = sum(len(t.turns) for t in read_records(store.processed / "trajectories"))
    assert count(store, "turns") == turns

    raw = {t.trajectory_id: t for t in data}
    for t in read_records(store.processed / "trajectories"):
        assert validate_dict(t.to_dict()) == []  # processed records are valid, ids match content
        assert t.dedup.representative and all(x.category and x.stats for x in t.turns)
        before = raw[t.trajectory_id]  # no filter changed these, so the id is the raw one
        assert (t.started_at, t.ended_at) == (before.started_at, before.ended_at)
        assert [x.started_at for x in t.turns] == [x.started_at for x in before.turns]
    manifest = json.loads((store.processed / "manifest.json").read_text())
    assert manifest["policy"]["name"] == "agentworld-v1"
    assert manifest["config"]["dedup"]["threshold"] == 0.8


def test_rejects_name_file_record_and_reason(store):
    raw_store(store, n=10)
    torn = store.raw / "c" / "torn.parquet"
    good = shard_files(store.raw)[0]
    torn.write_bytes(good.read_bytes()[:500])
    (store.raw / "c" / "x.parquet").write_bytes(b"PAR1 not really")
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    rows = pq.read_table(store.processed / "rejects").to_pylist()
    reasons = {
        r["source_path"].rsplit("/", 1)[-1]: r["reason"] for r in rows if r["stage"] == "validate"
    }
    assert "unreadable Parquet" in reasons["torn.parquet"]
    assert "unreadable Parquet" in reasons["x.parquet"]
    assert m["accounting"]["balanced"]


def test_rerun_replaces_tables_atomically(store):
    raw_store(store, n=20)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    first = count(store, "trajectories")
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert count(store, "trajectories") == first
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".")]


def test_no_input_is_a_clear_error(store):
    with pytest.raises(FileNotFoundError, match="no Parquet or JSONL input"):
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))


@pytest.mark.slow
def test_portable_runner_gives_the_same_result(store):
    """The same pipeline on the PortableRunner (embedded job server, LOOPBACK workers)."""
    raw_store(store, n=30)
    direct = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    ids_direct = sorted(t.trajectory_id for t in read_records(store.processed / "trajectories"))
    portable = run(
        ProcessConfig(
            inputs=[str(store.raw)],
            output=str(store.processed),
            runner="PortableRunner",
            beam_args=["--job_endpoint=embed", "--environment_type=LOOPBACK"],
        )
    )
    ids_portable = sorted(t.trajectory_id for t in read_records(store.processed / "trajectories"))
    assert ids_portable == ids_direct
    assert portable["accounting"]["kept"] == direct["accounting"]["kept"]
