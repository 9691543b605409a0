"""A Ctrl-C or SIGTERM says one line and exits 130 or 143 whatever the command is doing
(hunt 1205c, bugs 3-6): inside DuckDB in `stats`, `report` and `explain` (a traceback of
`RuntimeError: Query interrupted`, or DuckDB's `Invalid Input Error ... KeyboardInterrupt`,
exit 1), before a command's own block started (click's `Aborted!` and 1, or a silent 143),
and after `process` published (a silent 143); `query` with SQL of no statement (`;`,
`/* x */`) is refused as blank SQL. Real CLI processes, real stores, real signals by pid;
each stop comes at a point the test sees the command reach (/proc), never after a sleep."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from worldtrace.schemas import Store

from ..collectors.test_faults_1203b import openai_records
from ..conftest import VENV_BIN, wait_until

NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def env_for(store: Path, **more: str) -> dict[str, str]:
    env = dict(os.environ, WORLDTRACE_STORE=str(store), **more)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    return env


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300
    )


def popen(env: dict[str, str], *args: str, **kw) -> subprocess.Popen:
    """A command in its own process group, as a terminal runs it (Ctrl-C: the group)."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(["worldtrace", *args], env=env, text=True, start_new_session=True, **kw)


def send(proc: subprocess.Popen, sig: int) -> None:
    """Ctrl-C as a terminal sends it (the process group), SIGTERM as `kill PID` does."""
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)


def ended(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def lines(err: str) -> list[str]:
    """stderr without blank lines (click closes the terminal's `^C` line) and hints."""
    return [x for x in err.splitlines() if x.strip() and not x.startswith("hint: ")]


def processed_store(root: Path, n: int = 300) -> Store:
    """A store with `n` imported records, processed."""
    env = env_for(root)
    src = openai_records(root.parent / f"{root.name}.jsonl", n, seed=7)
    r = wt(env, "import", "--create", str(src))
    assert r.returncode == 0, r.stderr
    r = wt(env, "process")
    assert r.returncode == 0, r.stderr
    return Store.at(root)


# -- bug 3: Ctrl-C inside DuckDB ------------------------------------------------------

BIG_REJECTS = 3_000_000, 10
"""Rows of a large `rejects` shard, and how many links to it the table holds: `stats`
(its rejects section), `report` (its tables) and `explain` (an id that only rejects could
hold) scan the 30 million rows for about a second of DuckDB's worker threads, long
enough to be stopped inside. Links, not copies: DuckDB took ~10 s to write 30 million."""


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Store:
    """A processed store whose `rejects` table holds large shards (DuckDB writes one)."""
    import duckdb

    st = processed_store(tmp_path_factory.mktemp("big") / "store")
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    rows, links = BIG_REJECTS
    shard = st.processed / "rejects" / "part-large-0.parquet"
    con.execute(
        f"""COPY (SELECT 'raw/x.parquet' AS source_path, '{{}}' AS record, 'filter' AS stage,
                  (i % 1000003)::VARCHAR AS reason, (i % 100003)::VARCHAR AS trajectory_id
                  FROM range({rows}) t(i)) TO '{shard}' (FORMAT parquet)"""
    )
    con.close()
    for k in range(1, links):
        os.link(shard, shard.with_name(f"part-large-{k}.parquet"))
    return st


def workers_cpu(proc: subprocess.Popen) -> float:
    """CPU seconds of the command's threads other than its main one: DuckDB's workers
    (the small tables of the store take them a few milliseconds)."""
    try:
        return sum(
            t.user_time + t.system_time for t in psutil.Process(proc.pid).threads()
            if t.id != proc.pid
        )  # fmt: skip
    except psutil.NoSuchProcess:
        return 0.0


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["stats"], "nothing was written"),
        (["stats", "--json"], "nothing was written"),
        (["explain", "99999"], "nothing was written"),
        (["report", "-o", "{out}"], "nothing was written ({out} is written whole or not at all)"),
    ],
    ids=["stats", "stats-json", "explain", "report"],
)
def test_ctrl_c_inside_a_duckdb_query_says_one_line_and_exits_130(
    big_store, tmp_path, command, said
):
    """Found: a traceback ending `RuntimeError: Query interrupted` (summary.py `_rows`),
    or `Error: Invalid Input Error: counting the rows of the object registered as
    '_empty_turns' failed: KeyboardInterrupt:`, exit 1. DuckDB turns the interrupt into
    an error of its own; a Ctrl-C that came is now said as the stop."""
    out = tmp_path / "report.html"
    args = [a.format(out=out) for a in command]
    proc = popen(env_for(big_store.root), *args)
    wait_until(lambda: workers_cpu(proc) > 0.3 or proc.poll() is not None, timeout=120,
               what="DuckDB's workers scanning the large rejects shard")  # fmt: skip
    assert proc.poll() is None, "ended before the scan could be stopped"
    send(proc, signal.SIGINT)
    _, err = ended(proc)
    assert proc.returncode == 130, err
    assert lines(err) == [f"interrupted (Ctrl-C): {said.format(out=out)}"], err
    assert not out.exists()


