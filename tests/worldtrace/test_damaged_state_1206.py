"""Found (fault-injection hunt 1206): a damaged `processed/manifest.json` ended `stats`,
`query`, `report`, `explain` and `export` in a traceback (`UnicodeDecodeError` for bytes
that are not UTF-8, `TypeError: 'int' object is not iterable` for `inputs: 5`), and one
that was no JSON at all was not named: `stats` said to run `worldtrace process`. A
damaged `_index/shards.parquet` was named by none of them (exit 0; with new raw data
`stats` sent the user to `process`, which then failed naming the index), and `doctor`
said every shard read: it looked at the tables only, not at `_index`. `export --verify`
of an export stopped between its two renames was click's `Directory ... does not exist`
(every other reading command puts it back); `gc --dry-run` said a `.run-*` directory
with a time in the future was `untouched for -7199s`; and on a read-only store a stopped
publish made every reading command say `[Errno 30] Read-only file system: .../.process.lock`.

Stores are made as a user makes them (OpenAI chat JSONL, `worldtrace import`, `worldtrace
process`), the real CLI runs in its own process, the damage is real bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from worldtrace.schemas.tempfiles import REBUILD_HINT

from ..conftest import SUDO, VENV_BIN
from .test_report_hunt_1204d import chats


def wt(store: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    env.pop("WORLDTRACE_STORE", None)
    return subprocess.run(
        ["worldtrace", "--store", str(store), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A store of 20 imported chats, processed; each test works on a copy."""
    root = tmp_path_factory.mktemp("made")
    store = root / "store"
    r = wt(store, "import", "--create", str(chats(root / "a.jsonl", 0, 20)))
    assert r.returncode == 0, r.stderr
    r = wt(store, "process")
    assert r.returncode == 0, r.stderr
    return store


@pytest.fixture
def store(made, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(made, copy, symlinks=True)
    return copy


def reading(tmp_path: Path) -> list[tuple[str, ...]]:
    """Every command that reads the store's processed data."""
    return [
        ("stats",),
        ("query", "select 1"),
        ("report", "-o", str(tmp_path / "r.html")),
        ("explain", "abc"),
        ("export", "-o", str(tmp_path / "ex")),
    ]


def one_line(r: subprocess.CompletedProcess) -> str:
    """The one line of an error, without its `error: ` (or click's `Error: `)."""
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].lower().startswith("error: "), lines[0]
    return lines[0][len("error: ") :]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda m: b"\xff", "does not read ('utf-8' codec can't decode byte 0xff in position 0"),
        (lambda m: b"not json", "does not read (Expecting value: line 1 column 1 (char 0))"),
        (lambda m: b"[1, 2]", "is a JSON list, not an object"),
        (
            lambda m: json.dumps({**json.loads(m), "inputs": 5}).encode(),
            "has inputs 5, not a list of paths",
        ),
        (
            lambda m: json.dumps({**json.loads(m), "config": [1]}).encode(),
            "has no config",
        ),
    ],
    ids=["not-utf8", "not-json", "list", "inputs-int", "config-list"],
)
def test_a_damaged_run_manifest_is_one_line_with_the_fix_from_every_reading_command(
    store, tmp_path, damage, why
):
    manifest = store / "processed" / "manifest.json"
    manifest.write_bytes(damage(manifest.read_bytes()))
    # one reader (`publish.run_manifest`): every command for one damage, the reading
    # commands' and process's paths for the others (the suite's time)
    every = why.startswith("does not read ('utf-8'")
    commands = [*reading(tmp_path), ("process", "--input", str(store / "raw"))]
    for args in [*(commands if every else commands[:1]), ("process",)]:
        line = one_line(wt(store, *args))
        assert line.startswith(f"{manifest}: the last run's manifest {why}"), (args, line)
        assert line.endswith(f"; {REBUILD_HINT}"), (args, line)
    assert not (tmp_path / "ex").exists()
    if not every:
        return
    r = wt(store, "doctor", "--store-only")  # a problem there too: FAIL, exit 1
    assert r.returncode == 1 and "[FAIL] run manifest" in r.stdout, r.stdout
    r = wt(store, "process", "--rebuild")  # the fix it names mends it
    assert r.returncode == 0, r.stderr
    r = wt(store, "stats")
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_a_damaged_run_index_is_named_by_the_reading_commands_and_doctor(store, tmp_path):
    index = store / "processed" / "_index" / "shards.parquet"
    os.truncate(index, index.stat().st_size - 10)
    for args in reading(tmp_path):
        line = one_line(wt(store, *args))
        assert line.startswith(f"{index}: unreadable Parquet ("), (args, line)
        assert line.endswith(f"; {REBUILD_HINT}"), (args, line)
    # new raw data: still the index, not "run `worldtrace process`" (which fails on it)
    r = wt(store, "import", str(chats(tmp_path / "b.jsonl", 100, 3)))
    assert r.returncode == 0, r.stderr
    line = one_line(wt(store, "stats"))
    assert line.startswith(f"{index}: unreadable Parquet (")
    line = one_line(wt(store, "process"))
    assert line.startswith(f"{index}: unreadable Parquet (")
    r = wt(store, "doctor", "--store-only")
    assert r.returncode == 1, r.stdout
    [said] = [x for x in r.stdout.splitlines() if str(index) in x]
    assert said.startswith("[FAIL] store shard") and "unreadable Parquet (" in said, said
    assert REBUILD_HINT in r.stdout


