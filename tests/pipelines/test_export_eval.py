"""Eval sets the official AgentWorldBench evaluation reads, and held-out splits by dedup cluster."""

from __future__ import annotations

import json
import subprocess

import pyarrow.parquet as pq
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import keep_turn
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.pipelines.writers import verify
from worldtrace.schemas import ShardWriter, read_records
from worldtrace.schemas.records import Action, Dedup, Observation, System, Trajectory, Turn
from worldtrace.schemas.store import read_table

TOKENIZER = str(default_tokenizer())


def test_agentworldbench_split_is_read_by_the_official_loader(
    processed, tmp_path, wt_env, official_loader
):
    out = tmp_path / "awb"
    r = subprocess.run(
        ["worldtrace", "export", "--format", "agentworldbench", "--split", "test=0.05",
         "--input", str(processed.table("trajectories")), "--output", str(out)],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    trajs = {t.trajectory_id: t for t in read_records(processed.table("trajectories"))}
    test_items, errors = official_loader(out / "test")
    assert errors == [] and test_items
    assert official_loader(out / "train") == ([], [])  # the train part is no eval set
    train_lines = [
        json.loads(x)
        for f in (out / "train").glob("*_train.jsonl")
        for x in f.read_text().splitlines()
    ]
    sides = {}
    for side, ids in (("test", [i for i, _, _ in test_items]), ("train", [x["id"] for x in train_lines])):  # fmt: skip
        tids = {i.rsplit("/", 1)[0] for i in ids}
        sides[side] = {trajs[t].dedup.cluster_id for t in tids}
    assert sides["test"] and sides["train"] and not sides["test"] & sides["train"]
    # every kept turn of a test trajectory is one record; the messages are the trajectory's
    expected = 0
    for tid in {i.rsplit("/", 1)[0] for i, _, _ in test_items}:
        t = trajs[tid]
        expected += sum(keep_turn(tid, x.index, 0, x.keep) for x in t.turns)
    assert len(test_items) == expected
    rid, messages, target = test_items[0]
    tid, n = rid.rsplit("/", 1)
    t = trajs[tid]
    assert messages[-1]["content"] == t.turns[int(n) - 1].action.text
    assert target == t.turns[int(n) - 1].observation.text
    assert "# Simulation instruction" in messages[0]["content"]
    assert verify(out) == []
    top = json.loads((out / "manifest.json").read_text())
    assert set(top["parts"]) == {"train", "test"} and top["split"]["by"] == "dedup.cluster_id"
    assert top["counts"]["trajectories"] == len(trajs)


def test_agentworldbench_without_split_writes_domain_eval_files(
    processed, tmp_path, official_loader
):
    m = export(
        ExportConfig(
            input=str(processed.table("trajectories")),
            output=str(tmp_path / "e"),
            format="agentworldbench",
        )
    )
    names = sorted(p.name for p in (tmp_path / "e").glob("*.jsonl"))
    assert names == [f"{d}_test.jsonl" for d in ("mcp", "swe", "terminal", "web")]
    items, errors = official_loader(tmp_path / "e")
    assert errors == [] and len(items) == m["counts"]["rows"] == m["counts"]["samples"]
    first = json.loads((tmp_path / "e" / "swe_test.jsonl").read_text().splitlines()[0])
    assert set(first) == {
        "id",
        "task",
        "system_str",
        "prompt",
        "response",
        "turn_idx",
        "worldtrace",
    }  # fmt: skip  (the last: provenance, unread by the loader)
    assert isinstance(first["turn_idx"], int) and first["task"] == "worldtrace/swe"
    assert verify(tmp_path / "e") == []


def clustered_records(n_clusters: int = 12, size: int = 5) -> list[Trajectory]:
    """Near-duplicate groups that processing would keep together (dedup set by hand)."""
    out = []
    for c in range(n_clusters):
        for k in range(size):
            turns = [
                Turn(
                    0,
                    Action("keystrokes", f"cat f{c}.txt\n"),
                    Observation(f"body {c} v{k}\n$ "),
                    keep=1.0,
                ),
                Turn(
                    1, Action("keystrokes", "ls\n"), Observation(f"f{c}.txt g{k}.txt\n$ "), keep=1.0
                ),
            ]
            t = Trajectory("terminal", turns=turns, system=System(task_description=f"task {c}"))
            t.with_id()
            t.dedup = Dedup(t.trajectory_id, f"cluster-{c}", k == 0)
            out.append(t)
    return out


def test_split_holds_out_whole_clusters_deterministically(tmp_path):
    recs = clustered_records()
    with ShardWriter(tmp_path / "in") as w:
        w.write(recs)
    cluster = {t.trajectory_id: t.dedup.cluster_id for t in recs}

    def run(out, split_seed, seed=0):
        cfg = ExportConfig(
            input=str(tmp_path / "in"),
            output=str(out),
            tokenizer=TOKENIZER,
            split="test=0.3",
            split_seed=split_seed,
            seed=seed,
        )
        m = export(cfg)
        side = {}
        for part in ("train", "test"):
            for f in (out / part).glob("*.parquet"):
                assert f.name.startswith(f"{part}-export-")
                for tid in pq.read_table(f, columns=["trajectory_id"]).column(0).to_pylist():
                    side[tid] = part
        return m, side

    m, side = run(tmp_path / "a", 0)
    assert set(side) == set(cluster)
    by_cluster = {}
    for tid, part in side.items():
        by_cluster.setdefault(cluster[tid], set()).add(part)
    assert all(len(parts) == 1 for parts in by_cluster.values())  # no cluster on both sides
    assert {p for parts in by_cluster.values() for p in parts} == {"train", "test"}
    assert m["parts"]["test"]["counts"]["trajectories"] == sum(v == "test" for v in side.values())
    assert verify(tmp_path / "a") == []
    _, again = run(tmp_path / "b", 0)
    assert again == side
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (
        tmp_path / "b" / "manifest.json"
    ).read_bytes()
    _, other = run(tmp_path / "c", 7)
    assert other != side  # the split seed moves whole clusters
    _, same = run(tmp_path / "d", 0, seed=7)
    assert same == side  # the mask seed does not
    test_manifest = json.loads((tmp_path / "a" / "test" / "manifest.json").read_text())
    assert test_manifest["part"] == "test" and test_manifest["split"]["fractions"] == {"test": 0.3}
    # a corrupted part fails the top-level verification
    shard = next((tmp_path / "a" / "test").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-5])
    assert any(shard.name in p for p in verify(tmp_path / "a"))


def test_bad_split_is_one_clear_error(processed, tmp_path):
    import pytest

    for spec, words in (("test", "PART=FRACTION"), ("test=2", "fraction"), ("train=0.1", "other than"),
                        ("a=0.6,b=0.5", "sum")):  # fmt: skip
        cfg = ExportConfig(
            input=str(processed.table("trajectories")), output=str(tmp_path / "x"), split=spec
        )
        with pytest.raises(ValueError, match=words):
            export(cfg)
    assert not (tmp_path / "x").exists()


def test_processed_clusters_table_agrees(processed):
    """The cluster ids the split reads (dedup.cluster_id) are those of the clusters table."""
    kept = read_table(
        processed.table("trajectories"), columns=["trajectory_id", "dedup"]
    ).to_pylist()
    table = {
        r["trajectory_id"]: r["cluster_id"]
        for r in read_table(processed.table("clusters")).to_pylist()
    }
    assert kept and all(table[r["trajectory_id"]] == r["dedup"]["cluster_id"] for r in kept)
