"""Found (an ML engineer's export session, 2026-12-04 evening): an export that ran while
`process --rebuild` published mixed the two runs' shards (a publish swaps whole table
directories and the shard names stay), its manifest named the new run's policy only,
and `export --verify` passed: 7.9M of 11.2M loss tokens from a policy the manifest said
was off. An export now holds processed/'s lock shared for its whole run: it refuses to
start while a run writes, and a run refuses to start while an export reads.
Real parts: a real `worldtrace process` subprocess, the real CLI in process, Parquet."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.process import ProcessConfig, StoreBusy, run
from worldtrace.schemas import Store
from worldtrace.schemas.tempfiles import try_lock

from worldtrace.cli import cli

from ..conftest import wait_until
from .test_process import big_raw, cli_process


def cli_export(store: Store, out, *args: str):
    return CliRunner().invoke(
        cli,
        ["--store", str(store.root), "export", "--format", "agentworldbench", "-o", str(out),
         "--progress-every", "0", *args],
    )  # fmt: skip


def test_an_export_refuses_to_start_while_a_process_run_writes(tmp_path, wt_env):
    store = Store.at(tmp_path / "store")
    big_raw(store, seed=7)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    lock = store.processed / ".process.lock"
    first = cli_process(store, wt_env, "--workers", "1", "--rebuild", "--json")
    try:
        wait_until(lambda: lock.exists() and lock.read_text().strip(), what="the run's lock")
        r = cli_export(store, tmp_path / "during")
        assert r.exit_code == 1, r.output
        assert "a `worldtrace process` run is writing this store (pid " in r.output
        assert "export when it has finished" in r.output
        assert not (tmp_path / "during").exists()  # nothing written
        _, errs = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, errs
    r = cli_export(store, tmp_path / "after")  # released: the export goes ahead
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "after" / "manifest.json").read_text())["counts"]["samples"] > 0


def test_a_process_run_refuses_to_start_while_an_export_reads(tmp_path):
    from worldtrace.schemas.publish import reading

    store = Store.at(tmp_path / "store")
    big_raw(store, seed=8)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    held: list[bool] = []

    def progress(done, total):  # mid-export: the lock is held, a run cannot take it
        fh = try_lock(store.processed / ".process.lock")
        held.append(fh is None)
        if fh is not None:
            fh.close()

    cfg = ExportConfig(input=str(store.table("trajectories")), output=str(tmp_path / "e"),
                       format="agentworldbench")  # fmt: skip
    export(cfg, batch=256, progress=progress)
    assert len(held) > 1 and all(held)
    busy = r"a `worldtrace export` is reading this store"
    with reading(store.processed), pytest.raises(StoreBusy, match=busy):  # as an export holds it
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), rebuild=True))
    assert run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
