"""Page checksums (hunt 1206q): a one-bit flip in a processed Parquet shard became
training text. zstd keeps text that does not compress as raw blocks, and its
Huffman-coded literals decode whatever their bits: most one-bit flips of a shard read
back as other data with no error (12,149 of 19,798 bytes of one shard), so `export`
exited 0 with the changed text in its samples and `doctor` said every shard reads.

Now every Parquet file the store writes carries a CRC32 of each page and every read of
one checks it: the flip is the one-line `damaged Parquet` error naming the file. Files
written before (no checksums) read as they did.
"""

from __future__ import annotations

import io
import json
import random
import string
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.schemas import ShardWriter, read_table
from worldtrace.schemas.store import iter_batches, read_parquet, scan_file
from worldtrace.schemas.tempfiles import (
    REBUILD_HINT,
    DamagedFile,
    index_read,
    open_parquet,
    write_table_atomic,
)
from worldtrace.schemas.views import shard_problem

CRC = "could not verify page integrity, CRC checksum verification failed"
TEXT = "turns.list.element.observation.text"


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def one_error(r: subprocess.CompletedProcess) -> str:
    """The command failed with one line on stderr and no traceback: that line."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip().splitlines()[-1]


def keys(n: int, seed: int = 7) -> list[str]:
    """Texts that do not compress: what zstd keeps as raw or Huffman-coded literals."""
    r = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return [f"K{i}:" + "".join(r.choice(alphabet) for _ in range(120)) for i in range(n)]


def openai_lines(n: int = 30) -> str:
    """`n` OpenAI chat records of three `bash` calls each, every output a key."""
    texts = iter(keys(3 * n))
    lines = []
    for i in range(n):
        msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"keys {i}"}]
        for k in range(3):
            call = {"name": "bash", "arguments": json.dumps({"cmd": f"cat /srv/p{i}/k{k}"})}
            msgs.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{k}", "type": "function", "function": call}]})  # fmt: skip
            msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": next(texts)})
        lines.append(json.dumps({"id": f"r{i}", "messages": msgs}) + "\n")
    return "".join(lines)


def silent_flip(path: Path, column: str, top: str) -> str:
    """Flip one bit in the pages of `column` that a reader without checks takes: the file
    reads, with other values in `top`, and no error. Returns the changed value."""
    data = path.read_bytes()
    before = pq.read_table(io.BytesIO(data), columns=[top]).column(top).to_pylist()
    group = pq.read_metadata(path).row_group(0)
    chunk = next(
        group.column(i)
        for i in range(group.num_columns)
        if group.column(i).path_in_schema == column
    )
    first = chunk.dictionary_page_offset or chunk.data_page_offset
    for at in range(first + chunk.total_compressed_size - 1, first, -1):  # the page, not its header
        changed = bytearray(data)
        changed[at] ^= 1
        try:
            after = pq.read_table(io.BytesIO(changed), columns=[top]).column(top).to_pylist()
        except (OSError, pa.ArrowException):
            continue  # zstd or the decoder noticed: already named as damage
        if after != before:
            path.write_bytes(bytes(changed))
            return next(str(b) for a, b in zip(before, after, strict=True) if a != b)
    raise AssertionError(f"no silent one-bit flip in {column} of {path}")


@pytest.fixture
def processed(tmp_path: Path, wt_env: dict[str, str]) -> tuple[Path, Path]:
    """(store, its processed shard): the fixture imported (`import`) and processed."""
    f = tmp_path / "in.jsonl"
    f.write_text(openai_lines())
    store = Path(wt_env["WORLDTRACE_STORE"])
    for args in (("import", str(f)), ("process",)):
        r = wt(wt_env, *args)
        assert r.returncode == 0, r.stderr
    [shard] = sorted((store / "processed" / "trajectories").glob("*.parquet"))
    return store, shard


def test_a_flipped_bit_in_a_processed_shard_fails_export_naming_the_file(processed, wt_env):
    store, shard = processed
    silent_flip(shard, TEXT, "turns")
    out = store.parent / "out"
    line = one_error(wt(wt_env, "export", "-o", str(out)))  # exited 0, the changed key in it
    assert line.startswith(f"error: {shard}: damaged Parquet ({CRC}"), line
    assert line.endswith(REBUILD_HINT) and not out.exists(), line
    line = one_error(wt(wt_env, "export", "--format", "agentworldbench", "-o", str(out)))
    assert f"{shard}: damaged Parquet ({CRC}" in line and not out.exists(), line
    # the advice mends it
    assert wt(wt_env, "process", "--rebuild").returncode == 0
    assert wt(wt_env, "export", "-o", str(out)).returncode == 0


def test_doctor_names_a_processed_shard_whose_page_fails_its_checksum(processed, wt_env):
    _, shard = processed
    silent_flip(shard, TEXT, "turns")
    r = wt(wt_env, "doctor", "--store-only", "--json")
    checks = json.loads(r.stdout)["checks"]
    [check] = [c for c in checks if not c["ok"] and str(shard) in c["detail"]]  # was "reads"
    assert check["detail"].startswith(f"{shard}: damaged Parquet ({CRC}"), check
    assert check["fix"] == REBUILD_HINT


def test_an_index_file_with_a_flipped_page_is_named(tmp_path):
    """`write_table_atomic`'s files (processed/_index, side tables) carry checksums:
    `read_parquet`, `index_read` (`process`) and `doctor`'s deep read name the damage."""
    table = pa.table({"key": [f"k{i}" for i in range(60)], "text": keys(60)})
    index = write_table_atomic(tmp_path / "_index" / "templates.parquet", table)
    silent_flip(index, "text", "text")
    for read in (lambda: read_parquet(index), lambda: read_parquet([index], ["text"])):
        with pytest.raises(OSError, match=CRC):
            read()
    with (
        pytest.raises(DamagedFile, match=rf"^{index}: unreadable Parquet \({CRC}"),
        index_read(index),
    ):
        read_parquet(index)
    assert shard_problem(index, deep=True).startswith(f"damaged Parquet ({CRC}")
    assert shard_problem(index) is None  # the footer reads: only a deep read tells


