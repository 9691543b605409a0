"""Found (a process hunt, 12-07): with the default `dedup.threshold=0.8`, 53 of 100 pairs
at Jaccard 0.817 (5-word shingles) and 71 of 100 at 0.86 were merged, and the rest never
became candidates (`candidates_rejected` 0-3): the LSH shape weighed missed pairs and
false candidates alike (9 x 13, whose S-curve is 0.5 at 0.845), as if candidates were not
verified. They are (`dedup._Verify`), so the shape now weighs a missed pair 9 to 1
(`minhash.FN_WEIGHT`). Real parts: the shingles, rensa signatures and band keys pass 1
computes, with the shape `DedupConfig` derives."""

from __future__ import annotations

import random

import numpy as np
from worldtrace.pipelines import minhash as M
from worldtrace.pipelines.dedup import DedupConfig


def pair(rng: random.Random, words: int, changed: int) -> tuple[list[str], list[str]]:
    a = [f"w{rng.randrange(10**9)}" for _ in range(words)]
    b = list(a)
    for i in rng.sample(range(words), changed):
        b[i] = f"x{rng.randrange(10**9)}"
    return a, b


def jaccard(a: list[str], b: list[str], k: int) -> float:
    sa = {tuple(a[i : i + k]) for i in range(len(a) - k + 1)}
    sb = {tuple(b[i : i + k]) for i in range(len(b) - k + 1)}
    return len(sa & sb) / len(sa | sb)


def candidates(docs: list[list[str]], cfg: DedupConfig) -> np.ndarray:
    hashes = np.concatenate([M.token_hashes(d) for d in docs])
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    sh, sh_off = M.shingle_hashes(hashes, offsets, cfg.shingle_words)
    sigs = M.signatures(sh, sh_off, cfg.num_perm, cfg.seed)
    keys = M.band_keys(sigs, *cfg.band_rows())
    return (keys[0::2] == keys[1::2]).any(axis=1)  # each pair shares a band


def test_pairs_just_above_the_threshold_mostly_become_candidates():
    cfg = DedupConfig()
    assert cfg.threshold == 0.8
    rng = random.Random(7)
    pairs = [pair(rng, 400, 8) for _ in range(60)]
    js = [jaccard(a, b, cfg.shingle_words) for a, b in pairs]
    assert min(js) >= 0.80 and max(js) <= 0.86  # just above the threshold
    found = candidates([d for p in pairs for d in p], cfg)
    assert found.mean() >= 0.75, found.mean()  # 9 x 13: ~0.45 (S-curve 0.40-0.55 here)
    far = [pair(rng, 400, 60) for _ in range(30)]  # J ~0.35: verified away if candidates
    assert candidates([d for p in far for d in p], cfg).mean() <= 0.1


def test_the_shape_is_weighed_for_verified_candidates():
    for threshold in (0.6, 0.7, 0.8, 0.9):
        b, r = M.lsh_params(threshold, 128)
        assert b * r <= 128
        at = 1 - (1 - threshold**r) ** b  # the share of pairs at the threshold found
        assert at >= 0.8, (threshold, b, r, at)
