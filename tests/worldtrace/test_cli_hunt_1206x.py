"""CLI hunt 1206x. Found:

2. every job store error printed the PostgreSQL password (`cannot open the job store
   postgresql://postgres:SECRET@...`) into logs;
4. `jobs list --watch --interval nan` (or `inf`) printed the table, then a traceback;
8. `collect` and `process` on a read-only store said Python's `[Errno 30] Read-only file
   system: '...'`, where `import` and `jobs` name the directory that is not writable;
9. a stop before `jobs submit` started said `worldtrace jobs had not started its work`.

Real CLI processes; a real read-only mount; the stop comes while the command is seen
(/proc) waiting to open `$WORLDTRACE_REDACT_CONFIG`, a FIFO no one writes."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest
from worldtrace.schemas import Store

from ..collectors.test_faults_1203b import openai_records
from ..conftest import SUDO, wait_until
from .test_interrupts_1205c import NAMES, blocked_in_open, ended, lines, popen, send

SECRET = "Hunter2Secret"
DOWN = "127.0.0.1:1"
"""A PostgreSQL address nothing answers on (port 1): the connection is refused at once."""


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


# -- 2 --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://postgres:{SECRET}@{DOWN}/wt", f"postgresql://postgres:***@{DOWN}/wt"),
        (f"postgres://postgres@{DOWN}/wt?password={SECRET}&sslmode=disable",
         f"postgres://postgres@{DOWN}/wt?password=***&sslmode=disable"),
    ],
    ids=["user-info", "query"],
)  # fmt: skip
@pytest.mark.parametrize(
    "command",
    [["jobs", "list"], ["jobs", "submit", "{job}"], ["worker"], ["scheduler", "--once"]],
    ids=["list", "submit", "worker", "scheduler"],
)
def test_a_job_store_error_never_shows_its_password(wt_env, tmp_path, url, shown, command):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    args = [a.format(job=job) for a in command]
    r = wt(dict(wt_env, WORLDTRACE_JOBS=url), *args)
    assert r.returncode == 1, r.stdout + r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"Error: cannot open the job store {shown}: connection failed: "), line
    assert "Connection refused" in line and SECRET not in r.stdout + r.stderr


def test_a_conninfo_password_is_not_shown_either(wt_env):
    """`host=... password=...` is no job store address: it names a file, which is not
    there; the line naming it masks the password too."""
    conninfo = f"host=127.0.0.1 port=1 password={SECRET}"
    r = wt(dict(wt_env, WORLDTRACE_JOBS=conninfo), "jobs", "list")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "Error: no job store at host=127.0.0.1 port=1 password=***: check $WORLDTRACE_JOBS "
        "(`jobs submit` and `worker` make one)"
    ]


# -- 4 --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nan", "nan is not a number of seconds"),
        ("inf", "inf is not in the range 0.1<=x<=86400.0."),
        ("1e12", "1000000000000.0 is not in the range 0.1<=x<=86400.0."),
    ],
)
def test_watch_interval_is_a_usage_error_out_of_its_range(wt_env, value, said):
    r = wt(wt_env, "jobs", "list", "--watch", "--interval", value)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.splitlines()[-1] == f"Error: Invalid value for '--interval': {said}"
    assert r.stdout == ""  # refused before the first table


# -- 8 --------------------------------------------------------------------------------
def test_collect_and_process_on_a_read_only_store_name_the_directory(tmpfs, wt_env, tmp_path):
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r = wt(env, "import", "--create", str(openai_records(tmp_path / "a.jsonl", 5, seed=1)))
    assert r.returncode == 0, r.stderr
    job = tmp_path / "ro.yaml"
    job.write_text("name: ro\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    subprocess.run([*SUDO, "mount", "-o", "remount,ro", str(tmpfs)], check=True)
    said = "is not writable (Read-only file system)"

    r = wt(env, "collect", str(job))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        f"error: cannot write {store.raw / 'collect'}: {store.raw} {said}"
    ], r.stderr
    r = wt(env, "process")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        r.stderr.splitlines()[-1] == f"error: cannot write {store.processed}: {store.root} {said}"
    )
    assert not re.search(r"Errno|Traceback", r.stderr), r.stderr


# -- 9 --------------------------------------------------------------------------------
def test_a_stop_before_jobs_submit_started_names_it(wt_env, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    fifo = tmp_path / "redact.yaml"
    os.mkfifo(fifo)
    proc = popen(dict(wt_env, WORLDTRACE_REDACT_CONFIG=str(fifo)), "jobs", "submit", str(job))
    wait_until(lambda: blocked_in_open(proc.pid) or proc.poll() is not None, timeout=60,
               what="the command opening $WORLDTRACE_REDACT_CONFIG")  # fmt: skip
    assert proc.poll() is None, proc.communicate()
    send(proc, signal.SIGINT)
    _, err = ended(proc)
    assert proc.returncode == 130, err
    assert lines(err) == [
        f"interrupted ({NAMES[signal.SIGINT]}): worldtrace jobs submit had not started its "
        "work: nothing was written"
    ], err
