"""Found (a new user's walk through the docs, 2026-12-04 night): a store made with
`process --input DIR` (raw files kept outside it) had `stats` and the report say of
the raw tables "no raw shard read: they are gone or unreadable (any damaged one is named
above)": nothing was gone and nothing was named. They say where the data came from.

Real parts: OpenAI chat JSONL imported and processed through the real CLI, the real
views and report."""

from __future__ import annotations

from worldtrace.schemas import Store

from worldtrace.summary import RAW_ELSEWHERE, RAW_UNREAD

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def test_a_store_processed_from_outside_says_where_its_raw_data_is(tmp_path):
    elsewhere = Store.at(tmp_path / "imported")
    r = run_cli(elsewhere, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 4)))
    assert r.exit_code == 0, r.output
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "--create", "process", "--input", str(elsewhere.raw))
    assert r.exit_code == 0, r.output
    r = run_cli(store, "stats")
    assert r.exit_code == 0, r.output
    said = r.output.replace("\n", " ")
    assert RAW_UNREAD not in said and "gone or unreadable" not in said
    assert f"trajectories by domain and source: {RAW_ELSEWHERE}" in " ".join(said.split())
    report = tmp_path / "r.html"
    assert run_cli(store, "report", "-o", str(report)).exit_code == 0
    html = report.read_text()
    assert "raw/ holds no shard" in html and "gone or unreadable" not in html
