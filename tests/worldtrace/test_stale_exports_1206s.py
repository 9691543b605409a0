"""An export made before the processed data was replaced (left by earlier notes, 12-06):
after new data was imported and processed again, the export under export/ still held the
earlier run's samples (another dedup, filters, mask draw) and nothing said so: `stats`
listed it as any other, its manifest named no run. Now the manifest names the run it read
(`processing_run`), the `exports` view says whether that is the processed data's run now
(`current_run`), and `stats` names the exports that are not. Real CLI processes."""

from __future__ import annotations

import json
import subprocess

from worldtrace.schemas import Store

from ..collectors.test_faults_1203b import openai_records


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_an_export_of_an_earlier_run_is_named_until_exported_again(wt_env, tmp_path):
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    wt(wt_env, "import", "--create", str(openai_records(tmp_path / "a.jsonl", 20, seed=1)))
    wt(wt_env, "process")
    wt(wt_env, "export")
    first = json.loads((store.processed / "manifest.json").read_text())["run_id"]
    manifest = json.loads((store.export / "parquet" / "manifest.json").read_text())
    assert manifest["processing_run"] == first
    rows = "SELECT name, processing_run, current_run FROM exports"
    assert json.loads(wt(wt_env, "query", "--format", "json", rows).stdout) == [
        {"name": "parquet", "processing_run": first, "current_run": True}
    ]
    assert not [
        n for n in json.loads(wt(wt_env, "stats", "--json").stdout)["notes"] if "export" in n
    ]
    wt(wt_env, "process")  # nothing new: the same tables, the export is of them still
    assert (
        json.loads(wt(wt_env, "query", "--format", "json", rows).stdout)[0]["current_run"] is True
    )

    wt(wt_env, "import", str(openai_records(tmp_path / "b.jsonl", 20, seed=2)))
    wt(wt_env, "process")
    second = json.loads((store.processed / "manifest.json").read_text())["run_id"]
    assert second != first
    assert json.loads(wt(wt_env, "query", "--format", "json", rows).stdout) == [
        {"name": "parquet", "processing_run": first, "current_run": False}
    ]
    said = (
        "1 of 1 made from an earlier `worldtrace process` run than the processed data now "
        "(parquet): export again to train on it (`SELECT name, processing_run FROM exports "
        "WHERE NOT current_run` lists them)"
    )
    assert f"exports: {said}" in json.loads(wt(wt_env, "stats", "--json").stdout)["notes"]
    shown = wt(wt_env, "stats").stdout
    assert f"exports: {said}" in " ".join(shown.split()), shown  # a terminal wraps it

    wt(wt_env, "export")
    assert json.loads(wt(wt_env, "query", "--format", "json", rows).stdout) == [
        {"name": "parquet", "processing_run": second, "current_run": True}
    ]
    assert not [
        n for n in json.loads(wt(wt_env, "stats", "--json").stdout)["notes"] if "export" in n
    ]
