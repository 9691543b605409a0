"""Export defects a user found on 2026-12-05 (d), each reproduced as the user met it.

1. An export racing with a finishing `process` read the processing run's seed (the CLI)
   and mask policy (`export`) before it took processed/'s lock, then loaded its
   settings' files and only then locked and read the tables: a `process --rebuild --set
   seed=7 --policy agentworld-v1+info` that published in between gave an export (exit
   0, verified) whose manifest said seed 0 / agentworld-v1 over the new run's rows,
   98 of 279 samples' masks disagreeing with the `turns` table's `in_loss`. The lock is
   now taken first and the run's seed and policy read under it, with the tables; a
   `process` run already writing refuses the export at once, before anything is read.
2. `trimmed the system prompt of N trajectory(ies)` counted turn samples: 40
   trajectories were "48 trajectory(ies)". `counts.system_trimmed` now counts each
   trajectory once, however many of its samples were trimmed.
3. `export --verify` did not check a packed row's `doc_boundaries` against its
   `sample_ids` and `num_tokens`: a dropped start, or one past the row, verified (and the
   latter later ended a trainer in an IndexError).

The race is made deterministic with a FIFO: the export reads a simulation-instructions
file that is a named pipe, so it waits there, at the point between its early reads and
its table reads, until the test has run a real `worldtrace process` and written the
file. Real parts: the synthetic generator, Beam processing runs, the real Qwen
tokenizer, the `worldtrace` command in a subprocess (verify: in process), Parquet.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.writers import PACKED_SCHEMA
from worldtrace.schemas import ShardWriter, Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.tempfiles import try_lock

from .conftest import decided_store
from .test_export_hunt_1204f import TOKENIZER, WORLDTRACE, in_loss, trained, wt
from .test_verify_hunt_1204 import rehash, verified

INSTRUCTION = "Predict what the terminal prints next, exactly."


@contextmanager
def gate(fifo: Path, then: Callable[[], Any], text: str) -> Iterator[list[Any]]:
    """A named pipe the export reads as a file: its open waits until the export opens it,
    then `then` runs (the export waiting, mid-way) and the export reads `text`. Yields
    the list `then`'s result goes to (empty: the export never opened it)."""
    os.mkfifo(fifo)
    got: list[Any] = []
    over = threading.Event()

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as fh:  # opened once a reader opens it
            if over.is_set():  # our own reader, below: the export never came
                return
            got.append(then())
            fh.write(text)

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        yield got
    finally:
        over.set()
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer still waiting go
        thread.join()
        os.close(fd)


