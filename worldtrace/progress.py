"""Live views: `collect`'s and `import`'s progress, `worker` lines, `jobs list` tables.

Each takes the `on_event(event, **info)` calls of `run_job` / `Worker` (or reads the
job store) and prints; rich is imported inside, so the CLI stays light to start.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import click

from worldtrace.collectors import MAX_TURNS_STOP, ending
from worldtrace.errors import STOP_NAMES


def outcome_text(status: str, turns: int, error: str | None, seconds: float | None = None) -> str:
    """How `collect` and `worker` show an ended attempt: `error (1 turns): REASON` (the
    reason on the same line, whatever line breaks it holds); an `incomplete` one without
    an error says it stopped at max_turns."""
    took = f", {seconds:.1f} s" if seconds is not None else ""
    error = ending(status, error)
    why = f": {' '.join(error.split())}" if error else ""
    return f"{status} ({turns} turns{took}){why}"


def trajectory_text(t: Any) -> str:
    return outcome_text(t.outcome.status, len(t.turns), t.outcome.error)


class CollectProgress:
    """`collect JOB_FILE`: a progress bar (episodes ok/failed/running, turns/s, ETA) on a
    terminal; elsewhere one plain line per finished attempt. Either way it keeps what the
    summary needs: episodes failed for good (every attempt failed), episodes not run.

    The counts are the job's, also in a resume: `[ended/total, ok O failed F ...]` counts
    its episodes ended and its attempts, those earlier runs of the job published
    included; only the rate (turns/s) and the ETA are this run's."""

    def __init__(self, live: bool, resume_hint: Any = None):
        self.live = live
        self.total = self.ended = self.ok = self.failed = self.cut = self.running = 0
        self.turns = self.ended_before = 0
        self.job_id = ""
        self.cut_short: str | None = None
        """The attempt an interrupt cut short (published as it stood), if any."""
        self.failed_episodes: list[str] = []
        """Episodes of the job whose every attempt failed (in this run or before it)."""
        self.resume_hint = resume_hint
        """`job_id -> command` that resumes the job (None: it cannot be resumed)."""
        self.t0 = time.monotonic()
        self._progress = self._task = None

    @property
    def left(self) -> int:
        """Episodes this run did not get to (an interrupt); the one it cut short is said
        apart (`cut_short`)."""
        return self.total - self.ended - bool(self.cut_short)

    def __enter__(self) -> CollectProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def stats(self) -> str:
        rate = self.turns / max(time.monotonic() - self.t0, 1e-9)
        cut = f"  cut short {self.cut}" if self.cut else ""
        return (
            f"ok {self.ok}  failed {self.failed}{cut}  running {self.running}  {rate:.1f} turns/s"
        )

    def eta(self) -> str:
        ran = self.ended - self.ended_before  # this run's pace, not an earlier run's
        if ran <= 0:
            return "?"
        left = (time.monotonic() - self.t0) / ran * (self.total - self.ended)
        return f"{left:.0f}s"

    def __call__(self, event: str, **info: Any) -> None:
        if event == "job":
            self.total, self.job_id = info["episodes"], info["job_id"]
            before = info.get("published") or []
            self._count_earlier(before)
            hint = self.resume_hint and self.resume_hint(self.job_id)
            earlier = (
                f", resumed: the counts include the {len(before)} attempt(s) earlier runs published"
                if before
                else ""
            )
            click.echo(
                f"job {self.job_id}: {self.total} episode(s){earlier}"
                + (f"; if it stops, finish it with: {hint}" if hint else "")
            )
            if self.live:
                self._start_bar()
        elif event == "recovered":
            t = info["trajectory"]
            self._count(t)
            self._line(
                f"{info['episode']} attempt {info['attempt']}: {trajectory_text(t)}  "
                "[published from the journal a stopped run left]"
            )
        elif event == "skipped":  # ended in an earlier run (its attempts counted at `job`)
            self.ended += 1
            self.ended_before += 1
            if info.get("failed"):
                self.failed_episodes.append(info["episode"])
        elif event == "started":
            self.running = 1
        elif event in ("finished", "interrupted"):
            self.running = 0
            t = info.get("trajectory")
            if t is not None:
                self._count(t)
            if event == "interrupted" and t is not None:
                self.cut_short = f"{info['episode']} attempt {info['attempt']}"
            if info.get("final"):  # an attempt our stop cut short ended nothing (jobs.CUT)
                self.ended += 1
                if t is not None and t.outcome.status == "error":
                    self.failed_episodes.append(info["episode"])
            if t is not None:
                self._line(
                    f"{info['episode']} attempt {info['attempt']}: {trajectory_text(t)}  "
                    f"[{self.ended}/{self.total}, {self.stats()}, eta {self.eta()}]"
                )
        if self._progress is not None:
            self._progress.update(self._task, completed=self.ended, stats=self.stats())

    def _count(self, t: Any) -> None:
        from worldtrace.collectors.recorder import CUT_SHORT

        self.turns += len(t.turns)
        if t.outcome.status == "error":
            self.failed += 1
        elif t.outcome.error == CUT_SHORT:  # a stopped run's journal: our stop ended it
            self.cut += 1
        else:
            self.ok += 1

    def _count_earlier(self, statuses: list[str]) -> None:
        """The attempts earlier runs of the job published (`run_job`'s `published`)."""
        from worldtrace.collectors.jobs import CUT

        for status in statuses:
            if status == "error":
                self.failed += 1
            elif status == CUT:
                self.cut += 1
            else:
                self.ok += 1

    def _line(self, text: str) -> None:
        """One attempt's line, off a terminal (on one, `print_run` lists them at the end)."""
        if not self.live:
            click.echo(f"{_clock()} {text}")

    def _start_bar(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"), TimeRemainingColumn(),
        )  # fmt: skip
        self._task = self._progress.add_task(self.job_id, total=self.total, stats=self.stats())
        self._progress.start()


