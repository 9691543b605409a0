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
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from worldtrace.schemas import TRAJECTORY_SCHEMA
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import content_ids
from worldtrace.schemas.redact import screen
from worldtrace.schemas.store import (
    Unread,
    how_to_read,
    scan_screened,
    sized_units,
    texts_to_check,
)
from worldtrace.schemas.validate import Problem, storable, suspects, validate_dict

from . import minhash as M
from . import stats as S
from . import words as W
from .dedup import DedupConfig
from .filters import FilterConfig, apply_filters
from .mask import MaskPolicy, turn_fault
from .normalize import normalize, redacted, reject_row

UID, TEMPLATES, SIG, BANDS = "_uid", "_templates", "_sig", "_bands"
CONTENT = "_content"
ARRIVAL = F.ARRIVAL_COLUMN
SEGMENT_SCHEMA = (
    TRAJECTORY_SCHEMA.append(pa.field(UID, pa.string()))
    .append(pa.field(TEMPLATES, pa.list_(pa.uint64())))
    .append(pa.field(SIG, pa.binary()))
    .append(pa.field(BANDS, pa.list_(pa.uint64())))
    .append(pa.field(ARRIVAL, pa.string()))
    .append(pa.field(CONTENT, pa.string()))
)
"""A segment row: the trajectory record plus its origin (`file:row N`, the file from the
store's root when it is in the store: `in_store`), each turn's template key, its MinHash
signature (num_perm little-endian uint32), LSH band keys, its arrival (`arrival_key`)
and its content key (`hashing.content_ids`: the id of its content in NFC, what exact
dedup groups by; the trajectory id itself unless the content has text in another form)."""
CONTENT_KEY = b"worldtrace.content_key"
"""Schema metadata of a segment: the column its records' content groups were keyed by
(`dedup.content_column`: the content key `_content`, or `_uid` with `dedup.exact=false`,
where a content group is one record). A record no dedup decision names is a singleton,
its cluster `c` + that key (`segments.segment_decisions`), as `dedup._Decide` names a
cluster after its representative's key. A segment written before it says none: the
trajectory id."""


def content_key_column(exact: bool) -> str:
    """The segment column `CONTENT_KEY` names under a dedup setting."""
    return CONTENT if exact else UID


MAX_UNIT_ROWS = 8 * F.SHARD_ROW_GROUP_ROWS
"""Rows of a unit at most: a bigger Parquet row group (a foreign writer's) is cut."""
MIN_CUT_ROWS = 64
"""Rows below which no piece is cut off a unit to balance the workers: each unit costs
~20 ms of its own (a segment and three tables), the work of ~40 rows."""

Unit = (
    tuple[str, int | None, tuple[int, int] | None]
    | tuple[str, int | None, tuple[int, int] | None, int]
)
"""A unit of pass 1: (file, Parquet row group or None, rows [start, stop) of that group or
None for all of it), and the file's arrival (ns) where the run gives it (`process`: the
file's mtime, or the one recorded when it first came in, `process.recorded_arrivals`);
without it, the file's mtime now."""


def stem_of(
    path: str,
    row_group: int | None,
    rows: tuple[int, int] | None = None,
    root: str | None = None,
) -> str:
    """A unit's name in the store: the same unit gets the same files in any run. A file
    under `root` (the store: the output's parent) is named by its path from there, so a
    copied or moved store, or one on another machine, names its units alike. (The export
    reads them by their first record's arrival, `F.UNIT_ORDER_KEY`, not by name: the
    cuts, and so the names, follow the worker count.)"""
    key = f"{in_store(path, root)}\x1f{row_group}" + (f"\x1f{rows[0]}:{rows[1]}" if rows else "")
    return "u" + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def in_store(path: str, root: str | None) -> str:
    """`path` from the store's root (`root`) when the file is in the store, else as it is.
    What processing records of where a record came from (its uid, `rejects.source_path`,
    `clusters.source`) then follows the store when it is copied or moved; the views put
    the store's root back in front (`schemas.views.in_store_sql`)."""
    if root is not None and (real := os.path.realpath(path)).startswith(root + os.sep):
        return os.path.relpath(real, root)
    return path


