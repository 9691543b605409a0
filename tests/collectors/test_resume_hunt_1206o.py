"""Hunt 1206o: resuming a job `collect` ran after a `kill -9`. Found:

1. a writer's hidden temp file in the job's directory (`.tmp-<pid>-<host>-<random>-
   t-e1-a1.parquet`, left by a kill during a publish) was read as an attempt: the resume
   was refused, `job ... has episodes fast.yaml does not make (.tmp-...-t-e1)`;
2. a killed quick `--sandbox` run left a journal nothing could publish: gc and doctor
   advised `collect JOB_FILE --resume` (a quick run has no job file) and `--resume` with
   `--sandbox` is a usage error; the journal was listed for good;
3. one published attempt file that does not read (`: > t-e0-a1.parquet`) ended the resume,
   and gc and doctor too, in a pyarrow traceback;
4. a resume after a crash between publishing an attempt and removing its journal said the
   attempt was `[published from the journal a stopped run left]` and counted it twice.

Real CLI, real containers: the stopped run is a `collect` killed by SIGKILL mid-episode
(once its journal holds a finished turn), copied for each test."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JOURNALS, resume_problem
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.recorder import publish
from worldtrace.schemas import Store, read_records

from ..conftest import VENV_BIN, remove_containers, wait_until

JOB = {
    "name": "hunt",
    # the nap comes from the environment: the job keeps the variable's name, so the
    # killed run's step lasts, and the resume's (same job file) ends at once
    "sandbox": {"kind": "terminal", "docker": {"env": ["WT_NAP"]}},
    "tasks": [
        {"id": "t", "actions": ["echo t\n"]},
        {"id": "u", "actions": ["echo u\n", {"keystrokes": "sleep $WT_NAP\n", "duration": 60}]},
    ],
}
TEMP = ".tmp-99999-deadbeef-0a1b2c3d-t-e1-a1.parquet"
"""A writer's temp file (`schemas.tempfiles.temp_name`) a kill during a publish leaves."""
RECOVERED = "[published from the journal a stopped run left]"


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def kill_mid_episode(env: dict[str, str], argv: list[str], raw: Path, journal: str) -> str:
    """Start `worldtrace ARGV`, SIGKILL it once `journal` (of its job) holds a finished
    turn, remove its containers; the job id it printed first."""
    proc = subprocess.Popen(["worldtrace", *argv], env=env, stdout=subprocess.PIPE, text=True)
    try:
        job = re.match(r"job (\S+): ", proc.stdout.readline()).group(1)
        path = raw / "collect" / job / JOURNALS / journal

        def turned() -> bool:  # the header, then a turn: what a kill must not lose
            return path.exists() and '"kind": "turn"' in path.read_text()

        wait_until(turned, timeout=90, what=f"a finished turn in {path}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    import docker

    remove_containers(docker.from_env(), {"label": f"worldtrace.owner.pid={proc.pid}"})
    return job


@pytest.fixture(scope="module")
def killed(docker_engine, tmp_path_factory) -> tuple[Path, Path, str]:
    """(store root, job file, job id) of `hunt` killed in episode u-e0 (t-e0 published)."""
    base = tmp_path_factory.mktemp("killed")
    job_file = base / "hunt.yaml"
    job_file.write_text(json.dumps(JOB))
    root = base / "store"
    root.mkdir()
    env = {**_env(root), "WT_NAP": "600"}
    job = kill_mid_episode(env, ["collect", str(job_file)], root / "raw", "u-e0-a1.journal.jsonl")
    out = root / "raw" / "collect" / job
    assert sorted(p.name for p in out.glob("*.parquet")) == ["t-e0-a1.parquet"]
    return root, job_file, job


def _env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        "WORLDTRACE_STORE": str(root),
        "WT_NAP": "0",
    }


@pytest.fixture
def stopped(killed, tmp_path) -> tuple[dict[str, str], Path, Path, str]:
    """A copy of the killed run's store: (env, job file, job directory, job id)."""
    root, job_file, job = killed
    shutil.copytree(root, tmp_path / "store")
    env = _env(tmp_path / "store")
    return env, job_file, tmp_path / "store" / "raw" / "collect" / job, job


def attempts(out: Path) -> dict[tuple[str, int], object]:
    return {(t.source.episode_id, t.source.attempt): t for t in read_records(out)}


def lines_with(text: str, what: str) -> list[str]:
    return [ln for ln in text.splitlines() if what in ln]


