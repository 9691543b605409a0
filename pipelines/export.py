"""`worldtrace export`: processed trajectories -> token-level loss-masked training shards.

Trajectories are read sorted by trajectory_id, every draw is a hash of (trajectory,
turn, seed), shard names are fixed and the manifest holds no clock: two runs with the
same inputs and settings write byte-identical files.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import os
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.store import ShardWriter, read_table, write_bytes_atomic

from .mask import KEEP_MODES, keep_turn, unit_draw
from .megatron import IndexedDatasetWriter, read_index
from .render import Rendered, Template, load_template, system_text

FORMATS = ("parquet", "megatron", "agentworldbench")
SAMPLE_MODES = ("trajectory", "turn")
SAMPLE_TURNS = ("all", "one")
OVERFLOWS = ("split", "truncate")
MANIFEST = "manifest.json"
TRIM_MARK = "\n[system prompt truncated]"
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


@dataclass
class ExportConfig:
    """One export."""

    input: str = ""
    """Processed trajectories directory (store processed/trajectories)."""
    output: str = ""
    tokenizer: str = ""
    """Path of a Hugging Face tokenizer.json."""
    template: str = "chatml"
    """chatml, plain, or a Jinja file rendering `messages`."""
    template_eot: str = ""
    """For a Jinja template: the end-of-turn text after an assistant message."""
    format: str = "parquet"
    """parquet (input_ids + loss_mask rows), megatron (indexed dataset + loss-mask sidecar)
    or agentworldbench (JSONL text, no tokenizer)."""
    keep_mode: str = "turn"
    """How a partial keep applies: whole turn by hash, per token, or a prefix."""
    seed: int = 0
    """Seed of the per-turn keep draws and of the turn sample_turns=one picks."""
    sample_mode: str = "trajectory"
    """trajectory: one sample per trajectory; turn: one sample per target turn with its history."""
    sample_turns: str = "all"
    """With sample_mode=turn: all turns, or one random turn per trajectory (seeded)."""
    max_len: int = 0
    """Longest sample in tokens (0 = no limit; defaults to seq_len when packing)."""
    overflow: str = "split"
    """Over max_len: split at turn boundaries, or truncate."""
    seq_len: int = 0
    """Pack samples into rows of exactly this many tokens (best fit); 0 = no packing."""
    eot_target: bool = True
    """The end-of-turn token closing an observation is a target too."""
    shard_rows: int = 4096


@dataclass
class Sample:
    sample_id: str
    trajectory_id: str
    domain: str
    text: str
    input_ids: np.ndarray = field(repr=False)
    loss_mask: np.ndarray = field(repr=False)


# -- tokenizer -----------------------------------------------------------------------
def load_tokenizer(path: str):
    from tokenizers import Tokenizer

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    return Tokenizer.from_file(str(p))


def tokenizer_info(path: str, tok) -> dict[str, Any]:
    p = Path(path)
    name = p.stem
    cfg = p.with_name("tokenizer_config.json")
    if cfg.exists():
        with contextlib.suppress(json.JSONDecodeError):
            name = json.loads(cfg.read_text()).get("tokenizer_class") or name
    return {
        "name": name,
        "file": p.name,
        "sha256": sha256_file(str(p)),
        "vocab_size": tok.get_vocab_size(),
    }


# -- masks -------------------------------------------------------------------------
def _token_range(starts: np.ndarray, ends: np.ndarray, s: int, e: int) -> tuple[int, int]:
    """Tokens lying wholly inside [s, e)."""
    lo = int(np.searchsorted(starts, s, "left"))
    hi = int(np.searchsorted(ends, e, "right"))
    return lo, max(lo, hi)


def loss_mask(
    offsets: np.ndarray,
    rendered: Rendered,
    turns: dict[int, dict[str, Any]],
    tid: str,
    cfg: ExportConfig,
    targets: set[int] | None = None,
) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Per-token mask from observation spans and the turns' keep ratios, with the
    (turn, first token, end token) range of every target observation."""
    mask = np.zeros(len(offsets), dtype=np.uint8)
    ranges: list[tuple[int, int, int]] = []
    if not len(offsets):
        return mask, ranges
    starts, ends = offsets[:, 0], offsets[:, 1]
    for sp in rendered.spans:
        if targets is not None and sp.turn not in targets:
            continue
        keep = turns[sp.turn]["keep"]
        keep = 1.0 if keep is None else keep
        lo, hi = _token_range(starts, ends, sp.start, sp.end)
        ranges.append((sp.turn, lo, hi))
        n = hi - lo
        if cfg.keep_mode == "turn":
            on = keep_turn(tid, sp.turn, cfg.seed, keep)
            if on:
                mask[lo:hi] = 1
        elif cfg.keep_mode == "token":
            rng = np.random.default_rng(int(unit_draw(tid, sp.turn, cfg.seed) * 2**63))
            mask[lo:hi] = rng.random(n) < keep
            on = keep >= 1.0
        else:  # prefix
            mask[lo : lo + math.ceil(keep * n)] = 1
            on = keep >= 1.0
        if cfg.eot_target and on and sp.eot_end > sp.eot_start:
            elo, ehi = _token_range(starts, ends, sp.eot_start, sp.eot_end)
            mask[elo:ehi] = 1
    return mask, ranges


