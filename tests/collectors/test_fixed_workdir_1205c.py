"""Hunt 1205c (3): a job that fixes its MCP folder (`workdir: {at: DIR}`) run with
`worker --concurrency 2`: its two episodes competed for that folder, the loser failed
`SandboxError: DIR is in use by another sandbox`, its retry fired at once (0.0 s) and
failed alike, and the job ended `partial`. A busy folder is a wait: the reset waits for
the other sandbox (a thread, a worker slot, another process: flock) to let it go, which
it does at the end of its episode; a stop ends the wait and gives the episode back.

Real parts: the MCP SDK's server over stdio, the SQLite job store, in-process workers,
`run_job`, and two `worldtrace worker` processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig
from worldtrace.sandboxes.base import SandboxError, StopRequested, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas import read_records
from worldtrace.schemas.parsing import parse

from ..conftest import wait_until
from ..sandboxes.test_mcp_hunt_1204d import tmpdir_root  # noqa: F401  (fixture)

SERVER = """
import time
from mcp.server.mcpserver import MCPServer

app = MCPServer("slow")


@app.tool()
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "ok"


app.run("stdio")
"""


def _sandbox(tmp_path, **workdir) -> dict:
    server = tmp_path / "slow.py"
    server.write_text(SERVER)
    at = str(tmp_path / "fixed")
    return {
        "kind": "mcp",
        "command": [sys.executable, str(server)],
        "workdir": {"at": at, **workdir},
    }


def _box(tmp_path, **workdir) -> MCPSandbox:
    config = {k: v for k, v in _sandbox(tmp_path, **workdir).items() if k != "kind"}
    return MCPSandbox(parse(MCPConfig, config))


def _job(tmp_path, episodes: int = 2, name: str = "at") -> dict:
    slow = [{"tool": "slow", "arguments": {"seconds": s}} for s in (1.5, 0)]
    return {
        "name": name,
        "sandbox": _sandbox(tmp_path),
        "episodes": episodes,
        "retries": 1,
        "tasks": [{"id": "t", "actions": slow}],
    }


def _waits(trajectories) -> list[float]:
    return sorted(json.loads(t.environment.config)["workdir_wait_s"] for t in trajectories)


def _published(store, job_id):
    paths = sorted((store.raw / "collect" / job_id).glob("*.parquet"))
    return [t for p in paths for t in read_records(p)]


def test_two_slots_run_the_episodes_of_one_fixed_folder_in_turn(store, tmpdir_root, tmp_path):  # noqa: F811
    js = open_job_store(str(store.jobs_db))
    job_id = js.submit(JobSpec.from_dict(_job(tmp_path)))
    stats = Worker(js, store.raw, WorkerConfig(concurrency=2)).run()
    job = js.job(job_id)
    rows = [(r["episode_id"], r["attempt"], r["status"], r["error"]) for r in job["episode_rows"]]
    assert sorted(rows) == [("t-e0", 1, "succeeded", None), ("t-e1", 1, "succeeded", None)]
    assert job["status"] == "succeeded"
    assert (stats.run, stats.failed, stats.released, stats.errors) == (2, 0, 0, [])
    trajectories = _published(store, job_id)
    assert [t.outcome.status for t in trajectories] == ["success", "success"]
    first, second = _waits(trajectories)
    assert first == 0 and second > 1.0  # one waited while the other's slow call ran


def test_two_collect_runs_of_one_fixed_folder_wait_for_each_other(store, tmpdir_root, tmp_path):  # noqa: F811
    """`collect` runs its episodes one after another; a second collector on the same folder
    (another `collect`, or a worker) waits for it rather than failing its attempts."""
    spec = JobSpec.from_dict(_job(tmp_path, episodes=1))
    results = []

    def run() -> None:
        results.append(run_job(spec, store.raw))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    trajectories = [t for r in results for t in r.trajectories]
    assert [(t.outcome.status, t.outcome.error) for t in trajectories] == [("success", None)] * 2
    first, second = _waits(trajectories)
    assert first == 0 and second > 1.0


def test_a_stop_ends_the_wait_and_gives_the_episode_back(store, tmpdir_root, tmp_path):  # noqa: F811
    """A worker stopping while its slot waits for the folder releases the attempt (queued
    again, same attempt, nothing counted), as for a device an Android episode waits for."""
    holder = _box(tmp_path)
    js = open_job_store(str(store.jobs_db))
    try:
        holder.reset(TaskSpec("held"))
        job_id = js.submit(JobSpec.from_dict(_job(tmp_path, episodes=1)))
        worker = Worker(js, store.raw, WorkerConfig(concurrency=1))
        stats = []
        t = threading.Thread(target=lambda: stats.append(worker.run()))
        t.start()
        wait_until(lambda: js.pending()["running"] == 1, what="the attempt claimed")
        worker.stop()
        t.join(60)
    finally:
        holder.close()
    [row] = js.job(job_id)["episode_rows"]
    assert (row["attempt"], row["status"], row["error"]) == (1, "queued", None)
    assert (stats[0].run, stats[0].released) == (0, 1)


def test_the_wait_is_bounded_and_names_the_holder(tmpdir_root, tmp_path):  # noqa: F811
    """`workdir.lock_timeout` bounds the wait (0: none); a stop ends it; and a holder of
    the waiting thread itself fails at once (it could never let the folder go)."""
    holder = _box(tmp_path)
    impatient = _box(tmp_path, lock_timeout=0)
    patient = _box(tmp_path)  # the default wait, 600 s
    stopped = threading.Event()
    stopped.set()
    caught: list[BaseException] = []

    def reset(sandbox, stop=None) -> None:  # in a thread of its own, as a worker's slot
        try:
            sandbox.reset(TaskSpec("other"), stop=stop)
        except BaseException as exc:  # looked at below
            caught.append(exc)

    try:
        holder.reset(TaskSpec("held"))
        for args in [(impatient,), (patient, stopped)]:
            t = threading.Thread(target=reset, args=args)
            t.start()
            t.join(60)
        with pytest.raises(SandboxError, match="in use by another sandbox of this thread"):
            patient.reset(TaskSpec("same thread"))  # the holder is of this thread: no wait
    finally:
        for sandbox in (patient, impatient, holder):
            sandbox.close()
    timed_out, stop = caught
    assert isinstance(timed_out, SandboxError)
    assert str(timed_out) == (
        f"{tmp_path / 'fixed'} is in use by another sandbox (pid {os.getpid()} on "
        f"{os.uname().nodename}); waited 0 s (workdir.lock_timeout)"
    )
    assert isinstance(stop, StopRequested)


@pytest.mark.parametrize("processes", [2])
def test_two_worker_processes_on_one_store_share_the_folder(store, wt_env, tmp_path, processes):
    """Workers in other processes wait as slots do: the folder's lock is a flock."""
    job_file = tmp_path / "at.yaml"
    job_file.write_text(json.dumps(_job(tmp_path)))
    env = {**wt_env, "TMPDIR": str(tmp_path)}
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", str(job_file)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    [job_id] = re.findall(r"\bat-[0-9a-f]{8}\b", r.stdout)
    workers = [
        subprocess.Popen(
            ["worldtrace", "worker", "--poll", "0.2"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(processes)
    ]
    logs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0] * processes, logs
    assert "in use by another sandbox" not in "".join(logs), logs
    job = open_job_store(str(store.jobs_db)).job(job_id)
    assert job["status"] == "succeeded", job["episode_rows"]
    assert [r["attempt"] for r in job["episode_rows"]] == [1, 1]