# -- bugs 4, 5: a stop before the command's own block -----------------------------------


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Store:
    return processed_store(tmp_path_factory.mktemp("small") / "store", n=40)


def blocked_in_open(pid: int) -> bool:
    """Whether the main thread of `pid` waits in the kernel for a FIFO's writer."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("wait_for_partner", "fifo_open")
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize(
    "command",
    [["process", "--rebuild"], ["export"], ["query", "SELECT 1"], ["stats"]],
    ids=["process", "export", "query", "stats"],
)
def test_a_stop_before_the_command_started_says_one_line(small_store, tmp_path, command, sig):
    """Found: Ctrl-C 0.3-0.6 s after the start of `process`, `export`, `query` or `stats`
    printed click's `Aborted!` and exited 1; SIGTERM in the first ~0.3 s exited 143
    without a word. The command is held where every command starts, reading
    `$WORLDTRACE_REDACT_CONFIG` (here a FIFO no one writes), before its own block."""
    fifo = tmp_path / "redact.yaml"
    os.mkfifo(fifo)
    before = sorted(p.relative_to(small_store.root) for p in small_store.root.rglob("*"))
    env = env_for(small_store.root, WORLDTRACE_REDACT_CONFIG=str(fifo))
    proc = popen(env, *command)
    wait_until(lambda: blocked_in_open(proc.pid) or proc.poll() is not None, timeout=60,
               what="the command opening $WORLDTRACE_REDACT_CONFIG")  # fmt: skip
    assert proc.poll() is None, proc.communicate()
    send(proc, sig)
    _, err = ended(proc)
    assert proc.returncode == 128 + sig, err
    name = f"worldtrace {command[0]}"
    assert lines(err) == [
        f"interrupted ({NAMES[sig]}): {name} had not started its work: nothing was written"
    ], err
    assert sorted(p.relative_to(small_store.root) for p in small_store.root.rglob("*")) == before


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: the command writing into it waits for its reader."""
    r, w = os.pipe()
    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(w, fcntl.F_SETFL, flags)
    return r, w


def blocked_writing(pid: int) -> bool:
    """Whether the main thread of `pid` waits for room in a pipe it writes."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("pipe_write", "anon_pipe_write")
    except OSError:
        return False


def test_sigterm_after_the_export_was_written_says_so(small_store, tmp_path):
    """Found: SIGTERM just after `process` published (its summary printed) exited 143
    without a word: the run's block had ended, and with it its handler, so a supervisor
    could not tell a run that published from one that did not. The handler of the CLI
    now takes over after a block and says what the block would have said (docs/pipeline.md:
    `the run had published its tables when the stop came`), 143. `export` prints its
    summary after its block ends, so it can be held there: its stdout is a full pipe."""
    env = env_for(small_store.root)
    out = small_store.export / "agentworldbench"
    r, w = full_pipe()
    with open(tmp_path / "err.txt", "w") as errf:
        proc = popen(env, "export", "--format", "agentworldbench", stdout=w, stderr=errf)
    os.close(w)
    try:
        wait_until(lambda: blocked_writing(proc.pid) or proc.poll() is not None, timeout=180,
                   what="the export writing its summary")  # fmt: skip
        assert (out / "manifest.json").is_file()  # written and swapped in: the block ended
        send(proc, signal.SIGTERM)
        with os.fdopen(r, "rb") as reader:
            reader.read()  # drained: the command goes on to its end
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = (tmp_path / "err.txt").read_text()
    assert proc.returncode == 143, err
    assert lines(err) == [
        f"interrupted (SIGTERM): the export was complete when the stop came: {out} holds it"
    ], err
    assert wt(env, "export", "--verify", str(out)).returncode == 0


# -- bug 6: SQL of no statement ---------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["/* x */", "--format", "json"], [";"], [";;", "--format", "csv"], [" ; /* a */ ;\n"]],
    ids=["comment-json", "semicolon", "semicolons-csv", "comments-and-semicolons"],
)
def test_sql_of_no_statement_is_refused_as_blank_sql(small_store, args):
    """Found: `query "/* x */" --format json` printed `ok` and exited 0 (not JSON), as did
    `query ";"` and `query ";;" --format csv`, where `query " "` is refused (exit 2)."""
    r = wt(env_for(small_store.root), "query", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    assert r.stderr.splitlines()[-1] == (
        "Error: the SQL holds no statement (only comments and ';'): give SQL, --sql-file, "
        "--shell or --views"
    ), r.stderr
