"""A damaged file of `processed/_index` read by an incremental `process`.

Found (fault-injection hunt 12-06): a cut `_index/members.parquet` or segment made
`process` fail with Beam's ERROR log and a 20-line traceback, then `Error: Parquet magic
bytes not found in footer... [while running 'Process/Earlier/IndexMatches']`; a cut
`templates.parquet` said the same without the file, a cut probe file `Error: Not an
Arrow file`. Neither named the file nor the way to make it again (docs/pipeline.md: "A
damaged file of processed/ is named with the way to make it again, `worldtrace process
--rebuild`"). Now the run checks the index files it will read before the pipeline starts
(footer and schema) and stops with one line; pages that do not decode under a valid
footer, met inside the pipeline, are said the same way.

The store is made as a user makes it: OpenAI chat JSONL through `worldtrace import`,
`process`, near-duplicates imported later (so the next run reads the cluster state and
rewrites earlier segments); the failing runs are the real command, in a subprocess.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import Store

from ..worldtrace.test_report_hunt_1204d import chats

HINT = "`worldtrace process --rebuild`"


def imported(store: Store, path: Path) -> None:
    """`worldtrace import PATH`, in process (a subprocess costs a second of start-up)."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    create = ["--create"] if not store.root.exists() else []
    r = CliRunner().invoke(cli, ["--store", str(store.root), "import", *create, str(path)])
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Store:
    """40 chats processed, 30 near-duplicates of them processed (clusters), 20 more
    near-duplicates imported: the next run reads every index file."""
    root = tmp_path_factory.mktemp("damaged-index")
    store = Store.at(root / "store")
    cfg = ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1)
    imported(store, chats(root / "a.jsonl", 0, 40))
    run(cfg)
    imported(store, chats(root / "c.jsonl", 0, 30, " extra"))
    assert run(cfg)["accounting"]["duplicates"] > 0
    imported(store, chats(root / "d.jsonl", 0, 20, " more"))
    return store


def copied(base: Store, tmp_path: Path) -> Store:
    """A copy of `base`, as `cp -a` makes it (the index's paths are matched at its place)."""
    subprocess.run(["cp", "-a", str(base.root), str(tmp_path / "copy")], check=True)
    return Store.at(tmp_path / "copy")


def first_segment(index: Path) -> Path:
    """The segment of the first import (40 records): its records' clusters change."""
    segments = sorted((index / "segments").glob("*.parquet"))
    return next(f for f in segments if pq.ParquetFile(f).metadata.num_rows == 40)


TARGETS = {
    "members": lambda index: index / "members.parquet",
    "templates": lambda index: index / "templates.parquet",
    "segment": first_segment,
    "probe": lambda index: sorted((index / "probe").iterdir())[0],
}


def cut(path: Path) -> None:
    """`truncate -s -10 PATH`: a copy cut short."""
    os.truncate(path, path.stat().st_size - 10)


