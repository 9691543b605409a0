"""A worker stopped before its command starts (found by the 12-06 hunt, s): `worldtrace
worker` stopped in its first ~0.5 s (while the CLI loads, or before click reached the
command) exited 143 or 130 saying `worldtrace worker had not started its work`, where
docs/collect.md says a stop is a worker's ordinary end, exit 0, whenever it comes: a
supervisor that starts and at once stops a worker saw a failure. Other commands keep
130 / 143. Real interpreters, real signals, the CLI's own handlers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

WHILE_LOADING = textwrap.dedent(
    """
    import signal, sys
    sys.argv = ["worldtrace", *sys.argv[1:]]
    import worldtrace.entry  # takes the stop signals while the CLI loads
    signal.raise_signal(signal.SIGTERM)
    print("went on", flush=True)
    """
)

BEFORE_THE_COMMAND = textwrap.dedent(
    """
    import signal, sys
    import click
    from worldtrace.errors import run_guarded
    sys.argv = ["worldtrace", *sys.argv[1:]]

    @click.group()
    @click.option("--store")
    def cli(store):
        signal.raise_signal(signal.SIGTERM)  # as click parses, before any command's handling

    @cli.command()
    def worker(): print("worker ran")

    @cli.command()
    def stats(): print("stats ran")

    run_guarded(cli)
    """
)


@pytest.mark.parametrize("script", [WHILE_LOADING, BEFORE_THE_COMMAND], ids=["loading", "before"])
@pytest.mark.parametrize(
    "argv, status",
    [(["worker"], 0), (["--store", "s", "worker"], 0), (["--store", "worker", "stats"], 143),
     (["stats"], 143)],
    ids=["worker", "store-worker", "store-named-worker", "stats"],
)  # fmt: skip
def test_a_stop_before_a_worker_starts_is_its_ordinary_end(script, argv, status):
    r = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == status, r.stderr
    assert "ran" not in r.stdout and "went on" not in r.stdout, r.stdout
    [line] = [x for x in r.stderr.splitlines() if x]  # click closes a `^C` echo with a blank
    assert line.startswith("interrupted (SIGTERM): "), r.stderr
