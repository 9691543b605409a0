"""Is the store's processed data there and current? What to run first, in one line.

Reading commands (`stats`, `query`, `explain`, `report`) and `export` would otherwise
answer from nothing, or from processed data older than what was collected since,
without a word. Light on purpose (no DuckDB): a command asks before opening anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from worldtrace.schemas import Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import recorded_key, stat_key
from worldtrace.schemas.publish import run_manifest
from worldtrace.schemas.store import input_files, rebased, shard_files
from worldtrace.schemas.tempfiles import REBUILD_HINT, DamagedFile, index_read

PROCESS_MANIFEST = F.PROCESS_MANIFEST
"""The run manifest `worldtrace process` writes last (its mtime: when the run ended)."""


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def last_run(store: Store) -> dict | None:
    """The last `worldtrace process` run's manifest (`processed/manifest.json`), None when
    there is none; one that does not read or is not in its shape is `DamagedFile`, the
    line `process` says of it (`publish.run_manifest`, the one reader)."""
    try:
        return run_manifest(store.processed / PROCESS_MANIFEST)
    except FileNotFoundError:
        return None


def _recorded(store: Store) -> tuple[list | None, Path | None]:
    """(inputs, where the store was) as the last run manifest recorded them, each None
    when unknown: a copied or moved store's files are matched at their new place, as
    `process` matches them (pipelines.process.moved_paths). A damaged manifest is
    `DamagedFile` (`last_run`)."""
    run = last_run(store) or {}
    output = (run.get("config") or {}).get("output")
    return run.get("inputs"), Path(output).parent if isinstance(output, str) else None


def _last_process(store: Store) -> tuple[int, set[str] | None] | None:
    """(when it finished, as an mtime in ns; its inputs, None when unknown) of the run
    that wrote processed/; the newest processed trajectory shard stands in for a store
    without a run manifest. None when nothing was processed."""
    finished = _mtime_ns(store.processed / PROCESS_MANIFEST)
    if finished is not None:
        listed, was = _recorded(store)
        if not listed:
            return finished, None
        here = Path(os.path.realpath(store.root))
        return finished, {rebased(p, was, here) if was else p for p in listed}
    times = [t for t in map(_mtime_ns, shard_files(store.table("trajectories"))) if t]
    return (max(times), None) if times else None


def raw_inputs(store: Store) -> list[Path]:
    """What `worldtrace process` reads of raw/ when given no `--input`: its Parquet shards
    and its JSONL records (`store.input_files`), broken symlinks left out (`process`
    names them)."""
    return [p for p in input_files([store.raw]) if p.exists()]


def settled(store: Store) -> str | None:
    """Finish the table swaps of a `process` run that died publishing them
    (`schemas.publish`), before anything reads processed/, and put back an export an
    `export` stopped between its two renames left only under `.old-NAME-*`
    (`publish.restore_swaps`); a note when a live run is publishing right now, else
    None. A damaged publish journal is `DamagedFile`: one line naming it and what to do."""
    from worldtrace.schemas.publish import finish_publish, restore_swaps

    restore_swaps(store.export)
    return finish_publish(store.processed) if store.processed.is_dir() else None


def stale_processed(store: Store) -> str | None:
    """Why the processed data is out of date with the raw data (None when it is not, or
    when nothing was processed): raw shards written after the last `worldtrace process`
    run ended, or not among its inputs (collected during the run, moved in since), and
    raw files processed before that are gone (their records stay until `process
    --rebuild`). `export`, `query` and `stats` would otherwise serve the old data without
    a word. A shard among them that does not read (a copy cut short) is named as
    unreadable: `process` would only reject it; one processed before that no longer
    reads as damaged, with what of the processed data comes only from it
    (`pipelines.recorded`: `process` and its `--rebuild` refuse to go past it). A
    publish a dead run left half done is finished first (`settled`). A run manifest or
    index that does not read is `DamagedFile` (`last_run`, `read_index`)."""
    if note := settled(store):
        return note
    run = _last_process(store)
    if run is None:
        return None
    finished, inputs = run
    left_out, since = [], []  # not processed; processed, with another time or size since
    raw = raw_inputs(store)
    indexed = read_index(store)
    for path in raw:
        try:
            st = path.stat()
        except OSError:
            continue
        t, real = st.st_mtime_ns, os.path.realpath(path)
        if indexed:  # what every run read: the last run's `--input` is not all of it
            if real not in indexed:
                left_out.append((t, path))
                continue
            same = _same_file(indexed[real], st)  # None: an old index, times only
            if same is False or (same is None and t > finished):
                since.append(path)
        elif t > finished or (inputs is not None and real not in inputs):
            left_out.append((t, path))
    gone = _gone(store, raw, set(indexed))
    if not left_out and not since and not gone:
        return None
    from worldtrace.pipelines import recorded

    changed = changed_inputs(store, [p for _, p in left_out] + since, indexed)
    left_out = [(t, p) for t, p in left_out if p not in changed]
    damaged = [  # no longer reads, or a JSONL file cut short at a line's end
        (p, why)
        for p in changed
        if (
            why := recorded.damage(
                str(p), indexed.get(os.path.realpath(p), {}).get("size"), store.processed
            )
        )
    ]
    changed = [p for p in changed if p not in dict(damaged)]
    from worldtrace.schemas.views import TRAJECTORY_REQUIRED, shard_problem

    problems = {  # a JSONL file's bad lines are `process`'s rejects, as any record's
        p: shard_problem(p, TRAJECTORY_REQUIRED) if p.name.endswith(F.SHARD_SUFFIX) else None
        for _, p in left_out
    }
    readable = [(t, p) for t, p in left_out if not problems[p]]
    broken = sorted((t, p) for t, p in left_out if problems[p])
    touched = [  # a ctime or inode alone moved (`cp -a`, a moved store): nothing to say
        p
        for p in since
        if p not in changed
        and p not in dict(damaged)
        and indexed[os.path.realpath(p)].get("mtime_ns") != _mtime_ns(p)
    ]
    notes = []
    if damaged:  # before all: the processed data may hold their records' last copy
        lost = recorded.only_from(store.processed, [os.path.realpath(p) for p, _ in damaged])
        notes.append(recorded.damaged_message([(str(p), why) for p, why in damaged], lost))
    if readable:
        notes.append(
            f"the processed data leaves out {len(readable)} raw shard(s) written or added "
            f"since the last `worldtrace process` (newest: {max(readable)[1]}); run "
            "`worldtrace process` to include them"
        )
    if broken:
        path = broken[-1][1]
        more = f" and {len(broken) - 1} more (`worldtrace doctor` lists them)" if broken[1:] else ""
        notes.append(
            f"raw shard {path} is unreadable: {problems[path]}{more}; `worldtrace process` "
            "cannot include it: copy it again, or move it out of the store"
        )
    if changed:
        more = f" and {len(changed) - 1} more" if changed[1:] else ""
        notes.append(
            f"raw shard {changed[0]}{more} changed since it was processed: `worldtrace "
            "process` refuses it; `worldtrace process --rebuild` reprocesses everything"
        )
    if gone:
        shown = ", ".join(gone[:GONE_SHOWN])
        more = f" and {len(gone) - GONE_SHOWN} more" if gone[GONE_SHOWN:] else ""
        only = recorded.trajectories(recorded.only_from(store.processed, gone), len(gone))
        notes.append(
            f"{len(gone)} raw file(s) processed before are gone ({shown}{more}): the "
            f"processed data still holds their records ({only}); `worldtrace process "
            "--rebuild` removes them"
        )
    if touched:  # each reading command hashes them again until `process` records them
        notes.append(
            f"{len(touched)} raw shard(s) processed before have newer times, the same "
            f"content (touched or copied; newest: {max(touched, key=_mtime_ns)}): "
            "`worldtrace process` records their times and processes nothing again"
        )
    return "; ".join(notes) or None


GONE_SHOWN = 3
"""Gone raw files named by `stale_processed` (the rest are counted)."""


def processed_inputs(store: Store) -> set[str]:
    """The files `worldtrace process` runs read (`_index/shards.parquet`), matched at the
    store's place now (`pipelines.process.moved_paths`); empty when there is no index or
    it does not read (`recorded_files`)."""
    return set(recorded_files(store))


def recorded_files(store: Store) -> dict[str, dict]:
    """`read_index`, empty when the index or the run manifest does not read: for
    `doctor`, which names a damaged index as a store shard (`views.unreadable_shards`)
    and goes on to its other checks."""
    try:
        return read_index(store)
    except DamagedFile:
        return {}


def read_index(store: Store) -> dict[str, dict]:
    """The index's row (`_index/shards.parquet`: `size`, `mtime_ns`, `ctime_ns`, `ino`,
    `sha256` where it has them) of each file `process` runs read, by its path at the
    store's place now (`pipelines.process.moved_paths`); empty when there is no index.
    One that does not read is `DamagedFile`, the line `process` says of it
    (`pipelines.process.read_shards`): without it nothing tells what the processed data
    holds, and the reading commands said nothing (or to run `process`, which stopped on
    it). Read once a command: the freshness checks share it."""
    index = store.processed / F.PROCESS_INDEX / "shards.parquet"
    if not index.is_file():
        return {}
    from worldtrace.schemas.store import read_parquet

    with index_read(index):  # the line `process` says of it (`read_shards`)
        table = read_parquet(index)
    if "path" not in table.column_names:
        raise DamagedFile(index, "no column path: not an index of raw files", REBUILD_HINT)
    rows = table.select([c for c in _INDEX_COLUMNS if c in table.column_names]).to_pylist()
    _, was = _recorded(store)
    here = Path(os.path.realpath(store.root))
    return {
        rebased(r["path"], was, here) if was else r["path"]: r
        for r in rows
        if isinstance(r["path"], str)
    }


_INDEX_COLUMNS = ("path", "size", "mtime_ns", "ctime_ns", "ino", "sha256")


def _same_file(row: dict, st: os.stat_result) -> bool | None:
    """Whether a file is the one its index `row` recorded (`hashing.stat_key`: size,
    mtime, ctime, inode; then it needs no hash), as `process` decides it: a file written
    in place with its size and mtime set back (`sed`, then `touch -r`) is hashed, and
    found changed. None when the row has no mtime (an old index)."""
    if row.get("mtime_ns") is None:
        return None
    return recorded_key(row) == stat_key(st)


def _gone(store: Store, raw: list[Path], indexed: set[str] | None = None) -> list[str]:
    """Files the last `worldtrace process` runs read (`processed_inputs`, or `indexed`
    when read already) that are gone: their records stay in the processed data until
    `process --rebuild` (an incremental run only adds; `process` says so, and `stats`,
    `query`, `report` and `export` said nothing while serving them). `raw`: the raw files
    listed, which need no further look."""
    listed = {os.path.realpath(p) for p in raw}
    if indexed is None:
        indexed = processed_inputs(store)
    return sorted(p for p in indexed if p not in listed and not os.path.exists(p))


def changed_inputs(
    store: Store, paths: list[Path], recorded: dict[str, dict] | None = None
) -> list[Path]:
    """Those of `paths` processed before whose content changed since (size or sha256 not
    the ones `_index/shards.parquet` recorded: `recorded_files`, or `recorded` when read
    already): `process` refuses them, so "run `worldtrace process`" would send the user
    into that refusal. A file whose mtime alone moved (`touch`, `cp -r`) is not changed:
    `process` takes it as the file processed. An index before hashes were kept says
    nothing changed (`process` says what it finds)."""
    from worldtrace.schemas.hashing import sha256_file

    seen = recorded_files(store) if recorded is None else recorded
    out = []
    for p in paths:
        r = seen.get(os.path.realpath(p))
        if (
            r is not None
            and "sha256" in r
            and (r.get("size") != p.stat().st_size or r["sha256"] != sha256_file(p))
        ):
            out.append(p)
    return out


def missing_processed(store: Store) -> str | None:
    """What to run before reading processed data, when there is none (None when there
    is): import or collect on an empty store, else `worldtrace process`."""
    if settled(store) or _last_process(store) is not None:
        return None
    raw = raw_inputs(store)
    if not raw:
        return (
            f"the store {store.root} holds no trajectories yet: add some with "
            "`worldtrace import PATH` or `worldtrace collect JOB_FILE`, then `worldtrace process`"
        )
    return (
        f"no processed data yet ({len(raw)} raw shard(s) are here): run `worldtrace process`; "
        "until then raw_trajectories, raw_turns and raw_perturbations read the raw data"
    )


def next_step(store: Store) -> str | None:
    """The one thing to say before reading the store: no data, nothing processed, or
    processed data older than the raw data; None when all is current."""
    return missing_processed(store) or stale_processed(store)
