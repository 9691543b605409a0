"""Interrupts and failures of the machine under `import`, `process`, `export` and
`validate` (review 1203b, F11): Ctrl-C exits 130 and SIGTERM 143, each with one line
saying what the store holds (never click's `Aborted!` and 1, a failure's status); a full
or read-only disk is named by the path the user knows. Real CLI processes, real signals
by pid, a real tmpfs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from worldtrace.schemas import Store

from ..collectors.test_faults_1203b import openai_records, start_import
from ..conftest import SUDO, cli_env, wait_until, wt

"""Mounting a tmpfs needs root; set-up has it (as tests/worldtrace/test_disk_full.py)."""


def popen(env: dict[str, str], *args: str) -> subprocess.Popen:
    """A command in its own process group, as a terminal runs it: Ctrl-C is SIGINT to
    the whole group."""
    return subprocess.Popen(
        ["worldtrace", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip


def stopped(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    """Send `sig` as a terminal's Ctrl-C does (SIGINT: the command's process group) or as
    `kill PID` does (SIGTERM: the command alone); its output once it ended."""
    try:
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # the group of the command this test started
        else:
            os.kill(proc.pid, sig)
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


PROGRESS = re.compile(r"\d\d:\d\d:\d\d \w+: ")


def said(err: str) -> list[str]:
    """stderr without progress lines (`HH:MM:SS import: ...`)."""
    return [ln for ln in err.splitlines() if ln.strip() and not PROGRESS.match(ln)]


NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def fill(path: Path) -> None:
    """Take every free byte of the file system holding `path`."""
    st = os.statvfs(path.parent)
    with open(path, "wb") as fh:
        fh.write(b"\0" * (st.f_bavail * st.f_frsize))


# -- Ctrl-C and SIGTERM ---------------------------------------------------------------


def cli_store(tmp_path_factory, name: str) -> tuple[Path, Path, dict[str, str]]:
    """(a new temporary folder, the store in it, an environment whose `worldtrace` is
    the venv's and whose store is that one): where a module's fixture builds its store
    with the CLI."""
    top = tmp_path_factory.mktemp(name)
    return top, top / "store", cli_env(top / "store")


@pytest.fixture(scope="module")
def to_import(tmp_path_factory) -> tuple[Path, Path]:
    """(a store holding a small import, made by the CLI; 3 x 3000 records to import, an
    import of seconds after its first progress line, when the tests stop it): each test
    imports the records (read only) into its own copy of the store."""
    top, store, env = cli_store(tmp_path_factory, "to-import")
    small = openai_records(top / "small.jsonl", 20, seed=9)
    assert wt(env, "import", str(small)).returncode == 0
    src = top / "in"
    src.mkdir()
    for k in range(3):
        openai_records(src / f"f{k}.jsonl", 3000, seed=k)
    return store, src


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_an_interrupted_import_says_what_it_kept_and_exits_130_or_143(wt_env, to_import, sig):
    """Found: Ctrl-C printed click's `Aborted!` and exited 1, a failure's status. Now one
    line says what the store holds. SIGTERM keeps its default (`commands/data.py`)."""
    store = Path(wt_env["WORLDTRACE_STORE"])
    made, src = to_import
    shutil.copytree(made, store, symlinks=True, dirs_exist_ok=True)  # a small import before
    before = sorted((store / "raw").rglob("*.parquet"))
    assert before
    proc = start_import(wt_env, src, start_new_session=True)
    line = proc.stderr.readline()  # records are going through
    assert " import: " in line, line
    _, err = stopped(proc, sig)
    dest = store / "raw" / "import"
    if sig == signal.SIGTERM:  # its default: the import ends at once, nothing half there
        assert proc.returncode == -signal.SIGTERM, err
        visible = [p for p in dest.rglob("*.parquet") if not p.name.startswith(".")]
        assert sorted(visible) == sorted(p for p in before if p.is_relative_to(dest))
        return
    assert proc.returncode == 128 + sig, err
    assert said(err) == [
        f"interrupted ({NAMES[sig]}): nothing was imported: {dest} is as it was (no shard "
        "is half-written); run the same import again"
    ], err
    assert sorted((store / "raw").rglob("*.parquet")) == before  # hidden temp file gone too


@pytest.fixture(scope="module")
def made_processed_raw(tmp_path_factory) -> Path:
    """A store processed once (a small import), then a large import not processed yet
    (1.4 MB: `process` picks worker lanes, 768 KB and more, and its pass 1 writes ~4 s
    before it publishes): made once by the CLI; each test works on a copy
    (`processed_raw`)."""
    top, store, env = cli_store(tmp_path_factory, "processed-raw")
    assert wt(env, "import", str(openai_records(top / "a.jsonl", 30, seed=5))).returncode == 0
    r = wt(env, "process")
    assert r.returncode == 0, r.stderr
    big = top / "big"
    big.mkdir()
    for k in range(2):
        openai_records(big / f"b{k}.jsonl", 3000, seed=20 + k)
    assert wt(env, "import", str(big)).returncode == 0
    return store


@pytest.fixture(scope="module")
def made_processed(tmp_path_factory) -> Path:
    """A store with 1,500 records, all processed: an export of seconds to act on while it
    writes (its staging directory lives ~2 s, 40 polls), without the `process` run and
    the larger export that `made_processed_raw` would cost each test. Made once by the
    CLI; each test works on a copy (`processed_raw`)."""
    top, store, env = cli_store(tmp_path_factory, "processed")
    records = top / "records"
    records.mkdir()
    for k in range(2):
        openai_records(records / f"r{k}.jsonl", 750, seed=40 + k)
    assert wt(env, "import", str(records)).returncode == 0
    r = wt(env, "process")
    assert r.returncode == 0, r.stderr
    return store


def processed_raw(env: dict[str, str], made: Path) -> Store:
    """A copy of `made` (`made_processed_raw`, `made_processed`) as the store `env` names
    (a copied store's files are matched at their new place, as `process` matches them)."""
    store = Store.at(env["WORLDTRACE_STORE"])
    shutil.copytree(made, store.root, symlinks=True, dirs_exist_ok=True)
    return store


def snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("workers", [[], ["--workers", "1"]], ids=["auto", "in-process"])
def test_an_interrupted_process_publishes_nothing_and_says_so(wt_env, made_processed_raw, workers):
    """Found: Ctrl-C printed `Aborted!` and exited 1; SIGTERM of the command alone
    exited 143 without a word. Now 130 / 143 and one line: nothing was published, the
    processed data is as it was. Found (signal audit, 12-04): run in this process
    (`--workers 1`, and every increment under 768 KB) it ended with ~100 lines of
    traceback and exit 1: Beam re-raised our argument-less interrupt inside a DoFn as
    `RuntimeError: KeyboardInterrupt [while running 'Process/Pass1/...']`."""
    store = processed_raw(wt_env, made_processed_raw)
    before = snapshot(store.processed)
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = popen(wt_env, "process", *workers)
        wait_until(
            lambda: list(store.processed.glob(".run-*/_index/segments/*")),
            timeout=120,
            what="pass 1 writing",
        )
        _, err = stopped(proc, sig)
        assert proc.returncode == 128 + sig, err
        assert said(err) == [
            f"interrupted ({NAMES[sig]}): nothing was published: {store.processed} is as it "
            "was before this run (no table is half-written); run the same command again"
        ], err
        assert snapshot(store.processed) == before  # no run directory left either
    r = wt(wt_env, "process")
    assert r.returncode == 0, r.stderr


def test_an_interrupted_export_keeps_the_earlier_export_and_says_so(wt_env, made_processed):
    """Found: Ctrl-C printed `Aborted!` and exited 1. Now 130 and one line: the earlier
    export stays as it was."""
    store = processed_raw(wt_env, made_processed)
    out = store.export / "parquet"
    first = wt(wt_env, "export", "--where", "num_turns < 3")
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    proc = popen(wt_env, "export")
    wait_until(lambda: list(store.export.glob(".staging-*")), timeout=60, what="the export")
    _, err = stopped(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    assert said(err) == [
        f"interrupted (Ctrl-C): no export was written: {out} holds the earlier export, as "
        "it was (nothing half-written is left)"
    ], err
    assert snapshot(out) == before and not list(store.export.glob(".staging-*"))
    assert wt(wt_env, "export", "--verify", str(out)).returncode == 0


HOLDING = textwrap.dedent(
    """
    import pathlib, sys
    from worldtrace.errors import interrupts
    flag = pathlib.Path(sys.argv[1])
    with interrupts(lambda: "what is kept", hold=flag.exists):
        print("holding", flush=True)
        sys.stdin.readline()
        flag.unlink()
        print("went on", flush=True)
    """
)


@pytest.mark.parametrize("held", [True, False], ids=["held", "not-held"])
def test_a_stop_waits_while_held_then_exits_with_its_status(tmp_path, held):
    """`process` holds a stop while it swaps its tables in: an exception between two
    renames let the run's directory go with the tables not yet moved (tables of two
    runs). Held, the block goes on and the line and the status come at its end."""
    flag = tmp_path / "publishing"
    if held:
        flag.touch()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDING, str(flag)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "holding\n"
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate("go on\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert ("went on" in out) is held, out
    assert err.splitlines() == ["interrupted (SIGTERM): what is kept"], err


# -- the machine --------------------------------------------------------------------


def test_a_full_disk_at_the_process_lock_names_it(tmpfs, wt_env, tmp_path):
    """Found: `error: [Errno 28] No space left on device`, no path: writing the lock
    holder's name failed, and the `truncate(0)` in `finally` failed again (the line was
    still buffered), its error without a file replacing the first."""
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r = wt(env, "import", "--create", str(openai_records(tmp_path / "a.jsonl", 20, seed=1)))
    assert r.returncode == 0, r.stderr
    fill(tmpfs / "filler")
    r = wt(env, "process", "--rebuild")
    assert r.returncode == 1, r.stdout + r.stderr
    lock = store.processed / ".process.lock"
    assert r.stderr.splitlines() == [f"error: cannot write {lock}: No space left on device"]
    (tmpfs / "filler").unlink()
    assert wt(env, "process").returncode == 0  # the lock was not left held


def test_import_on_a_read_only_disk_names_the_directory_not_a_temp_file(tmpfs, wt_env, tmp_path):
    """Found: `error: [Errno 30] Read-only file system: '.../raw/import/.tmp-...parquet'`:
    removing the temp file that was never made failed again (EROFS) after the first
    error, and that error, naming a hidden file, replaced the one naming the directory."""
    store = Store.at(tmpfs / "store")
    env = dict(wt_env, WORLDTRACE_STORE=str(store.root))
    r = wt(env, "import", "--create", str(openai_records(tmp_path / "a.jsonl", 20, seed=1)))
    assert r.returncode == 0, r.stderr
    before = snapshot(store.root)
    subprocess.run([*SUDO, "mount", "-o", "remount,ro", str(tmpfs)], check=True)
    r = wt(env, "import", str(openai_records(tmp_path / "b.jsonl", 20, seed=2)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        f"error: cannot write shards under {store.raw / 'import'}: Read-only file system "
        "(0 shard(s) written before it are kept)"
    ], r.stderr
    assert snapshot(store.root) == before


def test_validate_of_a_directory_without_records_names_it(wt_env, tmp_path):
    """Found: `validate -q DIR` said `no Parquet or JSONL files found`, not where."""
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    r = wt(wt_env, "validate", "-q", str(empty))
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"no Parquet or JSONL files found under {empty}"]
