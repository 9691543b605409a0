"""Host paths of a job file are checked when it is loaded (submit, collect): a missing
one is refused naming its line and key, a relative one starts at the directory
`worldtrace` runs in and is kept absolute, so a worker started anywhere finds it; a path
overlapping the store is refused naming its key and line too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas import read_records
from worldtrace.schemas.parsing import ConfigError

PROJECT = Path(__file__).resolve().parents[2]

MCP_JOB = """\
name: m
sandbox:
  kind: mcp
  command: [mcp-server-time]
  workdir:
    copy: {copy}
  cwd: {cwd}
policy: scripted
tasks: [{{id: t, instruction: x, actions: [{{tool: x, arguments: {{}}}}]}}]
"""


def _load_errors(path: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(path)
    return str(exc.value)


def wt(env, *args, cwd=None):
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_missing_mcp_host_paths_are_refused_naming_line_and_key(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(MCP_JOB.format(copy="/nonexistent/dir", cwd="/nonexistent2"))
    err = _load_errors(f)
    assert f"{f}:6: sandbox.workdir.copy: /nonexistent/dir does not exist" in err
    assert f"{f}:7: sandbox.cwd: /nonexistent2 does not exist" in err
    (tmp_path / "file").write_text("x")
    f.write_text(MCP_JOB.format(copy=tmp_path / "file", cwd="/"))
    assert f"sandbox.workdir.copy: {tmp_path / 'file'} is not a directory" in _load_errors(f)


@pytest.mark.parametrize("path", ["/", "/etc", "/proc/../etc"])
def test_system_directories_are_not_copied_into_a_workdir(tmp_path, path):
    f = tmp_path / "job.yaml"
    f.write_text(MCP_JOB.format(copy=path, cwd=tmp_path))
    assert "sandbox.workdir.copy:" in (err := _load_errors(f))
    assert "cannot be copied into a work directory" in err


def test_a_cwd_with_a_placeholder_is_the_episodes_and_not_checked(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(MCP_JOB.format(copy=tmp_path, cwd='"{workdir}/sub"'))
    assert JobSpec.load(f).sandbox.config.cwd == "{workdir}/sub"


def test_relative_host_paths_start_at_the_current_directory_and_are_kept_absolute(
    tmp_path, monkeypatch
):
    (tmp_path / "data" / "notes").mkdir(parents=True)
    (tmp_path / "jobs").mkdir()
    f = tmp_path / "jobs" / "job.yaml"
    f.write_text(MCP_JOB.format(copy="data/notes", cwd="./data"))
    monkeypatch.chdir(tmp_path)
    spec = JobSpec.load(f)
    stored = json.loads(spec.to_json())["sandbox"]  # what jobs.db keeps
    assert stored["workdir"]["copy"] == str(tmp_path / "data" / "notes")
    assert stored["cwd"] == str(tmp_path / "data")
    monkeypatch.chdir("/")  # a worker elsewhere reads the same job
    assert JobSpec.from_dict(json.loads(spec.to_json())) == spec
    monkeypatch.chdir(tmp_path / "jobs")  # relative to where worldtrace runs, not the file
    err = _load_errors(f)
    assert f"sandbox.workdir.copy: data/notes ({tmp_path}/jobs/data/notes) does not exist" in err


def test_submit_refuses_a_missing_path_and_queues_nothing(tmp_path, wt_env):
    f = tmp_path / "mcpbad.yaml"
    f.write_text(MCP_JOB.format(copy="/nonexistent/dir", cwd="/nonexistent2"))
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 1, r.stdout
    assert f"{f}:6: sandbox.workdir.copy: /nonexistent/dir does not exist" in r.stderr


def test_a_queued_example_runs_on_a_worker_started_elsewhere(tmp_path, wt_env):
    """examples/mcp-git.yaml (workdir.copy: examples/data/notes) submitted from the
    project root, run by a worker whose cwd is another directory."""
    r = wt(wt_env, "jobs", "submit", "examples/mcp-git.yaml", cwd=PROJECT)
    assert r.returncode == 0, r.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = wt(wt_env, "worker", cwd=elsewhere)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 episode attempt(s) run (0 failed)" in r.stdout, r.stdout
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    assert t.outcome.status == "success"
    assert "Add a todo item" in t.turns[4].observation.text  # committed in the copy


def test_a_path_overlapping_the_store_names_its_key_and_line(tmp_path, wt_env):
    store = Path(wt_env["WORLDTRACE_STORE"])
    (store / "raw").mkdir(parents=True)
    (tmp_path / "server").mkdir()
    f = tmp_path / "overlap.yaml"
    f.write_text(MCP_JOB.format(copy=store / "raw", cwd=tmp_path / "server"))
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f).check_store(store)
    expected = f"{f}:6: sandbox.workdir.copy: {store / 'raw'} overlaps the store {store}: refused"
    assert str(exc.value) == expected
    r = wt(wt_env, "jobs", "submit", str(f))  # the command adds the file name: lines kept
    assert r.returncode == 1 and r.stderr.strip() == expected
    f.write_text(MCP_JOB.format(copy=tmp_path / "server", cwd=store))
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(f))
    assert r.stderr.strip() == f"{f}:7: sandbox.cwd: {store} overlaps the store {store}: refused"


def test_a_missing_relative_repo_is_said_with_the_path_it_was_read_as(tmp_path, wt_env):
    """Hunt 1206: `examples/swe-fix.yaml` run from outside the project said
    `'examples/data/calc' is not a directory on this host`, not where it looked."""
    r = wt(wt_env, "jobs", "submit", "--dry-run", str(PROJECT / "examples" / "swe-fix.yaml"), cwd=tmp_path)  # fmt: skip
    looked = tmp_path / "examples" / "data" / "calc"
    assert r.returncode == 1 and f"'examples/data/calc' ({looked}) is not a directory on this host" in r.stderr, r.stderr  # fmt: skip