class StepProgress:
    """A long command's progress, fed `(done, records)` by the library: a bar on stderr
    when it is a terminal (done of `total` `unit`, records, records/s, time left);
    otherwise one plain line on stderr every `every` seconds, so a log shows a long run
    advancing without filling up with a redrawn bar. `import` counts files, `export`
    trajectories, `process` units of work."""

    def __init__(self, label: str, total: int, unit: str, every: float = 5.0, console: Any = None):
        from rich.console import Console

        self.label, self._total, self.unit, self.every = label, total, unit, every
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self.t0 = self.last = time.monotonic()
        self.done = self.records = 0
        self._progress = self._task = None

    def __enter__(self) -> StepProgress:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TextColumn(self.unit),
                TextColumn("{task.fields[records]} records ({task.fields[rate]}/s)"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
            )  # fmt: skip
            self._task = self._progress.add_task(self.label, total=self.total, records=0, rate=0)
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None and self._progress.live.is_started:
            self._progress.stop()

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, n: int) -> None:
        """`process` learns its number of units only once it has planned the run."""
        self._total = n
        if self._progress is not None:
            self._progress.update(self._task, total=n)

    def rate(self) -> float:
        return self.records / max(time.monotonic() - self.t0, 1e-9)

    def begin(self) -> None:
        """Draw the bar (a terminal's): its refresh thread starts here, not on entry, so
        `import` forks its worker processes first (a fork beside another thread is
        refused: `importers._pool`), then calls this; else the first call draws it."""
        if self._progress is not None and not self._progress.live.is_started:
            self._progress.start()

    def __call__(self, done: int, records: int) -> None:
        self.done, self.records = done, records
        if self._progress is not None:
            self.begin()
            self._progress.update(
                self._task, completed=done, records=records, rate=f"{self.rate():.0f}"
            )
            return
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            click.echo(
                f"{_clock()} {self.label}: {done}/{self.total} {self.unit}, {records} "
                f"record(s), {self.rate():.0f} records/s",
                err=True,
            )


