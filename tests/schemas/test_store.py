from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.schemas import ShardWriter, Store, read_records, read_table
from worldtrace.schemas.store import TMP_PREFIX, scan_file, shard_files, sweep_stale_temps


def test_write_then_read_back(tmp_path, corpus):
    with ShardWriter(tmp_path / "raw", row_group_rows=8) as w:
        w.write(corpus)
    assert len(w.paths) == 1
    assert list(read_records(tmp_path / "raw")) == corpus
    meta = pq.ParquetFile(w.paths[0]).metadata
    assert meta.num_row_groups == 5  # 40 rows / 8
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_rolls_by_size(tmp_path, corpus):
    with ShardWriter(tmp_path, target_bytes=1, row_group_rows=10) as w:
        w.write(corpus)
    assert len(w.paths) == 4
    assert read_table(tmp_path).num_rows == len(corpus)
    assert [p.name for p in shard_files(tmp_path)] == sorted(p.name for p in w.paths)


def test_exception_discards_shard_in_progress(tmp_path, corpus):
    with pytest.raises(RuntimeError), ShardWriter(tmp_path, row_group_rows=4) as w:
        w.write(corpus)
        raise RuntimeError("boom")
    assert shard_files(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


WRITER = textwrap.dedent(
    """
    import sys
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.schemas import ShardWriter
    w = ShardWriter(sys.argv[1], row_group_rows=5, target_bytes=int(sys.argv[2]))
    data = generate(SyntheticConfig(n=60, seed=1))
    w.write(data[:40])            # some row groups reach the disk
    print(len(w.paths), flush=True)
    sys.stdin.readline()          # parked mid-shard until killed
    w.write(data[40:]); w.close()
    """
)


@pytest.mark.parametrize("target_bytes", [1 << 30, 1])
def test_writer_killed_mid_shard_leaves_no_partial_file(tmp_path, target_bytes):
    out = tmp_path / "shards"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out), str(target_bytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    published = int(proc.stdout.readline())  # the writer is parked with an open shard
    if target_bytes > 1:
        assert published == 0
        assert any(p.name.startswith(TMP_PREFIX) for p in out.iterdir())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    visible = shard_files(out)
    assert len(visible) == published
    for f in visible:  # every visible shard is complete and readable
        assert pq.read_table(f).num_rows == 5
    stale = [p for p in out.iterdir() if p.name.startswith(TMP_PREFIX)]
    if target_bytes > 1:  # the torn shard stays hidden until a later writer sweeps it
        assert len(stale) == 1
        os.utime(stale[0], (0, 0))
        assert sweep_stale_temps(out) == 1
    assert not [p for p in out.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_scan_reports_bad_files(tmp_path, corpus):
    with ShardWriter(tmp_path / "ok") as w:
        w.write(corpus[:3])
    good = w.paths[0]
    torn = tmp_path / "torn.parquet"
    torn.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    [(_, problem)] = list(scan_file(torn))
    assert str(torn) in str(problem) and "unreadable Parquet" in problem.message

    foreign = tmp_path / "foreign.parquet"
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1]}), foreign)
    [(_, problem)] = list(scan_file(foreign))
    assert "missing column(s) domain, turns" in problem.message

    jl = tmp_path / "x.jsonl"
    jl.write_text(corpus[0].to_json() + "\n{not json\n" + corpus[1].to_json() + "\n")
    items = list(scan_file(jl))
    assert [w for w, _ in items] == [f"{jl}:line 1", f"{jl}:line 2", f"{jl}:line 3"]
    assert "invalid JSON" in items[1][1].message
    assert items[2][1]["trajectory_id"] == corpus[1].trajectory_id


def test_store_root_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLDTRACE_STORE", str(tmp_path / "s"))
    s = Store.at()
    assert s.raw == tmp_path / "s" / "raw"
    assert Store.at(tmp_path / "t").processed == tmp_path / "t" / "processed"


def test_scan_json_file_of_one_or_many_records(tmp_path, corpus):
    import json

    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(corpus[0].to_json()), indent=2))
    [(where, d)] = list(scan_file(one))
    assert where == str(one) and d["trajectory_id"] == corpus[0].trajectory_id
    many = tmp_path / "many.json"
    many.write_text(json.dumps([json.loads(t.to_json()) for t in corpus[:3]], indent=1))
    assert [w for w, _ in scan_file(many)] == [f"{many}:record {i}" for i in range(3)]
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "domain": \n}')
    [(where, p)] = list(scan_file(bad))
    assert where == f"{bad}:line 3" and "invalid JSON" in p.message


OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from worldtrace.schemas.store import temp_name
    d = Path(sys.argv[1])
    (d / temp_name(".tmp-", "part.parquet")).write_bytes(b"torn")
    (d / temp_name(".run-", "20260101")).mkdir()
    (d / temp_name(".staging-", "parquet")).mkdir()
    print("made", flush=True)
    if sys.argv[2] == "park":
        sys.stdin.readline()
    """
)


def test_sweep_removes_dead_writers_leftovers_at_once_and_never_a_live_ones(tmp_path):
    from worldtrace.schemas.store import TEMP_PREFIXES, sweep_leftovers, temp_name

    dead, live = tmp_path / "dead", tmp_path / "live"
    dead.mkdir(), live.mkdir()
    subprocess.run(
        [sys.executable, "-c", OWNER, str(dead), "exit"], check=True, capture_output=True
    )
    parked = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(live), "park"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parked.stdout.readline() == "made\n"
        mine = live / temp_name(TMP_PREFIX, "mine.parquet")
        mine.write_bytes(b"in flight")
        legacy_old, legacy_new = live / ".tmp-0a1b2c-00000.parquet", live / ".staging-export-9f8e"
        legacy_old.write_bytes(b"x"), legacy_new.mkdir()
        os.utime(legacy_old, (0, 0))  # no owner in the name: only age tells
        assert sweep_leftovers(dead) == 3 and not list(dead.iterdir())  # no hour to wait
        assert sweep_leftovers(live) == 1 and not legacy_old.exists()
        assert len([p for p in live.iterdir() if p.name.startswith(TEMP_PREFIXES)]) == 5
    finally:
        parked.stdin.close()
        parked.wait()
    assert sweep_leftovers(live) == 3  # its owner is gone now
    assert mine.exists() and legacy_new.exists()


def test_sweep_sees_through_a_reused_pid(tmp_path):
    from worldtrace.schemas.store import sweep_leftovers
    from worldtrace.schemas.tempfiles import _HOST

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
    )
    try:
        stale = tmp_path / f".tmp-{proc.pid}-{_HOST}-0123abcd-part.parquet"
        stale.write_bytes(b"left by an earlier process with the same pid")
        os.utime(stale, (time.time() - 600, time.time() - 600))  # before this process started
        assert sweep_leftovers(tmp_path) == 1 and not stale.exists()
    finally:
        proc.stdin.close()
        proc.wait()


def test_failed_write_names_the_path_in_one_line(tmp_path):
    from worldtrace.schemas.store import (
        ArrowFileWriter,
        StoreWriteError,
        write_bytes_atomic,
        write_table_atomic,
    )

    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    for write in (
        lambda p: write_bytes_atomic(p, b"{}"),
        lambda p: write_table_atomic(p, pa.table({"a": [1]})),
        lambda p: ArrowFileWriter(p, pa.schema([("a", pa.int64())])),
    ):
        target = blocker / "x" / "out"
        with pytest.raises(StoreWriteError) as err:
            write(target)
        assert str(err.value).startswith(f"cannot write {target}: ") and "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


def test_scan_a_slice_of_a_row_group_names_the_rows_of_the_file(tmp_path, corpus):
    """A unit may be rows [start, stop) of a row group (pipelines/units.plan_units): the
    slices of a group read back as the group, each record named by its row in the file,
    across the reader's 512-row batches."""
    with ShardWriter(tmp_path / "w") as sw:
        sw.write(corpus)
    first = pq.read_table(sw.paths[0])
    path = tmp_path / "big.parquet"
    group = pa.concat_tables([first] * 30)  # 1,200 rows in one group, after a 40-row one
    with pq.ParquetWriter(path, first.schema) as w:
        w.write_table(first, row_group_size=len(corpus))
        w.write_table(group, row_group_size=len(group))
    whole = [(where, d["trajectory_id"]) for where, d in scan_file(path, 1)]
    assert whole[0][0] == f"{path}:row 40" and len(whole) == 1200
    cuts = [(0, 300), (300, 700), (700, 1100), (1100, 1200)]
    sliced = [(w, d["trajectory_id"]) for c in cuts for w, d in scan_file(path, 1, c)]
    assert sliced == whole
    assert [w for w, _ in scan_file(path, 0, (5, 7))] == [f"{path}:row 5", f"{path}:row 6"]


