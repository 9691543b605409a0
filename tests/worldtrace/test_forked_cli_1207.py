"""The suite's runs of the console script forked from a loaded process (tests/cli_zygote.py)
answer as the console script started by a user does: the same status, stdout and stderr
for a command that works, one refused by click, one that fails in our code, one that
reads its stdin, one run in another working directory, with `check=True`; and a run
that asks the interpreter for something at its start is not forked."""

from __future__ import annotations

import os
import subprocess

import pytest

from ..conftest import FORKED_CLI, REAL_RUN, VENV_BIN, cli_env

FORKED = FORKED_CLI.routed(REAL_RUN)  # as conftest routes `subprocess.run`, WT_FORKED_CLI or not
REAL = REAL_RUN


def both(args, **kw):
    return FORKED(args, **kw), REAL(args, **kw)


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path / "store")


@pytest.mark.parametrize(
    "args",
    [
        ["worldtrace", "jobs", "list"],
        ["worldtrace", "nope"],  # click's refusal, exit 2
        ["worldtrace", "query", "SELECT * FROM nothing_here"],  # ours, exit 1
        [str(VENV_BIN / "worldtrace"), "query", "--format", "csv", "SELECT 1 AS x, 'é' AS y"],
    ],
)
def test_a_forked_run_answers_as_the_console_script(env, args):
    forked, real = both(args, capture_output=True, text=True, env=env, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert forked.args == args


def test_stdin_cwd_bytes_and_check_are_a_runs_own(env, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "x.jsonl").write_text('{"trajectory_id": 3}\n')
    kw = dict(capture_output=True, env=env, cwd=tmp_path / "sub")
    forked, real = both(["worldtrace", "validate", "../x.jsonl"], **kw)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert forked.returncode == 1 and b"../x.jsonl:line 1: domain: missing" in forked.stdout
    read = FORKED(
        ["worldtrace", "import", "--format", "openai", "/dev/stdin"],
        input='{"messages": 3}\n', capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert read.returncode == 1
    assert "/dev/stdin: invalid: messages: expected a list, got 3" in read.stderr, read
    with pytest.raises(subprocess.CalledProcessError) as e:
        FORKED(["worldtrace", "nope"], capture_output=True, env=env, check=True)
    assert e.value.returncode == 2 and b"No such command 'nope'" in e.value.stderr


def test_what_the_interpreter_reads_as_it_starts_is_never_forked(env):
    """A run under -X importtime's variable lists what it loads: a forked one would list
    nothing of what the server loaded."""
    r = FORKED(
        ["worldtrace", "jobs", "list"],
        capture_output=True, text=True, env=dict(env, PYTHONPROFILEIMPORTTIME="1"),
    )  # fmt: skip
    assert r.returncode == 0 and "import time:" in r.stderr and "click" in r.stderr
    assert os.environ.get("PYTHONPROFILEIMPORTTIME") is None


def test_a_run_past_its_timeout_is_killed_as_subprocess_kills_it(env):
    """A query that would run for minutes, given 2 s: TimeoutExpired, as from
    `subprocess.run`; the next run is answered (the server goes on)."""
    args = ["worldtrace", "query", "SELECT count(*) FROM range(100000000000)"]
    with pytest.raises(subprocess.TimeoutExpired):
        FORKED(args, capture_output=True, text=True, env=env, timeout=2)
    r = FORKED(["worldtrace", "jobs", "list"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout == "no jobs\n", r
