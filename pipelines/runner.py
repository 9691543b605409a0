"""The local Beam runner: Beam's FnApiRunner, asked for by name.

Beam's `DirectRunner` first tries the Prism runner. With network it downloads a Go
binary from GitHub and runs the pipeline on it, so the runner would depend on the
machine's network. Without network it falls back to the FnApiRunner, but leaves a gRPC
worker pool listening on every interface and temporary directories behind, one set per
run. `process` therefore asks for the FnApiRunner itself: the same runner everywhere,
nothing left running after a run.

With more than one worker, where this process may fork (`can_fork`), the pipeline
runs here and pass 1 and pass 2 go to worker lanes forked from it (`LaneOptions`,
`work_lanes`, `schemas.forkpool`): Beam's own worker processes cost every run ~0.15 s
of servers, harnesses and per-stage fan-out. Otherwise (or asked for with
`--direct_running_mode=multi_processing`) the workers are Beam's, processes running
`worldtrace.pipelines.sdk_worker`, which keeps Beam's start-up log lines off the user's
terminal (the workers' logs still reach the runner over the Fn API logging service).
They start when the runner is made, before the pipeline is built, and wait warm
(`_Standbys`) until the runner asks for them: forked from this process while gRPC has
not started in it (`can_fork`), else as new interpreters that import Beam meanwhile.
A worker that dies (the kernel's out-of-memory killer, a crash) fails the run with
`WorkerLost`, one line naming how it died, instead of the tracebacks of every thread
whose channel broke with it. A run killed outright (SIGKILL) cannot stop its workers:
each follows the runner's process and exits with it, quietly (`sdk_worker.follow`).

The runner's gRPC servers (control, data, state, logging, and the artifact service on
the control port, which reads any file a caller names) listen on loopback only while
our runs last (`_loopback_servers`): Beam binds them to every interface, unauthenticated,
though its local workers always connect through `localhost`.

`--runner PortableRunner --job_endpoint=embed` runs as `EmbeddedJobRunner`: Beam's
portable runner and job service in this process, its SDK workers started by worker
pools (`worker_pool`). A worker that never connects (`--worker_start_timeout`), whose
connection breaks, or that stops answering (`--worker_keepalive`) fails the run with
`WorkerLost`; a stopped run has the pools end its workers and waits for its job before
the run directory goes, and nothing of the job keeps the process alive.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from worldtrace.schemas import forkpool

from . import sdk_worker
from .tuning import tune_beam

LOCAL_RUNNERS = ("DirectRunner", "direct")
"""The `--runner` names `process` runs with `LocalRunner`."""
WORKER_MODULE = "worldtrace.pipelines.sdk_worker"
STANDBY = "--standby"
"""`WORKER_MODULE`'s flag: start warm and wait on stdin for a worker's environment."""
RUNNER_PID = "--runner-pid"
"""`WORKER_MODULE`'s flag `--runner-pid=PID`: the process whose end ends the worker
(`sdk_worker.follow`)."""
FORK_SAFE_THREAD = "jemalloc_bg_thd\n"
"""The one named native thread `can_fork` allows (jemalloc's, restarted in a child);
the others must carry the process's own name."""
WORKER_URN = "worldtrace:env:subprocess_python:v1"
"""The environment of `LocalRunner`'s worker processes (`_WorkerProcess`)."""


_EXITED = re.compile(r"Worker subprocess exited with return code (-?\d+)")
_BEAM_THREADS = ("run_worker", "beam_control_read", "read_grpc_client_inputs")
_BROKEN_CHANNEL_LOGS = {
    "apache_beam.runners.worker.data_plane": "Failed to read inputs in the data plane",
    "apache_beam.runners.portability.fn_api_runner.worker_handlers": "Error closing worker",
    # an embedded job service's run that failed (`EmbeddedJobRunner`): its traceback
    "apache_beam.runners.portability.local_job_service": "Error running pipeline",
}
"""Logger -> message start of what Beam logs when a worker's channels break."""
_JOB_MESSAGES = "read_messages"
"""The function of Beam's portable runner that logs a job's messages on the root logger
(a failed job's traceback, at ERROR)."""


def _beam_thread(args: Any) -> bool:
    """Whether an uncaught thread exception (`threading.excepthook`'s args) is one of
    Beam's channel threads'."""
    return args.thread is not None and args.thread.name.startswith(_BEAM_THREADS)


def _broken_channel(record: logging.LogRecord) -> bool:
    """Whether a log record is Beam's of a worker's broken channel (or, on a portable
    runner, the job's failure it caused, relayed from the job service)."""
    if record.name == "root":
        return record.funcName == _JOB_MESSAGES and record.levelno >= logging.ERROR
    return record.getMessage().startswith(_BROKEN_CHANNEL_LOGS.get(record.name, "\0"))


def _watched_loggers() -> list[logging.Logger]:
    """The loggers whose records `_broken_channel` looks at."""
    return [logging.getLogger(name) for name in _BROKEN_CHANNEL_LOGS] + [logging.getLogger()]


class WorkerLost(RuntimeError):
    """A worker process of the run died: the run failed and published nothing."""


def how_it_died(code: int) -> str:
    if code >= 0:
        return f"exited with status {code} (its error is above)"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code == signal.SIGKILL:
        return (
            f"was killed by {name} (the kernel's out-of-memory killer sends it: see "
            "`dmesg`; fewer --workers use less memory)"
        )
    return f"was killed by {name}"


LANE_GONE = "died (a worker lane: its pool broke before its exit status could be read)"
"""How a lane died when its status is not known: a pool that finds a worker gone fails
its futures first and reaps the worker after, and a look at the status in between (a
second `waitpid` racing the pool's) finds none (fresh-clone CI under load: the run ended
with the BrokenProcessPool traceback instead of one line)."""


def broken_pool(exc: BaseException | None) -> bool:
    """Whether `exc` (as Beam re-raises it, `[while running ...]`) is, or was caused by, a
    worker lane's pool breaking: a worker of ours died."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BrokenProcessPool):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def can_fork() -> bool:
    """Whether this process may fork its workers instead of starting new interpreters.

    A forked worker starts with Beam and worldtrace imported (a new interpreter spends
    ~1 s of CPU importing them). Only the calling thread survives a fork, so the rule is
    about the others: no Python thread but one that says a fork may copy it (the CLI's
    signal relay, `forkpool.fork_safe`: the CLI's runs started their workers as new
    interpreters while it ran), and only native threads whose libraries restore
    themselves in a child (numpy's OpenBLAS, Arrow's pool and jemalloc, all unnamed or
    `jemalloc_bg_thd`). gRPC's threads name themselves: once a run has started gRPC in
    this process (the runner's servers), its half-copied state is not for a child, and
    workers start as new interpreters. rensa's Rayon threads are unnamed but do not
    restart in a child: after pass 1 ran in this process (`minhash.pool_started`),
    workers start as new interpreters too.
    """
    from .minhash import pool_started

    if any(not forkpool.fork_safe(t) for t in threading.enumerate()) or pool_started():
        return False
    try:
        main = Path("/proc/self/comm").read_text()
        tasks = Path("/proc/self/task").iterdir()
        return all((t / "comm").read_text() in (main, FORK_SAFE_THREAD) for t in tasks)
    except OSError:  # no /proc: cannot tell
        return False


class _ForkedStandby:
    """A standby forked from this process (`sdk_worker.forked`), with the part of
    `subprocess.Popen` the runner uses: `stdin` takes the worker's environment."""

    def __init__(self):
        env_fd, ours = os.pipe()
        ctx = multiprocessing.get_context("fork")
        # daemon: at exit a forgotten one is terminated, not waited for
        runner = os.getpid()  # what the worker follows (`sdk_worker.follow`)
        self._proc = ctx.Process(target=sdk_worker.forked, args=(env_fd, ours, runner), daemon=True)
        # Ctrl-C between the fork and the child's own handler would print its traceback
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with warnings.catch_warnings():  # Python 3.12+ warns of any thread at fork
                warnings.simplefilter("ignore", DeprecationWarning)
                self._proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            os.close(env_fd)
        self.stdin = os.fdopen(ours, "wb")
        self.pid = self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return self._proc.exitcode

    def kill(self) -> None:
        self._proc.kill()


class _Standbys:
    """Worker processes started before the pipeline is built, which wait for the
    environment of the worker each becomes; unused ones get EOF and exit.

    Forked from this process when it may fork (`can_fork`: the CLI's runs): a fork costs
    milliseconds. Otherwise new interpreters through `WORKER_MODULE`, which import Beam
    and worldtrace while the runner builds and plans the pipeline (a cold worker spends
    ~1 s on that after the runner asks for it).
    """

    def __init__(self, n: int):
        if can_fork():
            self.procs = [_ForkedStandby() for _ in range(n)]
        else:
            cmd = [sys.executable, "-m", WORKER_MODULE, STANDBY, f"{RUNNER_PID}={os.getpid()}"]
            self.procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE) for _ in range(n)]

    def take(self) -> subprocess.Popen | _ForkedStandby | None:
        while self.procs:
            proc = self.procs.pop(0)
            if proc.poll() is None:
                return proc
        return None

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # EOF: the standby exits
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()  # ours, by pid
                proc.wait()
        self.procs = []


