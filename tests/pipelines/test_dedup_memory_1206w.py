"""A cluster of many near-duplicates (hunt 1206w): `process` listed every pair inside each
LSH bucket for each of the 9 bands and stacked both ends' signatures, so its memory grew
with the square of the cluster (900 runs of one task that differ in one tool output: 2.7
GB; 6,000: over 16 GB and rising). Buckets are now compared member against member with
a union-find that skips pairs already joined: memory for a bucket's signatures, k - 1
edges, the same clusters."""

from __future__ import annotations

import itertools
import os
import random
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build
from worldtrace.pipelines import dedup
from worldtrace.pipelines.dedup import components
from worldtrace.schemas import ShardWriter, Store


def run_of(i: int):
    """One run of a task: 8 turns, the fourth's output padded by a different length."""
    pairs = [
        (f"cat file_{t}.txt\n", f"line {t} " + " ".join(f"word{t}_{j}" for j in range(40)))
        for t in range(8)
    ]
    pairs[3] = (pairs[3][0], pairs[3][1] + f" pad{i}" * (1 + i % 7))
    return build("terminal", pairs, episode=f"run-{i}")


def peak_rss_mb(env: dict, root) -> int:
    """Peak RSS (MB) of one `worldtrace process` and the processes it started (`wait4`:
    the child's rusage holds its reaped children's largest)."""
    proc = subprocess.Popen(
        ["worldtrace", "--store", str(root), "process", "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read().decode()
    proc.stderr.close()
    return usage.ru_maxrss // 1024


def test_a_cluster_of_many_near_duplicates_costs_no_square_memory(wt_env, tmp_path):
    peaks = {}
    for n in (100, 600):
        store = Store.at(tmp_path / f"s{n}")
        store.root.mkdir()
        with ShardWriter(store.raw / "runs", row_group_rows=200) as w:
            w.write([run_of(i) for i in range(n)])
        peaks[n] = peak_rss_mb(wt_env, store.root)
        clusters = pq.read_table(store.processed / "clusters").to_pylist()
        assert len(clusters) == n and len({c["cluster_id"] for c in clusters}) == 1
        assert sorted(c["role"] for c in clusters).count("near") == n - 1
    # before: 100 -> 600 runs took ~1.5 GB more (2.4M pairs of 512-byte signatures)
    assert peaks[600] < peaks[100] + 150, peaks


def brute_components(buckets, sigs: dict[str, bytes], threshold: float) -> dict[str, str]:
    """Every pair of every bucket with a new member, verified: the reference."""
    edges = []
    for keys, new in buckets:
        for i, j in itertools.combinations(range(len(keys)), 2):
            a, b = (np.frombuffer(sigs[keys[x]], np.uint32) for x in (i, j))
            if (new[i] or new[j]) and np.count_nonzero(a == b) >= threshold * len(a):
                edges.append((keys[i], keys[j]))
    return components(edges)


@pytest.mark.parametrize("seed", range(60))
def test_the_spanning_forest_has_the_components_of_every_verified_pair(seed, monkeypatch):
    """Review: buckets of new and earlier records, small and large, verified in batches of
    any size, give the clusters the pairwise reference gives, with one edge fewer than
    nodes per component (a spanning forest)."""
    r = random.Random(seed)
    n = r.randint(2, 120)
    bases = [np.array([r.randrange(1 << 30) for _ in range(16)], np.uint32) for _ in range(r.randint(1, 5))]  # fmt: skip
    sigs, new = {}, {}
    for i in range(n):
        sig = bases[r.randrange(len(bases))].copy()
        for _ in range(r.randint(0, 6)):
            sig[r.randrange(16)] = r.randrange(1 << 30)
        sigs[f"k{i:03d}"], new[f"k{i:03d}"] = sig.tobytes(), r.random() < 0.4
    buckets = []
    for _ in range(r.randint(1, 8)):
        keys = sorted(r.sample(list(sigs), r.randint(2, n)))
        buckets.append((keys, [new[k] for k in keys]))
    monkeypatch.setattr(dedup, "SMALL_BUCKET", r.choice([2, 5, 32, 1000]))
    monkeypatch.setattr(dedup, "VERIFY_PAIRS", r.choice([1, 3, 16_384]))
    out = list(dedup._Verify(0.7).process((buckets, dict(sigs))))
    edges = out[0] if out else []
    got = components(edges)
    assert got == brute_components(buckets, sigs, 0.7)
    assert len(edges) == len(got) - len(set(got.values()))
