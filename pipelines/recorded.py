"""Raw files `process` recorded (`processed/_index/shards.parquet`) that no longer read,
and what of the processed data comes only from them.

A processed raw file whose size or content hash is not the one recorded was either
changed (rewritten: `process --rebuild` reads it as it is now) or damaged (cut short,
pages a disk fault changed: it no longer reads whole). A damaged file's records are in
the processed data, often their last good copy, so neither an incremental run nor a
rebuild goes past it: the rebuild it was told to run rejected the file and published
tables without them (350 trajectories -> 50, exit 0). Which of the two it is is asked
only of files whose size or hash moved: a normal run reads no raw file here. Light on
purpose (pyarrow only): `worldtrace.freshness` says the same before a reading command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from worldtrace.schemas import fields as F

SHARDS = "shards.parquet"
"""The index of the raw files processed, under processed/_index (`segments.SHARDS_FILE`)."""
SHOWN = 3
"""Damaged or dropped files named in a message (the rest are counted)."""


def read_problem(path: str | os.PathLike) -> str | None:
    """Why `path` does not read whole (None when it does): a Parquet file's footer, its
    trajectory columns and every page decoded; a JSONL file as UTF-8, every line JSON.
    For a file whose size or content moved since it was processed (it reads it all)."""
    path = Path(path)
    if path.name.endswith(F.SHARD_SUFFIX):
        from worldtrace.schemas.views import TRAJECTORY_REQUIRED, shard_problem

        return shard_problem(path, TRAJECTORY_REQUIRED, deep=True)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not data.strip():
        return "empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                json.loads(line)
            except ValueError as exc:
                return f"line {n} is not JSON ({str(exc).splitlines()[0]})"
    return None


def in_store(path: str, root: str) -> str:
    """`path` as processing names a file inside the store at `root` (from the root:
    `pipelines.units.in_store`), else as it is."""
    real = os.path.realpath(path)
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else path


def only_from(processed: Path, files: Iterable[str]) -> int | None:
    """How many processed trajectories come only from `files` (absolute paths): the
    clusters (each one kept trajectory) all of whose members were read from them, so
    that no copy would be left without them; an exact or near copy read from another
    file keeps its cluster. None when processed/clusters does not read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from worldtrace.schemas.store import shard_files

    root = str(Path(processed).resolve().parent)
    names = sorted({n for f in files for n in (f, in_store(f, root))})
    shards = [str(f) for f in shard_files(Path(processed) / "clusters")]
    if not shards or not names:
        return 0
    try:
        t = pq.read_table(shards, columns=["cluster_id", "source"])
    except (OSError, pa.ArrowException):
        return None
    where = pc.replace_substring_regex(t["source"], r":(row|line) \d+$", "")
    theirs = pc.fill_null(pc.is_in(where, value_set=pa.array(names, pa.string())), False)
    elsewhere = pc.unique(t["cluster_id"].filter(pc.invert(theirs)))
    mine = t["cluster_id"].filter(theirs)
    lost = mine.filter(pc.invert(pc.is_in(mine, value_set=elsewhere)))
    return len(pc.unique(lost))


def trajectories(n: int | None, files: int = 1) -> str:
    """`N processed trajectories come only from it` (or them), said for unknown and 0."""
    it = "it" if files == 1 else "them"
    if n is None:
        return (
            f"how many processed trajectories come only from {it} is unknown "
            "(processed/clusters does not read)"
        )
    if n == 0:
        return f"no processed trajectory comes only from {it}"
    return f"{n} processed trajector{'y comes' if n == 1 else 'ies come'} only from {it}"


def damaged_message(damaged: list[tuple[str, str]], lost: int | None) -> str:
    """One line: the raw files damaged since they were processed, why, what of the
    processed data comes only from them, and the two ways on: restore them, or move
    them out and rebuild to drop what only they held (the rebuild says what it drops)."""
    one = len(damaged) == 1
    it, files = ("it", "the file") if one else ("them", "the files")
    if one:
        ((path, why),) = damaged
        head = (
            f"raw file {path} is damaged: it changed since it was processed and no longer "
            f"reads: {why}"
        )
    else:
        shown = "; ".join(f"{p}: {why}" for p, why in damaged[:SHOWN])
        more = f"; and {len(damaged) - SHOWN} more" if damaged[SHOWN:] else ""
        head = (
            f"{len(damaged)} raw files are damaged: they changed since they were processed "
            f"and no longer read ({shown}{more})"
        )
    if lost == 0:
        nothing = trajectories(0, len(damaged))
        return f"{head}; {nothing}: move {it} out of the store (or copy {files} again)"
    kept = ", and the processed data holds their last copy" if lost else ""
    return (
        f"{head}; {trajectories(lost, len(damaged))}{kept}: copy {files} again (or import "
        f"the source again); or, to drop them, move {it} out of the store and run "
        "`worldtrace process --rebuild`, which says what it dropped"
    )
