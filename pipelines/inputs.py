"""Streaming the processed trajectories into export, a batch of records at a time.

Only the columns export reads are decoded (Parquet nested-column projection: no stats,
rules, provenance or timestamps), and the shards are read in the order their records
came into the store (`in_arrival_order`), row group by row group, rows in stored order, so memory holds one batch however large the corpus and
the same shards always give the same sequence of records. (Export used to sort the
whole corpus by trajectory_id; that needs the corpus, or an external sort, in hand.)
A record without mask decisions (unprocessed, raw data) is refused. A file that does
not read (cut short, empty, pages changed under a valid footer) is `DamagedFile`: one
line naming it and, for a store's processed data, the rebuild that makes it again
(before, `Parquet magic bytes not found` named no file, and a page that did not
decompress was said as a failure to write the export).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import shard_files
from worldtrace.schemas.tempfiles import (
    REBUILD_HINT,
    DamagedFile,
    first_line,
    open_parquet,
    read_pages,
)

from . import corpus
from .prompt import CONDITIONS

if TYPE_CHECKING:
    from .selection import Selection

WANTED = (
    F.TRAJECTORY_ID,
    F.DOMAIN,
    F.SYSTEM,
    f"{F.TURNS}.index",
    f"{F.TURNS}.action.kind",
    f"{F.TURNS}.action.text",
    f"{F.TURNS}.observation.text",
    f"{F.TURNS}.category",
    f"{F.TURNS}.keep",
    f"{F.DEDUP}.cluster_id",
    CONDITIONS,
    f"{F.SOURCE}.kind",  # with environment.backend: whether the record is generated
    f"{F.ENVIRONMENT}.backend",
    f"{F.ENVIRONMENT}.config",  # whether it comes from the device simulator (its model)
    f"{F.TASK}.instruction",  # an AgentWorldBench line's record, read back (`awb_provenance`)
)
"""Field paths export needs (list levels left out); absent ones are skipped."""
AWB_WANTED = (
    f"{F.TURNS}.action",
    f"{F.TURNS}.observation",
    f"{F.TURNS}.perturbation",
    F.OUTCOME,
)
"""What an AgentWorldBench line carries besides (`writers.awb_turn`): a turn's whole action
and observation (a terminal's raw capture in `state_json`, up to 64 KiB a turn), its
perturbation, the outcome. Read for that format only: the token formats never use them."""
CLUSTER = "_cluster"
"""Key of a record's dedup cluster id (`dedup.cluster_id`, else its own `c<trajectory_id>`,
the id the dedup stage gives a singleton)."""


def _columns(pf: pq.ParquetFile, wanted: tuple[str, ...] = WANTED) -> list[str]:
    """Parquet column paths of `pf` under `wanted` (`turns.list.element.x` matches `turns.x`)."""
    out = []
    for i in range(len(pf.schema)):
        path = pf.schema.column(i).path
        parts = path.split(".")
        plain = ".".join(
            p for n, p in enumerate(parts) if not (p in ("list", "element", "item") and n)
        )
        if any(plain == w or plain.startswith(w + ".") for w in wanted):
            out.append(path)
    return out


def check_input(path: str) -> list[Path]:
    """The shard files under `path`; FileNotFoundError when there are none, saying whether
    a processing run wrote `path` and kept nothing, or none ran."""
    files = shard_files(path)
    if not files:
        said = kept_nothing(path)
        if said:
            raise FileNotFoundError(said)
        raise FileNotFoundError(
            f"no processed trajectories under {path} (run `worldtrace process` first)"
        )
    return files


def kept_nothing(path: str) -> str | None:
    """When the processing run whose output `path` is kept no trajectory: what it did
    with those it read, and where to see why."""
    m = Path(path).parent / "manifest.json"
    try:
        a = json.loads(m.read_text()).get("accounting") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not a.get("in") or a.get("kept"):
        return None
    lost = ", ".join(f"{k} {a[k]}" for k in ("filtered", "duplicates", "rejected") if a.get(k))
    return (
        f"nothing to export under {path}: processing kept none of the {a['in']} trajectories "
        f"it read{f' ({lost})' if lost else ''}; `worldtrace stats` lists the filters and "
        f"rejects (the processing manifest: {m})"
    )


def _check_decided(f: Path, record: dict[str, Any]) -> None:
    """Refuse a record without mask decisions: unprocessed (raw) data, whose turns have no
    keep ratio, would export every observation as a target, unfiltered and undeduplicated."""
    turns = record[F.TURNS]
    if turns and all(t.get("keep") is None for t in turns):
        raise ValueError(
            f"{f}: trajectory {record[F.TRAJECTORY_ID]} has no mask decisions (no turn has a "
            "keep ratio): it is unprocessed data; run `worldtrace process` and export its "
            "output (<store>/processed/trajectories, the default input)"
        )


def _damaged(path: Path, exc: BaseException, what: str = "unreadable") -> DamagedFile:
    """`path` does not read: named, with the rebuild when it is a file of a store's
    processed data (its directory's parent holds the run manifest)."""
    if isinstance(exc, DamagedFile):
        return exc
    processed = (Path(path).parent.parent / F.PROCESS_MANIFEST).is_file()
    why = f"{what} Parquet ({first_line(exc)})"
    return DamagedFile(path, why, REBUILD_HINT if processed else "")


def in_arrival_order(files: list[Path]) -> list[Path]:
    """Processed unit files in the order their records came into the store
    (`F.UNIT_ORDER_KEY`), not by name: a unit's name hashes its cut of a raw file, and the
    cuts follow the worker count and what each incremental run read, so an incremental
    store, its rebuild and a one-worker rebuild exported the same samples in three
    orders (hunt 12-06). A unit written before the key has its order from its segment in
    the processing index (the least of its records' arrivals): an incremental run keeps
    the earlier files it need not rewrite. Files with neither (not units) come after, by
    path."""

    def key(f: Path) -> tuple:
        first = (_read(f, pq.read_schema, f).metadata or {}).get(F.UNIT_ORDER_KEY)
        if first is None:
            first = _segment_arrival(f)
        return (0, first.decode(), str(f)) if first else (1, "", str(f))

    return sorted(files, key=key)


def _segment_arrival(f: Path) -> bytes | None:
    """The least arrival of a processed unit's records, read from its segment in the
    processing index (`PROCESS_INDEX/PROCESS_SEGMENTS/<unit>.parquet`, column `_arrival`),
    None when there is none."""
    segment = f.parent.parent / F.PROCESS_INDEX / F.PROCESS_SEGMENTS / f.name
    if not segment.is_file():
        return None
    try:  # ParquetFile, not read_table: the dataset layer imports pandas (0.6 s)
        with open_parquet(segment) as pf:
            arrivals = pf.read(columns=[F.ARRIVAL_COLUMN]).column(F.ARRIVAL_COLUMN)
    except (OSError, pa.ArrowException, KeyError):
        return None
    first = pc.min(arrivals).as_py() if len(arrivals) else None
    return first.encode() if first else None


def _read(path: Path, read, *args):
    """`read(*args)`, a read of `path`: what pyarrow raises for a file that does not
    read becomes `DamagedFile` naming it."""
    try:
        return read(*args)
    except (OSError, pa.ArrowException) as exc:
        raise _damaged(path, exc) from exc


def _pages(path: Path, batches: Iterator) -> Iterator:
    """`batches` of `path`, a page that does not decode said as `DamagedFile`."""
    return read_pages(batches, lambda exc: _damaged(path, exc, "damaged"))


def iter_batches(
    path: str,
    batch_rows: int = 256,
    selection: Selection | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[list[dict[str, Any]]]:
    """Lists of at most `batch_rows` records (dicts with the WANTED fields, `extra` ones
    and CLUSTER), only those `selection` (`export --where`) takes.

    A policy that reads corpus counts stored two decisions per turn; the one the current
    template counts select replaces the stored one (`corpus.decisions`)."""
    files = in_arrival_order(check_input(path))
    if selection is not None:
        selection.check(files[0])
    counts = None
    for f in files:
        pf = _read(f, open_parquet, f)
        taken = selection.rows(f, pf.metadata.num_rows) if selection is not None else None
        row = 0
        missing = [
            c for c in (F.TRAJECTORY_ID, F.DOMAIN, F.TURNS) if c not in pf.schema_arrow.names
        ]
        if missing:
            raise ValueError(f"{f}: not a trajectory shard: no column {', '.join(missing)}")
        if counts is None and corpus.turns_file(f).exists():
            index = f.parent.parent / F.PROCESS_INDEX / F.TEMPLATE_COUNTS_FILE
            counts = _read(index, corpus.TemplateCounts, f.parent.parent)
        chosen = None
        if counts is not None:
            chosen = _read(corpus.turns_file(f), corpus.decisions, f, counts)
        at = 0
        pages = pf.iter_batches(batch_size=batch_rows, columns=_columns(pf, WANTED + extra))
        for batch in _pages(f, pages):
            records = batch.to_pylist()
            for r in records:
                dedup = r.get(F.DEDUP) or {}
                r[CLUSTER] = dedup.get("cluster_id") or f"c{r[F.TRAJECTORY_ID]}"
                r[F.TURNS] = r[F.TURNS] or []
                if chosen is not None:
                    for t in r[F.TURNS]:
                        t["category"], t["keep"] = chosen[0][at], chosen[1][at]
                        at += 1
                _check_decided(f, r)
            if taken is not None:
                mask, row = taken[row : row + len(records)], row + len(records)
                records = [r for r, t in zip(records, mask, strict=True) if t]
            yield records
        if chosen is not None and at != len(chosen[0]):
            raise ValueError(
                f"{f}: {at} turns, but {corpus.turns_file(f)} has {len(chosen[0])}: "
                "run `worldtrace process --rebuild`"
            )
