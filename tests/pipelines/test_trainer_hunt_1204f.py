"""Trainer handoff defects found by the 2026-12-04 (f) hunt.

1. `megatron_sample(OUTPUT/test, i)` on the test part of a split Megatron export looked
   for `train_text_document.idx` (`part` defaulted to "train" whatever the directory):
   `No such file or directory`. It now reads the part from the directory's manifest; a
   split's top directory or a Parquet export is said as such, an index past the
   sequences names the file and how many it holds.
2. `hf_dataset` on a part with no rows (an empty test part of a split) ended in
   datasets' `Empty 'data_files': '[]'`, naming nothing; a manifest cut short in a JSON
   error naming no file. Both now name the directory or file.

Real parts: records written as Parquet, the real Qwen tokenizer, real exports, datasets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.megatron import read_index
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.pipelines.trainer import hf_dataset, megatron_sample, read_manifest

from .conftest import decided_store

TOKENIZER = str(default_tokenizer())
SPLIT = "test=0.5"


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    """One store exported as Megatron and as Parquet, both split test=0.5 (the same
    clusters held out), under `mg/` and `pq/`."""
    root = tmp_path_factory.mktemp("split")
    store = decided_store(root, keep=1.0)
    base = {"input": str(store.table("trajectories")), "tokenizer": TOKENIZER, "split": SPLIT}
    export(ExportConfig(output=str(root / "mg"), format="megatron", **base))
    export(ExportConfig(output=str(root / "pq"), **base))
    return root


def test_megatron_sample_reads_the_part_its_directory_holds(split):
    test_rows = [r for f in sorted((split / "pq/test").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]  # fmt: skip
    assert test_rows, "the split held nothing out: the test would show nothing"
    sizes, *_ = read_index(split / "mg/test/test_text_document.idx")
    assert len(sizes) == len(test_rows)
    for i, row in enumerate(test_rows):
        s = megatron_sample(split / "mg/test", i)
        assert s["tokens"].tolist() == row["input_ids"]  # the row, then the EOD as last label
        assert s["loss_mask"].tolist() == [*row["loss_mask"][1:], 0.0]
        same = megatron_sample(split / "mg/test", i, part="test")
        assert all(np.array_equal(s[k], same[k]) for k in s)
    train = megatron_sample(split / "mg/train", 0)  # the train part as before
    first = pq.read_table(sorted((split / "pq/train").glob("*.parquet"))[0]).to_pylist()[0]
    assert train["tokens"].tolist() == first["input_ids"]


def test_megatron_sample_says_what_it_was_given(split):
    with pytest.raises(ValueError, match=r"a split export; pass one of its parts: .*mg/test"):
        megatron_sample(split / "mg", 0)
    with pytest.raises(ValueError, match=r"format is 'parquet', this reader needs 'megatron'"):
        megatron_sample(split / "pq/test", 0)
    n = len(read_index(split / "mg/test/test_text_document.idx")[0])
    with pytest.raises(
        IndexError, match=rf"test_text_document\.idx: no sequence {n}: it holds {n} "
    ):
        megatron_sample(split / "mg/test", n)


def test_an_empty_part_and_a_cut_manifest_are_named(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    out = tmp_path / "pq"
    # a fraction so small that no cluster of 8 is held out: the part is empty
    m = export(ExportConfig(input=str(store.table("trajectories")), output=str(out),
                            tokenizer=TOKENIZER, split="test=0.0001"))  # fmt: skip
    assert m["parts"]["test"]["counts"]["rows"] == 0
    with pytest.raises(ValueError, match=rf"^{re.escape(str(out / 'test'))}: the export holds no rows \(counts\.rows 0\)"):  # fmt: skip
        hf_dataset(out / "test")
    assert len(hf_dataset(out / "train")) == 8
    manifest = out / "train" / "manifest.json"
    manifest.write_text(manifest.read_text()[:100])
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(manifest))}: not an export manifest \("
    ):
        read_manifest(out / "train")
    manifest.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(manifest))}: not an export manifest"):
        hf_dataset(out / "train")
