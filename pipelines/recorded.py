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

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path

from worldtrace.schemas import fields as F

SHARDS = "shards.parquet"
"""The index of the raw files processed, under processed/_index (`segments.SHARDS_FILE`)."""
SHOWN = 3
"""Damaged or dropped files named in a message (the rest are counted)."""


def read_problem(path: str | os.PathLike) -> str | None:
    """Why `path` does not read as a whole (None when it does): a Parquet file's footer,
    its trajectory columns and every page decoded; a JSONL file that cannot be opened, is
    empty or is no UTF-8 text at all (compressed, UTF-16). For a file whose size or
    content moved since it was processed (it reads it all). A JSONL file's lines are
    records each, and one that does not read is a reject as when it was processed: it is
    damage only where a line read then (or was not there), which `rejects` tells
    (`lost_records`).
    Until 2026-12-06 any line that did not read made the file damaged, one that processing
    had rejected already too: `process` and `process --rebuild` refused the file after
    any change (valid lines appended), so its new records could never be processed."""
    path = Path(path)
    if path.name.endswith(F.SHARD_SUFFIX):
        from worldtrace.schemas.views import TRAJECTORY_REQUIRED, shard_problem

        return shard_problem(path, TRAJECTORY_REQUIRED, deep=True)
    from worldtrace.schemas.text import not_text

    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
            rest = iter(lambda: fh.read(1 << 20), b"")
            blank = not head.strip() and not any(chunk.strip() for chunk in rest)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return "empty" if blank else not_text(head, path)


UNREAD = ("<utf8>", "<json>")
"""The fields the reader names a JSONL line by when the line does not read at all, not
UTF-8 or not JSON (`schemas.store.scan_file`); `rejects.reason` starts with `FIELD: `."""


def _why_unread(n: int, field: str, message: str) -> str:
    """`line N is not JSON (...)`, `line N is not UTF-8 (...)`: the reader's words, without
    its advice to convert an encoding (a file that read when processed was not in another
    one)."""
    if field == "<json>":
        return f"line {n} is not JSON ({message.removeprefix('invalid JSON: ')})"
    return f"line {n} is not UTF-8 ({message.split(' is not UTF-8', 1)[0]})"


class Held(dict):
    """`held`'s answer: place -> content id, and `unread`, line -> why, of each JSONL line
    that does not read at all (not UTF-8, not JSON), from the same reading of the file
    (`scan_file`: processing's lines and parser)."""

    unread: dict[int, str]


def held(path: str | os.PathLike) -> Held:
    """What a raw file holds now: each record's place in it, as processing names it after
    the file's name (`:line 7`, `:row 3`), -> its content id (`hashing.trajectory_id`,
    what a valid record's `trajectory_id` is and what the processed data keeps of it as
    `metadata.raw_trajectory_id`). A record that does not read is left out; a line that
    does not read at all is in `unread` (one reading for both: `lost_records` needs them
    together, and a changed file may be large)."""
    from worldtrace.schemas.hashing import trajectory_id
    from worldtrace.schemas.store import scan_file

    name = str(path)
    out = Held()
    out.unread = {}
    for where, item in scan_file(Path(path)):
        if isinstance(item, dict) and where.startswith(name):
            out[where[len(name) :]] = trajectory_id(item)
        elif getattr(item, "field", None) in UNREAD and (m := _LINE.match(where[len(name) :])):
            out.unread[int(m.group(1))] = _why_unread(int(m.group(1)), item.field, item.message)
    return out


_LINE = re.compile(r"^:line (\d+)$")
CUT = "cut short"
"""How `lost_records` starts its answer for a file cut short (`damaged_message` says it so)."""