# -- 1: a writer's hidden temp file is no attempt ------------------------------------------
@pytest.mark.docker
def test_a_writers_hidden_temp_file_is_no_episode_of_the_job(stopped):
    env, job_file, out, job = stopped
    (out / TEMP).write_bytes(b"PAR1\x00half a file")
    store = Store.at(env["WORLDTRACE_STORE"])
    spec = JobSpec.load(job_file)
    assert resume_problem(store.raw, store.jobs_db, spec, str(job_file), job) is None

    r = wt(env, "collect", str(job_file), "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "does not make" not in r.stderr
    assert f" u-e0 attempt 1: incomplete (1 turns): collector stopped before the episode ended  {RECOVERED}" in r.stdout  # fmt: skip
    assert " u-e0 attempt 2: success (2 turns)" in r.stdout, r.stdout
    got = attempts(out)
    assert sorted(got) == [("t-e0", 1), ("u-e0", 1), ("u-e0", 2)]
    assert (out / TEMP).exists()  # not ours to judge: gc removes a stale temp file


def test_a_name_that_is_no_attempt_is_named_not_a_traceback(store, tmp_path):
    """A visible `.parquet` with no attempt's name (`notes.parquet`) is named as a file
    the job file does not make (it raised ValueError from `int()`)."""
    from worldtrace.collectors.jobs import job_dir, record_spec

    spec = JobSpec.from_dict(JOB)
    out = job_dir(store.raw, "hunt-0123abcd")
    out.mkdir(parents=True)
    record_spec(out, spec)
    (out / "notes.parquet").write_bytes(b"")
    (out / TEMP).write_bytes(b"")
    why = resume_problem(store.raw, store.jobs_db, spec, "hunt.yaml", "hunt-0123abcd")
    assert why is not None and "(notes.parquet)" in why and ".tmp" not in why, why


# -- 2: a killed quick run is published by `collect --resume JOB` ------------------------
@pytest.mark.docker
def test_a_killed_quick_run_is_published_by_the_command_doctor_and_gc_name(docker_engine, wt_env):
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    quick = ["collect", "--sandbox", "docker", "--keys", "echo hi\\n", "--keys", "sleep 600\\n"]
    job = kill_mid_episode(wt_env, [*quick, "--duration", "60"], raw, "quick-e0-a1.journal.jsonl")
    journal = raw / "collect" / job / JOURNALS / "quick-e0-a1.journal.jsonl"
    command = f"worldtrace collect --resume {job}"

    [line] = lines_with(wt(wt_env, "gc", "--dry-run", "--no-containers").stdout, str(journal))
    assert line.startswith("kept") and f"`{command}` publishes it as it stands" in line, line
    assert "JOB_FILE" not in line  # a quick run has none
    doc = wt(wt_env, "doctor", "--store-only").stdout
    [at] = [i for i, ln in enumerate(doc.splitlines()) if str(journal) in ln]
    fix = doc.splitlines()[at + 1]
    assert "stopped attempt" in doc.splitlines()[at] and f"-> {command} " in fix, doc
    # the command doctor prints, as printed
    printed = fix.split("-> ", 1)[1].split(" (")[0]
    r = subprocess.run(shlex.split(printed), capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"job {job}: publishing the journals its stopped run left (without a job file no "
        "episode runs)",
        f"quick-e0 attempt 1: incomplete (1 turns): collector stopped before the episode "
        f"ended  {RECOVERED}",
        f"1 trajectories (0 failed attempts, 1 incomplete) -> {raw / 'collect' / job}",
    ]
    assert "a quick --sandbox run cannot run it again: run its command again" in r.stderr
    [t] = read_records(raw / "collect" / job)
    assert [turn.action.text for turn in t.turns] == ["echo hi\n"]
    assert "hi" in t.turns[0].observation.text
    assert not journal.exists()
    # nothing is left: gc and doctor say nothing of it, a second resume publishes nothing
    assert str(journal) not in wt(wt_env, "gc", "--dry-run", "--no-containers").stdout
    assert "stopped attempt" not in wt(wt_env, "doctor", "--store-only").stdout
    again = wt(wt_env, "collect", "--resume", job)
    assert again.returncode == 0 and "nothing to publish" in again.stdout, again.stdout
    # --sandbox with --resume stays a usage error, and names the command
    r = wt(wt_env, *quick, "--resume", job)
    assert r.returncode == 2 and f"worldtrace collect --resume {job}" in r.stderr, r.stderr
    helped = " ".join(wt(wt_env, "collect", "--help").stdout.split())
    assert "Without JOB_FILE (a killed quick --sandbox run has none): publish the journals only" in helped  # fmt: skip
    assert "worldtrace collect --resume quick-terminal-1a2b3c4d" in helped


@pytest.mark.docker
def test_resume_without_the_job_file_publishes_and_names_the_rest(stopped):
    """Any job `collect` ran: the journal is published, the rest needs the job file."""
    env, job_file, out, job = stopped
    r = wt(env, "collect", "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"u-e0 attempt 1: incomplete (1 turns): collector stopped before the episode ended  {RECOVERED}" in r.stdout  # fmt: skip
    assert (
        f"to run what job {job} has left (u-e0 again: cut short when the run stopped): "
        f"worldtrace collect JOB_FILE --resume {job}"
    ) in r.stderr, r.stderr
    assert sorted(attempts(out)) == [("t-e0", 1), ("u-e0", 1)]
    r = wt(env, "collect", str(job_file), "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(attempts(out)) == [("t-e0", 1), ("u-e0", 1), ("u-e0", 2)]


def test_resume_alone_refuses_a_job_no_collect_run_recorded(store, wt_env):
    """A queued job's directory (workers keep no `.spec.json` nor `.run.lock`): its
    journals are the workers'; one line, exit 1."""
    env = {**wt_env, "WORLDTRACE_STORE": str(store.root)}
    (store.raw / "collect" / "hunt-0123abcd" / JOURNALS).mkdir(parents=True)
    r = wt(env, "collect", "--resume", "hunt-0123abcd")
    assert r.returncode == 1 and "has no record of a `worldtrace collect` run" in r.stderr
    r = wt(env, "collect", "--resume", "hunt-fedcba98")
    assert r.returncode == 1 and "no job hunt-fedcba98 in " in r.stderr, r.stderr


# -- 3: a published attempt that does not read ---------------------------------------------
@pytest.mark.docker
def test_a_damaged_published_attempt_is_one_line_as_doctor_says_it(stopped):
    env, job_file, out, job = stopped
    damaged = out / "t-e0-a1.parquet"
    damaged.write_bytes(b"")
    journal = out / JOURNALS / "u-e0-a1.journal.jsonl"
    for argv in (["collect", str(job_file), "--resume", job], ["collect", "--resume", job]):
        r = wt(env, *argv)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.splitlines() == [
            f"Error: cannot read {damaged}, attempt 1 of t-e0, which an earlier run published: "
            "unreadable Parquet (Parquet file size is 0 bytes); whether t-e0 ended is unknown, "
            f"so nothing of job {job} was run or published: put back a good copy of the file, "
            "or move it out of the store (t-e0 then runs again), then resume again "
            "(`worldtrace doctor` lists it)"
        ]
        assert r.stdout == "" and journal.exists() and damaged.stat().st_size == 0
    # gc and doctor read the job's files too: they list, not crash
    gc = wt(env, "gc", "--dry-run", "--no-containers")
    assert gc.returncode == 0 and "Traceback" not in gc.stderr, gc.stderr
    assert lines_with(gc.stdout, str(journal))[0].startswith("kept")
    doc = wt(env, "doctor", "--store-only")
    assert doc.returncode == 1 and "Traceback" not in doc.stderr, doc.stderr
    [line] = lines_with(doc.stdout, str(damaged))
    assert "store shard" in line and "unreadable Parquet (Parquet file size is 0 bytes)" in line
    assert "move it out of the store" in doc.stdout and "stopped attempt" in doc.stdout
    # as said: moved out, the resume runs the episode again
    damaged.rename(out.parent.parent.parent / "t-e0-a1.parquet.damaged")
    r = wt(env, "collect", str(job_file), "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(attempts(out)) == [("t-e0", 1), ("u-e0", 1), ("u-e0", 2)]


# -- 4: a journal whose attempt was published already ----------------------------------------
@pytest.mark.docker
def test_a_journal_left_beside_its_published_attempt_is_not_published_again(stopped):
    """The state a crash between the rename and the journal's removal leaves: the shard
    and the journal of the same attempt. The resume says and counts it once, as the
    earlier run's."""
    env, job_file, out, job = stopped
    journal = out / JOURNALS / "u-e0-a1.journal.jsonl"
    kept = journal.read_bytes()
    shard = out / "u-e0-a1.parquet"
    publish(journal, shard)  # the publish the stopped run did: the file, then no journal
    journal.write_bytes(kept)  # as if the removal never happened
    before = shard.read_bytes()

    r = wt(env, "collect", str(job_file), "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(
        f"job {job}: 2 episode(s), resumed: the counts include the 2 attempt(s) earlier runs "
        "published"
    ), r.stdout
    assert RECOVERED not in r.stdout and "u-e0 attempt 1" not in r.stdout, r.stdout
    assert " u-e0 attempt 2: success (2 turns)" in r.stdout
    assert "ok 2  failed 0  cut short 1  running" in r.stdout, r.stdout  # was: cut short 2
    assert "1 trajectories (0 failed attempts) -> " in r.stdout, r.stdout
    assert not journal.exists() and shard.read_bytes() == before
    assert sorted(attempts(out)) == [("t-e0", 1), ("u-e0", 1), ("u-e0", 2)]
