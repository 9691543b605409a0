"""The report's cluster-size plot counted a cluster once per domain (hunt 12-06t): exact
copies imported under two domains are one dedup cluster, which `stats` counts in its
representative's domain, but the plot drew a cluster of 1 ("no duplicate") in each, and
its clusters summed to more than the table under it. Real parts: the OpenAI-messages
importer, the real Beam pipeline, DuckDB, the report's own chart code."""

from __future__ import annotations

import json

from worldtrace.schemas import Store
from worldtrace.schemas.views import connect

from worldtrace import report_charts

from .test_query import run_cli


def conversation(rid: str) -> str:
    messages = [{"role": "system", "content": "shell agent"}, {"role": "user", "content": "go"}]
    for i, (cmd, out) in enumerate([("ls -la", "total 8\nREADME.md"), ("cat README.md", "# Demo")]):
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": out},
        ]
    return json.dumps({"id": rid, "messages": messages}) + "\n"


def test_a_cluster_across_two_domains_is_one_cluster_of_two(tmp_path):
    store = Store.at(tmp_path / "st")
    (tmp_path / "t.jsonl").write_text(conversation("t1"))
    (tmp_path / "s.jsonl").write_text(conversation("s1"))
    assert run_cli(store, "import", "--create", "--domain", "terminal", str(tmp_path / "t.jsonl")).exit_code == 0  # fmt: skip
    assert run_cli(store, "import", "--domain", "swe", str(tmp_path / "s.jsonl")).exit_code == 0
    assert run_cli(store, "process").exit_code == 0
    con = connect(store)
    [(kept,)] = con.execute("SELECT domain FROM clusters WHERE representative").fetchall()
    fig = report_charts.cluster_sizes(con)
    bars = {t.name: (list(t.x), list(t.y)) for t in fig.data}
    assert bars == {kept: ([2], [1])}, bars