def lost_records(
    path: str, recorded_size: int | None, processed: Path, now: Held | None = None
) -> str | None:
    """Why `path`, a JSONL file that reads as text (`read_problem`), lost records since it
    was processed, or None (then it was changed, or not at all): cut short, inside a line
    or at a line's end, or a line changed into one that does not read. Each line is held
    against what processing made of it (`rejects` and the segments name it):

    - a line that does not read now (`Held.unread`) where one read when it was processed,
      or that was not there then: a copy cut inside a line, bytes a disk fault changed, a
      line cut short by a writer. A line that did not read then either was rejected for it
      (`rejects` names it, its reason the reader's, `UNREAD`) and is the same reject now:
      no damage, the file only changed (appended to, edited elsewhere);
    - a file cut at a line's end, which reads whole: it is smaller than the size recorded,
      each record it holds (`held`, or `now`) is the one processed from the same line, and
      records were processed from lines after its end. Every line parses, so it read as
      changed, and `--rebuild` dropped the records of the lines after the cut, exit 0.
      Only the whole file's sha256 is recorded, which says nothing of a prefix; the
      processed data holds each record's line and content id, so a prefix is known record
      by record (a rewrite that kept the first records as they were and dropped the rest
      is the same to it, and is refused alike: renamed, the file is a new one, its old
      name gone).

    When `rejects` does not read, every line that does not read is damage (it cannot be
    told from one processing rejected). A Parquet file cut short never reads."""
    if path.endswith(F.SHARD_SUFFIX):
        return None
    now = held(path) if now is None else now
    rejects = functools.cache(lambda: _rejects(processed, path))  # read once, if at all
    if unread := now.unread:
        then = _unread_then(rejects())
        lost = sorted(unread) if then is None else sorted(set(unread) - then)
        if lost:
            more = f" (and {len(lost) - 1} more line(s) that read before)" if lost[1:] else ""
            return unread[lost[0]] + more
    if recorded_size is None:
        return None
    try:
        if os.path.getsize(path) >= recorded_size:
            return None
    except OSError:
        return None
    lines = {int(m.group(1)): rid for place, rid in now.items() if (m := _LINE.match(place))}
    before = _processed_lines(processed, path, rejects())
    if not lines or len(lines) != len(now) or before is None:
        return None
    for n, rid in lines.items():
        if n not in before or before[n] not in (None, rid):
            return None  # a record that was not processed there: changed
    end = max(lines)
    after = sorted(n for n in before if n > end)
    if not after:
        return None
    lines_after = f"line {after[0]}" if len(after) == 1 else f"lines {after[0]}-{after[-1]}"
    return (
        f"{CUT} after line {end}: the {len(after)} record(s) processed from {lines_after} "
        "are no longer in it"
    )


def _rejects(processed: Path, path: str) -> list[tuple[int, str]] | None:
    """(line, reason) of each `rejects` row of a line of the JSONL file `path` (a record
    rejected or filtered whole; not a turn removed), None when the table does not read."""
    import pyarrow as pa

    names = _names([path], processed)
    try:
        t = _read(Path(processed) / "rejects", ["source_path", "record", "reason"])
    except (OSError, pa.ArrowException):
        return None
    return [
        (int(m.group(1)), reason or "")
        for where, record, reason in zip(*(t[c].to_pylist() for c in t.column_names), strict=True)
        if where in names and (m := _LINE.match(f":{record}"))
    ]


def _unread_then(rejects: list[tuple[int, str]] | None) -> set[int] | None:
    """The lines of a JSONL file that processing rejected because they did not read (their
    reason the reader's: `UNREAD`), from its `rejects` rows (`_rejects`); None when the
    table does not read."""
    if rejects is None:
        return None
    return {n for n, reason in rejects if reason.startswith(tuple(f"{f}: " for f in UNREAD))}


def _processed_lines(
    processed: Path, path: str, rejects: list[tuple[int, str]] | None
) -> dict[int, str | None] | None:
    """Line -> content id of each record processed from the JSONL file `path` (the
    segments keep every record that reached dedup; a rejected or filtered one, from its
    `rejects` rows, `_rejects`, has None: its content is not kept). None when they do not
    read."""
    import pyarrow as pa

    try:
        raw = _raw_ids(processed, _names([path], processed))
    except (OSError, pa.ArrowException):
        return None
    if rejects is None:
        return None
    out: dict[int, str | None] = dict.fromkeys((n for n, _ in rejects), None)
    for source, rid in raw.items():
        if m := _LINE.match(source[source.rindex(":") :]):
            out[int(m.group(1))] = rid
    return out


