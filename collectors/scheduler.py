"""Scheduled jobs: `worldtrace scheduler` enqueues a run of each schedule when it is due.

`jobs submit` of a job file with `schedule: {cron: ...}` or `schedule: {every: ...}`
registers the schedule in the job store (keyed by the job's name; submitting again
replaces it, keeping its last run and, unchanged, its due time) instead of queueing a run. The first run of `every` is due at once, that
of `cron` at its next match (cron times are UTC). Each tick enqueues the runs that are
due and moves the schedule to its next time in the same transaction, guarded by the
old due time, so two schedulers never enqueue the same run twice.

Runs missed while no scheduler ran follow the schedule's `missed` policy: `one`
enqueues a single catch-up run however many were missed; `skip` enqueues only when the
latest due time is at most `grace` old, and otherwise waits for the next one (the first
run of `every`, due at once, is never a missed one). A run due
while the schedule's last run is still queued or running follows `overlap`: `skip` (the
default) enqueues none and tells `on_skip`, `queue` enqueues it. The clock is injectable
(`Clock`), so tests run schedules on a fake clock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Annotated, Protocol

from pydantic import Field
from worldtrace.schemas.parsing import ConfigError, configclass, parse

from .jobspec import JobSpec, ScheduleSpec, cron_iter, parse_every
from .jobstore import JobStore
from .worker import MAX_POLL, SIGNAL_WAKE


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


MAX_GRACE = 366 * 86400.0
"""The longest `--grace`: a year. A run later than that is no run `missed: skip` means to
catch (`missed: one` enqueues one however late); a huge grace (`1e14`) overflowed the
scheduler's date arithmetic, and the schedule was blamed: "has no next run"."""


@configclass
class SchedulerConfig:
    """How often the scheduler looks and how late a run may be."""

    poll: Annotated[float, Field(gt=0, le=MAX_POLL, allow_inf_nan=False)] = 30.0
    """Longest sleep in seconds between two looks at the schedules (new ones appear
    then); at most 3600."""
    grace: Annotated[float, Field(ge=0, le=MAX_GRACE, allow_inf_nan=False)] = 60.0
    """Seconds late a due run may still be enqueued under `missed: skip`; at most
    31622400 (a year)."""


LOOK_SLACK = 5.0
"""Seconds a look at the schedules may take beyond `poll` for a run due since the last
look to count as on time (the enqueue of a large job before it)."""

NEVER = datetime(9999, 1, 1, tzinfo=timezone.utc)
"""The next time of a cron expression that never matches (`0 0 31 2 *`): job files
with one are refused, but a stored schedule must not make the scheduler crash."""


def _cron_time(expr: str, t: datetime, prev: bool = False) -> datetime | None:
    """The cron's first time after `t` (last one before with `prev`); None if there is none."""
    from croniter import CroniterBadDateError

    it = cron_iter(expr, t.astimezone(timezone.utc))
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


def _iso(t: datetime) -> str:
    """A due time as the scheduler says it: whole seconds, as `jobs list` shows it (an
    `every` schedule's times carry the microseconds of its registration)."""
    return t.isoformat(timespec="seconds")


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


def _registration(row: dict) -> tuple[str, str]:
    """A schedule as registered: its name and when `jobs submit` registered it, so a
    schedule set aside as stuck is run again once its job file is submitted again (a
    running scheduler kept every later registration under that name stuck, though the
    warning said to submit the file again)."""
    return row["schedule_id"], str(row.get("created_at"))


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
        # checked again: a config built in Python skips the CLI's parse (ConfigError)
        self.config = parse(SchedulerConfig, asdict(config)) if config else SchedulerConfig()
        self.on_skip = on_skip
        self.on_problem = on_problem
        self._looked: datetime | None = None
        """When this scheduler last looked at the schedules (its previous tick)."""
        self._stuck: set[tuple[str, str]] = set()
        """Schedules with no next time to move to (said once; the others go on), as they
        were registered (`_registration`): submitted again, mended, they run."""

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
        try:
            self._tick_all(now, enqueued)
        finally:
            self._looked = now
        return enqueued

    def _tick_all(self, now: datetime, enqueued: list[str]) -> None:
        for row in self.store.schedules():
            due = _dt(row["next_due"])
            if due > now or _registration(row) in self._stuck:
                continue
            try:
                job_id = self._tick_one(row, due, now)
            except (ValueError, ArithmeticError) as exc:  # this schedule's: the others run
                self._stuck.add(_registration(row))  # (the store's errors still end the tick)
                name = row["schedule_id"]
                self._problem(
                    name,
                    # a schedule registered before its `schedule` was refused (a cron
                    # range written high to low) is not a schedule without a next run
                    f"is not run: its schedule no longer checks ({_said(exc)}); fix the job "
                    f"file and submit it again, or `worldtrace jobs unschedule {name}`"
                    if isinstance(exc, ConfigError)
                    else f"has no next run ({_said(exc)}); submit its job file again to mend it",
                )
                continue
            if job_id:
                enqueued.append(job_id)

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
                    row["schedule_id"], f"run due {_iso(latest)} not enqueued: {_said(exc)}"
                )
            return None
        sched = spec.options.schedule
        assert sched is not None
        latest = latest_due(sched, due, now)
        # the first run of `every` is due "at once": when a scheduler first sees it, never
        # a run missed (registered while no scheduler ran, a `missed: skip` schedule
        # skipped its first run and waited a whole interval, a day for `every: 1d`)
        first = sched.every is not None and not row.get("last_run_at")
        on_time = first or self._seen_in_time(latest, now)
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
                f"run due {_iso(latest)} skipped: {late:.{0 if late >= 10 else 1}f} s late, "
                f"past the grace of {self.config.grace:g} s (missed: skip)",
            )
        return job_id or None

    def _seen_in_time(self, latest: datetime, now: datetime) -> bool:
        """Whether a due run is on time: at most `grace` late, or due since this
        scheduler's previous look and seen in the time it takes to look again (`poll`,
        and `LOOK_SLACK` for the tick itself). A run due while the scheduler ran was not
        missed: woken at its due time the scheduler is some milliseconds late, and under
        `--grace 0` a running scheduler skipped every run (`0 s late, past the grace of
        0 s`), as it did any schedule it learnt of at its next `poll`, past the grace."""
        late = (now - latest).total_seconds()  # in seconds: the config's own arithmetic
        if late <= self.config.grace:  # must not overflow a timedelta and blame the schedule
            return True
        return (
            self._looked is not None
            and latest > self._looked
            and late <= self.config.poll + LOOK_SLACK
        )

    def run(self, stop: threading.Event, on_enqueue=None) -> None:
        """Tick until `stop`, sleeping until the next due time (at most `poll` seconds)."""
        while True:
            for job_id in self.tick():
                if on_enqueue:
                    on_enqueue(job_id)
            dues = [
                r["next_due"] for r in self.store.schedules() if _registration(r) not in self._stuck
            ]
            wait = self.config.poll
            if dues:
                wait = min(wait, max(min(dues) - _ts(self.clock.now()), 0.0))
            if self.clock.wait(wait, stop):
                return
