"""Writers: training rows -> Parquet or Megatron shards, records -> AgentWorldBench JSONL,
the staged output directory, the manifest, and `verify`.

The row schemas and the label-shift convention are defined here once so a reader of the
shards (a trainer) imports them instead of restating them. Shard names are fixed and the
manifest holds no clock: the same rows give byte-identical files.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.store import ShardWriter, sweep_leftovers, temp_name, write_bytes_atomic

from .mask import keep_turn
from .megatron import IndexedDatasetWriter, read_index
from .render import system_text

FORMATS = ("parquet", "megatron", "agentworldbench")
MANIFEST = "manifest.json"
LABEL_SHIFT = (
    "unshifted: loss_mask[i] = 1 means input_ids[i] is a prediction target; the trainer "
    "shifts labels by one (Hugging Face convention: labels = input_ids, loss on logits[:-1] vs labels[1:])"
)
TRAIN_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string()),
        pa.field("trajectory_id", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("input_ids", pa.list_(pa.int32())),
        pa.field("loss_mask", pa.list_(pa.uint8())),
        pa.field("num_tokens", pa.int32()),
        pa.field("num_loss_tokens", pa.int32()),
    ]
)
PACKED_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string()),
        pa.field("sample_ids", pa.list_(pa.string())),
        pa.field("trajectory_id", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("input_ids", pa.list_(pa.int32())),
        pa.field("loss_mask", pa.list_(pa.uint8())),
        pa.field("doc_boundaries", pa.list_(pa.int32())),
        pa.field("num_tokens", pa.int32()),
        pa.field("num_loss_tokens", pa.int32()),
    ]
)
MEGATRON_TEXT = "train_text_document"
MEGATRON_MASK = "train_loss_mask"
AWB_FILE = "train.jsonl"
ROW_GROUP_ROWS = 256


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A fresh directory beside `out` that replaces `out` when the block succeeds and is
    removed when it fails, so readers never see half an export."""
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(out.parent)  # exports that died before cleaning up
    staging = out.parent / temp_name(".staging-", out.name)  # owned: spared while we run
    staging.mkdir()
    try:
        yield staging
        old = out.parent / f".old-{out.name}-{uuid.uuid4().hex[:8]}"
        if out.exists():
            os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# -- training rows ---------------------------------------------------------------------
def write_rows(fmt: str, rows: Iterable[dict[str, Any]], directory: Path, packed: bool) -> int:
    """Training rows (samples.Sample.row or samples.pack) in `fmt`; returns the row count."""
    if fmt == "megatron":
        return write_megatron(rows, directory)
    return write_parquet(rows, directory, PACKED_SCHEMA if packed else TRAIN_SCHEMA)


def write_megatron(rows: Iterable[dict[str, Any]], directory: Path) -> int:
    """Token ids (int32: the vocabulary exceeds uint16) and the uint8 loss-mask sidecar,
    one sequence and one document per row."""
    text = IndexedDatasetWriter(directory / MEGATRON_TEXT, np.int32)
    mask = IndexedDatasetWriter(directory / MEGATRON_MASK, np.uint8)
    n = 0
    for r in rows:
        text.add(r["input_ids"])
        mask.add(r["loss_mask"])
        n += 1
    text.close()
    mask.close()
    return n


def write_parquet(rows: Iterable[dict[str, Any]], directory: Path, schema: pa.Schema) -> int:
    n = 0
    with ShardWriter(
        directory,
        schema=schema,
        prefix="train",
        run="export",
        row_group_rows=ROW_GROUP_ROWS,
        target_bytes=256 << 20,
    ) as w:
        buf = []
        for r in rows:
            buf.append(r)
            n += 1
            if len(buf) >= ROW_GROUP_ROWS:
                w.write_batch(_batch(buf, schema))
                buf = []
        if buf:
            w.write_batch(_batch(buf, schema))
    return n


