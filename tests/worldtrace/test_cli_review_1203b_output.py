"""What the CLI prints, as a new user's review (1203b) found it, each reproduced as the
user ran it: through the installed `worldtrace` on a store made by `import` and
`process`."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from worldtrace.output import print_accounting

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
         "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]  # fmt: skip


def _records(n: int) -> str:
    """OpenAI chat logs with tool calls, one per line, each of its own words (so they
    stay apart in dedup and a split has clusters to spread)."""
    lines = []
    for i in range(n):
        pick = random.Random(i)
        said = [" ".join(pick.choices(WORDS, k=12)) for _ in range(4)]
        messages = [
            {"role": "system", "content": "you are an agent"},
            {"role": "user", "content": f"task {i}: {said[0]}"},
        ]
        for step in range(2):
            call = {"id": f"c{i}{step}", "type": "function"}
            cmd = f"grep -r '{said[1 + step]}' dir{i}"
            call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": cmd})}
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": f"{said[3]} {step}"},
            ]
        messages.append({"role": "assistant", "content": f"done {i}"})
        lines.append(json.dumps({"id": f"t{i}", "messages": messages}))
    return "\n".join(lines) + "\n"


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}", **extra)


def run(env: dict, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([WT, *args], capture_output=True, text=True, env=env, **kw)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """A store of 12 imported and processed trajectories, and what `process` printed."""
    top = tmp_path_factory.mktemp("review")
    (top / "oa.jsonl").write_text(_records(12))
    root = top / "store"
    env = _env()
    r = run(env, "--store", str(root), "--create", "import", str(top / "oa.jsonl"))
    assert r.returncode == 0, r.stderr
    r = run(env, "--store", str(root), "process")
    assert r.returncode == 0, r.stderr
    return {"root": root, "process": r}


@pytest.fixture
def env(made) -> dict[str, str]:
    return _env(WORLDTRACE_STORE=str(made["root"]))


# -- A1. a query whose output a closed pipe cut exits 141 -----------------------------------
BIG = "SELECT i, repeat('x', 200) AS pad FROM range(2000) t(i)"
"""About 400 KiB in every format: more than a pipe holds, so `| head` cuts it."""


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_a_query_cut_by_a_closed_pipe_exits_141(env, fmt, unbuffered):
    """Found: `query ... --format csv | head -1` exited 0 in every format (`stats | head
    -1` 141). With PYTHONUNBUFFERED (set where the review ran) stdout wrote straight
    into the pipe; the write the closing reader cut took 64 KiB, and Python's text layer
    dropped the rest without an error. The reader here takes the first bytes and
    closes, as `| head -c 100` (a JSON array is one line, which `head -1` reads whole)."""
    e = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        e["PYTHONUNBUFFERED"] = "1"
    args = [WT, "query", BIG, "--format", fmt, "--max-rows", "2000"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    assert p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert (p.wait(), err) == (141, ""), err


def test_a_whole_query_output_is_written_whole_unbuffered(env):
    """The same output read to its end: every row, under PYTHONUNBUFFERED too."""
    r = run(dict(env, PYTHONUNBUFFERED="1"), "query", BIG, "--format", "csv")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2001 and lines[-1] == f"1999,{'x' * 200}"


# -- A3. process prints accounting.balanced ------------------------------------------------
def test_process_prints_the_balanced_accounting(made):
    """Found: docs/pipeline.md says `accounting.balanced` is printed by the CLI; the
    table showed in/kept/filtered/duplicates/rejected and no balance."""
    r = made["process"]
    acc = json.loads((made["root"] / "processed" / "manifest.json").read_text())["accounting"]
    assert acc["balanced"] and acc["in"] == 12, acc
    line = (
        f"in {acc['in']} = kept {acc['kept']} + filtered {acc['filtered']} + "
        f"duplicates {acc['duplicates']} + rejected {acc['rejected']}"
    )
    assert line in r.stdout.splitlines(), r.stdout
    assert "UNBALANCED" not in r.stdout + r.stderr


def test_an_unbalanced_accounting_is_said_loudly(made, capsys):
    """The manifest of the run above with one kept record gone from its accounting."""
    manifest = json.loads((made["root"] / "processed" / "manifest.json").read_text())
    acc = manifest["accounting"]
    acc["kept"] -= 1
    acc["balanced"] = False
    print_accounting(manifest)
    out, err = capsys.readouterr()
    terms = " + ".join(f"{k} {acc[k]}" for k in ("kept", "filtered", "duplicates", "rejected"))
    assert f"UNBALANCED: in {acc['in']} != {terms} (= {acc['in'] - 1})" in out.splitlines()
    assert "does not balance" in err, err


# -- A6. a path through a file is named as given ----------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["query", "SELECT 1 AS n", "-o"], ["report", "-o"]],
    ids=lambda a: a[0],
)
@pytest.mark.parametrize("through", ["afile", "afile/sub", "./afile/sub"])
def test_a_path_through_a_file_is_named_as_given(env, tmp_path, args, through):
    """Found: `-o afile/q.csv` said `/tmp/.../afile is a file, not a directory`, where a
    missing directory keeps the path as typed (`directory deep/a does not exist`)."""
    (tmp_path / "afile").write_text("x")
    out = f"{through}/q.csv"
    r = run(env, *args, out, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    named = "./afile" if through.startswith("./") else "afile"
    said = f"Error: cannot write {out}: {named} is a file, not a directory"
    assert r.stderr.splitlines() == [said], r.stderr
    assert (tmp_path / "afile").read_text() == "x"


# -- A7. NULL in CSV is empty -----------------------------------------------------------------
VALUES = "(VALUES (NULL), (''), ('a,b'), ('say \"hi\"'), ('x')) t(v)"


def test_csv_writes_null_empty_and_an_empty_string_quoted(env):
    """Found: in single-column CSV NULL was `""` (multi-column: empty). As the DuckDB
    CLI writes CSV, NULL is empty and an empty string `""`, in any number of columns."""
    r = run(env, "query", f"SELECT v FROM {VALUES}", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'v\n\n""\n"a,b"\n"say ""hi"""\nx\n'
    r = run(env, "query", f"SELECT v, 1 AS n FROM {VALUES}", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'v,n\n,1\n"",1\n"a,b",1\n"say ""hi""",1\nx,1\n'


def test_a_csv_id_column_with_null_pipes_into_explain(env):
    """The review's pipe: a NULL origin id (every collected trajectory's) made xargs pass
    an empty argument, `explain ''`, a usage error."""
    sql = (
        "SELECT origin_id FROM (SELECT NULL::VARCHAR AS origin_id UNION ALL "
        "(SELECT trajectory_id FROM trajectories ORDER BY 1 LIMIT 1)) ORDER BY 1 NULLS FIRST"
    )
    pipe = f'{WT} query "{sql}" --format csv | tail -n +2 | xargs {WT} explain'
    r = subprocess.run(pipe, shell=True, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "blank" not in r.stderr


# -- C24 and D28. export's results on stdout, a split's parts each --------------------------
def test_export_verify_prints_its_result_on_stdout(env, tmp_path):
    """Found: `export --verify DIR` printed `DIR: verified` on stderr, so `> log` kept
    nothing; the problems and their count are on stdout too."""
    out = tmp_path / "awb"
    r = run(env, "export", "--format", "agentworldbench", "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = run(env, "export", "--verify", str(out))
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{out}: verified\n", "")
    (out / "stray.txt").write_text("x")
    r = run(env, "export", "--verify", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    *problems, last = r.stdout.splitlines()
    assert problems and last == f"{out}: {len(problems)} problem(s)", r.stdout
    assert r.stderr == ""


def test_a_split_export_prints_a_line_per_part(env, tmp_path):
    """Found: `export --split test=0.3,valid=0.2` printed one total line; each part's
    counts were only in its manifest."""
    out = tmp_path / "split"
    r = run(
        env, "export", "--format", "agentworldbench", "--split", "test=0.3,valid=0.2",
        "-o", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    top = json.loads((out / "manifest.json").read_text())
    lines = r.stdout.splitlines()
    c = top["counts"]
    assert lines[0] == (
        f"exported {c['samples']} samples ({c['rows']} rows) from {c['trajectories']} "
        f"trajectories -> {out}"
    )
    want = []
    for name, part in top["parts"].items():
        m = json.loads((out / part["path"] / "manifest.json").read_text())["counts"]
        want.append(
            f"  {name}: {m['samples']} samples ({m['rows']} rows) from {m['trajectories']} "
            f"trajectories -> {out / part['path']}"
        )
    assert sorted(top["parts"]) == ["test", "train", "valid"]
    assert sorted(lines[1:4]) == sorted(want), r.stdout  # train first, then as --split
    assert lines[1].startswith("  train: ")
    assert sum(p["counts"]["trajectories"] for p in top["parts"].values()) == 12


# -- C15. --create given to a command that reads a store --------------------------------------
MAKERS = "`collect`, `import`, `worker`, `jobs submit`, `scheduler`"


@pytest.mark.parametrize(
    "args", [["process"], ["export"], ["report"], ["stats"], ["jobs", "list"]], ids=" ".join
)
@pytest.mark.parametrize("create", [True, False], ids=["--create", "no --create"])
def test_a_missing_store_says_create_is_not_taken_and_who_makes_one(tmp_path, args, create):
    """Found: `worldtrace --store X --create process` answered as if --create were not
    given, named only `collect`, `import` and `worker` as making a store (not `jobs
    submit`, `scheduler`, `process --input` nor `demo`), and `process` not its own
    `--input PATH --create`."""
    missing = tmp_path / "typo"
    flag = ["--create"] if create else []
    r = run(_env(), "--store", str(missing), *flag, *args, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    named = f"`worldtrace {' '.join(args)}`" + (" without --input" if args == ["process"] else "")
    works = f"{named} works on a store that exists"
    if create:
        works = f"--create does not apply to {named}: it works on a store that exists"
    if args == ["process"]:
        made = (
            f"`worldtrace process --input PATH --create` makes one from PATH, as {MAKERS} and "
            "`demo` do with --create"
        )
    else:
        made = f"{MAKERS}, `process --input PATH` and `demo` make a new one with --create"
    said = f"Error: store {missing} does not exist: check --store; {works} ({made})"
    assert r.stderr.splitlines() == [said], r.stderr
    assert not missing.exists()
