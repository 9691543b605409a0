"""Found (export hunt 12-06q), with the real CLI:

1. `export -o B/train` into a part of a split export B was taken as "an earlier export":
   exit 0, B/train then held the whole corpus, test trajectories included, under B's top
   manifest (trainers load it silently). Refused now, naming B and what to do.
4. An export nested inside an earlier one (`-o OUT/sub`, `<store>/export/parquet/sub`)
   was accepted and broke the outer one (`--verify`: `sub: not listed`). Refused.
3. A file put into the earlier export while an export ran was removed with it: the
   output was checked once, at the start. It is checked again when it is swapped out.
7. Two exports to one directory both said they had written it; the first to publish was
   replaced by the other. The second is refused at once (`writers.output_lock`).
2. Adding a part to `--split` reshuffled the parts before it: ranges were cumulative in
   name order. They follow the order the parts are given; a part added after the others
   moves none of them, and a one-part split draws as every earlier version did.
8. `megatron_sample(dir, -1)` returned the last sequence; `--split Test=0.2,test=0.2`
   (and `Train=0.1`) wrote directories one on a case-insensitive file system.

Real parts: stores written as `worldtrace process` leaves them (synthetic records), the
installed CLI (CliRunner and subprocesses), real exports and `--verify`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import unit_draw
from worldtrace.pipelines.writers import OutputRefused, verify
from worldtrace.schemas import ShardWriter, Store

from worldtrace.cli import cli

from .test_export import TOKENIZER

AWB = ["--format", "agentworldbench"]  # no tokenizer: the fastest real export


def decided(root: Path, n: int) -> Store:
    """`n` synthetic trajectories written raw and as processed, every turn decided (what
    processing adds), each its own dedup cluster (`c<trajectory_id>`)."""
    s = Store.at(root / "store")
    records = generate(SyntheticConfig(n=n, seed=5))
    with ShardWriter(s.raw / "s") as w:
        w.write(records)
    for t in records:
        for turn in t.turns:
            turn.category, turn.keep = "mixed", 1.0
    with ShardWriter(s.table("trajectories")) as w:
        w.write(records)
    return s


@pytest.fixture
def small(tmp_path) -> Store:
    return decided(tmp_path, 40)


def wt(s: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(s.root), "export", *args], obj={})


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's sha256, a directory's kind."""

    def kind(p: Path) -> str:
        return "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()

    return {str(p.relative_to(root)): kind(p) for p in sorted(root.rglob("*"))}


def refused(r, *expect: str) -> str:
    assert r.exit_code == 1, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and all(e in lines[0] for e in expect), r.output
    return lines[0]


def ids_of(d: Path) -> set[str]:
    """The trajectory ids of an AgentWorldBench export directory's lines."""
    return {
        json.loads(line)["worldtrace"]["trajectory_id"]
        for f in d.glob("*.jsonl")
        for line in f.read_text().splitlines()
    }


# -- 1, 4: an output inside an export ---------------------------------------------------
def test_a_part_of_a_split_export_is_refused_naming_the_export(small, tmp_path):
    a = tmp_path / "A"
    assert wt(small, "-o", str(a), *AWB, "--split", "test=0.3").exit_code == 0
    b = tmp_path / "B"
    shutil.copytree(a, b)
    before = snapshot(tmp_path)
    line = refused(wt(small, "-o", str(b / "train"), *AWB), f"{b / 'train'}: it is part train")
    assert f"of the split export {b}" in line and f"export to {b} with --split" in line
    refused(wt(small, "-o", str(b / "test"), *AWB), "part test of the split export")
    assert snapshot(tmp_path) == before and verify(b) == []
    assert not ids_of(b / "train") & ids_of(b / "test")
    # the store's own: a part of its default export
    assert wt(small, *AWB, "--split", "test=0.3").exit_code == 0
    top = small.export / "agentworldbench"
    refused(wt(small, "-o", str(top / "train"), *AWB), f"part train of the split export {top}")
    assert verify(top) == []
    # a part copied out on its own is an export like another: replaced
    shutil.copytree(a / "test", tmp_path / "alone")
    assert wt(small, "-o", str(tmp_path / "alone"), *AWB).exit_code == 0
    assert verify(tmp_path / "alone") == []


def test_an_export_inside_an_earlier_export_is_refused(small, tmp_path):
    out1 = tmp_path / "out1"
    assert wt(small, "-o", str(out1), *AWB).exit_code == 0
    assert wt(small, *AWB).exit_code == 0  # the store's default export
    default = small.export / "agentworldbench"
    before = snapshot(tmp_path)
    for out, top in ((out1 / "sub", out1), (default / "sub", default)):
        line = refused(wt(small, "-o", str(out), *AWB), f"{out}: it is inside the earlier export")
        assert f"name {top} to replace that export" in line
    assert snapshot(tmp_path) == before and verify(out1) == [] and verify(default) == []
    assert wt(small, *AWB).exit_code == 0  # and the store's default export still goes
    with pytest.raises(OutputRefused, match="inside the earlier export"):  # from Python too
        export(ExportConfig(input=str(small.table("trajectories")), output=str(out1 / "x"),
                            format="agentworldbench"))  # fmt: skip


