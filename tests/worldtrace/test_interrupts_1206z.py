"""A Ctrl-C or SIGTERM at the two ends of a command (hunt 1206z): while the console
script still loads the CLI (Python's `KeyboardInterrupt` traceback, or a silent SIGTERM,
where a moment later one line and 130 or 143), and just after `worker` printed its
summary (130 said as `stopped before it ended`, a traceback, or a silent death by the
signal, where a stop is the worker's ordinary end: exit 0). Real console script, real
signals; each stop comes when the test reads that the command reached the point (an
import line of `-X importtime`, the summary line), never after a sleep. A stop there
races the command's next steps, so each case runs until it met the window it is about,
every run held to one of the clean outcomes."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from worldtrace.cli import cli
from worldtrace.errors import NOT_STARTED

from ..conftest import VENV_BIN
from .test_interrupts_1205c import ended, send

NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
SCRIPT = str(VENV_BIN / "worldtrace")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| *(\S+)$")
"""A line of Python's `-X importtime` (PYTHONPROFILEIMPORTTIME), printed as a module's
import ends (its name indented by its depth), after one header line."""
LOADING_TRIES = 20
"""Runs of a case until one was stopped while loading (the first nearly always is)."""
WORKER_RUNS = 6
"""Runs of the worker case: the old handling failed ~60% of them."""


def stopped_loading(env: dict[str, str], args: list[str], sig: int) -> tuple[int, str, str]:
    """`worldtrace ARGS` stopped by `sig` once it imported click, the first package the
    CLI loads (three quarters of the loading come after it): status, stdout, stderr."""
    env = dict(env, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen(
        [SCRIPT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    seen = []
    for line in proc.stderr:
        seen.append(line)
        m = IMPORT_LINE.match(line.rstrip("\n"))
        if m and m.group(1) == "click":
            send(proc, sig)
            break
    out, err = ended(proc)
    return proc.returncode, out, "".join(seen) + err


@pytest.mark.parametrize(
    ("args", "sig"),
    [(["--help"], signal.SIGINT), (["stats"], signal.SIGINT), (["stats"], signal.SIGTERM)],
    ids=["help-INT", "stats-INT", "stats-TERM"],
)
def test_a_stop_while_the_cli_loads_says_one_line(wt_env, args, sig):
    """Found: the CLI's modules load for a noticeable fraction of a second before
    `cli_stops` takes the stop signals; a Ctrl-C then printed Python's traceback
    (`File ".../bin/worldtrace", line 3, in <module> ... KeyboardInterrupt`, status -2)
    and a SIGTERM ended it silently. Now `worldtrace.entry` takes them first."""
    loading = 0
    for _ in range(LOADING_TRIES):
        status, out, err = stopped_loading(wt_env, args, sig)
        modules = [m.group(1) for m in map(IMPORT_LINE.match, err.splitlines()) if m]
        said = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("import time:")]
        if "worldtrace.cli" not in modules:  # stopped while the CLI loaded
            loading += 1
            assert status == 128 + sig, err
            assert said == [f"interrupted ({NAMES[sig]}): {NOT_STARTED}"], err
            assert out == ""
            break
        # loaded: the stop came to the command (`cli_stops`), or after it ended
        assert "Traceback" not in err, err
        assert status in (0, 128 + sig), err
        if status:
            assert len(said) == 1 and said[0].startswith(f"interrupted ({NAMES[sig]}): "), err
    assert loading, f"no stop of {LOADING_TRIES} came while the CLI loaded"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stop_just_after_the_worker_summary_keeps_its_status(wt_env, sig):
    """Found: a Ctrl-C right after `worker` printed its summary (its attempts finished or
    given back, its stop recorded) ended it with 130 and `interrupted (Ctrl-C):
    worldtrace worker stopped before it ended` (raised in the summary's own write), with a
    traceback from `run_guarded`, or killed in silence by the signal (status -2, 130 in a
    shell) once the interpreter's shutdown had put its default action back. A stop is
    the worker's ordinary end (exit 0, docs/collect.md "Stopping"), before its summary as
    after: now it exits with the summary's status, saying nothing more."""
    for _ in range(WORKER_RUNS):
        proc = subprocess.Popen(
            [SCRIPT, "worker"], env=wt_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if " episode attempt(s) run " in line:  # the summary: the worker has ended
                send(proc, sig)
                break
        out, err = ended(proc)
        assert (proc.returncode, err) == (0, ""), (proc.returncode, err)
        summary = "".join(lines) + out
        assert summary.splitlines()[-1].endswith(
            ": 0 episode attempt(s) run (0 failed), 0 released, 0 lost, 0 worker error(s)"
        ), summary


def test_a_worker_run_in_a_test_leaves_its_signal_handling(tmp_path: Path):
    """The worker's end ignores stops only in the `worldtrace` process (`cli.main`): run
    by a CliRunner, it leaves the test process's Ctrl-C as it was."""
    before = {s: signal.getsignal(s) for s in NAMES}
    r = CliRunner().invoke(cli, ["worker", "--store", str(tmp_path / "s"), "--create"], obj={})
    assert r.exit_code == 0, r.output
    assert {s: signal.getsignal(s) for s in NAMES} == before


def test_the_cli_names_the_redaction_config_variable_as_the_rules_do():
    """The CLI reads `$WORLDTRACE_REDACT_CONFIG` without loading the rules' module (which
    loads pyarrow and DuckDB) to learn its name: both names are one."""
    from worldtrace.schemas.redact_rules import CONFIG_ENV

    from worldtrace.cli import REDACT_CONFIG_ENV

    assert REDACT_CONFIG_ENV == CONFIG_ENV
