"""Batched MinHash over word shingles: numpy for the shingles, rensa (Rust) for the sketch.

A batch of documents becomes one flat array of 64-bit shingle hashes plus row offsets;
rensa's `RMinHash` turns it into a (documents x num_perm) uint32 matrix without a Python
object per shingle (the project design measured rensa ~50x faster than datasketch at the same
estimation error; `tests/pipelines/test_minhash.py` checks the error against
datasketch's). The LSH shape is derived from the threshold here, not from a private
datasketch function.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_EMPTY = np.uint64(0x9E3779B97F4A7C15)  # the one shingle of a document without words


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads the bits of a combined hash (wraps mod 2^64)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def token_hashes(tokens: Sequence[str]) -> np.ndarray:
    """Stable 64-bit hashes of tokens: each distinct token is hashed once (xxh64)."""
    import pyarrow as pa
    import xxhash

    if not tokens:
        return np.zeros(0, np.uint64)
    enc = pa.array(tokens, pa.string()).dictionary_encode()
    vocab = np.fromiter(
        (xxhash.xxh64_intdigest(t.encode()) for t in enc.dictionary.to_pylist()),
        np.uint64,
        len(enc.dictionary),
    )
    return vocab[enc.indices.to_numpy(zero_copy_only=False)]


def shingle_hashes(
    hashes: np.ndarray, offsets: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every k consecutive tokens inside each document (order-sensitive).

    `offsets` (n+1) delimit the documents in `hashes`. A document shorter than k tokens
    has one shingle of all its tokens (none: a fixed hash). Returns (hashes, offsets).
    """
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    counts = np.maximum(lengths - k + 1, 1)
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    starts = np.repeat(offsets[:-1], counts) + (
        np.arange(out_offsets[-1]) - np.repeat(out_offsets[:-1], counts)
    )
    width = np.repeat(np.minimum(lengths, k), counts)  # tokens in each shingle
    padded = np.concatenate([hashes, np.zeros(k, np.uint64)])
    acc = np.zeros(len(starts), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            part = np.where(j < width, padded[starts + j], np.uint64(0))
            acc = _mix(acc ^ (part + np.uint64(j + 1) * np.uint64(0x9E3779B97F4A7C15)))
    acc[width == 0] = _EMPTY
    return acc, out_offsets


_POOL_PID: int | None = None
"""The process in which rensa started its thread pool: from a few hundred documents a
batch, rensa runs on Rayon's pool, started on first use and never restarted in a forked
child."""


def _tasks() -> int:
    """Threads of this process; -1 when it cannot tell (no /proc)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def pool_started() -> bool:
    """Whether this process may hold rensa's Rayon pool. A child forked from it has the
    pool's state but not its threads: its next big batch waits for them forever (seen:
    an in-process `process` run, then a run with forked workers in the same process,
    hung in pass 1). `runner.can_fork` asks before forking workers."""
    return os.getpid() == _POOL_PID


def signatures(shingles: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """(documents x num_perm) uint32 MinHash signatures (rensa RMinHash)."""
    from rensa import RMinHash

    global _POOL_PID
    before = None if pool_started() else _tasks()
    matrix = RMinHash.digest_matrix_from_flat_token_hashes(
        np.ascontiguousarray(shingles, np.uint64),
        np.ascontiguousarray(offsets, np.uint64),
        num_perm,
        seed,
    )
    if before is not None and (before < 0 or _tasks() > before):
        _POOL_PID = os.getpid()  # its threads started with this batch
    return np.asarray(matrix.to_rows(), np.uint32).reshape(len(offsets) - 1, num_perm)


def band_keys(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(documents x bands) uint64 keys: one hash per band of `rows` signature values."""
    out = np.zeros((sigs.shape[0], bands), np.uint64)
    with np.errstate(over="ignore"):
        for b in range(bands):
            acc = np.full(sigs.shape[0], np.uint64(b + 1))
            for v in sigs[:, b * rows : (b + 1) * rows].T:
                acc = _mix(acc ^ v.astype(np.uint64))
            out[:, b] = acc
    return out


def estimate(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard estimate of two signatures: the share of equal minima."""
    return float(np.count_nonzero(a == b)) / len(a)


FP_WEIGHT, FN_WEIGHT = 0.1, 0.9
"""How `lsh_params` weighs a candidate pair below the threshold against a pair above it
that never becomes one. Every candidate is verified against the threshold (`dedup`), so
a false positive costs one comparison of two signatures, a false negative a duplicate
kept. Weighed equally, as datasketch does (it verifies nothing), 0.8 gave 9 x 13 bands,
whose S-curve is 0.5 at J 0.845: 40% of the pairs at 0.80 and 69% at 0.85 were merged
(2026-12-07, a hunt: 53 of 100 pairs at 0.817). At 0.1 / 0.9 it is 14 x 9: 87% at 0.80,
97.5% at 0.85, and the candidates below the threshold are rejected by their estimate."""


@lru_cache(maxsize=64)
def lsh_params(
    threshold: float, num_perm: int, fp_weight: float = FP_WEIGHT, fn_weight: float = FN_WEIGHT
) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false-positive and false-negative areas
    around `threshold` (the standard LSH S-curve optimisation, integrated numerically;
    weighed for verified candidates, `FN_WEIGHT`). Every (bands, rows) at once: each
    worker computes it before its first unit."""
    pairs = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    b, r = (np.array(x, np.float64)[:, None] for x in zip(*pairs, strict=True))
    lo, hi = np.linspace(0.0, threshold, 201), np.linspace(threshold, 1.0, 201)
    fp = np.trapezoid(1 - (1 - lo**r) ** b, lo, axis=1)
    fn = np.trapezoid((1 - hi**r) ** b, hi, axis=1)
    best, best_err = (1, 1), float("inf")
    for pair, err in zip(pairs, (fp_weight * fp + fn_weight * fn).tolist(), strict=True):
        if err < best_err - 1e-12:  # the first of near-equal ones, in (bands, rows) order
            best, best_err = pair, err
    return best
