"""Found (hunt 1206p), in what `stats` and `explain` say:

3. `stats` said `truncated 0.0` of a domain with one observation cut among 54,990 turns
   (the share rounded to 4 decimals), where docs/query.md says `0.0` means none was cut;
   now the count (`truncated_turns`) is beside a share never rounded to 0 or 1;
5. `explain` of the kept one of 1,000 identical records listed its 999 exact copies,
   ordered as text (S1, S10, S100, ...), before its first turn; now the first
   `MAX_COPIES` in order (S1, S2, ...) and a line counting the others with the query that
   lists them all (`explain --json` keeps every one).

Real parts: the OpenAI-messages importer on JSONL files, the real Beam pipeline, Parquet
and DuckDB, the CLI in process (as `test_query` runs it).
"""

from __future__ import annotations

import json
import re

from worldtrace.schemas import Store

from .test_query import run_cli


def conversation(rid: str, outputs: list[str]) -> str:
    """An OpenAI-messages record, a `bash` call per output (a turn each)."""
    messages = [{"role": "user", "content": "list things"}]
    for t, out in enumerate(outputs):
        call = {"id": f"c{t}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"ls d{t}"})}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": out},
        ]
    return json.dumps({"id": rid, "messages": messages}) + "\n"


# -- 3: one cut turn among more than 20,000 ------------------------------------------------


def test_stats_says_a_cut_turn_among_many(tmp_path):
    store = Store.at(tmp_path / "st")
    src = tmp_path / "many.jsonl"
    records, per = 21, 1000  # 21,000 turns: one is a share of 0.0000476, 0.0 in 4 decimals
    lines = [conversation(f"r{r}", [f"ok {r} {t}" for t in range(per)]) for r in range(records)]
    lines[7] = conversation("r7", ["x" * 300, *(f"ok 7 {t}" for t in range(1, per))])
    src.write_text("".join(lines))
    r = run_cli(store, "import", "--create", "--workers", "1",
                "--max-observation-chars", "100", str(src))  # fmt: skip
    assert r.exit_code == 0, r.output
    q = run_cli(store, "query", "SELECT count(*) FILTER (WHERE truncated), count(*) "
                "FROM raw_turns", "--format", "csv")  # fmt: skip
    assert q.stdout.splitlines()[1] == f"1,{records * per}", q.output

    doc = json.loads(run_cli(store, "stats", "--json").stdout)
    (row,) = doc["sections"]["turn_lengths"]
    assert row["turns"] == records * per
    assert row["truncated_turns"] == 1, row
    assert row["truncated"] > 0, row  # not 0.0: none was cut
    assert abs(row["truncated"] - 1 / (records * per)) < 1e-6, row

    out = run_cli(store, "stats").stdout
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "obs_max" in line)
    head, cells = lines[at], lines[at + 2]  # the header, a rule, the one domain's row
    columns = [c.strip() for c in re.split(r"[┃│]", head) if c.strip()]
    values = [c.strip() for c in re.split(r"[┃│]", cells) if c.strip()]
    said = dict(zip(columns, values, strict=True))
    assert said["truncated_turns"] == "1", out
    assert float(said["truncated"]) > 0, out


def test_stats_share_of_none_and_all_cut_is_exact(tmp_path):
    """0.0 and 1.0 stay what they were, none and all."""
    store = Store.at(tmp_path / "st")
    src = tmp_path / "few.jsonl"
    src.write_text(conversation("a", ["x" * 300] * 3) + conversation("b", ["y" * 300] * 2))
    r = run_cli(store, "import", "--create", "--max-observation-chars", "100", str(src))
    assert r.exit_code == 0, r.output
    (row,) = json.loads(run_cli(store, "stats", "--json").stdout)["sections"]["turn_lengths"]
    assert (row["truncated_turns"], row["truncated"]) == (5, 1.0), row
    store = Store.at(tmp_path / "st2")
    r = run_cli(store, "import", "--create", str(src))
    assert r.exit_code == 0, r.output
    (row,) = json.loads(run_cli(store, "stats", "--json").stdout)["sections"]["turn_lengths"]
    assert (row["truncated_turns"], row["truncated"]) == (0, 0.0), row


# -- 5: the exact copies of a record imported many times -----------------------------------

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "


def test_explain_lists_a_few_copies_in_order_and_names_the_rest(tmp_path):
    store = Store.at(tmp_path / "st")
    src = tmp_path / "same.jsonl"
    copies = 25  # S0 kept, S1..S24 exact copies of it
    outputs = [" ".join(f"{w}{t}" for w in (WORDS * 4).split()) for t in range(4)]
    src.write_text("".join(conversation(f"S{i}", outputs) for i in range(copies)))
    assert run_cli(store, "import", "--create", str(src)).exit_code == 0
    r = run_cli(store, "process")
    assert r.exit_code == 0, r.output

    r = run_cli(store, "explain", "S0")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    listed = [re.match(r"  exact copy, not kept: (\S+) ", x) for x in lines]
    listed = [m.group(1) for m in listed if m]
    assert 0 < len(listed) < copies - 1, r.output  # a few (`summary.MAX_COPIES`)
    assert listed == [f"S{i}" for i in range(1, len(listed) + 1)], r.output
    (more,) = [x for x in lines if "more exact copies" in x]
    left = copies - 1 - len(listed)
    assert more.startswith(f"  ... and {left} more exact copies, not kept"), more
    assert lines.index(more) < next(i for i, x in enumerate(lines) if x.startswith("turn 0"))

    sql = re.search(r'worldtrace query "(.+)"\)$', more).group(1)
    q = run_cli(store, "query", sql, "--format", "csv")
    assert q.exit_code == 0, q.output
    ids = [row.split(",")[0] for row in q.stdout.splitlines()[1:]]
    assert ids == [f"S{i}" for i in range(1, copies)], q.output

    doc = json.loads(run_cli(store, "explain", "S0", "--json").stdout)
    assert [c["origin_id"] for c in doc["copies"]] == ids  # every one, in that order