def pages_damaged(path: Path, column: str) -> None:
    """The pages of a Parquet file's `column` overwritten, its footer intact: a disk
    fault under a valid footer (what a footer check does not see)."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    at = [group.column(i).path_in_schema for i in range(group.num_columns)].index(column)
    chunk = group.column(at)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(b"\xab" * chunk.total_compressed_size)


def snapshot(processed: Path) -> dict[str, tuple[int, int, int]]:
    """Every visible file of processed/ (tables, index, manifest) by size, mtime, inode."""
    out = {}
    for f in processed.rglob("*"):
        rel = f.relative_to(processed)
        if f.is_file() and not any(part.startswith(".") for part in rel.parts):
            st = f.stat()
            out[str(rel)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def refused(store: Store, path: Path, wt_env: dict[str, str]) -> str:
    """`worldtrace process` on a store whose index file `path` is damaged: exit 1, one
    line naming it and the rebuild, nothing published; returns the line."""
    before = snapshot(store.processed)
    r = subprocess.run(
        ["worldtrace", "--store", str(store.root), "process"],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "ERROR:apache_beam" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(path.resolve()) in lines[0] and HINT in lines[0], lines[0]
    assert snapshot(store.processed) == before  # nothing published
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".run-")]
    return lines[0]


def rebuilt(store: Store, path: Path, wt_env: dict[str, str]) -> None:
    """`worldtrace process --rebuild` makes the damaged file again: every record counted."""
    r = subprocess.run(
        ["worldtrace", "--store", str(store.root), "process", "--rebuild"],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    acc = json.loads((store.processed / "manifest.json").read_text())["accounting"]
    assert acc["balanced"] and acc["in"] == 90, acc
    if path.suffix == ".parquet":  # made again (a probe file's name is new)
        assert pq.read_table(path).num_rows


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_cut_index_file_is_named_with_the_rebuild_before_the_run(base, tmp_path, wt_env, target):
    store = copied(base, tmp_path)
    path = TARGETS[target](store.processed / "_index")
    cut(path)
    line = refused(store, path, wt_env)
    assert line.startswith(f"error: {path.resolve()}: "), line
    rebuilt(store, path, wt_env)


@pytest.mark.parametrize(
    ("target", "column"), [("members", "uid"), ("segment", "_uid"), ("templates", "key")]
)
def test_pages_that_do_not_decode_are_named_when_the_run_meets_them(
    base, tmp_path, wt_env, target, column
):
    """Under a valid footer the check before the run passes; the read in the pipeline
    (the cluster state in `IndexMatches`' setup, a segment in `RewriteEarlier`) or after
    it (the template counts) names the file."""
    store = copied(base, tmp_path)
    path = TARGETS[target](store.processed / "_index")
    pages_damaged(path, column)
    line = refused(store, path, wt_env)
    assert line.startswith(f"error: {path.resolve()}: unreadable Parquet ("), line


def test_the_check_reads_footers_and_the_ends_of_segments(base, tmp_path):
    """An undamaged index passes; a file lacking a column the run reads is named, and
    so is a segment cut short (its ends alone are read: its footer costs ~0.3 ms)."""
    from worldtrace.pipelines import segments as G

    store = copied(base, tmp_path)
    index = store.processed / "_index"
    assert G.index_problems(index) == []
    members = index / "members.parquet"
    pq.write_table(pq.read_table(members).drop_columns(["role"]), members)
    segment = first_segment(index)
    os.truncate(segment, 0)
    assert G.index_problems(index) == [
        (members, "lacks the column(s) role"),
        (segment, "unreadable Parquet (Parquet file size is 0 bytes)"),
    ]


class _Fails(beam.DoFn):
    def process(self, element):
        raise ValueError(f"no such thing as {element}")


def test_beams_log_of_a_failed_step_is_left_to_the_command():
    """Beam logs a step's exception with its traceback as it re-raises it with the
    step's name; the CLI's filter drops that record (the command says the error: one
    line for its own, Python's traceback, with the same frames, for a bug)."""
    from worldtrace.pipelines.process import ProcessConfig, make_runner, pipeline_options

    from worldtrace.errors import _DropMachineErrors

    seen: dict[str, list[logging.LogRecord]] = {"all": [], "kept": []}

    class Keep(logging.Handler):
        def __init__(self, into: list):
            super().__init__()
            self.into = into

        def emit(self, record):
            self.into.append(record)

    kept = Keep(seen["kept"])
    kept.addFilter(_DropMachineErrors())
    handlers = [Keep(seen["all"]), kept]
    logger = logging.getLogger("apache_beam.runners.common")
    for h in handlers:
        logger.addHandler(h)
    options = pipeline_options(ProcessConfig(workers=1))
    try:
        with (
            pytest.raises(ValueError, match=r"no such thing as 1 \[while running 'Boom'\]"),
            make_runner(ProcessConfig(workers=1), options) as runner,
            beam.Pipeline(runner=runner, options=options) as p,
        ):
            _ = p | beam.Create([1]) | "Boom" >> beam.ParDo(_Fails())
    finally:
        for h in handlers:
            logger.removeHandler(h)
    assert [r.levelno for r in seen["all"]] == [logging.ERROR]  # Beam's, with its traceback
    assert seen["kept"] == []
