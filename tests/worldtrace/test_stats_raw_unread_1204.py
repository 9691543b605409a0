"""Found (fault review, 2026-12-04): once the only raw shard was damaged, `stats` said
"trajectories by domain and source: no data yet" and "turn lengths (characters): no
data yet" while processed/ held every trajectory: the tables of the raw data now say
their shards are gone or unreadable."""

from __future__ import annotations

from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store

from worldtrace.summary import RAW_UNREAD

from .test_query import run_cli


def test_stats_says_the_raw_shards_are_unread_not_that_there_is_no_data(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "only") as w:
        w.write(corpus[:6])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    [shard] = w.paths
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    assert str(shard) in r.stderr  # the damaged shard, named
    out = " ".join(r.stdout.split())  # the lines as a terminal of any width folds them
    assert "no data yet" not in out
    for title in ("trajectories by domain and source", "turn lengths (characters)"):
        assert f"{title}: {RAW_UNREAD}" in out
    assert "turns per trajectory" in out and "not processed yet" not in out
