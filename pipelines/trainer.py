"""Handing an export to a trainer: a Hugging Face dataset, a torch IterableDataset over
packed shards, and Megatron-LM's view of a Megatron export.

Shift convention. The shards mark targets unshifted: `loss_mask[i] = 1` means token i is
a prediction target (writers.LABEL_SHIFT). Hugging Face causal LMs shift inside the
model (logits[:, :-1] are scored against labels[:, 1:]), so labels here are aligned with
input_ids: `labels[i] = input_ids[i]` where `loss_mask[i]`, else -100, never shifted.
In a packed row the first token of every document is -100 too, so no document is scored
on predicting its neighbour's first token, and `position_ids` restart at 0 at every
document boundary: given position_ids and no attention_mask, transformers builds a
block-diagonal causal mask (flash-attention varlen kernels read `cu_seqlens`), so packed
documents do not attend to each other. Megatron-LM's GPTDataset shifts itself (tokens =
seq[:-1], labels = seq[1:], its loss_mask aligned with labels), so the loss-mask sidecar
enters it as `sidecar[1:]` (see `megatron_sample`, docs/training.md). Every Megatron
document ends with the tokenizer's end-of-document token (mask 0): the last label, never
scored, and where Megatron's `--reset-attention-mask` separates packed documents.

Imports torch at module level (the IterableDataset must subclass torch's): import this
module only where you train; nothing else in worldtrace imports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import IterableDataset, get_worker_info
from worldtrace.schemas.tempfiles import open_parquet, verified_scan_options
from worldtrace.schemas.text import json_excerpt

from .megatron import read_index
from .writers import MANIFEST, megatron_name, misplaced_starts

IGNORE_INDEX = -100
"""Label of a token that is not trained (Hugging Face / PyTorch cross-entropy ignore_index)."""


def read_manifest(directory: str | Path, fmt: str | None = None) -> dict[str, Any]:
    """The manifest of one export part; a clear error for a split export's top directory."""
    d = Path(directory)
    path = d / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path}: no export manifest (run `worldtrace export` first)")
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # cut short, edited, not UTF-8
        raise ValueError(f"{path}: not an export manifest ({exc})") from None
    if not isinstance(m, dict) or not isinstance(m.get("format"), str):
        raise ValueError(f"{path}: not an export manifest (no format)")
    if "parts" in m:
        raise ValueError(
            f"{d}: a split export; pass one of its parts: "
            + ", ".join(str(d / p["path"]) for p in m["parts"].values())
        )
    if fmt and m["format"] != fmt:
        raise ValueError(f"{path}: format is {m['format']!r}, this reader needs {fmt!r}")
    return m


def _files(directory: str | Path, m: dict[str, Any]) -> list[Path]:
    return [Path(directory) / s["path"] for s in m["shards"] if s["path"].endswith(".parquet")]


# -- Hugging Face ----------------------------------------------------------------------
def document_starts(boundaries: list[int], num_tokens: int, seq_len: int) -> list[int]:
    """Where each document of a packed row starts, the padding (from num_tokens) counting
    as one more."""
    return [*boundaries, num_tokens] if num_tokens < seq_len else list(boundaries)


def position_ids(n: int, starts: list[int] | np.ndarray) -> np.ndarray:
    """Positions 0.. restarting at every start."""
    pos = np.arange(n, dtype=np.int64)
    starts = np.asarray(list(starts), dtype=np.int64)
    if len(starts):
        seg = np.searchsorted(starts, pos, side="right") - 1
        pos = pos - np.where(seg >= 0, starts[np.maximum(seg, 0)], 0)
    return pos


