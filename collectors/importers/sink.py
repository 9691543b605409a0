"""Where imported records go: batched shard writes, what is already present, write errors.

Re-importing a file is idempotent. A record's key is its content id plus where it came
from (`trajectory_id`, `source.origin_path`, `source.origin_index`): the same content
from another file is another record; a changed record at the same place is new. What is
present is read from the id, origin, domain, metadata and outcome columns and each turn's
`is_error` and `exit_code` of the shards under the output (Parquet reads just those
columns), kept only for the files being imported, each with the import options it was
written with and its labels (`Held`): a record at the same place that differs only
because those options did is not new, and one whose labels changed (a corrected reward:
the id leaves them out) is said, the store keeping its own (`relabelled`).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from worldtrace.schemas import ShardWriter
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import shard_files
from worldtrace.schemas.tempfiles import open_parquet

Key = tuple[str, str, int]
KEY_COLUMNS = ("trajectory_id", "source.origin_path", "source.origin_index")
HELD_COLUMNS = (*KEY_COLUMNS, F.DOMAIN, F.METADATA, F.OUTCOME)
FLAG_FIELDS = ("is_error", "exit_code")
"""Each turn's observation fields `present_keys` reads too (`Labels.flags`)."""
IMPORT_OPTIONS = "import_options"
"""Metadata key of every imported record: the import options that shape what is stored
(`importers.options_json`), as JSON."""
SHOWN_TURNS = 3
"""Turns whose flags changed that `relabelled` names; the others are counted."""


class ImportWriteError(RuntimeError):
    """Writing shards failed (disk full, permissions...): the import stops here."""

    def __init__(self, directory: Path, reason: str, kept: list[Path]):
        self.directory, self.reason, self.kept = directory, reason, kept
        super().__init__(
            f"cannot write shards under {directory}: {reason}"
            f" ({len(kept)} shard(s) written before it are kept)"
        )


class Labels(NamedTuple):
    """What a record holds outside its content id that a re-import compares: the id is
    the content (`hashing.canonical_content`), so a file whose reward, error flags or
    metadata were corrected gives the same id, and the store keeps what it imported first
    (`relabelled` says so). Compact, as it crosses to the worker processes with each
    batch: metadata values as digests."""

    status: str | None
    reward: float | None
    error: str | None
    flags: tuple[tuple[int, bool, int | None], ...]
    """(turn, is_error, exit_code) of each turn with an error or an exit code."""
    metadata: tuple[tuple[str, int | None], ...]
    """(key, `_digest` of its value) of each metadata entry but `IMPORT_OPTIONS`, sorted."""


def _digest(value: str | None) -> int | None:
    """A metadata value's length and CRC-32: tells a changed value from the same one
    without keeping it (a system prompt of kilobytes per record)."""
    if value is None:
        return None
    b = value.encode("utf-8", "surrogatepass")
    return len(b) << 32 | zlib.crc32(b)


def _metadata(items: Iterable[tuple[str, str | None]]) -> tuple[tuple[str, int | None], ...]:
    return tuple(sorted((k, _digest(v)) for k, v in items if k != IMPORT_OPTIONS))


def labels_of(record: Mapping[str, Any]) -> Labels:
    """The `Labels` of a record as `importers.convert` makes it (the shard schema's dict)."""
    outcome = record.get(F.OUTCOME) or {}
    flags = []
    for n, turn in enumerate(record.get(F.TURNS) or ()):
        o = turn.get("observation") or {}
        if o.get("is_error") or o.get("exit_code") is not None:
            flags.append((n, bool(o.get("is_error")), o.get("exit_code")))
    meta = (record.get(F.METADATA) or {}).items()
    return Labels(outcome.get("status"), outcome.get("reward"), outcome.get("error"), tuple(flags), _metadata(meta))  # fmt: skip


def _value(v: Any) -> str:
    """A label's value as a problem says it."""
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    text = str(v)
    return text if len(text) <= 60 else text[:59] + "…"