# -- 3: a file put into the earlier export while the export runs -------------------------
@pytest.mark.parametrize("where", ["", "test"])
def test_a_file_added_while_the_export_runs_is_kept_and_the_export_refused(small, tmp_path, where):
    """The user's file arrives while the rows are written (the export's own progress
    call, after its batch): it was removed with the earlier export, exit 0."""
    out = tmp_path / "e"
    assert wt(small, "-o", str(out), *AWB, "--split", "test=0.3").exit_code == 0
    theirs = out / where / "notes.txt"
    seen = []

    def add(*_):
        if not seen:
            theirs.write_text("mine\n")
            seen.append(snapshot(out))  # the earlier export with the user's file

    cfg = ExportConfig(input=str(small.table("trajectories")), output=str(out),
                       format="agentworldbench", seed=7)  # fmt: skip
    with pytest.raises(OutputRefused) as err:
        export(cfg, progress=add)
    assert str(err.value).startswith(f"will not replace {out}: it is no longer an earlier export")
    assert "notes.txt in it is not part of the earlier export" in str(err.value)
    assert "nothing in it touched" in str(err.value)
    assert theirs.read_text() == "mine\n" and [snapshot(out)] == seen
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_a_directory_made_while_the_export_runs_is_kept(small, tmp_path):
    out = tmp_path / "new"

    def make(*_):
        out.mkdir(exist_ok=True)
        (out / "draft.txt").write_text("mine\n")

    cfg = ExportConfig(input=str(small.table("trajectories")), output=str(out),
                       format="agentworldbench")  # fmt: skip
    with pytest.raises(OutputRefused, match=r"has no manifest\.json of a worldtrace export"):
        export(cfg, progress=make)
    assert sorted(p.name for p in out.iterdir()) == ["draft.txt"]


# -- 7: two exports to one directory -------------------------------------------------------
def test_a_second_export_to_the_same_directory_is_refused_at_once(small, tmp_path):
    """The second comes while the first writes its rows (its progress call): before, both
    said `exported ... -> OUT`, and OUT held the one that published last."""
    out = tmp_path / "e"
    (tmp_path / "link").symlink_to(out)  # the same directory by another name
    cmd = [str(Path(sys.executable).parent / "worldtrace"), "--store", str(small.root), "export"]
    seconds = []

    def second(*_):
        for name in (out, tmp_path / "link"):
            r = subprocess.run([*cmd, "-o", str(name), *AWB, "--seed", "3"],
                               capture_output=True, text=True)  # fmt: skip
            seconds.append((name, r))

    cfg = ExportConfig(input=str(small.table("trajectories")), output=str(out),
                       format="agentworldbench", seed=9)  # fmt: skip
    export(cfg, progress=second)
    assert len(seconds) == 2
    for name, r in seconds:
        assert r.returncode == 1, r.stdout + r.stderr
        line = r.stderr.strip()
        assert line.startswith(
            f"Error: will not write the export to {name}: another export is writing it "
            f"(pid {os.getpid()} on {socket.gethostname()}, since "
        ) and line.endswith("); export again when it has finished, or to another directory")
    assert json.loads((out / "manifest.json").read_text())["seed"] == 9 and verify(out) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # the lock too
    r = subprocess.run([*cmd, "-o", str(out), *AWB], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # free again


# -- 2: the split's draw -------------------------------------------------------------------
@pytest.fixture
def many(tmp_path) -> Store:
    return decided(tmp_path, 200)


def test_a_part_added_after_the_others_moves_none_of_them(many, tmp_path):
    runs = {
        "one": "test=0.1",
        "two": "test=0.1,dev=0.05",  # dev sorts first: it took test's range
        "three": "test=0.1,dev=0.05,aaa=0.2",
    }
    for name, split in runs.items():
        r = wt(many, "-o", str(tmp_path / name), *AWB, "--split", split)
        assert r.exit_code == 0, r.output
    test = ids_of(tmp_path / "one" / "test")
    assert len(test) > 10
    assert ids_of(tmp_path / "two" / "test") == ids_of(tmp_path / "three" / "test") == test
    dev = ids_of(tmp_path / "two" / "dev")
    assert dev and ids_of(tmp_path / "three" / "dev") == dev
    # what a part takes comes from train alone
    train = ids_of(tmp_path / "one" / "train")
    assert dev <= train and ids_of(tmp_path / "two" / "train") == train - dev
    # a one-part split draws as every earlier version did: [0, fraction) of the draw
    drawn = {t for t in test | train if unit_draw(f"c{t}", "split", 0) < 0.1}
    assert test == drawn
    top = json.loads((tmp_path / "three" / "manifest.json").read_text())
    assert top["split"]["ranges"] == {"test": [0.0, 0.1], "dev": [0.1, 0.15], "aaa": [0.15, 0.35]}
    part = json.loads((tmp_path / "three" / "dev" / "manifest.json").read_text())
    assert part["split"]["ranges"] == top["split"]["ranges"] and verify(tmp_path / "three") == []


# -- 8: names equal but for case; a negative sequence index ---------------------------------
@pytest.mark.parametrize(
    "split, said",
    [
        ("Test=0.2,test=0.2", "split: parts 'Test' and 'test' differ only in case"),
        ("Train=0.1", "split: part name 'Train' must be a word other than 'train'"),
    ],
)
def test_part_names_equal_but_for_case_are_refused(small, tmp_path, split, said):
    r = wt(small, "-o", str(tmp_path / "e"), *AWB, "--split", split)
    assert r.exit_code == 2 and said in r.output, r.output
    assert not (tmp_path / "e").exists()


def test_a_negative_sequence_index_is_refused(small, tmp_path):
    from worldtrace.pipelines.trainer import megatron_sample

    out = tmp_path / "mg"
    r = wt(small, "-o", str(out), "--format", "megatron", "--tokenizer", TOKENIZER)
    assert r.exit_code == 0, r.output
    n = json.loads((out / "manifest.json").read_text())["counts"]["rows"]
    assert len(megatron_sample(out, n - 1)["tokens"]) > 0
    for index in (-1, -n, n):
        with pytest.raises(
            IndexError, match=rf"no sequence {index}: it holds {n} \(0\.\.{n - 1}\)"
        ):
            megatron_sample(out, index)