def print_run(
    result: Any,
    listed: bool,
    progress: CollectProgress | None = None,
    stopped_by: int | None = None,
) -> None:
    """After `collect`: each attempt (unless plain progress lines showed them) with the
    reason of each failure, then where the trajectories went, the episodes that failed
    for good and, after an interrupt (by signal `stopped_by`), what is left and how to
    finish it."""
    if listed:
        for t in result.trajectories:
            click.echo(
                f"{t.trajectory_id} {t.domain} {t.source.episode_id} attempt {t.source.attempt}: "
                f"{trajectory_text(t)}"
            )
    where = sorted({str(p.parent) for p in result.shards})
    failed = sum(t.outcome.status == "error" for t in result.trajectories)
    cut = sum(t.outcome.status == "incomplete" for t in result.trajectories)
    at_max = sum(
        t.outcome.status == "incomplete" and not t.outcome.error for t in result.trajectories
    )
    why = (
        ""
        if not at_max
        else f": {MAX_TURNS_STOP}"
        if at_max == cut
        else f", {at_max} of them {MAX_TURNS_STOP}"
    )
    done = progress is not None and progress.total and progress.ended_before == progress.total
    if done and not result.trajectories:  # a resume of a finished job: not "0 ... -> -"
        click.echo(
            f"nothing left to run: the {progress.total} episode(s) of job {progress.job_id} "
            "ended in earlier runs"
        )
    else:
        click.echo(
            f"{len(result.trajectories)} trajectories ({failed} failed attempts"
            + (f", {cut} incomplete{why}" if cut else "")
            + f") -> {', '.join(where) or '-'}"
        )
    if progress is None:
        return
    if progress.failed_episodes:
        names = progress.failed_episodes
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        click.echo(
            f"{len(names)} episode(s) failed for good (every attempt failed; the reasons are "
            f"above): {shown}",
            err=True,
        )
    if result.interrupted:
        cut = (
            f"{progress.cut_short} was published as it stood (incomplete; a resume runs "
            "that episode again); "
            if progress.cut_short
            else ""
        )
        unfinished = progress.left or progress.cut_short
        if unfinished and progress.resume_hint:
            then = f"finish the job with: {progress.resume_hint(progress.job_id)}"
        elif unfinished:
            then = "a quick --sandbox run cannot be resumed"
        else:
            then = "the job has no episode left to run"
        by = f" ({STOP_NAMES[stopped_by]})" if stopped_by in STOP_NAMES else ""
        click.echo(f"interrupted{by}: {cut}{progress.left} episode(s) not run; {then}", err=True)


def _clock() -> str:
    return datetime.now().strftime("%H:%M:%S")


def _attempt(info: dict[str, Any]) -> str:
    c = info.get("claim") or info.get("lease")
    return f"{c.job_id}/{c.episode_id} a{c.attempt}"


def worker_line(event: str, **info: Any) -> None:
    """`worker`: one line per event (episode started/finished, requeued or ended as
    lost, swept...)."""
    if event == "worker":
        text = f"worker {info['worker']}: started (concurrency {info['concurrency']})"
    elif event == "started":
        text = f"started   {_attempt(info)}"
    elif event == "finished":
        text = f"finished  {_attempt(info)}: " + outcome_text(
            info["status"], info["turns"], info.get("error"), info["seconds"]
        )
    elif event == "released":
        text = f"released  {_attempt(info)} (stopping; queued again)"
    elif event == "lost":
        text = f"lost      {_attempt(info)} (lease taken over; result discarded)"
    elif event == "requeued":
        text = f"requeued  {_attempt(info)}: {info['reason']}"
    elif event == "ended":  # a lost attempt not queued again: the reason says why not
        text = f"ended     {_attempt(info)}: {info['reason']}"
    elif event == "swept":
        text = f"removed {len(info['containers'])} container(s) of dead workers"
    elif event == "recovered":
        what = f"{info['job_id']}/{info['episode_id']} a{info['attempt']}"
        text = (
            f"removed the journal of {what}: its trajectory was published already"
            if info.get("already")
            else f"published {what} from its journal"
        )
    elif info.get("claim") is not None:
        text = f"{event}: {_attempt(info)}: {info.get('reason', '')}"
    else:
        text = f"{event}: {info.get('reason', '')}"
    click.echo(f"{_clock()} {text}", err=event in ("error", "warning"))


