"""Hunt 1206: a typo in the job store's address (`--jobs postgresq://...`, `mysql://x`,
SQLAlchemy's `postgresql+psycopg://` in $WORLDTRACE_JOBS) was taken for a SQLite path:
`jobs list` said "no jobs" (exit 0), `jobs submit` queued the job into a new database at
`./postgresq:/wt@127.0.0.1:5432/jobs`, which no worker on another host would ever read.
An address with a scheme is now PostgreSQL's (its driver suffix read too), SQLite's or
refused. Real CLI, real PostgreSQL and SQLite job stores."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobstore import open_job_store

from .conftest import fresh_schema

JOB = Path(__file__).resolve().parents[2] / "examples" / "terminal-basics.yaml"
REFUSED = "is no job store address (`postgresql://USER@HOST:PORT/DB`, `sqlite:///PATH` or a path)"


def wt(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "url", ["postgresq://wt@127.0.0.1:5432/jobs", "mysql://x", "http://h/jobs"]
)
@pytest.mark.parametrize("via", ["--jobs", "$WORLDTRACE_JOBS"])
def test_a_mistyped_address_is_refused_and_makes_nothing(tmp_path, wt_env, url, via):
    cwd = tmp_path / "here"
    cwd.mkdir()
    env = {**wt_env, "WORLDTRACE_JOBS": url} if via.startswith("$") else wt_env
    given = ["--jobs", url] if via == "--jobs" else []
    scheme = url.split(":", 1)[0]
    for command in (["jobs", "list"], ["jobs", "submit", str(JOB)]):
        r = wt(env, cwd, *command, *given)
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert r.stderr.strip().endswith(f"{scheme}:// {REFUSED}"), r.stderr
        assert "no jobs" not in r.stdout
    assert list(cwd.iterdir()) == []  # no SQLite file named after the URL


def test_sqlalchemy_s_driver_suffix_reaches_the_same_postgresql_store(tmp_path, wt_env, pg_server):
    url = fresh_schema(pg_server)
    r = wt(wt_env, tmp_path, "jobs", "submit", "--jobs", url, str(JOB))
    assert r.returncode == 0, r.stderr
    job = r.stdout.split()[0]
    suffixed = url.replace("postgresql://", "postgresql+psycopg://", 1)
    listed = wt({**wt_env, "WORLDTRACE_JOBS": suffixed}, tmp_path, "jobs", "list")
    assert listed.returncode == 0 and job in listed.stdout, listed.stderr
    assert not any(p.name.startswith("postgres") for p in tmp_path.rglob("*"))


def test_sqlite_addresses_and_paths_still_open(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for address, path in [
        (f"sqlite:///{tmp_path}/a.db".replace("///", "////", 1), tmp_path / "a.db"),
        ("sqlite:///b.db", tmp_path / "b.db"),
        (str(tmp_path / "c.db"), tmp_path / "c.db"),
    ]:
        open_job_store(address)
        assert path.is_file(), address
