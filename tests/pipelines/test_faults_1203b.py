"""Fault review (1203b) of `process` over damaged files: real stores, real Parquet damage.

Found (F1): a raw shard cut in half after it was processed was called "changed since it
was processed; run `worldtrace process --rebuild`", and that rebuild rejected it, exited
0 and published 50 of 350 trajectories: the processed tables held the last good copy
of the other 300. Found (F6): a processed table file cut short gave `no new input` to
the plain `process` that `doctor` said rebuilds it. Found (F8): a damaged publish
journal was a ValueError, KeyError or TypeError traceback.
"""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.publish import JOURNAL, finish_publish, pending

CORPUS = SyntheticConfig(n=40, seed=3)


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


def write(store: Store, name: str, records) -> list:
    with ShardWriter(store.raw / name) as w:
        w.write(records)
    return w.paths


def cut(path) -> None:
    """Keep the first half of a file, as a copy cut short leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_pages(path, g: int = 0) -> None:
    """Change bytes in the middle of row group `g`'s largest column chunk's pages, as a
    disk fault does: the file keeps its size and a footer that reads."""
    group = pq.read_metadata(path).row_group(g)
    chunk = max(
        (group.column(i) for i in range(group.num_columns)), key=lambda c: c.total_compressed_size
    )
    first = chunk.dictionary_page_offset or chunk.data_page_offset  # the chunk's first page
    data = bytearray(path.read_bytes())
    for at in range(
        first + chunk.total_compressed_size // 4, first + chunk.total_compressed_size * 3 // 4, 7
    ):
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def kept(store: Store) -> set[str]:
    return set(pq.read_table(store.table("trajectories"), columns=["trajectory_id"])[0].to_pylist())


@pytest.fixture
def two_files(store):
    """`a` holds 10 records; `b` 20 others and exact copies of 5 of `a`'s (their clusters
    keep a member in `a`): both processed."""
    corpus = generate(CORPUS)
    write(store, "a", corpus[:10])
    [b] = write(store, "b", corpus[10:30] + corpus[:5])
    first = run(cfg(store))
    return store, b, first


def test_a_damaged_raw_file_is_named_and_no_run_drops_its_records(two_files):
    store, b, first = two_files
    before = kept(store)
    cut(b)
    for rebuild in (False, True):  # the incremental run and the rebuild it sent you to
        with pytest.raises(ValueError) as err:
            run(cfg(store, rebuild=rebuild))
        msg = str(err.value)
        assert msg.startswith(f"raw file {b} is damaged: "), msg
        assert "unreadable Parquet" in msg and "\n" not in msg
        assert "20 processed trajectories come only from it" in msg, msg
        assert "copy the file again" in msg and "move it out of the store" in msg
        assert kept(store) == before  # nothing published, nothing dropped
    # moved out on purpose: the incremental run keeps its records (gone), and the rebuild
    # drops them, saying what and how many
    b.rename(store.root / "b.parquet.damaged")
    again = run(cfg(store))
    assert again["gone_inputs"]["count"] == 1 and kept(store) == before
    rebuilt = run(cfg(store, rebuild=True))
    dropped = rebuilt["dropped_inputs"]
    assert dropped["count"] == 1 and dropped["first"] == [str(b.relative_to(store.root))]
    assert dropped["trajectories"] == len(before) - len(kept(store)) == 20
    assert rebuilt["accounting"]["kept"] == first["accounting"]["kept"] - 20


def test_a_damaged_file_found_by_its_pages_is_damaged_and_a_rewritten_one_is_changed(
    two_files,
):
    """A shard of the same size whose pages no longer decode (the footer reads) is
    damaged; one rewritten with other records that reads is changed (`--rebuild` reads
    it as it is now, and the rebuild goes on)."""
    store, b, _ = two_files
    flip_pages(b)
    pq.read_metadata(b)  # the footer still reads
    with pytest.raises(ValueError, match=r"is damaged: .*damaged Parquet"):
        run(cfg(store, rebuild=True))
    corpus = generate(CORPUS)
    b.unlink()
    [other] = write(store, "b2", corpus[30:34])
    other.rename(b)  # same name, other records: a real change
    with pytest.raises(
        ValueError, match=r"changed since it was processed; run `worldtrace process --rebuild`"
    ):
        run(cfg(store))
    rebuilt = run(cfg(store, rebuild=True))
    assert rebuilt["accounting"]["kept"] == 14 and rebuilt["dropped_inputs"]["count"] == 0


def test_a_processed_table_file_cut_short_is_named_by_plain_process(two_files):
    store, _, first = two_files
    shard = sorted(store.table("turns").glob("*.parquet"))[0]
    cut(shard)
    with pytest.raises(OSError) as err:  # was: `no new input`, exit 0
        run(cfg(store))
    assert str(err.value).startswith(f"{shard}: unreadable Parquet (")
    assert "`worldtrace process --rebuild` makes the processed data again from raw/" in str(
        err.value
    )
    rebuilt = run(cfg(store, rebuild=True))
    assert rebuilt["accounting"] == first["accounting"]
    assert rebuilt["dropped_inputs"] == {"count": 0, "first": [], "trajectories": 0}
    assert run(cfg(store))["new_inputs"] == []


def test_a_processed_clusters_file_cut_short_is_named_in_the_accounting(two_files):
    """Found: `Error creating dataset. Could not read schema from ...`, no remedy."""
    store, _, _ = two_files
    shard = sorted(store.table("clusters").glob("*.parquet"))[0]
    shard.write_bytes(b"")
    write(store, "c", generate(CORPUS)[30:34])  # something new: the run reaches its accounting
    with pytest.raises(OSError) as err:
        run(cfg(store))
    assert str(err.value).startswith(f"{shard}: unreadable Parquet (Parquet file size is 0 bytes)")
    assert ".run-" not in str(err.value)


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"run": "xx"', "not JSON"),
        ("{}", "no `run` directory"),
        ("[]", "a JSON list, not an object"),
        ('{"run": ".run-x", "names": ["trajectories"], "old": {}}', "no `old` name"),
        ('{"run": ".run-x", "names": ["../../elsewhere"], "old": {"../../elsewhere": ".old-x"}}',
         "no list of `names`"),
    ],
)  # fmt: skip
def test_a_damaged_publish_journal_is_one_line_naming_it(two_files, text, why):
    store, _, _ = two_files
    path = store.processed / JOURNAL
    path.write_text(text)
    for call in (pending, finish_publish, lambda p: run(cfg(store))):  # one OSError each
        with pytest.raises(OSError) as err:
            call(store.processed)
        msg = str(err.value)
        assert msg.startswith(f"{path}: damaged publish journal (") and why in msg, msg
        assert msg.endswith("delete it, then run `worldtrace process --rebuild` (it makes "
                            "the processed data again from raw/)")  # fmt: skip
    path.unlink()  # as it says: the rebuild makes the tables again
    assert run(cfg(store, rebuild=True))["accounting"]["balanced"]


def test_rejects_in_the_store_are_named_from_its_root_in_the_run_summary(store):
    """Found (docs review A2): the manifest's `rejected` and the lines `process` printed
    named a file in the store by its absolute path, where docs/pipeline.md says from the
    store's root (`raw/...`), as the rejects table stores it."""
    from worldtrace.collectors.synthetic import build

    short = [build("terminal", [(f"echo {i}\n", f"{i}")]) for i in range(3)]
    [shard] = write(store, "a", generate(CORPUS)[:2] + short)
    m = run(cfg(store))
    where = str(shard.relative_to(store.root))
    assert where.startswith("raw/")
    assert [r["source_path"] for r in m["rejected"]] == [where] * 3
    on_disk = json.loads((store.processed / "manifest.json").read_text())
    assert on_disk["rejected"] == m["rejected"]
    shutil.copytree(store.root, store.root.parent / "copy")  # follows a copied store
    assert run(cfg(Store.at(store.root.parent / "copy"), rebuild=True))["rejected"] == m["rejected"]


def test_a_publish_that_fails_half_way_keeps_the_run_for_its_roll_forward(store):
    """Found by the fault review: a swap that fails during the publish (here a stray file
    where `clusters` is swapped in: the rename fails) unwound the run, whose `finally`
    removed the run directory the journal points at; the next command then finished the
    publish with what was left: this run's trajectories and turns beside the earlier
    run's clusters and rejects. The run directory must stay while a journal names it."""
    write(store, "a", generate(CORPUS))
    run(cfg(store))
    before = kept(store)
    write(store, "b", generate(SyntheticConfig(n=20, seed=9)))
    shutil.rmtree(store.processed / "clusters")
    (store.processed / "clusters").write_text("a stray file\n")
    with pytest.raises(OSError):
        run(cfg(store, rebuild=True))
    journal = pending(store.processed)
    assert journal is not None and (store.processed / journal["run"]).is_dir()
    (store.processed / "clusters").unlink()  # the fault is mended
    assert finish_publish(store.processed) is None and pending(store.processed) is None
    after = kept(store)
    assert len(after) > len(before)
    clusters = pq.read_table(store.table("clusters"), columns=["trajectory_id"])[0]
    assert after <= set(clusters.to_pylist())  # every table is this run's