def _batch(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows -> a record batch; the token columns are built from one concatenated array
    (pa.array over a list of numpy arrays would convert element by element)."""
    cols = {}
    for f in schema:
        vals = [r[f.name] for r in rows]
        if pa.types.is_list(f.type) and f.name in ("input_ids", "loss_mask"):
            flat = (
                np.concatenate(vals)
                if vals
                else np.array([], dtype=f.type.value_type.to_pandas_dtype())
            )
            offs = np.zeros(len(vals) + 1, dtype=np.int32)
            np.cumsum([len(v) for v in vals], out=offs[1:])
            cols[f.name] = pa.ListArray.from_arrays(
                pa.array(offs), pa.array(flat, type=f.type.value_type)
            )
        else:
            cols[f.name] = pa.array(vals, type=f.type)
    return pa.RecordBatch.from_pydict(cols, schema=schema)


# -- AgentWorldBench -------------------------------------------------------------------
def agentworldbench_line(rec: dict[str, Any], seed: int) -> dict[str, Any]:
    """A record as the AgentWorldBench evaluation reads it; `turn_idx` lists the turns
    whose observation is kept (the same hash draw as keep_mode=turn)."""
    tid = rec[F.TRAJECTORY_ID]
    turns = rec[F.TURNS]
    return {
        "id": tid,
        "task": f"worldtrace/{rec[F.DOMAIN]}",
        "system_str": system_text(rec.get(F.SYSTEM)),
        "prompt": [t["action"]["text"] for t in turns],
        "response": [t["observation"]["text"] for t in turns],
        "turn_idx": [
            t["index"]
            for t in turns
            if keep_turn(tid, t["index"], seed, 1.0 if t.get("keep") is None else t["keep"])
        ],
    }


def write_agentworldbench(records: list[dict[str, Any]], directory: Path, seed: int) -> int:
    lines = [
        json.dumps(agentworldbench_line(r, seed), ensure_ascii=False, sort_keys=True)
        for r in records
    ]
    write_bytes_atomic(directory / AWB_FILE, ("\n".join(lines) + "\n").encode())
    return len(lines)


# -- manifest and verification ---------------------------------------------------------
def shard_entries(directory: Path) -> list[dict[str, Any]]:
    """Name, size and sha256 of every file written so far, in name order."""
    return [
        {"path": p.name, "bytes": p.stat().st_size, "sha256": sha256_file(str(p))}
        for p in sorted(directory.iterdir())
        if not p.name.startswith(".")
    ]


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    body = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(directory / MANIFEST, body.encode())


def verify(directory: str | os.PathLike) -> list[str]:
    """Recompute what the manifest claims; returns the problems (empty = verified)."""
    d = Path(directory)
    mpath = d / MANIFEST
    if not mpath.exists():
        return [f"{mpath}: missing manifest"]
    try:
        m = json.loads(mpath.read_text())
    except json.JSONDecodeError as exc:
        return [f"{mpath}: invalid JSON: {exc}"]
    problems = _check_files(d, m["shards"])
    if problems:
        return problems
    if m["format"] == "parquet":
        return _check_parquet(d, m)
    if m["format"] == "megatron":
        return _check_megatron(d, m)
    return []


def _check_files(d: Path, shards: list[dict[str, Any]]) -> list[str]:
    problems = []
    listed = {s["path"] for s in shards}
    for s in shards:
        p = d / s["path"]
        if not p.exists():
            problems.append(f"{p}: missing shard")
            continue
        if p.stat().st_size != s["bytes"]:
            problems.append(f"{p}: size {p.stat().st_size} != manifest {s['bytes']}")
        digest = sha256_file(str(p))
        if digest != s["sha256"]:
            problems.append(f"{p}: sha256 {digest} != manifest {s['sha256']}")
    for p in d.iterdir():
        if p.name != MANIFEST and not p.name.startswith(".") and p.name not in listed:
            problems.append(f"{p}: not listed in the manifest")
    return problems


def _check_parquet(d: Path, m: dict[str, Any]) -> list[str]:
    problems = []
    c = m["counts"]
    cols = ["input_ids", "loss_mask", "num_loss_tokens"]
    t = pa.concat_tables([pq.read_table(d / s["path"], columns=cols) for s in m["shards"]])
    if not pc.all(
        pc.equal(pc.list_value_length(t["input_ids"]), pc.list_value_length(t["loss_mask"]))
    ).as_py():
        problems.append(f"{d}: a row's loss_mask length differs from its input_ids length")
    if t.num_rows != c["rows"]:
        problems.append(f"{d}: {t.num_rows} rows != manifest {c['rows']}")
    loss = pc.sum(t["num_loss_tokens"]).as_py() or 0
    mask_sum = pc.sum(pc.list_flatten(t["loss_mask"])).as_py() or 0
    if not loss == mask_sum == c["loss_tokens"]:
        problems.append(
            f"{d}: loss tokens {loss} (column) / {mask_sum} (mask) != manifest {c['loss_tokens']}"
        )
    return problems


def _check_megatron(d: Path, m: dict[str, Any]) -> list[str]:
    problems = []
    sizes_t, _, _, _ = read_index(d / f"{MEGATRON_TEXT}.idx")
    sizes_m, _, _, _ = read_index(d / f"{MEGATRON_MASK}.idx")
    if not np.array_equal(sizes_t, sizes_m):
        problems.append(f"{d}: text and loss-mask sequence sizes differ")
    if len(sizes_t) != m["counts"]["rows"]:
        problems.append(f"{d}: {len(sizes_t)} sequences != manifest {m['counts']['rows']}")
    return problems
