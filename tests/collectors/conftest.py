"""Job-store fixtures: SQLite in the temp store, and a real PostgreSQL server started on
loopback for the session (Debian's postgresql, installed by infra/setup.sh)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from worldtrace.collectors.jobstore import open_job_store


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL is not installed: run infra/setup.sh (Debian package postgresql)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server in a temp dir on 127.0.0.1 (run as `postgres` when we are root:
    the server refuses to run as root); yields the URL of its `postgres` database."""
    bindir = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="wt-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()
    run = lambda *a: subprocess.run([*as_user, *a], check=True, capture_output=True)  # noqa: E731
    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o", opts, "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def fresh_schema(server_url: str) -> str:
    """The URL of an empty job store: a new schema first on the search path (cheaper
    than a database per test, which copies a template)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {name}")
    return f"{server_url}/postgres?options=-csearch_path%3D{name}"


@pytest.fixture(params=["sqlite", "postgres"])
def jobs_url(request, store) -> str:
    """The job store URL of a test, once per kind of store."""
    if request.param == "sqlite":
        return str(store.jobs_db)
    return fresh_schema(request.getfixturevalue("pg_server"))


@pytest.fixture
def js(jobs_url):
    return open_job_store(jobs_url)


class StillClock:
    """A scheduler's clock (`scheduler.Clock`) at `t`, which only the test moves (`t`):
    its waits return at once."""

    def __init__(self, t):
        self.t = t

    def now(self):
        return self.t

    def wait(self, seconds: float, stop) -> bool:
        return True


def import_written(tmp_path: Path, name: str, data, lines: bool = False):
    """(report, imported trajectories by origin id) of importing `data` written under
    `tmp_path` as `name`: one JSON document, or JSON lines (`lines`)."""
    import json

    from worldtrace.collectors.importers import import_paths
    from worldtrace.schemas import read_records

    f = tmp_path / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("".join(json.dumps(d) + "\n" for d in data) if lines else json.dumps(data))
    out = tmp_path / "out"
    r = import_paths([f], out)
    got = {t.source.origin_id: t for t in read_records(out)} if out.exists() else {}
    return r, got


def found(r, kind: str) -> list[tuple[str, str]]:
    """(where, message) of an import report's problems of `kind`."""
    return [(p.where, p.message) for p in r.problems if p.kind == kind]
