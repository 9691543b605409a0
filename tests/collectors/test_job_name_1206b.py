"""Found (jobs hunt 12-06b): a job name starting with `.` or `-` (or holding a letter
outside ASCII) was refused as "must be 1-100 letters, digits, '.', '_' or '-'", which the
name was: the rule for the first character went unsaid."""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobspec import JobSpec


@pytest.mark.parametrize("name", [".hidden", "-x", "café"])
def test_a_refused_name_is_told_the_whole_rule(name):
    job = {
        "name": name,
        "sandbox": {"kind": "terminal"},
        "tasks": [{"id": "t", "actions": ["id\n"]}],
    }
    with pytest.raises(ValueError) as err:
        JobSpec.from_dict(job)
    said = f"{name!r} must be 1-100 ASCII letters, digits, '.', '_' or '-', the first a letter"
    assert said in str(err.value), str(err.value)


def test_a_name_of_the_rule_is_taken():
    job = {
        "name": "a.b_c-9",
        "sandbox": {"kind": "terminal"},
        "tasks": [{"id": "t", "actions": ["id\n"]}],
    }
    assert JobSpec.from_dict(job).name == "a.b_c-9"