LOOPBACK = "127.0.0.1"
"""Where our runs' servers listen. Not `localhost`: gRPC binds each address a name
resolves to (127.0.0.1 and ::1) on the port the first one got, and when another process
holds that port on the second it prints a bind warning on the user's terminal (workers'
clients still reach the server: they try each address `localhost` resolves to)."""


_RUN_WORKERS: dict[str, list] = {}
"""Runner token -> the worker handlers it started (`_WorkerProcess.close`)."""
_STANDBYS: dict[str, _Standbys] = {}
"""Runner token -> its standby workers (the worker handler finds them by the token in
its environment's payload)."""


def _worker_env(control: str, logging_port: int, provision_info, worker_id) -> dict[str, str]:
    """What a Beam SDK worker reads from its environment (as `SubprocessSdkWorker` sets)."""
    from apache_beam.portability.api import endpoints_pb2
    from google.protobuf import json_format, text_format

    def descriptor(url: str) -> str:
        return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))

    env = {
        "CONTROL_API_SERVICE_DESCRIPTOR": descriptor(control),
        "LOGGING_API_SERVICE_DESCRIPTOR": descriptor(f"{LOOPBACK}:{logging_port}"),
        "PIPELINE_OPTIONS": json_format.MessageToJson(
            provision_info.provision_info.pipeline_options
        ),
    }
    if worker_id:
        env["WORKER_ID"] = worker_id
    return env


