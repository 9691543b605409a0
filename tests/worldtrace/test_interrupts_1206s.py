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
