"""Turn samples need a target: a turn the loss leaves out makes no sample, only a count.

Found by an audit: `export --sample-mode turn` on the demo store wrote 269 samples, 20 of
them with `num_loss_tokens = 0` (turns the keep draw left out of the loss), while the
AgentWorldBench export of the same store wrote only the 249 target turns.
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import keep_turn
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.pipelines.writers import verify
from worldtrace.schemas import ShardWriter, read_records
from worldtrace.schemas.records import Action, Observation, Trajectory, Turn

TOKENIZER = str(default_tokenizer())


def do_export(inp, out, **kw) -> dict:
    return export(ExportConfig(input=str(inp), output=str(out), tokenizer=TOKENIZER, **kw))


def shard_rows(out) -> list[dict]:
    files = sorted(out.glob("**/*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def sample_ids(rs: list[dict]) -> list[str]:
    return [i for r in rs for i in (r.get("sample_ids") or [r["sample_id"]])]


def targets(store) -> tuple[set[str], Counter[str], int]:
    """The turn sample ids the keep draw (seed 0) puts in the loss, the turns it leaves out
    by domain, and the number of turns."""
    ids, left_out, n = set(), Counter(), 0
    for t in read_records(store.table("trajectories")):
        for k, turn in enumerate(t.turns):
            n += 1
            keep = 1.0 if turn.keep is None else turn.keep
            if keep_turn(t.trajectory_id, turn.index, 0, keep):
                ids.add(f"{t.trajectory_id}:t{k}")
            else:
                left_out[t.domain] += 1
    return ids, left_out, n


def test_turn_samples_are_the_target_turns_and_the_others_are_counted(processed, tmp_path):
    ids, left_out, n_turns = targets(processed)
    assert left_out and ids, "the corpus has turns in and out of the loss"
    m = do_export(processed.table("trajectories"), tmp_path / "t", sample_mode="turn")
    rs = shard_rows(tmp_path / "t")
    assert [r for r in rs if r["num_loss_tokens"] == 0] == []
    assert all(any(r["loss_mask"]) for r in rs)
    got = Counter(sample_ids(rs))
    assert set(got) == ids and set(got.values()) == {1}  # every target turn, exactly once
    c = m["counts"]
    skipped = c["turns_without_target"]
    assert skipped["turns"] == sum(left_out.values()) == n_turns - len(ids)
    assert {d: v["turns"] for d, v in skipped["by_domain"].items() if v["turns"]} == left_out
    assert set(skipped["by_domain"]) == set(c["by_domain"])  # every exported domain is listed
    assert c["samples"] == c["rows"] == len(rs) == len(ids)
    assert c["loss_tokens"] == sum(r["num_loss_tokens"] for r in rs)
    assert verify(tmp_path / "t") == []
    # the AgentWorldBench eval set has one line per target turn and counts the same turns
    awb = do_export(processed.table("trajectories"), tmp_path / "awb", format="agentworldbench")
    assert awb["counts"]["samples"] == len(ids)
    assert awb["counts"]["turns_without_target"] == skipped
    # trajectory samples are unchanged: nothing is left out
    traj = do_export(processed.table("trajectories"), tmp_path / "traj")
    assert traj["counts"]["turns_without_target"]["turns"] == 0
    assert traj["counts"]["samples"] == len(list(read_records(processed.table("trajectories"))))


def test_packed_split_turn_export_counts_what_its_shards_hold(processed, tmp_path):
    ids, left_out, n_turns = targets(processed)
    out = tmp_path / "ps"
    top = do_export(
        processed.table("trajectories"), out, sample_mode="turn", seq_len=1024, split="test=0.2"
    )
    assert verify(out) == []
    parts = {n: json.loads((out / n / "manifest.json").read_text()) for n in top["parts"]}
    held = set()
    for name, pm in parts.items():
        rs = shard_rows(out / name)
        got = sample_ids(rs)
        assert len(got) == len(set(got)) == pm["counts"]["samples"]
        assert pm["counts"]["loss_tokens"] == sum(r["num_loss_tokens"] for r in rs)
        held |= set(got)
    # a turn sample whose target truncation cut away is counted with the others
    skipped = top["counts"]["turns_without_target"]
    assert held <= ids and len(held) + skipped["turns"] == n_turns
    assert skipped["turns"] == sum(
        p["counts"]["turns_without_target"]["turns"] for p in parts.values()
    )
    assert skipped["turns"] >= sum(left_out.values())
    for d, v in skipped["by_domain"].items():
        assert v["turns"] == sum(
            p["counts"]["turns_without_target"]["by_domain"][d]["turns"] for p in parts.values()
        )
    assert top["counts"]["samples"] == len(held)


def test_one_turn_per_trajectory_is_drawn_among_its_target_turns(processed, tmp_path):
    ids, _, _ = targets(processed)
    m = do_export(
        processed.table("trajectories"),
        tmp_path / "one",
        sample_mode="turn",
        sample_turns="one",
        seed=0,
    )
    rs = shard_rows(tmp_path / "one")
    with_target = {i.split(":t")[0] for i in ids}
    assert sorted(r["trajectory_id"] for r in rs) == sorted(with_target)
    assert all(r["sample_id"] in ids and r["num_loss_tokens"] > 0 for r in rs)
    assert m["counts"]["samples"] == len(with_target)


def test_a_turn_with_no_target_token_left_makes_no_sample(tmp_path):
    """keep 0 in every keep mode, and turns the keep lets in that hold no target token: an
    empty observation without its end-of-turn target, a token draw that keeps none."""

    def turn(i, obs, keep):
        return Turn(i, Action("text", f"step {i}"), Observation(obs), category="mixed", keep=keep)

    records = [
        Trajectory(
            "terminal",
            turns=[
                turn(0, "a.txt b.txt", 1.0),
                turn(1, "removed", 0.0),
                turn(2, "", 1.0),
                turn(3, "done", None),
            ],
            trajectory_id="tt-a",
        ),
        Trajectory("web", turns=[turn(0, "<h1>Home</h1>", 0.0)], trajectory_id="tt-b"),
    ]
    with ShardWriter(tmp_path / "in") as w:
        w.write(records)
    for mode in ("turn", "token", "prefix"):
        for eot, skipped in ((True, {"terminal": 1, "web": 1}), (False, {"terminal": 2, "web": 1})):
            out = tmp_path / f"{mode}-{eot}"
            m = do_export(tmp_path / "in", out, sample_mode="turn", keep_mode=mode, eot_target=eot)
            rs = shard_rows(out)
            expect = {"tt-a:t0", "tt-a:t3"} | ({"tt-a:t2"} if eot else set())
            assert {r["sample_id"] for r in rs} == expect, (mode, eot)
            assert all(r["num_loss_tokens"] > 0 for r in rs)
            got = m["counts"]["turns_without_target"]
            assert {d: v["turns"] for d, v in got["by_domain"].items()} == skipped, (mode, eot)
            assert got["turns"] == sum(skipped.values())
            assert verify(out) == []
    # a token draw at keep 0.01 over a two-token observation keeps none: no sample either
    records = [
        Trajectory("swe", turns=[turn(0, "ok", 0.01), turn(1, "x " * 50, 1.0)], trajectory_id="c")
    ]
    with ShardWriter(tmp_path / "in2") as w:
        w.write(records)
    m = do_export(tmp_path / "in2", tmp_path / "tok", sample_mode="turn", keep_mode="token")
    assert [r["sample_id"] for r in shard_rows(tmp_path / "tok")] == ["c:t1"]
    assert m["counts"]["turns_without_target"]["turns"] == 1


def test_the_cli_says_the_turns_it_left_out(processed, tmp_path):
    """The summary names the count, so a user sees why samples < turns."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    _, left_out, _ = targets(processed)
    out = tmp_path / "cli"
    r = CliRunner().invoke(cli, ["--store", str(processed.root), "export", "--sample-mode",
                                 "turn", "--tokenizer", TOKENIZER, "-o", str(out)])  # fmt: skip
    assert r.exit_code == 0, r.output
    by = ", ".join(f"{d} {n}" for d, n in sorted(left_out.items()))
    assert f"left out {sum(left_out.values())} turn(s) without a target ({by})" in r.output
