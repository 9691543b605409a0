"""`redact --check` on the files `import` reads (1205, F1): a directory of `.ndjson`,
`.traj` or upper-case names was reported clean (`0 secret(s) found in 0 file(s)`, exit 0),
and such a file named on its own was read as plain text, without its fields. Run as a
user runs it: the installed `worldtrace` on real files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from worldtrace.collectors.importers import LINE_SUFFIXES
from worldtrace.collectors.importers import SUFFIXES as IMPORT_SUFFIXES

from ..conftest import VENV_BIN

WT = str(VENV_BIN / "worldtrace")
RECORD = {
    "id": "a",
    "messages": [
        {
            "role": "tool",
            "content": "AKIAIOSFODNN7EXAMPLE "
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        }
    ],
}
LINE = json.dumps(RECORD) + "\n"
DOCUMENT = json.dumps(RECORD, indent=2)  # pretty-printed, as SWE-agent writes a .traj


def check(env: dict, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WT, "redact", "--check", *map(str, paths)], capture_output=True, text=True, env=env
    )


def findings(path: Path, record: str) -> list[str]:
    return [
        f"{path}: {record}: messages[0].content: {k}" for k in ("aws_access_key", "aws_secret_key")
    ]


def test_a_directory_walk_checks_every_file_import_reads_whatever_its_case(tmp_path, wt_env):
    d = tmp_path / "rd"
    d.mkdir()
    for suffix in IMPORT_SUFFIXES:  # .traj, .json, .jsonl, .ndjson
        for name in (f"low{suffix}", f"UP{suffix.upper()}"):
            (d / name).write_text(LINE if suffix in LINE_SUFFIXES else DOCUMENT)
    r = check(wt_env, d)
    files = 2 * len(IMPORT_SUFFIXES)
    assert r.stderr.splitlines()[-1] == f"{2 * files} secret(s) found in {files} file(s)"
    assert r.returncode == 1


def test_an_ndjson_or_traj_file_named_alone_is_read_field_by_field(tmp_path, wt_env):
    nd, traj, upper = tmp_path / "a.ndjson", tmp_path / "c.traj", tmp_path / "B.JSONL"
    nd.write_text(LINE + LINE.replace('"a"', '"b"'))
    traj.write_text(DOCUMENT)
    upper.write_text(LINE)
    r = check(wt_env, nd, traj, upper)
    assert r.stdout.splitlines() == [
        *findings(nd, "a"),
        *findings(nd, "b"),
        *findings(traj, "file"),
        *findings(upper, "a"),
    ]
    assert r.returncode == 1
