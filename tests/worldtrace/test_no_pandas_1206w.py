"""Reading commands load no pandas: pyarrow imported it (0.2-0.3 s of CPU, a third of
`query` on a small store) to ask whether a value it converts is a pandas object, which
no command hands it (`cli.pyarrow_without_pandas`). Checked on the real console script
under `-X importtime`, which lists every module a process loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import ShardWriter, Store

from ..conftest import VENV_BIN, cli_env, wt


def loaded_by(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """The console script's result, and the modules it imported or tried to (a refused
    import is listed too)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", str(VENV_BIN / "worldtrace"), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    modules = {
        line.rpartition("|")[2].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }
    return r, modules


@pytest.fixture(scope="module")
def processed(tmp_path_factory) -> Store:
    store = Store.at(tmp_path_factory.mktemp("no-pandas") / "store")
    with ShardWriter(store.raw / "a") as w:
        w.write(generate(SyntheticConfig(n=30, seed=11)))
    r = wt(cli_env(store.root), "process")
    assert r.returncode == 0, r.stderr
    return store


@pytest.mark.parametrize(
    "args, says",
    [
        (("query", "SELECT count(*) AS n FROM trajectories", "--format", "csv"), "n\n"),
        (("stats",), "trajectories"),
        (("doctor", "--store-only"), "every shard under"),
        (("export", "-o", "{tmp}/out"), "exported 30 samples"),
        (("import", "{tmp}/a.jsonl"), "import: 1 file(s) -> "),
    ],
    ids=["query", "stats", "doctor", "export", "import"],
)
def test_commands_without_beam_load_no_pandas(wt_env, processed, tmp_path, args, says):
    """pyarrow asks from Cython (`pa.array`) and from C++ (its numpy conversions:
    `validate`'s column masks in `import`, the template counts in `export`)."""
    import shutil

    from worldtrace.schemas.store import write_jsonl

    store = Store.at(tmp_path / "copy")
    shutil.copytree(processed.root, store.root, symlinks=True)
    write_jsonl(tmp_path / "a.jsonl", generate(SyntheticConfig(n=3, seed=12)))
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r, modules = loaded_by(env, *(a.format(tmp=tmp_path) for a in args))
    assert r.returncode == 0, r.stderr[-2000:]
    assert says in r.stdout
    assert "pyarrow" in modules  # the listing is the command's own
    # pyarrow's question itself is listed (`pandas`, refused in microseconds); pandas
    # loaded would list its modules
    assert not {m for m in modules if m.startswith("pandas.")}


def test_process_loads_beam_without_pandas(wt_env, processed, tmp_path):
    """Beam imports pandas to probe for it (its typehints' batch converters, textio's
    DataFrame transforms: 0.3-0.4 s of a small `process`' ~2 s); the console script
    answers "no pandas" and the run is the run it was: the same counts, every record
    kept."""
    import shutil

    import pyarrow.parquet as pq

    store = Store.at(tmp_path / "copy")
    shutil.copytree(processed.root, store.root, symlinks=True)
    before = pq.read_table(store.table("trajectories")).sort_by("trajectory_id")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r, modules = loaded_by(env, "process", "--rebuild")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "in 30 = kept 30 + filtered 0 + duplicates 0 + rejected 0" in r.stdout, r.stdout
    assert "apache_beam.typehints" in modules and "apache_beam.io.textio" in modules
    assert not {m for m in modules if m.startswith("pandas.")}
    after = pq.read_table(store.table("trajectories")).sort_by("trajectory_id")
    assert after.column("trajectory_id").equals(before.column("trajectory_id"))


def test_a_library_user_s_pandas_objects_still_read_as_pandas():
    """The answer is the console script's alone: a command run in a process of one's own
    (click's CliRunner, as a notebook may) leaves pyarrow seeing a pandas Series made
    after it (NaN read as null, as pandas means it)."""
    code = (
        "from click.testing import CliRunner\n"
        "import worldtrace.cli\n"
        "assert CliRunner().invoke(worldtrace.cli.cli, ['version']).exit_code == 0\n"
        "import pandas, pyarrow as pa\n"
        "print(pa.array(pandas.Series([1.0, float('nan')])).null_count)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


def test_template_counts_with_a_null_are_a_damaged_file(wt_env, processed, tmp_path):
    """The counts are read from their buffers now: a count that is null (a file not
    written by `process`) is named with the fix, not read as a number."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq
    from worldtrace.schemas import fields as F

    store = Store.at(tmp_path / "copy")
    shutil.copytree(processed.root, store.root, symlinks=True)
    path = store.processed / F.PROCESS_INDEX / F.TEMPLATE_COUNTS_FILE
    t = pq.read_table(path)
    counts = pa.array([None, *t["count"].to_pylist()[1:]], t.schema.field("count").type)
    pq.write_table(t.set_column(t.schema.get_field_index("count"), "count", counts), path)
    r = wt(cli_env(store.root), "export", "-o", str(tmp_path / "o"))
    assert r.returncode == 1, r.stderr
    assert f"{path}: a int64 column with 1 null(s): not counts" in r.stderr, r.stderr
    assert "process --rebuild" in r.stderr and "Traceback" not in r.stderr
