"""A full disk under `worker` (hunt 1206o), on a real small tmpfs over the job's directory.

A journal line the worker cannot write stops the worker, as it stops `collect`: the
attempt ends as lost (no retry used) with its journal kept, one error line names the
journal once, the other slots give their attempts back, and the next worker, once there
is room, publishes the journal as it stands and runs the episode again. Before, the
attempt failed as `worker error: StoreWriteError: ...`, used a retry (with `retries: 0`
the job ended `partial`) and its journal, with the turns it held, was deleted.

A finished attempt whose file cannot be written names that file once (`cannot write X:
StoreWriteError: cannot write X: ...` before) and counts in the summary's attempts run
(`0 episode attempt(s) run` before)."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager

import pytest
import yaml
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.recorder import CUT_SHORT
from worldtrace.schemas import read_records

from ..conftest import SUDO

pytestmark = pytest.mark.docker

SANDBOX = {"kind": "terminal", "docker": {"image": "worldtrace/busybox:latest", "step_timeout": 5}}
FULL = {
    "name": "full",
    "sandbox": SANDBOX,
    "retries": 0,
    # header (~1.5 KB) and the first turn fit in one 4 KB page; the second turn's
    # screen (~48 KB) does not
    "tasks": [{"id": "t", "actions": ["echo one\n", "yes xxxxxxxxxxxxxxx | head -c 20000\n"]}],
}
SLOW = {
    "name": "slow",
    "sandbox": SANDBOX,
    "tasks": [{"id": "s", "actions": [{"keystrokes": "sleep 1; echo tick\n", "duration": 2}] * 8}],
}


def sh(*args: str) -> None:
    """A mount command, as root or through `sudo -n` (set-up has either: conftest.SUDO)."""
    r = subprocess.run([*SUDO, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(args)}: {r.stderr}"


@contextmanager
def tmpfs_over(path, size: str):
    """A real tmpfs of `size` mounted at `path`."""
    path.mkdir(parents=True)
    own = f"size={size},uid={os.getuid()},gid={os.getgid()}"  # ours also through sudo
    sh("mount", "-t", "tmpfs", "-o", own, "tmpfs", str(path))
    try:
        yield
    finally:
        subprocess.run([*SUDO, "umount", "-l", str(path)], check=False)


def fill(path) -> None:
    """Write `path` until its file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"x" * 1024)
    finally:
        os.close(fd)


def worldtrace(wt_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", *args], env=wt_env, capture_output=True, text=True, timeout=300
    )


def submit(wt_env, tmp_path, job: dict) -> str:
    (tmp_path / f"{job['name']}.yaml").write_text(yaml.safe_dump(job))
    r = worldtrace(wt_env, "jobs", "submit", str(tmp_path / f"{job['name']}.yaml"))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_journal_line_that_cannot_be_written_stops_the_worker_and_keeps_the_journal(
    docker_engine, store, wt_env, tmp_path
):
    full = submit(wt_env, tmp_path, FULL)
    slow = submit(wt_env, tmp_path, SLOW)  # the second slot's: given back when the worker stops
    job_dir = store.raw / "collect" / full
    journal = job_dir / ".journals" / "t-e0-a1.journal.jsonl"
    with tmpfs_over(job_dir, "4k"):
        r = worldtrace(wt_env, "worker", "--concurrency", "2")
        said = r.stdout + r.stderr
        assert r.returncode == 1, said
        assert (
            f"{full}/t-e0 a1: cannot write {journal}: No space left on device; the worker "
            "stops: the attempt ends as lost (no retry used; queued again as a2) and its "
            "journal is kept: the next worker publishes it as it stands"
        ) in r.stderr, said
        assert said.count(str(journal)) == 1 and "StoreWriteError" not in said, said
        assert "worker error:" not in said, said
        assert ", 1 released, 1 lost, 1 worker error(s)" in r.stdout, said
        assert f"released  {slow}/s-e0 a1" in r.stdout, said
        # the journal stays, with the turn it holds
        assert '"kind": "turn"' in journal.read_text(errors="replace")

        js = open_job_store(str(store.jobs_db))
        a1 = js.attempt_state(full, "t-e0", 1)
        assert (a1["status"], a1["lost"]) == ("failed", 1)
        assert js.attempt_state(full, "t-e0", 2)["status"] == "queued"
        assert js.attempt_state(slow, "s-e0", 1)["status"] == "queued"

        # room again (the journal lives in the tmpfs: grown, not unmounted)
        sh("mount", "-o", "remount,size=1m", str(job_dir))
        r = worldtrace(wt_env, "worker")
        said = r.stdout + r.stderr
        assert r.returncode == 0, said
        assert f"published {full}/t-e0 a1 from its journal" in r.stdout, said
        assert not journal.exists()
        [cut] = read_records(job_dir / "t-e0-a1.parquet")
        assert (cut.outcome.status, cut.outcome.error) == ("incomplete", CUT_SHORT)
        assert len(cut.turns) == 1 and "\none\n" in cut.turns[0].observation.text
        [rerun] = read_records(job_dir / "t-e0-a2.parquet")
        assert rerun.outcome.status == "success" and len(rerun.turns) == 2
        # no retry was used: with `retries: 0` the job succeeds
        assert js.job(full)["status"] == "succeeded"
        assert js.job(slow)["status"] == "succeeded"


def test_a_finished_attempt_that_cannot_be_written_names_its_file_once_and_counts(
    docker_engine, store, wt_env, tmp_path
):
    job_id = submit(wt_env, tmp_path, {**FULL, "tasks": [{"id": "t", "actions": ["echo one\n"]}]})
    job_dir = store.raw / "collect" / job_id
    journals = tmp_path / "journals"  # the journal fits elsewhere; the Parquet file does not
    journals.mkdir()
    with tmpfs_over(job_dir, "64k"):  # room for the file once the filler goes
        (job_dir / ".journals").mkdir()
        sh("mount", "--bind", str(journals), str(job_dir / ".journals"))
        try:
            filler = job_dir / "filler"
            fill(filler)
            r = worldtrace(wt_env, "worker")
            said = r.stdout + r.stderr
            dest = job_dir / "t-e0-a1.parquet"
            assert r.returncode == 1, said
            assert (
                f"cannot write {dest}: No space left on device (its journal "
                f"{job_dir}/.journals/t-e0-a1.journal.jsonl is kept; the next worker publishes it)"
            ) in r.stderr, said
            assert said.count(str(dest)) == 1 and "StoreWriteError" not in said, said
            assert "1 episode attempt(s) run (0 failed), 0 released, 0 lost" in r.stdout, said
            filler.unlink()  # room again
            r = worldtrace(wt_env, "worker")
            assert r.returncode == 0, r.stdout + r.stderr
            assert f"published {job_id}/t-e0 a1 from its journal" in r.stdout, r.stdout
            [t] = read_records(dest)
            assert t.outcome.status == "success"
        finally:
            subprocess.run([*SUDO, "umount", "-l", str(job_dir / ".journals")], check=False)
    shutil.rmtree(journals)
