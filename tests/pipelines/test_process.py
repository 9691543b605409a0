"""End to end: raw shards -> processed shards, counts adding up, bad input accounted for."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import psutil
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines.process import (
    FORKED_BYTES_PER_WORKER,
    REJECTS_SHOWN,
    SPAWNED_BYTES_PER_WORKER,
    ProcessConfig,
    StoreBusy,
    auto_workers,
    dedup_partitions,
    pipeline_options,
    planned_workers,
    run,
)
from worldtrace.pipelines.runner import can_fork
from worldtrace.schemas import ShardWriter, Store, read_records, validate_dict
from worldtrace.schemas.store import shard_files

from ..conftest import wait_until


def raw_store(store, n=120):
    data, _ = near_duplicate_corpus(n_unique=n, n_groups=6, group_size=3, seed=2, exact_copies=4)
    data.append(build("terminal", [("ls\n", "a")]))  # filtered: one turn
    with ShardWriter(store.raw / "c", row_group_rows=32) as w:
        w.write(data)
    return data


def count(store, table):
    return (
        duckdb.connect()
        .execute(f"select count(*) from read_parquet('{store.processed / table}/*.parquet')")
        .fetchone()[0]
    )


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


BEAM_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
"""Beam's two worker processes, where `process` would run on worker lanes."""


def big_raw(store, seed: int) -> list:
    """3,000-odd trajectories in 500-row units: a run long enough to act on mid-way."""
    data, _ = near_duplicate_corpus(n_unique=3000, n_groups=30, group_size=3, seed=seed)
    with ShardWriter(store.raw / "c", row_group_rows=500) as w:
        w.write(data)
    return data


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, list]:
    """`big_raw`'s shards, written once (a few seconds) for the runs here that act on one
    mid-way: (their directory, the trajectories). Each test copies them (`copy_big`)."""
    s = Store.at(tmp_path_factory.mktemp("big"))
    data = big_raw(s, seed=5)
    return s.raw / "c", data


def copy_big(store, big: tuple[Path, list]) -> list:
    """`big_raw(store)`: the shared shards copied to the store's raw/; the trajectories."""
    shutil.copytree(big[0], store.raw / "c")
    return big[1]


