"""The first run of an `every` schedule is due "at once": found (hunt of 12-04): under
`missed: skip`, a schedule registered while no scheduler ran (`jobs submit`, then
`worldtrace scheduler` started two minutes later) had its first run skipped as missed,
`N s late, past the grace of 60 s`, and waited a whole interval (a day for `every:
1d`) before anything ran. Runs after the first are still skipped when missed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.scheduler import Scheduler, register

from .conftest import StillClock

T0 = datetime(2026, 5, 1, 10, 7, 12, 345678, tzinfo=timezone.utc)  # a registration time


def job(schedule: dict) -> JobSpec:
    return JobSpec.from_dict(
        {"name": "hourly", "schedule": {"overlap": "queue", **schedule},
         "tasks": [{"id": "t", "actions": ["ls\n"]}]}
    )  # fmt: skip


def test_the_first_every_run_runs_when_a_scheduler_first_sees_it(js):
    register(js, job({"every": "1h", "missed": "skip"}), StillClock(T0))
    said: list[tuple[str, str]] = []
    late = StillClock(T0 + timedelta(minutes=2))
    [first] = Scheduler(js, late, on_problem=lambda *p: said.append(p)).tick()
    assert said == []
    assert js.job(first)["schedule_id"] == "hourly"
    [row] = js.schedules()
    assert datetime.fromtimestamp(row["next_due"], timezone.utc) == T0 + timedelta(hours=1)
    # a later run missed while no scheduler ran is skipped and said, as before; its time
    # in whole seconds, as `jobs list` shows it
    down = StillClock(T0 + timedelta(hours=3, minutes=5))
    assert Scheduler(js, down, on_problem=lambda *p: said.append(p)).tick() == []
    assert said == [
        ("hourly", "run due 2026-05-01T13:07:12+00:00 skipped: 300 s late, past the grace "
                   "of 60 s (missed: skip)")
    ]  # fmt: skip
    assert [j["job_id"] for j in js.jobs()] == [first]


def test_a_cron_first_run_missed_is_still_skipped(js):
    """A cron's first time is one the file names (02:00), not "at once": missed, it is
    skipped under `missed: skip`."""
    register(js, job({"cron": "0 * * * *", "missed": "skip"}), StillClock(T0))
    said: list[tuple[str, str]] = []
    s = Scheduler(
        js,
        StillClock(T0.replace(hour=12, minute=10, second=0, microsecond=0)),
        on_problem=lambda *p: said.append(p),
    )
    assert s.tick() == []
    assert [n for n, _ in said] == ["hourly"]
    assert "run due 2026-05-01T12:00:00+00:00 skipped: 600 s late" in said[0][1]


def test_submit_says_when_it_replaces_a_schedule_of_the_same_name(store, tmp_path):
    """Schedules are keyed by the job's name: another job file under a name in use
    replaced the schedule, and `jobs submit` said `registered`, as for a new one."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    def submit(text: str) -> str:
        f = tmp_path / "job.yaml"
        f.write_text(text)
        r = CliRunner().invoke(cli, ["--store", str(store.root), "jobs", "submit", str(f)])
        assert r.exit_code == 0, r.output
        return r.stdout.split(", next run due")[0]

    hourly = "name: nightly\nschedule: {every: 1h}\ntasks: [{id: t, actions: ['ls\\n']}]\n"
    other = 'name: nightly\nschedule: {cron: "0 2 * * *"}\ntasks: [{id: u, actions: [pwd]}]\n'
    assert submit(hourly) == "schedule nightly: registered"
    assert submit(hourly) == "schedule nightly: registered already, unchanged"
    assert submit(other) == (
        "schedule nightly: replaced the schedule registered before under this name "
        "(it was every 1h)"
    )
    assert submit(hourly) == (
        "schedule nightly: replaced the schedule registered before under this name "
        "(it was cron 0 2 * * *)"
    )


def test_a_running_scheduler_under_grace_0_enqueues_each_run_it_wakes_for(js):
    """Found (hunt of 12-04): `scheduler --grace 0` skipped every run of a `missed: skip`
    schedule while it ran (`run due T skipped: 0 s late, past the grace of 0 s`): woken
    at the due time, it is always some milliseconds late."""
    from worldtrace.collectors.scheduler import SchedulerConfig

    register(js, job({"every": "15m", "missed": "skip"}), StillClock(T0))
    clock = StillClock(T0)
    said: list[tuple[str, str]] = []
    s = Scheduler(
        js, clock, SchedulerConfig(grace=0, poll=30), on_problem=lambda *p: said.append(p)
    )
    runs = [s.tick()]
    for k in (1, 2, 3):  # woken 40 ms after each due time
        clock.t = T0 + timedelta(minutes=15 * k, milliseconds=40)
        runs.append(s.tick())
    assert [len(r) for r in runs] == [1, 1, 1, 1] and said == []
    # a run that came due while the machine slept (hours past the last look) was missed
    clock.t = T0 + timedelta(hours=5, minutes=1)
    assert s.tick() == []
    [(name, reason)] = said
    assert name == "hourly"
    assert reason == (
        "run due 2026-05-01T15:07:12+00:00 skipped: 60 s late, past the grace of 0 s (missed: skip)"
    )
    # and a first look says a fraction of a second as such, not `0 s late`
    clock.t = T0 + timedelta(hours=5, minutes=15, milliseconds=400)
    fresh = Scheduler(js, clock, SchedulerConfig(grace=0), on_problem=lambda *p: said.append(p))
    assert fresh.tick() == []
    assert said[-1][1].startswith("run due 2026-05-01T15:22:12+00:00 skipped: 0.4 s late, ")


def test_a_cron_schedule_registered_while_the_scheduler_slept_is_on_time(js):
    """A schedule registered while a scheduler sleeps is seen at its next look, up to
    `poll` seconds after its due time: not a missed run, whatever the grace."""
    from worldtrace.collectors.scheduler import SchedulerConfig

    clock = StillClock(T0.replace(second=40, microsecond=0))  # 10:07:40
    s = Scheduler(js, clock, SchedulerConfig(grace=5, poll=30))
    assert s.tick() == []  # nothing registered yet
    register(js, job({"cron": "* * * * *", "missed": "skip"}), StillClock(clock.t))  # due 10:08
    clock.t = T0.replace(minute=8, second=10, microsecond=0)  # the next look: 10 s late
    assert len(s.tick()) == 1
