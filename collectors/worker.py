"""The worker: claims attempts from a job store, runs them, publishes each once.

Per attempt: claim (lease token) -> run the episode (sandbox creation included: a
sandbox that cannot start fails the attempt with the reason) -> `finish` in the store,
which succeeds only while the lease is ours -> publish the journal as
`raw/collect/<job>/<episode>-a<attempt>.parquet` -> remove the journal. Finishing before
publishing means a worker that lost its lease never publishes; a crash between the two
leaves a journal of a finished attempt, which the next worker publishes (the file name
is the idempotent key). A heartbeat thread renews the leases, stops episodes whose lease
was lost, ends attempts of workers that died (lease expired, or their process is gone
from this host) with the journal they left, and removes containers of dead workers.
A stop request (SIGTERM/SIGINT in the CLI) interrupts episodes between two steps and
gives them back to the queue; their sandboxes and containers are closed. A second one
exits at once: the attempts still running are ended as lost and queued again, and none
of them is finished or published afterwards (the exit removes their containers, which
their steps would otherwise record as the environment failing).
A journal line that cannot be written (a full disk) stops the worker: the attempt ends
as lost (no retry used) with its journal kept, which the next worker publishes as it
stands before it runs the episode again, as `collect --resume` does.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field
from worldtrace.sandboxes.base import SandboxConfigError
from worldtrace.schemas.parsing import ConfigError, configclass, parse
from worldtrace.schemas.tempfiles import StoreWriteError

from . import ending
from .episode import Interrupted, attempt_episode, failure_reason, retriable
from .jobs import (
    JOURNALS,
    EventHook,
    Unavailable,
    build_sandbox,
    journal_path,
    parse_attempt_name,
    trajectory_path,
)
from .jobspec import JobSpec
from .jobstore import (
    FINAL,
    JOB_CANCELLED,
    LOST_LAST,
    LOST_PREFIX,
    Claim,
    Expired,
    JobStore,
    Lease,
)
from .owners import alive, set_owner, sweep_orphans, this_process
from .recorder import JOURNAL_SUFFIX, JournalError, publish, set_aside

ABANDONED = "the worker was stopped at once (a second stop signal)"
"""Why the attempts running when a worker exits at once are lost (not failed)."""
JOURNAL_KEPT = "its journal is kept: the next worker publishes it as it stands"
"""How the error of an attempt ended by a journal line its worker could not write (a full
disk) ends, after `worker lost: cannot write PATH: REASON; `: the one lost attempt whose
journal `_sweep_journals` publishes (as `incomplete`) instead of discarding it."""
EMPTY_JOURNAL = "its journal, empty, is removed"
"""Said instead of `JOURNAL_KEPT` when not even the journal's first line was written."""
SIGNAL_WAKE = 0.25
"""Seconds between the main thread's looks while the slots run. The kernel may hand a
process's SIGTERM to any of its threads, and Python runs the handler only when the main
thread runs Python code: blocked in an untimed join, it ran the queue dry first."""


MAX_LEASE = 86400.0
"""The longest `--lease` (and `--heartbeat`): a day. A lease is how long other workers wait
before they take over the attempts of a worker that died on another host, so a longer one
only holds its episodes that long; and the heartbeat thread waits a quarter of it, which an
infinite or huge lease (`inf`, `1e12`) overflowed: that thread died and the worker ran on
without heartbeats (no lease renewed, no dead worker's attempt ended)."""
MAX_CONCURRENCY = 256
"""The most attempts one worker runs at once (`--concurrency`); more hosts or workers
scale further."""
MAX_POLL = 3600.0
"""The longest `--poll`: a slot waits that long between looks at the queue (an infinite
wait overflowed as the heartbeat's did)."""


class _SlotFailed(Exception):
    """A slot ends after a failure of ours (already recorded with its attempt)."""


