"""A worker that cannot write a finished attempt's file keeps its journal, says so naming
the file and exits 1; the next worker publishes it (hunt 1205g). Before, the failure was
taken for a lost lease: `lost ... (lease taken over; result discarded)`, exit 0, the
journal deleted, and the job store said `succeeded` for a trajectory no file held."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager

import pytest
import yaml
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.schemas import read_records

from ..conftest import SUDO

pytestmark = pytest.mark.docker

JOB = {
    "name": "pub",
    "sandbox": {"kind": "terminal", "docker": {"image": "worldtrace/busybox:latest", "step_timeout": 5}},
    "tasks": [{"id": "a", "actions": ["echo hello\n", "ls /\n"]}],
}  # fmt: skip


def mount(*args: str) -> None:
    r = subprocess.run([*SUDO, "mount", *args], capture_output=True, text=True)
    assert r.returncode == 0, f"mount {' '.join(args)}: {r.stderr}"


@contextmanager
def read_only_but_journals(job_dir, journals_elsewhere):
    """`job_dir` on a read-only tmpfs, its `.journals` a writable folder mounted there:
    the attempt records its journal, its Parquet file cannot be written."""
    job_dir.mkdir(parents=True)
    journals_elsewhere.mkdir()
    mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(job_dir))
    try:
        (job_dir / ".journals").mkdir()
        mount("-o", "remount,ro", str(job_dir))
        mount("--bind", str(journals_elsewhere), str(job_dir / ".journals"))
        yield
    finally:
        subprocess.run([*SUDO, "umount", "-l", str(job_dir / ".journals")], check=False)
        subprocess.run([*SUDO, "umount", "-l", str(job_dir)], check=True)


def worldtrace(wt_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", *args], env=wt_env, capture_output=True, text=True, timeout=300
    )


def test_a_finished_attempt_that_cannot_be_written_is_kept_and_published_later(
    docker_engine, store, wt_env, tmp_path
):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(JOB))
    job_id = worldtrace(wt_env, "jobs", "submit", str(tmp_path / "job.yaml")).stdout.strip()
    job_dir = store.raw / "collect" / job_id
    with read_only_but_journals(job_dir, tmp_path / "journals"):
        r = worldtrace(wt_env, "worker")
        said = r.stdout + r.stderr
        assert r.returncode == 1 and ", 0 lost," in r.stdout, said
        assert f"cannot write {job_dir}/a-e0-a1.parquet" in said and "is kept" in said, said
        [kept] = (job_dir / ".journals").glob("*.journal.jsonl")
        assert '"kind": "turn"' in kept.read_text()
        # space again: the next worker publishes what the first one finished
        mount("-o", "remount,rw", str(job_dir))
        r = worldtrace(wt_env, "worker")
        assert r.returncode == 0, r.stdout + r.stderr
        [t] = read_records(store.raw)
        state = open_job_store(str(store.jobs_db)).attempt_state(job_id, "a-e0", 1)
        assert (state["status"], state["trajectory_id"]) == ("succeeded", t.trajectory_id)
        assert "\nhello\n" in t.turns[0].observation.text
        assert not kept.exists()
