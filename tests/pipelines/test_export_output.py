"""Where `worldtrace export --output` may write: only a new or empty directory or an
earlier export is replaced; the store, what is in it (outside its export directory) and
any other directory are refused with one line, nothing touched. Found by a new-user
audit: `export -o DIR` replaced DIR whatever it was (a thesis, the store itself)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from worldtrace.pipelines.writers import verify
from worldtrace.schemas import Store
from worldtrace.schemas.store import temp_name

from worldtrace.cli import cli

from .conftest import decided_store

AWB = ["--format", "agentworldbench"]  # no tokenizer: the fastest real export


@pytest.fixture
def small(tmp_path) -> Store:
    """A store with raw and processed trajectories (8 synthetic records), as a user has
    after `worldtrace process`."""
    return decided_store(tmp_path, 1.0, raw=True)


def export(s: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(s.root), "export", *args], obj={})


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's sha256, a directory's and a link's kind."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = f"link -> {os.readlink(p)}"
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def refused(r, *expect: str) -> str:
    """The one line a refusal prints (exit 1, no traceback), holding each of `expect`."""
    assert r.exit_code == 1, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and all(e in lines[0] for e in expect), r.output
    assert ".staging" not in lines[0] and "Errno" not in lines[0], lines[0]
    return lines[0]


def test_a_directory_that_is_not_an_earlier_export_is_refused_untouched(small, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "thesis.txt").write_text("precious\n")
    before = snapshot(tmp_path)
    line = refused(export(small, "-o", str(d), *AWB), f"will not replace {d}", "earlier export")
    assert "new or empty directory" in line
    assert snapshot(tmp_path) == before


def test_the_store_and_what_is_in_it_are_refused_untouched(small, tmp_path):
    """The store, its parent, its processed data (directly and through a symlink), a new
    directory under raw/, and export/ itself (which holds one export per format)."""
    (tmp_path / "link").symlink_to(small.processed)
    before = snapshot(tmp_path)
    for out, expect in (
        (small.root, "it is the store"),
        (tmp_path, "it holds the store"),
        (small.processed, "inside the store"),
        (tmp_path / "link", "inside the store"),
        (small.raw / "new", "inside the store"),
        (small.export, "the store's export directory"),
    ):
        refused(export(small, "-o", str(out), *AWB), str(out), expect)
        assert snapshot(tmp_path) == before, out


def test_an_earlier_export_or_an_empty_directory_is_replaced(small, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = export(small, "-o", str(empty), *AWB)
    assert r.exit_code == 0, r.output
    assert verify(empty) == []
    r = export(small, "-o", str(empty), *AWB, "--split", "test=0.3")  # a split export...
    assert r.exit_code == 0, r.output
    assert (empty / "test" / "manifest.json").exists() and verify(empty) == []
    r = export(small, "-o", str(empty), *AWB)  # ...is an earlier export too
    assert r.exit_code == 0, r.output
    assert not (empty / "test").exists() and verify(empty) == []
    # the store's own export directory: the default, or another name under it
    for args in ([], ["-o", str(small.export / "mine")]):
        r = export(small, *args, *AWB)
        assert r.exit_code == 0, r.output
    assert verify(small.export / "agentworldbench") == verify(small.export / "mine") == []
    # through a symlink: the export it points to is replaced, the link stays
    (tmp_path / "link").symlink_to(empty)
    r = export(small, "-o", str(tmp_path / "link"), *AWB, "--seed", "7")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "link").is_symlink() and json.loads((empty / "manifest.json").read_text())[
        "seed"
    ] == 7
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left beside


def test_an_earlier_export_holding_a_file_of_the_user_is_refused(small, tmp_path):
    out = tmp_path / "e"
    assert export(small, "-o", str(out), *AWB).exit_code == 0
    (out / "notes.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    refused(export(small, "-o", str(out), *AWB), str(out), "notes.txt")
    assert snapshot(tmp_path) == before


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_only_leftovers_of_exports_to_the_same_directory_are_swept(small, tmp_path):
    """A died export's staging directory for OUT goes; the user's own hidden files that
    look like temp names (however old) and other exports' work stay."""
    out = tmp_path / "out"
    ours = tmp_path / temp_name(".staging-", "out").replace(f"-{os.getpid()}-", f"-{dead_pid()}-")
    ours.mkdir()
    (ours / "part.jsonl").write_text("{}\n")
    users = [tmp_path / ".tmp-notes", tmp_path / ".old-thesis", tmp_path / ".staging-draft"]
    for p in users:
        p.write_text("mine\n")
        os.utime(p, (time.time() - 86400, time.time() - 86400))  # a day old
    other = tmp_path / temp_name(".staging-", "other")  # a live export elsewhere
    other.mkdir()
    r = export(small, "-o", str(out), *AWB)
    assert r.exit_code == 0, r.output
    assert not ours.exists()
    assert all(p.read_text() == "mine\n" for p in users) and other.is_dir()


def test_a_parent_that_is_a_file_is_one_line_naming_it(small, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    before = snapshot(tmp_path)
    line = refused(export(small, "-o", str(afile / "out"), *AWB))
    assert line == f"Error: cannot write the export to {afile / 'out'}: {afile} is not a directory"
    assert snapshot(tmp_path) == before


def wt(small: Store, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed command, as a user runs it (errors through its own last word)."""
    cmd = [str(Path(sys.executable).parent / "worldtrace"), "--store", str(small.root)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess, *expect: str) -> str:
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].lower().startswith("error: "), r.stderr
    assert all(e in lines[0] for e in expect), lines[0]
    assert ".staging" not in lines[0] and "Errno" not in lines[0], lines[0]
    return lines[0]


def test_an_unwritable_parent_is_one_line_naming_it(small):
    """chmod does not stop root (the tests run as root): sysfs refuses new directories to
    everyone, root included (EPERM), on every Linux machine: no skip needed."""
    out = f"/sys/wt-export-{uuid.uuid4().hex[:8]}"
    r = wt(small, "export", "-o", out, *AWB)
    one_error_line(r, f"cannot write the export to {out}: /sys is not writable")


def test_the_current_directory_is_refused_even_when_an_earlier_export(small, tmp_path):
    out = small.export / "agentworldbench"
    assert export(small, *AWB).exit_code == 0
    before = snapshot(small.root)
    r = wt(small, "export", "-o", ".", *AWB, cwd=out)
    one_error_line(r, "will not replace .: it is the current directory")
    work = tmp_path / "work"  # not an export: refused as such
    work.mkdir()
    (work / "draft.txt").write_text("mine\n")
    r = wt(small, "export", "-o", ".", *AWB, cwd=work)
    one_error_line(r, "will not replace .: it is not an earlier export")
    assert snapshot(small.root) == before and verify(out) == []
    assert (work / "draft.txt").read_text() == "mine\n"
