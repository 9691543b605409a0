"""The counts of an export's manifest recounted from its files (`writers.verify` calls
`recount` after it has checked sizes and hashes): a tamperer, or a bug, that rewrote
shards and their hashes is caught where the counts no longer add up. Kept apart from the
writers: it reads the shards as a trainer would, they only write them."""

from __future__ import annotations

import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any

from .megatron import read_index
from .samples import MAIN_PART
from .writers import (
    ROW_GROUP_ROWS,
    DistinctIds,
    load_manifest,
    misplaced_starts,
    trajectory_problems,
)

RECOUNT_ERRORS = (OSError, ValueError, KeyError, TypeError, IndexError, struct.error)
"""What reading shards that are not what their manifest says raises (pyarrow's errors
are ValueErrors, or `pa.ArrowException`s, added where pyarrow is imported)."""


def recount(directory: str | os.PathLike) -> list[str]:
    """The manifest's counts (a split export's part by part, and its top counts against
    the parts) against the files, and the counts against each other where the manifest
    says they add up (`_check_counts`). Problems, empty when they agree."""
    d = Path(directory)
    m = _read_manifest(d)
    if m is None:
        return []  # the file checks said why
    if "parts" not in m:
        return _recount(d, m)
    problems, parts = [], {}
    for name, p in sorted(m["parts"].items()):
        if (pm := _read_manifest(d / p["path"], part=True)) is not None:
            parts[name] = pm
            problems += _recount(d / p["path"], pm)
    return problems + _check_top_counts(d, m, parts)


def _read_manifest(d: Path, part: bool = False) -> dict[str, Any] | None:
    """The manifest, when it can be checked (`writers.load_manifest`; else the file
    checks said why)."""
    return load_manifest(d, part)[0]


def _recount(d: Path, m: dict[str, Any]) -> list[str]:
    """The counts of one part recounted from its files (when they are all there, at the
    size listed: `verify_files` names the others)."""
    for s in m["shards"]:
        p = d / s["path"]
        if not p.is_file() or p.stat().st_size != s["bytes"]:
            return []
    import pyarrow as pa

    c = m["counts"]
    try:
        if m["format"] == "parquet":
            found, problems = _recount_parquet(d, m)
        elif m["format"] == "megatron":
            found, problems = _recount_megatron(d, m)
        else:
            found, problems = _recount_awb(d, m), []
    except (*RECOUNT_ERRORS, pa.ArrowException) as exc:
        return [f"{d}: cannot recount the shards: {exc}"]
    for key, n in found.items():
        if key == "trajectory_ids":
            problems += trajectory_problems(d, m, *n)
        elif key == "by_domain":
            problems += _compare_domains(d, c, n)
        elif n != c.get(key):
            problems.append(
                f"{d}: {n} {key.replace('_', ' ')} in the files != manifest {c.get(key)}"
            )
    return problems + _check_counts(d, c)


def _check_counts(d: Path, c: dict[str, Any]) -> list[str]:
    """What the manifest says of its own counts (docs/export.md): each category's
    targets among its observation tokens and its turns in the loss among its turns, and
    the categories' `loss_tokens + eot_tokens` adding up to `loss_tokens` (a manifest
    from before the end-of-turn targets had a category, whose categories have no
    `eot_tokens`: at most `loss_tokens`)."""
    cats = c.get("by_category") or {}
    problems = [
        f"{d}: by_category {name} {a.replace('_', ' ')} {v[a]} > its {b.replace('_', ' ')} {v[b]}"
        for name, v in sorted(cats.items())
        for a, b in (("loss_tokens", "obs_tokens"), ("turns_in_loss", "turns"))
        if a in v and b in v and v[a] > v[b]
    ]
    if not cats or "loss_tokens" not in c:
        return problems
    total = sum(v.get("loss_tokens", 0) + v.get("eot_tokens", 0) for v in cats.values())
    if all("eot_tokens" in v for v in cats.values()) and total != c["loss_tokens"]:
        problems.append(
            f"{d}: by_category loss tokens + eot tokens add up to {total} != manifest "
            f"loss tokens {c['loss_tokens']}"
        )
    elif total > c["loss_tokens"]:
        problems.append(
            f"{d}: by_category loss tokens add up to {total} > manifest loss tokens "
            f"{c['loss_tokens']}"
        )
    return problems


