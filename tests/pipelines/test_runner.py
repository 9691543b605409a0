"""The local runner with Beam's worker processes (`--direct_running_mode=multi_processing`;
`process` runs on worker lanes instead where it may fork: tests/pipelines/test_lanes_1205.py):
they are forked from the submitting process while it may fork (a fresh CLI run), new
interpreters once gRPC runs in it, with the same results; a run keeps the objects that
existed before it out of full collections."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import threading

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that
from worldtrace.pipelines.runner import LocalRunner, can_fork, paused_gc

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path

    import apache_beam as beam
    from worldtrace.pipelines.process import ProcessConfig, pipeline_options
    from worldtrace.pipelines.runner import LocalRunner, can_fork


    class Where(beam.DoFn):
        "Square an element, and say which process did it (written where the test reads)."

        def __init__(self, out):
            self.out = out

        def process(self, x):
            cmdline = Path("/proc/self/cmdline").read_bytes().decode().split("\\0")[:-1]
            row = {"square": x * x, "pid": os.getpid(), "ppid": os.getppid(), "cmd": cmdline}
            Path(self.out, f"{x}.json").write_text(json.dumps(row))


    report = {"pid": os.getpid(), "cmd": sys.argv, "runs": []}
    for n, out in enumerate(sys.argv[1:]):
        report["runs"].append({"can_fork": can_fork()})
        beam_workers = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
        options = pipeline_options(ProcessConfig(workers=2, beam_args=beam_workers))
        with LocalRunner(options) as runner:
            p = beam.Pipeline(runner=runner, options=options)
            _ = p | beam.Create(range(8)) | beam.ParDo(Where(out))
            p.run().wait_until_finish()
        rows = [json.loads(f.read_text()) for f in sorted(Path(out).iterdir())]
        report["runs"][-1]["rows"] = rows
    print(json.dumps(report))
    """
)