def cli_process(store, env, *args: str, **popen) -> subprocess.Popen:
    """`worldtrace process ARGS` on `store`, as a user runs it."""
    return subprocess.Popen(
        ["worldtrace", "process", "--store", str(store.root), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen,
    )  # fmt: skip


def workers_at_work(store, cli: subprocess.Popen) -> list | None:
    """The run's two worker processes (forked from the command: its only children) once
    both exist and pass 1 is writing segments (a standby not yet given work would
    simply be replaced), else None."""
    found = psutil.Process(cli.pid).children()
    busy = list(store.processed.glob(".run-*/_index/segments/*"))
    return found if len(found) == 2 and busy else None


def test_end_to_end_counts_add_up(store):
    data = raw_store(store)
    bad = store.raw / "c" / "broken.jsonl"
    bad.write_text(
        data[0].to_json() + "\n{nope\n" + json.dumps({"domain": "chess", "turns": []}) + "\n"
    )
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    acc = m["accounting"]
    assert acc["in"] == len(data) + 3
    assert acc["rejected"] == 2 and acc["filtered"] == 1
    assert acc["in"] == acc["kept"] + acc["filtered"] + acc["duplicates"] + acc["rejected"]
    assert acc["balanced"]
    assert acc["exact"] >= 5  # 4 planted copies + the JSONL copy of data[0]

    assert count(store, "trajectories") == acc["kept"]
    assert count(store, "clusters") == acc["kept"] + acc["duplicates"]
    assert count(store, "rejects") == acc["rejected"] + acc["filtered"]
    turns = sum(len(t.turns) for t in read_records(store.processed / "trajectories"))
    assert count(store, "turns") == turns

    raw = {}  # the representative of exact copies: the first collected (data is in order)
    for t in data:
        raw.setdefault(t.trajectory_id, t)
    for t in read_records(store.processed / "trajectories"):
        assert validate_dict(t.to_dict()) == []  # processed records are valid, ids match content
        assert t.dedup.representative and all(x.category and x.stats for x in t.turns)
        before = raw[t.trajectory_id]  # no filter changed these, so the id is the raw one
        assert (t.started_at, t.ended_at) == (before.started_at, before.ended_at)
        assert [x.started_at for x in t.turns] == [x.started_at for x in before.turns]
    manifest = json.loads((store.processed / "manifest.json").read_text())
    assert manifest["policy"]["name"] == "agentworld-v1"
    assert manifest["config"]["dedup"]["threshold"] == 0.8


def test_rejects_name_file_record_and_reason(store):
    raw_store(store, n=10)
    torn = store.raw / "c" / "torn.parquet"
    good = shard_files(store.raw)[0]
    torn.write_bytes(good.read_bytes()[:500])
    (store.raw / "c" / "x.parquet").write_bytes(b"PAR1 not really")
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    rows = pq.read_table(store.processed / "rejects").to_pylist()
    reasons = {
        r["source_path"].rsplit("/", 1)[-1]: r["reason"] for r in rows if r["stage"] == "validate"
    }
    assert "unreadable Parquet" in reasons["torn.parquet"]
    assert "unreadable Parquet" in reasons["x.parquet"]
    assert m["accounting"]["balanced"]
    # the run's manifest names them first (whole files), the CLI prints why without a query
    shown = {r["source_path"].rsplit("/", 1)[-1]: r["reason"] for r in m["rejected"][:2]}
    assert shown == {"torn.parquet": reasons["torn.parquet"], "x.parquet": reasons["x.parquet"]}
    assert len(m["rejected"]) == min(len(rows), REJECTS_SHOWN)


def test_rerun_replaces_tables_atomically(store):
    raw_store(store, n=20)
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    first = count(store, "trajectories")
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert count(store, "trajectories") == first
    leftovers = [p for p in store.processed.iterdir() if p.name.startswith(".")]
    lock = store.processed / ".process.lock"  # stays (removing it would race), released
    assert leftovers == [lock] and lock.read_text() == ""


def test_no_input_is_a_clear_error(store, corpus):
    with pytest.raises(FileNotFoundError, match="no Parquet or JSONL input") as err:
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    assert "stays as it was" not in str(err.value)  # nothing processed to keep
    # found: `process --rebuild` after every raw file was removed failed with the same
    # line, and the processed data it kept was not said
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:3])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    for f in (store.raw / "a").glob("*.parquet"):
        f.unlink()
    again = ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), rebuild=True)
    with pytest.raises(FileNotFoundError, match=r"the processed data under .* stays as it was"):
        run(again)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker pool on port {port} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)  # polling a port with a deadline, not synchronising on time
    raise TimeoutError(f"worker pool on port {port} did not listen within {deadline_s} s")


@pytest.fixture
def worker_pools():
    """Two Beam SDK worker pools in their own processes (how Flink/Spark/Dataflow run us)."""
    procs = []
    try:
        for _ in range(2):
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "worldtrace.pipelines.worker_pool",
                 f"--service_port={port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                # the pool starts SDK workers as `python` from PATH: this venv's
                env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
            )  # fmt: skip
            procs.append((port, proc))
            wait_listening(port, proc)
        yield [port for port, _ in procs]
    finally:
        for _, proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.slow
def test_the_worker_pool_listens_on_loopback_only():
    """Found: the worker pool infra/runners.md told users to start (Beam's
    `worker_pool_main`, as these tests did) listens on every interface, and starts SDK
    workers that run the code any caller sends."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "worldtrace.pipelines.worker_pool", f"--service_port={port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_listening(port, proc)
        conns = psutil.Process(proc.pid).net_connections("tcp")
        listeners = [c.laddr for c in conns if c.status == psutil.CONN_LISTEN]
    finally:
        proc.terminate()  # the pool we started, by pid
        proc.wait(timeout=30)
    assert port in {a.port for a in listeners}
    assert {a.ip for a in listeners} <= LOOPBACK, listeners


def test_external_worker_pools_give_the_direct_runners_result(store, worker_pools):
    """PortableRunner, SDK workers outside this process: first batch on one pool, the
    incremental second batch on the other; equals the DirectRunner's rebuild."""
    data, _ = near_duplicate_corpus(n_unique=40, n_groups=4, group_size=3, seed=4, exact_copies=2)
    with ShardWriter(store.raw / "b1", row_group_rows=16) as w:
        w.write(data[:30])
    portable = []
    for n, port in enumerate(worker_pools):
        if n:
            with ShardWriter(store.raw / "b2", row_group_rows=16) as w:
                w.write(data[30:])
        portable.append(
            run(
                ProcessConfig(
                    inputs=[str(store.raw)],
                    output=str(store.processed),
                    runner="PortableRunner",
                    beam_args=[
                        "--job_endpoint=embed",
                        "--environment_type=EXTERNAL",
                        f"--environment_config=localhost:{port}",
                    ],
                )
            )
        )
    assert portable[1]["incremental"] and portable[1]["counters"]["read"] == len(data) - 30
    external = tables(store)
    direct = run(
        ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1, rebuild=True)
    )
    assert tables(store) == external
    assert direct["accounting"] == portable[1]["accounting"]


