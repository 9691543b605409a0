"""`export --verify` of token ids and document starts edited in place (defect hunt, 12-06).

1. A token id outside the vocabulary (10**9, -1, exactly `tokenizer.vocab_size`) written
   into a Parquet row's `input_ids` or a Megatron text `.bin`, the manifest's sizes and
   hashes recomputed: it verified. A trainer's embedding lookup fails on such an id (a
   CUDA device-side assert) or, past the table, reads another token's row.
2. A packed row's `doc_boundaries` moved (`[0, 316]` -> `[0, 336]`, rehashed): it
   verified, though docs/training.md said verify "checks every row's starts against
   its `sample_ids`"; it only checked their shape (count, first 0, increasing, below
   `num_tokens`). The manifest now records `sampling.doc_start_id`, the id every sample
   starts with (chatml: `<|im_start|>`), and verify checks the token at every start.

Real parts: records written as Parquet, exports by the real exporter with the real Qwen
tokenizer, the CLI in process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer
from worldtrace.pipelines.megatron import read_index
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.pipelines.writers import verify
from worldtrace.schemas.hashing import sha256_file

from .test_verify_hunt_1204 import make_exports, verified

NAMES = {
    "pq": {},
    "pq-turn": {"sample_mode": "turn"},
    "pq-packed": {"seq_len": 1024},
    "mg": {"format": "megatron"},
    "mg-packed": {"format": "megatron", "seq_len": 1024},
    "split": {"split": "test=0.3"},
    "split-packed": {"split": "test=0.3", "seq_len": 1024},
}
TOKENIZER = Tokenizer.from_file(str(default_tokenizer()))
VOCAB = TOKENIZER.get_vocab_size()
IM_START = TOKENIZER.token_to_id("<|im_start|>")
SHARD = "train-export-00000.parquet"


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """Eight trajectories over two domains, exported in every token format, packed and
    not, and split."""
    return make_exports(tmp_path_factory.mktemp("hunt1206r"), NAMES, "r")


def copy(exports: Path, tmp_path: Path, name: str) -> Path:
    d = tmp_path / "x" / name
    shutil.copytree(exports / name, d)
    return d


def manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def write(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def rehash(d: Path, top: Path | None = None) -> None:
    """What a careful tamperer does: the listed sizes and hashes are the files' (and a
    split's top manifest lists the part's manifest as it is now)."""
    m = manifest(d)
    for s in m["shards"]:
        p = d / s["path"]
        s["bytes"], s["sha256"] = p.stat().st_size, sha256_file(str(p))
    write(d, m)
    if top is not None:
        t = manifest(top)
        t["parts"][d.name]["manifest_sha256"] = sha256_file(str(d / "manifest.json"))
        write(top, t)


def edit_rows(shard: Path, edit) -> None:
    """Rewrite a Parquet shard with `edit(rows)` applied (rows as dicts), same schema."""
    t = pq.read_table(shard)
    rows = t.to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), shard, compression="zstd")


def part_manifests(d: Path) -> list[dict]:
    m = manifest(d)
    return [manifest(d / p["path"]) for p in m["parts"].values()] if "parts" in m else [m]


def test_every_clean_export_verifies_and_records_its_start_id(exports):
    """Every format, packed and split: no problem, and each part's manifest names the
    chatml start every sample begins with and a vocabulary holding every added token
    (`get_vocab_size()` counts them: the specials are not out of the vocabulary)."""
    added = TOKENIZER.get_added_tokens_decoder()
    assert max(added) < VOCAB and IM_START in added
    for name in NAMES:
        assert verified(exports / name) == [], name
        assert verify(exports / name) == [], name
        for m in part_manifests(exports / name):
            assert m["sampling"]["doc_start_id"] == IM_START, name
            assert m["tokenizer"]["vocab_size"] == VOCAB, name


# -- 1: a token id outside the vocabulary ----------------------------------------------------
@pytest.mark.parametrize("bad", [10**9, -1, VOCAB])
@pytest.mark.parametrize("name", ["pq", "pq-packed"])
def test_a_parquet_id_outside_the_vocabulary_is_a_problem(exports, tmp_path, name, bad):
    d = copy(exports, tmp_path, name)
    edit_rows(d / SHARD, lambda rows: rows[2]["input_ids"].__setitem__(3, bad))
    rehash(d)
    problems = verified(d)
    assert any(
        p.startswith(f"{d / SHARD}: 1 token id(s) outside the vocabulary 0..{VOCAB - 1}")
        and f"row 2, id {bad}" in p
        for p in problems
    ), problems


def test_a_split_part_id_outside_the_vocabulary_is_a_problem(exports, tmp_path):
    top = copy(exports, tmp_path, "split")
    d = top / "test"
    [shard] = d.glob("*.parquet")
    edit_rows(shard, lambda rows: [r["input_ids"].__setitem__(5, VOCAB + 7) for r in rows])
    rehash(d, top)
    problems = verified(top)
    n = pq.read_metadata(shard).num_rows
    assert any(
        p.startswith(f"{shard}: {n} token id(s) outside the vocabulary") and "row 0" in p
        for p in problems
    ), problems


def text_bin(d: Path) -> tuple[np.memmap, np.ndarray]:
    """The text `.bin` of a Megatron export, writable, and each document's first token."""
    _, pointers, _, dtype = read_index(d / "train_text_document.idx")
    data = np.memmap(d / "train_text_document.bin", dtype=dtype, mode="r+")
    return data, pointers // data.itemsize


