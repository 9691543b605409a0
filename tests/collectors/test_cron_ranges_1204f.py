"""Cron ranges written high to low (`5-1`, `22-2`, `fri-mon`): croniter wraps them
around in silence (`5-1` ran Friday to Monday); Vixie cron refuses them. A job file
with one is refused, naming the field and how to write it; a schedule registered
before that is said by the scheduler, never run at times its file does not say."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.scheduler import Scheduler, register
from worldtrace.schemas.parsing import ConfigError

from .conftest import StillClock

JOB = """\
name: nightly
sandbox:
  kind: terminal
  docker: {{image: worldtrace/busybox:latest}}
schedule: {{cron: "{cron}"}}
tasks:
  - id: t
    actions: ["ls\\n"]
"""


@pytest.mark.parametrize(
    ("cron", "field", "fix"),
    [
        ("0 0 * * 5-1", "day-of-week range 5-1", "5-6,0-1"),
        ("0 22-2 * * *", "hour range 22-2", "22-23,0-2"),
        ("0 0 * * fri-mon", "day-of-week range fri-mon", "fri-sat,sun-mon"),
        ("0 0 * dec-feb *", "month range dec-feb", "dec,jan-feb"),
        ("0 0 20-5 * *", "day-of-month range 20-5", "20-31,1-5"),
        ("50-10 * * * *", "minute range 50-10", "50-59,0-10"),
        ("*/5 1-3,23-1 * * *", "hour range 23-1", "23,0-1"),
        ("0 0 * * 6-0", "day-of-week range 6-0", "6,0"),
    ],
)
def test_a_range_written_high_to_low_is_refused_with_the_way_to_write_it(
    tmp_path, cron, field, fix
):
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron=cron))
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    msg = str(exc.value)
    assert msg.startswith(f"{f}:5: schedule.cron: ")
    assert field in msg and "high to low" in msg
    assert f"write it low to high, as {fix}" in msg


def test_a_stepped_range_written_high_to_low_is_refused(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron="0 0 * * 5-1/2"))
    with pytest.raises(ConfigError, match=r"day-of-week range 5-1/2 runs from high to low"):
        JobSpec.load(f)


@pytest.mark.parametrize(
    "cron",
    ["0 0 * * 1-5", "0 0 * * 5-7", "0 0 * * 0-7", "0 0 * * sun-7", "0 0 * * sun-sat",
     "0 0 * * 1-5/2", "@daily", "0 9-17 1-15 jan-jun mon-fri"],
)  # fmt: skip
def test_ranges_written_low_to_high_still_load(tmp_path, cron):
    """`7` is Sunday too: `5-7` is Friday to Sunday, `0-7` every day."""
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron=cron))
    assert JobSpec.load(f).options.schedule.cron == cron


def test_jobs_submit_refuses_it_and_registers_nothing(tmp_path, wt_env):
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron="0 0 * * 5-1"))
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", str(f)], env=wt_env, capture_output=True, text=True
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == (
        f"{f}:5: schedule.cron: '0 0 * * 5-1': day-of-week range 5-1 runs from high to low, "
        "which cron refuses (it would wrap around past 6): write it low to high, as 5-6,0-1"
    )
    listed = subprocess.run(
        ["worldtrace", "jobs", "list", "--json"], env=wt_env, capture_output=True, text=True
    )
    assert json.loads(listed.stdout)["schedules"] == []


def test_a_schedule_registered_before_the_check_is_said_not_run(store):
    """A `jobs.db` whose schedule was registered when such a range still loaded: the
    scheduler enqueues nothing from it and says what to do, once; the others run."""
    js = open_job_store(store.jobs_db)
    t0 = datetime(2026, 5, 1, 10, 7, tzinfo=timezone.utc)  # a Friday
    tasks = [{"id": "t", "actions": ["ls\n"]}]
    for name in ("wrapped", "fine"):
        spec = JobSpec.from_dict({"name": name, "schedule": {"cron": "* * * * *"}, "tasks": tasks})
        register(js, spec, StillClock(t0))
    with sqlite3.connect(store.jobs_db) as c:  # as an earlier version stored it
        c.execute(
            "UPDATE schedules SET spec_json = replace(spec_json, '* * * * *', '* * * * 5-1'),"
            " cron = '* * * * 5-1' WHERE schedule_id = 'wrapped'"
        )
    said = []
    s = Scheduler(
        js, StillClock(t0.replace(minute=30)), on_problem=lambda n, r: said.append((n, r))
    )
    [job_id] = s.tick()
    assert js.job(job_id)["name"] == "fine"
    assert s.tick() == []  # said once, not at every tick
    [(name, reason)] = said
    assert name == "wrapped"
    assert reason.startswith("is not run: its schedule no longer checks (schedule.cron: ")
    assert "day-of-week range 5-1 runs from high to low" in reason
    assert reason.endswith(
        "fix the job file and submit it again, or `worldtrace jobs unschedule wrapped`"
    )
    assert [j["name"] for j in js.jobs()] == ["fine"]


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("60 0 * * *", "minute 60 is out of range: it takes 0-59"),
        ("0 24 * * *", "hour 24 is out of range: it takes 0-23"),
        ("0 0 0 * *", "day-of-month 0 is out of range: it takes 1-31"),
        ("0 0 * 13 *", "month 13 is out of range: it takes 1-12"),
        ("0 0 * * 8", "day-of-week 8 is out of range: it takes 0-6 (or 7: Sunday)"),
        ("0 0-30 * * *", "hour 30 is out of range: it takes 0-23"),
        ("0 0 * *", "has 4 fields: cron takes five (minute hour day-of-month month day-of-week)"),
    ],
)
def test_a_value_out_of_its_range_names_the_field(tmp_path, cron, said):
    """croniter said only `not a cron expression: '60 0 * * *'`."""
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron=cron))
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    assert str(exc.value) == f"{f}:5: schedule.cron: {cron!r}" + (
        f" {said}" if said.startswith("has") else f": {said}"
    )


def test_a_running_scheduler_runs_the_schedule_once_its_file_is_submitted_again(store):
    """The warning says to fix the job file and submit it again; a scheduler that was
    running kept the name set aside, and never ran the mended schedule until restarted."""
    js = open_job_store(store.jobs_db)
    t0 = datetime(2026, 5, 1, 10, 7, tzinfo=timezone.utc)
    spec = JobSpec.from_dict(
        {"name": "nightly", "schedule": {"cron": "* * * * *"}, "tasks": [{"id": "t", "actions": ["ls\n"]}]}
    )  # fmt: skip
    register(js, spec, StillClock(t0))
    with sqlite3.connect(store.jobs_db) as c:  # as an earlier version stored it
        c.execute("UPDATE schedules SET spec_json = replace(spec_json, '* * * * *', '* * * * 5-1')")
    clock = StillClock(t0 + timedelta(minutes=5))
    said = []
    s = Scheduler(js, clock, on_problem=lambda n, r: said.append(n))
    assert (s.tick(), s.tick(), said) == ([], [], ["nightly"])
    register(js, spec, clock)  # mended, submitted again
    clock.t += timedelta(minutes=2)
    [job_id] = s.tick()
    assert js.job(job_id)["schedule_id"] == "nightly" and said == ["nightly"]


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("5-5 * * * *", "minute range 5-5 is 5 alone, which croniter would read as * (every minute): write 5"),
        ("0 3-3 * * *", "hour range 3-3 is 3 alone, which croniter would read as * (every hour): write 3"),
        ("0 3-3/2 * * *", "hour range 3-3/2 is 3 alone, which croniter would read as */2: write 3"),
        ("0 0 * feb-feb *", "month range feb-feb is feb alone, which croniter would read as * (every month): write feb"),
        ("0 0 * * 7-7", "day-of-week range 7-7 is Sunday alone, which croniter would read as * (every day-of-week): write 0 (or 7)"),
        ("0 0 * * 7-0", "day-of-week range 7-0 is Sunday alone, which croniter would read as * (every day-of-week): write 0 (or 7)"),
        ("0 0 * * 7-1", "day-of-week range 7-1 runs from high to low, which cron refuses: write it low to high, as 0-1"),
    ],
)  # fmt: skip
def test_a_range_of_one_value_is_refused_not_read_as_every_value(tmp_path, cron, said):
    """croniter (7.0) reads a range whose ends are equal as `*`: `5-5 * * * *` ran every
    minute, `0 3-3 * * *` every hour, `0 0 * * 7-7` every day."""
    from croniter import croniter

    if "3-3 " in cron or cron.startswith("5-5"):  # the misreading this guards against
        field = 1 if "3-3" in cron else 0
        assert croniter.expand(cron)[0][field] == ["*"]
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron=cron))
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    assert str(exc.value) == f"{f}:5: schedule.cron: {cron!r}: {said}"
