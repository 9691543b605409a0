from __future__ import annotations

import json
import subprocess
import sys

from worldtrace.schemas import ShardWriter


def wt(env, *args, check=False):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, check=check
    )


def test_help_lists_every_command(wt_env):
    out = wt(wt_env, "--help", check=True).stdout
    for cmd in ("validate", "import", "collect", "jobs", "worker", "process", "export",
                "query", "stats", "explain", "report", "doctor", "demo", "version"):  # fmt: skip
        assert f"  {cmd}" in out


def test_version(wt_env):
    assert "worldtrace.trajectory/1" in wt(wt_env, "version", check=True).stdout


def test_validate_good_and_bad(tmp_path, wt_env, corpus):
    with ShardWriter(tmp_path / "good") as w:
        w.write(corpus[:5])
    r = wt(wt_env, "validate", str(tmp_path / "good"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 record(s), 0 problem(s)" in r.stderr

    d = json.loads(corpus[0].to_json())
    d["domain"] = "chess"
    d["turns"][1]["index"] = 9
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(d) + "\n" + "{oops\n" + corpus[1].to_json() + "\n")
    r = wt(wt_env, "validate", str(bad))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{bad}:line 1") and "domain: unknown domain 'chess'" in lines[0]
    assert "turns[1].index" in lines[1]
    assert lines[2].startswith(f"{bad}:line 2") and "invalid JSON" in lines[2]


def test_doctor_reports_and_suggests(wt_env):
    env = dict(wt_env, PATH="/nonexistent", WORLDTRACE_TOKENIZER="/nonexistent/tokenizer.json")
    r = wt(dict(env, PATH=wt_env["PATH"].split(":")[0]), "doctor")
    assert r.returncode == 0
    assert "[MISS] chromium" in r.stdout and "apt-get install chromium" in r.stdout
    assert "[MISS] tokenizer" in r.stdout and "--tokenizer PATH" in r.stdout


def test_demo_end_to_end(tmp_path, wt_env, docker_engine):
    store = tmp_path / "demo"
    r = wt(wt_env, "--store", str(store), "demo", "--episodes", "40")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for step in ("1. collect", "3. validate", "4. process", "5. export", "6. stats", "7. report"):
        assert step in r.stdout
    assert "success" in r.stdout and "0 problem(s)" in r.stdout
    assert (store / "report.html").exists() and (
        store / "export" / "parquet" / "manifest.json"
    ).exists()
    again = wt(wt_env, "--store", str(store), "demo", "--episodes", "40")
    assert again.returncode == 0
    assert (
        len(list((store / "raw" / "synthetic").glob("*.parquet"))) == 1
    )  # rerun replaced, not piled up


def test_import_worldtrace_loads_no_heavy_backend():
    code = (
        "import sys, worldtrace, worldtrace.cli, worldtrace.schemas, worldtrace.sandboxes.base, worldtrace.collectors.importers;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'apache_beam', 'docker', 'playwright', 'tokenizers', 'adbutils', 'uiautomator2', 'datasketch'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
