"""`import` with worker processes converting the records of JSONL files: the same
shards, report and problems as one process, memory bounded by batches in flight, and a
worker that dies fails the import with one line."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.importers import (
    BATCH_LINES,
    PARALLEL_BYTES_PER_WORKER,
    ImportConfig,
    import_paths,
    import_workers,
)
from worldtrace.schemas.store import shard_files

from benchmarks.bench_import import record

SECRET = "AKIA" + "Q" * 16


def corpus(path, n=3 * BATCH_LINES + 17):
    """OpenAI records shaped like tau-bench runs, with lines no record reads: broken JSON,
    an unknown shape, a conversation without a tool result, a planted secret, blanks."""
    rng = random.Random(7)
    lines = []
    for i in range(n):
        r = record(i, rng)
        if i % 97 == 5:
            lines.append('{"id": "broken", "messages": [')
        elif i % 89 == 3:
            lines.append(json.dumps({"what": "not a trajectory"}))
        elif i % 83 == 11:
            lines.append(json.dumps({"id": f"c{i}", "messages": r["messages"][:2]}))
        else:
            if i % 50 == 7:
                r["messages"][1]["content"] += f" my key is {SECRET}"
            lines.append(json.dumps(r))
        if i % 71 == 0:
            lines.append("   ")
    path.write_text("\n".join(lines) + "\n")
    return path


def table(out):
    files = shard_files(out)
    assert files
    return pq.read_table([str(f) for f in files]).to_pylist()


IMPORT = """
import json, sys
from worldtrace.collectors.importers import ImportConfig, import_paths
src, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = import_paths([src], out, ImportConfig(workers=workers))
print(json.dumps({"files": r.files, "imported": r.imported, "present": r.present,
                  "errors": r.errors, "warnings": r.warnings, "workers": r.workers,
                  "problems": [[p.path, p.where, p.kind, p.message] for p in r.problems]}))
"""
ROOT = Path(__file__).resolve().parents[2]


def fresh_import(src, out, workers: int) -> dict:
    """An import in a new interpreter, like the CLI's: no other thread runs there (the
    test process may hold some), so its workers fork."""
    r = subprocess.run([sys.executable, "-c", IMPORT, str(src), str(out), str(workers)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_workers_import_exactly_what_one_process_imports(tmp_path):
    src = corpus(tmp_path / "runs.jsonl")
    one, two = (fresh_import(src, tmp_path / d, w) for d, w in (("one", 1), ("two", 2)))
    assert (one.pop("workers"), two.pop("workers")) == (1, 2)
    assert two == one
    assert all(one["errors"][k] for k in ("invalid_json", "unrecognized", "empty"))
    assert sum(one["imported"].values()) > 3 * BATCH_LINES  # several batches in flight
    rows = table(tmp_path / "two")
    assert rows == table(tmp_path / "one")  # the same records in the same order
    assert not any(SECRET in json.dumps(r, default=str) for r in rows)
    # again: everything is present (its validation skipped), counted the same way
    again = [fresh_import(src, tmp_path / d, w) for d, w in (("one", 1), ("two", 2))]
    assert (again[0].pop("workers"), again[1].pop("workers")) == (1, 2)
    assert again[1] == again[0]
    assert sum(again[1]["present"].values()) == sum(one["imported"].values())
    assert not again[1]["imported"]


def test_auto_workers_follow_the_input_and_its_tasks(tmp_path):
    def sized(name, n):
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(n)
        return tmp_path / name

    small = sized("small.jsonl", 3)
    big = sized("big.jsonl", 2 * PARALLEL_BYTES_PER_WORKER)
    whole = sized("big.json", 4 * PARALLEL_BYTES_PER_WORKER)  # one task: read whole
    runs = [sized(f"run{i}.traj", PARALLEL_BYTES_PER_WORKER) for i in range(2)]
    cfg, cores = ImportConfig(), os.cpu_count() or 1
    assert import_workers(cfg, [small]) == 1
    assert import_workers(cfg, [whole]) == 1  # one file read whole cannot be shared
    assert import_workers(cfg, [big]) == min(cores, 2)
    assert import_workers(cfg, runs) == min(cores, 2)
    assert import_workers(ImportConfig(workers=3), [small]) == 3


SWE_AGENT = {
    "environment": "swe_main",
    "trajectory": [
        {"action": "ls\n", "observation": "a.py\nb.py\n", "response": "Look.\n```\nls\n```",
         "thought": "Look.", "state": '{"open_file": "n/a", "working_dir": "/repo"}'},
        {"action": "cat a.py\n", "observation": "x = 1\n", "response": "Read it", "thought": "Read it",
         "state": '{"open_file": "/repo/a.py"}'},
    ],
    "history": [{"role": "user", "content": "Fix the bug in a.py"}],
    "info": {"exit_status": "submitted"},
}  # fmt: skip


def test_files_read_whole_are_converted_by_the_workers_too(tmp_path):
    """SWE-agent runs come as directories of .traj files: one task each."""
    d = tmp_path / "runs"
    d.mkdir()
    for i in range(12):
        t = json.loads(json.dumps(SWE_AGENT))
        t["trajectory"][1]["observation"] = f"x = {i}\n" + ("" if i % 5 else f"key {SECRET}\n")
        (d / f"run{i:02}.traj").write_text(json.dumps(t))
    (d / "broken.traj").write_text("{")
    (d / "empty.traj").write_text(json.dumps({**SWE_AGENT, "trajectory": []}))
    corpus(d / "chats.jsonl", n=BATCH_LINES + 5)
    one, two = (fresh_import(d, tmp_path / o, w) for o, w in (("one", 1), ("two", 2)))
    assert (one.pop("workers"), two.pop("workers")) == (1, 2)
    assert two == one
    assert one["imported"]["swe-agent"] == 12 and one["files"] == 15
    assert {"invalid_json", "empty"} <= set(one["errors"])
    rows = table(tmp_path / "two")
    assert rows == table(tmp_path / "one")
    assert not any(SECRET in json.dumps(r, default=str) for r in rows)


def test_with_another_thread_running_the_records_are_converted_here(tmp_path):
    """A fork would copy that thread's locks without the thread."""
    src = corpus(tmp_path / "runs.jsonl", n=40)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        r = import_paths([src], tmp_path / "out", ImportConfig(workers=2))
    finally:
        stop.set()
        other.join()
    assert r.workers == 1 and sum(r.imported.values()) > 30