def test_doctor_names_each_damaged_file_of_the_run_index(store):
    """Each of `_index/members.parquet`, a file of `_index/segments` and one of
    `_index/probe` cut short, all on the one store: doctor names each (a FAIL line of its
    own, with the fix), and the rebuild it advises mends them all."""
    paths = {}
    for where in ("_index/members.parquet", "_index/segments", "_index/probe"):
        path = store / "processed" / where
        if path.is_dir():
            [path] = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        os.truncate(path, path.stat().st_size - 10)
        paths[where] = path
    r = wt(store, "doctor", "--store-only")
    assert r.returncode == 1, r.stdout
    for where, path in paths.items():
        [said] = [x for x in r.stdout.splitlines() if str(path) in x]
        assert said.startswith("[FAIL] store shard"), (where, said)
    assert REBUILD_HINT in r.stdout
    r = wt(store, "process", "--rebuild")
    assert r.returncode == 0, r.stderr
    r = wt(store, "doctor", "--store-only")
    assert r.returncode == 0 and "[FAIL]" not in r.stdout, r.stdout


def test_export_verify_puts_back_an_export_stopped_between_its_renames(store):
    out = store / "export" / "parquet"
    r = wt(store, "export")
    assert r.returncode == 0, r.stderr
    aside = out.parent / ".old-parquet-0123abcd"
    out.rename(aside)  # what a stop between the two renames leaves
    r = wt(store, "export", "--verify", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"{out}: verified"
    assert out.is_dir() and not aside.exists()
    r = wt(store, "export", "--verify", str(store / "export" / "nothing"))  # still refused
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr


def test_gc_keeps_a_leftover_with_a_time_in_the_future_saying_so(store):
    run = store / "processed" / ".run-4242-host-0123abcd"
    run.mkdir()
    (run / "x").write_text("x")
    ahead = time.time() + 2 * 3600
    for p in (run / "x", run):
        os.utime(p, (ahead, ahead))
    for args in (("gc", "--dry-run"), ("gc", "--min-age", "1m")):
        r = wt(store, *args, "--no-containers")
        assert r.returncode == 0, r.stderr
        [line] = [x for x in r.stdout.splitlines() if str(run) in x]
        assert line.startswith("kept "), line
        assert "modified 2h in the future (a clock out of step" in line, line
        assert "untouched for -" not in line, line
    assert run.is_dir()
    r = wt(store, "gc", "--dry-run", "--min-age", "0s", "--no-containers")  # whatever the age
    [line] = [x for x in r.stdout.splitlines() if str(run) in x]
    assert line.startswith("would remove ") and "modified 2h in the future" in line, line


def test_a_stopped_publish_on_a_read_only_store_says_what_it_needs(made, tmpfs, tmp_path):
    store = tmpfs / "store"
    shutil.copytree(made, store, symlinks=True)
    processed = store / "processed"
    run = processed / ".run-1-host-0123abcd"
    run.mkdir()
    shutil.copytree(processed / "trajectories", run / "trajectories")
    journal = processed / ".publish.json"
    journal.write_text(
        json.dumps(
            {
                "run": run.name,
                "names": ["trajectories"],
                "old": {"trajectories": ".old-trajectories-0123abcd"},
            }
        )
    )
    subprocess.run([*SUDO, "mount", "-o", "remount,ro", str(tmpfs)], check=True)
    for args in reading(tmp_path):
        line = one_line(wt(store, *args))
        assert line.startswith(f"{journal}: a `worldtrace process` run stopped"), line
        assert "Errno" not in line and "writable" in line, line
    subprocess.run([*SUDO, "mount", "-o", "remount,rw", str(tmpfs)], check=True)
    r = wt(store, "stats")  # writable again: the publish is finished, the data read
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert not journal.exists() and not (run / "trajectories").exists()  # swapped in
