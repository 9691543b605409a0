"""Found (hunt 1205f): two processed trajectories that share a trajectory id (identical
records kept apart, as `process --set dedup.exact=false --set dedup.near=false` does)
got each other's turn decisions in the `trajectories` view, in `explain` and in
`export --where`. Two identical OpenAI chats (origin ids oa-1, oa-2): the `turns` view
read retrieval 1.0, action 1.0, transform 0.5 for each, the `trajectories` view's nested
turns retrieval, retrieval, action; `explain oa-1` showed turn 1 `retrieval` with turn
0's rule and turn 2 `action`, keep 1.00, in loss. The view gathered the turns of a
trajectory by its id alone: both copies' turns made one list in turn order (t0, t0, t1,
t1, ...), read by position. It now gathers them by the id and the cluster the trajectory
represents (`tables.TURN_CLUSTER`).

Real parts: `worldtrace import` of a JSONL file, the real `process` (Beam) with the
documented settings, the DuckDB views, `explain --json`, `export --where`.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.schemas import Store
from worldtrace.schemas.views import connect

from worldtrace.cli import cli

TURNS = [  # (command, output): decided retrieval, action, transform
    ("ls /data", "alpha.txt beta.txt gamma.txt delta.txt epsilon.txt zeta.txt eta.txt theta.txt"),
    ("cat alpha.txt long name here please", "ok done"),
    ("echo one two three four five six seven eight nine ten", "one two three four five six x"),
]
WANT = [("retrieval", 1.0), ("action", 1.0), ("transform", 0.5)]
NO_DEDUP = ("--set", "dedup.exact=false", "--set", "dedup.near=false")


def chat(origin: str) -> str:
    messages = [{"role": "user", "content": "look at the data"}]
    for k, (command, output) in enumerate(TURNS):
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": output},
        ]
    return json.dumps({"id": origin, "messages": messages})


def cli_run(store: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store.root), *args], obj={})


def imported(tmp_path, *process_args: str) -> Store:
    """Two identical chats imported and processed with `process_args`."""
    src = tmp_path / "chats.jsonl"
    src.write_text(chat("oa-1") + "\n" + chat("oa-2") + "\n")
    store = Store.at(tmp_path / "store")
    r = cli_run(store, "import", "--create", str(src))
    assert r.exit_code == 0, r.output
    r = cli_run(store, "process", *process_args)
    assert r.exit_code == 0, r.output
    return store


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> Store:
    return imported(tmp_path_factory.mktemp("twins"), *NO_DEDUP)


def nested(con, origin: str) -> list[tuple]:
    """(category, keep, rule, corpus_surprisal) of each nested turn of the trajectory of `origin`."""
    [(turns,)] = con.execute(
        "SELECT [(t.category, t.keep, t.rule, t.stats.corpus_surprisal) FOR t IN turns] "
        "FROM trajectories WHERE origin_id = $o",
        {"o": origin},
    ).fetchall()
    return [tuple(t.values()) if isinstance(t, dict) else tuple(t) for t in turns]


def flat(con, origin: str) -> list[tuple]:
    """The same fields from the `turns` view, in turn order."""
    return con.execute(
        "SELECT category, keep, rule, corpus_surprisal FROM turns WHERE origin_id = $o "
        "ORDER BY turn_index",
        {"o": origin},
    ).fetchall()


def test_the_trajectories_view_gives_each_copy_its_own_turns(twins):
    con = connect(twins)
    ids = con.execute("SELECT DISTINCT trajectory_id FROM trajectories").fetchall()
    assert len(ids) == 1 and con.execute("SELECT count(*) FROM trajectories").fetchone()[0] == 2
    for origin in ("oa-1", "oa-2"):
        assert [t[:2] for t in flat(con, origin)] == WANT
        assert nested(con, origin) == flat(con, origin), origin


def test_explain_shows_each_turn_its_own_decision(twins):
    r = cli_run(twins, "explain", "oa-1", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    turns = [(t["category"], t["keep"]) for t in doc["turns"]]
    assert turns == WANT
    assert [t["rule"].split(":")[0] for t in doc["turns"]] == [c for c, _ in WANT]
    assert [t["in_loss"] for t in doc["turns"]][:2] == [True, True]


def test_explain_of_each_copy_shows_that_copy_and_their_id_lists_both(twins):
    """`explain oa-2` showed oa-1's origin (the first row of their shared id); the id
    itself names two kept trajectories now: listed, each with where it was read."""
    for origin in ("oa-1", "oa-2"):
        doc = json.loads(cli_run(twins, "explain", origin, "--json").stdout)
        assert doc["status"] == "explained" and doc["origin_id"] == origin, doc
    tid = doc["trajectory_id"]
    doc = json.loads(cli_run(twins, "explain", tid, "--json").stdout)
    assert doc["status"] == "ambiguous"
    assert sorted(m["origin_id"] for m in doc["matches"]) == ["oa-1", "oa-2"]


def test_export_where_reads_each_copy_s_own_turns(twins, tmp_path):
    where = "[t.category FOR t IN turns] = ['retrieval', 'action', 'transform']"
    r = cli_run(twins, "export", "-o", str(tmp_path / "e"), "--where", where)
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert manifest["where"]["left_out"] == 0


def test_turns_written_before_the_cluster_column_still_join_by_id(tmp_path):
    """A store processed before `_cluster` existed (exact dedup on: every kept id once)
    reads as it did: its turns files without the column join their trajectory by id."""
    store = imported(tmp_path)  # default dedup: one kept
    for f in (store.processed / "turns").glob("*.parquet"):
        t = pq.read_table(f)
        if "_cluster" in t.column_names:  # `tables.TURN_CLUSTER`
            pq.write_table(t.drop_columns(["_cluster"]), f)
    con = connect(store)
    assert con.execute("SELECT count(*) FROM trajectories").fetchone()[0] == 1
    assert nested(con, "oa-1") == flat(con, "oa-1")
    assert all(t[3] is not None for t in nested(con, "oa-1"))  # corpus_surprisal filled in
