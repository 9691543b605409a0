"""A cluster of many near-duplicates (hunt 1206w): `process` listed every pair inside each
LSH bucket for each of the 9 bands and stacked both ends' signatures, so its memory grew
with the square of the cluster (900 runs of one task that differ in one tool output: 2.7
GB; 6,000: over 16 GB and rising). Buckets are now compared member against member with
a union-find that skips pairs already joined: memory for a bucket's signatures, k - 1
edges, the same clusters."""

from __future__ import annotations

import os
import subprocess

import pyarrow.parquet as pq
from worldtrace.collectors.synthetic import build
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
