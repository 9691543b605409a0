"""Found (hunt 1205f): `--store s1 ... --store ./s1` is one
directory, not two values; a missing job store named by $WORLDTRACE_JOBS says so."""

from __future__ import annotations

import subprocess

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")


def wt(env: dict, cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WT, *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_one_store_given_twice_spelled_two_ways_is_one_store(wt_env, tmp_path):
    (tmp_path / "s1").mkdir()
    (tmp_path / "s2").mkdir()
    r = wt(wt_env, tmp_path, "--store", "s1", "stats", "--store", "./s1/")
    assert r.returncode == 0, r.stderr
    r = wt(wt_env, tmp_path, "--store", "s1", "stats", "--store", "s2")
    assert r.returncode == 2 and "given twice with different values (s1, s2)" in r.stderr


def test_a_missing_job_store_names_the_setting_that_chose_it(wt_env, tmp_path):
    missing = tmp_path / "nojobs.db"
    r = subprocess.run(
        [WT, "jobs", "list"],
        capture_output=True,
        text=True,
        env=dict(wt_env, WORLDTRACE_JOBS=str(missing)),
    )
    assert r.returncode == 1
    assert f"no job store at {missing}: check $WORLDTRACE_JOBS (" in r.stderr, r.stderr
    r = subprocess.run(
        [WT, "jobs", "list", "--jobs", str(missing)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 1 and f"no job store at {missing}: check --jobs (" in r.stderr
    assert not missing.exists()
