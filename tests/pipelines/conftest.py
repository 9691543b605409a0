"""A processed store shared by the export tests (one Beam run per session)."""

from __future__ import annotations

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter, Store


@pytest.fixture(scope="session")
def processed(tmp_path_factory) -> Store:
    """400 synthetic trajectories (mcp, swe, terminal, web) through the real pipeline."""
    store = Store.at(tmp_path_factory.mktemp("exp") / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(generate(SyntheticConfig(n=400, seed=11)))
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


def decided_store(root, keep: float, raw: bool = False) -> Store:
    """8 synthetic trajectories written as processed, every turn decided `mixed` with
    `keep` (the decision processing adds: export refuses raw records), without a Beam
    run; with `raw`, also as the store's raw shard."""
    s = Store.at(root / "store")
    records = generate(SyntheticConfig(n=8, seed=5))
    if raw:
        with ShardWriter(s.raw / "s") as w:
            w.write(records)
    for t in records:
        for turn in t.turns:
            turn.category, turn.keep = "mixed", keep
    with ShardWriter(s.table("trajectories")) as w:
        w.write(records)
    return s