def tables(store) -> dict[str, list]:
    return {
        name: sorted(
            json.dumps(r, sort_keys=True, default=str)
            for r in pq.read_table(store.processed / name).to_pylist()
        )
        for name in ("trajectories", "turns", "clusters", "rejects")
    }


def test_small_corpus_is_not_all_common_under_info_policy(store):
    """Found: corpus_surprisal <= log2(turns), so in a small corpus every turn was common."""
    data = [
        build(
            "terminal",
            [
                (f"cat notes_{i}.txt\n", f"note {i}: " + "lorem ipsum " * i),
                ("ls\n", f"notes_{i}.txt"),
            ],
        )
        for i in range(1, 6)
    ]
    with ShardWriter(store.raw / "c") as w:
        w.write(data)
    run(
        ProcessConfig(
            inputs=[str(store.raw)],
            output=str(store.processed),
            workers=1,
            policy="agentworld-v1+info",
        )
    )
    cats = pq.read_table(store.processed / "turns")["category"].to_pylist()
    assert len(cats) == 10 and "common" not in cats


def test_a_run_leaves_no_listener_and_no_temporary_files(store, tmp_path, monkeypatch):
    """Found: Beam's DirectRunner tried the Prism runner first (a download from GitHub
    when online); failing, it left a gRPC worker pool listening on every interface and
    temporary directories behind, one set per `process` run."""
    import tempfile

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    me = psutil.Process()

    def listening():
        return {c.laddr for c in me.net_connections("tcp") if c.status == psutil.CONN_LISTEN}

    before, kids = listening(), {k.pid for k in me.children(recursive=True)}
    raw_store(store, n=20)
    for workers in (1, 2):
        cfg = ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), rebuild=True)
        cfg.workers = workers
        assert run(cfg)["accounting"]["balanced"]
        assert listening() == before
        assert list(temp.iterdir()) == []
        workers = [k for k in me.children(recursive=True) if k.pid not in kids]
        assert not [k for k in workers if k.status() != psutil.STATUS_ZOMBIE]  # none left


def test_a_second_run_on_the_same_store_fails_at_once_and_the_first_completes(store, wt_env, big):
    """Found: two `process` runs on one store ran side by side, each processing the same
    new files from the same earlier state and publishing over the other (their table
    swaps interleaving)."""
    data = copy_big(store, big)
    lock = store.processed / ".process.lock"
    first = cli_process(store, wt_env, "--workers", "1", "--json")
    try:
        holder = wait_until(
            lambda: lock.exists() and lock.read_text().strip(), what="the first run's lock"
        )
        assert holder.startswith(f"pid {first.pid} on ")
        with pytest.raises(StoreBusy, match=r"another `worldtrace process` is writing") as err:
            run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
        assert f"pid {first.pid} on " in str(err.value)
        out, errs = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, errs
    assert json.loads(out)["accounting"]["in"] == len(data)
    # released: the next run goes ahead (nothing new to read)
    assert (
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))["counters"]["read"]
        == 0
    )


