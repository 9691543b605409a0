"""Hunt 1206: `validate` passed over a store's own files only when it was given the store
(or a directory inside it): a project directory holding a store gave 141 false problems
(`processed/turns/...: not a trajectory shard`, `export/parquet/manifest.json: config:
unknown field`), and an export written outside the store (`export -o ex1`) 20 (its
manifest's fields, `unsupported schema version 'worldtrace.training/1'`, its shard `not a
trajectory shard`). A store is now met wherever the walk finds one, and an export is told
by its content (its manifest, and the shards the manifest lists), passed over with one
line saying so.

Real parts: the installed `worldtrace` console script; a store imported, processed and
exported by it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate

from ..conftest import VENV_BIN
from .test_cli_review_1203b_cmds import _records

WT = str(VENV_BIN / "worldtrace")
STORE_LINE = "of the store that hold no trajectories (manifests, processed turns, clusters and "


def wt(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WT, *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict]:
    """A store imported, processed and exported (Parquet and AgentWorldBench, into the
    store and outside it) by the CLI."""
    top = tmp_path_factory.mktemp("walk")
    (top / "oa.jsonl").write_text(_records(4))
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    env["WORLDTRACE_STORE"] = str(top / "store")
    for args in (
        ("--create", "import", str(top / "oa.jsonl")),
        ("process",),
        ("export",),
        ("export", "--format", "agentworldbench", "--split", "test=0.3"),
        ("export", "-o", str(top / "ex1")),
        ("export", "--format", "agentworldbench", "--split", "test=0.3", "-o", str(top / "ex2")),
    ):
        r = wt(env, *args)
        assert r.returncode == 0, (args, r.stderr)
    return top, env


def test_a_store_inside_the_directory_is_passed_over_as_the_store_itself(made, tmp_path):
    top, env = made
    own = wt(env, "validate", str(top / "store"))
    assert own.returncode == 0, own.stdout
    proj = tmp_path / "proj2"
    proj.mkdir()
    shutil.copytree(top / "store", proj / "worldtrace-data", symlinks=True)
    [ours] = generate(SyntheticConfig(n=1, seed=5))
    (proj / "records.jsonl").write_text(ours.to_json() + "\n")  # beside the store: checked
    r = wt(env, "validate", str(proj))
    assert r.returncode == 0, r.stdout
    assert r.stdout == ""
    [passed, counts] = r.stderr.splitlines()
    [n_own] = [x.split()[2] for x in own.stderr.splitlines() if x.startswith("passed over")]
    assert passed.startswith(f"passed over {n_own} file(s) {STORE_LINE}"), passed
    records = int(own.stderr.splitlines()[-1].split()[2])
    assert counts.endswith(f" {records + 1} record(s), 0 problem(s)"), counts
    # a problem beside the store, or in its trajectories, is still one
    (proj / "records.jsonl").write_text('{"schema_version": "worldtrace.trajectory/1"}\n')
    r = wt(env, "validate", "-q", str(proj))
    assert r.returncode == 1 and r.stdout.startswith(f"{proj / 'records.jsonl'}:line 1"), r.stdout


@pytest.mark.parametrize("name", ["ex1", "ex2"])
def test_an_export_outside_the_store_is_told_by_its_content(made, name):
    top, env = made
    ex = top / name
    r = wt(env, "validate", str(ex))
    assert r.returncode == 0, r.stdout
    assert r.stdout == ""
    listed = [
        m.parent / s["path"]
        for m in ex.rglob("manifest.json")
        for s in json.loads(m.read_text()).get("shards") or []
    ]
    n = len(list(ex.rglob("manifest.json"))) + len(listed)
    assert listed and n == len([f for f in ex.rglob("*") if f.is_file()])
    assert r.stderr.splitlines() == [
        f"passed over {n} file(s) of an export that hold no trajectories (manifests and the "
        f"shards they list: {ex}; `worldtrace export --verify DIR` checks an export); "
        "name one to check it",
        "0 file(s), 0 record(s), 0 problem(s)",
    ]
    # quiet: nothing at all
    assert (wt(env, "validate", "-q", str(ex)).stdout, r.returncode) == ("", 0)
    # named on its own, a file is checked whatever it is
    r = wt(env, "validate", str(ex / "manifest.json"))
    assert r.returncode == 1 and "unknown field" in r.stdout


def test_a_file_of_an_export_it_does_not_list_is_checked(made, tmp_path):
    top, env = made
    ex = tmp_path / "ex1"
    shutil.copytree(top / "ex1", ex)
    [shard] = ex.glob("*.parquet")
    shutil.copy(shard, ex / "stray.parquet")  # not in the manifest: checked
    (tmp_path / "ex1" / "notes").mkdir()
    (ex / "notes" / "manifest.json").write_text(json.dumps({"title": "mine"}))  # not ours
    r = wt(env, "validate", str(ex))
    assert r.returncode == 1
    assert f"{ex / 'stray.parquet'}: <schema>: not a trajectory shard" in r.stdout
    assert f"{ex / 'notes' / 'manifest.json'}: " in r.stdout
    assert r.stderr.startswith("passed over 2 file(s) of an export that hold no trajectories")
