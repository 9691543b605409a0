"""A full disk (a real 20 MB tmpfs): import, process and export fail with one line, leave
no temp files, and every shard written before reads back unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess

import pytest
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import Store
from worldtrace.schemas.store import TEMP_PREFIXES


def chat_records(n: int, obs_bytes: int, seed: int) -> str:
    """OpenAI chat JSONL whose tool results are incompressible (hex of random bytes)."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        calls = []
        msgs = [{"role": "user", "content": f"task {i}"}]
        for k in range(2):
            cid = f"c{i}-{k}"
            calls.append(
                {
                    "id": cid,
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat f{k}"})},
                }
            )
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": cid,
                    "content": rng.randbytes(obs_bytes // 2).hex(),
                }
            )
        msgs.insert(1, {"role": "assistant", "tool_calls": calls})
        lines.append(json.dumps({"id": f"r{seed}-{i}", "messages": msgs}))
    return "\n".join(lines) + "\n"


def checksums(root):
    return {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.parquet"))
        if not p.name.startswith(".")
    }


def leftovers(root):
    return [p for p in root.rglob("*") if p.name.startswith((*TEMP_PREFIXES, "beam-temp"))]


def wt(env, *args):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300
    )


def fill(path, keep_free: int):
    """Take all but `keep_free` bytes of the file system holding `path`."""
    path.unlink(missing_ok=True)
    st = os.statvfs(path.parent)
    with open(path, "wb") as fh:
        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - keep_free))


PROGRESS = re.compile(r"\d\d:\d\d:\d\d \w+: ")


def one_error_line(r, *expect):
    assert r.returncode == 1, r.stdout + r.stderr
    # a progress line (`HH:MM:SS export: ...`) is printed when a run takes long enough
    # (a loaded machine); it is not an error line
    err = [ln for ln in r.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]
    assert len(err) == 1 and err[0].lower().startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr and all(e in err[0] for e in expect), err[0]


def test_full_disk_fails_with_one_line_and_keeps_earlier_shards(tmpfs, tmp_path, wt_env):
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text(chat_records(40, 2000, seed=1))
    big.write_text(chat_records(10, 300_000, seed=2))  # 3 MB of incompressible text

    assert wt(env, "import", "--create", str(small)).returncode == 0
    before = checksums(store.root)
    assert len(before) == 1

    filler = tmpfs / "filler"
    fill(filler, keep_free=1 << 20)
    r = wt(env, "import", str(big))
    one_error_line(r, "cannot write", str(store.raw / "import"), "No space left on device")
    assert checksums(store.root) == before and not leftovers(tmpfs)

    fill(filler, keep_free=64 << 10)
    r = wt(env, "process")
    one_error_line(r, "cannot write", str(store.root), "No space left on device")
    assert checksums(store.root) == before and not leftovers(tmpfs)
    assert not store.processed.exists() or not list(store.processed.rglob("*.parquet"))

    filler.unlink()
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    before = checksums(store.root)
    fill(filler, keep_free=16 << 10)
    r = wt(env, "export", "--tokenizer", str(default_tokenizer()))
    one_error_line(r, "cannot write", "No space left on device")
    assert checksums(store.root) == before and not leftovers(tmpfs)
    filler.unlink()


def test_full_disk_under_worker_processes_is_one_line_too(tmpfs, tmp_path, wt_env):
    """Found: with worker processes (the default from 4 MB of new input) a full disk printed
    every worker's traceback, their relayed logs and the runner's own traceback (230
    lines) instead of the one line the in-process run gives."""
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    small = tmp_path / "small.jsonl"
    small.write_text(chat_records(40, 2000, seed=3))
    assert wt(env, "import", "--create", str(small)).returncode == 0
    before = checksums(store.root)
    fill(tmpfs / "filler", keep_free=64 << 10)
    r = wt(env, "process", "--workers", "2")
    one_error_line(r, "cannot write", str(store.root), "No space left on device", "pipeline step")
    assert checksums(store.root) == before and not leftovers(tmpfs)


