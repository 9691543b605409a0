"""Scheduled jobs on a fake clock: on time, missed runs (`one` / `skip`), two schedulers,
and `jobs submit` / `jobs list` / `scheduler --once` on the command line."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.scheduler import Scheduler, SchedulerConfig, register

from worldtrace.cli import cli

T0 = datetime(2026, 5, 1, 10, 7, tzinfo=timezone.utc)


class FakeClock:
    """A Clock whose time moves only when told (or when the scheduler waits)."""

    def __init__(self, t: datetime):
        self.t = t
        self.waits: list[float] = []

    def now(self) -> datetime:
        return self.t

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        self.waits.append(seconds)
        self.t += timedelta(seconds=seconds)
        return stop.is_set() or len(self.waits) >= 3


def job(schedule: dict, name: str = "nightly") -> JobSpec:
    """A scheduled job; no worker runs its runs here, so they overlap unless told."""
    schedule = {"overlap": "queue", **schedule}
    return JobSpec.from_dict(
        {"name": name, "schedule": schedule, "priority": 3, "tasks": [{"id": "t", "actions": ["ls\n"]}]}
    )  # fmt: skip


def at(clock: FakeClock, **delta) -> FakeClock:
    clock.t = T0 + timedelta(**delta)
    return clock


def test_every_runs_at_once_then_each_interval(js):
    clock = FakeClock(T0)
    assert register(js, job({"every": "15m"}), clock) == T0
    s = Scheduler(js, clock)
    [first] = s.tick()
    assert s.tick() == []  # moved to the next due time
    assert Scheduler(js, at(clock, minutes=14)).tick() == []
    [second] = Scheduler(js, at(clock, minutes=15)).tick()
    jobs = {j["job_id"]: j for j in js.jobs()}
    assert set(jobs) == {first, second}
    assert {j["priority"] for j in jobs.values()} == {3}
    assert js.job(first)["schedule_id"] == "nightly"
    [row] = js.schedules()
    assert datetime.fromtimestamp(row["next_due"], timezone.utc) == T0 + timedelta(minutes=30)


def test_cron_runs_at_its_next_match(js):
    clock = FakeClock(T0)  # 10:07
    assert register(js, job({"cron": "*/30 * * * *"}), clock) == T0.replace(minute=30)
    assert Scheduler(js, at(clock, minutes=22)).tick() == []  # 10:29
    assert len(Scheduler(js, at(clock, minutes=23)).tick()) == 1  # 10:30
    assert Scheduler(js, at(clock, minutes=24)).tick() == []


@pytest.mark.parametrize(("missed", "runs"), [("one", 1), ("skip", 0)])
def test_runs_missed_while_down(js, missed, runs):
    """Found (review of 12-04): under `missed: skip` the late run was dropped without a
    word; it is said now (the CLI prints it as a warning)."""
    clock = FakeClock(T0)
    register(js, job({"cron": "*/30 * * * *", "missed": missed}), clock)
    said: list[tuple[str, str]] = []
    s = Scheduler(js, at(clock, hours=3, minutes=-2), on_problem=lambda *p: said.append(p))
    enqueued = s.tick()  # 13:05: six runs missed
    assert len(enqueued) == runs
    skipped = "run due 2026-05-01T13:00:00+00:00 skipped: 300 s late, past the grace of 60 s"
    assert said == ([] if runs else [("nightly", skipped + " (missed: skip)")])
    [row] = js.schedules()
    assert datetime.fromtimestamp(row["next_due"], timezone.utc) == T0.replace(hour=13, minute=30)
    assert len(Scheduler(js, at(clock, hours=3, minutes=23)).tick()) == 1  # 13:30 on time


def test_a_late_run_within_grace_still_runs_under_skip(js):
    clock = FakeClock(T0)
    register(js, job({"every": "1h", "missed": "skip"}), clock)
    s = Scheduler(js, at(clock, seconds=30), SchedulerConfig(grace=60))
    assert len(s.tick()) == 1


def test_two_schedulers_enqueue_a_due_run_once(js, jobs_url):
    clock = FakeClock(T0)
    register(js, job({"every": "15m"}), clock)
    other = Scheduler(open_job_store(jobs_url), clock)
    assert len(Scheduler(js, clock).tick() + other.tick()) == 1


def test_run_loop_sleeps_until_the_next_due_time(js):
    clock = FakeClock(T0)
    register(js, job({"every": "15m"}), clock)
    enqueued: list[str] = []
    Scheduler(js, clock, SchedulerConfig(poll=3600)).run(threading.Event(), enqueued.append)
    assert clock.waits == [900.0, 900.0, 900.0]  # woke exactly when due
    assert len(enqueued) == 3


def test_a_run_due_while_the_last_has_not_ended_is_skipped_and_said(js):
    """Found: with no worker running, `scheduler` queued a run of an every-10s schedule
    each time it was due (three in 25 s), filling the queue. By default a due run is
    skipped while the schedule's last run is queued or running, and said."""
    clock = FakeClock(T0)
    register(js, job({"every": "15m", "overlap": "skip"}), clock)
    said: list[tuple[str, str]] = []
    [first] = Scheduler(js, clock, on_skip=lambda *a: said.append(a)).tick()
    assert Scheduler(js, at(clock, minutes=15), on_skip=lambda *a: said.append(a)).tick() == []
    assert said == [("nightly", first)] and [j["job_id"] for j in js.jobs()] == [first]
    [row] = js.schedules()  # the skipped run's time is past: the next one is due
    assert datetime.fromtimestamp(row["next_due"], timezone.utc) == T0 + timedelta(minutes=30)
    assert js.cancel(first)  # the last run has ended: the next due run is queued
    assert len(Scheduler(js, at(clock, minutes=30)).tick()) == 1
    assert JobSpec.from_dict({"name": "d", "schedule": {"every": "1h"},
                              "tasks": [{"id": "t", "actions": ["ls\n"]}]}).options.schedule.overlap == "skip"  # fmt: skip


