"""Pass 1 on one unit of work (a Parquet row group or a JSONL file), as a batch.

Read, validate, normalize and filter stay per record (they are record-shaped rules);
everything heavy is computed once per batch: the words of every turn feed both the
report's statistics and the MinHash shingles, byte entropy is one numpy bincount, the
signatures and band keys are one rensa/numpy call. The result is a *segment*: every
record that reached dedup, scored, with the columns dedup and the corpus statistics
need (`SEGMENT_SCHEMA`), written once and finalised in pass 2.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from worldtrace.schemas import TRAJECTORY_SCHEMA
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.store import scan_file
from worldtrace.schemas.validate import Problem, validate_dict

from . import minhash as M
from . import stats as S
from .dedup import DedupConfig
from .filters import FilterConfig, apply_filters
from .mask import MaskPolicy
from .normalize import normalize, reject_row

UID, TEMPLATES, SIG, BANDS = "_uid", "_templates", "_sig", "_bands"
SEGMENT_SCHEMA = (
    TRAJECTORY_SCHEMA.append(pa.field(UID, pa.string()))
    .append(pa.field(TEMPLATES, pa.list_(pa.uint64())))
    .append(pa.field(SIG, pa.binary()))
    .append(pa.field(BANDS, pa.list_(pa.uint64())))
)
"""A segment row: the trajectory record plus its origin (`file:row N`), each turn's
template key, its MinHash signature (num_perm little-endian uint32) and LSH band keys."""


def stem_of(path: str, row_group: int | None) -> str:
    """A unit's name in the store: the same unit gets the same files in any run."""
    return "u" + hashlib.blake2b(f"{path}\x1f{row_group}".encode(), digest_size=8).hexdigest()


@dataclass
class UnitResult:
    stem: str
    segment: pa.Table
    rejects: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def read_valid(path: str, row_group: int | None, counts: Counter, rejects: list) -> list:
    """(uid, record) of every valid record; invalid ones become rejects rows."""
    out = []
    for where, d in scan_file(Path(path), row_group):
        counts["read"] += 1
        problems = [d] if isinstance(d, Problem) else validate_dict(d, where, check_id=False)
        if problems:
            counts["rejected"] += 1
            tid = d.get(F.TRAJECTORY_ID) if isinstance(d, dict) else None
            reason = "; ".join(f"{p.field}: {p.message}" for p in problems)
            rejects.append(reject_row(where, "validate", reason, tid))
        else:
            out.append((where, d))
    return out


def filter_records(items: list, cfg: FilterConfig, counts: Counter, rejects: list) -> list:
    """Normalize and filter; the id follows the content when a filter changed it."""
    out = []
    for uid, record in items:
        record = normalize(record)
        tid = record.get(F.TRAJECTORY_ID)
        kept, removed, reason = apply_filters(record, cfg)
        for turn, why in removed:
            counts[f"turns_removed.{why}"] += 1
            rejects.append(reject_row(f"{uid}#turn {turn['index']}", "turn_filter", why, tid))
        if kept is None:
            counts[f"filtered.{reason.split(':')[0]}"] += 1
            counts["filtered"] += 1
            rejects.append(reject_row(uid, "filter", reason, tid))
            continue
        kept[F.METADATA] = sorted(
            {**dict(kept[F.METADATA]), "raw_trajectory_id": tid or ""}.items()
        )
        kept[F.TRAJECTORY_ID] = trajectory_id(kept)
        out.append((uid, kept))
    return out


def byte_entropies(blobs: list[bytes]) -> np.ndarray:
    """Shannon entropy (bits/byte) of each blob: one bincount over all of them."""
    n = len(blobs)
    lengths = np.fromiter(map(len, blobs), np.int64, n)
    if not n or not lengths.sum():
        return np.zeros(n)
    data = np.frombuffer(b"".join(blobs), np.uint8)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    counts = np.bincount(rows * 256 + data, minlength=n * 256).reshape(n, 256)
    with np.errstate(divide="ignore", invalid="ignore"):
        clog = np.where(counts > 0, counts * np.log2(np.maximum(counts, 1)), 0.0).sum(axis=1)
        ent = np.log2(np.maximum(lengths, 1)) - clog / np.maximum(lengths, 1)
    return np.where(lengths > 0, np.maximum(ent, 0.0), 0.0)