def _compare_domains(d: Path, c: dict[str, Any], found: dict[str, Counter] | None) -> list[str]:
    """`counts.by_domain` against the files' (`found`), or, where the files do not say
    the domain (Megatron, packed rows), against the totals."""
    keys = ("samples", "tokens", "loss_tokens") if found is None else tuple(found)
    domains = c.get("by_domain", {})
    listed = {k: Counter({dom: v.get(k, 0) for dom, v in domains.items()}) for k in keys}
    problems = []
    for k in keys:
        if found is not None and +found[k] != +listed[k]:
            differ = sorted(
                dom for dom in {*found[k], *listed[k]} if found[k][dom] != listed[k][dom]
            )
            problems += [
                f"{d}: {dom} {k.replace('_', ' ')} {found[k][dom]} in the files != manifest "
                f"by_domain {listed[k][dom]}"
                for dom in differ
            ]
        elif found is None and sum(listed[k].values()) != c[k]:
            problems.append(
                f"{d}: by_domain {k} add up to {sum(listed[k].values())} != manifest {c[k]}"
            )
    return problems


def _recount_parquet(d: Path, m: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Rows, samples, tokens and per-domain counts of the rows, and loss tokens from both
    the `num_loss_tokens` column and the masks; every row's mask as long as its tokens,
    its `num_loss_tokens` its mask's sum, and a packed row's padding the manifest's EOD,
    never a target, its `doc_boundaries` one start per sample id within its tokens
    (`writers.misplaced_starts`); every token id within the vocabulary and every
    document start (a packed row's `doc_boundaries`, an unpacked row's first token) the
    manifest's `sampling.doc_start_id` (`_token_checks`). One pass over the shards,
    `ROW_GROUP_ROWS` rows at a time: memory stays flat however large the export."""
    import numpy as np
    import pyarrow.compute as pc
    from worldtrace.schemas.tempfiles import open_parquet

    seq_len = (m.get("sampling") or {}).get("seq_len") or 0
    eod = (m.get("tokenizer") or {}).get("eod_id")
    cols = ["domain", "input_ids", "loss_mask", "num_tokens", "num_loss_tokens"]
    cols += ["sample_ids", "doc_boundaries"] if seq_len else []
    tids: DistinctIds | None = DistinctIds()  # None once a shard has no trajectory_id
    samples = tokens = bad_loss = bad_len = not_binary = pad_id = pad_target = 0
    rows = loss_column = loss_mask = bad_starts = 0
    first_bad = ""  # the shard and row of the first packed row whose starts are wrong
    vocab = (m.get("tokenizer") or {}).get("vocab_size")
    start_id = (m.get("sampling") or {}).get("doc_start_id")
    out_of_vocab: list[str] = []  # one problem a shard
    bad_doc_starts, first_bad_doc = 0, ""
    by = {k: Counter() for k in ("samples", "tokens", "loss_tokens")}
    for s in m["shards"]:
        with open_parquet(d / s["path"]) as f:
            tid = "trajectory_id" in f.schema_arrow.names and tids is not None
            tids = tids if tid else None
            at = 0  # the batch's first row in the shard
            oov, first_oov = 0, ""  # this shard's ids outside the vocabulary
            for b in f.iter_batches(ROW_GROUP_ROWS, columns=cols + ["trajectory_id"] * tid):
                if tids is not None:
                    tids.add(pc.unique(b["trajectory_id"]).to_pylist())
                lengths = pc.list_value_length(b["input_ids"]).to_numpy(zero_copy_only=False)
                mask = pc.list_flatten(b["loss_mask"]).to_numpy()
                masks = pc.list_value_length(b["loss_mask"]).to_numpy(zero_copy_only=False)
                if not np.array_equal(masks, lengths):  # nothing of the row adds up
                    return {}, [f"{d}: a row's loss_mask length differs from its input_ids length"]
                n_tok = b["num_tokens"].to_numpy()
                n_loss = b["num_loss_tokens"].to_numpy()
                rows += b.num_rows
                loss_column += int(n_loss.sum())
                loss_mask += int(mask.sum(dtype=np.int64))
                ends = np.cumsum(lengths)
                csum = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
                loss = csum[ends] - csum[ends - lengths]
                bad_loss += int(np.count_nonzero(loss != n_loss))
                not_binary += int(np.count_nonzero(mask > 1))
                tokens += int(n_tok.sum())
                ids = pc.list_flatten(b["input_ids"]).to_numpy(zero_copy_only=False)
                bad = np.zeros(0, np.int64)  # packed rows whose starts are misshapen
                if seq_len:
                    n_samples = pc.fill_null(pc.list_value_length(b["sample_ids"]), 0)
                    samples += int(pc.sum(n_samples).as_py() or 0)
                    limit = np.minimum(n_tok, lengths)
                    bad = misplaced_starts(b["doc_boundaries"], limit, np.asarray(n_samples))
                    if len(bad) and not bad_starts:
                        first_bad = f"{s['path']} row {at + int(bad[0])}"
                    bad_starts += len(bad)
                starts = b["doc_boundaries"] if seq_len else None
                n_oov, oov_at, n_starts, starts_at = _token_checks(
                    ids, lengths, vocab, start_id, starts, bad
                )
                if n_oov and not oov:
                    first_oov = f"row {at + oov_at[0]}, id {oov_at[1]}"
                oov += n_oov
                if n_starts and not bad_doc_starts:
                    first_bad_doc = f"{s['path']} row {at + starts_at}"
                bad_doc_starts += n_starts
                at += b.num_rows
                if seq_len:
                    bad_len += int(np.count_nonzero((lengths != seq_len) | (n_tok > lengths)))
                    pos = np.arange(len(mask)) - np.repeat(ends - lengths, lengths)
                    pad = pos >= np.repeat(n_tok, lengths)
                    pad_id += int(np.count_nonzero(ids[pad] != eod)) if eod is not None else 0
                    pad_target += int(np.count_nonzero(mask[pad]))
                    continue
                samples += b.num_rows
                bad_len += int(np.count_nonzero(n_tok != lengths))
                for dom, t, n in zip(
                    b["domain"].to_pylist(), n_tok.tolist(), loss.tolist(), strict=True
                ):
                    by["samples"][dom] += 1
                    by["tokens"][dom] += t
                    by["loss_tokens"][dom] += n
            if oov:
                out_of_vocab.append(
                    f"{d / s['path']}: {oov} token id(s) outside the vocabulary 0..{vocab - 1} "
                    f"(tokenizer.vocab_size {vocab}; the first: {first_oov})"
                )
    c = m["counts"]
    problems = [f"{d}: {rows} rows != manifest {c['rows']}"] if rows != c["rows"] else []
    problems += out_of_vocab
    if bad_doc_starts:
        where = "doc_boundaries start(s) whose token" if seq_len else "row(s) whose first token"
        problems.append(
            f"{d}: {bad_doc_starts} {where} is not sampling.doc_start_id {start_id}, the "
            f"token every sample starts with (the first: {first_bad_doc})"
        )
    if not loss_column == loss_mask == c["loss_tokens"]:
        problems.append(
            f"{d}: loss tokens {loss_column} (column) / {loss_mask} (mask) != manifest "
            f"{c['loss_tokens']}"
        )
    problems += [
        f"{d}: {what}"
        for n, what in (
            (bad_loss, f"{bad_loss} row(s) whose num_loss_tokens is not their loss_mask's sum"),
            (not_binary, f"{not_binary} loss_mask value(s) other than 0 and 1"),
            (bad_len, f"{bad_len} row(s) whose num_tokens or length is wrong"),
            (pad_id, f"{pad_id} padding token(s) other than the end-of-document id {eod}"),
            (pad_target, f"{pad_target} padding token(s) marked as targets"),
            (
                bad_starts,
                f"{bad_starts} packed row(s) whose doc_boundaries are not one start per "
                "sample id, from 0, increasing and below num_tokens (the first: "
                f"{first_bad})",
            ),
        )
        if n
    ]
    found: dict[str, Any] = {"samples": samples, "tokens": tokens}
    found["by_domain"] = None if seq_len else by
    if tids is not None:  # a packed row names its first sample's trajectory: at most
        mode = (m.get("sampling") or {}).get("mode")
        found["trajectory_ids"] = (tids.count(), bool(seq_len) or mode != "trajectory")
    return found, problems


def _token_checks(ids, lengths, vocab: int | None, start_id: int | None, starts=None, skip=()):
    """A batch of rows (`ids` flat, `lengths` a row): the ids outside `0..vocab-1` (a
    trainer's embedding lookup fails on them, or reads another row of the table) and
    (batch row, id) of the first; the document starts whose token is not `start_id`,
    every sample's first token (`starts`: packed rows' `doc_boundaries`, but those of
    the rows `skip`, whose starts `misplaced_starts` already named; None: each row's
    first token), and the batch row of the first. Either check is skipped (0) when its
    value is None."""
    import numpy as np
    import pyarrow.compute as pc

    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    n_oov, oov_at, n_starts, starts_at = 0, (0, 0), 0, 0
    if vocab is not None and len(ids):
        wrong = np.flatnonzero((ids < 0) | (ids >= vocab))
        if n_oov := len(wrong):
            row = int(np.searchsorted(offsets + lengths, wrong[0], side="right"))
            oov_at = (row, int(ids[wrong[0]]))
    if start_id is None:
        return n_oov, oov_at, n_starts, starts_at
    if starts is None:
        row = np.flatnonzero(lengths > 0)
        at = offsets[row]
    else:
        n = np.asarray(pc.fill_null(pc.list_value_length(starts), 0), dtype=np.int64)
        flat = np.asarray(pc.fill_null(pc.list_flatten(starts), -1), dtype=np.int64)
        row = np.repeat(np.arange(len(n)), n)
        inside = (flat >= 0) & (flat < lengths[row]) & ~np.isin(row, skip)
        row, at = row[inside], offsets[row[inside]] + flat[inside]
    bad = np.flatnonzero(ids[at] != start_id)
    if n_starts := len(bad):
        starts_at = int(row[bad[0]])
    return n_oov, oov_at, n_starts, starts_at


def _recount_megatron(d: Path, m: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Loss tokens from the sidecar (0 and 1 only; the EOD closing every document never a
    target) and samples from the sequences: one per sample unpacked; a packed row does
    not record its samples, so there they are only at least the rows."""
    import numpy as np

    from .writers import megatron_name

    part, c = m.get("part", MAIN_PART), m["counts"]
    seq_len = (m.get("sampling") or {}).get("seq_len") or 0
    tokens = _megatron_tokens(d, m, d / megatron_name(part, "text"))
    prefix = d / megatron_name(part, "mask")
    try:
        sizes, pointers, _, dtype = read_index(f"{prefix}.idx")
    except ValueError:
        return {}, tokens  # the file checks (`writers._check_megatron`) said why
    if np.dtype(dtype) != np.uint8 or Path(f"{prefix}.bin").stat().st_size != int(
        sizes.sum(dtype=np.int64)
    ):
        return {}, [f"{d}: {prefix.name}.bin does not match its index"]
    empty = not sizes.sum()  # an empty part of a split: an empty file cannot be mapped
    mask = np.zeros(0, np.uint8) if empty else np.memmap(f"{prefix}.bin", np.uint8, mode="r")
    loss = not_binary = 0
    for at in range(0, len(mask), 1 << 26):  # a chunk at a time: memory stays flat
        chunk = mask[at : at + (1 << 26)]
        loss += int(np.count_nonzero(chunk))
        not_binary += int(np.count_nonzero(chunk > 1))
    problems = [f"{d}: {not_binary} loss-mask value(s) other than 0 and 1"] if not_binary else []
    problems = tokens + problems
    if "eod_tokens" in c and len(sizes):
        eods = int(np.count_nonzero(mask[pointers + sizes.astype(np.int64) - 1]))
        if eods:
            problems.append(f"{d}: {eods} end-of-document token(s) marked as targets")
    found: dict[str, Any] = {"loss_tokens": loss, "by_domain": None}
    if not seq_len:
        found["samples"] = len(sizes)
    elif c["samples"] < len(sizes) or c["tokens"] > len(sizes) * seq_len:
        problems.append(
            f"{d}: manifest samples {c['samples']} / tokens {c['tokens']} cannot fill "
            f"{len(sizes)} packed rows of {seq_len}"
        )
    return found, problems


def _megatron_tokens(d: Path, m: dict[str, Any], prefix: Path) -> list[str]:
    """The text `.bin`'s ids within the vocabulary (`tokenizer.vocab_size`), read a
    chunk at a time as the sidecar is, and every document's first token (through the
    index's pointers) the manifest's `sampling.doc_start_id`: a packed document starts
    with its first sample. Each check skipped when the manifest does not say its value."""
    import numpy as np

    vocab = (m.get("tokenizer") or {}).get("vocab_size")
    start_id = (m.get("sampling") or {}).get("doc_start_id")
    try:
        sizes, pointers, _, dtype = read_index(f"{prefix}.idx")
    except ValueError:
        return []  # the file checks (`writers._check_megatron`) said why
    if (vocab is None and start_id is None) or not sizes.sum(dtype=np.int64):
        return []  # nothing to check, or an empty part (an empty file cannot be mapped)
    data = np.memmap(f"{prefix}.bin", np.dtype(dtype), mode="r")
    firsts = pointers // data.itemsize  # each document's first token in the `.bin`
    problems, step = [], (1 << 26) // data.itemsize
    if vocab is not None:
        oov, first = 0, ""
        for at in range(0, len(data), step):  # a chunk at a time: memory stays flat
            chunk = data[at : at + step]
            wrong = np.flatnonzero((chunk < 0) | (chunk >= vocab))
            if len(wrong) and not oov:
                doc = int(np.searchsorted(firsts, at + wrong[0], side="right")) - 1
                first = f"document {doc}, id {int(chunk[wrong[0]])}"
            oov += len(wrong)
        if oov:
            problems.append(
                f"{prefix}.bin: {oov} token id(s) outside the vocabulary 0..{vocab - 1} "
                f"(tokenizer.vocab_size {vocab}; the first: {first})"
            )
    if start_id is not None:
        docs = np.flatnonzero(sizes > 0)
        bad = docs[data[firsts[docs]] != start_id]
        if len(bad):
            problems.append(
                f"{prefix}.bin: {len(bad)} document(s) whose first token is not "
                f"sampling.doc_start_id {start_id}, the token every sample starts with "
                f"(the first: document {int(bad[0])})"
            )
    return problems


def _recount_awb(d: Path, m: dict[str, Any]) -> dict[str, Any]:
    """Lines, in total and per domain (`<domain>_<part>.jsonl`)."""
    by: Counter[str] = Counter()
    for s in m["shards"]:
        with open(d / s["path"], "rb") as fh:
            by[s["path"].rsplit("_", 1)[0]] += sum(
                chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b"")
            )
    return {"samples": sum(by.values()), "by_domain": {"samples": by}}


def _check_top_counts(d: Path, top: dict[str, Any], parts: dict[str, dict[str, Any]]) -> list[str]:
    """A split export's top counts: each part's as its manifest says, and their sum."""
    problems = []
    for key, total in top["counts"].items():
        if not isinstance(total, int):
            continue
        listed = [p.get("counts", {}).get(key) for p in top["parts"].values()]
        if all(isinstance(n, int) for n in listed) and sum(listed) != total:
            what = key.replace("_", " ")
            problems.append(f"{d}: {what} {total} != the parts' sum {sum(listed)}")
    for name, pm in parts.items():
        for key, n in top["parts"][name].get("counts", {}).items():
            if (own := pm["counts"].get(key)) != n:
                what = key.replace("_", " ")
                problems.append(f"{d}: part {name} {what} {n} != its manifest's {own}")
    return problems
