"""Fault review (1203b): what the commands say about damaged files of a store, through
the real CLI over real stores with real damage (cut, emptied or page-flipped Parquet, a
hand-edited publish journal, an export killed between its two renames).

Found: a raw shard cut after it was processed was "changed" and sent to `process
--rebuild`, which dropped the 300 trajectories only it held and exited 0 (F1); a
processed shard whose pages no longer decode passed `doctor`, and `stats`/`report`
ended in a DuckDB traceback while `export` blamed its own output (F5); a processed
shard cut short made `export` say `Parquet magic bytes not found` naming no file, and
`doctor` sent the user to a plain `process` that answered `no new input` (F6); an export
killed between its renames left no export and nothing but `gc --dry-run` said so (F7);
a damaged `processed/.publish.json` was a traceback in `stats`, `query`, `export` and
`gc`, and `doctor` said all was well (F8); `process` printed files in the store by their
absolute path where docs/pipeline.md names them from the store's root (docs review A2).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, build, generate
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.schemas import ShardWriter

from ..pipelines.test_publish_crash import KILL_AFTER

REBUILD = "`worldtrace process --rebuild` makes the processed data again from raw/"
"""The real CLI, SIGKILLed right after the rename whose target matches (the only fault
injected; tests/pipelines/test_publish_crash.py does the same to `process`)."""


def wt(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def one_error(r: subprocess.CompletedProcess) -> str:
    """The command failed with one line on stderr and no traceback: that line."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip().splitlines()[-1]


def processed_store(store, n: int = 40):
    """`a` (10 trajectories) and `b` (the other 30) processed: returns b's shard."""
    corpus = generate(SyntheticConfig(n=n, seed=3))
    with ShardWriter(store.raw / "a") as w:
        w.write(corpus[:10])
    with ShardWriter(store.raw / "b") as w:
        w.write(corpus[10:])
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    return w.paths[0]


def count(env) -> int:
    r = wt(env, "query", "SELECT count(*) AS n FROM trajectories", "--format", "json")
    return json.loads(r.stdout)[0]["n"]


def doctor_checks(env) -> list[dict]:
    return json.loads(wt(env, "doctor", "--store-only", "--json").stdout)["checks"]