def test_scan_reads_timestamps_as_epoch_microseconds(tmp_path, corpus):
    """Pass 1 reads timestamps as integers (`micros=True`): the same instants as the
    datetimes a plain scan gives, at every depth, whatever unit or zone the writer used
    (a foreign writer's nanoseconds and naive times included); other columns unchanged."""
    from worldtrace.pipelines.normalize import micros

    with ShardWriter(tmp_path / "w") as sw:
        sw.write(corpus)
    ours = sw.paths[0]
    table = pq.read_table(ours)
    foreign = tmp_path / "foreign.parquet"
    ns = pa.timestamp("ns", tz="UTC")
    turns = table.schema.field("turns").type.value_type
    cast = table.schema.set(
        table.schema.get_field_index("started_at"), pa.field("started_at", pa.timestamp("ns"))
    ).set(
        table.schema.get_field_index("turns"),
        pa.field("turns", pa.list_(pa.struct([
            f.with_type(ns) if f.name == "started_at" else f for f in turns
        ]))),
    )  # fmt: skip
    pq.write_table(table.cast(cast), foreign)

    def times(d: dict) -> list:
        return [d["started_at"], d["ended_at"], *(t["started_at"] for t in d["turns"])]

    for path in (ours, foreign):
        plain = [d for _, d in scan_file(path)]
        ints = [d for _, d in scan_file(path, micros=True)]
        assert [[micros(t) for t in times(d)] for d in plain] == [times(d) for d in ints]
        assert all(type(t) is int for d in ints for t in times(d) if t is not None)
        assert any(t is not None for d in ints for t in times(d)[2:])
        strip = lambda d: {**d, "started_at": 0, "ended_at": 0, "turns": [  # noqa: E731
            {**t, "started_at": 0} for t in d["turns"]]}  # fmt: skip
        assert [strip(d) for d in ints] == [strip(d) for d in plain]


def test_an_arrow_file_is_written_as_it_comes_and_appears_whole_or_not_at_all(tmp_path):
    """`ArrowFileWriter`: each table goes to a hidden temp as it is written (nothing waits
    in memory), the file appears at its name only on close, and an aborted one leaves
    nothing."""
    from worldtrace.schemas.store import ArrowFileWriter

    part = pa.table({"a": list(range(1000))})
    writer = ArrowFileWriter(tmp_path / "x.arrow", part.schema)
    writer.write(part)
    [temp] = list(tmp_path.iterdir())
    assert temp.name.startswith(TMP_PREFIX) and temp.stat().st_size >= part.nbytes
    writer.write(part)
    assert writer.close() == tmp_path / "x.arrow"
    assert [p.name for p in tmp_path.iterdir()] == ["x.arrow"]
    back = pa.ipc.open_file(pa.memory_map(str(tmp_path / "x.arrow"))).read_all()
    assert back["a"].to_pylist() == list(range(1000)) * 2
    aborted = ArrowFileWriter(tmp_path / "y.arrow", part.schema)
    aborted.write(part)
    aborted.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["x.arrow"]


def test_a_directory_turned_read_only_mid_shard_is_a_store_write_error_and_abort_never_raises(
    tmp_path, corpus
):
    """Found: a shard's temp file in a directory that became read-only while it was
    written (a disk remounted read-only after an I/O error) could not be removed, and
    `abort` raised that OSError out of the publish that had failed: a traceback instead
    of `cannot write <shard>: ...`."""
    from worldtrace.schemas.store import StoreWriteError

    from tests.conftest import SUDO

    raw = tmp_path / "raw"
    w = ShardWriter(raw, row_group_rows=10)
    w.write(corpus[:10])  # one row group: the temp file is open for writing
    (tmp,) = raw.iterdir()
    # the directory read-only from now on; the open file stays writable, as on a remount
    subprocess.run([*SUDO, "mount", "--bind", str(raw), str(raw)], check=True)
    try:
        subprocess.run([*SUDO, "mount", "-o", "remount,bind,ro", str(raw)], check=True)
        with pytest.raises(StoreWriteError) as err:
            w.close()
        assert str(err.value).startswith(f"cannot write {tmp}: ")
        assert "Read-only file system" in str(err.value) and "\n" not in str(err.value)
        w.abort()  # again: the temp still cannot go, and nothing is raised
        assert tmp.exists()  # hidden: no reader takes it for a shard
        assert shard_files(raw) == []
    finally:
        subprocess.run([*SUDO, "umount", str(raw)], check=True)
    w.abort()  # writable again: the temp goes
    assert list(raw.iterdir()) == []


def test_writes_into_a_read_only_directory_name_the_path_in_one_line(tmp_path):
    """Found: `write_bytes_atomic` into a read-only directory raised the OSError of
    removing its temp file (which never existed) instead of `cannot write <path>`."""
    from worldtrace.schemas.store import (
        ArrowFileWriter,
        StoreWriteError,
        write_bytes_atomic,
        write_table_atomic,
    )

    from tests.conftest import SUDO

    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run([*SUDO, "mount", "--bind", str(ro), str(ro)], check=True)
    try:
        subprocess.run([*SUDO, "mount", "-o", "remount,bind,ro", str(ro)], check=True)
        for write in (
            lambda p: write_bytes_atomic(p, b"{}"),
            lambda p: write_table_atomic(p, pa.table({"a": [1]})),
            lambda p: ArrowFileWriter(p, pa.schema([("a", pa.int64())])),
        ):
            with pytest.raises(StoreWriteError) as err:
                write(ro / "out")
            assert str(err.value).startswith(f"cannot write {ro / 'out'}: ")
            assert "Read-only file system" in str(err.value)
    finally:
        subprocess.run([*SUDO, "umount", str(ro)], check=True)
    assert list(ro.iterdir()) == []
