"""Where a record came from stays put: a later copy of it never takes its place, a store
keeps naming its own files after it is copied or moved, and the views list what the store
holds, not its writers' leftovers."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

from worldtrace.collectors.synthetic import build
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.views import connect

from .test_incremental import tables


def cfg(store: Store, **kw) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, **kw)


def imported(name: str, n: int = 30) -> list:
    """`n` distinct imported trajectories (no `started_at`, as imports have) and one of a
    single turn (filtered: a `rejects` row), their origin ids `name:i`."""
    out = []
    for i in range(n + 1):
        pairs = [
            (f"cat file{i}_{k}.txt\n", f"line {i} {k} of a file") for k in range(3 if i < n else 1)
        ]
        t = build("terminal", pairs)
        source = dataclasses.replace(t.source, kind="import", origin_id=f"{name}:{i}")
        out.append(dataclasses.replace(t, source=source).with_id())
    return out


def write(store: Store, name: str, records, mtime: float | None = None) -> None:
    with ShardWriter(store.raw / name, row_group_rows=40) as w:
        w.write(records)
    if mtime is not None:  # written later than what was processed before, for sure
        for f in (store.raw / name).iterdir():
            os.utime(f, (mtime, mtime))


def rows(store: Store, sql: str) -> list[tuple]:
    return connect(store, on_skip=None).execute(sql).fetchall()


def test_the_same_file_imported_again_leaves_the_first_copy_kept(store):
    first = imported("batch1")
    write(store, "b1", first)
    run(cfg(store))
    kept = tables(store)["trajectories"]
    files = {p.name: p.stat().st_ino for p in (store.processed / "trajectories").iterdir()}
    # the same records again under another name that sorts first ("batch1-again:0" <
    # "batch1:0", "b0" < "b1"): exact duplicates, equal but for where they came from
    again = imported("batch1-again")
    assert [t.trajectory_id for t in again] == [t.trajectory_id for t in first]
    write(
        store, "b0", again, mtime=max(f.stat().st_mtime for f in (store.raw / "b1").iterdir()) + 5
    )
    m = run(cfg(store))
    assert m["counters"].get("segments.rewritten", 0) == 0  # the earlier file stays
    assert tables(store)["trajectories"] == kept
    for name, inode in files.items():  # kept by hard link, not written again
        assert (store.processed / "trajectories" / name).stat().st_ino == inode
    origins = rows(store, "SELECT DISTINCT origin_id LIKE 'batch1:%' FROM trajectories")
    assert origins == [(True,)]
    roles = dict(rows(store, "SELECT role, count(*) FROM clusters GROUP BY 1"))
    assert roles == {"representative": 30, "exact": 30}
    incremental = tables(store)
    run(cfg(store, rebuild=True))  # a rebuild chooses as the incremental runs did
    assert tables(store) == incremental


def test_rows_of_one_file_rank_in_file_order(store):
    """Exact copies within one file: the first row stays (origin ids by text put `x:10`,
    the second row, before `x:9`, the first)."""
    base = imported("x", 1)[0]
    copies = [
        dataclasses.replace(base, source=dataclasses.replace(base.source, origin_id=f"x:{i + 9}"))
        for i in range(12)
    ]
    write(store, "b", copies)
    run(cfg(store))
    assert rows(store, "SELECT origin_id FROM trajectories") == [("x:9",)]


def test_a_copied_or_moved_store_names_its_own_files(store, tmp_path):
    write(store, "b1", imported("batch1"))
    run(cfg(store))
    copy = Store.at(tmp_path / "copy")
    shutil.copytree(store.root, copy.root, symlinks=True)  # as `cp -a`
    run(cfg(copy))  # nothing new: the copy's files are matched at their new place
    moved = Store.at(tmp_path / "moved")
    shutil.move(copy.root, moved.root)
    shutil.rmtree(store.root)
    for sql in ("SELECT source_path FROM rejects", "SELECT source FROM clusters"):
        paths = [r[0] for r in rows(moved, sql)]
        assert paths and all(p.startswith(str(moved.root.resolve()) + "/raw/") for p in paths)
        assert all(os.path.exists(p.rsplit(":", 1)[0]) for p in paths)
    # and an incremental run there equals a rebuild there (rejects included)
    write(moved, "b2", [*imported("batch2")[:5], build("terminal", [("pwd\n", "/tmp")])])
    run(cfg(moved))
    incremental = tables(moved)
    run(cfg(moved, rebuild=True))
    assert tables(moved) == incremental


def test_a_file_outside_the_store_keeps_its_absolute_path(store, tmp_path):
    outside = tmp_path / "elsewhere"
    write(Store.at(outside), "b", imported("o", 2))
    run(ProcessConfig(inputs=[str(outside / "raw")], output=str(store.processed), workers=1))
    (path,) = {r[0] for r in rows(store, "SELECT source_path FROM rejects")}
    assert path.startswith(str(outside.resolve()) + "/raw/b/")


def test_exports_being_written_or_replaced_are_not_listed(store):
    """`.staging-*` and `.old-*` directories (an export in progress, or one an interrupted
    export left) are not exports: `exports`, and so stats and the report, leave them out."""
    for name in ("mine", ".staging-1-0a1b2c3d-4e5f6a7b-mine", ".old-mine-0a1b2c3d"):
        (store.export / name).mkdir(parents=True)
        (store.export / name / "manifest.json").write_text(json.dumps({"format": "jsonl"}))
    assert rows(store, "SELECT name FROM exports") == [("mine",)]


def test_stats_count_processed_trajectories_per_source(store):
    from worldtrace.summary import stats_document

    write(store, "a", imported("kept", 3))  # three kept, one filtered
    lone = build("terminal", [("pwd\n", "/tmp")])  # its source's only one: filtered
    write(
        store,
        "b",
        [dataclasses.replace(lone, source=dataclasses.replace(lone.source, name="other"))],
    )
    run(cfg(store))
    doc = stats_document(connect(store, on_skip=None), store)
    got = {r["source"]: (r["raw"], r["processed"]) for r in doc["sections"]["sources"]}
    assert got == {"synthetic": (4, 3), "other": (1, 0)}


def test_explain_names_the_kept_copy_and_the_dropped_one_apart(store):
    from worldtrace.summary import explanation

    retry = [("cat a.txt\n", "error: no such file"), ("cat a.txt\n", "error: no such file"),
             ("cat b.txt\n", "b contents here"), ("ls\n", "a.txt b.txt")]  # fmt: skip
    t = build("terminal", retry)
    copies = [
        dataclasses.replace(t, source=dataclasses.replace(t.source, kind="import", origin_id=o))
        for o in ("first:0", "again:0")
    ]
    write(store, "b1", copies[:1])
    run(cfg(store))
    write(
        store,
        "b2",
        copies[1:],
        mtime=max(f.stat().st_mtime for f in (store.raw / "b1").iterdir()) + 5,
    )
    run(cfg(store))
    con = connect(store, on_skip=None)
    kept = explanation(con, "first:0")
    assert kept["status"] == "explained" and kept["origin_id"] == "first:0"
    assert len(kept["removed_turns"]) == 1  # its own, not once per copy
    assert "/raw/b1/" in kept["removed_turns"][0]["source_path"]
    assert [c["origin_id"] for c in kept["copies"]] == ["again:0"]
    dropped = explanation(con, "again:0")
    assert dropped["status"] == "dropped"
    (dup,) = dropped["duplicates"]
    assert dup["origin_id"] == "again:0" and "/raw/b2/" in dup["source"]
    assert dup["representative"]["origin_id"] == "first:0"
    assert dup["representative"]["trajectory_id"] == dup["trajectory_id"] == kept["trajectory_id"]
    assert [r["stage"] for r in dropped["rejects"]] == ["turn_filter"]
    assert "/raw/b2/" in dropped["rejects"][0]["source_path"]
