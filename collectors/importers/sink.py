"""Where imported records go: batched shard writes, what is already present, write errors.

Re-importing a file is idempotent. A record's key is its content id plus where it came
from (`trajectory_id`, `source.origin_path`, `source.origin_index`): the same content
from another file is another record; a changed record at the same place is new. What is
present is read from the id, origin, domain and metadata columns of the shards under the
output (Parquet reads just those columns), kept only for the files being imported, each
with the import options it was written with (`Held`): a record at the same place that
differs only because those options did is not new.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from worldtrace.schemas import ShardWriter
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import shard_files

Key = tuple[str, str, int]
KEY_COLUMNS = ("trajectory_id", "source.origin_path", "source.origin_index")
HELD_COLUMNS = (*KEY_COLUMNS, F.DOMAIN, F.METADATA)
IMPORT_OPTIONS = "import_options"
"""Metadata key of every imported record: the import options that shape what is stored
(`importers.options_json`), as JSON."""


class ImportWriteError(RuntimeError):
    """Writing shards failed (disk full, permissions...): the import stops here."""

    def __init__(self, directory: Path, reason: str, kept: list[Path]):
        self.directory, self.reason, self.kept = directory, reason, kept
        super().__init__(
            f"cannot write shards under {directory}: {reason}"
            f" ({len(kept)} shard(s) written before it are kept)"
        )


class Held(NamedTuple):
    """What the store holds of a record it has (`present_keys`)."""

    options: str | None
    """The import options it was written with (`IMPORT_OPTIONS`); None: not recorded (an
    import before 2026-12-05)."""
    domain: str
    shard: str
    """The shard's file name ("" for a record of this import)."""


def present_keys(output: Path, origin_paths: Iterable[str]) -> dict[Key, Held]:
    """The records under `output` that came from one of `origin_paths`, by key."""
    wanted = pa.array(sorted(set(origin_paths)), pa.string())
    keys: dict[Key, Held] = {}
    for f in shard_files(output):
        try:
            t = pq.read_table(f, columns=list(HELD_COLUMNS))
        except (OSError, pa.ArrowException):  # unreadable or older than provenance: its
            continue  # records cannot be told present, so they are imported again
        t = t.filter(pc.is_in(t.column(1), value_set=wanted))
        for tid, origin, index, domain, meta in zip(*(c.to_pylist() for c in t.columns), strict=True):  # fmt: skip
            options = next((v for k, v in meta or () if k == IMPORT_OPTIONS), None)
            keys[(tid, origin, index)] = Held(options, domain, f.name)
    return keys


class Sink:
    """Batches of records (the shard schema, made by the worker processes) -> shards under
    one directory; any OSError while writing becomes one ImportWriteError naming the
    directory, the shard in progress removed."""

    def __init__(self, output: str | os.PathLike, target_bytes: int = F.SHARD_TARGET_BYTES):
        self.output = Path(output)
        self.target_bytes = target_bytes
        self._writer: ShardWriter | None = None

    @property
    def paths(self) -> list[Path]:
        return list(self._writer.paths) if self._writer else []

    def add(self, batch: pa.RecordBatch) -> None:
        self._guard(lambda: self._open().write_batch(batch))

    def close(self) -> list[Path]:
        if self._writer is not None:
            self._guard(self._writer.close)
        return self.paths

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()

    def _open(self) -> ShardWriter:
        if self._writer is None:
            self._writer = ShardWriter(self.output, prefix="import", target_bytes=self.target_bytes)
        return self._writer

    def _guard(self, write) -> None:
        try:
            write()
        except OSError as exc:
            kept = self.paths
            with contextlib.suppress(OSError):  # the first error is the one to report
                self.abort()
            reason = " ".join((exc.strerror or str(exc)).split())
            raise ImportWriteError(self.output, reason, kept) from exc
