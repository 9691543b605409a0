"""Found (export hunt 1204f): a damaged `processed/manifest.json` stopped the next
`worldtrace process` with a traceback (a JSON list: `AttributeError: 'list' object has
no attribute 'get'`), a JSON error naming no file (a copy cut short), or "settings
changed since the last run" for settings no one changed (an edit that lost `config`).
Each is now one line naming the file and what to do; `process --rebuild` mends it.

Stores are made as a user makes them: OpenAI chat JSONL through `worldtrace import`,
the real pipeline through the CLI; the damage is real bytes written."""

from __future__ import annotations

import json

import pytest
from worldtrace.pipelines.process import LAYOUT
from worldtrace.schemas.tempfiles import REBUILD_HINT, DamagedFile

from .test_damaged_hunt_1204d import processed  # noqa: F401  (fixture)
from .test_query import run_cli
from .test_report_hunt_1204d import chats


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda m: "[1, 2]", "the last run's manifest is a JSON list, not an object"),
        (lambda m: m[:100], "the last run's manifest does not read (Expecting "),
        (lambda m: json.dumps({"layout": LAYOUT}), "the last run's manifest has no config"),
        (
            lambda m: json.dumps({**json.loads(m), "accounting": None}),
            "the last run's manifest has no accounting.in",
        ),
    ],
    ids=["list", "cut", "no-config", "no-accounting"],
)
def test_a_damaged_run_manifest_is_named_with_what_to_do(processed, tmp_path, damage, why):  # noqa: F811
    manifest = processed.processed / "manifest.json"
    manifest.write_text(damage(manifest.read_text()))
    more = chats(tmp_path / "b.jsonl", 100, 3)
    assert run_cli(processed, "import", str(more)).exit_code == 0
    r = run_cli(processed, "process")  # the CLI's guard prints a DamagedFile as one line
    assert isinstance(r.exception, DamagedFile), r.exception
    said = str(r.exception)
    assert said.startswith(f"{manifest}: {why}") and said.endswith(f"; {REBUILD_HINT}")
    r = run_cli(processed, "process", "--rebuild")
    assert r.exit_code == 0, r.output
    assert json.loads(manifest.read_text())["accounting"]["in"] == 15  # 12 + 3


def test_the_user_sees_one_line_and_no_traceback(processed, wt_env):  # noqa: F811
    import subprocess

    manifest = processed.processed / "manifest.json"
    manifest.write_text("[1, 2]")
    r = subprocess.run(
        ["worldtrace", "--store", str(processed.root), "process"],
        env=wt_env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: {manifest}: the last run's manifest is a JSON list, not an object; {REBUILD_HINT}"
    )
