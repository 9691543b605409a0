"""Fault review (1204) of `process` over foreign-written Parquet: timestamps of another
type than the declared `timestamp[us, tz=UTC]`.

Found: a shard whose `started_at`/`ended_at` were ISO text made every `process` fail
with a Beam traceback naming no file (`object of type str cannot be converted to int`),
while `validate` passed it; one whose timestamps were int64 epoch seconds, or naive,
was kept by `process` (read as epoch microseconds: `started_at 1970-01-01 00:29`) while
`validate` refused it. Pass 1 read every int as a timestamp. Now `process` and
`validate` judge such files alike: text is read as the JSON path reads it, ints and
naive timestamps are rejected naming the file, the row and the field.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.store import check_files

CORPUS = SyntheticConfig(n=12, seed=5)


def cfg(store: Store) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1)


def foreign(store: Store, name: str, change, fields=("started_at", "ended_at")) -> tuple:
    """Our records written by another writer: rows as Python values, `change` applied
    to their timestamps (`fields` of the record, and every turn's), the schema inferred."""
    with ShardWriter(store.raw / "tmp") as w:
        w.write(generate(CORPUS))
    [ours] = w.paths
    rows = pq.read_table(ours).to_pylist()
    ours.unlink()
    for r in rows:
        r.update({k: change(r[k]) for k in fields})
        for t in r["turns"]:
            t["started_at"] = change(t["started_at"]) if t["started_at"] else None
    path = store.raw / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return rows, str(path)


def said(path: str) -> set[str]:
    """What `validate` says of a file: field: message."""
    return {f"{p.field}: {p.message}" for _, ps in check_files([Path(path)]) for p in ps}


def same_as_ours(store: Store, tmp_path) -> None:
    """The trajectories and their times equal those of the same records written and
    processed by our own writer."""
    ours = Store(tmp_path / "ours")
    with ShardWriter(ours.raw / "a") as w:
        w.write(generate(CORPUS))
    run(cfg(ours))
    columns = ["trajectory_id", "started_at", "ended_at"]
    a = pq.read_table(store.table("trajectories"), columns=columns).sort_by("trajectory_id")
    b = pq.read_table(ours.table("trajectories"), columns=columns).sort_by("trajectory_id")
    assert a.num_rows and a.equals(b)
    turns = ["trajectory_id", "turn_index", "category", "keep", "in_loss"]
    a = pq.read_table(store.table("turns"), columns=turns).sort_by(
        [(c, "ascending") for c in turns[:2]]
    )
    b = pq.read_table(ours.table("turns"), columns=turns).sort_by(
        [(c, "ascending") for c in turns[:2]]
    )
    assert a.equals(b)


def rejected(store: Store) -> list[dict]:
    return pq.read_table(store.processed / "rejects").to_pylist()


def test_timestamps_as_iso_text_are_read_as_the_json_path_reads_them(store, tmp_path):
    rows, path = foreign(store, "text", datetime.isoformat)
    assert pq.read_schema(path).field("started_at").type == pa.string()
    assert said(path) == set()
    counts = run(cfg(store))["accounting"]
    assert counts["in"] == len(rows) and counts["rejected"] == 0
    same_as_ours(store, tmp_path)


def test_timestamps_as_epoch_integers_are_rejected_as_validate_rejects_them(store):
    rows, path = foreign(store, "ints", lambda t: int(t.timestamp()))
    counts = run(cfg(store))["accounting"]
    assert counts["rejected"] == len(rows) and counts["kept"] == 0
    wrong = "wrong type: expected a timestamp, got int"
    for row in rejected(store):
        assert row["source_path"] == "raw/ints.parquet" and row["record"].startswith("row ")
        assert set(row["reason"].split("; ")) == said(path) & set(row["reason"].split("; "))
        assert {
            f"started_at: {wrong}",
            f"ended_at: {wrong}",
            f"turns[0].started_at: {wrong}",
        } <= set(row["reason"].split("; "))


def test_naive_timestamps_are_utc_as_in_json_unless_mixed_with_zoned_ones(store, tmp_path):
    rows, path = foreign(store, "naive", lambda t: t.replace(tzinfo=None))
    assert pq.read_schema(path).field("started_at").type.tz is None and said(path) == set()
    counts = run(cfg(store))["accounting"]
    assert counts["in"] == len(rows) and counts["rejected"] == 0
    same_as_ours(store, tmp_path)


def test_a_naive_start_before_a_zoned_end_is_rejected_as_validate_rejects_it(tmp_path):
    store = Store(tmp_path / "mixed")
    rows, path = foreign(store, "mixed", lambda t: t.replace(tzinfo=None), ("started_at",))
    mixes = "ended_at: mixes timezone-aware and naive timestamps"
    assert mixes in said(path)
    counts = run(cfg(store))["accounting"]
    assert counts["rejected"] == len(rows)
    assert all(mixes in r["reason"] for r in rejected(store))
