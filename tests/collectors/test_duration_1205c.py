"""Found (hunt 1205c): a keystroke action's `duration: .inf` passed `jobs submit --dry-run`
and `collect` reported the episode a success, but its arguments held `Infinity`, which is
no JSON: `validate` refused the shard and `process` dropped the episode as a reject;
`duration: .nan` passed too and then failed every attempt with `ValueError: Invalid value
NaN (not a number)`, naming no file, line or field; `collect --duration nan` alike. Now
refused before anything runs. Real parts: the `worldtrace` commands a user runs."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from worldtrace.schemas.actions import keystrokes


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


JOB = """name: dinf
sandbox: {{kind: terminal, docker: {{step_timeout: 3}}}}
tasks:
  - id: t
    actions:
      - "echo hi\\n"
      - {{keystrokes: "echo y\\n", duration: {value}}}
"""


@pytest.mark.parametrize(("value", "shown"), [(".inf", "inf"), (".nan", "nan"), ("-.inf", "-inf")])
@pytest.mark.parametrize("command", [["collect"], ["jobs", "submit", "--dry-run"]])
def test_a_duration_that_is_no_finite_number_is_refused_at_load(
    tmp_path, wt_env, command, value, shown
):
    f = tmp_path / "job.yaml"
    f.write_text(JOB.format(value=value))
    r = wt(wt_env, *command, str(f))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == (
        f"{f}:7: tasks[0].actions[1]: duration must be a finite number of seconds >= 0, got {shown}"
    ), r.stderr
    assert not (Path(wt_env["WORLDTRACE_STORE"]) / "raw").exists()  # nothing ran


@pytest.mark.parametrize(
    ("value", "said"),
    [("nan", "nan is not a number of seconds"), ("inf", "inf is not in the range 0<=x<inf")],
)
def test_collect_duration_option_refuses_nan_and_infinity(wt_env, value, said):
    r = wt(wt_env, "collect", "--sandbox", "docker", "--keys", "echo", "--duration", value)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"Invalid value for '--duration': {said}" in r.stderr


@pytest.mark.parametrize("bad", [math.inf, math.nan, -1.0])
def test_keystrokes_refuse_what_json_cannot_hold(bad):
    """The constructor every path builds a terminal action with: its arguments are JSON."""
    with pytest.raises(ValueError, match="duration must be a finite number of seconds >= 0"):
        keystrokes("ls\n", bad)
    assert keystrokes("ls\n", 2.5).arguments_json == '{"duration": 2.5, "keystrokes": "ls\\n"}'
