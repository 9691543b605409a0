"""`explain ORIGIN_ID` after an edited record was imported again (hunt 12-06p): the edit
is another content beside the old one (`record_changed`), and processing kept one of
the two, the other a near duplicate. `explain job-7` explained the kept one alone, exit
0, and said nothing of the other version of job-7; docs/query.md: an id naming several
trajectories lists them all and exits 1. Now both are listed, each explainable by id.

Real parts: the OpenAI-messages importer on a JSONL file, the real Beam pipeline,
Parquet and DuckDB, the CLI in process.
"""

from __future__ import annotations

import json

from worldtrace.schemas import Store

from .test_query import run_cli

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
    "rho sigma tau upsilon phi chi psi omega "
) * 4


def conversation(first: str) -> str:
    messages = [{"role": "user", "content": "list things"}]
    for t in range(4):
        call = {"id": f"c{t}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"ls dir{t}"})}}  # fmt: skip
        out = " ".join(w + str(t) for w in WORDS.split())
        if t == 0:
            out = out.replace("alpha0 ", first + " ", 1)
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": out},
        ]
    return json.dumps({"id": "job-7", "messages": messages}) + "\n"


def test_explain_of_an_origin_id_lists_its_dropped_version_too(tmp_path):
    store = Store.at(tmp_path / "st")
    src = tmp_path / "in.jsonl"
    src.write_text(conversation("alpha0"))
    assert run_cli(store, "import", "--create", str(src)).exit_code == 0
    assert run_cli(store, "process").exit_code == 0
    src.write_text(conversation("ALPHA0-FIXED"))
    r = run_cli(store, "import", str(src))
    assert r.exit_code == 0, r.output
    assert run_cli(store, "process").exit_code == 0
    ids = run_cli(store, "query", "SELECT trajectory_id, role FROM clusters ORDER BY 2",
                  "--format", "csv").output.split()[1:]  # fmt: skip
    roles = dict(line.split(",")[::-1] for line in ids)
    assert set(roles) == {"near", "representative"}, ids
    r = run_cli(store, "explain", "job-7")
    assert r.exit_code == 1, r.output
    assert "'job-7' matches 2 trajectories" in r.output
    assert roles["near"] in r.output and roles["representative"] in r.output
    near = run_cli(store, "explain", roles["near"])
    assert "duplicate in cluster" in near.output and "not kept" in near.output