@pytest.mark.parametrize("bad", [10**9, -1, VOCAB])
@pytest.mark.parametrize("name", ["mg", "mg-packed"])
def test_a_megatron_id_outside_the_vocabulary_is_a_problem(exports, tmp_path, name, bad):
    d = copy(exports, tmp_path, name)
    data, firsts = text_bin(d)
    data[firsts[1] + 3] = bad
    data.flush()
    del data
    rehash(d)
    problems = verified(d)
    bin_ = d / "train_text_document.bin"
    assert any(
        p.startswith(f"{bin_}: 1 token id(s) outside the vocabulary 0..{VOCAB - 1}")
        and f"document 1, id {bad}" in p
        for p in problems
    ), problems


def test_without_a_vocab_size_the_ids_are_not_checked_and_a_wrong_one_is_said(exports, tmp_path):
    """A manifest that records no `vocab_size` has nothing to check the ids against; one
    that records it as no count is a problem of the manifest (it verified)."""
    d = copy(exports, tmp_path, "pq")
    edit_rows(d / SHARD, lambda rows: rows[0]["input_ids"].__setitem__(3, VOCAB))
    rehash(d)
    assert any("outside the vocabulary" in p for p in verified(d))
    m = manifest(d)
    m["tokenizer"]["vocab_size"] = str(VOCAB)
    write(d, m)
    assert verified(d) == [f'{d / "manifest.json"}: tokenizer.vocab_size is not a count: "{VOCAB}"']
    del m["tokenizer"]["vocab_size"]
    write(d, m)
    assert verified(d) == []


# -- 2: document starts ----------------------------------------------------------------------
def packed_row_of_two(shard: Path) -> tuple[int, int]:
    """A packed row holding at least two documents, and a place inside its first
    document (20 tokens before the second start) that holds no `<|im_start|>`."""
    for k, r in enumerate(pq.read_table(shard).to_pylist()):
        if len(r["doc_boundaries"]) >= 2:
            to = r["doc_boundaries"][1] - 20
            assert r["input_ids"][to] != IM_START
            return k, to
    raise AssertionError("no packed row holds two documents")


@pytest.mark.parametrize("name", ["pq-packed", "split-packed/train"])
def test_a_moved_doc_boundary_is_a_problem(exports, tmp_path, name):
    """The second start moved 20 tokens back, still one per sample id, from 0,
    increasing, below num_tokens: its shape passes, its token does not."""
    top = copy(exports, tmp_path, name.split("/")[0])
    d = top / name.partition("/")[2]
    k, to = packed_row_of_two(d / SHARD)
    edit_rows(d / SHARD, lambda rows: rows[k]["doc_boundaries"].__setitem__(1, to))
    rehash(d, top if d != top else None)
    problems = verified(top)
    assert any(
        p.startswith(f"{d}: 1 doc_boundaries start(s) whose token is not sampling.doc_start_id")
        and p.endswith(f"(the first: {SHARD} row {k})")
        for p in problems
    ), problems


def test_an_unpacked_row_not_starting_with_the_start_token_is_a_problem(exports, tmp_path):
    d = copy(exports, tmp_path, "pq-turn")
    other = TOKENIZER.token_to_id("<|im_end|>")
    edit_rows(d / SHARD, lambda rows: rows[4]["input_ids"].__setitem__(0, other))
    rehash(d)
    problems = verified(d)
    assert any(
        p.startswith(f"{d}: 1 row(s) whose first token is not sampling.doc_start_id {IM_START}")
        and p.endswith(f"(the first: {SHARD} row 4)")
        for p in problems
    ), problems


@pytest.mark.parametrize("name", ["mg", "mg-packed"])
def test_a_megatron_document_not_starting_with_the_start_token_is_a_problem(
    exports, tmp_path, name
):
    d = copy(exports, tmp_path, name)
    data, firsts = text_bin(d)
    data[firsts[2]] = 100  # an id of the vocabulary: only the start check sees it
    data.flush()
    del data
    rehash(d)
    problems = verified(d)
    bin_ = d / "train_text_document.bin"
    assert problems == [
        f"{bin_}: 1 document(s) whose first token is not sampling.doc_start_id {IM_START}, "
        "the token every sample starts with (the first: document 2)"
    ], problems


def test_a_manifest_from_before_doc_start_id_skips_the_start_check(exports, tmp_path):
    """An export written before the key: its starts cannot be checked, and are not."""
    d = copy(exports, tmp_path, "pq-packed")
    k, to = packed_row_of_two(d / SHARD)
    edit_rows(d / SHARD, lambda rows: rows[k]["doc_boundaries"].__setitem__(1, to))
    rehash(d)
    assert any("doc_boundaries start(s)" in p for p in verified(d))
    m = manifest(d)
    m["sampling"]["doc_start_id"] = "x"
    write(d, m)
    assert verified(d) == [f'{d / "manifest.json"}: sampling.doc_start_id is not a count: "x"']
    del m["sampling"]["doc_start_id"]
    write(d, m)
    assert verified(d) == []


def test_the_manifests_vocab_size_is_the_id_space_of_a_tokenizer_with_gaps():
    """Review: `vocab_size` was `get_vocab_size()`, a count: a tokenizer whose ids have
    gaps (tiktoken conversions) has valid ids at or past it, which `--verify` would call
    outside the vocabulary (and a trainer sizing its embeddings by it would fail on)."""
    from tokenizers import Tokenizer, models
    from worldtrace.pipelines.tokens import tokenizer_info, vocab_size

    gapped = Tokenizer(models.WordLevel({"a": 0, "b": 5, "[UNK]": 9}, unk_token="[UNK]"))
    assert gapped.get_vocab_size() == 3 and vocab_size(gapped) == 10
    path = default_tokenizer()
    tok = Tokenizer.from_file(str(path))
    assert tokenizer_info(str(path), tok)["vocab_size"] == 151669  # Qwen's: no gaps
