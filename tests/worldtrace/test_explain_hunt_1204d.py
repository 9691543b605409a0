"""Found (user hunt 1204d): `explain ID` read an origin id as an id prefix too, so the
whole id a source gave (`c1`, `42`: short, and often hex digits) named every trajectory
whose hash starts with it. In a store of 3,000 trajectories `worldtrace explain c1`
listed 10 candidates and exited 1, the one from `c1` among them; a record with that
origin id that a filter dropped was not said at all (the prefix matches hid it).

The store is made as a user makes it: an OpenAI chat JSONL imported with `worldtrace
import`, processed by the real pipeline."""

from __future__ import annotations

import json

import pytest
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import Store

from .test_query import run_cli

HEX = "0123456789abcdef"
KEPT, DROPPED = HEX[:8], HEX[8:]
"""Origin ids: records that stay (3 turns) and records min_turns drops (1 turn)."""


def chat(origin_id: str, turns: int) -> dict:
    """One OpenAI chat record with `turns` tool calls, each answered."""
    messages = [{"role": "user", "content": f"task {origin_id}"}]
    for k in range(turns):
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {k}"})}}  # fmt: skip
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}",
             "content": f"{origin_id} listing {k}: " + " ".join(f"f{origin_id}{k}{j}" for j in range(30))},
        ]  # fmt: skip
    return {"id": origin_id, "messages": messages}


@pytest.fixture
def imported(tmp_path) -> Store:
    """Kept records `0`..`7` and `k0`..`k39`, and records `8`..`f` that min_turns drops."""
    src = tmp_path / "chats.jsonl"
    records = [chat(o, 3) for o in KEPT] + [chat(o, 1) for o in DROPPED]
    records += [chat(f"k{i}", 3) for i in range(40)]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = Store.at(tmp_path / "store")
    r = run_cli(store, "import", "--create", str(src))
    assert r.exit_code == 0, r.output
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


def ids_by_origin(store: Store, view: str) -> dict[str, str]:
    sql = f"SELECT origin_id, trajectory_id FROM {view}"
    r = run_cli(store, "query", sql, "--format", "json")
    assert r.exit_code == 0, r.output
    return {row["origin_id"]: row["trajectory_id"] for row in json.loads(r.stdout)}


def explained(store: Store, query: str) -> dict:
    r = run_cli(store, "explain", query, "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0, (query, doc["status"], doc.get("matches"))
    return doc


def test_an_origin_id_that_is_also_an_id_prefix_explains_that_origin(imported):
    kept = ids_by_origin(imported, "trajectories")
    # the origin ids some other trajectory's id starts with (the data is fixed: the same
    # ones on every run)
    clash = [o for o in KEPT if any(t.startswith(o) and k != o for k, t in kept.items())]
    assert clash, kept
    for origin in clash:
        doc = explained(imported, origin)
        assert doc["status"] == "explained"
        assert (doc["origin_id"], doc["trajectory_id"]) == (origin, kept[origin])
    # a prefix that is no origin id still names the trajectory it starts
    tid = kept["k7"]
    assert explained(imported, tid[:12])["trajectory_id"] == tid


def test_the_origin_id_of_a_dropped_record_says_why_it_was_dropped(imported):
    kept = ids_by_origin(imported, "trajectories")
    raw = ids_by_origin(imported, "raw_trajectories")
    clash = [o for o in DROPPED if any(t.startswith(o) for t in kept.values())]
    assert clash, kept
    for origin in clash:
        doc = explained(imported, origin)
        assert doc["status"] == "dropped", doc
        assert [(r["trajectory_id"], r["origin_id"], r["stage"], r["reason"])
                for r in doc["rejects"]] == [(raw[origin], origin, "filter", "min_turns")]  # fmt: skip
        assert doc["duplicates"] == []