def _due(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def _live_workers(store, lease_s: float) -> list[dict[str, Any]]:
    """Workers that beat within their own lease (`lease_s` for one that did not record
    it) and, on this host, whose process still runs (a worker killed with -9 never
    deregisters: its last beat kept it listed for a lease). A fixed lease hid a live
    `worker --lease 600`, which beats every 150 s."""
    import socket

    from worldtrace.collectors.owners import alive

    host = socket.gethostname()
    return [
        {k: w[k] for k in ("worker", "host", "pid", "started_at")}
        for w in store.workers(lease_s)
        if not w["gone"] and (w["host"] != host or alive(w["pid"], w["process_start"]))
    ]


def _overlap(s: dict[str, Any]) -> str:
    """A schedule's `overlap` (skip or queue): kept in its job spec, not a column."""
    import json

    try:
        spec = json.loads(s.get("spec_json") or "{}")
    except ValueError:
        spec = {}
    return ((spec.get("schedule") or {}) if isinstance(spec, dict) else {}).get("overlap", "skip")


def _schedules(store) -> list[dict[str, Any]]:
    return [
        {
            "schedule": s["schedule_id"],
            "when": f"cron {s['cron']}" if s["cron"] else f"every {s['every']}",
            "missed": s["missed"],
            "overlap": _overlap(s),
            "next due (UTC)": _due(s["next_due"]),
            "last job": s["last_job_id"],
        }
        for s in store.schedules()
    ]


def jobs_document(store, lease_s: float = 120.0) -> dict[str, Any]:
    """`jobs list --json`: `{"jobs": [...], "schedules": [...], "workers": [...]}` with
    the job store's column names (schedules: schedule_id, cron, every, missed, overlap, next_due
    as ISO 8601 UTC, last_job_id; workers: the live ones)."""
    schedules = [
        {
            "schedule_id": s["schedule_id"],
            "cron": s["cron"],
            "every": s["every"],
            "missed": s["missed"],
            "overlap": _overlap(s),
            "next_due": _due(s["next_due"]),
            "last_job_id": s["last_job_id"],
        }
        for s in store.schedules()
    ]
    return {
        "jobs": store.jobs(),
        "schedules": schedules,
        "workers": _live_workers(store, lease_s),
    }


def jobs_view(store, lease_s: float = 120.0):
    """Jobs, schedules (with their next due time) and live workers, as rich tables."""
    from rich.console import Group
    from rich.text import Text

    from worldtrace.output import rows_table

    parts: list[Any] = []
    jobs = store.jobs()
    parts.append(rows_table(jobs, title="jobs") if jobs else Text("no jobs"))
    schedules = _schedules(store)
    if schedules:
        parts.append(rows_table(schedules, title="schedules"))
    workers = _live_workers(store, lease_s)
    if workers:
        parts.append(rows_table(workers, title="workers"))
    return Group(*parts)


def watch(store, interval: float) -> None:
    """`jobs list --watch`: the tables, refreshed every `interval` seconds until Ctrl-C.
    Off a terminal (a file, a pipe) each refresh is printed whole after a time line, as
    `jobs list` prints its tables: a live view there was squeezed to 80 columns, ids cut."""
    import io
    import sys

    from rich.console import Console
    from rich.live import Live

    from worldtrace.output import print_table

    try:
        if not sys.stdout.isatty():
            while True:  # each frame rendered first, then written at once: Ctrl-C never
                frame = io.StringIO()  # leaves a time line without its tables
                frame.write(f"-- {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC\n")
                print_table(jobs_view(store), Console(file=frame))
                sys.stdout.write(frame.getvalue())
                sys.stdout.flush()
                time.sleep(interval)  # the refresh period
        with Live(jobs_view(store), refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(interval)  # the refresh period of a live view
                live.update(jobs_view(store))
    except KeyboardInterrupt:
        pass