# -- samples -----------------------------------------------------------------------
class Exporter:
    def __init__(self, cfg: ExportConfig):
        for name, value, allowed in (
            ("format", cfg.format, FORMATS),
            ("keep_mode", cfg.keep_mode, KEEP_MODES),
            ("sample_mode", cfg.sample_mode, SAMPLE_MODES),
            ("sample_turns", cfg.sample_turns, SAMPLE_TURNS),
            ("overflow", cfg.overflow, OVERFLOWS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        self.cfg = cfg
        self.template: Template = load_template(cfg.template, cfg.template_eot)
        self.tok = load_tokenizer(cfg.tokenizer) if cfg.format != "agentworldbench" else None
        self.max_len = cfg.max_len or cfg.seq_len
        self.system_trimmed = 0
        """Samples whose system prompt was shortened to leave room for turns."""
        self.by_category: dict[str, dict[str, int]] = defaultdict(
            lambda: {"obs_tokens": 0, "loss_tokens": 0, "turns": 0, "turns_in_loss": 0}
        )

    def _encode(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        encs = self.tok.encode_batch(texts, add_special_tokens=False)
        return [
            (
                np.asarray(e.ids, dtype=np.int32),
                np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2),
            )
            for e in encs
        ]

    def _pieces(self, rec: dict[str, Any]) -> list[tuple[str, list[dict], set[int] | None]]:
        """(sample suffix, turns to render, target turns) before length limits."""
        turns = rec[F.TURNS]
        if self.cfg.sample_mode == "trajectory":
            return [("", turns, None)]
        indexes = range(len(turns))
        if self.cfg.sample_turns == "one" and turns:
            indexes = [int(unit_draw(rec[F.TRAJECTORY_ID], "turn", self.cfg.seed) * len(turns))]
        return [(f":t{k}", turns[: k + 1], {turns[k]["index"]}) for k in indexes]

    def samples(self, records: list[dict[str, Any]]) -> Iterator[Sample]:
        jobs = []
        for rec in records:
            system = system_text(rec.get(F.SYSTEM))
            for suffix, turns, targets in self._pieces(rec):
                jobs.append(
                    (rec, system, suffix, turns, targets, self.template.render(system, turns))
                )
        encoded = self._encode([j[5].text for j in jobs])
        for (rec, system, suffix, turns, targets, rendered), (ids, offsets) in zip(
            jobs, encoded, strict=True
        ):
            yield from self._fit(rec, system, suffix, turns, targets, rendered, ids, offsets)

    def _make(self, rec, sid, rendered, ids, offsets, targets) -> Sample:
        tid = rec[F.TRAJECTORY_ID]
        turns = {t["index"]: t for t in rec[F.TURNS]}
        mask, ranges = loss_mask(offsets, rendered, turns, tid, self.cfg, targets)
        self._count(turns, ranges, mask)
        return Sample(sid, tid, rec[F.DOMAIN], rendered.text, ids, mask)

    def _count(self, turns, ranges: list[tuple[int, int, int]], mask: np.ndarray) -> None:
        for turn, lo, hi in ranges:
            c = self.by_category[turns[turn].get("category") or "unscored"]
            c["obs_tokens"] += hi - lo
            kept = int(mask[lo:hi].sum())
            c["loss_tokens"] += kept
            c["turns"] += 1
            c["turns_in_loss"] += kept > 0

    def _fit(self, rec, system, suffix, turns, targets, rendered, ids, offsets) -> Iterator[Sample]:
        tid = rec[F.TRAJECTORY_ID]
        limit = self.max_len
        if not limit or len(ids) <= limit:
            yield self._make(rec, tid + suffix, rendered, ids, offsets, targets)
            return
        if self.cfg.overflow == "truncate":
            yield self._truncated(rec, tid + suffix, rendered, ids, offsets, targets, limit)
            return
        shorter = self._fit_system(rec, system, limit // 2)
        if shorter != system:  # re-render: the long system prompt left no room for turns
            system = shorter
            rendered = self.template.render(system, turns)
            [(ids, offsets)] = self._encode([rendered.text])
            if len(ids) <= limit:
                yield self._make(rec, tid + suffix, rendered, ids, offsets, targets)
                return
        if targets is not None:  # turn sample: drop the oldest history until it fits
            for start in range(1, len(turns)):
                r = self.template.render(system, turns[start:])
                [(i2, o2)] = self._encode([r.text])
                if len(i2) <= limit:
                    yield self._make(rec, tid + suffix, r, i2, o2, targets)
                    return
            r = self.template.render(system, turns[-1:])
            [(i2, o2)] = self._encode([r.text])
            yield self._truncated(rec, tid + suffix, r, i2, o2, targets, limit)
            return
        # whole trajectory: split at turn boundaries, each part re-rendered with the system prompt
        starts = offsets[:, 0]
        bounds = [int(np.searchsorted(starts, sp.turn_start, "left")) for sp in rendered.spans] + [
            len(ids)
        ]
        head = bounds[0]
        group, size = [], head
        groups = []
        for n in range(len(turns)):
            cost = bounds[n + 1] - bounds[n]
            if group and size + cost > limit:
                groups.append(group)
                group, size = [], head
            group.append(turns[n])
            size += cost
        if group:
            groups.append(group)
        texts = [self.template.render(system, g) for g in groups]
        for part, (r, (i2, o2)) in enumerate(
            zip(texts, self._encode([r.text for r in texts]), strict=True)
        ):
            sid = f"{tid}/p{part}"
            if len(i2) > limit:
                yield self._truncated(rec, sid, r, i2, o2, None, limit)
            else:
                yield self._make(rec, sid, r, i2, o2, None)

    def _fit_system(self, rec: dict[str, Any], system: str, budget: int) -> str:
        """A system prompt within `budget` tokens: demonstrations go first, then the tail."""
        if not system or len(self._encode([system])[0][0]) <= budget:
            return system
        self.system_trimmed += 1
        system = system_text({**(rec.get(F.SYSTEM) or {}), "demonstrations": None})
        n = len(self._encode([system])[0][0])
        if n <= budget:
            return system
        return system[: max(0, len(system) * budget // n - len(TRIM_MARK))] + TRIM_MARK

    def _truncated(self, rec, sid, rendered, ids, offsets, targets, limit) -> Sample:
        cut = int(offsets[limit - 1, 1]) if limit else 0
        spans = tuple(
            type(sp)(
                sp.turn,
                sp.turn_start,
                sp.start,
                min(sp.end, cut),
                min(sp.eot_start, cut),
                min(sp.eot_end, cut),
            )
            for sp in rendered.spans
            if sp.start < cut
        )
        r = Rendered(rendered.text[:cut], spans)
        return self._make(rec, sid, r, ids[:limit], offsets[:limit], targets)


# -- packing -----------------------------------------------------------------------
def best_fit(lengths: list[tuple[int, str]], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: indexes of `lengths` per bin; ties broken by id for determinism."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i][0], lengths[i][1]))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # sorted (remaining capacity, bin number)
    for i in order:
        n = lengths[i][0]
        j = bisect.bisect_left(free, (n, -1))
        if j < len(free):
            rem, b = free.pop(j)
            bins[b].append(i)
            bisect.insort(free, (rem - n, b))
        else:
            bins.append([i])
            bisect.insort(free, (capacity - n, len(bins) - 1))
    return bins


def pack(samples: list[Sample], seq_len: int, pad_id: int) -> Iterator[dict[str, Any]]:
    for b, members in enumerate(
        best_fit([(len(s.input_ids), s.sample_id) for s in samples], seq_len)
    ):
        members.sort(key=lambda i: samples[i].sample_id)
        ids = np.full(seq_len, pad_id, dtype=np.int32)
        mask = np.zeros(seq_len, dtype=np.uint8)
        bounds, pos = [], 0
        for i in members:
            s = samples[i]
            n = len(s.input_ids)
            ids[pos : pos + n] = s.input_ids
            mask[pos : pos + n] = s.loss_mask
            bounds.append(pos)
            pos += n
        first = samples[members[0]]
        yield {
            "sample_id": f"pack{b:07d}",
            "sample_ids": [samples[i].sample_id for i in members],
            "trajectory_id": first.trajectory_id,
            "domain": first.domain,
            "input_ids": ids,
            "loss_mask": mask,
            "doc_boundaries": bounds,
            "num_tokens": pos,
            "num_loss_tokens": int(mask.sum()),
        }


# -- driver ------------------------------------------------------------------------
def _sorted_records(path: str) -> list[dict[str, Any]]:
    table = read_table(path)
    if table.num_rows == 0:
        raise FileNotFoundError(
            f"no processed trajectories under {path} (run `worldtrace process` first)"
        )
    return table.sort_by(F.TRAJECTORY_ID).to_pylist()


def _policy_from(input_dir: str) -> dict[str, Any] | None:
    m = Path(input_dir).parent / "manifest.json"
    return json.loads(m.read_text()).get("policy") if m.exists() else None


def _awb_line(rec: dict[str, Any], cfg: ExportConfig) -> dict[str, Any]:
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
            if keep_turn(tid, t["index"], cfg.seed, 1.0 if t.get("keep") is None else t["keep"])
        ],
    }


def export(cfg: ExportConfig, batch: int = 256) -> dict[str, Any]:
    """Write the export into `cfg.output` (replacing what was there) and return its manifest."""
    exporter = Exporter(cfg)
    records = _sorted_records(cfg.input)
    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".staging-{out.name}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    counts: dict[str, Any] = {
        "trajectories": len(records),
        "samples": 0,
        "tokens": 0,
        "loss_tokens": 0,
        "rows": 0,
    }
    by_domain: dict[str, dict[str, int]] = defaultdict(
        lambda: {"samples": 0, "tokens": 0, "loss_tokens": 0}
    )
    try:
        if cfg.format == "agentworldbench":
            lines = [
                json.dumps(_awb_line(r, cfg), ensure_ascii=False, sort_keys=True) for r in records
            ]
            write_bytes_atomic(staging / "train.jsonl", ("\n".join(lines) + "\n").encode())
            counts["samples"] = counts["rows"] = len(lines)
            for r in records:
                by_domain[r[F.DOMAIN]]["samples"] += 1
        else:
            samples = []
            for i in range(0, len(records), batch):
                for s in exporter.samples(records[i : i + batch]):
                    counts["samples"] += 1
                    counts["tokens"] += len(s.input_ids)
                    counts["loss_tokens"] += int(s.loss_mask.sum())
                    d = by_domain[s.domain]
                    d["samples"] += 1
                    d["tokens"] += len(s.input_ids)
                    d["loss_tokens"] += int(s.loss_mask.sum())
                    samples.append(s)
            rows = _rows(samples, cfg, exporter)
            counts["rows"] = _write(rows, staging, cfg)
        shards = [
            {"path": p.name, "bytes": p.stat().st_size, "sha256": sha256_file(str(p))}
            for p in sorted(staging.iterdir())
            if not p.name.startswith(".")
        ]
        manifest = {
            "schema_version": F.TRAINING_SCHEMA_VERSION,
            "format": cfg.format,
            "tokenizer": tokenizer_info(cfg.tokenizer, exporter.tok) if exporter.tok else None,
            "template": {
                "name": exporter.template.name,
                "sha256": exporter.template.sha256,
                "eot": exporter.template.eot,
                "eot_target": cfg.eot_target,
            },
            "mask_policy": _policy_from(cfg.input),
            "keep_mode": cfg.keep_mode,
            "seed": cfg.seed,
            "sampling": {
                "mode": cfg.sample_mode,
                "turns": cfg.sample_turns,
                "max_len": exporter.max_len,
                "overflow": cfg.overflow,
                "seq_len": cfg.seq_len,
            },
            "label_shift": LABEL_SHIFT,
            "only_observation_tokens_are_targets": True,
            "counts": {
                **counts,
                "system_trimmed": exporter.system_trimmed,
                "by_domain": dict(sorted(by_domain.items())),
                "by_category": dict(sorted(exporter.by_category.items())),
            },
            "shards": shards,
            "config": {
                k: v for k, v in asdict(cfg).items() if k not in ("input", "output", "tokenizer")
            },
        }
        write_bytes_atomic(
            staging / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        )
        old = out.parent / f".old-{out.name}-{uuid.uuid4().hex[:8]}"
        if out.exists():
            os.replace(out, old)
        os.replace(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _rows(samples: list[Sample], cfg: ExportConfig, exporter: Exporter) -> Iterator[dict[str, Any]]:
    if cfg.seq_len:
        pad = exporter.tok.token_to_id("<|endoftext|>")
        yield from pack(samples, cfg.seq_len, 0 if pad is None else pad)
        return
    for s in samples:
        yield {
            "sample_id": s.sample_id,
            "trajectory_id": s.trajectory_id,
            "domain": s.domain,
            "input_ids": s.input_ids,
            "loss_mask": s.loss_mask,
            "num_tokens": len(s.input_ids),
            "num_loss_tokens": int(s.loss_mask.sum()),
        }


def _write(rows: Iterator[dict[str, Any]], staging: Path, cfg: ExportConfig) -> int:
    n = 0
    if cfg.format == "megatron":
        text = IndexedDatasetWriter(staging / "train_text_document", np.int32)
        mask = IndexedDatasetWriter(staging / "train_loss_mask", np.uint8)
        for r in rows:
            text.add(r["input_ids"])
            mask.add(r["loss_mask"])
            n += 1
        text.close()
        mask.close()
        return n
    schema = PACKED_SCHEMA if cfg.seq_len else TRAIN_SCHEMA
    with ShardWriter(
        staging,
        schema=schema,
        prefix="train",
        run="export",
        row_group_rows=256,
        target_bytes=256 << 20,
    ) as w:
        buf = []
        for r in rows:
            buf.append(r)
            n += 1
            if len(buf) >= 256:
                w.write_batch(_batch(buf, schema))
                buf = []
        if buf:
            w.write_batch(_batch(buf, schema))
    return n


def _batch(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
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


# -- verify ------------------------------------------------------------------------
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
    problems = []
    listed = {s["path"] for s in m["shards"]}
    for s in m["shards"]:
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
    if problems:
        return problems
    c = m["counts"]
    if m["format"] == "parquet":
        cols = ["input_ids", "loss_mask", "num_loss_tokens"]
        t = pa.concat_tables([pq.read_table(d / s["path"], columns=cols) for s in m["shards"]])
        pc = pa.compute
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
    elif m["format"] == "megatron":
        sizes_t, _, _, _ = read_index(d / "train_text_document.idx")
        sizes_m, _, _, _ = read_index(d / "train_loss_mask.idx")
        if not np.array_equal(sizes_t, sizes_m):
            problems.append(f"{d}: text and loss-mask sequence sizes differ")
        if len(sizes_t) != c["rows"]:
            problems.append(f"{d}: {len(sizes_t)} sequences != manifest {c['rows']}")
    return problems