def test_a_raw_shard_with_a_flipped_page_is_named_not_read(store, corpus):
    """The ShardWriter's shards (raw/, imports) carry checksums: `validate` and `process`
    (`scan_file`), `read_table` and `iter_batches` name the damage."""
    for t, text in zip(corpus, keys(len(corpus)), strict=True):
        t.turns[0].observation.text = text
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus)
    [shard] = w.paths
    silent_flip(shard, TEXT, "turns")
    with pytest.raises(OSError, match=CRC):
        read_table(store.raw / "a")
    with pytest.raises(OSError, match=CRC):
        list(iter_batches(store.raw / "a"))
    problems = [p for _, p in scan_file(shard) if not isinstance(p, dict)]
    assert problems and CRC in problems[0].message, problems
    assert len(problems[0].rows) == len(corpus)  # every row of the group counted lost


def test_files_written_without_checksums_read_as_before(store, corpus, tmp_path):
    """Shards and index files written before page checksums have none: they read."""
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus)
    [shard] = w.paths
    old = pq.read_table(shard)
    pq.write_table(old, shard, compression="zstd")  # as the store wrote before 1206q
    assert read_table(store.raw / "a").equals(old)
    assert sum(b.num_rows for b in iter_batches(store.raw / "a")) == len(corpus)
    assert all(isinstance(d, dict) for _, d in scan_file(shard))
    assert shard_problem(shard, deep=True) is None
    assert open_parquet(shard).read().equals(old)


def test_query_parquet_output_carries_checksums(wt_env, tmp_path):
    """`query --format parquet -o FILE` is a file users keep: its pages are checked too."""
    values = ", ".join(f"('{t}')" for t in keys(60))
    out = tmp_path / "q.parquet"
    r = wt(wt_env, "query", f"SELECT * FROM (VALUES {values}) v(text)", "--format", "parquet",
           "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    silent_flip(out, "text", "text")
    with pytest.raises(OSError, match=CRC):
        open_parquet(out).read()