def _names(files: Iterable[str], processed: Path) -> set[str]:
    """`files` (absolute) as the processed data may name them: from the store's root,
    or as they are, a secret in the name replaced as `units.read_valid` replaces it."""
    from .normalize import redacted

    root = str(Path(processed).resolve().parent)
    return {n for f in files for n in (f, in_store(f, root), redacted(in_store(f, root)))}


def _read(table: Path, columns: list[str]):
    import pyarrow as pa
    from worldtrace.schemas.store import read_parquet, shard_files

    files = [str(f) for f in shard_files(Path(table))]
    if not files:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    return read_parquet(files, columns)


_PLACE = r":(row|line|record) \d+$"
"""A record's place after its file's name in a processed `source` (`units` names it)."""


def _raw_ids(processed: Path, names: set[str]) -> dict[str, str]:
    """`source` (`file:line N`) -> content id of the raw record, for the records that
    reached dedup from the files `names` (the segments, `processed/_index/segments`:
    `metadata.raw_trajectory_id`, or the id itself where no filter changed it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    segments = _read(Path(processed) / "_index" / "segments", ["_uid", "metadata", "trajectory_id"])
    if not segments.num_rows:
        return {}
    where = pc.replace_substring_regex(segments["_uid"], _PLACE, "")
    mine = segments.filter(pc.fill_null(pc.is_in(where, value_set=pa.array(sorted(names))), False))
    raw = pc.map_lookup(mine["metadata"], pa.scalar("raw_trajectory_id"), "first")
    raw = pc.if_else(pc.fill_null(pc.not_equal(raw, ""), False), raw, mine["trajectory_id"])
    return dict(zip(mine["_uid"].to_pylist(), raw.to_pylist(), strict=True))


def damage(path: str, recorded_size: int | None, processed: Path) -> str | None:
    """Why a raw file processed before, whose size or content moved, is damaged rather
    than changed, or None: it no longer reads whole (`read_problem`), or it is a JSONL
    file that lost records (`lost_records`: cut short, a line that read turned into one
    that does not)."""
    return read_problem(path) or lost_records(str(path), recorded_size, Path(processed))


def in_store(path: str, root: str) -> str:
    """`path` as processing names a file inside the store at `root` (from the root:
    `pipelines.units.in_store`), else as it is."""
    real = os.path.realpath(path)
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else path


def only_from(
    processed: Path, files: Iterable[str], changed: dict[str, dict[str, str]] | None = None
) -> int | None:
    """How many processed trajectories come only from `files` (absolute paths): the
    clusters (each one kept trajectory) all of whose members were read from them, so
    that no copy would be left without them; an exact or near copy read from another
    file keeps its cluster. `changed`: raw files read again whose content moved since
    (path -> what each holds now, `held`): a member read from one counts with `files`
    when the file no longer holds its record (its content id is nowhere in it now), so
    what a rebuild drops is counted whether a file went or lost records. None when
    processed/clusters (or the segments, for `changed`) does not read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changed = changed or {}
    names = sorted(_names(files, processed))
    if not names and not changed:
        return 0
    try:
        t = _read(Path(processed) / "clusters", ["cluster_id", "source"])
        where = pc.replace_substring_regex(t["source"], _PLACE, "")
        theirs = pc.fill_null(pc.is_in(where, value_set=pa.array(names, pa.string())), False)
        if changed:
            gone = set()
            for f, now in changed.items():
                ids = set(now.values())
                raw = _raw_ids(processed, _names([f], processed))
                gone.update(source for source, rid in raw.items() if rid not in ids)
            lost = pc.is_in(t["source"], value_set=pa.array(sorted(gone), pa.string()))
            theirs = pc.or_(theirs, pc.fill_null(lost, False))
    except (OSError, pa.ArrowException):
        return None
    if not t.num_rows:
        return 0
    elsewhere = pc.unique(t["cluster_id"].filter(pc.invert(theirs)))
    mine = t["cluster_id"].filter(theirs)
    lost = mine.filter(pc.invert(pc.is_in(mine, value_set=elsewhere)))
    return len(pc.unique(lost))


