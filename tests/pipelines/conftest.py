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
