"""A `process` run killed while it swaps its tables into place (schemas/publish.py).

Found: `publish` renamed each table out (`.old-NAME-*`) and the new one in, table by
table. SIGKILL between the two renames of `trajectories` left the table missing: the
next `process` published a table holding only its own records (kept 670, said the
accounting; the views and `export` had 20), `doctor` found nothing wrong, and `gc`
removed the `.old-trajectories-*` holding the other 650 as "replaced by a finished run".
A kill between two tables left tables of two runs side by side, and one before the
manifest a false imbalance. Each kill point here is a real SIGKILL of the real CLI,
right after one of its own renames (the only fault injected).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.publish import JOURNAL

from ..conftest import VENV_BIN

KILL_AFTER = """
import fnmatch, os, signal, sys
where, pattern = sys.argv[1], sys.argv[2]
rename = os.replace
def replace(src, dst, *a, **k):
    rename(src, dst, *a, **k)
    if fnmatch.fnmatch(str(dst), os.path.join(where, pattern)):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
sys.argv = ["worldtrace", *sys.argv[3:]]
from worldtrace.cli import main
sys.exit(main())
"""


def wt(env, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)
    assert not check or r.returncode == 0, r.stderr
    return r


def count(store, table: str) -> int:
    files = str(store.processed / table / "*.parquet")
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{files}')").fetchall()[0][0]


def ids(store) -> list[str]:
    files = str(store.processed / "trajectories" / "*.parquet")
    rows = duckdb.sql(f"SELECT trajectory_id FROM read_parquet('{files}') ORDER BY 1").fetchall()
    return [r[0] for r in rows]


CORPUS = SyntheticConfig(n=40, seed=11)


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "WORLDTRACE_STORE": str(root)}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    """A store whose first 24 of the 40 trajectories are processed (once a module; each
    test works on a copy, as `cp -a` makes one)."""
    root = tmp_path_factory.mktemp("first") / "store"
    with ShardWriter(root / "raw" / "a") as w:
        w.write(generate(CORPUS)[:24])
    wt(_env(root), "process")
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, int]:
    """Rows of each table when the 40 are processed in one go, never interrupted."""
    root = tmp_path_factory.mktemp("ref") / "store"
    with ShardWriter(root / "raw" / "all") as w:
        w.write(generate(CORPUS))
    wt(_env(root), "process")
    return {t: count_in(root, t) for t in ("trajectories", "turns", "clusters")}


@pytest.fixture
def two_batches(store, first_run):
    """40 trajectories: the first 24 processed, the other 16 raw and new."""
    shutil.rmtree(store.root)
    shutil.copytree(first_run, store.root, symlinks=True)
    return store, generate(CORPUS)


@pytest.mark.parametrize(
    "pattern",
    [
        ".old-trajectories-*",  # trajectories swapped out, the new one not in: none there
        "trajectories",  # the new trajectories beside the earlier turns, clusters, rejects
        "clusters",  # half the tables swapped
        "_index",  # every table, not the run manifest: a false imbalance
        "manifest.json",  # everything, the journal and the swapped-out tables left over
    ],
)
def test_a_run_killed_between_its_swaps_is_finished_by_the_next_command(
    two_batches, reference, wt_env, pattern
):
    store, corpus = two_batches
    before = ids(store)
    with ShardWriter(store.raw / "b") as w:
        w.write(corpus[24:])
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, str(store.processed), pattern, "process"],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert (store.processed / JOURNAL).exists()  # stopped inside its publish

    # a reading command finishes the publish: every record of both runs is there
    got = wt(wt_env, "query", "SELECT count(*) AS n FROM trajectories", "--format", "json")
    assert json.loads(got.stdout) == [{"n": reference["trajectories"]}]
    assert not (store.processed / JOURNAL).exists()
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".old-")]
    assert set(before) < set(ids(store))
    for table in ("trajectories", "turns", "clusters"):
        assert count(store, table) == reference[table], table
    # the next run has nothing new to read and the accounting holds
    m = json.loads(wt(wt_env, "process", "--json").stdout)
    assert m["counters"]["read"] == 0
    assert m["accounting"]["in"] == len(corpus) and m["accounting"]["balanced"]


def count_in(root, table: str) -> int:
    files = str(root / "processed" / table / "*.parquet")
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{files}')").fetchall()[0][0]


def test_process_and_gc_finish_a_stopped_publish_too(two_batches, wt_env):
    """The next `process` finishes the publish before it reads the index (it published
    a table of its own records alone); `gc` finishes it and removes nothing it needs."""
    store, corpus = two_batches
    with ShardWriter(store.raw / "b") as w:
        w.write(corpus[24:])
    kill = [sys.executable, "-c", KILL_AFTER, str(store.processed), ".old-trajectories-*"]
    assert subprocess.run([*kill, "process"], env=wt_env, capture_output=True).returncode == -9
    assert not (store.processed / "trajectories").exists()
    dry = wt(wt_env, "gc", "--dry-run", "--min-age", "0s")
    listed = dry.stdout.splitlines()
    assert len(listed) == 2 and all(x.startswith("kept ") for x in listed), dry.stdout
    assert "/.run-" in listed[0] and "/.old-trajectories-" in listed[1]
    assert "publish that stopped half way" in listed[1]
    assert (store.processed / JOURNAL).exists()  # a dry run changes nothing
    wt(wt_env, "gc", "--min-age", "0s")
    assert count(store, "trajectories") == len(set(t.trajectory_id for t in corpus))

    # the same kill again, then `process` itself finishes it first
    with ShardWriter(store.raw / "c") as w:
        w.write(generate(SyntheticConfig(n=6, seed=12)))
    assert subprocess.run([*kill, "process"], env=wt_env, capture_output=True).returncode == -9
    m = json.loads(wt(wt_env, "process", "--json").stdout)
    assert m["counters"]["read"] == 0  # the killed run's records were published
    assert m["accounting"]["in"] == len(corpus) + 6 and m["accounting"]["balanced"]
