"""Found (a new user's import session, 2026-12-04 evening): control characters from the
data reached the terminal as they were. A tool named `ESC]0;PWNED BEL ESC[2J...` retitled
and cleared the terminal through `process`'s filtered lines, and `query`'s table and
`explain`'s excerpts did the same with a terminal output's colours. And a raw shard
dated in year 10000 (another writer's; import now refuses it) made `report` fail with
Python's traceback."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import ShardWriter, Store

from .test_query import run_cli

EVIL = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mevil"
SHOWN = "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mevil"


def chat(rid, name="bash", output="a.txt"):
    """Two calls (`process` keeps two turns or more), the first of tool `name`."""
    msgs = [{"role": "user", "content": "list files"}]
    for k, (tool, out) in enumerate([(name, output), ("bash", "b.txt")]):
        call = {"id": f"c{k}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        msgs += [{"role": "assistant", "content": "", "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": out}]  # fmt: skip
    return {
        "id": rid,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
        "messages": [*msgs, {"role": "assistant", "content": "done"}],
    }


def test_data_never_drives_the_terminal(tmp_path):
    store = Store.at(tmp_path / "store")
    src = tmp_path / "chats.jsonl"
    records = [chat("evil-tool", name=EVIL), chat("colours", output=f"{EVIL}\nline 2")]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_paths([src], store.raw / "import")

    r = run_cli(store, "process")
    assert r.exit_code == 0, r.output
    assert f"filter: undeclared_tool:{SHOWN}" in r.stderr  # the filtered line, escaped
    assert "\x1b" not in r.output and "\x07" not in r.output

    r = run_cli(
        store, "query", "SELECT origin_id, turns[1].observation.text AS o FROM trajectories"
    )
    assert r.exit_code == 0, r.output
    assert SHOWN in r.stdout and "\x1b" not in r.stdout  # the table, escaped
    r = run_cli(
        store, "query", "SELECT turns[1].observation.text FROM trajectories", "--format", "csv"
    )
    assert EVIL in r.stdout  # CSV is data: as it is

    r = run_cli(store, "explain", "colours")
    assert r.exit_code == 0, r.output
    assert f"observation: {SHOWN}⏎line 2" in r.stdout and "\x1b" not in r.stdout


def test_report_leaves_out_times_no_datetime_holds_and_says_so(tmp_path, corpus):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "other") as w:
        w.write(corpus[:6])
    [shard] = w.paths
    t = pq.read_table(shard)
    at = t.schema.get_field_index("started_at")
    year_10000 = 253402300800 * 1_000_000 + 13 * 3600 * 1_000_000  # 10000-01-01 13:00 UTC
    started = t.column(at).cast(pa.int64()).to_pylist()
    started[:2] = [year_10000, year_10000]
    t = t.set_column(at, t.field(at), pa.array(started, pa.int64()).cast(t.field(at).type))
    pq.write_table(t, shard)
    run_cli(store, "process")
    out = tmp_path / "report.html"
    r = run_cli(store, "report", "--output", str(out))
    assert r.exit_code == 0, r.output
    assert "2 dated outside years 1-9999 UTC not shown" in out.read_text()