def test_workers_fork_from_a_fresh_process_and_start_anew_once_grpc_runs(tmp_path):
    """A fresh process (the CLI's run) forks its two workers: they start with Beam and
    worldtrace imported instead of importing them (~1 s of CPU each, 2 s of a 20k-trajectory
    run's 17 on 2 cores). Its first run starts gRPC in it, so the second run's workers
    are new interpreters; both runs compute the same."""
    script = tmp_path / "two_runs.py"
    script.write_text(SCRIPT)
    outs = [tmp_path / "first", tmp_path / "second"]
    for out in outs:
        out.mkdir()
    proc = subprocess.run(
        [sys.executable, str(script), *map(str, outs)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    first, second = report["runs"]
    for run in (first, second):
        assert sorted(r["square"] for r in run["rows"]) == [x * x for x in range(8)]
        assert report["pid"] not in {r["pid"] for r in run["rows"]}  # worker processes did it
    assert first["can_fork"] and not second["can_fork"]
    forked = first["rows"]
    assert {r["ppid"] for r in forked} == {report["pid"]}
    assert all(r["cmd"][1:] == report["cmd"] for r in forked)  # the same program, forked
    assert len({r["pid"] for r in forked}) == 2  # both workers had work
    assert all("worldtrace.pipelines.sdk_worker" in r["cmd"] for r in second["rows"])


AFTER_IN_PROCESS = textwrap.dedent(
    """
    import json, sys
    from dataclasses import replace
    from pathlib import Path

    import pyarrow.parquet as pq
    from worldtrace.collectors.synthetic import near_duplicate_corpus
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.pipelines.runner import can_fork
    from worldtrace.schemas import ShardWriter

    root = Path(sys.argv[1])
    data, _ = near_duplicate_corpus(n_unique=560, n_groups=10, group_size=4, seed=3)
    with ShardWriter(root / "raw", row_group_rows=1000) as w:
        w.write(data)  # one 600-row group: two 300-row units on two workers
    cfg = ProcessConfig(inputs=[str(root / "raw")], output=str(root / "out"), rebuild=True)
    report = {}
    for workers in (1, 2):
        report[f"can_fork_{workers}"] = can_fork()
        run(replace(cfg, workers=workers))
        rows = pq.read_table(root / "out" / "clusters").to_pylist()
        report[workers] = sorted(map(str, rows))
    print(json.dumps(report))
    """
)


def test_a_second_run_after_an_in_process_one_does_not_hang(tmp_path):
    """Found: an in-process `process` run, then one with worker processes in the same
    Python process (a notebook, a long-lived service), hung forever in pass 1. rensa
    signs a batch of a few hundred documents or more on a Rayon thread pool it starts on
    first use; a forked worker inherits the pool's state without its threads and waits
    for them. The second run's workers now start as new interpreters, and it decides
    like the first."""
    script = tmp_path / "two_runs.py"
    script.write_text(AFTER_IN_PROCESS)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["can_fork_1"] and not report["can_fork_2"]
    assert report["1"] == report["2"] and len(report["1"]) == 590


def test_a_process_with_a_python_thread_does_not_fork():
    """Only the calling thread survives a fork: a lock another thread held would stay
    held in the worker forever."""
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not can_fork()
    finally:
        release.set()
        other.join()


class FreezeCount(beam.DoFn):
    def process(self, x):
        yield gc.get_freeze_count()


SEEN: list[int] = []


def seen(counts) -> None:
    SEEN.extend(counts)  # a module's list: the in-process run's matcher is this function


def freeze_counts_seen_by_a_run() -> list[int]:
    SEEN.clear()
    options = PipelineOptions(["--direct_running_mode=in_memory"])
    with LocalRunner(options) as runner, beam.Pipeline(runner=runner, options=options) as p:
        assert_that(p | beam.Create([0]) | beam.ParDo(FreezeCount()), seen)
    return list(SEEN)


def test_a_run_leaves_what_existed_before_it_out_of_full_collections():
    """Pass 1's allocations trigger full collections that walked every object the
    imports left (65 ms each, 5% of an in-process pass 1); frozen for the run, they are
    collectable again after it, and someone else's freeze is left alone."""
    assert gc.get_freeze_count() == 0
    (during,) = freeze_counts_seen_by_a_run()
    assert during > 10_000 and gc.get_freeze_count() == 0
    gc.freeze()
    try:
        theirs = gc.get_freeze_count()  # falls as frozen objects are freed, never rises
        (during,) = freeze_counts_seen_by_a_run()
        assert during <= theirs  # not frozen again (the run's own objects would join)
        assert gc.get_freeze_count() > theirs // 2  # and not thawed
    finally:
        gc.unfreeze()


def test_paused_collection_resumes_after_the_last_overlapping_pause():
    """Pass 1 pauses the cyclic collector per unit (`runner.paused_gc`); a worker runs
    bundles on several threads, so pauses overlap: the collector comes back when the
    last one ends, and one that was off before stays off."""
    assert gc.isenabled()
    first, second = paused_gc(), paused_gc()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second is still working
    second.__exit__(None, None, None)
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_interrupted_run_leaves_beams_broken_channels_unsaid():
    """Found (a CI run, 2026-12-02): Ctrl-C while the workers moved data printed the
    runner's data-plane thread traceback, "Failed to read inputs in the data plane" and
    "Error closing worker_handler" before "Aborted!": the run's watch held them back,
    then let them out because no worker had died. After an interrupt they are the
    interrupt's doing, during the run's unwinding and after it; other threads and other
    log lines still speak."""
    import logging

    from worldtrace.pipelines import runner as R

    said: list[str] = []
    logged: list[str] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())

    def broken() -> None:
        raise RuntimeError("grpc.RpcError")

    def thread(name: str) -> None:
        t = threading.Thread(target=broken, name=name)
        t.start()
        t.join()

    hook = threading.excepthook
    threading.excepthook = lambda args: said.append(args.thread.name)
    data_plane = logging.getLogger("apache_beam.runners.worker.data_plane")
    kept = Kept()
    data_plane.addHandler(kept)
    try:
        with pytest.raises(KeyboardInterrupt), R._WorkerWatch():
            thread("read_grpc_client_inputs")
            data_plane.error("Failed to read inputs in the data plane.")
            raise KeyboardInterrupt
        thread("read_grpc_client_inputs")  # after the run: still the interrupt's
        data_plane.error("Failed to read inputs in the data plane.")
        thread("mine")
        data_plane.error("something else")
        assert (said, logged) == (["mine"], ["something else"])
    finally:
        threading.excepthook = hook
        data_plane.removeHandler(kept)
        for name in R._BROKEN_CHANNEL_LOGS:
            for f in [f for f in logging.getLogger(name).filters if isinstance(f, R._Interrupted)]:
                logging.getLogger(name).removeFilter(f)
