"""Worker lanes (`runner.LaneOptions`, `forkpool.fork_lanes`): a local run with several
workers runs its pipeline in the command's process and hands pass 1 and pass 2 to
processes forked from it, one lane each, the work dealt to them in turn.

Found (issue 15, the fixed cost of a run): Beam's own worker processes cost every run
~0.15 s (gRPC servers, each worker's harness and first bundle, a fan-out at every stage),
so a 5k-trajectory run was ~25% dearer per trajectory than an 80k one. Found on the way:
an error whose exception does not rebuild from its pickle (`tempfiles.DamagedFile`) broke
a fork pool's result thread, and the run said a worker had died; an 80k run's pass 2 sent
the decisions map in every segment's task (0.4 s); pass 1 waited for the pipeline's
construction before it started.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

import psutil
import pyarrow.parquet as pq
from worldtrace.collectors.synthetic import near_duplicate_corpus
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.tempfiles import DamagedFile

from ..conftest import wait_until
from .test_process import BEAM_WORKERS, cli_process, workers_at_work


def _corpus(store) -> list:
    """~2,400 trajectories in six 400-row groups, near duplicates spread across them."""
    data, _ = near_duplicate_corpus(n_unique=2000, n_groups=60, group_size=4, seed=11)
    with ShardWriter(store.raw / "c", row_group_rows=400) as w:
        w.write(data)
    return data


def _process(store, env, *args: str) -> dict:
    out = subprocess.run(
        ["worldtrace", "process", "--store", str(store.root), "--rebuild", "--json", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _tables(store) -> dict[str, list[str]]:
    return {
        t: sorted(map(str, pq.read_table(store.processed / t).to_pylist()))
        for t in ("trajectories", "turns", "clusters")
    }


def test_a_run_on_worker_lanes_equals_the_in_process_run_and_one_on_beams_workers(store, wt_env):
    """The same tables and counts three ways; the lanes' counts come back from the
    workers with their results (Beam's metrics of another process would be lost)."""
    data = _corpus(store)
    ways = {"in-process": ["--workers", "1"], "lanes": ["--workers", "2"]}
    ways["beam workers"] = [*ways["lanes"], *BEAM_WORKERS]
    seen, segments = {}, {}
    for name, args in ways.items():
        m = _process(store, wt_env, *args)
        segments[name] = m["counters"].pop("segments.new")
        seen[name] = (m["counters"], m["accounting"], _tables(store))
    assert seen["lanes"] == seen["in-process"] == seen["beam workers"]
    counters, accounting, _ = seen["lanes"]
    assert counters["read"] == accounting["in"] == len(data) and accounting["balanced"]
    assert accounting["duplicates"] > 0
    # a unit is cut where a worker's share ends (`units.deal`)
    assert segments == {"in-process": 6, "lanes": 7, "beam workers": 7}


def test_a_run_on_worker_lanes_serves_nothing_and_its_workers_are_forked(store, wt_env):
    """Beam's workers need the runner's gRPC servers (on loopback: test_process.py); the
    lanes are two children forked from the command, and nothing listens."""
    data, _ = near_duplicate_corpus(n_unique=3000, n_groups=30, group_size=3, seed=8)
    with ShardWriter(store.raw / "c", row_group_rows=500) as w:
        w.write(data)
    cli = cli_process(store, wt_env, "--workers", "2", "--json")
    try:
        workers = wait_until(lambda: workers_at_work(store, cli), what="workers at work")
        command = psutil.Process(cli.pid).cmdline()
        tree = [psutil.Process(cli.pid), *workers]
        listening = [c for p in tree for c in p.net_connections("tcp") if c.status == "LISTEN"]
        cmds = [w.cmdline() for w in workers]
        out, err = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, err
    assert listening == []
    assert cmds == [command, command]  # forked from the command, not new interpreters
    assert json.loads(out)["accounting"]["in"] == len(data)


MARKING = textwrap.dedent(
    """
    import json, os, time


    def mark(marks, x):
        "A call's work: says which process did it, once per time it runs."
        with open(marks, "a") as fh:
            fh.write(json.dumps([x, os.getpid()]) + "\\n")
        return x * x


    def slow(marks, x):
        "A long unit: says when it starts and when it is done."
        mark(marks, f"start {x}")
        time.sleep(60)
        mark(marks, f"done {x}")
    """
)
LANES = textwrap.dedent(
    """
    import os, sys

    import apache_beam as beam
    from marking import mark
    from worldtrace.pipelines.process import ProcessConfig, pipeline_options
    from worldtrace.pipelines.runner import LocalRunner
    from worldtrace.pipelines.transforms import _OnLanes

    marks, results = sys.argv[1], sys.argv[2]


    class Squares(_OnLanes):
        def work(self, x):
            return (mark, marks, x)

        def emit(self, square):
            yield square


    def keep(square):
        with open(results, "a") as fh:
            fh.write(f"{square}\\n")


    options = pipeline_options(ProcessConfig(workers=2))
    with LocalRunner(options) as runner:
        runner.submit_ahead([(mark, marks, x) for x in range(6)])  # before the pipeline exists
        p = beam.Pipeline(runner=runner, options=options)
        _ = p | beam.Create(list(range(6)), reshuffle=False) | beam.ParDo(Squares()) | beam.Map(keep)
        p.run().wait_until_finish()
    print(os.getpid())
    """
)


def test_work_submitted_ahead_is_taken_by_its_stage_and_dealt_to_the_lanes_in_turn(tmp_path):
    """Pass 1 starts while the pipeline is built (`LocalRunner.submit_ahead`): its stage
    takes those tasks instead of running the units again, and each lane gets every
    other unit, the order `units.deal` balanced the rows for."""
    script, marks, results = tmp_path / "lanes.py", tmp_path / "marks", tmp_path / "results"
    script.write_text(LANES)
    (tmp_path / "marking.py").write_text(MARKING)  # importable: a lane unpickles it by name
    proc = subprocess.run(
        [sys.executable, str(script), str(marks), str(results)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    runs = [json.loads(line) for line in marks.read_text().splitlines()]
    assert sorted(x for x, _ in runs) == list(range(6))  # each call ran once
    pids = {x: pid for x, pid in runs}
    assert pids[0] == pids[2] == pids[4] != pids[1] == pids[3] == pids[5]
    assert int(proc.stdout) not in pids.values()  # in the lanes, not the command
    assert sorted(map(int, results.read_text().split())) == [x * x for x in range(6)]


def test_a_damaged_file_rebuilds_from_its_pickle():
    e = pickle.loads(pickle.dumps(DamagedFile("/store/raw/a.parquet", "cut short", "restore it")))
    assert isinstance(e, DamagedFile)
    assert str(e) == "/store/raw/a.parquet: cut short; restore it"
    assert e.filename == "/store/raw/a.parquet"


RAISING = textwrap.dedent(
    """
    from worldtrace.schemas.tempfiles import DamagedFile


    class Unrebuildable(Exception):
        "An error whose pickle does not rebuild it (its __init__ takes other arguments)."

        def __init__(self, path, why):
            super().__init__(f"{path}: {why}")


    def fail(kind):
        if kind == "damaged":
            raise DamagedFile("/store/raw/a.parquet", "cut short", "restore it")
        raise Unrebuildable("/store/raw/a.parquet", "odd")
    """
)
ERRORS = textwrap.dedent(
    """
    import json

    from raising import fail
    from worldtrace.schemas import forkpool

    lanes = forkpool.fork_lanes(2)
    out = {}
    for kind in ("damaged", "other"):
        try:
            forkpool.result_of(lanes, forkpool.submit(lanes[1], fail, kind))
        except Exception as exc:
            out[kind] = [type(exc).__name__, str(exc)]
    out["all alive"] = forkpool.dead_worker(lanes) is None
    out["next"] = forkpool.result_of(lanes, forkpool.submit(lanes[1], abs, -3))
    for lane in lanes:
        lane.shutdown()
    print(json.dumps(out))
    """
)


def test_a_workers_error_reaches_the_parent_as_raised_not_as_a_dead_worker(tmp_path):
    """Found: a DamagedFile raised in a worker broke the pool's result thread
    (BrokenProcessPool: "terminated abruptly"), and `process` would have said a worker
    died. One that cannot rebuild still comes back with its type and message."""
    (tmp_path / "raising.py").write_text(RAISING)
    (tmp_path / "errors.py").write_text(ERRORS)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "errors.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "damaged": ["DamagedFile", "/store/raw/a.parquet: cut short; restore it"],
        "other": ["RuntimeError", "Unrebuildable: /store/raw/a.parquet: odd"],
        "all alive": True,
        "next": 3,
    }


STOPPED = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path

    from marking import slow
    from worldtrace.pipelines.process import ProcessConfig, pipeline_options
    from worldtrace.pipelines.runner import LocalRunner
    from worldtrace.schemas import forkpool

    marks = Path(sys.argv[1])
    options = pipeline_options(ProcessConfig(workers=2))
    try:
        with LocalRunner(options) as runner:
            runner.submit_ahead([(slow, str(marks), x) for x in range(2)])
            pids = [p.pid for p in forkpool.workers_of(runner._lanes)]
            deadline = time.monotonic() + 60
            while (not marks.exists() or marks.read_text().count("start") < 2) and time.monotonic() < deadline:
                time.sleep(0.01)  # both lanes in the middle of their unit
            raise RuntimeError("the pipeline could not be built")
    except RuntimeError:
        pass
    print(json.dumps(pids))
    """
)


def test_a_run_that_fails_before_its_pipeline_runs_stops_the_lanes_at_once(tmp_path):
    """Pass 1 is handed to the lanes before the pipeline is built: when building it
    fails (or Ctrl-C comes then), the lanes are stopped, not waited for until their
    units are done."""
    (tmp_path / "marking.py").write_text(MARKING)
    (tmp_path / "stopped.py").write_text(STOPPED)
    marks = tmp_path / "marks"
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "stopped.py"), str(marks)],
        capture_output=True, text=True, timeout=50, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    pids = json.loads(proc.stdout)
    assert len(pids) == 2 and not any(psutil.pid_exists(p) for p in pids)
    lines = marks.read_text()
    assert lines.count("start") == 2 and "done" not in lines


BACK_TO_BACK = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from multiprocessing import util

    import psutil
    from worldtrace.pipelines.process import ProcessConfig, run


    class SlowExit:
        "Lanes that take 0.3 s to exit (a machine under load, a large heap to free)."

        @staticmethod
        def arm(_):
            util.Finalize(None, time.sleep, args=(0.3,), exitpriority=0)


    slow = SlowExit()
    util.register_after_fork(slow, SlowExit.arm)
    forks = []
    os.register_at_fork(after_in_parent=lambda: forks.append(1))
    seen = []
    for _ in range(2):
        before = len(forks)
        m = run(ProcessConfig(inputs=[sys.argv[1]], output=sys.argv[2], workers=2, rebuild=True))
        seen.append({
            "forked": len(forks) - before,
            "children": len(psutil.Process().children()),
            "threads": threading.active_count(),
            "in": m["accounting"]["in"],
        })
    print(json.dumps({"runs": seen, "dataset layer": "pyarrow.dataset" in sys.modules}))
    """
)


def test_laned_runs_back_to_back_each_fork_their_lanes_and_leave_none(store, tmp_path):
    """A run's lanes are released when its pipeline is done and exit while it writes its
    tables (`forkpool.release`, ~7 ms each that a run waited for one after the other);
    the run still returns with them gone (here each takes 0.3 s to exit), their pools'
    threads ended: a thread left alive would make the next run in the process do its
    work in-process (`fork_safe`).
    Nor does a run import pyarrow's dataset layer (`store.read_parquet`: ~8 ms)."""
    data = _corpus(store)
    (tmp_path / "runs.py").write_text(BACK_TO_BACK)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "runs.py"), str(store.raw), str(store.processed)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    one = {"forked": 2, "children": 0, "threads": 1, "in": len(data)}
    assert out == {"runs": [one, one], "dataset layer": False}
