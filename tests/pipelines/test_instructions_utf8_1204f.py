"""Found (export hunt 1204f): simulation instructions saved in Latin-1 stopped an export
with `Error: 'utf-8' codec can't decode byte 0xd0 in position 12: invalid continuation
byte`, naming no file; a directory of `<domain>.md` files alike. They are named now as a
template is (`schemas.text.read_utf8`): the file, the line, the column, the way on.

Real parts: a decided Parquet store, the real `worldtrace` command (a subprocess)."""

from __future__ import annotations

import pytest

from .conftest import decided_store
from .test_export_hunt_1204f import wt


@pytest.mark.parametrize("shape", ["file", "directory"])
def test_instructions_that_are_not_utf8_are_named_with_their_line(tmp_path, shape):
    store = decided_store(tmp_path, keep=1.0)
    text = "You simulate a terminal.\nRéponds comme le shell.\n"
    if shape == "file":
        bad = tmp_path / "sim.yaml"
        bad.write_bytes(("terminal: |\n  " + text.replace("\n", "\n  ")).encode("latin-1"))
        given = bad
    else:
        given = tmp_path / "sim"
        given.mkdir()
        bad = given / "terminal.md"
        bad.write_bytes(text.encode("latin-1"))
    out = tmp_path / "out"
    r = wt("--store", str(store.root), "export", "--simulation-instructions", str(given),
           "-o", str(out))  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    line = 3 if shape == "file" else 2
    column = 4 if shape == "file" else 2
    assert r.stderr.strip() == (
        f"Error: simulation_instructions {bad}: line {line}: byte 0xe9 at column {column} is "
        "not UTF-8: the file is in another encoding (Latin-1 or cp1252?); convert it: iconv "
        f"-f cp1252 -t utf-8 {bad} > {bad}.utf8"
    )
    assert not out.exists()
