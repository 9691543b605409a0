"""A reader while `process` publishes (found by the 12-06 hunt, k2): the views list the
processed files when they connect; a publish that replaced them meanwhile (a rebuild after
a raw file was moved out names other units) made the next statement fail with DuckDB's
`IO Error: No files found that match the pattern ".../processed/turns/u....parquet"`
and its SQL caret, saying neither why nor what to do. Now one line: the file was removed
while the command read the store, a `process` run publishing replaces processed/'s
files, run it again. A real shell of `query`, a real `process --rebuild` between two of
its statements."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from worldtrace.schemas import Store

from ..collectors.test_faults_1203b import openai_records
from .test_stale_exports_1206s import wt


def test_a_statement_after_a_publish_replaced_its_files_says_so(wt_env, tmp_path):
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    wt(wt_env, "import", "--create", str(openai_records(tmp_path / "a.jsonl", 20, seed=1)))
    wt(wt_env, "import", str(openai_records(tmp_path / "b.jsonl", 20, seed=2)))
    wt(wt_env, "process")
    shell = subprocess.Popen(
        ["worldtrace", "query", "--shell"], env=wt_env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        shell.stdin.write("SELECT count(*) AS n FROM turns;\n")
        shell.stdin.flush()
        while "└" not in shell.stdout.readline():  # the first answer, from the first run
            pass
        second = sorted((store.raw / "import").glob("*.parquet"))[1]
        shutil.move(second, tmp_path / second.name)
        wt(wt_env, "process", "--rebuild")  # other units: the shell's files are gone
        out, _ = shell.communicate("SELECT count(*) AS n FROM turns;\n", timeout=120)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    gone = errors[0].removeprefix("error: ").split(" was removed while", 1)[0]
    assert Path(gone).parent.parent == store.processed and not Path(gone).exists(), errors
    assert errors[0].endswith(
        " was removed while this command read the store (a `worldtrace process` run "
        "publishing its tables replaces processed/'s files): run it again"
    ), errors
