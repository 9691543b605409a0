"""`export --verify` of a damaged or edited export (defect hunt, 2026-12-04).

1. A manifest of another shape (no `counts`, `counts` or `shards` a string, its format
   changed to another one's) or a damaged Megatron index (rehashed) ended in a
   traceback (KeyError, TypeError, UnicodeDecodeError, "not an MMIDIDX index") or in
   `error: [Errno 2]`, not in problems.
2. A shard `path` outside the export (`/etc/passwd`, `../x`, a symbolic link out) was
   opened and hashed: a copy of the shard moved out of the export verified.
3. Edits the manifest's own invariants rule out verified: `counts.trajectories` against
   the rows' trajectory ids, `by_category` not adding up to `loss_tokens`, an unknown
   `schema_version`.

Real parts: records written as Parquet, exports by the real exporter with the real Qwen
tokenizer, the CLI in process (a subprocess where a hang is the failure).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.records import Action, Observation, Trajectory, Turn

from worldtrace.cli import cli

NAMES = {
    "pq": {},
    "pq-turn": {"sample_mode": "turn"},
    "pq-packed": {"seq_len": 512},
    "mg": {"format": "megatron"},
    "awb": {"format": "agentworldbench"},
    "split": {"split": "test=0.3"},
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """Eight trajectories over two domains, exported in every format and a split."""
    return make_exports(tmp_path_factory.mktemp("hunt1204"), NAMES, "h")


def make_exports(root: Path, names: dict[str, dict], prefix: str) -> Path:
    """Eight trajectories over two domains (ids `PREFIX-00`...), exported once for each
    of `names` (its export options) under `root/out`."""
    records = [
        Trajectory(
            "terminal" if k % 2 else "swe",
            turns=[
                Turn(i, Action("text", f"run {i}"), Observation(f"out {k} {i} " * (k + 2)))
                for i in range(3)
            ],
            trajectory_id=f"{prefix}-{k:02d}",
        )
        for k in range(8)
    ]
    for t in records:
        for turn in t.turns:
            turn.category, turn.keep = "expansion", 1.0
    with ShardWriter(root / "in") as w:
        w.write(records)
    for name, kw in names.items():
        kw = {"tokenizer": str(default_tokenizer()), **kw}
        export(ExportConfig(input=str(root / "in"), output=str(root / "out" / name), **kw))
    return root / "out"


def copy(exports: Path, tmp_path: Path, name: str) -> Path:
    d = tmp_path / "x" / name
    shutil.copytree(exports / name, d, symlinks=True)
    return d


def manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def write(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def rehash(d: Path) -> None:
    """What a careful tamperer does: the listed sizes and hashes are the files'."""
    m = manifest(d)
    for s in m["shards"]:
        p = d / s["path"]
        s["bytes"], s["sha256"] = p.stat().st_size, sha256_file(str(p))
    write(d, m)


def verified(d: Path) -> list[str]:
    """`export --verify d`: its problem lines, after checking it ended as the docs say
    (no traceback, each problem then `d: N problem(s)`, exit 1; [] when verified)."""
    r = CliRunner().invoke(cli, ["export", "--verify", str(d)], obj={})
    assert r.exception is None or isinstance(r.exception, SystemExit), (r.output, r.exc_info)
    assert "Traceback" not in r.output and "error:" not in r.output, r.output
    *problems, last = r.output.splitlines()
    if not problems:
        assert (r.exit_code, last) == (0, f"{d}: verified"), r.output
        return []
    assert (r.exit_code, last) == (1, f"{d}: {len(problems)} problem(s)"), r.output
    return problems


def test_every_clean_export_verifies(exports):
    for name in NAMES:
        assert verified(exports / name) == [], name


# -- 1: a manifest of another shape, a damaged index: problems, never a traceback ---------
def drop_counts(m):
    del m["counts"]


def overwrite_start(b: bytearray) -> bytearray:
    b[:8] = b"\0" * 8
    return b


MANIFEST_EDITS = {
    "no counts": ("pq", drop_counts, "counts is missing"),
    "counts a string": ("pq", lambda m: m.update(counts="x"), 'counts is not an object: "x"'),
    "shards a string": ("pq", lambda m: m.update(shards="x"), 'shards is not a list: "x"'),
    "parquet said agentworldbench": (
        "pq",
        lambda m: m.update(format="agentworldbench"),
        "shard train-export-00000.parquet is not a .jsonl file",
    ),
    "parquet said megatron": (
        "pq",
        lambda m: m.update(format="megatron"),
        "format megatron: train_text_document.idx is not in shards",
    ),
    "agentworldbench said parquet": (
        "awb",
        lambda m: m.update(format="parquet"),
        "shard swe_test.jsonl is not a .parquet file",
    ),
    "a count too large": (
        "pq",
        lambda m: m["counts"].update(rows=1 << 64),
        "counts.rows is not a count: 18446744073709551616",
    ),
    "a domain's count a string": (
        "mg",
        lambda m: m["counts"]["by_domain"]["swe"].update(samples="4"),
        'counts.by_domain.swe.samples is not a count: "4"',
    ),
    "a category a count": (
        "pq",
        lambda m: m["counts"]["by_category"].update(expansion=5),
        "counts.by_category.expansion is not an object: 5",
    ),
    "seq_len a string": (
        "mg",
        lambda m: m["sampling"].update(seq_len="512"),
        'sampling.seq_len is not a count: "512"',
    ),
    "a split part's path the export itself": (
        "split",
        lambda m: m["parts"]["test"].update(path="."),
        'parts.test.path ".": not a file name of the export directory itself',
    ),
}


