"""Worker and recorder hunt 1204: absurd leases refused; a cut trajectory's end time.

Real CLI and classes. `worldtrace worker --lease inf` (or 1e12) was accepted: the
heartbeat thread's wait of a quarter of the lease overflowed (`OverflowError: timestamp
out of range for platform time_t`), the thread died, and the worker ran on without
heartbeats and exited 0. And an attempt our stop cut short (SIGTERM, a crash) was
published with `ended_at` at the start of its last turn, before that turn ended.
"""

from __future__ import annotations

import signal
import subprocess
from datetime import timedelta

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.recorder import CUT_SHORT, Recorder, journal_to_trajectory
from worldtrace.collectors.worker import Worker, WorkerConfig
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.owners import EPISODE_LABEL, OWNER_PID
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas import Agent, Source, read_records
from worldtrace.schemas.parsing import ConfigError

from ..conftest import remove_containers, start_collect, wait_until
from ..sandboxes.test_swe_review_1203 import running


def _worker(wt_env, store, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", "worker", "--jobs", str(store.jobs_db), *args],
        env=wt_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- defect 2: a lease the heartbeat cannot wait for is a usage error ---------------------
@pytest.mark.parametrize(
    "option, value",
    [
        ("--lease", "inf"),
        ("--lease", "1e12"),
        ("--lease", "86401"),  # over a day
        ("--lease", "nan"),
        ("--poll", "inf"),
        ("--heartbeat", "1e12"),
    ],
)
def test_a_worker_refuses_a_non_finite_or_absurd_time(store, wt_env, option, value):
    r = _worker(wt_env, store, option, value)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{option}: " in r.stderr
    assert "started" not in r.stdout  # refused before it registered or claimed anything


def test_a_worker_takes_the_longest_lease_and_its_heartbeat_runs(store, wt_env):
    """A day is the bound: the heartbeat waits a quarter of it without overflowing."""
    r = _worker(wt_env, store, "--lease", "86400")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "OverflowError" not in r.stderr


def test_a_worker_built_in_python_checks_its_config(store):
    """`WorkerConfig(...)` skips the CLI's parse: the worker checks the values again."""
    with pytest.raises(ConfigError, match="lease: Input should be a finite number"):
        Worker(open_job_store(str(store.jobs_db)), store.raw, WorkerConfig(lease=float("inf")))
    with pytest.raises(ConfigError, match="lease: Input should be less than or equal"):
        Worker(open_job_store(str(store.jobs_db)), store.raw, WorkerConfig(lease=1e12))


# -- defect 3: a cut trajectory ends when its last turn ended ------------------------------
def _turn_end(turn):
    return turn.started_at + timedelta(milliseconds=turn.duration_ms)


def test_a_journal_without_an_end_ends_at_its_last_turns_end(docker_engine, tmp_path):
    """A crash (or a stop) after a 2 s step: rebuilt from the journal, the trajectory
    ended when that step did, not when it began."""
    sb = TerminalSandbox(TerminalConfig(docker=DockerConfig(warm=0)))
    try:
        rec = Recorder(
            sb, tmp_path / "journals", source=Source(episode_id="cut", attempt=1),
            agent=Agent(name="t"), task_id="t", instruction="cut short",
        )  # fmt: skip
        rec.header(sb.reset(TaskSpec("t")))
        rec.step(keystrokes("echo one\n"))
        rec.step(keystrokes("sleep 2; echo two\n", duration=6))
    finally:
        sb.close()
    t = journal_to_trajectory(rec.path)  # no end record: as a stopped run leaves it
    assert t.outcome.status == "incomplete" and t.outcome.error == CUT_SHORT
    last = t.turns[-1]
    assert last.duration_ms >= 1500
    assert t.ended_at == _turn_end(last)


def test_collect_stopped_mid_step_publishes_an_end_after_its_last_turn(
    docker_engine, wt_env, tmp_path
):
    """The report's run: SIGTERM to `collect` while a `sleep` step runs; the step ends,
    the attempt is published `incomplete`, and its `ended_at` is not before that end."""
    job = {
        "name": "cut",
        "sandbox": {"kind": "terminal", "docker": {"warm": 0}},
        "episodes": 1,
        "retries": 0,
        "tasks": [
            {
                "id": "t",
                "actions": [
                    {"keystrokes": "sleep 2; echo one\n", "duration": 6},
                    {"keystrokes": "echo two\n"},
                ],
            }
        ],
    }
    proc = start_collect(tmp_path, job, wt_env)
    mine = [f"{OWNER_PID}={proc.pid}", f"{EPISODE_LABEL}=t-e0"]

    def sleeping():
        for info in docker_engine.api.containers(filters={"label": mine}):
            c = docker_engine.containers.get(info["Id"])
            if running(c, "sleep 2"):
                return c
        return None

    try:
        wait_until(sleeping, timeout=60, what="the first step's sleep in t-e0's container")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed wait: its exit hook cannot run after SIGKILL
            proc.kill()
            proc.wait()
            remove_containers(docker_engine, {"label": mine})
    assert proc.returncode == 143, out + err  # SIGTERM's (130 before 12-06: Ctrl-C's)
    [t] = read_records(tmp_path / "store" / "raw")
    assert t.outcome.status == "incomplete" and t.outcome.error == CUT_SHORT
    [last] = t.turns  # the step in flight ended, then the stop
    assert "one" in last.observation.text.splitlines()
    assert last.duration_ms >= 1500
    assert t.ended_at >= _turn_end(last)
