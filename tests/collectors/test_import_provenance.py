"""Provenance (source.origin_path / origin_index), idempotent re-import, and `explain`
listing every trajectory an ambiguous id names."""

from __future__ import annotations

import io
import json
import random
import subprocess

from rich.console import Console
from worldtrace.collectors.importers import import_paths
from worldtrace.schemas import read_records
from worldtrace.schemas.views import connect

from worldtrace.summary import explain

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "river",
    "stone",
    "cloud",
    "ember",
    "frost",
    "grove",
]


def record(rid, rng, turns=3):
    msgs = [{"role": "user", "content": " ".join(rng.choices(WORDS, k=8))}]
    for k in range(turns):
        args = {"q": " ".join(rng.choices(WORDS, k=4)), "k": k}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{k}", "function": {"name": "lookup", "arguments": json.dumps(args)}}
                ],
            }
        )
        out = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 10**6)}" for _ in range(40))
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": out})
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    return {"id": rid, "messages": msgs, "tools": tools}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def wt(env, *args):
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def test_provenance_and_idempotent_reimport(tmp_path, wt_env):
    rng = random.Random(5)
    a = write_jsonl(tmp_path / "a.jsonl", [record("conv-1", rng), record("conv-2", rng)])
    b = write_jsonl(tmp_path / "b.jsonl", [record("conv-1", rng), record("conv-2", rng)])
    out = tmp_path / "out"
    calls = []
    r = import_paths([a, b, a], out, progress=lambda *done: calls.append(done))
    assert (r.imported["openai"], r.present["openai"]) == (4, 0)  # `a` named twice: read once
    assert calls == [(1, 2), (2, 4)]  # (files done, records done)
    got = sorted(
        (t.source.origin_id, t.source.origin_path, t.source.origin_index) for t in read_records(out)
    )
    assert got == [
        ("conv-1", str(a), 0),
        ("conv-1", str(b), 0),
        ("conv-2", str(a), 1),
        ("conv-2", str(b), 1),
    ]
    shards = sorted(out.iterdir())
    again = import_paths([b, a], out)
    assert (dict(again.imported), again.present["openai"]) == ({}, 4)
    assert sorted(out.iterdir()) == shards  # nothing written
    with open(a, "a") as fh:
        fh.write(json.dumps(record("conv-3", rng)) + "\n")
    more = import_paths([a], out)
    assert (more.imported["openai"], more.present["openai"]) == (1, 2)
    assert [t.source.origin_index for t in read_records(more.shards[0])] == [2]
    # the CLI says so
    assert wt(wt_env, "import", str(a)).returncode == 0
    r = wt(wt_env, "import", str(a))
    assert r.returncode == 0 and "already present" in r.stdout and "openai" in r.stdout


def test_explain_lists_every_match_of_an_ambiguous_id(tmp_path, wt_env):
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import Store

    rng = random.Random(7)
    files = [
        write_jsonl(tmp_path / f"{n}.jsonl", [record(f"conv-{i}", rng) for i in range(8)])
        for n in ("a", "b")
    ]
    store = Store.at(tmp_path / "store")
    assert import_paths(files, store.raw / "import").imported["openai"] == 16
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    con = connect(store)
    rows = con.execute(
        "SELECT trajectory_id, origin_path, origin_index, domain FROM trajectories"
        " WHERE origin_id = 'conv-3' ORDER BY trajectory_id"
    ).fetchall()
    assert len(rows) == 2
    r = wt(wt_env, "explain", "conv-3")
    assert r.returncode == 1
    assert "matches 2 trajectories" in r.stdout
    for tid, path, index, domain in rows:
        assert f"{tid}  {path}:line {index + 1}  {domain}" in r.stdout  # as import names it
    # a prefix shared by several ids lists them all
    ids = [t for (t,) in con.execute("SELECT trajectory_id FROM trajectories").fetchall()]
    prefix = max("0123456789abcdef", key=lambda c: sum(t.startswith(c) for t in ids))
    expected = [t for t in ids if t.startswith(prefix)]
    assert len(expected) > 1
    found, text = explained(con, prefix)
    assert not found and f"matches {len(expected)} trajectories" in text
    assert all(t in text for t in expected)
    # one id: explained, with where it came from
    tid, path, index, _ = rows[0]
    found, text = explained(con, tid)
    assert found and f"from {path}:line {index + 1}" in text and "turn 0" in text


def explained(con, tid):
    buf = io.StringIO()
    found = explain(con, tid, console=Console(file=buf, width=100))
    return found, buf.getvalue()
