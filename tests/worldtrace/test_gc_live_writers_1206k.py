"""`gc` beside writers at work (found by the 12-06 hunt, k2). `gc --min-age 0s` judged a
`process` run's `.run-*` directory and an export's `.staging-*` directory leftovers when
no file in them was open at that instant (Beam and our writers close their files between
writes): it removed them, and the run failed (`cannot write .../.run-.../_index/segments/
...: No such file or directory`), the export with a raw errno naming its staging path.
Now gc reads the writers' locks (/proc/locks): a held `processed/.process.lock` or
`.export-NAME.lock` keeps their directories. Also found: the export lock's holder line
kept a killed export's pid beside the live one's. Real CLI processes, paused with
SIGSTOP while gc runs, so that each is at work for sure."""

from __future__ import annotations

import os
import signal
import subprocess

from worldtrace.schemas import ShardWriter

from ..conftest import wait_until
from ..pipelines.test_publish_crash import KILL_AFTER, first_run, reference, two_batches  # noqa: F401
from .test_interrupts_1203b import made_processed, made_processed_raw, popen, processed_raw, wt  # noqa: F401

GC_NOW = ("gc", "--min-age", "0s", "--no-containers")


def while_at_work(wt_env, proc: subprocess.Popen, ready, what: str, *args: str):
    """(what `ready()` found, the command `args` run while `proc` is paused at that
    point, `proc`'s stderr once it went on and ended); `proc` never outlives the test."""
    try:
        found = wait_until(ready, timeout=120, what=what)
        done = paused_while(proc, lambda: wt(wt_env, *args))
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return found, done, err


def paused_while(proc: subprocess.Popen, run) -> subprocess.CompletedProcess:
    """`run()` while `proc`'s process group is stopped (SIGSTOP), then go on."""
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        return run()
    finally:
        os.killpg(proc.pid, signal.SIGCONT)


def test_gc_keeps_a_running_process_s_work_directory(wt_env, made_processed_raw):  # noqa: F811
    store = processed_raw(wt_env, made_processed_raw)
    proc = popen(wt_env, "process")
    [run_dir], gc, err = while_at_work(
        wt_env,
        proc,
        lambda: (
            list(store.processed.glob(".run-*/_index/segments/*"))
            and list(store.processed.glob(".run-*"))
        ),
        "pass 1 writing",
        *GC_NOW,
    )
    assert gc.returncode == 0, gc.stderr
    assert "kept: a running `worldtrace process` holds processed/.process.lock" in gc.stdout
    assert str(run_dir) in gc.stdout, gc.stdout
    assert proc.returncode == 0, err  # the run went on and published
    assert not list(store.processed.glob(".run-*"))


def test_gc_keeps_a_running_export_s_staging_directory(wt_env, made_processed):  # noqa: F811
    store = processed_raw(wt_env, made_processed)
    proc = popen(wt_env, "export")
    [staging], gc, err = while_at_work(
        wt_env,
        proc,
        lambda: list(store.export.glob(".staging-*/*")) and list(store.export.glob(".staging-*")),
        "the export writing",
        *GC_NOW,
    )
    assert gc.returncode == 0, gc.stderr
    assert "kept: the export writing it holds its output's lock: in use" in gc.stdout, gc.stdout
    assert str(staging) in gc.stdout
    assert proc.returncode == 0, err
    assert wt(wt_env, "export", "--verify", str(store.export / "parquet")).returncode == 0


def test_the_export_lock_names_only_the_live_holder(wt_env, made_processed):  # noqa: F811
    store = processed_raw(wt_env, made_processed)
    lock = store.export / ".export-parquet.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("pid 999999999 on elsewhere, since 2026-12-06 00:00:00 UTC\n")  # as a
    proc = popen(wt_env, "export")  # kill -9 of an export leaves it
    _, second, _ = while_at_work(
        wt_env, proc, lambda: f"pid {proc.pid} " in lock.read_text(), "the lock", "export"
    )
    assert second.returncode == 1
    assert "another export is writing it (pid " in second.stderr, second.stderr
    assert "999999999" not in second.stderr, second.stderr


def test_process_refused_by_a_reading_export_names_it(wt_env, made_processed):  # noqa: F811
    """Found (k2): `process` beside a running export said `a `worldtrace export` is
    reading this store` naming no holder, where every other refusal names its holder."""
    store = processed_raw(wt_env, made_processed)
    proc = popen(wt_env, "export")
    _, refused, _ = while_at_work(
        wt_env, proc, lambda: list(store.export.glob(".staging-*/*")), "export", "process"
    )
    assert refused.returncode == 1, refused.stderr
    assert (
        f"a `worldtrace export` is reading this store (pid {proc.pid}: worldtrace export); "
        "run again when it has finished"
    ) in refused.stderr, refused.stderr


PAUSE_AFTER = KILL_AFTER.replace("signal.SIGKILL", "signal.SIGSTOP")
"""`test_publish_crash`'s kill point, a pause instead: the real run stops itself right
after one of its renames, alive and holding its lock, between its table swaps."""


def test_doctor_and_gc_tell_a_live_publish_from_a_stopped_one(two_batches, wt_env):  # noqa: F811
    """Found (k2): with a live run between its swaps, `doctor` said `[MISS] publish
    journal: a `worldtrace process` run stopped between its table swaps` and gc kept its
    directories as `part of a `process` run's publish that stopped half way`."""
    import json
    import sys

    from worldtrace.schemas.publish import JOURNAL

    store, corpus = two_batches
    with ShardWriter(store.raw / "b") as w:
        w.write(corpus[24:])
    run = subprocess.Popen(
        [sys.executable, "-c", PAUSE_AFTER, str(store.processed), "clusters", "process"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=wt_env,
    )  # fmt: skip
    try:
        wait_until(lambda: _stopped(run.pid), timeout=180, what="the run paused mid-publish")
        assert (store.processed / JOURNAL).exists()
        doctor = wt(wt_env, "doctor", "--store-only", "--json")
        gc = wt(wt_env, "gc", "--dry-run", "--min-age", "0s", "--no-containers")
        os.kill(run.pid, signal.SIGCONT)
        _, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    [check] = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "publish journal"]
    assert check["ok"] and "a running `worldtrace process` is publishing" in check["detail"]
    assert f"pid {run.pid} " in check["detail"], check
    assert "stopped half way" not in gc.stdout, gc.stdout
    assert "kept: a running `worldtrace process` holds processed/.process.lock" in gc.stdout
    assert run.returncode == 0, err
    assert not (store.processed / JOURNAL).exists()


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (state T in /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"