def add_labels(table: pa.Table, where: Callable[[int], str] | None = None) -> pa.Table:
    """`labels` (input_ids where loss_mask, else -100; -100 at every document start of a
    packed row) and `completion_mask` (TRL's name for the loss mask); for packed rows also
    `position_ids`. Vectorised over the flattened token columns. `where(r)` names row r
    in the error a packed row with misplaced `doc_boundaries` is (`check_starts`)."""
    ids = table["input_ids"].combine_chunks()
    mask = table["loss_mask"].combine_chunks()
    flat_mask = pc.list_flatten(mask).to_numpy(zero_copy_only=False).astype(bool)
    flat_ids = pc.list_flatten(ids).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = ids.offsets.to_numpy()
    labels = np.where(flat_mask, flat_ids, IGNORE_INDEX)
    out = table
    if "doc_boundaries" in table.column_names:
        check_starts(table, np.diff(offsets), where or (lambda r: f"row {r} of the batch"))
        pos = np.empty(len(flat_ids), dtype=np.int64)
        used = table["num_tokens"].to_pylist()
        for r, bounds in enumerate(table["doc_boundaries"].to_pylist()):
            lo, hi = offsets[r], offsets[r + 1]
            pos[lo:hi] = position_ids(hi - lo, document_starts(bounds, used[r], hi - lo))
            labels[lo + np.asarray(bounds, dtype=np.int64)] = IGNORE_INDEX
        out = out.append_column("position_ids", _lists(offsets, pos))
    out = out.append_column("labels", _lists(offsets, labels))
    return out.append_column("completion_mask", mask)


def check_starts(table: pa.Table, lengths: np.ndarray, where: Callable[[int], str]) -> None:
    """A one-line ValueError naming the row (`where`) and the field when a packed row's
    `doc_boundaries` are not its documents' starts (`writers.misplaced_starts`): they
    index its labels and positions, where a start past the row was an IndexError
    traceback, or silently the next row's label."""
    used = table["num_tokens"].to_numpy()
    bad = misplaced_starts(table["doc_boundaries"], np.minimum(used, lengths))
    if len(bad):
        r = int(bad[0])
        starts = json_excerpt(table["doc_boundaries"][r].as_py())
        raise ValueError(
            f"{where(r)}: doc_boundaries {starts} are not the starts of its documents (one "
            f"per sample, from 0, increasing, below num_tokens {int(used[r])}): a damaged "
            "shard; `worldtrace export --verify DIR` checks the export"
        )


def _lists(offsets: np.ndarray, values: np.ndarray) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values))


def hf_dataset(directory: str | Path, cache_dir: str | None = None):
    """A Parquet export as a `datasets.Dataset` with `input_ids`, `labels`,
    `completion_mask` (and `position_ids` when packed), ready for `transformers.Trainer`
    or TRL's SFTTrainer (which uses `labels` as they are)."""
    import datasets

    m = read_manifest(directory, "parquet")
    files = _files(directory, m)
    if not files:  # datasets would say only "Empty 'data_files'"
        raise ValueError(
            f"{directory}: the export holds no rows (counts.rows "
            f"{(m.get('counts') or {}).get('rows')}): nothing to load"
        )
    ds = datasets.load_dataset(
        "parquet",
        data_files=[str(f) for f in files],
        split="train",
        cache_dir=cache_dir,
        fragment_scan_options=verified_scan_options(),  # a flipped bit fails, not trains
    )
    return ds.with_format("arrow").map(add_labels, batched=True).with_format(None)


