"""Counts a user gives on the command line are checked where click reads them.

Found (docs review, 2026-12-04): `demo --episodes 0` ran, printed a config error from
inside the run and then `no Parquet or JSONL input`, exit 1 (`--episodes -1` with
`--sections docker` exited 0); `redact --check --show -1` printed `... 1 more` of
nothing. Each is a usage error now (exit 2,
naming the option), before any work."""

from __future__ import annotations

import pytest
from worldtrace.schemas import Store

from .test_query import run_cli


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["demo", "--sections", "mcp", "--episodes", "0"], "--episodes"),
        (["demo", "--sections", "docker", "--episodes", "-1"], "--episodes"),
        (["redact", "--check", "--show", "-1"], "--show"),
    ],
)
def test_a_count_out_of_range_is_a_usage_error_before_any_work(tmp_path, args, option):
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    (tmp_path / "none.jsonl").write_text("")
    r = run_cli(store, *(a.format(tmp=tmp_path) for a in args))
    assert r.exit_code == 2, r.output
    assert f"Invalid value for '{option}'" in r.output
    assert not (store.root / "raw").exists() and not (tmp_path / "worldtrace-demo").exists()