def arrival_key(mtime_ns: int, name: str, where: str) -> str:
    """A record's place in the order records came into the store: its raw file's mtime
    when first processed (when the file was written: an import or a collection), then the
    file (by a hash of its name: files of equal times only need some fixed order), then
    its row. It breaks the representative's ties (`dedup.rank_of`): an exact copy
    imported or collected later never takes an earlier record's place, so an incremental
    run rewrites no earlier file for it, and a rebuild, which takes the time a file first
    came in from the index while its content is the one recorded (`_index/shards.parquet`
    `arrival_ns`: not its mtime now, which a touch or a restore moved), chooses alike."""
    tail = where.rpartition(" ")[2]
    # the name as a short hash (44 characters in all: dedup holds one per record)
    file = hashlib.blake2b(name.encode(), digest_size=6).hexdigest()
    return f"{mtime_ns:020d}-{file}-{int(tail) if tail.isdigit() else 0:010d}"


def name_root(output: str | os.PathLike) -> str:
    """The directory unit names are taken from (`stem_of`): the output's parent, resolved."""
    return str(Path(output).resolve().parent)


def plan_units(path: Path, max_rows: int | None = None) -> list[tuple[Any, ...]]:
    """The units of a file with their row counts: its row groups (a JSONL file is one),
    a group of more than `max_rows` rows cut into equal slices of at most that many."""
    out = []
    for p, g, n in sized_units(path):
        parts = -(-n // max_rows) if max_rows and n else 1
        if parts <= 1:
            out.append((p, g, None, n))
            continue
        cuts = [n * k // parts for k in range(parts + 1)]
        out += [(p, g, (a, b), b - a) for a, b in pairwise(cuts)]
    return out


def _cut(unit: tuple[Any, ...], at: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A planned unit (path, group, rows, n) cut after its first `at` rows."""
    path, group, rows, n = unit
    start = rows[0] if rows else 0
    return (path, group, (start, start + at), at), (path, group, (start + at, start + n), n - at)


def deal(units: list[tuple[Any, ...]], workers: int) -> list[tuple[Any, ...]]:
    """Planned units (path, group, rows, n) ordered, and a few cut, so that dealing them
    out in turn gives each of `workers` the same rows (within `MIN_CUT_ROWS`).

    The local runner hands a stage's elements to its workers in turn, one bundle each, so
    units of unequal size left a worker idle at the end of pass 1: the bench's 20 row
    groups (19 of 1,024 rows, one of 544) were 10,240 rows on one worker and 9,760 on the
    other. Here the rows are split at each worker's share (a row group cut where a share
    ends), the shares are made to differ by at most one unit (the biggest unit of a
    short one halved), and the units are listed share by share in turn. A runner that
    balances by itself loses nothing. Units of unknown size (JSONL, an unreadable footer)
    come last, as they are.
    """
    sized = [u for u in units if u[3] is not None]
    if workers <= 1 or not sized:
        return units
    rest = [u for u in units if u[3] is None]
    total = sum(u[3] for u in sized)
    shares: list[list[tuple[Any, ...]]] = [[] for _ in range(workers)]
    k, filled, todo = 0, 0, sized[::-1]
    while todo:
        unit = todo.pop()
        n = unit[3]
        room = total * (k + 1) // workers - filled
        if k == workers - 1 or n <= room:
            shares[k].append(unit)
            filled += n
            k += filled >= total * (k + 1) // workers and k < workers - 1
            continue
        if min(room, n - room) >= MIN_CUT_ROWS and unit[1] is not None:
            head, tail = _cut(unit, room)
            shares[k].append(head)
            filled += room
            todo.append(tail)
        elif 2 * room >= n:  # most of it fits: this share goes a little over
            shares[k].append(unit)
            filled += n
        else:
            todo.append(unit)
        k += 1
    while True:  # dealt in turn, the shares must differ by at most one unit
        shares.sort(key=len, reverse=True)
        short = shares[-1]
        if len(shares[0]) - len(short) <= 1:
            break
        halves = [u for u in short if u[1] is not None and u[3] >= 2 * MIN_CUT_ROWS]
        if not halves:
            break
        big = max(halves, key=lambda u: u[3])
        i = short.index(big)
        short[i : i + 1] = _cut(big, big[3] // 2)
    dealt = [share[i] for i in range(len(shares[0])) for share in shares if i < len(share)]
    return dealt + rest


def plan_run(files: list[str], workers: int) -> list[tuple[Any, ...]]:
    """A run's units (path, group, rows, n), dealt to `workers` (`deal`)."""
    return deal([u for f in files for u in plan_units(Path(f), MAX_UNIT_ROWS)], workers)


@dataclass
class UnitResult:
    stem: str
    segment: pa.Table
    rejects: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def read_valid(
    path: str,
    row_group: int | None,
    counts: Counter,
    rejects: list,
    rows: tuple[int, int] | None = None,
    root: str | None = None,
) -> list:
    """(uid, record, whether it must be redacted whole) of every valid record (the flag
    from `redact.screen`); invalid ones become rejects rows. A shard of the declared
    schema is checked by batch (`validate.suspects`): only the rows it flags are walked.
    The strings of a JSON record are looked at for a lone surrogate only when its line
    held a surrogate escape (`store.texts_to_check`). Rows that did not read
    (`store.Unread`) are a reject each, one per record lost, so the accounting's `in`
    is the rows the file holds. Uids and rejects name a file in the store from `root`
    (`in_store`), with any secret in its name replaced (`redacted`), so that
    `clusters.source` and `rejects.source_path` name it alike."""
    out = []
    known, micros = how_to_read(Path(path))  # micros: else an int passes for a timestamp
    flags = _screen_and_suspects if known else screen
    name = redacted(in_store(path, root))
    for where, d, flag in scan_screened(Path(path), row_group, rows, micros, screen=flags):
        if name != path and where.startswith(path):
            where = name + where[len(path) :]
        if isinstance(d, Unread):  # every record of it lost: a reject each, so `in` counts them
            counts["read"] += len(d.rows)
            counts["rejected"] += len(d.rows)
            row = reject_row(where, "validate", f"{d.field}: {d.message}")
            rejects.extend({**row, "record": f"row {k}"} for k in d.rows)
            continue
        counts["read"] += 1
        if isinstance(d, Problem):
            problems = [d]
        elif known and not flag & SUSPECT:
            problems = []
        else:
            texts = texts_to_check(flag)
            problems = validate_dict(d, where, False, micros=micros, declared=known, texts=texts)
        if problems:
            counts["rejected"] += 1
            tid = d.get(F.TRAJECTORY_ID) if isinstance(d, dict) else None
            tid = storable(tid) if isinstance(tid, str) else None  # the record's, as written
            reason = "; ".join(f"{p.field}: {p.message}" for p in problems)
            rejects.append(reject_row(where, "validate", reason, tid))
        else:
            out.append((where, d, bool(flag & REDACT) if known else bool(flag)))
    return out


REDACT, SUSPECT = 1, 2
"""The bits of a declared shard's row flag (`_screen_and_suspects`); `store.ESCAPED` (4)
is a JSON record's."""


def _screen_and_suspects(batch: pa.RecordBatch) -> np.ndarray:
    """Per row: `REDACT` where `redact.screen` flags it, `SUSPECT` where
    `validate.suspects` does."""
    return screen(batch).astype(np.int8) * REDACT | suspects(batch).astype(np.int8) * SUSPECT


def filter_records(items: list, cfg: FilterConfig, counts: Counter, rejects: list) -> list:
    """Normalize and filter; the id follows the content when a filter changed it, the id
    as written kept as `raw_trajectory_id`, redacted as the rest of the record was."""
    out = []
    for uid, record, flagged in items:
        record = normalize(record, screened=not flagged)
        tid = redacted(record.get(F.TRAJECTORY_ID))
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
        kept[F.TRAJECTORY_ID], kept[CONTENT] = content_ids(kept)
        out.append((uid, kept))
    return out


ENTROPY_BLOBS = 512
"""Blobs counted at once by `byte_entropies`: the counts of a whole unit (256 per blob,
~10 MB for 5,000 observations) were fresh memory every unit; 512 blobs' stay in cache
(17 -> 9 us a trajectory, the same values)."""


def byte_entropies(blobs: list[bytes]) -> np.ndarray:
    """Shannon entropy (bits/byte) of each blob, `ENTROPY_BLOBS` at a time."""
    if len(blobs) <= ENTROPY_BLOBS:
        return _byte_entropies(blobs)
    step = ENTROPY_BLOBS
    return np.concatenate(
        [_byte_entropies(blobs[i : i + step]) for i in range(0, len(blobs), step)]
    )


def _byte_entropies(blobs: list[bytes]) -> np.ndarray:
    """One bincount over all of `blobs`, and the c*log2(c) terms only for the byte values
    that occur."""
    n = len(blobs)
    lengths = np.fromiter(map(len, blobs), np.int64, n)
    if not n or not lengths.sum():
        return np.zeros(n)
    data = np.frombuffer(b"".join(blobs), np.uint8)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    counts = np.bincount((rows << 8) | data, minlength=n * 256)
    seen = np.flatnonzero(counts)
    c = counts[seen].astype(np.float64)
    clog = np.bincount(seen >> 8, weights=c * np.log2(c), minlength=n)
    size = np.maximum(lengths, 1).astype(np.float64)
    ent = np.log2(size) - clog / size
    return np.where(lengths > 0, np.maximum(ent, 0.0), 0.0)


@dataclass
class Scored:
    """What scoring leaves for the sketch: every turn's dedup tokens (`words.dedup_tokens`
    of the texts action, observation, action, ... in record order), where each record's
    texts start, its template keys."""

    words: W.Words
    record_texts: np.ndarray
    keys_of: list[list[int]]


def score(records: list[dict[str, Any]], policy: MaskPolicy) -> Scored:
    """Fill every turn's corpus-independent statistics and decision, in place.

    Every statistic reads the texts in NFC (`stats.nfc`). Words, word-set sizes and
    templates are computed for the whole batch at once (`words.py`), and so are deflate
    sizes (`stats.deflated_sizes` once per distinct observation of the unit: terminal
    outputs repeat; `stats.history_sizes` along each record's history); an observation
    equal to an earlier one of its record is `cond_novelty` 0 however far back that is
    (`stats.verbatim_repeats`). `corpus_surprisal` stays null: it depends on the corpus
    counts, which the views join in at read time; a policy that reads it decides here
    as if the template were rare.
    """
    turns = [t for record in records for t in record[F.TURNS]]
    nfc = S.nfc  # what every statistic reads: the stored text stays as recorded
    acts = [a if (a := t["action"]["text"]).isascii() else nfc(a) for t in turns]
    obs = [o if (o := t["observation"]["text"]).isascii() else nfc(o) for t in turns]
    texts = [x for pair in zip(acts, obs, strict=True) for x in pair]
    words = W.words_of(texts)
    stats = W.ratios(*W.set_sizes(words), list(map(len, acts)), list(map(len, obs)))
    keys = W.template_hashes(obs)
    blobs = [o.encode() for o in obs]
    entropy = byte_entropies(blobs).tolist()
    starts = np.zeros(len(records) + 1, np.int64)
    np.cumsum([len(r[F.TURNS]) for r in records], out=starts[1:])
    ol, nov, jac, ratio = stats["ol"], stats["nov"], stats["jac"], stats["r"]
    alone_of = dict.fromkeys(blobs)  # a unit's repeated outputs are deflated once
    alone_of.update(zip(alone_of, S.deflated_sizes(list(alone_of)), strict=True))
    given = S.history_sizes([a.encode() for a in acts], blobs, starts.tolist())
    record_of = np.repeat(np.arange(len(records)), np.diff(starts)).tolist()
    for n in S.verbatim_repeats(blobs, record_of):
        given[n] = 0  # a repeat of the context beyond deflate's window too
    decide, zlib_ratio, novelty = policy.decide, S.zlib_ratio, S.novelty
    n = 0
    for record in records:
        for t in record[F.TURNS]:
            ob = blobs[n]
            alone = alone_of[ob]
            t["stats"] = s = {
                "ol": ol[n], "nov": nov[n], "jac": jac[n], "r": ratio[n],
                "byte_entropy": entropy[n],
                "zlib_ratio": zlib_ratio(ob, alone),
                "cond_novelty": novelty(given[n], alone) if ob else 0.0,
                "corpus_surprisal": None,  # a corpus count: joined in at read time
            }  # fmt: skip
            o = t["observation"]  # the fault proxy's draw or the collector's cut, if any
            fault = turn_fault(t.get("perturbation"), o.get("truncated"), o.get("state_json"))
            d = decide(s, acts[n], obs[n], fault)
            t["category"], t["keep"], t["rule"] = d.category, d.keep, d.rule
            n += 1
    keys_of = [keys[starts[i] : starts[i + 1]] for i in range(len(records))]
    return Scored(W.dedup_tokens(texts, words), 2 * starts, keys_of)


def sketch(scored: Scored, cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """MinHash signatures and band keys of every record's shingles (its turns' action
    and observation tokens, in order: `words.dedup_tokens`)."""
    n = len(scored.record_texts) - 1
    bands, rows = cfg.band_rows()
    if not cfg.near or not n:
        return np.zeros((n, cfg.num_perm), np.uint32), np.zeros((n, 0), np.uint64)
    w = scored.words
    hashes = M.token_hashes(w.vocab)[w.ids] if len(w.ids) else np.zeros(0, np.uint64)
    offsets = w.offsets[scored.record_texts]
    sh, sh_off = M.shingle_hashes(hashes, offsets, cfg.shingle_words)
    sigs = M.signatures(sh, sh_off, cfg.num_perm, cfg.seed)
    return sigs, M.band_keys(sigs, bands, rows)


def process_unit(
    path: str,
    row_group: int | None,
    filters: FilterConfig,
    dedup: DedupConfig,
    policy: MaskPolicy,
    rows: tuple[int, int] | None = None,
    root: str | None = None,
    arrival_ns: int | None = None,
    laps: Counter | None = None,
) -> UnitResult:
    """Everything pass 1 does to one unit (named from `root`, `stem_of`); its records
    arrive at `arrival_ns` (`arrival_key`; None: the file's mtime now). `laps`: the CPU
    seconds of each step are added to it (`benchmarks.bench_process pass1-stages`)."""
    lap = _Laps(laps)
    counts: Counter = Counter()
    rejects: list[dict[str, Any]] = []
    valid = read_valid(path, row_group, counts, rejects, rows, root)
    lap("read + validate")
    items = filter_records(valid, filters, counts, rejects)
    lap("normalize, redact, filters, content id")
    records = [r for _, r in items]
    scored = score(records, policy)
    lap("statistics + mask decision")
    sigs, bands = sketch(scored, dedup)
    lap("MinHash + band keys")
    arrival = os.stat(path).st_mtime_ns if arrival_ns is None else arrival_ns
    name = in_store(path, root)
    for (uid, r), keys, sig, bk in zip(items, scored.keys_of, sigs, bands, strict=True):
        r[UID], r[TEMPLATES], r[SIG], r[BANDS] = uid, keys, sig.tobytes(), bk.tolist()
        r[ARRIVAL] = arrival_key(arrival, name, uid)
    segment = pa.Table.from_pylist(records, schema=SEGMENT_SCHEMA)
    key = content_key_column(dedup.exact).encode()
    segment = segment.replace_schema_metadata({**(segment.schema.metadata or {}), CONTENT_KEY: key})
    lap("segment to Arrow")
    counts["dedup.in"] += len(records)
    return UnitResult(stem_of(path, row_group, rows, root), segment, rejects, counts)


class _Laps:
    """Adds the CPU seconds since the last lap to `into[name]`; does nothing without
    `into` (a run's units). Measured where the steps run, so the table of where pass 1's
    time goes is of the code as it is, not of a copy of its steps."""

    def __init__(self, into: Counter | None):
        self.into = into
        self.at = time.process_time() if into is not None else 0.0

    def __call__(self, name: str) -> None:
        if self.into is not None:
            now = time.process_time()
            self.into[name] += now - self.at
            self.at = now
