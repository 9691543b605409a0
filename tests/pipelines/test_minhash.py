"""Batched MinHash (numpy shingles + rensa) against the exact Jaccard and datasketch."""

from __future__ import annotations

import random

import numpy as np
from datasketch import MinHash
from worldtrace.pipelines import minhash as M


def _pairs(n=150, seed=0):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    for _ in range(n):
        a = [rng.choice(vocab) for _ in range(rng.randint(40, 400))]
        b = list(a)
        for _ in range(int(len(b) * rng.random() * 0.5)):
            b[rng.randrange(len(b))] = rng.choice(vocab)
        yield a, b


def _shingles(tokens, k=5):
    return {" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)}


def test_estimation_error_matches_datasketch():
    ours, theirs = [], []
    for a, b in _pairs():
        sa, sb = _shingles(a), _shingles(b)
        truth = len(sa & sb) / len(sa | sb)
        docs = [a, b]
        offsets = np.array([0, len(a), len(a) + len(b)])
        sh, off = M.shingle_hashes(M.token_hashes(a + b), offsets, 5)
        sig = M.signatures(sh, off, 128, 1)
        ours.append(abs(M.estimate(sig[0], sig[1]) - truth))
        ma, mb = MinHash(num_perm=128, seed=1), MinHash(num_perm=128, seed=1)
        ma.update_batch([s.encode() for s in sa])
        mb.update_batch([s.encode() for s in sb])
        theirs.append(abs(ma.jaccard(mb) - truth))
        assert len(docs) == 2
    assert np.mean(ours) <= np.mean(theirs) * 1.3 + 0.005, (np.mean(ours), np.mean(theirs))
    assert np.mean(ours) < 0.04


def test_shingles_are_order_sensitive_and_short_documents_have_one():
    h = M.token_hashes(["a", "b", "c", "b", "a"])
    sh, off = M.shingle_hashes(h, np.array([0, 3, 3, 5]), 2)
    assert list(off) == [0, 2, 3, 4]  # 2 bigrams; empty doc: 1; 2 tokens: 1
    assert sh[0] != M.shingle_hashes(h[[1, 0]], np.array([0, 2]), 2)[0][0]
    empty = M.shingle_hashes(np.zeros(0, np.uint64), np.array([0, 0]), 5)[0]
    assert sh[2] == empty[0]  # documents without words share the one fixed shingle


def test_band_keys_equal_exactly_when_band_rows_equal():
    sig = np.arange(2 * 12, dtype=np.uint32).reshape(2, 12)
    sig[1, :4] = sig[0, :4]
    keys = M.band_keys(sig, 3, 4)
    assert keys[0, 0] == keys[1, 0] and (keys[0, 1:] != keys[1, 1:]).all()


def test_lsh_shape_derived_from_the_threshold():
    assert M.lsh_params(0.8, 128) == (14, 9)  # weighed for verified candidates (12-07)
    assert M.lsh_params(0.8, 128, 0.5, 0.5) == (9, 13)  # datasketch's equal weights
    b, r = M.lsh_params(0.5, 128)
    assert b * r <= 128 and b > 14  # a lower threshold wants more, shorter bands