def test_a_worker_process_killed_mid_run_fails_the_run_in_one_line(store, wt_env, big):
    """Found: a worker killed mid-run (what the out-of-memory killer does) ended
    `process` with 230 lines of tracebacks from every thread whose channel broke and
    "Channel closed prematurely", never saying that a worker died, or how."""
    data = copy_big(store, big)
    cli = cli_process(store, wt_env, "--workers", "2")
    try:
        victim = wait_until(lambda: workers_at_work(store, cli), what="workers at work")[0]
        victim.kill()  # a process the run started, by pid
        out, err = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 1, out + err
    lines = [x for x in err.splitlines() if " process: " not in x]  # progress lines
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("Error: a pipeline worker process was killed by SIGKILL")
    assert "published nothing" in lines[0]
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".run-")]
    assert not (store.processed / "trajectories").exists()
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    assert m["accounting"]["in"] == len(data) and m["accounting"]["balanced"]


def test_ctrl_c_with_worker_processes_stops_quietly(store, wt_env, big):
    """Found: Ctrl-C (SIGINT to the terminal's process group) during a run with worker
    processes printed each worker's KeyboardInterrupt traceback and a CRITICAL log line
    relayed from it before click's "Aborted!"."""
    import signal

    copy_big(store, big)
    # its own process group, as a terminal gives a command
    cli = cli_process(store, wt_env, "--workers", "2", start_new_session=True)
    try:
        started = wait_until(lambda: workers_at_work(store, cli), what="workers at work")
        os.killpg(cli.pid, signal.SIGINT)  # the group of the command we started
        _, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert cli.returncode == 130
    assert [x for x in err.splitlines() if x.strip() and " process: " not in x] == [
        f"interrupted (Ctrl-C): nothing was published: {store.processed} is as it was "
        "before this run (no table is half-written); run the same command again"
    ], err
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in started)
    assert not [p for p in store.processed.iterdir() if p.name.startswith(".run-")]


def test_dedup_steps_use_one_shuffle_key_per_local_worker():
    """Every shuffle key costs every dedup step its own batches and calls: 20k
    trajectories on 2 workers spent ~0.8 s after pass 1 with 16 keys, ~0.72 s with 2. The
    local runner deals a step's keys to its workers in turn; a portable runner's
    parallelism is not known here. With worker lanes forked from the run's process the
    dedup steps run in it: one key."""
    from worldtrace.pipelines.dedup import PARTITIONS

    def keys(**kw) -> int:
        return dedup_partitions(pipeline_options(ProcessConfig(**kw)))

    assert keys(workers=1) == 1
    assert keys(workers=2) == (1 if can_fork() else 2)
    assert keys(workers=2, beam_args=BEAM_WORKERS) == 2
    assert keys(workers=2, runner="PortableRunner") == PARTITIONS


def test_auto_workers_start_only_what_the_input_pays_back():
    """Measured on 2 cores (docs/pipeline.md#runners): workers started as new
    interpreters break even at 2.3 MB of raw shards (the old rule ran everything under
    32 MB in one process, 1.47x slower at 9 MB); forked ones are 1.2x faster at 0.9 MB."""
    mb, spawned = 1 << 20, SPAWNED_BYTES_PER_WORKER
    assert auto_workers(3 * mb, spawned, cores=2) == 1  # in-process: not two workers' worth
    assert auto_workers(4 * mb, spawned, cores=2) == 2
    assert auto_workers(9 * mb, spawned, cores=2) == 2  # at most one per core
    assert auto_workers(9 * mb, spawned, cores=64) == 4  # one per 2 MB
    assert auto_workers(0, spawned, cores=8) == 1
    assert auto_workers(450 << 10, FORKED_BYTES_PER_WORKER, cores=2) == 1  # one unit
    assert auto_workers(900 << 10, FORKED_BYTES_PER_WORKER, cores=2) == 2
    # the default follows how this process starts its workers
    per_worker = FORKED_BYTES_PER_WORKER if can_fork() else spawned
    for size, workers in ((2 * per_worker - 1, 1), (2 * per_worker, 2)):
        assert planned_workers(pipeline_options(ProcessConfig(), size)) == workers


