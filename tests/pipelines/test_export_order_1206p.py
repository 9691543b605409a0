"""Export bytes did not follow the data but the cuts processing made (hunt 12-06p): the
export reads unit files in name order, a unit's name hashes its slice of a raw file, and
the slices depend on the worker count (`units.deal` cuts row groups at each worker's
share) and on what each incremental run read. So an incremental store, its `--rebuild`
and a `--workers 1` rebuild kept the same samples and exported them in three orders
(three sha256s). Units now carry the arrival of their first record, and the export
reads them in that order: the raw data's own order, whatever the cuts.

Real parts: Parquet shards, the real `process` (DirectRunner, 1 and 2 workers), the real
exporter and Qwen tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from worldtrace.collectors.synthetic import near_duplicate_corpus
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter, Store


def write(store: Store, name: str, records) -> None:
    with ShardWriter(store.raw / name, row_group_rows=200) as w:
        w.write(records)


def process(store: Store, workers: int, rebuild: bool = False) -> None:
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=workers,
                      rebuild=rebuild))  # fmt: skip


def exported(store: Store, out: Path) -> tuple[bytes, set[str]]:
    cfg = ExportConfig(input=str(store.table("trajectories")), output=str(out),
                       tokenizer=str(default_tokenizer()))  # fmt: skip
    export(cfg)
    [shard] = sorted(out.glob("*.parquet"))
    units = {p.name for p in (store.processed / "trajectories").glob("*.parquet")}
    return shard.read_bytes(), units


def test_the_export_is_the_same_bytes_whatever_the_cuts(tmp_path):
    corpus, _ = near_duplicate_corpus(n_unique=300, n_groups=10, group_size=3, seed=11)
    first, second = corpus[:240], corpus[240:]
    store = Store.at(tmp_path / "s")
    write(store, "a", first)
    process(store, workers=2)
    write(store, "b", second)
    process(store, workers=2)  # incremental: reads b only
    got = {"incremental": exported(store, tmp_path / "x-inc")}
    process(store, workers=2, rebuild=True)
    got["rebuild"] = exported(store, tmp_path / "x-reb")
    process(store, workers=1, rebuild=True)
    got["one worker"] = exported(store, tmp_path / "x-w1")
    units = {name: u for name, (_, u) in got.items()}
    assert units["incremental"] != units["one worker"]  # other cuts: other unit files
    shards = {name: b for name, (b, _) in got.items()}
    assert shards["incremental"] == shards["rebuild"] == shards["one worker"]
    [shard] = (tmp_path / "x-w1").glob("*.parquet")
    kept = pq.read_table(store.table("trajectories"), columns=["trajectory_id"]).num_rows
    assert pq.read_metadata(shard).num_rows == kept > 0


def test_units_written_before_the_order_key_keep_their_place(tmp_path):
    """Review: units of a store processed before the key (an incremental run rewrites
    only the units whose decisions change) sorted after every keyed one, so new records
    were exported before the earlier ones, and a rebuild exported other bytes. Their
    order now comes from their segments in the processing index."""
    import pyarrow.parquet as pq
    from worldtrace.schemas import fields as F

    corpus, _ = near_duplicate_corpus(n_unique=120, n_groups=4, group_size=3, seed=11)
    store = Store.at(tmp_path / "s")
    write(store, "a", corpus[:90])
    process(store, workers=1)
    for f in (store.processed / "trajectories").glob("*.parquet"):  # as written before
        t = pq.read_table(f)
        meta = {k: v for k, v in (t.schema.metadata or {}).items() if k != F.UNIT_ORDER_KEY}
        pq.write_table(t.replace_schema_metadata(meta), f)
    write(store, "b", corpus[90:])
    process(store, workers=1)
    old = sum(
        F.UNIT_ORDER_KEY not in (pq.read_schema(f).metadata or {})
        for f in (store.processed / "trajectories").glob("*.parquet")
    )
    assert old  # an earlier unit the incremental run did not rewrite
    incremental, _ = exported(store, tmp_path / "x1")
    process(store, workers=1, rebuild=True)
    rebuilt, _ = exported(store, tmp_path / "x2")
    assert incremental == rebuilt