@pytest.mark.parametrize("case", MANIFEST_EDITS)
def test_a_manifest_of_another_shape_is_a_problem(exports, tmp_path, case):
    name, edit, said = MANIFEST_EDITS[case]
    d = copy(exports, tmp_path, name)
    m = manifest(d)
    edit(m)
    write(d, m)
    problems = verified(d)
    assert problems and any(said in p and str(d / "manifest.json") in p for p in problems), problems


@pytest.mark.parametrize(
    ("index", "damage"),
    [
        ("train_text_document.idx", overwrite_start),
        ("train_text_document.idx", lambda b: b[:40]),
        ("train_loss_mask.idx", lambda b: b[:40]),
        ("train_loss_mask.idx", lambda b: b[:-8]),
    ],
)
def test_a_damaged_megatron_index_is_a_problem(exports, tmp_path, index, damage):
    """The manifest's sizes and hashes recomputed: only reading the index can tell."""
    d = copy(exports, tmp_path, "mg")
    p = d / index
    p.write_bytes(bytes(damage(bytearray(p.read_bytes()))))
    rehash(d)
    problems = verified(d)
    assert problems and all(index in p for p in problems), problems


def test_agentworldbench_lines_not_utf8_are_a_problem(exports, tmp_path):
    d = copy(exports, tmp_path, "awb")
    f = d / "swe_test.jsonl"
    lines = f.read_bytes().count(b"\n")
    f.write_bytes(f.read_bytes() + b"\xff\xfe{}\n")
    rehash(d)
    problems = verified(d)
    assert f"{f}:{lines + 1}: not an AgentWorldBench record" in problems, problems


# -- 2: a file outside the export is a problem, never opened --------------------------------
def test_a_shard_moved_out_of_the_export_does_not_verify(exports, tmp_path):
    """The shard moved beside the export and listed as `../NAME` with its true size and
    hash: it verified, read from outside the directory checked."""
    d = copy(exports, tmp_path, "pq")
    [shard] = d.glob("*.parquet")
    shard.rename(d.parent / shard.name)
    m = manifest(d)
    m["shards"][0]["path"] = f"../{shard.name}"
    write(d, m)
    problems = verified(d)
    assert any(f'"../{shard.name}": outside the export' in p for p in problems), problems


def test_a_symbolic_link_out_of_the_export_does_not_verify(exports, tmp_path):
    d = copy(exports, tmp_path, "pq")
    [shard] = d.glob("*.parquet")
    out = shard.rename(d.parent / shard.name)
    shard.symlink_to(out)
    problems = verified(d)
    assert any(f'"{shard.name}": outside the export' in p for p in problems), problems


def test_an_absolute_shard_path_is_never_opened(exports, tmp_path):
    """A FIFO outside the export, listed by its absolute path: opening it to hash it
    blocks (nothing writes into it), so a run that opens it never ends."""
    d = copy(exports, tmp_path, "pq")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/etc/passwd"):
        m = manifest(d)
        m["shards"][0]["path"] = path
        write(d, m)
        worldtrace = Path(sys.executable).parent / "worldtrace"
        r = subprocess.run(
            [str(worldtrace), "export", "--verify", str(d)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f'"{path}": outside the export' in r.stdout, r.stdout
        assert "sha256 " not in r.stdout and "size " not in r.stdout, r.stdout


# -- 3: the manifest's own invariants --------------------------------------------------------
def bump(*keys: str, by: int = 1):
    def edit(m):
        c = m["counts"]
        for k in keys[:-1]:
            c = c[k]
        c[keys[-1]] += by

    return edit


TRAJECTORIES = "trajectories in the files != manifest trajectories"
INVARIANTS = {
    "one trajectory more": ("pq", bump("trajectories"), TRAJECTORIES),
    "one trajectory less": ("pq", bump("trajectories", by=-1), TRAJECTORIES),
    "one trajectory less, turn samples": ("pq-turn", bump("trajectories", by=-1), TRAJECTORIES),
    "one trajectory less, agentworldbench": ("awb", bump("trajectories", by=-1), TRAJECTORIES),
    "a split part's trajectory less": ("split/test", bump("trajectories", by=-1), TRAJECTORIES),
    "category loss tokens": ("pq", bump("by_category", "expansion", "loss_tokens"), "by_category"),
    "category end-of-turn targets": (
        "mg",
        bump("by_category", "expansion", "eot_tokens", by=-1),
        "by_category",
    ),
    "category turns in loss": (
        "pq",
        bump("by_category", "expansion", "turns_in_loss"),
        "by_category expansion turns in loss",
    ),
    "schema version unknown": (
        "pq",
        lambda m: m.update(schema_version="worldtrace.training/99"),
        'schema_version "worldtrace.training/99" is not one this worldtrace knows',
    ),
}


@pytest.mark.parametrize("case", INVARIANTS)
def test_an_edit_the_manifest_rules_out_is_a_problem(exports, tmp_path, case):
    name, edit, said = INVARIANTS[case]
    top = copy(exports, tmp_path, name.split("/")[0])
    d = top / name.partition("/")[2]
    m = manifest(d)
    edit(m)
    write(d, m)
    if d != top:  # the top manifest lists the part's as it is now
        t = manifest(top)
        t["parts"][d.name]["manifest_sha256"] = sha256_file(str(d / "manifest.json"))
        write(top, t)
    problems = verified(top)
    assert any(said in p for p in problems), problems
