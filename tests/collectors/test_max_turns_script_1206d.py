"""A script with exactly `max_turns` actions played them all: its episode is over, not
cut by `max_turns` (docs/collect.md: `incomplete` is for a policy "still playing when
`max_turns` ran out"). It was recorded `incomplete` with `stopped at max_turns`; a script
longer than `max_turns` still is.

Real parts: a real MCP server (mcp-server-time from the venv), `run_job`, a real store.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import run_job
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas import Store

TIME = {"kind": "mcp", "command": ["mcp-server-time", "--local-timezone", "Etc/UTC"]}


def convert(hour: int) -> dict:
    return {
        "tool": "convert_time",
        "arguments": {
            "source_timezone": "Europe/Paris",
            "time": f"{hour:02d}:00",
            "target_timezone": "Asia/Tokyo",
        },
    }


@pytest.mark.parametrize(("actions", "status", "turns"), [(3, "success", 3), (4, "incomplete", 3)])
def test_a_script_of_max_turns_actions_ends_as_success(tmp_path, actions, status, turns):
    store = Store.at(tmp_path / "store")
    spec = JobSpec.from_dict(
        {
            "name": "mt",
            "sandbox": TIME,
            "max_turns": 3,
            "tasks": [
                {
                    "id": "t",
                    "instruction": "Convert.",
                    "actions": [convert(h) for h in range(actions)],
                }
            ],
        }
    )
    [t] = run_job(spec, store.raw).trajectories
    assert len(t.turns) == turns
    assert t.outcome.status == status, t.outcome