def relabelled(held: Labels, now: Labels) -> str:
    """How `now` (this import's record) differs from the record the store holds with the
    same id and place (`held`), each field with both values: `outcome.reward 1.0 (the store
    keeps 0.0)`; "" when they agree."""
    if held == now:  # the common re-import: nothing changed
        return ""
    out = [
        f"outcome.{key} {_value(after)} (the store keeps {_value(before)})"
        for key, before, after in zip(("status", "reward", "error"), held[:3], now[:3], strict=True)
        if before != after
    ]
    was, got = {t: f for t, *f in held.flags}, {t: f for t, *f in now.flags}
    turns = sorted(t for t in was.keys() | got.keys() if was.get(t) != got.get(t))
    for t in turns[:SHOWN_TURNS]:
        (err0, code0), (err1, code1) = was.get(t, (False, None)), got.get(t, (False, None))
        for key, before, after in (("is_error", err0, err1), ("exit_code", code0, code1)):
            if before != after:
                out.append(f"turns[{t}].observation.{key} {_value(after)} (the store keeps {_value(before)})")  # fmt: skip
    if len(turns) > SHOWN_TURNS:
        out.append(f"the flags of {len(turns) - SHOWN_TURNS} more turn(s)")
    was_meta, got_meta = dict(held.metadata), dict(now.metadata)
    for key in sorted(was_meta.keys() | got_meta.keys()):
        if key not in got_meta:
            out.append(f"no metadata {key} (the store keeps one)")
        elif key not in was_meta:
            out.append(f"metadata {key} (the store has none)")
        elif was_meta[key] != got_meta[key]:
            out.append(f"metadata {key} (the store keeps its earlier value)")
    return "; ".join(out)


class Held(NamedTuple):
    """What the store holds of a record it has (`present_keys`)."""

    options: str | None
    """The import options it was written with (`IMPORT_OPTIONS`); None: not recorded (an
    import before 2026-12-05)."""
    domain: str
    shard: str
    """The shard's file name ("" for a record of this import)."""
    labels: Labels | None = None
    """Its labels (None: a record of this import, or a shard without those columns)."""


def present_keys(output: Path, origin_paths: Iterable[str]) -> dict[Key, Held]:
    """The records under `output` that came from one of `origin_paths`, by key, with
    their labels (`Labels`). Read from a shard's key, domain, metadata and outcome columns
    and its turns' `FLAG_FIELDS` only, no text (6,000 tau-bench records: ~90 ms of CPU,
    ~60 ms without the labels)."""
    wanted = pa.array(sorted(set(origin_paths)), pa.string())
    keys: dict[Key, Held] = {}
    for f in shard_files(output):
        try:
            pf = open_parquet(f)
            paths = [pf.schema.column(i).path for i in range(len(pf.schema))]
            ends = tuple(f".observation.{k}" for k in FLAG_FIELDS)
            flags = [p for p in paths if p.startswith(f"{F.TURNS}.") and p.endswith(ends)]
            t = pf.read(columns=[*HELD_COLUMNS, *flags])
            t = t.filter(pc.is_in(pc.struct_field(t.column("source"), "origin_path"), value_set=wanted))  # fmt: skip
            source = t.column("source").combine_chunks()
            origins = source.field("origin_path").to_pylist()
        except (OSError, pa.ArrowException, KeyError):  # unreadable or older than provenance:
            continue  # its records cannot be told present, so they are imported again
        indices = source.field("origin_index").to_pylist()
        tids, domains = t.column("trajectory_id").to_pylist(), t.column(F.DOMAIN).to_pylist()
        metas = t.column(F.METADATA).to_pylist()
        labels = _stored_labels(t, metas) if len(flags) == len(FLAG_FIELDS) else None
        for r, (tid, origin, index, domain, meta) in enumerate(zip(tids, origins, indices, domains, metas, strict=True)):  # fmt: skip
            options = next((v for k, v in meta or () if k == IMPORT_OPTIONS), None)
            keys[(tid, origin, index)] = Held(options, domain, f.name, labels and labels[r])
    return keys


def _stored_labels(t: pa.Table, metas: list[Any]) -> list[Labels]:
    """Each row's `Labels`, `t` read by `present_keys`. The turns' flags are found with
    Arrow over all turns at once: most turns have none (a tool call's answer)."""
    outcome = t.column(F.OUTCOME).combine_chunks()
    status, reward, error = (outcome.field(k).to_pylist() for k in ("status", "reward", "error"))
    turns = t.column(F.TURNS).combine_chunks()
    obs = turns.flatten().field("observation")
    err = pc.fill_null(obs.field("is_error"), False)
    code = obs.field("exit_code")
    at = np.flatnonzero(pc.or_(err, pc.is_valid(code)).to_numpy(zero_copy_only=False))
    flags: dict[int, list[tuple[int, bool, int | None]]] = {}
    if len(at):
        lengths = pc.fill_null(pc.list_value_length(turns), 0).to_numpy()
        ends = np.cumsum(lengths)
        rows = np.searchsorted(ends, at, side="right")
        starts = ends[rows] - lengths[rows]
        errs, codes = err.take(at).to_pylist(), code.take(at).to_pylist()
        for row, n, e, c in zip(rows.tolist(), (at - starts).tolist(), errs, codes, strict=True):
            flags.setdefault(row, []).append((n, e, c))
    return [
        Labels(status[r], reward[r], error[r], tuple(flags.get(r, ())), _metadata(meta or ()))
        for r, meta in enumerate(metas)
    ]


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
