"""Every Megatron document ends with the tokenizer's end-of-document token, never a target.

Found by an audit: `export --format megatron` wrote no end-of-document token (every
sequence ended with the template's "\\n", and `<|endoftext|>` never occurred in the .bin),
while docs/training.md advised "export unpacked and let Megatron pack" to keep documents
apart: Megatron's `--reset-position-ids --reset-attention-mask` (and `--eod-mask-loss`)
find document boundaries only at the EOD token.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.pipelines.writers import shard_entries, verify

TOKENIZER = str(default_tokenizer())
ROW = 1024


def read_mmidx(prefix) -> tuple[list[np.ndarray], list[int]]:
    """Sequences and document index of an MMIDIDX dataset, read from the bytes."""
    idx = Path(f"{prefix}.idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    code, n, ndoc = idx[17], *struct.unpack("<QQ", idx[18:34])
    dtype = {1: np.uint8, 4: np.int32}[code]
    sizes = np.frombuffer(idx, np.int32, n, 34)
    pointers = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    docs = np.frombuffer(idx, np.int64, ndoc, 34 + 12 * n).tolist()
    data = np.fromfile(f"{prefix}.bin", dtype=dtype)
    item = np.dtype(dtype).itemsize
    return [data[p // item : p // item + s] for s, p in zip(sizes, pointers, strict=True)], docs


def parquet_rows(d) -> list[dict]:
    return [r for f in sorted(d.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.fixture(scope="module")
def eod():
    return load_tokenizer(TOKENIZER).token_to_id("<|endoftext|>")


HALF = "domain IN ('terminal', 'swe')"
"""Half of the shared corpus: every format of it is exported (the whole: ~2 s each)."""


@pytest.fixture(scope="module")
def exports(processed, tmp_path_factory):
    out = tmp_path_factory.mktemp("eod")
    base = {"input": str(processed.table("trajectories")), "tokenizer": TOKENIZER, "where": HALF}
    runs = {
        "pq": {},
        "mg": {"format": "megatron"},
        "pq-packed": {"seq_len": ROW},
        "mg-packed": {"format": "megatron", "seq_len": ROW},
        "mg-split": {"format": "megatron", "split": "test=0.2", "max_len": 400},
        "pq-split": {"split": "test=0.2", "max_len": 400},
    }
    manifests = {
        k: export(ExportConfig(output=str(out / k), **base, **kw)) for k, kw in runs.items()
    }
    return out, manifests


def check_documents(mg, rows: list[dict], eod: int, manifest: dict) -> None:
    """`mg` holds one document per row: the row's tokens and mask (the Parquet export's),
    then one EOD that is not a target; the manifest counts the EOD tokens."""
    ids, docs = read_mmidx(mg / f"{manifest['part']}_text_document")
    masks, mdocs = read_mmidx(mg / f"{manifest['part']}_loss_mask")
    assert len(ids) == len(masks) == len(rows) == manifest["counts"]["rows"] > 0
    assert docs == list(range(len(ids) + 1)) and mdocs == docs
    for seq, mk, r in zip(ids, masks, rows, strict=True):
        assert len(seq) == len(mk) == len(r["input_ids"]) + 1
        assert seq[-1] == eod and mk[-1] == 0  # the document's end, never a target
        assert seq[:-1].tolist() == r["input_ids"] and mk[:-1].tolist() == r["loss_mask"]
        if "doc_boundaries" not in r:  # unpacked: the only EOD is the last token
            assert int(np.count_nonzero(seq == eod)) == 1
    c = manifest["counts"]
    assert c["eod_tokens"] == len(ids)
    assert sum(len(s) for s in ids) - c["eod_tokens"] == sum(len(r["input_ids"]) for r in rows)
    if "doc_boundaries" not in rows[0]:
        assert sum(len(s) for s in ids) == c["tokens"] + c["eod_tokens"]
    assert sum(int(m.sum()) for m in masks) == c["loss_tokens"]
    assert manifest["tokenizer"]["eod_id"] == eod


def test_every_document_ends_with_one_eod_never_a_target(exports, eod):
    out, m = exports
    check_documents(out / "mg", parquet_rows(out / "pq"), eod, m["mg"])
    assert verify(out / "mg") == []


def test_packed_rows_end_with_one_eod_after_the_padding(exports, eod):
    out, m = exports
    rows = parquet_rows(out / "pq-packed")
    check_documents(out / "mg-packed", rows, eod, m["mg-packed"])
    ids, _ = read_mmidx(out / "mg-packed" / "train_text_document")
    assert all(len(s) == ROW + 1 for s in ids)
    assert verify(out / "mg-packed") == []


def test_every_part_of_a_split_export(exports, eod):
    out, m = exports
    assert verify(out / "mg-split") == []
    for part in ("train", "test"):
        pm = json.loads((out / "mg-split" / part / "manifest.json").read_text())
        assert m["mg-split"]["parts"][part]["counts"]["rows"] == pm["counts"]["rows"]
        check_documents(out / "mg-split" / part, parquet_rows(out / "pq-split" / part), eod, pm)


def test_megatron_sample_scores_no_eod(exports, eod):
    """What Megatron's loss sees: the EOD is the last label, with loss mask 0."""
    from worldtrace.pipelines.trainer import megatron_sample

    out, _ = exports
    flat = parquet_rows(out / "pq")
    for i in (0, 7, len(flat) - 1):
        s = megatron_sample(out / "mg", i)
        ids, mask = flat[i]["input_ids"], flat[i]["loss_mask"]
        assert s["tokens"].tolist() == ids
        assert s["labels"].tolist() == [*ids[1:], eod]
        assert s["loss_mask"].tolist() == [float(x) for x in [*mask[1:], 0]]


def test_verify_finds_a_document_without_its_eod(exports, tmp_path):
    out, _ = exports
    d = tmp_path / "mg"
    shutil.copytree(out / "mg", d)
    ids, _ = read_mmidx(d / "train_text_document")
    data = np.fromfile(d / "train_text_document.bin", dtype=np.int32)
    data[len(ids[0]) - 1] = 198  # the first document's EOD overwritten
    data.tofile(d / "train_text_document.bin")
    m = json.loads((d / "manifest.json").read_text())
    # sizes and hashes agree: only the content is wrong
    m["shards"] = [e for e in shard_entries(d) if e["path"] != "manifest.json"]
    (d / "manifest.json").write_text(json.dumps(m))
    problems = verify(d)
    assert any("end-of-document" in p for p in problems), problems
