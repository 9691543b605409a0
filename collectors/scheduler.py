"""Scheduled jobs: `worldtrace scheduler` enqueues a run of each schedule when it is due.

`jobs submit` of a job file with `schedule: {cron: ...}` or `schedule: {every: ...}`
registers the schedule in the job store (keyed by the job's name; submitting again
replaces it, keeping its last run and, unchanged, its due time) instead of queueing a run. The first run of `every` is due at once, that
of `cron` at its next match (cron times are UTC). Each tick enqueues the runs that are
due and moves the schedule to its next time in the same transaction, guarded by the
old due time, so two schedulers never enqueue the same run twice.

Runs missed while no scheduler ran follow the schedule's `missed` policy: `one`
enqueues a single catch-up run however many were missed; `skip` enqueues only when the
latest due time is at most `grace` old, and otherwise waits for the next one. A run due
while the schedule's last run is still queued or running follows `overlap`: `skip` (the
default) enqueues none and tells `on_skip`, `queue` enqueues it. The clock is injectable
(`Clock`), so tests run schedules on a fake clock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Protocol

from pydantic import Field
from worldtrace.schemas.parsing import ConfigError, configclass, parse

from .jobspec import JobSpec, ScheduleSpec, parse_every
from .jobstore import JobStore
from .worker import SIGNAL_WAKE


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait up to `seconds` or until `stop` is set; True when stopped."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """In slices of at most `SIGNAL_WAKE` seconds: the kernel may hand the process's
        SIGTERM to another thread (a library's), and its handler, which sets `stop`, runs
        only when this (the main) thread runs Python code: a whole `poll` later."""
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            stop.wait(min(left, SIGNAL_WAKE))
        return True


@configclass
class SchedulerConfig:
    """How often the scheduler looks and how late a run may be."""

    poll: Annotated[float, Field(gt=0)] = 30.0
    """Longest sleep in seconds between two looks at the schedules (new ones appear then)."""
    grace: Annotated[float, Field(ge=0)] = 60.0
    """Seconds late a due run may still be enqueued under `missed: skip`."""


NEVER = datetime(9999, 1, 1, tzinfo=timezone.utc)
"""The next time of a cron expression that never matches (`0 0 31 2 *`): job files
with one are refused, but a stored schedule must not make the scheduler crash."""


def _cron_time(expr: str, t: datetime, prev: bool = False) -> datetime | None:
    """The cron's first time after `t` (last one before with `prev`); None if there is none."""
    from croniter import CroniterBadDateError, croniter

    it = croniter(expr, t.astimezone(timezone.utc))
    try:
        return it.get_prev(datetime) if prev else it.get_next(datetime)
    except CroniterBadDateError:
        return None


def next_after(schedule: ScheduleSpec, t: datetime) -> datetime:
    """The schedule's first time strictly after `t` (`NEVER` for a cron without one)."""
    if schedule.every is not None:
        return t + parse_every(schedule.every)
    assert schedule.cron is not None
    return _cron_time(schedule.cron, t) or NEVER


def first_due(schedule: ScheduleSpec, now: datetime) -> datetime:
    """When a newly registered schedule first runs."""
    return now if schedule.every is not None else next_after(schedule, now)


def latest_due(schedule: ScheduleSpec, due: datetime, now: datetime) -> datetime:
    """The last time of the schedule at or before `now`, from a due time `due <= now`."""
    if schedule.every is not None:
        step = parse_every(schedule.every)
        return due + step * ((now - due) // step)
    assert schedule.cron is not None
    prev = _cron_time(schedule.cron, now, prev=True)
    if prev is None:
        return due
    if next_after(schedule, prev) <= now:  # `now` itself is a match
        prev = next_after(schedule, prev)
    return max(prev, due)


def _said(exc: Exception) -> str:
    """An exception as one line (a ConfigError's problems joined)."""
    return exc.one_line() if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"


def _ts(t: datetime) -> float:
    return t.timestamp()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def register(store: JobStore, spec: JobSpec, clock: Clock | None = None) -> datetime:
    """Save the schedule of a scheduled job file; returns its next due time (kept when
    it was registered before with the same cron or interval)."""
    assert spec.options.schedule is not None
    due = first_due(spec.options.schedule, (clock or SystemClock()).now())
    return _dt(store.save_schedule(spec, _ts(due)))


UNFINISHED = ("queued", "running")
"""Job statuses of a run that has not ended (an `overlap: skip` schedule waits for it)."""


class Scheduler:
    def __init__(
        self,
        store: JobStore,
        clock: Clock | None = None,
        config: SchedulerConfig | None = None,
        on_skip: Callable[[str, str], None] | None = None,
        on_problem: Callable[[str, str], None] | None = None,
    ):
        """`on_skip(schedule, last job id)`: a due run skipped because the last one has
        not ended (`overlap: skip`). `on_problem(schedule, reason)`: a due run not
        enqueued because its job no longer holds on this host (a repository moved
        away): the schedule moves on to its next time and the others run as due."""
        self.store = store
        self.clock = clock or SystemClock()
        self.config = config or SchedulerConfig()
        self.on_skip = on_skip
        self.on_problem = on_problem
        self._stuck: set[str] = set()
        """Schedules with no next time to move to (said once; the others go on)."""

    def _busy(self, row: dict) -> str | None:
        """The schedule's last run if it has not ended."""
        last = row.get("last_job_id")
        job = self.store.job(last) if last else None
        if job is None:
            return None
        # a run cancelled while an episode ran has not ended until that episode has
        going = any(e["status"] == "running" for e in job["episode_rows"])
        return last if job["status"] in UNFINISHED or going else None

    def tick(self) -> list[str]:
        """Enqueue every run that is due now; returns the new job ids."""
        now = self.clock.now()
        enqueued = []
        for row in self.store.schedules():
            due = _dt(row["next_due"])
            if due > now or row["schedule_id"] in self._stuck:
                continue
            try:
                job_id = self._tick_one(row, due, now)
            except (ValueError, ArithmeticError) as exc:  # this schedule's: the others run
                self._stuck.add(row["schedule_id"])  # (the store's errors still end the tick)
                self._problem(
                    row["schedule_id"],
                    f"has no next run ({_said(exc)}); submit its job file again to mend it",
                )
                continue
            if job_id:
                enqueued.append(job_id)
        return enqueued

    def _problem(self, schedule_id: str, reason: str) -> None:
        if self.on_problem is not None:
            self.on_problem(schedule_id, reason)

    def _tick_one(self, row: dict, due: datetime, now: datetime) -> str | None:
        """Enqueue the schedule's due run (its job id), or move past it (None)."""
        raw = json.loads(row["spec_json"])
        try:
            spec = JobSpec.from_dict(raw)
        except ConfigError as exc:  # the job does not hold on this host now
            sched = parse(ScheduleSpec, raw.get("schedule"), ("schedule",))
            latest = latest_due(sched, due, now)
            moved = self.store.advance_schedule(
                row["schedule_id"], row["next_due"], _ts(next_after(sched, latest)), None,
                now.isoformat(),
            )  # fmt: skip
            if moved == "":  # we moved it (not another scheduler): say why once
                self._problem(
                    row["schedule_id"], f"run due {latest.isoformat()} not enqueued: {_said(exc)}"
                )
            return None
        sched = spec.options.schedule
        assert sched is not None
        latest = latest_due(sched, due, now)
        on_time = now - latest <= timedelta(seconds=self.config.grace)
        run = sched.missed == "one" or on_time
        busy = self._busy(row) if run and sched.overlap == "skip" else None
        run = run and busy is None
        job_id = self.store.advance_schedule(
            row["schedule_id"],
            row["next_due"],
            _ts(next_after(sched, latest)),
            spec if run else None,
            now.isoformat(),
        )
        if job_id == "" and busy and self.on_skip:  # we moved it, and skipped the run
            self.on_skip(row["schedule_id"], busy)
        elif job_id == "" and not on_time and sched.missed == "skip":  # said, not silent
            late = (now - latest).total_seconds()
            self._problem(
                row["schedule_id"],
                f"run due {latest.isoformat()} skipped: {late:.0f} s late, past the grace of "
                f"{self.config.grace:g} s (missed: skip)",
            )
        return job_id or None

    def run(self, stop: threading.Event, on_enqueue=None) -> None:
        """Tick until `stop`, sleeping until the next due time (at most `poll` seconds)."""
        while True:
            for job_id in self.tick():
                if on_enqueue:
                    on_enqueue(job_id)
            dues = [
                r["next_due"] for r in self.store.schedules() if r["schedule_id"] not in self._stuck
            ]
            wait = self.config.poll
            if dues:
                wait = min(wait, max(min(dues) - _ts(self.clock.now()), 0.0))
            if self.clock.wait(wait, stop):
                return
