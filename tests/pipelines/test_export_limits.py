"""Export's length limits, input checks, split seed and targets (findings of an export audit).

- a turn sample over `--max-len` drops its oldest history in both overflow modes; only a
  target that alone does not fit is truncated, and counted in `counts.truncated`;
- negative lengths are refused naming the option given;
- unprocessed (raw) input is refused: it has no mask decisions;
- `--split-seed` draws the held-out clusters, independent of the mask `--seed`;
- no sample or packed row without a target token is written, and an export with no target
  at all is an error;
- a processing run that kept nothing is said as such, not as "run process first";
- `--split` naming a part twice is refused.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import SyntheticConfig, build, generate
from worldtrace.pipelines.export import ExportConfig, export, parse_split
from worldtrace.pipelines.inputs import CLUSTER, iter_batches
from worldtrace.pipelines.mask import unit_draw
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.pipelines.writers import verify
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas.records import Action, Observation, Trajectory, Turn

from worldtrace.cli import cli

from .conftest import decided_store

TOKENIZER = str(default_tokenizer())


def do_export(inp, out, **kw) -> dict:
    return export(ExportConfig(input=str(inp), output=str(out), tokenizer=TOKENIZER, **kw))


def shard_rows(out) -> dict[str, dict]:
    files = sorted(out.glob("**/*.parquet"))
    return {r["sample_id"]: r for f in files for r in pq.read_table(f).to_pylist()}


def cli_run(store, *args):
    return CliRunner().invoke(
        cli, ["--store", str(store.root), "export", "--tokenizer", TOKENIZER, *args], obj={}
    )


def turn(i: int, obs: str, keep: float = 1.0) -> Turn:
    return Turn(
        i, Action("keystrokes", f"cat part{i}.txt\n"), Observation(obs), category="mixed", keep=keep
    )


# -- 3. turn samples over the limit drop the oldest history --------------------------------
def test_turn_samples_over_the_limit_drop_history_in_both_overflow_modes(processed, tmp_path):
    inp = processed.table("trajectories")
    some = "domain = 'swe'"  # where its histories overflow: each run is ~6 s whole
    free = do_export(inp, tmp_path / "free", sample_mode="turn", where=some)
    runs = {
        ov: do_export(inp, tmp_path / ov, sample_mode="turn", max_len=600, overflow=ov, where=some)
        for ov in ("split", "truncate")
    }
    split, trunc = runs["split"]["counts"], runs["truncate"]["counts"]
    # a turn sample is the same whichever overflow mode: truncate used to keep the oldest
    # history and cut the target off (1374 of 1951 samples, 80,711 of 144,951 loss tokens)
    assert shard_rows(tmp_path / "truncate").keys() == shard_rows(tmp_path / "split").keys()
    for key in ("samples", "loss_tokens", "truncated", "turns_without_target"):
        assert trunc[key] == split[key], key
    assert [r["input_ids"] for r in shard_rows(tmp_path / "truncate").values()] == [
        r["input_ids"] for r in shard_rows(tmp_path / "split").values()
    ]
    # no target is lost to history: every target turn is still a sample, with all its
    # loss tokens unless its sample is counted as truncated (the target alone is too long)
    full = shard_rows(tmp_path / "free")
    got = shard_rows(tmp_path / "truncate")
    assert trunc["truncated"]["samples"] > 0
    assert (
        len(full) - len(got)
        == trunc["turns_without_target"]["turns"] - free["counts"]["turns_without_target"]["turns"]
    )
    short = [s for s, r in got.items() if r["num_loss_tokens"] < full[s]["num_loss_tokens"]]
    assert 0 < len(short) <= trunc["truncated"]["samples"]
    assert all(r["num_tokens"] <= 600 for r in got.values())
    assert verify(tmp_path / "truncate") == []


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """(input, turn samples without a limit, tokenizer): a trajectory whose history
    overflows and one whose target alone does, written and exported once for both
    overflow modes."""
    tmp_path = tmp_path_factory.mktemp("history")
    t = Trajectory(
        "terminal",
        turns=[turn(i, f"line {i} " + "alpha beta gamma " * 40) for i in range(6)],
        trajectory_id="hist",
    )
    huge = Trajectory(
        "terminal",
        turns=[turn(0, "short first"), turn(1, "END-OF-TARGET " * 2 + "delta " * 900)],
        trajectory_id="huge",
    )
    with ShardWriter(tmp_path / "in") as w:
        w.write([t, huge])
    do_export(tmp_path / "in", tmp_path / "free", sample_mode="turn")
    return tmp_path / "in", shard_rows(tmp_path / "free"), load_tokenizer(TOKENIZER)


@pytest.mark.parametrize("overflow", ["split", "truncate"])
def test_a_long_history_is_dropped_oldest_first_and_the_target_kept(history, tmp_path, overflow):
    inp, free, tok = history
    m = do_export(inp, tmp_path / "o", sample_mode="turn", max_len=500, overflow=overflow)
    rows = shard_rows(tmp_path / "o")
    last = rows["hist:t5"]
    text = tok.decode(last["input_ids"], skip_special_tokens=False)
    assert last["num_tokens"] <= 500 < free["hist:t5"]["num_tokens"]
    assert "line 5 " in text and "line 0 " not in text  # the oldest turns went, not the target
    assert last["num_loss_tokens"] == free["hist:t5"]["num_loss_tokens"]
    assert text.endswith("<|im_end|>\n")
    # a target too long alone is truncated, and counted as truncated
    cut = rows["huge:t1"]
    assert 0 < cut["num_loss_tokens"] < free["huge:t1"]["num_loss_tokens"]
    assert "short first" not in tok.decode(cut["input_ids"], skip_special_tokens=False)
    t_ = m["counts"]["truncated"]
    assert t_["samples"] == 1 and t_["turns"] == 1 and t_["tokens"] > 0
    assert m["counts"]["turns_without_target"]["turns"] == 0
    assert m["counts"]["samples"] == len(rows) == 8


# -- 4. lengths out of range -------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value",
    [("max_len", -5), ("seq_len", -5), ("pack_window", 0), ("pack_window", -1)],
)
def test_negative_lengths_are_refused_naming_the_setting(processed, tmp_path, field, value):
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        do_export(processed.table("trajectories"), tmp_path / "x", **{field: value})
    assert not (tmp_path / "x").exists()
    flag = "--" + field.replace("_", "-")
    r = cli_run(processed, "-o", str(tmp_path / "c"), flag, str(value))
    assert r.exit_code == 2, r.output
    assert flag in r.output and field not in r.output.replace(flag, ""), r.output
    assert not (tmp_path / "c").exists()


def test_one_turn_a_trajectory_needs_turn_samples(processed, tmp_path):
    """Found: `--sample-turns one` without `--sample-mode turn` exported every turn of
    every trajectory in silence (a trajectory sample holds them all)."""
    r = cli_run(processed, "-o", str(tmp_path / "c"), "--sample-turns", "one")
    assert r.exit_code == 2, r.output
    assert "--sample-turns one needs --sample-mode turn, got trajectory" in r.output
    assert not (tmp_path / "c").exists()


def test_zero_lengths_still_mean_no_limit(processed, tmp_path):
    m = do_export(processed.table("trajectories"), tmp_path / "z", max_len=0, seq_len=0)
    assert m["counts"]["samples"] == m["counts"]["trajectories"]


# -- 5. raw input ----------------------------------------------------------------------
def test_unprocessed_input_is_refused(tmp_path):
    with ShardWriter(tmp_path / "raw" / "s") as w:
        w.write(generate(SyntheticConfig(n=12, seed=3)))
    for fmt in ("parquet", "agentworldbench"):
        with pytest.raises(ValueError, match=r"no mask decisions.*worldtrace process"):
            do_export(tmp_path / "raw", tmp_path / fmt, format=fmt)
        assert not (tmp_path / fmt).exists()
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    r = CliRunner().invoke(cli, ["--store", str(store.root), "export", "--tokenizer", TOKENIZER,
                                 "--input", str(tmp_path / "raw"), "-o", str(tmp_path / "c")],
                           obj={})  # fmt: skip
    assert r.exit_code == 1 and "no mask decisions" in r.output, r.output
    assert "worldtrace process" in r.output and not (tmp_path / "c").exists()


# -- 6. the split's own seed -------------------------------------------------------------
def sides(out) -> dict[str, str]:
    return {
        tid: part
        for part in ("train", "test")
        for f in (out / part).glob("*.parquet")
        for tid in pq.read_table(f, columns=["trajectory_id"]).column(0).to_pylist()
    }


def test_mask_seed_does_not_move_the_split(processed, tmp_path):
    inp = processed.table("trajectories")
    m0 = do_export(inp, tmp_path / "s0", split="test=0.2")
    m7 = do_export(inp, tmp_path / "s7", split="test=0.2", seed=7)
    assert sides(tmp_path / "s0") == sides(tmp_path / "s7")  # same held-out clusters
    # ... while the mask draw did change
    assert m0["counts"]["loss_tokens"] != m7["counts"]["loss_tokens"]
    # split seed 0 is the draw of earlier versions at seed 0 (the demo's, AgentWorldBench's)
    expect = {
        r["trajectory_id"]: "test" if unit_draw(r[CLUSTER], "split", 0) < 0.2 else "train"
        for b in iter_batches(str(inp))
        for r in b
    }
    assert sides(tmp_path / "s0") == expect
    m = do_export(inp, tmp_path / "x7", split="test=0.2", split_seed=7)
    assert sides(tmp_path / "x7") != expect  # the split seed moves whole clusters
    assert m["split"]["seed"] == 7 and m7["split"]["seed"] == 0
    part = json.loads((tmp_path / "x7" / "test" / "manifest.json").read_text())
    assert part["split"]["seed"] == 7 and part["config"]["split_seed"] == 7 and part["seed"] == 0
    r = cli_run(processed, "-o", str(tmp_path / "c"), "--split", "test=0.2", "--split-seed", "7",
                "--seed", "3")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert sides(tmp_path / "c") == sides(tmp_path / "x7")


# -- 7. no sample without a target -------------------------------------------------------
def test_trajectory_parts_without_a_target_are_left_out_and_counted(tmp_path):
    recs = [
        Trajectory(
            "terminal",
            turns=[turn(0, "first " * 150), turn(1, "masked " * 150, 0.0), turn(2, "x " * 150)],
            trajectory_id="parts",
        ),
        Trajectory("web", turns=[turn(0, "nothing " * 20, 0.0)], trajectory_id="none"),
    ]
    with ShardWriter(tmp_path / "in") as w:
        w.write(recs)
    for packed in (0, 400):
        out = tmp_path / f"o{packed}"
        m = do_export(tmp_path / "in", out, max_len=400, seq_len=packed)
        rows = shard_rows(out)
        assert rows and all(r["num_loss_tokens"] > 0 for r in rows.values())
        ids = {i for r in rows.values() for i in (r.get("sample_ids") or [r["sample_id"]])}
        assert ids == {"parts/p0", "parts/p2"}
        c = m["counts"]
        assert c["samples"] == 2
        w = c["turns_without_target"]
        assert w["samples"] == 2 and w["turns"] == 2
        assert w["by_domain"]["terminal"] == {"turns": 1, "samples": 1}
        assert w["by_domain"]["web"] == {"turns": 1, "samples": 1}
        assert verify(out) == []


def test_an_export_with_no_target_is_an_error(tmp_path):
    # 8 trajectories written as processed: 16 tokens hold the start of a sample's system
    # prompt, never a target, in a small corpus as in a large one
    store = decided_store(tmp_path, keep=1.0)
    with pytest.raises(ValueError, match="no target token"):
        do_export(store.table("trajectories"), tmp_path / "x", seq_len=16)
    assert not (tmp_path / "x").exists()
    r = cli_run(store, "-o", str(tmp_path / "c"), "--seq-len", "16")
    assert r.exit_code == 1 and "no target token" in r.output, r.output
    assert not (tmp_path / "c").exists()


# -- 11. processing kept nothing ---------------------------------------------------------
def test_processing_that_kept_nothing_is_said(tmp_path):
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:  # one turn each: the min_turns filter drops them
        w.write([build("terminal", [(f"echo {i}\n", f"{i}\n$ ")]) for i in range(3)])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    with pytest.raises(FileNotFoundError) as e:
        do_export(store.table("trajectories"), tmp_path / "x")
    msg = str(e.value)
    assert "kept none of the 3 trajectories" in msg and "worldtrace stats" in msg
    assert "run `worldtrace process` first" not in msg
    r = cli_run(store, "-o", str(tmp_path / "c"))
    assert r.exit_code == 1 and "kept none" in r.output, r.output


def test_no_processing_run_still_says_run_process(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="run `worldtrace process` first"):
        do_export(tmp_path / "empty", tmp_path / "x")


# -- 13. a part named twice --------------------------------------------------------------
def test_split_naming_a_part_twice_is_refused(processed, tmp_path):
    with pytest.raises(ValueError, match="'test' is given twice"):
        parse_split("test=0.1,test=0.3")
    with pytest.raises(ValueError, match="'test' is given twice"):
        parse_split("test=0.1, test =0.1")
    assert parse_split("test=0.1,valid=0.2") == {"test": 0.1, "valid": 0.2}
    r = cli_run(processed, "-o", str(tmp_path / "c"), "--split", "test=0.1,test=0.3")
    assert r.exit_code != 0 and "'test' is given twice" in r.output, r.output
    assert not (tmp_path / "c").exists()


def test_trajectory_export_loss_mask_sums(processed, tmp_path):
    """Every row written has a target; the counts add up (no 0-target row anywhere)."""
    m = do_export(processed.table("trajectories"), tmp_path / "p", max_len=300, seq_len=1024)
    rows = shard_rows(tmp_path / "p")
    assert all(np.sum(r["loss_mask"]) == r["num_loss_tokens"] > 0 for r in rows.values())
    assert m["counts"]["loss_tokens"] == sum(r["num_loss_tokens"] for r in rows.values())
