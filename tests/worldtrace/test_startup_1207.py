"""The job commands that read the job store load no pyarrow (with numpy, ~0.15 s of a
~0.6 s command; `jobs` ran 228 times in one test suite). They loaded it through the
schemas package, which imported its Parquet store on first touch, and through the
redaction rules a policy module imported for its own messages. Nor do they load the job
file's parsing (pydantic, the sandboxes' configs: 0.39 -> 0.14 s of CPU for `jobs list`),
which the job store imported for a type. `validate` of shards loads no importers (0.8 ->
0.34 s). Checked on the real console script under `-X importtime` (`loaded_by`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import ShardWriter, Store

from ..conftest import cli_env, wt
from .test_no_pandas_1206w import loaded_by

JOB = Path(__file__).resolve().parents[2] / "examples" / "terminal-basics.yaml"


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    """A store whose job store holds one queued job (submitted by the CLI)."""
    root = tmp_path_factory.mktemp("startup") / "store"
    r = wt(cli_env(root), "jobs", "submit", str(JOB))
    assert r.returncode == 0, r.stderr
    return root


@pytest.mark.parametrize(
    "args",
    [("jobs", "list", "--json"), ("jobs", "show", "terminal-basics"), ("jobs", "cancel", "terminal-basics")],
    ids=["list", "show", "cancel"],
)  # fmt: skip
def test_job_store_commands_load_no_pyarrow(wt_env, submitted, tmp_path, args):
    root = tmp_path / "copy"
    shutil.copytree(submitted, root)
    r, modules = loaded_by(dict(wt_env, WORLDTRACE_STORE=str(root)), *args)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "terminal-basics" in r.stdout, r.stdout
    assert "worldtrace.collectors.jobstore_sql" in modules  # the listing is the command's
    assert not {m for m in modules if m == "pyarrow" or m.startswith(("pyarrow.", "numpy"))}
    assert not {m for m in modules if m.startswith(("pydantic", "worldtrace.collectors.jobspec"))}


def test_validate_of_shards_loads_no_importers(wt_env, tmp_path):
    """The importers (and the redaction they load) tell a foreign session or document
    from records; a Parquet shard is records by its format."""
    root = tmp_path / "store"
    with ShardWriter(Store.at(root).raw / "a") as w:
        w.write(generate(SyntheticConfig(n=3, seed=5)))
    r, modules = loaded_by(wt_env, "--store", str(root), "validate", str(root / "raw"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "1 file(s), 3 record(s), 0 problem(s)" in r.stderr
    assert "worldtrace.schemas.validate" in modules  # the check is the command's
    assert not {m for m in modules if m.startswith(("worldtrace.collectors.importers", "pydantic"))}
    assert "worldtrace.schemas.redact" not in modules


def test_the_schemas_package_still_gives_every_name():
    """Its names load on first use now; each is the object it always was, `validate` the
    function (a submodule of that name is bound to the package when it loads)."""
    code = (
        "import json, sys, worldtrace.schemas as S\n"
        "import worldtrace.schemas.validate\n"
        "from worldtrace.schemas import arrow, store, validate\n"
        "print(json.dumps([\n"
        "    [n for n in S.__all__ if not hasattr(S, n)],\n"
        "    validate is S.validate is sys.modules['worldtrace.schemas.validate'].validate,\n"
        "    S.Store is store.Store and S.ShardWriter is store.ShardWriter,\n"
        "    S.TRAJECTORY_SCHEMA is arrow.TRAJECTORY_SCHEMA,\n"
        "]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [[], True, True, True]
