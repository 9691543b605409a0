"""`process` progress read from what the workers publish (`pipelines/watch.py`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.pipelines import segments as G
from worldtrace.pipelines.units import plan_run, stem_of
from worldtrace.pipelines.watch import RunWatch
from worldtrace.schemas.tempfiles import TMP_PREFIX, temp_name, write_table_atomic


class Calls:
    total = -1

    def __init__(self):
        self.seen: list[tuple[int, int]] = []

    def __call__(self, done: int, records: int) -> None:
        self.seen.append((done, records))


def _jsonl(path, n):
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(n)))
    return str(path)


def test_watch_counts_published_units_and_never_a_file_being_written(tmp_path):
    a, b, c = (
        _jsonl(tmp_path / "a.jsonl", 3),
        _jsonl(tmp_path / "b.jsonl", 5),
        _jsonl(tmp_path / "c.jsonl", 7),
    )
    run_dir = tmp_path / ".run-x"
    calls = Calls()
    watch = RunWatch(run_dir, plan_run([a, b, c], 1), calls, every=3600)
    table = pa.table({"x": [1]})
    assert watch.poll() == (0, 0)
    # a: pass 1 and pass 2 published; b: every record rejected (no segment, no pass 2)
    write_table_atomic(run_dir / G.INDEX / G.SEGMENTS / f"{stem_of(a, None)}.parquet", table)
    write_table_atomic(run_dir / "trajectories" / f"{stem_of(a, None)}.parquet", table)
    write_table_atomic(run_dir / "rejects" / f"{stem_of(b, None)}.parquet", table)
    # c: its segment still being written (a temp name), and a file of a unit not in this run
    (
        run_dir / G.INDEX / G.SEGMENTS / temp_name(TMP_PREFIX, f"{stem_of(c, None)}.parquet")
    ).write_bytes(b"")
    write_table_atomic(run_dir / "trajectories" / f"{stem_of('other', 0)}.parquet", table)
    assert watch.poll() == (3, 8)
    with watch:
        assert calls.total == 6 and calls.seen == [(0, 0)]
    assert calls.seen[-1] == (6, 15)  # a run that ended reports its whole total


def test_watch_knows_the_units_of_cut_row_groups(tmp_path):
    """A run that cuts row groups (`units.plan_run`) publishes one file per slice: the
    watch expects those stems, or a cut run's progress would stand still."""
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": range(1000)}), path, row_group_size=1000)
    run_dir = tmp_path / ".run-x"
    watch = RunWatch(run_dir, plan_run([str(path)], 3), Calls(), every=3600)
    assert watch.total == 6 and watch.records == 1000  # three slices, two passes each
    stem = stem_of(str(path), 0, (0, 333))
    write_table_atomic(run_dir / G.INDEX / G.SEGMENTS / f"{stem}.parquet", pa.table({"x": [1]}))
    assert watch.poll() == (1, 333)