def score(records: list[dict[str, Any]], policy: MaskPolicy) -> tuple[list[list[str]], list]:
    """Fill every turn's corpus-independent statistics and decision, in place.

    Returns each record's word tokens (for shingles) and turn template keys.
    `corpus_surprisal` stays null: it depends on the corpus counts, which the views join
    in at read time; a policy that reads it decides here as if the template were rare.
    """
    tokens_of, keys_of, blobs, turn_stats = [], [], [], []
    for record in records:
        cn = S.ConditionalNovelty()
        tokens: list[str] = []
        keys = []
        for t in record[F.TURNS]:
            a, o = t["action"]["text"], t["observation"]["text"]
            ta, to = S.WORD_RE.findall(a.lower()), S.WORD_RE.findall(o.lower())
            tokens += ta
            tokens += to
            ob = o.encode()
            alone = S.deflated_size(ob) if ob else 0
            st = S.ratios(set(ta), set(to), len(a), len(o))
            st["zlib_ratio"] = S.zlib_ratio(ob, alone)
            st["cond_novelty"] = cn.observe(a.encode(), ob, alone)
            st["corpus_surprisal"] = None  # a corpus count: joined in at read time
            t["stats"] = st
            blobs.append(ob)
            turn_stats.append(st)
            keys.append(S.template_hash(o))
        tokens_of.append(tokens)
        keys_of.append(keys)
    for st, h in zip(turn_stats, byte_entropies(blobs).tolist(), strict=True):
        st["byte_entropy"] = h
    for record in records:
        for t in record[F.TURNS]:
            d = policy.decide(t["stats"], t["action"]["text"], t["observation"]["text"])
            t["category"], t["keep"], t["rule"] = d.category, d.keep, d.rule
    return tokens_of, keys_of


def sketch(tokens_of: list[list[str]], cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """MinHash signatures and band keys of every record's word shingles."""
    n = len(tokens_of)
    bands, rows = cfg.band_rows()
    if not cfg.near or not n:
        return np.zeros((n, cfg.num_perm), np.uint32), np.zeros((n, 0), np.uint64)
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(w, len(vocab)) for tokens in tokens_of for w in tokens]
    hashes = (
        M.token_hashes(list(vocab))[np.asarray(ids, np.int64)] if ids else np.zeros(0, np.uint64)
    )
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(t) for t in tokens_of], out=offsets[1:])
    sh, sh_off = M.shingle_hashes(hashes, offsets, cfg.shingle_words)
    sigs = M.signatures(sh, sh_off, cfg.num_perm, cfg.seed)
    return sigs, M.band_keys(sigs, bands, rows)


def process_unit(
    path: str,
    row_group: int | None,
    filters: FilterConfig,
    dedup: DedupConfig,
    policy: MaskPolicy,
) -> UnitResult:
    """Everything pass 1 does to one unit."""
    counts: Counter = Counter()
    rejects: list[dict[str, Any]] = []
    items = filter_records(read_valid(path, row_group, counts, rejects), filters, counts, rejects)
    records = [r for _, r in items]
    tokens_of, keys_of = score(records, policy)
    sigs, bands = sketch(tokens_of, dedup)
    for (uid, r), keys, sig, bk in zip(items, keys_of, sigs, bands, strict=True):
        r[UID], r[TEMPLATES], r[SIG], r[BANDS] = uid, keys, sig.tobytes(), bk.tolist()
    segment = pa.Table.from_pylist(records, schema=SEGMENT_SCHEMA)
    counts["dedup.in"] += len(records)
    return UnitResult(stem_of(path, row_group), segment, rejects, counts)