def _run_standby(worker, proc: subprocess.Popen | _ForkedStandby) -> None:
    """`SubprocessSdkWorker.run` for a standby process: its log server, then the
    environment on its stdin instead of a new process."""
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
    from apache_beam.utils import thread_pool_executor

    options = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]
    logs = grpc.server(thread_pool_executor.shared_unbounded_instance(), options=options)
    port = logs.add_insecure_port(f"{LOOPBACK}:0")
    logs.start()
    beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(), logs)
    env = _worker_env(worker._control_address, port, worker._provision_info, worker._worker_id)
    try:
        try:
            proc.stdin.write((json.dumps(env) + "\n").encode())
            proc.stdin.close()
        except OSError:  # it died before taking its environment
            raise RuntimeError(f"Worker subprocess exited with return code {proc.wait()}") from None
        proc.wait()
        if proc.returncode:
            raise RuntimeError(f"Worker subprocess exited with return code {proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.kill()
        logs.stop(0)


@worker_handlers.WorkerHandler.register_environment(WORKER_URN, bytes)
class _WorkerProcess(worker_handlers.SubprocessSdkWorkerHandler):
    """Beam's subprocess worker handler, plus: a standby process becomes the worker when
    one is waiting, and when the process dies, what waits for it fails. Beam's handler
    only raises in its own thread, and the runner then waits for the worker's answers
    forever (a worker that died while starting) or until a stream notices the closed
    channel."""

    def start_worker(self) -> None:
        from apache_beam.runners.portability import local_job_service

        spec = json.loads(self._worker_command_line)
        self._run_token = spec["standbys"]
        _RUN_WORKERS.setdefault(self._run_token, []).append(self)
        standbys = _STANDBYS.get(spec["standbys"])
        proc = standbys.take() if standbys else None
        self.worker = local_job_service.SubprocessSdkWorker(
            spec["command"].encode(), self.control_address, self.provision_info, self.worker_id
        )
        if proc is not None:
            self.worker.run = lambda: _run_standby(self.worker, proc)

        def run() -> None:
            try:
                self.worker.run()
            except RuntimeError as exc:  # the process exited with a non-zero status
                lost = WorkerLost(str(exc))
                self.control_conn.abort(lost)  # answers the runner waits for
                self.data_conn._exception = lost  # outputs it waits for (polled each 1 s)
                raise

        self.worker_thread = threading.Thread(name="run_worker", target=run)
        self.worker_thread.start()

    def close(self) -> None:
        """Beam stops the workers one after another, each waited for until its process
        has ended (~15 ms); the first to close tells every worker of the run that the
        run is over, so they end together. Their data channels are marked closed first:
        a worker exits at once when done (`sdk_worker.serve`), which can cut its data
        stream before gRPC sent its end, and a cut stream of a channel not yet closed is
        logged and raised as a failure (`Failed to read inputs`) - Beam marks it only in
        each handler's own close, which now comes after the worker has gone."""
        from apache_beam.runners.portability.fn_api_runner.worker_handlers import (
            BeamFnControlServicer as Control,
        )

        for worker in _RUN_WORKERS.pop(getattr(self, "_run_token", None), []):
            worker.data_conn._closed = True  # every bundle is done: no input is awaited
            if worker.control_conn._state == Control.STARTED_STATE:
                worker.control_conn.push(Control._DONE_MARKER)  # its own close adds one more
        super().close()


class _WorkerWatch(logging.Filter):
    """While a run lasts: collect the exit codes Beam's `run_worker` threads report, and
    hold back what breaks with a dead worker (its channel threads' exceptions, the data
    plane's log of the closed stream). Held items are let out after the run unless a
    lost worker explains them."""

    def __enter__(self) -> _WorkerWatch:
        self.codes: list[int] = []
        self.threads: list = []
        self.records: list[logging.LogRecord] = []
        self.lost: list[BaseException] = []  # portable workers (`_ExternalWorker`)
        self.previous = threading.excepthook
        threading.excepthook = self.hook
        for logger in _watched_loggers():
            logger.addFilter(self)
        return self

    def hook(self, args) -> None:
        m = _EXITED.search(str(args.exc_value))
        if m:
            self.codes.append(int(m.group(1)))
        elif _beam_thread(args):
            self.threads.append(args)
        else:
            self.previous(args)

    def filter(self, record: logging.LogRecord) -> bool:
        if _broken_channel(record):
            self.records.append(record)
            return False
        return True

    def __exit__(self, kind, *exc) -> None:
        threading.excepthook = self.previous
        for logger in _watched_loggers():
            logger.removeFilter(self)
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            _quiet_after_interrupt()  # what breaks now is the interrupt's doing
            return
        if not self.codes and not self.lost:
            for args in self.threads:
                self.previous(args)
            for record in self.records:
                logging.getLogger(record.name).handle(record)


class _Interrupted(logging.Filter):
    """After a run was interrupted (Ctrl-C): Beam's channel threads and their logs break
    as the runner closes the workers and its servers, during the run's unwinding and
    after it. None of it is news: the user stopped the run, and click says "Aborted!"."""

    def __init__(self, previous: Callable[[Any], None]):
        super().__init__()
        self.previous = previous

    def hook(self, args) -> None:
        if not _beam_thread(args):
            self.previous(args)

    def filter(self, record: logging.LogRecord) -> bool:
        return not _broken_channel(record)


def _quiet_after_interrupt() -> None:
    """Keep Beam's broken channels quiet from now on (once: the process is stopping)."""
    if isinstance(getattr(threading.excepthook, "__self__", None), _Interrupted):
        return
    quiet = _Interrupted(threading.excepthook)
    threading.excepthook = quiet.hook
    for logger in _watched_loggers():
        logger.addFilter(quiet)


@contextlib.contextmanager
def frozen_heap():
    """While a run lasts, the objects that exist when it starts (the imports: ~140,000)
    are left out of Python's full garbage collections, which pass 1's allocations
    trigger every few hundred milliseconds: each walked them all (65 ms, 5% of an
    in-process pass 1). They come back to the collector after the run. A freeze someone
    else made is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_PAUSE = threading.Lock()
_paused = {"count": 0, "was_enabled": True}


@contextlib.contextmanager
def paused_gc():
    """No cyclic garbage collection while pass 1 works on a unit: its records are acyclic
    dicts and lists, thousands of containers each, and the collections their allocations
    trigger only walk them again and again (a unit's first pass: 0.45 -> 0.37 s for 800
    records, a 1% increment's whole pass 1; afterwards ~4%). Cycles made meanwhile are
    collected after. Overlapping pauses (threads of one worker) keep it off until the
    last ends; a collector someone else disabled stays disabled."""
    with _PAUSE:
        if not _paused["count"]:
            _paused["was_enabled"] = gc.isenabled()
            gc.disable()
        _paused["count"] += 1
    try:
        yield
    finally:
        with _PAUSE:
            _paused["count"] -= 1
            if not _paused["count"] and _paused["was_enabled"]:
                gc.enable()


class _BoundServer:
    """A gRPC server whose ports bind `host` where Beam asks for every interface."""

    def __init__(self, server, host: str):
        self._server, self._host = server, host

    def __getattr__(self, name: str):
        return getattr(self._server, name)

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(address.replace("[::]:", f"{self._host}:", 1))


class BoundGrpc:
    """The `grpc` module as a Beam module sees it when its servers must bind `host`
    (loopback by default) instead of every interface."""

    def __init__(self, real, host: str = LOOPBACK):
        self._real, self._host = real, host

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def server(self, *args, **kwargs) -> _BoundServer:
        return _BoundServer(self._real.server(*args, **kwargs), self._host)


class KeepaliveGrpc:
    """The `grpc` module as a Beam module sees it when its servers must ping a
    connection silent for `seconds` and drop it when the ping is not answered within
    `seconds` (`WORKER_KEEPALIVE`)."""

    def __init__(self, real, seconds: float):
        self._real, self._ms = real, max(1, int(seconds * 1000))

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def server(self, *args, options=(), **kwargs):
        pings = [
            ("grpc.keepalive_time_ms", self._ms),
            ("grpc.keepalive_timeout_ms", self._ms),
            ("grpc.http2.ping_timeout_ms", self._ms),  # else a minute (gRPC 1.85)
            ("grpc.keepalive_permit_without_calls", 1),
        ]
        return self._real.server(*args, options=[*(options or ()), *pings], **kwargs)


@contextlib.contextmanager
def _loopback_servers():
    from apache_beam.runners.portability import local_job_service

    modules = (worker_handlers, local_job_service)  # the runner's servers, each worker's log
    real = [m.grpc for m in modules]
    for m, g in zip(modules, real, strict=True):
        m.grpc = BoundGrpc(g)
    try:
        yield
    finally:
        for m, g in zip(modules, real, strict=True):
            m.grpc = g


LANES_FLAG = "worker_lanes"
"""`LaneOptions`' flag: `--worker_lanes=N`."""


class LaneOptions(PipelineOptions):
    """`--worker_lanes=N`: the local runner runs the pipeline in this process and
    hands the passes' work (`work_lanes`) to N processes forked from it (`process`
    sets it where it may fork: `process.pipeline_options`)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument(
            f"--{LANES_FLAG}",
            type=int,
            default=0,
            help="processes forked from the local runner's that do the passes' work",
        )


_ACTIVE: list[list] = []
"""The fork lanes of the local run in progress here (`work_lanes`)."""


def work_lanes() -> list | None:
    """The worker lanes (`forkpool.fork_lanes`) of the local run in progress in this
    process, or None: a stage's work is then done where the stage runs (in-process, a
    Beam worker, a portable runner's SDK worker)."""
    return _ACTIVE[-1] if _ACTIVE else None


def lane_result(work):
    """A lane task's result (`forkpool.result_of`: a worker that died is found)."""
    return forkpool.result_of(work_lanes(), work)


_AHEAD: dict[tuple[int, Any], tuple[list[tuple], list]] = {}
"""(lanes, the calls' function) -> calls handed to the lanes before the pipeline was
built, and their tasks (`LocalRunner.submit_ahead`)."""


def _dealt(lanes: list, calls: list[tuple]) -> list:
    """A task per call, the calls dealt to the lanes in turn (the order `units.deal`
    made for that)."""
    return [forkpool.submit(lanes[k % len(lanes)], *call) for k, call in enumerate(calls)]


def lane_tasks(calls: list[tuple]) -> list:
    """The tasks of a stage's `calls` in the active lanes: those submitted ahead when
    they are the same calls, else new ones (`_dealt`)."""
    lanes = work_lanes()
    ahead = _AHEAD.pop((id(lanes), calls[0][0]), None)
    if ahead is not None and ahead[0] == calls:
        return ahead[1]
    for task in ahead[1] if ahead is not None else ():  # not the calls the stage has
        task.cancel()
    return _dealt(lanes, calls)


class LocalRunner(fn_runner.FnApiRunner):
    """FnApiRunner whose worker processes start through `WORKER_MODULE`, or which runs
    the pipeline in this process with lanes of forked workers (`LaneOptions`).

    Why the lanes: Beam's own worker processes cost a run ~0.15 s more than the same
    pipeline in-process (gRPC servers, each worker's harness and first bundle, a fan-out
    at every stage, stopping them), a fixed cost that made a 5k-trajectory run ~25%
    dearer per trajectory than an 80k one. Only pass 1 and pass 2 do enough work per
    element to be worth spreading; the dedup stages between them run here."""

    def __init__(self, options: PipelineOptions):
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        # what the DirectRunner hands the FnApiRunner: the options the workers read
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        super().__init__(provision_info=fn_runner.ExtendedProvisionInfo(info))
        tune_beam()  # construction, and the bundles run here when there are no workers
        direct = options.view_as(DirectOptions)
        n = direct.direct_num_workers if direct.direct_running_mode == "multi_processing" else 0
        self._token = uuid.uuid4().hex
        if n > 1:
            _STANDBYS[self._token] = _Standbys(n)
        pooled = options.view_as(LaneOptions).worker_lanes
        self._lanes = forkpool.fork_lanes(pooled, warm=sdk_worker.warm_work)  # before the fork
        self._exiting: list = []

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(failed=kind is not None)

    def close(self, failed: bool = False) -> None:
        """Stop the standby workers the run did not use, and the lanes' workers: at once
        when the run `failed` (or was stopped) before its pipeline ran, when the lanes
        may be in the middle of units submitted ahead; once the pipeline ran they were
        released (`forkpool.release`) and are waited for here."""
        standbys = _STANDBYS.pop(self._token, None)
        if standbys:
            standbys.close()
        lanes, self._lanes = self._lanes, None
        for key in [k for k in _AHEAD if lanes and k[0] == id(lanes)]:
            del _AHEAD[key]
        if lanes and failed:
            forkpool.stop_workers(lanes)
        for lane in lanes or ():
            lane.shutdown(cancel_futures=True)
        forkpool.await_released(self._exiting)

    def submit_ahead(self, calls: list[tuple]) -> None:
        """Start a laned stage's calls (`transforms._OnLanes`) now, while the pipeline
        is built and translated (~0.1 s of this process): the stage takes their tasks
        when it asks for the same calls (`lane_tasks`). Without lanes, nothing."""
        if self._lanes is not None and calls:
            _AHEAD[(id(self._lanes), calls[0][0])] = (calls, _dealt(self._lanes, calls))

    def run_pipeline(self, pipeline, options):
        lanes = self._lanes
        _ACTIVE.extend([lanes] if lanes else [])
        with _loopback_servers(), _WorkerWatch() as watch, frozen_heap():
            try:
                result = super().run_pipeline(pipeline, options)
                if lanes is not None:  # done with: they exit while the run writes its tables
                    self._exiting = forkpool.release(lanes)
                return result
            except BaseException as exc:
                died = forkpool.dead_worker(lanes) if lanes else None
                if lanes is not None:  # a failed or stopped run: its tasks are not wanted
                    forkpool.stop_workers(lanes)
                codes = watch.codes or ([died] if died is not None else [])
                if not isinstance(exc, Exception) or not (codes or broken_pool(exc)):
                    raise
                how = how_it_died(codes[0]) if codes else LANE_GONE
                raise WorkerLost(
                    f"a pipeline worker process {how}; the run "
                    "failed and published nothing (the processed tables are as they were)"
                ) from exc
            finally:
                if lanes is not None:
                    _ACTIVE.remove(lanes)

    def run_via_runner_api(self, pipeline_proto, options):
        # `exec`: Beam starts the command through a shell; the worker takes the shell's
        # pid, so the runner's wait and kill reach the worker itself
        command = f"exec {sys.executable} -m {WORKER_MODULE} {RUNNER_PID}={os.getpid()}"
        payload = json.dumps({"command": command, "standbys": self._token}).encode()
        for env in pipeline_proto.components.environments.values():
            if env.urn == python_urns.SUBPROCESS_SDK:
                env.urn, env.payload = WORKER_URN, payload
        return super().run_via_runner_api(pipeline_proto, options)


# The portable runner with an embedded job service (`--runner PortableRunner
# --job_endpoint=embed`): the job runs in this process, its SDK workers elsewhere
# (worker pools: `worker_pool`, `--environment_type=EXTERNAL`).

WORKER_START_TIMEOUT = 60.0
"""Seconds a worker a pool started has to connect to the run (`--worker_start_timeout`).
Nothing else tells the run that a worker died while starting: a pool's API starts and
stops workers and says nothing of them after, so Beam waited for its first answer for
ever. One connects ~2-3 s after the pool starts it here (a new interpreter importing
Beam: 2 cores, 12-05); 60 s covers a loaded host ten times over."""
WORKER_KEEPALIVE = 20.0
"""Seconds of silence on a worker's connection after which the run pings it, and then
waits for the answer (`--worker_keepalive`): a worker that does not answer is lost. A
live worker's gRPC answers within milliseconds whatever its bundle does (its own
threads answer); a stopped process (SIGSTOP) or a host gone without closing its
connections (power, network) never does, and its connection looked open for ever (the
kernel's TCP keepalive gives up after ~2 h). 20 s is Beam's own client keepalive."""
STOP_TIMEOUT = 30.0
"""Seconds a stopped run waits for a pool to end a worker (`StopWorker`: Beam's pool
sends SIGTERM and waits up to 10 s before SIGKILL), and then for the job to end."""
WATCHED_URN = "worldtrace:env:external_watched:v1"
"""The environment of an embedded job's external workers (`_ExternalWorker`): Beam's
external environment, its payload wrapped with the job it belongs to."""

_EMBEDDED_JOBS: dict[str, Any] = {}
"""Job id -> the embedded job it names (`_job_class`; its workers' handlers find it
so)."""


class WorkerOptions(PipelineOptions):
    """On a portable runner with an embedded job service: `--worker_start_timeout=S`
    (`WORKER_START_TIMEOUT`), how long a worker a pool started has to connect, and
    `--worker_keepalive=S` (`WORKER_KEEPALIVE`), how long its connection may stay
    silent before it is pinged, and the ping unanswered."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument(
            "--worker_start_timeout",
            type=float,
            default=WORKER_START_TIMEOUT,
            help="seconds an SDK worker a pool started has to connect to the run "
            "(PortableRunner --job_endpoint=embed); then the run fails",
        )
        parser.add_argument(
            "--worker_keepalive",
            type=float,
            default=WORKER_KEEPALIVE,
            help="seconds of silence after which the run pings an SDK worker's "
            "connection, and waits for the answer (PortableRunner --job_endpoint=embed); "
            "a worker that does not answer fails the run",
        )


class _Stopped(Exception):
    """What a stopped run's job meets where it waits for its workers."""


Control = worker_handlers.BeamFnControlServicer


def _lost(what: str) -> WorkerLost:
    return WorkerLost(
        f"a pipeline worker {what}; the run failed and published nothing (the processed "
        "tables are as they were)"
    )


@worker_handlers.WorkerHandler.register_environment(WATCHED_URN, bytes)
class _ExternalWorker(worker_handlers.ExternalWorkerHandler):
    """Beam's handler of a worker a pool starts (`--environment_type=EXTERNAL`), plus:
    a worker that does not connect within `--worker_start_timeout`, or whose control
    stream breaks or ends before the run told it to stop, fails the run with
    `WorkerLost` (what waits for its answers or its data is aborted). Beam's handler
    waited for its first answer for ever, and printed the tracebacks of every thread
    whose channel broke. A stopped run (`stop`) aborts those waits too and has the pool
    end the worker (`StopWorker`, which returns once the process has ended), so no
    bundle of the run goes on writing after it; at the end of a run the pool is told
    the same, which reaps the worker (Beam never told it: pools kept a zombie each)."""

    def __init__(self, payload: bytes, state, provision_info, grpc_server):
        from apache_beam.portability.api import beam_runner_api_pb2

        spec = json.loads(payload)
        external = beam_runner_api_pb2.ExternalPayload.FromString(bytes.fromhex(spec["external"]))
        super().__init__(external, state, provision_info, grpc_server)
        self._pool = external.endpoint.url
        self._timeout = float(spec["timeout"])
        self._job = _EMBEDDED_JOBS.get(spec["job"])
        self._ended: BaseException | None = None  # lost or stopped: no more waits
        self._closing = False
        self._pool_told = False
        self._connected = threading.Event()
        self._settled = threading.Event()  # connected, or closed before it did
        conn = self.control_conn
        self._beam_push, self._beam_set_input = conn.push, conn.set_input
        conn.push, conn.set_input = self._push, self._set_input
        # ours: a broken stream is said once, as WorkerLost, not as a thread's traceback;
        # a daemon, which the interpreter's exit does not wait for
        conn._read_thread = threading.Thread(name="beam_control_read", target=self._read)
        conn._read_thread.daemon = True
        if self._job is not None:
            self._job.workers.append(self)

    def start_worker(self) -> None:
        import grpc

        if self._job is not None and self._job.stopping:  # a worker for a stopped run
            self._abort(_Stopped("the run was stopped"))
            raise self._ended
        try:
            super().start_worker()
        except grpc.RpcError as exc:
            why = exc.details() if hasattr(exc, "details") else exc  # type: ignore[union-attr]
            raise self._lose(
                f"could not be started: the worker pool at {self._pool} did not answer ({why})"
            ) from None
        watch = threading.Thread(target=self._await_connection, name="worker_connect")
        watch.daemon = True
        watch.start()

    def _await_connection(self) -> None:
        self._settled.wait(self._timeout)
        if not self._connected.is_set() and not self._closing:
            self._lose(
                f"that the worker pool at {self._pool} started did not connect within "
                f"{self._timeout:g} s (it died while starting, or cannot reach this host; "
                "--worker_start_timeout sets the wait)"
            )

    def _set_input(self, stream) -> None:
        self._beam_set_input(stream)  # starts the read thread
        self._connected.set()
        self._settled.set()

    def _read(self) -> None:
        try:
            self.control_conn._read()
        except Exception:  # grpc.RpcError: the stream broke (the worker's end closed)
            self._lose(self._gone())
            return
        if not self._closing:  # a worker killed outright may end its stream cleanly
            self._lose(self._gone())

    def _gone(self) -> str:
        return (
            f"that the worker pool at {self._pool} started lost its connection to the run "
            "before the run was over (the worker died or stopped answering: a crash, the "
            "out-of-memory killer (`dmesg` on its host), or its host or network gone)"
        )

    def _push(self, request):
        """Beam's `push`, refused at once once the worker is lost or the run stopped:
        a request nobody will answer would be waited for for ever."""
        if self._ended is not None and request is not Control._DONE_MARKER:
            future = worker_handlers.ControlFuture(request.instruction_id or "refused")
            future.abort(self._ended)
            return future
        return self._beam_push(request)

    def _abort(self, exc: BaseException) -> None:
        """Every wait on the worker ends with `exc`: its answers, and its data (the
        runner polls the channel's exception every second)."""
        self._ended = self._ended or exc
        self.control_conn.abort(exc)
        self.data_conn._exception = exc

    def _lose(self, what: str) -> WorkerLost:
        lost = _lost(what)
        if self._ended is None:  # the first word stands; a stopped run's breakage is ours
            if self._job is not None:
                self._job.lost.append(lost)
            self._abort(lost)
        return lost

    def settle(self, timeout: float) -> None:
        """Wait (at most `timeout` s) until a broken control stream has been said: the
        data stream of a dead worker can break a moment before its control stream."""
        thread = self.control_conn._read_thread
        if thread.is_alive():
            thread.join(timeout)

    def stop(self, why: BaseException) -> None:
        """The run stopped: end every wait on the worker and have its pool end it."""
        self._abort(why)
        self._tell_pool()

    def _tell_pool(self) -> bool:
        """`StopWorker`: the pool ends the worker's process (it returns once it has
        ended) and forgets it. Whether the pool answered."""
        import grpc
        from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
        from apache_beam.runners.worker.channel_factory import GRPCChannelFactory

        if self._pool_told:
            return True
        channel = GRPCChannelFactory.insecure_channel(self._pool)
        try:
            stub = beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)
            request = beam_fn_api_pb2.StopWorkerRequest(worker_id=self.worker_id)
            stub.StopWorker(request, timeout=STOP_TIMEOUT)
            self._pool_told = True
        except grpc.RpcError:
            return False
        finally:
            channel.close()
        return True

    def stop_worker(self) -> None:
        self._tell_pool()

    def close(self) -> None:
        self._closing = True
        self._settled.set()
        try:
            super().close()  # raises a lost worker's error: Beam then skips `stop_worker`
        finally:
            self._tell_pool()


@functools.cache
def _job_class() -> type:
    """The job of `EmbeddedJobRunner`'s job service (Beam's job service module is
    imported only for such a run)."""
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_job_api_pb2
    from apache_beam.runners.portability import local_job_service

    class EmbeddedJob(local_job_service.BeamJob):
        """Beam's job of the embedded job service, plus: its thread is a daemon (Beam's
        kept the interpreter from exiting after Ctrl-C while it waited for a worker),
        its external workers are watched (`_ExternalWorker`), and `cancel` stops it:
        Beam's only set the state ("TODO: Actually cancel"), and the job went on
        dispatching bundles to its workers, which wrote into the run directory after
        the command had removed it and exited."""

        def __init__(self, *args):
            super().__init__(*args)
            self.workers: list[_ExternalWorker] = []
            self.lost: list[WorkerLost] = []
            self.stopping = False
            self._run_thread: threading.Thread | None = None
            _EMBEDDED_JOBS[self._job_id] = self

        def run(self) -> None:
            self.set_state(beam_job_api_pb2.JobState.STARTING)
            self._run_thread = threading.Thread(target=self._run_job, name="beam_job")
            self._run_thread.daemon = True
            self._run_thread.start()

        def _invoke_runner(self):
            options = self.pipeline_options().view_as(WorkerOptions)
            timeout = options.worker_start_timeout
            for env in self._pipeline_proto.components.environments.values():
                if env.urn == common_urns.environments.EXTERNAL.urn:
                    spec = {"external": env.payload.hex(), "job": self._job_id, "timeout": timeout}
                    env.urn, env.payload = WATCHED_URN, json.dumps(spec).encode()
            real = worker_handlers.grpc  # the runner's servers ping silent workers
            worker_handlers.grpc = KeepaliveGrpc(real, options.worker_keepalive)
            try:
                return super()._invoke_runner()
            finally:
                worker_handlers.grpc = real

        def stop(self) -> None:
            """End the run unless it has ended: every wait on a worker is aborted, each
            worker's pool ends it (no worker starts from now on); then the job's thread,
            which closes the workers, is waited for (once, at most `STOP_TIMEOUT`)."""
            if self.stopping:
                return
            self.stopping = True
            if not self.is_terminal_state(self.state):
                for worker in list(self.workers):
                    worker.stop(_Stopped("the run was stopped"))
            if self._run_thread is not None:
                self._run_thread.join(STOP_TIMEOUT)

        def cancel(self):
            self.stop()
            return super().cancel()

    return EmbeddedJob


def embedded(options: PipelineOptions) -> bool:
    """Whether a run's options ask for Beam's portable runner with a job service in this
    process (`--runner PortableRunner --job_endpoint=embed`)."""
    from apache_beam.options.pipeline_options import PortableOptions

    runner = options.view_as(StandardOptions).runner
    return runner == "PortableRunner" and options.view_as(PortableOptions).job_endpoint == "embed"


class _WatchedResult:
    """A portable run's result whose failure, when a worker was lost, is that
    `WorkerLost` (one line) instead of the job's traceback text."""

    def __init__(self, result, runner: EmbeddedJobRunner):
        self._result, self._runner = result, runner

    def __getattr__(self, name: str):
        return getattr(self._result, name)

    def wait_until_finish(self, duration=None):
        try:
            return self._result.wait_until_finish(duration)
        except Exception:
            lost = self._runner.lost(settle=sdk_worker.GRACE)
            if lost is not None:
                raise lost from None
            raise

    def cancel(self) -> None:
        self._runner.stop()


@functools.cache
def _runner_class() -> type:
    """Beam's PortableRunner whose embedded job service runs `_job_class` jobs."""
    from apache_beam.runners.portability import local_job_service
    from apache_beam.runners.portability.portable_runner import PortableRunner

    class Runner(PortableRunner):
        """Beam's PortableRunner whose embedded job service runs `_job_class` jobs."""

        def __init__(self, owner: EmbeddedJobRunner):
            super().__init__()
            self.owner = owner
            self.jobs: list = []
            self.servicers: list = []

        def _new_job(self, *args):
            job = _job_class()(*args)
            self.jobs.append(job)
            return job

        def create_job_service(self, options):
            servicer = local_job_service.LocalJobServicer(beam_job_type=self._new_job)
            self.servicers.append(servicer)
            return self.create_job_service_handle(servicer, options)

        def run_portable_pipeline(self, pipeline, options):
            return _WatchedResult(super().run_portable_pipeline(pipeline, options), self.owner)

    return Runner


class EmbeddedJobRunner:
    """`--runner PortableRunner --job_endpoint=embed`, run so that a worker that dies
    or never connects fails the run in one line (`_ExternalWorker`, `WorkerLost`), and
    a stopped run (Ctrl-C, SIGTERM, a failure) ends: its workers are ended and its job
    waited for before the run directory is removed, and nothing of it keeps the
    process alive. A context manager around the pipeline's construction and run, as
    `LocalRunner` is; `beam.Pipeline(runner=...)` takes `.beam`."""

    def __init__(self):
        self.beam = _runner_class()(self)
        self._watch = _WorkerWatch()

    def __enter__(self) -> EmbeddedJobRunner:
        self._watch.__enter__()
        return self

    def __exit__(self, kind, *exc) -> None:
        try:
            self.stop()
        finally:
            self._watch.lost.extend(self.lost_all())
            self._watch.__exit__(kind, *exc)
            for servicer in self.beam.servicers:  # Beam's embedded service left them in /tmp
                if getattr(servicer, "_cleanup_staging_dir", False):
                    shutil.rmtree(servicer._staging_dir, ignore_errors=True)
            for job in self.beam.jobs:
                _EMBEDDED_JOBS.pop(job._job_id, None)

    def stop(self) -> None:
        """Stop the jobs still running (their workers ended, their threads waited for)."""
        for job in self.beam.jobs:
            job.stop()

    def lost_all(self) -> list[WorkerLost]:
        return [lost for job in self.beam.jobs for lost in job.lost]

    def lost(self, settle: float = 0) -> WorkerLost | None:
        """The first worker lost (after giving broken streams `settle` s to be said)."""
        for job in self.beam.jobs:
            for worker in job.workers:
                worker.settle(settle)
        found = self.lost_all()
        return found[0] if found else None
