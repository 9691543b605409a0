"""A Ctrl-C that lands while a library imports a module (found 2026-12-06, CI of 886a40e:
`export` stopped just after it began writing said "the export was complete when the stop
came"). pyarrow imports pandas on its first use from C++ (`ChunkedArray.to_numpy`, as
`pipelines.corpus.TemplateCounts` calls it) and takes any failure of that import, the
interrupt raised inside it included, for "no pandas": the stop was dropped and the command
ran to its end. Real pyarrow and pandas in a fresh interpreter; the signal is sent by the
import system's own hook the moment pandas starts importing, so it lands there every run. The CLI-level
reproduction is `test_interrupts_1203b.py::test_an_interrupted_export_keeps_the_earlier_export_and_says_so`
(its Ctrl-C comes as the staging directory appears: failed 2 of 2 runs here before)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

LANDS_IN_PANDAS_IMPORT = textwrap.dedent(
    """
    import contextlib, importlib.abc, signal, sys
    from worldtrace.errors import cli_stops, interrupts
    from worldtrace.schemas.store import read_parquet

    class CtrlCWhilePandasImports(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "pandas.core":  # well inside `import pandas`
                signal.raise_signal(signal.SIGINT)
            return None

    table = read_parquet(sys.argv[1], ["key"])
    assert "pandas" not in sys.modules  # the first use of pandas is the one below
    sys.meta_path.insert(0, CtrlCWhilePandasImports())
    cli_stops()
    with interrupts(lambda: "what is kept") if sys.argv[2] == "block" else contextlib.nullcontext():
        table["key"].to_numpy()  # pyarrow's C++ imports pandas
        print("went on", flush=True)
    """
)


@pytest.mark.parametrize("handler", ["block", "cli"])
def test_a_stop_inside_a_librarys_import_of_pandas_stops_the_command(tmp_path, handler):
    """`block`: a command's `interrupts` block (export, process, import); `cli`: the CLI's
    own handler, outside any block (`stats`, `report`). Before: "went on", the block's
    work done, the stop said only at its end."""
    keys = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"key": pa.array(range(5), pa.uint64())}), keys)
    r = subprocess.run(
        [sys.executable, "-c", LANDS_IN_PANDAS_IMPORT, str(keys), handler],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "went on" not in r.stdout, r.stdout + r.stderr
    if handler == "block":
        assert r.returncode == 130, r.stderr
        assert r.stderr.splitlines() == ["interrupted (Ctrl-C): what is kept"], r.stderr
    else:  # the CLI's handler raised it where the main thread was, as Python's own does
        assert r.stderr.rstrip().splitlines()[-1] == "KeyboardInterrupt: Ctrl-C", r.stderr


STOP_IN_A_MODULE = textwrap.dedent(
    """
    import signal, sys
    from worldtrace.errors import interrupts

    sys.path.insert(0, sys.argv[1])
    with interrupts(lambda: "what is kept"):
        import slow_to_load  # its body gets the Ctrl-C
        print("went on", flush=True)
    """
)


def test_a_stop_inside_an_import_statement_is_raised_at_once(tmp_path):
    """Found by the 12-06 hunt (s) after the fix above, which first waited for the
    outermost import: a Ctrl-C as `process` loaded Beam (`options.resolve` imports
    `pipelines.process`) waited 1-3.7 s for the whole import. An import statement hands
    the interrupt on: it is raised where it lands."""
    (tmp_path / "slow_to_load.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGINT)\nprint('module went on', flush=True)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", STOP_IN_A_MODULE, str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 130, r.stderr
    assert r.stdout == "", r.stdout  # neither the module's rest nor the block's
    assert r.stderr.splitlines() == ["interrupted (Ctrl-C): what is kept"], r.stderr


WAITS_ON_A_JOB = textwrap.dedent(
    """
    import threading, sys
    from worldtrace.errors import interrupts
    from worldtrace.schemas.threads import DaemonPool

    never, running = threading.Event(), threading.Event()
    with interrupts(lambda: "what is kept"):
        with DaemonPool(1, "encode") as pool:
            job = pool.submit(lambda: (running.set(), never.wait()))  # a tokenizer call
            pool.submit(print, "the queued job ran", flush=True)
            running.wait()
            print("waiting", flush=True)
            job.result()
    """
)


def test_a_stop_does_not_wait_for_the_job_a_thread_runs(tmp_path):
    """Found by the 12-06 hunt (s): a Ctrl-C of `export` exited 1.9-6.9 s late on large
    records, `doctor` up to 2.5 s: `ThreadPoolExecutor` leaving its block waits for the
    running job (the encode thread's tokenizer call, `samples.SampleBuilder.samples`; a
    check's `chromium --version`), runs the queued ones, and joins its threads again at
    exit. A job that never ends shows it: the process exits on the stop, the queued job
    never runs. (With the executor the process never exits.)"""
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITS_ON_A_JOB],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "waiting\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "the queued job ran" not in out, out
    assert err.splitlines() == ["interrupted (Ctrl-C): what is kept"], err