def cut(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_pages(path) -> None:
    """Change bytes in the middle of the largest column chunk's pages, as a disk fault
    does: the same size, a footer that reads, pages that do not decompress."""
    group = pq.read_metadata(path).row_group(0)
    chunk = max(
        (group.column(i) for i in range(group.num_columns)), key=lambda c: c.total_compressed_size
    )
    first = chunk.dictionary_page_offset or chunk.data_page_offset
    size = chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    for at in range(first + size // 4, first + size * 3 // 4, 7):
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    pq.read_metadata(path)  # the footer reads: only the pages are damaged
    with pytest.raises((OSError, ValueError)):
        pq.read_table(path)


def test_a_damaged_raw_shard_is_named_and_rebuild_refuses_to_drop_what_only_it_held(store, wt_env):
    b = processed_store(store)
    assert count(wt_env) == 40
    cut(b)
    for args in (("process",), ("process", "--rebuild")):
        line = one_error(wt(wt_env, *args))
        assert line.startswith(f"Error: raw file {b} is damaged: "), line
        assert "30 processed trajectories come only from it" in line
        assert "move it out of the store and run `worldtrace process --rebuild`" in line
    assert count(wt_env) == 40  # was 10 after the advised rebuild, exit 0
    hint = wt(wt_env, "stats").stderr
    assert f"hint: raw file {b} is damaged: " in hint and "changed since it was processed" in hint
    [check] = [c for c in doctor_checks(wt_env) if c["detail"].startswith(str(b))]
    assert not check["ok"] and "30 processed trajectories come only from it" in check["fix"]
    # dropped knowingly: moved out, the rebuild goes on and says what it dropped
    b.rename(store.root / "b.damaged")
    hint = wt(wt_env, "stats").stderr
    assert "1 raw file(s) processed before are gone" in hint
    assert "30 processed trajectories come only from it" in hint
    r = wt(wt_env, "process", "--rebuild", "--json")
    assert r.returncode == 0, r.stderr
    dropped = json.loads(r.stdout)["dropped_inputs"]
    assert dropped == {"count": 1, "first": [str(b.relative_to(store.root))], "trajectories": 30}
    assert count(wt_env) == 10


def test_a_processed_shard_with_damaged_pages_is_named_by_every_command(store, wt_env, tmp_path):
    processed_store(store)
    shard = sorted(store.table("trajectories").glob("*.parquet"))[0]
    flip_pages(shard)
    [check] = [c for c in doctor_checks(wt_env) if not c["ok"] and str(shard) in c["detail"]]
    assert check["detail"].startswith(f"{shard}: damaged Parquet (") and check["fix"] == REBUILD
    expected = f"{shard}: damaged Parquet ("
    for args in (("stats",), ("stats", "--json"), ("report", "-o", str(tmp_path / "r.html"))):
        line = one_error(wt(wt_env, *args))
        assert line.startswith(f"Error: {expected}") and line.endswith(REBUILD), (args, line)
    r = wt(wt_env, "query", "SELECT max(len(turns)) FROM trajectories")
    assert r.stderr.strip().splitlines()[-1] == line.replace("Error: ", "error: ", 1)
    out = tmp_path / "awb"
    line = one_error(wt(wt_env, "export", "--format", "agentworldbench", "-o", str(out)))
    assert f"{shard}: damaged Parquet (" in line and line.endswith(REBUILD), line
    assert "cannot write the export" not in line and not out.exists()
    assert wt(wt_env, "process", "--rebuild").returncode == 0
    assert wt(wt_env, "stats").returncode == 0 and count(wt_env) == 40


def test_a_processed_shard_cut_short_is_named_and_the_advice_repairs_it(store, wt_env, tmp_path):
    """A shard cut short, then (after the advised rebuild) another one emptied, on the one
    store: each is named, and the rebuild the advice names mends it. The doctor run on the
    emptied shard names it alone: the cut one, rebuilt, reads again."""
    processed_store(store)
    for damage in ("cut", "empty"):
        shards = sorted(store.table("trajectories").glob("*.parquet"))
        assert len(shards) > 1, shards  # the emptied shard is not the one cut and rebuilt
        shard = shards[0] if damage == "cut" else shards[-1]
        cut(shard) if damage == "cut" else shard.write_bytes(b"")
        unreadable = f"error: {shard}: unreadable Parquet ("
        out = tmp_path / f"x-{damage}"
        line = one_error(wt(wt_env, "export", "--format", "agentworldbench", "-o", str(out)))
        assert line.startswith(unreadable) and line.endswith(REBUILD), (damage, line)
        checks = doctor_checks(wt_env)
        [check] = [c for c in checks if not c["ok"] and str(shard) in c["detail"]]
        # was: `worldtrace process` rebuilds (it said no new input)
        assert check["fix"] == REBUILD, damage
        if damage == "empty":  # no other shard fails: the rebuild after the cut mended it
            assert [c for c in checks if c["name"] == "store shard"] == [check], checks
        line = one_error(wt(wt_env, "process"))
        assert line.startswith(unreadable) and line.endswith(REBUILD), (damage, line)
        assert wt(wt_env, "process", "--rebuild").returncode == 0, damage
        assert count(wt_env) == 40, damage
    assert not [c for c in doctor_checks(wt_env) if c["name"] == "store shard"]


def test_an_export_killed_between_its_renames_is_put_back(store, wt_env):
    processed_store(store, n=12)
    first = wt(wt_env, "export", "--format", "agentworldbench")
    assert first.returncode == 0, first.stderr
    real = store.export / "agentworldbench"
    before = sorted(p.name for p in real.iterdir())
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, str(store.export), ".old-agentworldbench-*",
         "export", "--format", "agentworldbench"],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    [old] = store.export.glob(".old-agentworldbench-*")
    assert not real.exists()  # the only copy is the hidden one
    [check] = [c for c in doctor_checks(wt_env) if c["name"] == "export swap"]
    assert check["detail"].startswith(f"{old}: the only copy of the export {real}")
    assert f"mv {old} {real}" in check["fix"]
    r = wt(wt_env, "stats", "--json")  # a reading command puts it back
    assert [e["name"] for e in json.loads(r.stdout)["sections"]["exports"]] == ["agentworldbench"]
    assert sorted(p.name for p in real.iterdir()) == before and not old.exists()
    assert wt(wt_env, "export", "--verify", str(real)).returncode == 0
    assert not [c for c in doctor_checks(wt_env) if c["name"] == "export swap"]


def test_a_damaged_publish_journal_is_one_line_everywhere(store, wt_env, tmp_path):
    """Each damaged journal in turn on the one store (no command changes the store while
    the journal is damaged: each refuses, gc keeps what it may name); then the advice,
    deleting it and rebuilding, mends the store."""
    processed_store(store, n=12)
    journal = store.processed / ".publish.json"
    aside = store.processed / ".old-trajectories-0123abcd"  # what such a journal may name
    aside.mkdir()
    for text in ('{"run": "xx"', "{}", "[]"):
        journal.write_text(text)
        for args in (
            ("stats",),
            ("query", "SELECT count(*) FROM trajectories"),
            ("export", "--format", "agentworldbench", "-o", str(tmp_path / "x")),
            ("gc", "--no-containers", "--min-age", "0s"),
            ("gc", "--dry-run", "--no-containers"),
        ):
            line = one_error(wt(wt_env, *args))
            assert f"{journal}: damaged publish journal (" in line, (text, args, line)
            assert line.endswith("delete it, then run `worldtrace process --rebuild` (it "
                                 "makes the processed data again from raw/)"), (text, line)  # fmt: skip
        assert aside.is_dir(), text  # gc kept it: it may hold the only copy of a table
        [check] = [c for c in doctor_checks(wt_env) if c["name"] == "publish journal"]
        assert not check["ok"], (text, check)
        assert check["detail"].startswith(f"{journal}: damaged publish journal"), (text, check)
    journal.unlink()
    assert wt(wt_env, "process", "--rebuild").returncode == 0 and count(wt_env) == 12


def test_process_names_files_in_the_store_from_its_root(store, wt_env):
    short = [build("terminal", [(f"echo {i}\n", f"{i}")]) for i in range(2)]
    with ShardWriter(store.raw / "a") as w:
        w.write([*generate(SyntheticConfig(n=2, seed=3)), *short])
    r = wt(wt_env, "process")
    assert r.returncode == 0, r.stderr
    where = w.paths[0].relative_to(store.root)
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("filtered: ")]
    assert said == [f"filtered: {where}:row {i}: filter: min_turns" for i in (2, 3)], r.stderr
    manifest = json.loads((store.processed / "manifest.json").read_text())
    assert {x["source_path"] for x in manifest["rejected"]} == {str(where)}


def flip_page_header(path) -> None:
    """Change the first bytes of a column chunk's first page: its header (thrift) no
    longer decodes, and DuckDB's error names neither the file nor Parquet."""
    group = pq.read_metadata(path).row_group(0)
    chunk = next(
        group.column(i)
        for i in range(group.num_columns)
        if group.column(i).path_in_schema == "trajectory_id"  # every stats table reads it
    )
    first = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    for at in range(first, first + 12):
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_page_header_that_does_not_decode_is_named_too(store, wt_env, tmp_path):
    """Found by the docs review: `stats` and `report` said only `Error: TProtocolException:
    Exceeded size limit` (or `don't know what type:`) for a shard whose page header was
    damaged, naming no file, where `doctor` named it."""
    processed_store(store)
    shard = sorted(store.table("trajectories").glob("*.parquet"))[0]
    flip_page_header(shard)
    for args in (("stats",), ("report", "-o", str(tmp_path / "r.html"))):
        line = one_error(wt(wt_env, *args))
        assert line.startswith(f"Error: {shard}: ") and line.endswith(REBUILD), (args, line)
