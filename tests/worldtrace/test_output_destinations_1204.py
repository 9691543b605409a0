"""Where `report -o` and `query -o` write (docs/query.md: a symlink's target is
replaced, a pipe or a device is written into, `-` is stdout).

Found (docs review, 2026-12-04): `report -o` replaced what it named: `/dev/null` and
`/dev/stdout` became plain files (for every process of the machine), a FIFO became a
file (its reader got nothing), a symlink became a file (its target untouched).
`query -o /dev/stdout` with stdout redirected to a file replaced that file (what the
shell had appended before was lost). `query -o -` without `--format` was refused.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading

from worldtrace.schemas import Store

from ..conftest import VENV_BIN
from .test_query import run_cli


def null_device(path) -> None:
    """A character device like /dev/null (1, 3), made where the test owns it."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def empty_store(tmp_path) -> Store:
    store = Store.at(tmp_path / "store")
    store.root.mkdir()
    return store


def test_report_writes_into_devices_and_pipes_and_through_links(tmp_path):
    store = empty_store(tmp_path)
    dev = tmp_path / "null"
    null_device(dev)
    r = run_cli(store, "report", "-o", str(dev))
    assert r.exit_code == 0, r.output
    assert stat.S_ISCHR(os.stat(dev).st_mode)  # still the device, not a 5 MB file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = run_cli(store, "report", "-o", str(fifo))
    reader.join(timeout=60)
    assert r.exit_code == 0 and fifo.is_fifo()
    assert got and got[0].startswith(b"<!doctype html>") and got[0].rstrip().endswith(b"</html>")

    target, link = tmp_path / "target.html", tmp_path / "link.html"
    target.write_text("old")
    link.symlink_to(target)
    r = run_cli(store, "report", "-o", str(link))
    assert r.exit_code == 0 and link.is_symlink()
    assert target.read_text().startswith("<!doctype html>")


def wt(store: Store, out, *args: str) -> subprocess.CompletedProcess:
    """The real command in its own process, stdout to `out` (an open file)."""
    return subprocess.run(
        [str(VENV_BIN / "worldtrace"), "--store", str(store.root), *args],
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def test_dev_stdout_redirected_to_a_file_is_appended_to_not_replaced(tmp_path):
    store = empty_store(tmp_path)
    log = tmp_path / "app.log"
    log.write_text("line1\nline2\n")
    with open(log, "a") as out:
        r = wt(store, out, "query", "SELECT 42 AS a", "-o", "/dev/stdout", "--format", "csv")
        assert r.returncode == 0, r.stderr
        r = wt(store, out, "report", "-o", "/dev/stdout")
        assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.startswith("line1\nline2\na\n42\n<!doctype html>"), text[:80]
    assert text.rstrip().endswith("</html>")  # "report -> ..." went to stderr
    assert "report -> /dev/stdout" in r.stderr


def test_query_to_dash_without_a_format_is_the_table(tmp_path):
    store = empty_store(tmp_path)
    r = run_cli(store, "query", "SELECT 7 AS x", "-o", "-")
    assert r.exit_code == 0, r.output
    assert r.stdout == run_cli(store, "query", "SELECT 7 AS x").stdout
    assert "┃" in r.stdout or "│" in r.stdout