DYING = """
import os, signal, sys
from worldtrace.collectors import importers
task, _, when = sys.argv[3].partition(":")
real, calls = getattr(importers, task), []
def die(*args):  # what the kernel's out-of-memory killer does to a worker
    calls.append(1)
    if when == "later" and len(calls) == 1:  # each worker's first task goes through
        return real(*args)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(importers, task, die)  # the forked workers run this module's function
try:
    importers.import_paths([sys.argv[1]], sys.argv[2], importers.ImportConfig(workers=2))
except importers.ImportWorkerLost as exc:
    print("lost:", exc)
"""


@pytest.mark.parametrize("task", ["convert_lines", "convert_lines:later", "convert_file"])
def test_a_worker_that_dies_fails_the_import_with_one_line_and_no_half_shard(tmp_path, task):
    """Fault injection in a fresh interpreter: its forked workers kill themselves, on a
    JSONL file's batch of lines (the first, or a later one: the import may then be
    handing out a task when it learns) or on a file read whole (SWE-agent runs)."""
    if task.startswith("convert_lines"):
        src = corpus(tmp_path / "runs.jsonl")
    else:
        src = tmp_path / "runs"
        src.mkdir()
        for i in range(4):
            (src / f"run{i}.traj").write_text(json.dumps(SWE_AGENT))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", DYING, str(src), str(out), task],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("lost: a process converting records died"), r.stdout
    assert not out.exists() or not [f for f in out.rglob("*") if f.is_file()]


def test_the_cli_takes_workers_and_says_how_many_converted(tmp_path, wt_env):
    src = corpus(tmp_path / "runs.jsonl", n=2 * BATCH_LINES)
    out = {}
    for w in ("2", "1"):
        r = subprocess.run(["worldtrace", "import", "--workers", w, str(src)],
                           capture_output=True, text=True, env=wt_env, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        out[w] = " ".join(r.stdout.split())  # the table's title wraps with the terminal
    assert "converted by 2 worker processes" in out["2"]
    assert "worker processes" not in out["1"] and "already present" in out["1"]