def _none_or_unknown(n: int | None, whom: str) -> str | None:
    """What `trajectories` and `no_longer_held` say for an unknown count and for 0."""
    if n is None:
        return (
            f"how many processed trajectories come only from {whom} is unknown "
            "(processed/clusters does not read)"
        )
    return f"no processed trajectory comes only from {whom}" if n == 0 else None


def trajectories(n: int | None, files: int = 1) -> str:
    """`N processed trajectories come only from it` (or them), said for unknown and 0."""
    it = "it" if files == 1 else "them"
    if (said := _none_or_unknown(n, it)) is not None:
        return said
    return f"{n} processed trajector{'y comes' if n == 1 else 'ies come'} only from {it}"


def no_longer_held(n: int | None, files: int = 1) -> str:
    """What a rebuild would drop of changed files: the processed trajectories that come
    only from records they no longer hold."""
    holds = "it no longer holds" if files == 1 else "they no longer hold"
    if (said := _none_or_unknown(n, f"records {holds}")) is not None:
        return said
    return (
        f"the rebuild drops {n} processed trajector{'y' if n == 1 else 'ies'} that came only "
        f"from records {holds}"
    )


def damaged_message(damaged: list[tuple[str, str]], lost: int | None) -> str:
    """One line: the raw files damaged since they were processed, why, what of the
    processed data comes only from them, and the two ways on: restore them, or leave them
    out of a rebuild to drop what only they held (the rebuild says what it drops): a file
    of the store moved out of it, a file from outside it (`process --input`) not given
    as `--input`. Until 2026-12-06 the line said "move it out of the store" of a file that
    was never in it."""
    one = len(damaged) == 1
    it, files = ("it", "the file") if one else ("them", "the files")
    if one:
        ((path, why),) = damaged
        how = "was " if why.startswith(CUT) else "no longer reads: "  # a cut one reads
        head = f"raw file {path} is damaged: it changed since it was processed and {how}{why}"
    else:
        shown = "; ".join(f"{p}: {why}" for p, why in damaged[:SHOWN])
        more = f"; and {len(damaged) - SHOWN} more" if damaged[SHOWN:] else ""
        head = (
            f"{len(damaged)} raw files are damaged: they changed since they were processed "
            f"and no longer read, or were cut short ({shown}{more})"
        )
    inside = {in_a_store(p) for p, _ in damaged}
    rebuild = "run `worldtrace process --rebuild`"
    if inside == {True}:
        leave, drop = f"move {it} out of the store", f"move {it} out of the store and {rebuild}"
    elif inside == {False}:
        leave = f"leave {it} out of `--input`"
        drop = f"{rebuild} without {it} among its `--input` files"
    else:
        leave = "move those in the store out of it, leave the others out of `--input`"
        drop = (
            f"move those in the store out of it and {rebuild} without the others among its "
            "`--input` files"
        )
    if lost == 0:
        return f"{head}; {trajectories(0, len(damaged))}: {leave} (or copy {files} again)"
    kept = ", and the processed data holds their last copy" if lost else ""
    return (
        f"{head}; {trajectories(lost, len(damaged))}{kept}: copy {files} again (or import "
        f"the source again); or, to drop them, {drop}, which says what it dropped"
    )


def in_a_store(path: str) -> bool:
    """Whether the raw file `path` is inside a store (below a directory whose processing
    recorded its raw files, `processed/_index/shards.parquet`), as `process` names a file
    from the store's root (`units.in_store`); else it came from outside, as `--input`."""
    real = Path(os.path.realpath(path))
    index = Path(F.PROCESSED_DIR, F.PROCESS_INDEX, SHARDS)
    return any((d / index).is_file() for d in real.parents)