def test_a_small_run_on_two_workers_cuts_its_row_groups_and_decides_the_same(store):
    """Found: a run's units were its row groups, so a small corpus (five groups on two
    workers: three on one, two on the other) left one worker idle for a fifth of pass 1.
    Its groups are now cut where each worker's share of the rows ends (`units.deal`),
    with the results of the uncut in-process run: rows keep their names in the file,
    duplicates across slices still meet."""
    data, _ = near_duplicate_corpus(n_unique=560, n_groups=10, group_size=4, seed=3)
    with ShardWriter(store.raw / "c", row_group_rows=1000) as w:
        w.write(data)  # one 600-row group

    def tables(workers):
        cfg = ProcessConfig(inputs=[str(store.raw)], output=str(store.processed))
        run(replace(cfg, workers=workers, rebuild=True))
        segments = len(list((store.processed / "_index" / "segments").glob("*.parquet")))
        out = {
            t: sorted(map(str, pq.read_table(store.processed / t).to_pylist()))
            for t in ("trajectories", "turns", "clusters")
        }
        return segments, out

    one, cut = tables(1), tables(2)
    assert (one[0], cut[0]) == (1, 2)  # 600 rows on two workers: 300 each
    assert cut[1] == one[1]
    assert sum("'role': 'near'" in r for r in one[1]["clusters"]) >= 20


def test_a_run_with_worker_processes_listens_on_loopback_only(store, wt_env, big):
    """Found: during a run with worker processes, Beam's runner served control, data,
    state, logging and its artifact service (which reads any file a caller names) on
    every network interface, unauthenticated."""
    data = copy_big(store, big)
    cli = cli_process(store, wt_env, "--workers", "2", "--json")
    try:
        wait_until(lambda: workers_at_work(store, cli), what="workers at work")
        tree = [psutil.Process(cli.pid), *psutil.Process(cli.pid).children(recursive=True)]
        conns = [c for p in tree for c in p.net_connections("tcp")]
        listeners = [c.laddr for c in conns if c.status == psutil.CONN_LISTEN]
        out, err = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert {a.ip for a in listeners} <= LOOPBACK, listeners
    assert cli.returncode == 0, err
    assert json.loads(out)["accounting"]["in"] == len(data)


@pytest.fixture
def fused_stages(monkeypatch) -> list[list[str]]:
    """The names of the stages the runner fuses each run into (one list per run), seen
    on Beam's `create_stages`: every stage costs a run with workers 10-30 ms however
    little it does."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    runs: list[list[str]] = []
    create = fn_runner.FnApiRunner.create_stages

    def spy(self, *args, **kwargs):
        context, stages = create(self, *args, **kwargs)
        runs.append([s.name for s in stages])
        return context, stages

    monkeypatch.setattr(fn_runner.FnApiRunner, "create_stages", spy)
    return runs


def test_a_run_pays_only_for_the_stages_its_work_needs(store, fused_stages):
    """Every run paid for two stages it did not need. The state's total was a combine
    with a default, which Beam computes in a stage of its own (a run no record reaches
    writes its state after the run instead: test_incremental.py), and the seed edges of
    earlier clusters were flattened with the near edges in another, though a full run
    has no earlier cluster. A full run on two workers: 12 stages -> 10. (On Beam's
    workers, as asked: whether a run may fork its lanes depends on the threads this test
    process has, and on lanes the units' stage is fused with pass 1's: 9. It passed or
    failed with the tests run before it.)"""
    raw_store(store, n=60)
    cfg = ProcessConfig(
        inputs=[str(store.raw)], output=str(store.processed), workers=2, beam_args=BEAM_WORKERS
    )
    full = run(cfg)
    stages = fused_stages[-1]
    assert not [s for s in stages if "DoOnce" in s or "InjectDefault" in s]
    assert not [s for s in stages if "SeedEdges" in s or "AllEdges" in s]
    assert len(stages) == 10, "\n".join(stages)
    assert full["accounting"]["near"] > 0 and full["accounting"]["exact"] > 0
    # an incremental run has earlier clusters: their seed edges join the near ones
    more, _ = near_duplicate_corpus(n_unique=20, n_groups=2, group_size=3, seed=11)
    with ShardWriter(store.raw / "d", row_group_rows=32) as w:
        w.write(more)
    assert run(cfg)["incremental"]
    assert [s for s in fused_stages[-1] if "AllEdges" in s]
    assert not [s for s in fused_stages[-1] if "DoOnce" in s]