def instructions(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of simulation instructions whose one file is a FIFO (not made yet)."""
    d = tmp_path / "instructions"
    d.mkdir()
    return d, d / "terminal.md"


@pytest.fixture
def processed_store(tmp_path) -> Store:
    """60 synthetic trajectories processed at the defaults (seed 0, agentworld-v1)."""
    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(generate(SyntheticConfig(n=60, seed=11)))
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return store


def test_a_process_run_publishing_mid_export_cannot_mix_runs(processed_store, tmp_path):
    store = processed_store
    d, fifo = instructions(tmp_path)

    def process_again() -> subprocess.CompletedProcess:
        """The user's second terminal: a new run with another seed and policy."""
        return subprocess.run(
            [WORLDTRACE, "--store", str(store.root), "process", "--workers", "1", "--rebuild",
             "--set", "seed=7", "--policy", "agentworld-v1+info"],
            capture_output=True, text=True,
        )  # fmt: skip

    out = tmp_path / "out"
    with gate(fifo, process_again, INSTRUCTION) as got:
        r = wt("--store", str(store.root), "export", "--sample-mode", "turn",
               "--simulation-instructions", str(d), "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    [proc] = got  # it ran while the export waited on its instructions
    # the export is wholly of the run whose tables are in the store now
    m = json.loads((out / "manifest.json").read_text())
    now = json.loads((store.processed / "manifest.json").read_text())
    assert (m["seed"], m["mask_policy"]) == (now["config"]["seed"], now["policy"])
    assert trained(out) == in_loss(store)
    # which is the earlier run: the export held the store, the new run was refused at once
    assert proc.returncode == 1, proc.stderr
    assert "a `worldtrace export` is reading this store" in proc.stderr
    assert (now["config"]["seed"], now["policy"]["name"]) == (0, "agentworld-v1")


def test_an_export_is_refused_at_once_while_a_process_run_writes(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    lock = try_lock(store.processed / ".process.lock")  # as a live `process` run holds it
    lock.write("pid 4242 on elsewhere, since 2026-12-05 10:00:00 UTC\n")
    lock.flush()
    d, fifo = instructions(tmp_path)
    out = tmp_path / "out"
    try:
        with gate(fifo, lambda: "read", INSTRUCTION) as got:
            r = wt("--store", str(store.root), "export", "--simulation-instructions", str(d),
                   "-o", str(out))  # fmt: skip
    finally:
        lock.close()
    assert r.returncode == 1
    assert "a `worldtrace process` run is writing this store (pid 4242 on elsewhere" in r.stderr
    assert got == []  # refused before it read any of its settings' files
    assert not out.exists()


def long_instructions(tmp_path: Path) -> Path:
    """Simulation instructions of ~3,000 tokens for every domain: longer than half the
    limit below, so every sample over it has its system prompt trimmed."""
    text = " ".join(
        f"Rule {k}: predict the environment's answer word for word." for k in range(300)
    )
    path = tmp_path / "long.yaml"
    path.write_text(json.dumps(dict.fromkeys(F.DOMAINS, text)))
    return path


def test_system_trimmed_counts_trajectories_not_turn_samples(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    out = tmp_path / "turns"
    r = wt("--store", str(store.root), "export", "--sample-mode", "turn", "--max-len", "2048",
           "--simulation-instructions", str(long_instructions(tmp_path)), "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    rows = [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    trajectories = {row["trajectory_id"] for row in rows}
    assert len(rows) > len(trajectories) == 8  # several turn samples each, all trimmed
    assert m["counts"]["system_trimmed"] == len(trajectories)
    assert f"trimmed the system prompt of {len(trajectories)} trajectory(ies)" in r.stdout
    # and as a trajectory export, one sample each, says
    whole = tmp_path / "whole"
    r = wt("--store", str(store.root), "export", "--max-len", "2048",
           "--simulation-instructions", str(long_instructions(tmp_path)), "-o", str(whole))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((whole / "manifest.json").read_text())["counts"]["system_trimmed"] == 8
    assert "trimmed the system prompt of 8 trajectory(ies)" in r.stdout


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    """Eight trajectories as turn samples packed into rows of 8,192 tokens."""
    root = tmp_path_factory.mktemp("packed1205d")
    store = decided_store(root, keep=1.0)
    out = root / "packed"
    export(ExportConfig(input=str(store.table("trajectories")), output=str(out),
                        tokenizer=TOKENIZER, sample_mode="turn", seq_len=8192))  # fmt: skip
    return out


def edited(
    packed: Path, tmp_path: Path, edit: Callable[[list[int], int], list[int]]
) -> tuple[Path, int]:
    """A copy of the packed export with the boundaries of its last row of three samples
    or more edited (`edit(boundaries, num_tokens)`), shards and manifest rehashed; and
    that row's number."""
    d = tmp_path / "edited"
    d.mkdir()
    for f in packed.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    [shard] = sorted(d.glob("*.parquet"))
    rows = pq.read_table(shard).to_pylist()
    k = max(i for i, row in enumerate(rows) if len(row["doc_boundaries"]) > 2)
    rows[k]["doc_boundaries"] = edit(rows[k]["doc_boundaries"], rows[k]["num_tokens"])
    pq.write_table(pa.Table.from_pylist(rows, schema=PACKED_SCHEMA), shard)
    rehash(d)
    return d, k


EDITS = {
    "a start dropped": lambda b, n: [b[0], *b[2:]],
    "a start past the row": lambda b, n: [*b[:-1], 8192 + 40],
    "a start in the padding": lambda b, n: [*b[:-1], n],
    "starts out of order": lambda b, n: [b[0], b[2], b[1], *b[3:]],
    "not starting at 0": lambda b, n: [b[1], b[1] + 1, *b[2:]],
}


def test_a_clean_packed_export_verifies(packed):
    assert verified(packed) == []


@pytest.mark.parametrize("case", EDITS)
def test_verify_checks_packed_rows_doc_boundaries(packed, tmp_path, case):
    d, row = edited(packed, tmp_path, EDITS[case])
    [problem] = verified(d)
    [shard] = sorted(d.glob("*.parquet"))
    assert problem.startswith(f"{d}: 1 packed row(s) whose doc_boundaries are not ")
    assert problem.endswith(f"(the first: {shard.name} row {row})")


@pytest.mark.parametrize("case", ["a start past the row", "starts out of order"])
def test_packed_shards_name_the_file_row_and_field_of_bad_starts(packed, tmp_path, case):
    """The trainer's reader: a one-line error, not an IndexError (or the next row's
    label). A dropped start it cannot tell without `sample_ids`: `--verify` does."""
    from worldtrace.pipelines.trainer import PackedShards

    d, row = edited(packed, tmp_path, EDITS[case])
    [shard] = sorted(d.glob("*.parquet"))
    with pytest.raises(ValueError) as exc:
        list(PackedShards(d))
    said = str(exc.value)
    assert "\n" not in said
    assert said.startswith(f"{shard}: row {row}: doc_boundaries [0, "), said
    assert said.endswith("`worldtrace export --verify DIR` checks the export"), said