# -- torch: packed shards --------------------------------------------------------------
class PackedShards(IterableDataset):
    """Rows of a packed Parquet export, streamed row group by row group: `input_ids`,
    `labels`, `position_ids` (long, seq_len each) and `cu_seqlens` (int32, the start of
    every document and the padding, then seq_len). With DataLoader workers, each reads
    every num_workers-th row group."""

    COLUMNS = ("input_ids", "loss_mask", "doc_boundaries", "num_tokens")

    def __init__(self, directory: str | Path):
        m = read_manifest(directory, "parquet")
        if not m["sampling"]["seq_len"]:
            raise ValueError(f"{directory}: not a packed export (export with --seq-len N)")
        self.seq_len = m["sampling"]["seq_len"]
        self.files = _files(directory, m)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        k, n = (info.id, info.num_workers) if info else (0, 1)
        unit = 0
        for f in self.files:
            pf = open_parquet(f)
            at = 0  # the row group's first row in the file
            for rg in range(pf.num_row_groups):
                unit, first = unit + 1, at
                at += pf.metadata.row_group(rg).num_rows
                if (unit - 1) % n != k:
                    continue
                table = pf.read_row_group(rg, columns=list(self.COLUMNS))
                table = add_labels(table, lambda r, f=f, first=first: f"{f}: row {first + r}")
                keep = ["input_ids", "labels", "position_ids", "doc_boundaries", "num_tokens"]
                for row in table.select(keep).to_pylist():
                    yield self.example(row)

    def example(self, row: dict[str, Any]) -> dict[str, torch.Tensor]:
        starts = document_starts(row["doc_boundaries"], row["num_tokens"], self.seq_len)
        return {
            "input_ids": torch.tensor(row["input_ids"], dtype=torch.long),
            "labels": torch.tensor(row["labels"], dtype=torch.long),
            "position_ids": torch.tensor(row["position_ids"], dtype=torch.long),
            "cu_seqlens": torch.tensor([*starts, self.seq_len], dtype=torch.int32),
        }


def collate_packed(examples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Stack packed rows; `cu_seqlens` of the flattened batch (row r offset by r*seq_len)
    and `max_seqlen`, for varlen attention kernels."""
    out = {
        k: torch.stack([e[k] for e in examples]) for k in ("input_ids", "labels", "position_ids")
    }
    seq_len = out["input_ids"].shape[1]
    cu = [examples[0]["cu_seqlens"][:1]]
    for r, e in enumerate(examples):
        cu.append(e["cu_seqlens"][1:] + r * seq_len)
    out["cu_seqlens"] = torch.cat(cu)
    out["max_seqlen"] = torch.diff(out["cu_seqlens"]).max()
    return out


# -- Megatron-LM -----------------------------------------------------------------------
def megatron_sample(
    directory: str | Path, index: int, part: str | None = None
) -> dict[str, np.ndarray]:
    """Sequence `index` of a Megatron export as Megatron-LM's GPTDataset feeds its loss:
    `tokens = seq[:-1]`, `labels = seq[1:]`, `loss_mask = sidecar[1:]` (float32; the
    sidecar marks targets unshifted, so target i+1 is label i). The sequence ends with the
    end-of-document token, so `tokens` is the exported row and the last label (the EOD)
    has loss mask 0.

    `directory` is an export or one part of a split export (`OUTPUT/test`); its files are
    named by the part its manifest says (`test_text_document`), unless `part` is given.
    (Earlier versions looked for `train_*` whatever the directory: a split's test part
    was `No such file or directory`.) An index outside 0..N-1 is an IndexError naming
    the file and how many it holds, a negative one too: Megatron's sample indexes count
    from 0, and -1 read the last sequence as if it were asked for."""
    d = Path(directory)
    m = read_manifest(d, "megatron")  # a split's top, or another format: said as such
    part = part or m.get("part") or "train"
    out = {}
    for kind in ("text", "mask"):
        prefix = d / megatron_name(part, kind)
        sizes, pointers, _, dtype = read_index(f"{prefix}.idx")
        if not 0 <= index < len(sizes):
            raise IndexError(
                f"{prefix}.idx: no sequence {index}: it holds {len(sizes)} (0..{len(sizes) - 1})"
                if len(sizes)
                else f"{prefix}.idx: no sequence {index}: it holds none (an empty part)"
            )
        data = np.memmap(f"{prefix}.bin", dtype=dtype, mode="r")
        start = int(pointers[index]) // np.dtype(dtype).itemsize
        out[kind] = np.array(data[start : start + int(sizes[index])])
    seq, side = out["text"].astype(np.int64), out["mask"]
    return {"tokens": seq[:-1], "labels": seq[1:], "loss_mask": side[1:].astype(np.float32)}
