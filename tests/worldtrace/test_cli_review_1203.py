"""CLI defects a new user's review found (1203), each reproduced as the user ran it:
through the installed `worldtrace` on a store made by `import` and `process`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.jobstore import open_job_store

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")


def _records(n: int = 3) -> str:
    """OpenAI chat logs with tool calls, one per line (two tool turns each)."""
    lines = []
    for i in range(n):
        messages = [
            {"role": "system", "content": "you are an agent"},
            {"role": "user", "content": f"list files {i}"},
        ]
        for step, (cmd, out) in enumerate(
            ((f"ls dir{i}", f"file{i}.txt other{i}.py"), (f"cat file{i}.txt", f"hello {i}"))
        ):
            call = {"id": f"c{i}{step}", "type": "function"}
            call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": cmd})}
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": out},
            ]
        messages.append({"role": "assistant", "content": "done"})
        lines.append(json.dumps({"id": f"t{i}", "messages": messages}))
    return "\n".join(lines) + "\n"


def run(env: dict, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([WT, *args], capture_output=True, text=True, env=env, **kw)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """`raw`: imported, not processed; `done`: imported and processed (nothing rejected)."""
    top = tmp_path_factory.mktemp("review")
    (top / "oa.jsonl").write_text(_records())
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    out = {}
    for name in ("raw", "done"):
        root = top / name
        r = run(env, "--store", str(root), "--create", "import", str(top / "oa.jsonl"))
        assert r.returncode == 0, r.stderr
        out[name] = root
    r = run(env, "--store", str(out["done"]), "process")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def env(stores, tmp_path) -> dict[str, str]:
    e = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    e["WORLDTRACE_STORE"] = str(stores["done"])
    return e


def _one_id(env: dict) -> str:
    r = run(env, "query", "SELECT trajectory_id FROM trajectories LIMIT 1", "--format", "csv")
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()[1]


# -- 1. a blank id ------------------------------------------------------------------------------
@pytest.mark.parametrize("blank", ["", "  "])
def test_explain_a_blank_id_is_a_usage_error(env, blank):
    """Found: `explain ''` listed every trajectory as 'ambiguous' (a blank prefix
    matches every id)."""
    r = run(env, "explain", blank)
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("Error:")]
    assert "TRAJECTORY_ID" in line and "blank" in line, r.stderr
    assert "matches" not in r.stdout


# -- 2. options that do not go together -------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--shell", "--views"), ("--shell", "--views")),
        (("SELECT 1", "--views"), ("SQL", "--views")),
        (("SELECT 1", "--shell"), ("SQL", "--shell")),
        (("--views", "-o", "v.csv"), ("--output", "--views")),
        (("--shell", "--format", "csv"), ("--format", "--shell")),
    ],
)
def test_query_modes_that_conflict_are_a_usage_error(env, tmp_path, args, named):
    """Found: `query --shell --views` ran `--views` in silence."""
    r = run(env, "query", *args, input=".exit\n", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("Error:")]
    assert all(n in line for n in named), line
    assert "worldtrace SQL shell" not in r.stdout and "trajectories\n" not in r.stdout
    assert not (tmp_path / "v.csv").exists()


# -- 3. a closed pipe ---------------------------------------------------------------------------
def _closed_stdout(env: dict, *args: str) -> tuple[int, str]:
    """Run with stdout a pipe whose reader has gone (`| head -1` once head exited)."""
    p = subprocess.Popen([WT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # before the command writes anything: its first write fails
    err = p.stderr.read().decode()
    return p.wait(), err


def _job(env: dict, tmp_path: Path, reason: str | None = None) -> str:
    """A job submitted and finished (succeeded) through the job store's own API."""
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: j\nsandbox: {kind: terminal}\ntasks: [{id: t, instruction: x, actions: ['ls\\n']}]\n"
    )
    r = run(env, "jobs", "submit", str(f))
    assert r.returncode == 0, r.stderr
    js = open_job_store(Path(env["WORLDTRACE_STORE"]) / "jobs.db")
    assert js.finish(js.claim("w1", 60), "succeeded", "ab" * 16, reason, 0)
    return r.stdout.strip()


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["stats", "--json"],
        ["explain", "{tid}"],
        ["explain", "{tid}", "--json"],
        ["jobs", "show", "{job}"],
        ["jobs", "list"],
        ["query", "SELECT 1"],
        ["query", "SELECT * FROM turns", "--format", "csv"],
        ["query", "--views"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_quietly_with_141(env, tmp_path, args):
    """Found: `stats | head -1`, `explain ID | head -1` and `jobs show J | head -1`
    exited 1 without a word (click's own handling), small `query` outputs 0: a closed
    pipe is 141 (128 + SIGPIPE), as for a program the signal ends, with nothing on
    stderr (no traceback, no 'Exception ignored')."""
    fill = {
        "tid": _one_id(env) if "{tid}" in args else "",
        "job": _job(env, tmp_path) if "{job}" in args else "",
    }
    code, err = _closed_stdout(env, *(a.format(**fill) for a in args))
    assert (code, err) == (141, ""), err


# -- 4. output files in a directory that does not exist ------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["report", "-o", "{dir}/r.html"],
        ["query", "SELECT 1 AS n", "-o", "{dir}/b.csv"],
        ["query", "SELECT 1 AS n", "--output", "{dir}/b.parquet"],
        ["query", "SELECT 1 AS n", "-o", "{dir}/b.txt"],
    ],
    ids=lambda a: " ".join(a[:1] + a[-1:]),
)
def test_a_file_output_is_not_written_into_a_missing_directory(env, tmp_path, args):
    """Found: `report -o /nonexistent/dir/r.html` made /nonexistent/dir and wrote the
    report there, `query -o deep/a/b.csv` too: a typo in the path made directories. As
    `cp` and `curl -o`, a missing directory is an error naming it (exit 1, as a path
    through a file was already), before any work; nothing is made."""
    missing = tmp_path / "deep" / "a"
    r = run(env, *(a.format(dir=missing) for a in args), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    out = args[-1].format(dir=missing)
    said = f"Error: cannot write {out}: directory {missing} does not exist (create it first)"
    assert r.stderr.splitlines() == [said], r.stderr
    assert not (tmp_path / "deep").exists()
    # relative, as typed
    r = run(env, *args[:-1], "deep/a/" + Path(out).name, cwd=tmp_path)
    assert r.returncode == 1 and "directory deep/a does not exist" in r.stderr, r.stderr
    assert not (tmp_path / "deep").exists()
    # a path through a file says so
    (tmp_path / "afile").write_text("x")
    r = run(env, *(a.format(dir=tmp_path / "afile" / "sub") for a in args), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"{tmp_path / 'afile'} is a file, not a directory" in r.stderr, r.stderr
    # the directory that exists is written into, a bare name into the current one
    name = Path(args[-1]).name
    r = run(env, *args[:-1], name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / name).is_file()


# -- 5. messages that said what was not so --------------------------------------------------
def test_stats_says_nothing_was_rejected_after_a_run_that_rejected_nothing(env):
    """Found: after a `process` run that rejected nothing, `filters and rejects: no data
    yet` read as 'not processed'."""
    r = run(env, "stats")
    assert r.returncode == 0, r.stderr
    assert "filters and rejects: no data yet" not in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("filters and rejects"))
    assert line.startswith("filters and rejects: none"), line


def test_stats_before_process_says_the_processed_tables_need_process(env, stores):
    """Found: before `process`, `turns per trajectory: no data yet` though the raw turns
    were counted two tables above: the processed tables say they come from `process`."""
    r = run(dict(env, WORLDTRACE_STORE=str(stores["raw"])), "stats")
    assert r.returncode == 0, r.stderr
    assert "no data yet" not in r.stdout.split("exports")[0], r.stdout
    for title in ("turns per trajectory", "category shares", "dedup", "filters and rejects"):
        line = next(x for x in r.stdout.splitlines() if x.startswith(title))
        assert line.endswith("not processed yet: run `worldtrace process`"), line


def test_jobs_show_says_how_a_succeeded_attempt_ended_not_an_error(env, tmp_path):
    """Found: `jobs show` printed a succeeded attempt's reason (`the shell exited (status
    3)`) in its `error` column."""
    job = _job(env, tmp_path, reason="the shell exited (status 3)")
    r = run(env, "jobs", "show", job)
    assert r.returncode == 0, r.stderr
    head, row = r.stdout.splitlines()[2], r.stdout.splitlines()[4]  # the table's box
    cells = [c.strip() for c in head.split("┃")[1:-1]]
    values = [c.strip() for c in row.split("│")[1:-1]]
    by = dict(zip(cells, values, strict=True))
    assert by["status"] == "succeeded" and by["ending"] == "the shell exited (status 3)", by
    assert by["error"] == "", by
    [attempt] = json.loads(run(env, "jobs", "show", job, "--json").stdout)["attempts"]
    assert attempt["error"] is None and attempt["ending"] == "the shell exited (status 3)"


# -- 6. errors of one line -------------------------------------------------------------------
def test_a_job_store_that_does_not_answer_is_one_line(env):
    """Found: psycopg's message continued on a second line (`\\tIs the server running`)."""
    r = run(env, "jobs", "list", "--jobs", "postgresql://nouser@127.0.0.1:1/x")
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "Connection refused" in r.stderr and "Is the server running" in r.stderr


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("selct 1", ["Parser Error", '"selct"', "LINE 1, column 1: selct 1"]),
        ("SELECT 1,\n  2 3 FROM trajectories", ["Parser Error", "LINE 2, column 5: 2 3 FROM"]),
        ("SELECT nope FROM trajectories", ["Binder Error", "nope", "Candidate bindings"]),
        ("SELECT * FROM nope", ["Catalog Error", "nope", "Did you mean"]),
    ],
)
def test_a_sql_error_is_one_line_with_where_it_is(env, sql, says):
    """Found: DuckDB's errors printed 3-4 lines, a caret under the statement."""
    r = run(env, "query", sql)
    assert r.returncode == 1
    [line] = r.stderr.splitlines()
    assert line.startswith("error: ") and "^" not in line, line
    assert all(s in line for s in says), line


def test_an_export_is_not_written_into_a_missing_directory(env, tmp_path):
    """Found with the above: `export -o nope/deep/out` made `nope/deep` (the export's own
    directory may be new; its parent must exist)."""
    missing = tmp_path / "deep" / "a"
    r = run(env, "export", "--format", "agentworldbench", "-o", str(missing / "out"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        f"Error: cannot write {missing / 'out'}: directory {missing} does not exist "
        "(create it first)"
    ], r.stderr
    assert not (tmp_path / "deep").exists()
