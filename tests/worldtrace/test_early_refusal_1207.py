"""Found (12-07): `process`'s early refusal looked at the wrong store, and a missing store
waited for Beam.

The check that refuses a busy store before the options load Beam read the store from
the group's context, where a `--store` typed after the command (`worldtrace process
--store S`, as the README allows) was not parsed yet: it checked the default store. A run
on an idle S was refused because another run wrote the default store, and a busy S was
refused only after Beam loaded. A store that does not exist was said after Beam loaded
too (~2 s, for a typo). The console script is run under `-X importtime` (`loaded_by`)."""

from __future__ import annotations

import os
from pathlib import Path

from worldtrace.schemas import Store
from worldtrace.schemas.publish import reading

from .test_early_refusal_1206w import beam
from .test_no_pandas_1206w import loaded_by


def said(r) -> list[str]:
    """What the command printed on stderr, `-X importtime`'s lines left out."""
    return [x for x in r.stderr.strip().splitlines() if not x.startswith("import time:")]


def test_a_store_after_the_command_is_the_one_checked(wt_env, tmp_path):
    default = Store.at(wt_env["WORLDTRACE_STORE"])  # $WORLDTRACE_STORE, held by an export
    default.processed.mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    with reading(default.processed):
        r, loaded = loaded_by(wt_env, "process", "--store", str(other))
    assert r.returncode == 1
    assert said(r) == [f"Error: no Parquet or JSONL input under {other}/raw"]
    assert beam(loaded)  # it went on to the run


def test_a_busy_store_after_the_command_refuses_before_beam_loads(wt_env, tmp_path):
    busy = Store.at(tmp_path / "busy")
    busy.processed.mkdir(parents=True)
    with reading(busy.processed):
        r, loaded = loaded_by(wt_env, "process", "--workers", "2", f"--store={busy.root}")
    assert r.returncode == 1
    said = f"a `worldtrace export` is reading this store (pid {os.getpid()}:"
    assert said in r.stderr and str(busy.processed) in r.stderr, r.stderr[-2000:]
    assert not beam(loaded)


def test_a_missing_store_is_said_before_beam_loads(wt_env, tmp_path):
    missing = tmp_path / "typo"
    r, loaded = loaded_by(wt_env, "process", "--store", str(missing))
    assert r.returncode == 1
    assert said(r) == [
        f"Error: store {missing} does not exist: check --store; `worldtrace process` without "
        "--input works on a store that exists (`worldtrace process --input PATH --create` "
        "makes one from PATH, as `collect`, `import`, `worker`, `jobs submit`, `scheduler` "
        "and `demo` do with --create)"
    ]
    assert not beam(loaded)
    assert not missing.exists()


def test_with_input_a_missing_store_is_made(wt_env, tmp_path):
    """--input may make the store (--create): the early check leaves it to the run."""
    data = tmp_path / "data"
    data.mkdir()
    made = tmp_path / "made"
    r, loaded = loaded_by(wt_env, "process", "--input", str(data), "--store", str(made), "--create")
    assert r.returncode == 1
    assert said(r) == [f"Error: no Parquet or JSONL input under {data}"]
    assert Path(made).is_dir() and beam(loaded)
