"""Fault review (1204b) of reading damaged raw Parquet: real files, real damage, the
real Beam runner.

Found: `validate` on a shard whose row groups 1-2 no longer decode said `row 0:
unreadable Parquet`, stopped reading the file there and never checked rows 150-199;
`process` counted each unreadable row group (50 records) as one reject (`in 102` for
200 records); a dangling `.parquet` symlink in raw/ was passed over by both without a
word.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas import store as S
from worldtrace.schemas.arrow import to_batch

from worldtrace.cli import cli

from .test_faults_1203b import flip_pages

ROWS, GROUP = 200, 50
BAD = "unknown domain 'nope'"


def cfg(store: Store) -> ProcessConfig:
    return ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1)


@pytest.fixture
def damaged(store):
    """A shard of 4 row groups of 50 records: groups 1 and 2 no longer decode, and row
    170 (in group 3, which reads) has an unknown domain."""
    rows = to_batch(generate(SyntheticConfig(n=ROWS, seed=3))).to_pylist()
    rows[170]["domain"] = "nope"
    with ShardWriter(store.raw, row_group_rows=GROUP) as w:
        w.write_rows(rows)
    [path] = w.paths
    for g in (1, 2):
        flip_pages(path, g)
    assert pq.read_metadata(path).num_row_groups == 4  # the footer still reads
    return store, path


def validate(*paths) -> tuple[int, list[str], str]:
    r = CliRunner().invoke(cli, ["validate", *map(str, paths)], obj={})
    return r.exit_code, r.stdout.splitlines(), r.stderr


def test_validate_reads_past_an_unreadable_row_group_and_names_its_first_row(damaged):
    _, path = damaged
    code, lines, summary = validate(path)
    assert code == 1
    assert [ln.split(": ")[0].split(" (")[0] for ln in lines] == [
        f"{path}:row {n}" for n in (50, 100, 170)
    ]
    # the page's checksum fails before zstd sees it (written with checksums since 1206q)
    assert "unreadable Parquet: could not verify page integrity" in lines[0]
    assert lines[0].endswith("(rows 50-99 not read)") and lines[1].endswith(
        "(rows 100-149 not read)"
    )
    assert BAD in lines[2]
    # rows 0-49 and 150-199 are checked; the 100 unread are said, not counted as checked
    assert "1 file(s), 100 record(s), 3 problem(s), 100 record(s) not read" in summary


def test_a_slice_of_an_unreadable_row_group_stands_for_its_own_rows(damaged):
    """A unit that is a slice of a group (`units.plan_units`) loses only its rows."""
    _, path = damaged
    [(where, lost)] = list(S.scan_file(path, row_group=1, rows=(10, 40)))
    assert where == f"{path}:row 60" and isinstance(lost, S.Unread)
    assert lost.rows == range(60, 90)


def test_process_counts_every_record_of_an_unreadable_row_group(damaged):
    store, path = damaged
    m = run(cfg(store))
    acc = m["accounting"]
    assert acc["balanced"] and m["this_run"]["in"] == acc["in"] == ROWS
    assert (acc["kept"], acc["rejected"]) == (99, 101)
    rejects = pq.read_table(store.table("rejects")).to_pylist()
    name = str(path.relative_to(store.root))
    assert {r["source_path"] for r in rejects} == {name}
    lost = [r for r in rejects if "unreadable Parquet" in r["reason"]]
    assert sorted(int(r["record"].removeprefix("row ")) for r in lost) == list(range(50, 150))
    # the summary shows each problem before the rest of the rows it stands for
    shown = [(r["record"], r["reason"]) for r in m["rejected"][:3]]
    assert [rec for rec, _ in shown] == ["row 50", "row 100", "row 170"]
    assert shown[0][1].endswith("(rows 50-99 not read)") and BAD in shown[2][1]


def test_a_file_whose_footer_does_not_read_is_one_reject(store, damaged):
    """Its rows cannot be counted: the file is one reject, as before (so is a Parquet
    file of other columns: its rows are no trajectories, `test_cli`)."""
    _, path = damaged
    cut = store.raw / "cut.parquet"
    data = path.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    m = run(cfg(store))
    assert m["accounting"]["balanced"] and m["accounting"]["in"] == ROWS + 1
    whole = [r for r in m["rejected"] if not r["record"]]
    assert [r["source_path"] for r in whole] == ["raw/cut.parquet"]


def test_a_dangling_symlink_in_raw_is_named_by_validate_and_stops_process(store, corpus):
    """Its records cannot be read, nor is there anything to record of it (no size, time
    or content), so it cannot be a reject counted once: the run stops, naming it."""
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:5])
    with ShardWriter(store.root.parent / "elsewhere") as w:
        w.write(corpus[5:7])
    (store.raw / "linked.parquet").symlink_to(w.paths[0])  # a link out of the store reads
    link = store.raw / "broken.parquet"
    link.symlink_to("/nonexistent/x.parquet")
    code, lines, summary = validate(store.raw)  # was: a traceback (the target's place)
    assert code == 1
    assert lines == [f"{link}: <file>: a broken symlink: /nonexistent/x.parquet does not exist"]
    assert "3 file(s), 7 record(s), 1 problem(s)" in summary
    with pytest.raises(FileNotFoundError) as err:
        run(cfg(store))
    assert str(err.value).startswith(
        f"{link}: a broken symlink: /nonexistent/x.parquet does not exist; "
    )
    assert not (store.processed / "manifest.json").exists()
    r = CliRunner().invoke(cli, ["--store", str(store.root), "process"], obj={})
    assert r.exit_code == 1 and f"{link}: a broken symlink" in r.stderr, r.output
    link.unlink()  # as it says
    assert run(cfg(store))["accounting"]["in"] == 7