def test_a_bug_in_a_worker_process_is_not_taken_for_the_machine():
    """Only an OSError as the worker's last exception is the machine's; a bug keeps its
    traceback (the command re-raises it whole)."""
    from worldtrace.errors import _machine_error, one_line

    tail = '  File "/x/transforms.py", line 76, in process\n    boom()\n'
    disk = RuntimeError(
        f"Traceback (most recent call last):\n{tail}RuntimeError: "
        "worldtrace.schemas.tempfiles.StoreWriteError: cannot write /s/p.parquet: No space "
        "left on device [while running 'Process/Pass1']\n"
    )
    assert _machine_error(disk) is disk
    assert (
        one_line(disk)
        == "cannot write /s/p.parquet: No space left on device (pipeline step Process/Pass1)"
    )
    bug = RuntimeError(
        f"Traceback (most recent call last):\n{tail}OSError: [Errno 28] No space\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        f"Traceback (most recent call last):\n{tail}RuntimeError: TypeError: 'NoneType' object "
        "is not subscriptable [while running 'Process/Pass1']\n"
    )
    assert _machine_error(bug) is None


def test_broken_jobs_db_is_one_line(tmp_path, wt_env):
    store = Store.at(tmp_path / "store")
    store.root.mkdir(parents=True, exist_ok=True)
    store.jobs_db.write_bytes(b"this is not a database" * 100)
    r = wt(dict(wt_env, WORLDTRACE_STORE=str(store.root)), "jobs", "list")
    one_error_line(r, str(store.jobs_db), "not a database")
    shutil.rmtree(store.root)


@pytest.mark.docker
def test_full_disk_under_collect_names_the_journal_and_the_resume_publishes_it(
    docker_engine, tmpfs, tmp_path, wt_env
):
    """Found: `collect` on a full store ended `error: [Errno 28] No space left on device`,
    naming neither the episode nor the journal it could not write."""
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    job = tmp_path / "big.yaml"
    job.write_text(
        json.dumps(
            {
                "name": "big",
                "sandbox": "terminal",
                # ~200 KB of screen a step: the journal outgrows what is left
                "tasks": [{"id": "a", "actions": ["head -c 110000 /dev/zero | base64\n"] * 4}],
            }
        )
    )
    store.raw.mkdir(parents=True)
    fill(tmpfs / "filler", keep_free=256 << 10)
    r = wt(env, "collect", str(job))
    one_error_line(r, "cannot write", ".journals/a-e0-a1.journal.jsonl", "No space left on device")
    (tmpfs / "filler").unlink()
    [jid] = [p.name for p in (store.raw / "collect").iterdir()]
    again = wt(env, "collect", str(job), "--resume", jid)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        " a-e0 attempt 1: incomplete" in again.stdout and " a-e0 attempt 2: success" in again.stdout
    )


def test_a_full_disk_under_the_job_store_is_named_as_such(tmpfs, tmp_path, wt_env):
    """Found (review of 12-04): with ~50 KB free, `jobs submit` failed with `cannot
    rollback - no transaction is active`: SQLite had rolled back the failed COMMIT
    itself, and our ROLLBACK's error replaced the real one (`database or disk is full`)."""
    env = dict(wt_env, WORLDTRACE_STORE=str(tmpfs / "store"))
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: big\ntasks: [{id: t, instruction: '" + "x" * 400_000 + "', actions: ['ls\\n']}]\n"
    )
    small = tmp_path / "small.yaml"
    small.write_text("name: small\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    assert wt(env, "--create", "jobs", "submit", str(small)).returncode == 0
    fill(tmpfs / "filler", keep_free=48 << 10)
    r = wt(env, "jobs", "submit", str(job))
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "full" in r.stderr and "cannot rollback" not in r.stderr, r.stderr
