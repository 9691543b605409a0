"""Review of incremental `process` (1203b, F3): the reading commands say when raw files
processed before are gone, as `process` does."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store

from worldtrace.cli import cli


def invoke(store: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store.root), *args], obj={})


def test_stats_names_processed_raw_files_that_are_gone(store, corpus, tmp_path):
    """Found: after a processed raw shard was deleted, `process` warned that its records
    stay until `--rebuild`, but `stats` (whose help says it warns when the processed data
    is out of date), `report` and `export` said nothing: a user who deleted bad data
    trained on it. They name the file and how to drop its records."""
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:6])
    with ShardWriter(store.raw / "b") as w:
        w.write(corpus[6:10])
    [gone] = w.paths
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert invoke(store, "stats").stderr == ""
    shutil.rmtree(store.raw / "b")
    r = invoke(store, "stats")
    assert r.exit_code == 0, r.output
    [line] = [x for x in r.stderr.splitlines() if str(gone) in x]
    assert "1 raw file(s) processed before are gone" in line
    assert "`worldtrace process --rebuild` removes them" in line
    doc = json.loads(invoke(store, "stats", "--json").stdout)
    assert any(str(gone) in n and "--rebuild" in n for n in doc["notes"])
    html = tmp_path / "report.html"
    r = invoke(store, "report", "-o", str(html))
    assert r.exit_code == 0 and str(gone) in r.stderr and "--rebuild" in r.stderr
    # the same store elsewhere (`cp -a`): the recorded paths are matched at its new place
    moved = Store.at(tmp_path / "moved")
    shutil.copytree(store.root, moved.root)
    r = invoke(moved, "stats")
    assert str(moved.raw) in r.stderr and str(store.raw) not in r.stderr
    # a rebuild drops their records: nothing to say any more
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), rebuild=True))
    assert invoke(store, "stats").stderr == ""
