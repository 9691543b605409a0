"""Corpus-count columns at read time, for readers that do not go through the views.

`corpus_surprisal` and the decisions of a policy that reads it depend on how often each
observation template is kept in the whole processed corpus, which changes with every
batch. They are therefore not stored final: the stored `turns` files carry each turn's
template key and, for such a policy, the decision that holds once the count reaches
`_alt_from` (`schemas.tables.TURN_CORPUS_COLUMNS`); the counts live in
`processed/_index/templates.parquet`. The DuckDB views join them in SQL
(`schemas.views.turns_sql`); export reads Parquet directly and uses this module, so both
pick the same decision (tests/pipelines/test_incremental.py checks they agree with a
full recomputation).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import read_parquet
from worldtrace.schemas.tempfiles import REBUILD_HINT, DamagedFile, open_parquet


def _integers(column: pa.ChunkedArray) -> np.ndarray:
    """An integer column without nulls as numpy, copied from its buffers. Not
    `to_numpy()`: pyarrow converts through its pandas layer, whose first use imports
    pandas (0.2-0.3 s of CPU), for nothing else in an export."""
    parts = []
    for chunk in column.chunks:
        if not pa.types.is_integer(chunk.type) or chunk.null_count:
            raise TypeError(f"a {chunk.type} column with {chunk.null_count} null(s): not counts")
        dtype = np.dtype(str(chunk.type))  # int8 ... uint64: numpy's names
        data = chunk.buffers()[1]
        parts.append(np.frombuffer(data, dtype, len(chunk), chunk.offset * dtype.itemsize))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class TemplateCounts:
    """Kept turns per template key, looked up a column at a time (sorted numpy arrays:
    the table can hold millions of keys, and each file asks for a few thousand)."""

    def __init__(self, processed: Path):
        path = Path(processed) / F.PROCESS_INDEX / F.TEMPLATE_COUNTS_FILE
        keys, counts = np.zeros(0, np.uint64), np.zeros(0, np.int64)
        if path.exists():
            t = read_parquet(path, ["key", "count"])
            try:
                keys = _integers(t["key"]).astype(np.uint64, copy=False)
                counts = _integers(t["count"]).astype(np.int64, copy=False)
            except TypeError as exc:  # not written by us: nulls, or another type
                raise DamagedFile(path, str(exc), REBUILD_HINT) from None
        order = np.argsort(keys, kind="stable")
        self.keys, self.counts = keys[order], counts[order]

    def of(self, keys: np.ndarray) -> np.ndarray:
        """The count of each key (0 for a key not counted)."""
        if not len(self.keys):
            return np.zeros(len(keys), np.int64)
        pos = np.clip(np.searchsorted(self.keys, keys), 0, len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.counts[pos], 0)


def turns_file(trajectories_file: Path) -> Path:
    """The stored `turns` file of a processed trajectories file (same unit name)."""
    return trajectories_file.parent.parent / "turns" / trajectories_file.name


def decisions(trajectories_file: Path, counts: TemplateCounts) -> tuple[list, list] | None:
    """(category, keep) of every turn of `trajectories_file` (flattened, stored order)
    under the current counts; None when no turn of it depends on them."""
    path = turns_file(trajectories_file)
    if not path.exists():
        return None
    pf = open_parquet(path)
    if "_alt_from" not in pf.schema_arrow.names:
        return None
    t = pf.read(
        columns=["category", "keep", "_template", "_alt_from", "_alt_category", "_alt_keep"]
    )
    if t["_alt_from"].null_count == t.num_rows:
        return None
    keys = t["_template"].to_numpy(zero_copy_only=False).astype(np.uint64)
    alt_from = pc.fill_null(t["_alt_from"], np.iinfo(np.int64).max)
    common = pa.array(counts.of(keys) >= alt_from.to_numpy(zero_copy_only=False))
    category = pc.if_else(common, t["_alt_category"], t["category"])
    keep = pc.if_else(common, t["_alt_keep"], t["keep"])
    return category.to_pylist(), keep.to_pylist()