@configclass
class WorkerConfig:
    """How a worker runs."""

    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 1
    """Attempts run at once, each in its own thread with its own sandboxes (at most 256)."""
    lease: Annotated[float, Field(gt=0, le=MAX_LEASE, allow_inf_nan=False)] = 120.0
    """Seconds a claim stays valid without a heartbeat; after that (or as soon as its
    process is gone from this host) another worker ends the attempt as lost. At most
    86400 (a day)."""
    heartbeat: Annotated[float, Field(gt=0, le=MAX_LEASE, allow_inf_nan=False)] | None = None
    """Seconds between heartbeats (leases renewed, lost attempts requeued, containers of
    dead workers removed); default a quarter of the lease. Shorter than the lease."""
    poll: Annotated[float, Field(gt=0, le=MAX_POLL, allow_inf_nan=False)] = 2.0
    """Seconds between polls of the job store while nothing is claimable (at most 3600)."""
    forever: bool = False
    """Keep polling when the queue is empty (else exit once nothing is queued or running)."""


@dataclass
class WorkerStats:
    run: int = 0
    """Attempts run to their end and finished in the job store (published, or their
    journal kept for the next worker when their file could not be written)."""
    failed: int = 0
    """Of those, attempts that ended in an error."""
    released: int = 0
    lost: int = 0
    """Attempts ended as lost: their lease was taken over (their results discarded), or
    a journal line could not be written (their journal kept; `_unwritten`)."""
    errors: list[str] = field(default_factory=list)
    """Failures of the worker itself (each ended its claim with the reason)."""


