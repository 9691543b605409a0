"""Cron as Vixie cron reads it (hunt 1205g): croniter's random `R` (and hashed `H`) is
refused, not run at a minute drawn anew each time the next run is computed (twice in an
hour, or not at all); the two day fields must both match when either begins with `*`
(`0 0 */2 * 1`: the odd Mondays), where croniter ran every odd day and every Monday."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.scheduler import next_after
from worldtrace.schemas.parsing import ConfigError

from .test_cron_ranges_1204f import JOB

T0 = datetime(2026, 12, 5, 20, 0, tzinfo=timezone.utc)  # a Saturday


def runs(cron: str, n: int) -> list[str]:
    """The schedule's next `n` run days after T0 (`next_after`, the scheduler's own)."""
    schedule = JobSpec.from_dict(
        {"name": "d", "schedule": {"cron": cron}, "tasks": [{"id": "t", "actions": ["ls\n"]}]}
    ).options.schedule
    out, t = [], T0
    for _ in range(n):
        t = next_after(schedule, t)
        out.append(t.strftime("%a %d %b"))
    return out


@pytest.mark.parametrize("cron", ["R * * * *", "0 R * * *", "0 0 * * H", "r(0-30) * * * *"])
def test_a_random_or_hashed_field_is_refused_naming_it(tmp_path, cron):
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(cron=cron))
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    assert f"{f}:5: schedule.cron: " in str(exc.value)
    assert "croniter's random or hashed value, which cron has not" in str(exc.value)


def test_a_starred_day_field_beside_the_other_day_field_needs_both():
    assert runs("0 0 */2 * 1", 3) == ["Mon 07 Dec", "Mon 21 Dec", "Mon 11 Jan"]
    assert runs("0 0 * * */3", 3) == ["Sun 06 Dec", "Wed 09 Dec", "Sat 12 Dec"]


def test_two_restricted_day_fields_still_take_either():
    """Vixie cron ORs them when neither begins with `*`: the 1st and every Monday."""
    assert runs("0 0 1 * 1", 5) == ["Mon 07 Dec", "Mon 14 Dec", "Mon 21 Dec", "Mon 28 Dec", "Fri 01 Jan"]  # fmt: skip
    assert runs("30 6 * * *", 2) == ["Sun 06 Dec", "Mon 07 Dec"]
    assert next_after(JobSpec.from_dict({"name": "d", "schedule": {"cron": "@daily"}, "tasks": [{"id": "t", "actions": ["ls\n"]}]}).options.schedule, T0) == T0 + timedelta(hours=4)  # fmt: skip
