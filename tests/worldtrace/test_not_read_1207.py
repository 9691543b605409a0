"""Found (a process hunt, 12-07): `process --input DIR` and `validate DIR` passed over
the files whose names are not the ones they read (`SHARD.PARQUET`, `RUN.JSONL`,
`x.jsonl.gz`): 44 of 49 records never processed, `in 5 = kept 5 ...`, exit 0, nothing
said. `import` names what its walk does not read; these now do too (the store's hidden
files beside its shards are not named). Real parts: the CLI on imported shards."""

from __future__ import annotations

import shutil
import subprocess

from worldtrace.schemas import Store

from .test_query import run_cli
from .test_report_hunt_1204d import chats


def test_process_and_validate_name_the_files_they_do_not_read(tmp_path, wt_env):
    src = Store.at(tmp_path / "src")
    assert run_cli(src, "import", "--create", str(chats(tmp_path / "a.jsonl", 0, 3))).exit_code == 0  # fmt: skip
    [shard] = (src.raw / "import").glob("*.parquet")
    given = tmp_path / "in"
    given.mkdir()
    shutil.copy(shard, given / "ok.parquet")
    shutil.copy(shard, given / "SHARD.PARQUET")
    (given / "runs.jsonl.gz").write_bytes(b"\x1f\x8b")
    (given / ".journal.tmp").write_text("ours, hidden")
    said = "2 file(s) not read under"
    r = subprocess.run(["worldtrace", "process", "--create", "--input", str(given)],
                       capture_output=True, text=True, env=wt_env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    line = f"process: {said} {given} (only .json, .jsonl, .ndjson and .parquet files are"
    assert line in r.stderr, r.stderr
    assert (
        "SHARD.PARQUET" in r.stderr and "runs.jsonl.gz" in r.stderr and ".journal" not in r.stderr
    )
    assert "in 3 = kept 3" in r.stdout  # what it read, said beside what it did not
    r = subprocess.run(["worldtrace", "validate", "-q", str(given)], capture_output=True,
                       text=True, env=wt_env)  # fmt: skip
    assert r.returncode == 0 and f"validate: {said} {given}" in r.stderr, r.stderr
    assert (given / "SHARD.PARQUET").exists()  # nothing touched