def test_submit_registers_the_schedule_and_list_shows_it(store, tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("name: hourly\nschedule: {every: 1h}\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    run = lambda *a: CliRunner().invoke(cli, ["--store", str(store.root), *a])  # noqa: E731
    r = run("jobs", "submit", str(f))
    assert r.exit_code == 0 and r.stdout.startswith("schedule hourly: registered, next run due")
    js = open_job_store(store.jobs_db)
    assert js.jobs() == []  # registered, not queued
    listed = run("jobs", "list").stdout
    assert "no jobs" in listed and "hourly" in listed and "every 1h" in listed
    r = run("scheduler", "--once")
    assert r.exit_code == 0 and r.stdout.startswith("enqueued hourly-")
    assert [j["name"] for j in js.jobs()] == ["hourly"]
    assert "every 1h" in run("jobs", "list").stdout
    assert run("jobs", "unschedule", "hourly").exit_code == 0 and js.schedules() == []


def test_a_bad_option_value_names_the_option_as_typed(store):
    """Found: `worker --concurrency 0` said `concurrency: Input should be ...`, the config
    field, not the option the user typed."""
    run = lambda *a: CliRunner().invoke(cli, ["--store", str(store.root), *a])  # noqa: E731
    r = run("worker", "--concurrency", "0")
    assert r.exit_code == 2 and "Error: --concurrency: Input should be greater" in r.output
    r = run("scheduler", "--once", "--poll", "0")
    assert r.exit_code == 2 and "Error: --poll: Input should be greater than 0" in r.output


def test_a_schedule_whose_job_no_longer_holds_does_not_stop_the_others(js, repo, tmp_path):
    """Found (review of 12-04): a scheduled SWE job whose repository was moved away made
    every tick fail with a traceback (`ConfigError: sandbox.repo ... is not a directory on
    this host`), and the schedules due after it were never enqueued."""
    swe = JobSpec.from_dict(
        {"name": "swe", "schedule": {"every": "1m"}, "sandbox": {"kind": "swe", "repo": str(repo)},
         "tasks": [{"id": "t", "actions": [{"tool": "bash", "arguments": {"command": "ls"}}]}]}
    )  # fmt: skip
    clock = FakeClock(T0)
    register(js, swe, clock)
    register(js, job({"every": "1m"}, name="term"), at(clock, seconds=1))
    problems: list[tuple[str, str]] = []
    repo.rename(tmp_path / "moved")
    [run] = Scheduler(js, at(clock, minutes=1), on_problem=lambda *p: problems.append(p)).tick()
    assert js.job(run)["schedule_id"] == "term"
    [(name, why)] = problems
    assert name == "swe" and "not enqueued" in why and "is not a directory" in why, why
    # the broken schedule moved on: the next tick says nothing new and enqueues nothing of it
    assert Scheduler(js, clock, on_problem=lambda *p: problems.append(p)).tick() == []
    assert len(problems) == 1


def test_an_interval_past_the_calendar_is_refused_at_submit(store, tmp_path):
    """Found (review of 12-04): `every: 3000000d` registered, then every tick failed with
    `OverflowError: date value out of range`; `99999999999d` was a traceback at submit."""
    for every in ("3000000d", "99999999999d"):
        f = tmp_path / "far.yaml"
        f.write_text(
            f"name: far\nschedule: {{every: {every}}}\ntasks: [{{id: t, actions: [ls]}}]\n"
        )
        r = CliRunner().invoke(
            cli, ["--store", str(store.root), "jobs", "submit", "--dry-run", str(f)]
        )
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert "is longer than 3650d" in r.output, r.output


def test_submitting_a_schedule_again_keeps_its_last_run_and_due_time(js):
    """Found (review of 12-04): submitting the same file again replaced the schedule's row:
    its last run was forgotten, so `overlap: skip` enqueued a second run while the first
    was still queued, and `every` was due again at once."""
    clock = FakeClock(T0)
    spec = job({"every": "15m", "overlap": "skip"})
    register(js, spec, clock)
    [first] = Scheduler(js, clock).tick()
    assert register(js, spec, at(clock, minutes=1)) == T0 + timedelta(minutes=15)  # kept
    skipped: list[tuple[str, str]] = []
    assert Scheduler(js, at(clock, minutes=15), on_skip=lambda *s: skipped.append(s)).tick() == []
    assert skipped == [("nightly", first)]
    changed = job({"every": "1h", "overlap": "skip"})  # a new interval: a new first due time
    assert register(js, changed, at(clock, minutes=16)) == T0 + timedelta(minutes=16)
    assert js.schedules()[0]["last_job_id"] == first


def test_a_scheduler_given_a_job_store_that_does_not_exist_refuses(store, tmp_path):
    """Found (review of 12-04): `scheduler --jobs typo.db` made an empty job store there
    and exited 0: a crontab with a typo would never enqueue anything, without a sign."""
    typo = tmp_path / "typo.db"
    r = CliRunner().invoke(
        cli, ["--store", str(store.root), "scheduler", "--once", "--jobs", str(typo)]
    )
    assert r.exit_code == 1 and f"no job store at {typo}" in r.output, r.output
    assert not typo.exists()


@pytest.mark.parametrize("cron", ["* * * * * */5", "0 */5 * * * *"])
def test_a_cron_of_six_fields_is_refused(cron):
    """Found (review of 12-04): `* * * * * */5` passed and enqueued a run every 5 s
    (croniter's sixth field is seconds); a Quartz `0 */5 * * * *` ran every second of
    minute 0 of every fifth hour."""
    with pytest.raises(ValueError, match="has 6 fields: cron takes five"):
        job({"cron": cron})
    assert job({"cron": "*/5 * * * *"}).options.schedule.cron == "*/5 * * * *"


def test_a_cancelled_run_whose_episode_still_runs_is_not_overlapped(js):
    """Found (review of 12-04): under `overlap: skip`, a run cancelled while its episode
    ran counted as ended, and the next run was enqueued beside the episode still going."""
    clock = FakeClock(T0)
    register(js, job({"every": "15m", "overlap": "skip"}), clock)
    [first] = Scheduler(js, clock).tick()
    claim = js.claim("w", 600)
    js.cancel(first)
    assert Scheduler(js, at(clock, minutes=15)).tick() == []  # its episode still runs
    js.finish(claim, "succeeded", "t", None, 0)
    assert len(Scheduler(js, at(clock, minutes=30)).tick()) == 1