class Worker:
    def __init__(
        self,
        store: JobStore,
        raw_dir: str | Path,
        config: WorkerConfig | None = None,
        on_event: EventHook | None = None,
    ):
        """`raw_dir`: the raw/ of the store the worker publishes into (its parent is that
        store, which no job's host path may overlap: `JobSpec.check_overlap`)."""
        self.store = store
        self.raw_dir = Path(raw_dir)
        # checked again: a config built in Python skips the CLI's parse, and an infinite
        # lease or poll would overflow the waits of the heartbeat and the slots (ConfigError)
        self.config = parse(WorkerConfig, asdict(config)) if config else WorkerConfig()
        self.owner = this_process(f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.name = self.owner.worker
        self.stats = WorkerStats()
        self._emit = on_event or (lambda event, **info: None)
        self._stop = threading.Event()
        self._held: dict[str, tuple[Claim, threading.Event]] = {}
        self._lost: set[str] = set()
        self._lock = threading.Lock()
        self._ending = threading.Lock()
        """Held while an attempt is finished, and while `_abandon` marks the worker abandoned."""
        self._abandoned = False
        self._changed = threading.Condition()

    # -- lifecycle ------------------------------------------------------------------
    def run(self) -> WorkerStats:
        """Run until the queue is drained (or `stop()`; with `forever`, only `stop()`)."""
        o = self.owner
        self.store.register_worker(self.name, o.host, o.pid, o.start, self.config.lease)
        set_owner(self.name)
        self._emit("worker", worker=self.name, concurrency=self.config.concurrency)
        self._maintain()
        done = threading.Event()
        beat = threading.Thread(target=self._beat_loop, args=(done,), daemon=True)
        beat.start()
        slots = [
            threading.Thread(target=self._slot, name=f"slot-{i}", daemon=True)
            for i in range(self.config.concurrency)
        ]
        for t in slots:
            t.start()
        try:
            for t in slots:
                while t.is_alive():
                    t.join(SIGNAL_WAKE)
        except BaseException:  # a second signal (SystemExit): the process exits at once
            self._abandon()
            raise
        done.set()
        beat.join()
        self.store.worker_stopped(self.name, "failed" if self.stats.errors else "stopped")
        return self.stats

    def stop(self) -> None:
        """Interrupt running episodes between steps and give them back to the queue."""
        self._stop.set()
        with self._lock:
            for _, ctl in self._held.values():
                ctl.set()
        with self._changed:
            self._changed.notify_all()

    def _abandon(self) -> None:
        """The process exits now while episodes may still step: no attempt of ours is
        finished or published from here on (the exit's container removal makes their
        steps fail: our shutdown, not the environment's answer). The running ones end as
        lost and are queued again at once, under a new attempt number, whose journal no
        thread of ours can reach; a store that does not answer leaves that to the next
        worker (this process is gone). The slots claim nothing more: a second signal may
        come before the first one's `stop()`, and a slot would then claim the attempts
        requeued here and start their containers while the process exits."""
        self._stop.set()
        with self._ending:
            self._abandoned = True
        with self._lock:
            held = [claim for claim, _ in self._held.values()]
        for c in held:
            try:
                ended = self.store.expire(self._lease(c), ABANDONED, only_if_expired=False)
                if ended:
                    journal_path(self.raw_dir, c.job_id, c.episode_id, c.attempt).unlink(
                        missing_ok=True
                    )
                    self._said_lost(ended, ABANDONED, claim=c)
            except Exception as exc:  # best effort: the next worker ends it as lost
                self._emit(
                    "warning", reason=f"cannot requeue {c.episode_id}: {failure_reason(exc)}"
                )
        try:
            self.store.worker_stopped(self.name, "stopped")
        except Exception as exc:  # the store is unreachable: our lease simply lapses
            self._emit("warning", reason=f"cannot record the stop: {failure_reason(exc)}")

    # -- slots ----------------------------------------------------------------------
    def _slot(self) -> None:
        sandboxes: dict[str, Any] = {}
        try:
            while not self._stop.is_set():
                claim = self.store.claim(self.name, self.config.lease)
                if claim is None:
                    if not self.config.forever and not any(self.store.pending().values()):
                        return
                    with self._changed:  # woken when one of our slots ends an attempt
                        self._changed.wait(self.config.poll)
                    continue
                self._run(claim, sandboxes)
                with self._changed:
                    self._changed.notify_all()
        except _SlotFailed:
            pass  # recorded with its attempt
        except Exception as exc:  # the store or our own code failed: this slot ends
            reason = failure_reason(exc)
            self.stats.errors.append(reason)
            self._emit("error", reason=reason)
        finally:
            for s in sandboxes.values():
                s.close()

    def _run(self, claim: Claim, sandboxes: dict[str, Any]) -> None:
        ctl = threading.Event()
        with self._lock:
            self._held[claim.token] = (claim, ctl)
            if self._stop.is_set():
                ctl.set()
        journal = journal_path(self.raw_dir, claim.job_id, claim.episode_id, claim.attempt)
        started = time.monotonic()
        self._emit("started", claim=claim)
        retries = 0
        try:
            try:
                spec = JobSpec.from_dict(json.loads(claim.spec_json))
                spec.check_overlap(self.raw_dir.parent)  # our store, not the submitter's
            except ConfigError as exc:
                if any(pr.path[-1:] == ("kind",) for pr in exc.problems):
                    raise  # a kind this worker's install lacks: its failure (exit 1)
                self._unfit(claim, exc, started)  # the job's, here: the next one runs
                return
            retries = spec.retries
            episode = spec.episode(claim.episode_id)
            sandbox = sandboxes.get(claim.job_id)
            if sandbox is None:
                sandbox = build_sandbox(spec)
                if not isinstance(sandbox, Unavailable):
                    sandboxes[claim.job_id] = sandbox
            try:
                t = attempt_episode(
                    spec, episode, sandbox, journal.parent, claim.job_id, claim.attempt,
                    self.raw_dir, ctl,
                )  # fmt: skip
            except Interrupted:
                self._give_back(claim, journal)
                return
            except StoreWriteError as exc:  # a journal line: the disk is full, not the episode
                self._unwritten(claim, journal, exc)
                raise _SlotFailed from exc
            failed = t.outcome.status == "error"
            status = "failed" if failed else "succeeded"
            if failed and not retriable(t):  # a configuration mistake: none would mend it
                retries = 0
            why = ending(t.outcome.status, t.outcome.error)
            with self._ending:
                if self._abandoned:  # the process is exiting: this result may be our doing
                    return
                ended = self.store.finish(claim, status, t.trajectory_id, why, retries)
            if not ended:
                self._discard(claim, journal)
                return
            dest = trajectory_path(self.raw_dir, claim.job_id, claim.episode_id, claim.attempt)
            self.stats.run += 1  # finished: counted, published or not
            self.stats.failed += failed
            try:
                publish(journal, dest)
            except Exception as exc:  # finished, not published: the journal is its record
                self._unpublished(claim, journal, dest, exc)
                raise _SlotFailed from exc
            self._emit(
                "finished", claim=claim, status=status, turns=len(t.turns),
                seconds=time.monotonic() - started, error=why,
            )  # fmt: skip
        except _SlotFailed:
            raise
        except Exception as exc:  # ours, outside the episode loop: the attempt fails with it
            if self._abandoned:  # the process exits at once: `_abandon` ended the attempt
                return
            if claim.token in self._lost or not self.store.renew([claim.token], self.config.lease):
                self._discard(claim, journal)
                return
            reason = f"worker error: {failure_reason(exc)}"
            with self._ending:
                if self._abandoned:
                    return
                self.store.finish(claim, "failed", None, reason, retries)
            journal.unlink(missing_ok=True)
            self.stats.errors.append(reason)
            self._emit("error", claim=claim, reason=reason)
            raise _SlotFailed from exc
        finally:
            with self._lock:
                self._held.pop(claim.token, None)

    def _unfit(self, claim: Claim, exc: ConfigError, started: float) -> None:
        """The attempt of a job that no longer holds on this host (its repository or its
        `workdir.copy` folder moved away since it was queued, or a host path overlaps
        this worker's store, which `jobs submit` against another store could not see:
        `JobSpec.check_overlap`) fails with the reason, not
        retried, as a sandbox that meets such a mistake at its reset does
        (`SandboxConfigError`: mcp's `env` unset, a `workdir.at` folder of the user's).
        A retry is queued first in line (an episode's next attempt keeps its place), so
        this very worker claimed it at once and failed it alike, whatever other host
        holds the folder: `retries` were spent in a second and the error did not say why
        none could help. The worker goes on with the queue."""
        reason = (
            f"{SandboxConfigError.__name__}: the job does not hold on this host "
            f"({self.owner.host}): {exc.one_line()}"
        )
        with self._ending:
            if self._abandoned:
                return
            ended = self.store.finish(claim, "failed", None, reason, 0)
        if not ended:
            self.stats.lost += 1
            self._emit("lost", claim=claim)
            return
        self.stats.run += 1
        self.stats.failed += 1
        self._emit(
            "finished", claim=claim, status="failed", turns=0,
            seconds=time.monotonic() - started, error=reason,
        )  # fmt: skip

    def _give_back(self, claim: Claim, journal: Path) -> None:
        if claim.token in self._lost:
            self._discard(claim, journal)
            return
        self.store.release(claim)
        journal.unlink(missing_ok=True)
        self.stats.released += 1
        self._emit("released", claim=claim)

    def _unpublished(self, claim: Claim, journal: Path, dest: Path, exc: Exception) -> None:
        """A finished attempt whose file could not be written (a full disk, a folder it
        may not write in): its journal is its only record, so it stays (set aside when
        unreadable), and the next worker publishes it once this one is gone
        (`_sweep_journals`). The slot ends with the error naming the file, as `collect`
        does. (It was taken for a lost lease: the attempt, already finished, no longer
        renewed, and its journal was deleted.)"""
        if isinstance(exc, JournalError):
            self._set_aside(journal, exc)
            kept = "its journal is set aside"
        else:
            kept = f"its journal {journal} is kept; the next worker publishes it"
        # a StoreWriteError names its file itself (`cannot write X: StoreWriteError:
        # cannot write X: No space left on device` said it twice): its reason only
        why = exc.reason if isinstance(exc, StoreWriteError) else failure_reason(exc)
        reason = f"cannot write {dest}: {why} ({kept})"
        self.stats.errors.append(reason)
        self._emit("error", claim=claim, reason=reason)

    def _unwritten(self, claim: Claim, journal: Path, exc: StoreWriteError) -> None:
        """A journal line could not be written (a full disk): the store's failure, not
        the environment's, as for `collect`, which stops there and keeps the journal for
        `--resume`. The worker stops (every other episode would fail alike; the running
        ones are given back) and the attempt ends as lost: no retry used, queued again
        under the next attempt number, its journal kept (`JOURNAL_KEPT`) for the next
        worker, which publishes it as it stands (`incomplete`) before it runs the episode
        again. (It failed as `worker error: StoreWriteError: ...`, which used a retry,
        and its journal, with the turns it held, was deleted.) One error line names the
        journal once."""
        self.stop()
        with self._ending:
            if self._abandoned:  # the process exits at once: `_abandon` ended the attempt
                return
            # a journal whose first line found no room holds nothing: no file is kept
            try:
                empty = journal.stat().st_size == 0
            except OSError:  # never opened
                empty = True
            kept = EMPTY_JOURNAL if empty else JOURNAL_KEPT
            try:
                ended = claim.token not in self._lost and self.store.expire(
                    self._lease(claim), f"{exc}; {kept}", only_if_expired=False
                )
            except Exception as err:  # the store does not answer: our lease will lapse
                then = (
                    f"the attempt could not be ended ({failure_reason(err)}): once its "
                    "lease lapses, the next worker runs it again"
                )
            else:
                if ended:
                    queued = f"queued again as a{claim.attempt + 1}" if ended.queued else ended.why
                    then = f"the attempt ends as lost (no retry used; {queued}) and {kept}"
                    if empty:
                        journal.unlink(missing_ok=True)
                else:  # another worker owns the episode now: our journal goes
                    journal.unlink(missing_ok=True)
                    then = "its lease was taken over: its result is discarded"
                self.stats.lost += 1
        reason = f"{exc}; the worker stops: {then}"
        self.stats.errors.append(reason)
        self._emit("error", claim=claim, reason=reason)

    def _discard(self, claim: Claim, journal: Path) -> None:
        """Our lease was lost: another worker owns the episode now; drop our result."""
        journal.unlink(missing_ok=True)
        self.stats.lost += 1
        self._emit("lost", claim=claim)

    # -- heartbeat and maintenance ---------------------------------------------------
    def _beat_loop(self, done: threading.Event) -> None:
        period = self.config.heartbeat or self.config.lease / 4
        while not done.wait(period):
            try:
                self._renew()
                self._maintain()
            except Exception as exc:  # the store is unreachable: leases may lapse, retry
                self._emit("warning", reason=f"heartbeat failed: {failure_reason(exc)}")

    def _renew(self) -> None:
        with self._lock:
            held = dict(self._held)
        if not held:
            return
        kept = self.store.renew(list(held), self.config.lease)
        for token in set(held) - kept:
            self._lost.add(token)
            held[token][1].set()  # stop the episode at its next step

    def _maintain(self) -> None:
        """End the attempts of dead workers, publish or drop the journals they left, and
        remove their containers (at start and every heartbeat)."""
        self.store.worker_beat(self.name)
        for lease in self.store.running():
            if lease.worker == self.name:
                continue
            reason = self._dead(lease)
            ended = reason and self.store.expire(lease, reason, only_if_expired=lease.expired)
            if ended:
                path = journal_path(self.raw_dir, lease.job_id, lease.episode_id, lease.attempt)
                path.unlink(missing_ok=True)  # a lost attempt's partial journal is discarded
                self._said_lost(ended, reason, lease=lease)
        live = self._live_workers()
        self._sweep_journals(live)
        try:
            removed = sweep_orphans(
                is_dead=lambda o: bool(o.get("worker")) and o["worker"] not in live
            )
        except Exception as exc:  # no docker engine on this host: nothing to sweep
            self._emit("warning", reason=f"container sweep skipped: {failure_reason(exc)}")
            return
        if removed:
            self._emit("swept", containers=removed)

    def _said_lost(self, ended: Expired, reason: str, **attempt: Any) -> None:
        """One line per lost attempt ended: `requeued`, or `ended` with why it is not
        queued again (lost `MAX_LOST` times, its job cancelled)."""
        if ended.queued:
            self._emit("requeued", reason=reason, **attempt)
        else:
            self._emit("ended", reason=f"{reason}; {ended.why}", **attempt)

    def _live_workers(self) -> set[str]:
        """Workers heart-beating within their own lease (ours for one that did not record
        it) whose process (on this host) runs."""
        return {
            w["worker"]
            for w in self.store.workers(self.config.lease)
            if not w["gone"]
            and (w["host"] != self.owner.host or alive(w["pid"], w["process_start"]))
        }

    def _dead(self, lease: Lease) -> str | None:
        if lease.expired:
            return f"the lease of {lease.worker} expired"
        if (
            lease.host == self.owner.host
            and lease.pid
            and not alive(lease.pid, lease.process_start)
        ):
            return f"process {lease.pid} of {lease.worker} on {lease.host} is gone"
        return None

    def _lease(self, claim: Claim) -> Lease:
        """This worker's lease of `claim`, as `JobStore.expire` ends it before it lapses."""
        return Lease(
            claim.job_id, claim.episode_id, claim.attempt, claim.token, self.name,
            False, None, None, None,
        )  # fmt: skip

    def _sweep_journals(self, live: set[str]) -> None:
        """Journals whose attempt ended while its worker is gone: publish them (a crash
        between finish and publish, or a journal line that could not be written:
        `JOURNAL_KEPT`) or drop them (lost otherwise, or failed without a trajectory).
        Journals of live workers and of queued attempts stay: their owner publishes, or
        the next claim starts them afresh."""
        for path in self.raw_dir.glob(f"collect/*/{JOURNALS}/*{JOURNAL_SUFFIX}"):
            job_id = path.parent.parent.name
            episode_id, attempt = parse_attempt_name(path.name)
            state = self.store.attempt_state(job_id, episode_id, attempt)
            if state is None or state["status"] not in FINAL or state["worker"] in live:
                continue  # a `collect` run's journal, or an attempt whose owner lives
            try:
                kept = state["lost"] and self._journal_kept(state)
                if not kept and (state["lost"] or not state["trajectory_id"]):
                    path.unlink(missing_ok=True)
                    continue
                dest = trajectory_path(self.raw_dir, job_id, episode_id, attempt)
                already = dest.exists()  # a crash after publishing, before the journal went
                publish(path, dest)
            except JournalError as exc:  # unreadable: kept aside, the queue goes on
                self._set_aside(path, exc)
                continue
            except OSError as exc:
                self._emit("warning", reason=f"{path}: {failure_reason(exc)}")
                continue
            self._emit(
                "recovered", job_id=job_id, episode_id=episode_id, attempt=attempt, already=already
            )

    @staticmethod
    def _journal_kept(state: dict) -> bool:
        """Whether the lost attempt (`attempt_state`) ended by a journal line its worker
        could not write (`_unwritten`): its journal is published as it stands, not
        discarded."""
        error = state.get("error") or ""
        for why in (LOST_LAST, JOB_CANCELLED):  # what `expire` says after the reason
            error = error.removesuffix(f"; {why}")
        return error.startswith(LOST_PREFIX) and error.endswith(JOURNAL_KEPT)

    def _set_aside(self, path: Path, exc: JournalError) -> None:
        """An unreadable journal of an ended attempt: renamed `<name>.bad` (never deleted:
        it may be the only record), one warning. Its attempt already ended in the store,
        with the status it had; `worldtrace doctor` lists the set-aside journals."""
        why = str(exc).removeprefix(f"{path}: ")
        try:
            dest = set_aside(path)
        except OSError as err:
            self._emit("warning", reason=f"{path}: {why}; not set aside: {failure_reason(err)}")
            return
        self._emit("warning", reason=f"{path}: {why}; set aside as {dest.name}")
