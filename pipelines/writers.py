"""Writers: training rows -> Parquet or Megatron shards, records -> AgentWorldBench JSONL,
the staged output directory, the manifest, and `verify`.

The row schemas and the label-shift convention are defined here once so a reader of the
shards (a trainer) imports them instead of restating them. Shard names are fixed and the
manifest holds no clock: the same rows give byte-identical files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from worldtrace.schemas import Action, Observation, Outcome
from worldtrace.schemas import fields as F
from worldtrace.schemas.actions import rendered_arguments
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.publish import restore_swaps
from worldtrace.schemas.store import (
    StoreWriteError,
    is_leftover,
    temp_name,
    write_bytes_atomic,
)
from worldtrace.schemas.tempfiles import _fsync_dir, lock_holder, parquet_writer, try_lock
from worldtrace.schemas.text import json_excerpt

from .mask import keep_turn
from .megatron import IndexedDatasetWriter, read_index

FORMATS = ("parquet", "megatron", "agentworldbench")
MANIFEST = "manifest.json"
LABEL_SHIFT = (
    "unshifted: loss_mask[i] = 1 means input_ids[i] is a prediction target; the trainer "
    "shifts labels by one (Hugging Face convention: labels = input_ids, loss on logits[:-1] vs labels[1:])"
)
TRAIN_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string()),
        pa.field("trajectory_id", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("input_ids", pa.list_(pa.int32())),
        pa.field("loss_mask", pa.list_(pa.uint8())),
        pa.field("num_tokens", pa.int32()),
        pa.field("num_loss_tokens", pa.int32()),
    ]
)
PACKED_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string()),
        pa.field("sample_ids", pa.list_(pa.string())),
        pa.field("trajectory_id", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("input_ids", pa.list_(pa.int32())),
        pa.field("loss_mask", pa.list_(pa.uint8())),
        pa.field("doc_boundaries", pa.list_(pa.int32())),
        pa.field("num_tokens", pa.int32()),
        pa.field("num_loss_tokens", pa.int32()),
    ]
)


def misplaced_starts(starts, limit: np.ndarray, samples: np.ndarray | None = None) -> np.ndarray:
    """The rows (indexes) of a batch of packed rows whose `doc_boundaries` (`starts`, a
    list array) are not what `samples.Packer` writes: one start per sample (`samples`:
    each row's number of `sample_ids`), the first 0, increasing, each below the row's
    `limit` (its `num_tokens`: no empty document, none in the padding). A trainer puts
    a document's position 0 and its unscored first label at each start: one dropped
    joins two documents, one past the row was an IndexError (or a label of the next row)."""
    import pyarrow.compute as pc

    n = np.asarray(pc.fill_null(pc.list_value_length(starts), 0), dtype=np.int64)
    flat = np.asarray(pc.fill_null(pc.list_flatten(starts), -1), dtype=np.int64)
    row = np.repeat(np.arange(len(n)), n)
    first = np.ones(len(flat), dtype=bool)
    first[1:] = row[1:] != row[:-1]
    before = np.concatenate(([-1], flat[:-1]))
    wrong = np.where(first, flat != 0, flat <= before) | (flat >= np.asarray(limit)[row])
    bad = n == 0
    bad[row[wrong]] = True
    if samples is not None:
        bad |= n != np.asarray(samples)
    return np.flatnonzero(bad)


ROW_GROUP_ROWS = 256
"""Rows of a training shard's row group, and of a batch that `--verify` reads
(`recount`): pyarrow's default batch of 65,536 rows held a whole export of long samples
in memory."""
SHARD_BYTES = 256 << 20


TRAINING_VERSION_PREFIX = F.TRAINING_SCHEMA_VERSION.split("/")[0] + "/"
"""What every export manifest's `schema_version` starts with (`worldtrace.training/`)."""


class OutputRefused(ValueError):
    """The export will not go to the directory the user named (it would replace what is
    not an earlier export): one line naming it and why; nothing was touched."""


class ExportWriteError(StoreWriteError):
    """Writing the export failed (a parent that cannot be written, a full disk): one line
    naming the output as the user gave it, never a staging name."""

    def __init__(self, output: str, cause: OSError, reason: str | None = None):
        super().__init__(output, cause)
        self.filename = self.output = output
        self.reason = reason or self.reason

    def __str__(self) -> str:
        return f"cannot write the export to {self.output}: {self.reason}"


class OutputBusy(OutputRefused):
    """Another export is writing the same directory: two would both report success, and
    the one that published first would be gone (the other replaces it)."""


def _manifest_of_export(d: Path) -> dict[str, Any] | None:
    """`d`'s manifest.json when an export wrote it (an object whose `schema_version` is a
    training schema version), else None."""
    try:
        m = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    version = m.get(F.SCHEMA_VERSION_F) if isinstance(m, dict) else None
    ours = isinstance(version, str) and version.startswith(TRAINING_VERSION_PREFIX)
    return m if ours else None


def _not_export(d: Path) -> str | None:
    """Why `d` is not an earlier export (None when it is): an earlier export holds the
    manifest.json export writes (its `schema_version` a training schema version) and
    nothing its manifests do not list."""
    m = _manifest_of_export(d)
    if m is None:
        if not (d / MANIFEST).is_file():
            return f"it has no {MANIFEST} of a worldtrace export"
        return f"its {MANIFEST} is not that of a worldtrace export"
    parts = m.get("parts")
    try:
        listed = {p["path"] for p in (parts.values() if isinstance(parts, dict) else m["shards"])}
    except (KeyError, TypeError):
        return f"its {MANIFEST} lists no files"
    for p in sorted(d.iterdir()):
        if p.name != MANIFEST and p.name not in listed:
            return f"{p.name} in it is not part of the earlier export"
    if isinstance(parts, dict):
        for name in sorted(listed):
            why = _not_export(d / name)
            if why:
                return f"part {name}: {why}"
    return None


def check_output(output: str | os.PathLike) -> Path:
    """The directory an export may replace, resolved (symlinks followed), or OutputRefused:
    only a new or empty directory or an earlier export, never one that holds the current
    directory (a rename cannot replace that)."""
    shown, path = str(output), Path(output)
    for p in (path, *path.parents):  # a regular file where a directory must be
        if p.exists() and not p.is_dir():
            what = "it is" if p == path else f"{p} is"
            raise OutputRefused(f"cannot write the export to {shown}: {what} not a directory")
    real = path.resolve()
    _refuse_inside_export(real, shown)
    why = _not_replaceable(real) if real.exists() else None
    if why:
        raise OutputRefused(
            f"will not replace {shown}: it is not an earlier export ({why}); --output "
            "replaces only an earlier export: name that, or a new or empty directory"
        )
    cwd = Path.cwd().resolve()
    if cwd == real or real in cwd.parents:
        where = "is the current directory" if cwd == real else "holds the current directory"
        raise OutputRefused(
            f"will not replace {shown}: it {where}, which an export cannot swap out; run "
            "export from another directory"
        )
    return real


def _not_replaceable(d: Path) -> str | None:
    """Why the existing `d` may not be replaced by an export (None: an empty directory or
    an earlier export)."""
    if d.is_symlink() or not d.is_dir():
        return "it is not a directory"
    try:
        return _not_export(d) if any(d.iterdir()) else None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"


def _refuse_inside_export(real: Path, shown: str) -> None:
    """Refuse an output inside an export (a split export's part, or any directory under
    one): replacing a part would mix two exports' draws (test trajectories into train)
    under a top manifest that no longer matches it, and a new directory in an export is
    a file it does not list. Named: the outermost export, which is what to replace."""
    top = None
    for p in real.parents:
        if _manifest_of_export(p) is not None:
            top = p
    if top is None:
        return
    parts = _manifest_of_export(top).get("parts")
    listed = isinstance(parts, dict) and any(
        isinstance(v, dict) and v.get("path") == real.name for v in parts.values()
    )
    if real.parent == top and listed:
        raise OutputRefused(
            f"will not write the export to {shown}: it is part {real.name} of the split "
            f"export {top}, whose parts are drawn together (a trajectory goes to one of "
            f"them) and listed in its manifest; export to {top} with --split to replace "
            "the whole split export, or to a directory outside it"
        )
    raise OutputRefused(
        f"will not write the export to {shown}: it is inside the earlier export {top}, "
        f"which holds only the files its manifest lists; name {top} to replace that "
        "export, or a directory outside it"
    )


LOCK_FORMAT = ".export-{}.lock"
"""The lock file of an export's output directory NAME, beside it (`output_lock`)."""


@contextmanager
def output_lock(output: str | os.PathLike) -> Iterator[None]:
    """Hold the output directory's lock (an flock on `.export-NAME.lock` beside it, taken
    on the resolved path, so a symlink's target shares it) while an export runs: a second
    export to the same directory is refused at once (`OutputBusy`, naming the holder),
    not made to wait: it would then replace the first's export unseen, and both would
    report success. The lock file is removed when the export ends (the next export to
    NAME takes over one a killed export left)."""
    shown, real = str(output), Path(output).resolve()
    lock = real.parent / LOCK_FORMAT.format(real.name)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fh = try_lock(lock)
            if fh is None:
                raise OutputBusy(
                    f"will not write the export to {shown}: another export is writing it "
                    f"({lock_holder(lock)}); export again when it has finished, or to "
                    "another directory"
                )
            if _is_file(fh, lock):
                break
            fh.close()  # the file an export ending removed after this opened it: take anew
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        fh.truncate(0)  # a killed export's line stays otherwise: the next names both
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}, since {since}\n")
        fh.flush()
    except OSError as exc:  # a parent that cannot be made or written
        where = Path(exc.filename).parent if exc.filename else real.parent
        raise ExportWriteError(shown, exc, _reason(exc, where)) from exc
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()  # held: no export of NAME is between its open and its lock
        fh.close()


def _is_file(fh, path: Path) -> bool:
    """Whether the open `fh` is the file at `path` now (not one removed meanwhile)."""
    try:
        return os.path.samestat(os.fstat(fh.fileno()), os.stat(path))
    except OSError:
        return False


STAGING_NAME = re.compile(r"^\.staging-\d+-[0-9a-f]{8}-[0-9a-f]{8}-(?P<name>.+)$")
"""An export's staging directory (`staged`'s `temp_name`): `name`, the output it is for."""


def _sweep_own(parent: Path, name: str) -> None:
    """Remove what earlier exports to `parent/name` left when they died: their staging
    directories (named with their pid and host, `temp_name`) and a replaced directory
    (`.old-NAME-xxxxxxxx`) once NAME is back in place; nothing else in `parent`."""
    pattern = re.compile(rf"^\.old-{re.escape(name)}-[0-9a-f]{{8}}$")
    try:
        entries = list(parent.iterdir())
    except OSError:
        return  # unreadable: nothing of ours can be told apart there
    for p in entries:
        staging = STAGING_NAME.match(p.name)
        ours = staging["name"] == name if staging else pattern.match(p.name)
        if not ours or not is_leftover(p):
            continue
        if p.name.startswith(".old-") and not (parent / name).is_dir():
            continue  # the only copy of an export whose swap was interrupted
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)


@contextmanager
def staged(out: str | os.PathLike) -> Iterator[Path]:
    """A fresh directory beside `out` that replaces `out` when the block succeeds and is
    removed when it fails, so readers never see half an export. `out` must be new, empty
    or an earlier export (`check_output`, and again when it is replaced: `_publish`); a
    failure is one line naming `out`. The caller holds `output_lock(out)`."""
    shown = str(out)
    real = check_output(out)
    parent = real.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        restore_swaps(parent, real.name)  # an earlier export stopped between its renames
        _sweep_own(parent, real.name)  # exports that died before cleaning up
        staging = parent / temp_name(".staging-", real.name)  # owned: spared while we run
        staging.mkdir()
    except OSError as exc:  # the directory it goes in cannot be written
        where = Path(exc.filename).parent if exc.filename else parent
        raise ExportWriteError(shown, exc, _reason(exc, where)) from exc
    try:
        try:
            yield staging
        except OSError as exc:  # a full disk mid-export: one line naming where, not a trace
            if exc.filename and staging not in Path(exc.filename).parents:
                raise  # not the output's: it names its own path (an input shard)
            reason = _reason(exc).replace(str(staging), shown)  # e.g. pyarrow's, naming a file
            raise ExportWriteError(shown, exc, reason) from exc
        _publish(staging, real, shown)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, real: Path, shown: str) -> None:
    """`staging` becomes `real`; an earlier export there goes only once it has, and the
    renames are on disk before it does. A stop between the two renames leaves the
    earlier export as `.old-NAME-*` alone: `publish.restore_swaps` puts it back (the
    next export to it, and every command reading the store).

    What is at `real` is checked again once it is set aside, where no path the user
    holds reaches it: a file put into it (or a directory made there) while the export
    ran is put back with it, untouched, and the export refused (`check_output` at the
    start saw only the earlier export; it was removed with it)."""
    old = real.parent / f".old-{real.name}-{uuid.uuid4().hex[:8]}"
    moved = False
    try:
        if os.path.lexists(real):
            os.replace(real, old)
            moved = True
            if why := _not_replaceable(old):
                os.replace(old, real)  # as it was, the user's file in it
                moved = False
                raise OutputRefused(
                    f"will not replace {shown}: it is no longer an earlier export ({why}: "
                    "put there while this export ran); it is left as it is, nothing in it "
                    "touched, and the new export was not written: move that out of it and "
                    "export again"
                )
        os.replace(staging, real)
    except OSError as exc:
        reason = f"cannot replace it ({exc.strerror})"
        if moved:
            try:
                os.replace(old, real)  # the earlier export back in place
            except OSError:
                reason += f"; the earlier export is now {old}"  # said, so nothing is lost
        raise ExportWriteError(shown, exc, reason) from exc
    with contextlib.suppress(OSError):  # the swap on disk before the earlier one goes
        _fsync_dir(real.parent)
    shutil.rmtree(old, ignore_errors=True)


def _reason(exc: OSError, parent: Path | None = None) -> str:
    """Why a write failed, naming no staging path: the directory it may not write in
    (`parent`), or the system's reason."""
    if isinstance(exc, StoreWriteError):
        return exc.reason
    if parent is not None and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{parent} is not writable ({exc.strerror})"
    if exc.errno == errno.ENOSPC or "No space left" in str(exc):
        return "No space left on device"
    text = exc.strerror or (str(exc).splitlines() or [type(exc).__name__])[0]
    return re.sub(r"\[Errno \d+\] ", "", text)


# -- training rows ---------------------------------------------------------------------
class ParquetRows:
    """Training rows -> `<part>-export-NNNNN.parquet` shards (zstd, cut at 256 MiB), 256
    rows a row group. Written straight into the staged export directory (published as a
    whole); dictionary encoding only for the string columns: on token ids it costs
    three times the write and makes the file larger."""

    def __init__(self, directory: Path, schema: pa.Schema, part: str = "train"):
        self.directory, self.schema, self.part = directory, schema, part
        self.rows = 0
        self._buf: list[dict[str, Any]] = []
        self._w: pq.ParquetWriter | None = None
        self._path: Path | None = None
        self._seq = 0

    def add(self, row: dict[str, Any]) -> None:
        self._buf.append(row)
        self.rows += 1
        if len(self._buf) >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        if self._w is None:
            self._path = self.directory / f"{self.part}-export-{self._seq:05d}.parquet"
            self._w = parquet_writer(  # page checksums, as the store's (`PAGE_CHECKSUMS`)
                self._path,
                self.schema,
                compression="zstd",
                use_dictionary=[f.name for f in self.schema if f.type == pa.string()],
            )
        self._w.write_batch(_batch(self._buf, self.schema), row_group_size=ROW_GROUP_ROWS)
        self._buf = []
        if self._path.stat().st_size >= SHARD_BYTES:
            self._w.close()
            self._w, self._seq = None, self._seq + 1

    def close(self) -> int:
        self._flush()
        if self._w is not None:
            self._w.close()
        return self.rows


class MegatronRows:
    """Token ids (int32: the vocabulary exceeds uint16) and the uint8 loss-mask sidecar,
    one sequence and one document per row: `<part>_text_document.bin/.idx`,
    `<part>_loss_mask.bin/.idx`.

    With `eod` (the tokenizer's end-of-document id, `tokens.eod_id`), every document ends
    with it, mask 0: Megatron packs documents by concatenating them and finds their
    boundaries (`--reset-position-ids --reset-attention-mask`, `--eod-mask-loss`) only
    at that token. `eod_tokens` counts them (one per row)."""

    def __init__(self, directory: Path, part: str = "train", eod: int | None = None):
        self.rows = self.eod_tokens = 0
        self.eod = eod
        self._text = IndexedDatasetWriter(directory / megatron_name(part, "text"), np.int32)
        self._mask = IndexedDatasetWriter(directory / megatron_name(part, "mask"), np.uint8)

    def add(self, row: dict[str, Any]) -> None:
        ids, mask = row["input_ids"], row["loss_mask"]
        if self.eod is not None:
            ids = np.append(np.asarray(ids, dtype=np.int32), np.int32(self.eod))
            mask = np.append(np.asarray(mask, dtype=np.uint8), np.uint8(0))
            self.eod_tokens += 1
        self._text.add(ids)
        self._mask.add(mask)
        self.rows += 1

    def close(self) -> int:
        self._text.close()
        self._mask.close()
        return self.rows


def megatron_name(part: str, kind: str) -> str:
    """File prefix of a part's Megatron token (`text`) or loss-mask (`mask`) dataset."""
    return f"{part}_text_document" if kind == "text" else f"{part}_loss_mask"


def row_writer(
    fmt: str, directory: Path, packed: bool, part: str = "train", eod: int | None = None
):
    """The writer of training rows in `fmt` (parquet or megatron): `add(row)`, `close() -> rows`.
    `eod`: the end-of-document id every Megatron document ends with (`tokens.eod_id`)."""
    if fmt == "megatron":
        return MegatronRows(directory, part, eod)
    return ParquetRows(directory, PACKED_SCHEMA if packed else TRAIN_SCHEMA, part)


_NUMPY = {pa.int32(): np.int32, pa.uint8(): np.uint8, pa.int64(): np.int64}


def _batch(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows -> a record batch, every column built from buffers (`_array`)."""
    return pa.RecordBatch.from_arrays(
        [_array([r[f.name] for r in rows], f.type) for f in schema], schema=schema
    )


def _array(values: list[Any], type_: pa.DataType) -> pa.Array:
    """A non-null column from Python values (numpy arrays for lists of numbers), built from
    buffers: `pa.array` imports pandas on first use (0.6 s, a fifth of a small export),
    and converts a list of numpy arrays element by element."""
    if pa.types.is_list(type_):
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(v) for v in values], out=offsets[1:])
        item = type_.value_type
        if item in _NUMPY:
            flat: Any = np.concatenate(values) if values else np.zeros(0, _NUMPY[item])
        else:
            flat = [x for v in values for x in v]
        return pa.ListArray.from_arrays(_array(offsets, pa.int32()), _array(flat, item))
    if pa.types.is_string(type_):
        data = [v.encode() for v in values]
        offsets = np.zeros(len(data) + 1, dtype=np.int32)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
        return pa.Array.from_buffers(type_, len(data), buffers)
    arr = np.ascontiguousarray(values, dtype=_NUMPY[type_])
    return pa.Array.from_buffers(type_, len(arr), [None, pa.py_buffer(arr)])


# -- AgentWorldBench -------------------------------------------------------------------
def agentworldbench_lines(
    rec: dict[str, Any], system_str: str, seed: int, synthetic: bool = False
) -> Iterator[dict[str, Any]]:
    """A record as the AgentWorldBench evaluation reads it: one line per target turn (the
    turns whose observation the loss keeps, the keep_mode=turn draw). `prompt` and
    `response` hold the whole trajectory; `turn_idx` (1-based) is the turn to predict,
    the turns before it are its history. `worldtrace` (a key the evaluation does not
    read) says where the line came from and what `system_str` and the lists cannot say
    back (`awb_provenance`): imported again, the record comes back as it was
    (`importers.agentworldbench`), a generated one synthetic."""
    tid = rec[F.TRAJECTORY_ID]
    turns = rec[F.TURNS]
    prompt = [t["action"]["text"] for t in turns]
    response = [t["observation"]["text"] for t in turns]
    ours = None
    for n, t in enumerate(turns, start=1):
        if keep_turn(tid, t["index"], seed, 1.0 if t.get("keep") is None else t["keep"]):
            ours = ours or awb_provenance(rec, synthetic)
            yield {
                "id": f"{tid}/{n}",
                "task": f"worldtrace/{rec[F.DOMAIN]}",
                "system_str": system_str,
                "prompt": prompt,
                "response": response,
                "turn_idx": n,
                F.AWB_PROVENANCE: ours,
            }


def awb_provenance(rec: dict[str, Any], synthetic: bool) -> dict[str, Any]:
    """A line's `worldtrace` key: the trajectory, whether it was generated, and what the
    evaluation's fields lose of the record: each turn's action kind (a command, keys, a
    tool call and a GUI action are all a string in `prompt`), the system prompt's parts as
    the record holds them (`system_str` composes them with the simulation instruction
    export adds for the domain, which is not the record's), its task instruction and
    conditions. Until 12-06 import parsed `system_str` back, and without the export's
    manifest beside the file it kept export's instruction as the record's own: the
    next export said it twice. Since 12-07 also each turn's other fields (`awb_turn`),
    the outcome and a collector's record as one (`source_kind`): without them a web or
    android record came back without its state and was filtered (`missing_state`), a
    tool call without its name, and a collector's record with no failure flagged read as
    an unflagged log, whose repeated answers `retry_cycle` took for failures."""
    system = rec.get(F.SYSTEM) or {}
    task = rec.get(F.TASK) or {}
    conditions = rec.get(F.CONDITIONS)
    if conditions is not None and not isinstance(conditions, str):  # an Arrow list
        conditions = json.dumps(list(conditions), ensure_ascii=False, sort_keys=True)
    out = {
        "trajectory_id": rec[F.TRAJECTORY_ID],
        "synthetic": synthetic,
        "kinds": [t["action"]["kind"] for t in rec[F.TURNS]],
        "system": {k: system[k] for k in F.SYSTEM_FIELDS if system.get(k) is not None},
        "instruction": task.get("instruction"),
        "conditions": conditions,
        "turns": [awb_turn(t) for t in rec[F.TURNS]],
    }
    outcome = {k: v for k, v in (rec.get(F.OUTCOME) or {}).items() if v != AWB_OUTCOME.get(k)}
    if outcome:
        out["outcome"] = outcome
    if not synthetic and (rec.get(F.SOURCE) or {}).get("kind") == "collector":
        out["source_kind"] = "collector"
    return out


AWB_ACTION = tuple(f.name for f in dataclasses.fields(Action) if f.name not in ("kind", "text"))
"""The action's fields a line's `worldtrace.turns` entry carries (its text is `prompt[i]`,
its kind `kinds[i]`)."""
AWB_OBSERVATION = {f.name: f.default for f in dataclasses.fields(Observation) if f.name != "text"}
"""The observation's fields an entry carries when not their default (its text is
`response[i]`), with those defaults."""
AWB_TURN = ("perturbation",)
"""The turn's own fields an entry carries (the others are processing's, or timing)."""
AWB_OUTCOME = {f.name: f.default for f in dataclasses.fields(Outcome)}
"""The outcome's fields `worldtrace.outcome` carries when not their default."""


def awb_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn's `worldtrace.turns` entry: its fields beyond the action's text and kind and
    the observation's text, by their names, each only when not its default; the
    arguments only when the text does not give them back (`awb_arguments`)."""
    a, o = turn["action"], turn.get("observation") or {}
    out: dict[str, Any] = {}
    for name in AWB_ACTION:
        value = a.get(name)
        if name == "arguments_json":
            if value != awb_arguments(a["kind"], a["text"], a.get("name")):
                out[name] = value  # a null too, where the text would give some
        elif value is not None:
            out[name] = value
    for name, default in AWB_OBSERVATION.items():
        value = o.get(name)
        if value is not None and value != default:
            out[name] = value
    for name in AWB_TURN:
        if turn.get(name) is not None:
            out[name] = turn[name]
    return out


awb_arguments = rendered_arguments
"""The arguments an action's text gives back (`actions.rendered_arguments`, which the
importer reads the same way)."""


def awb_file(domain: str, part: str) -> str:
    """`<domain>_test.jsonl`: the official loader globs `*_test.jsonl`."""
    return f"{domain}_{part}.jsonl"


class AgentWorldBenchLines:
    """Lines -> one JSONL file per domain (`awb_file`), written as they come."""

    def __init__(self, directory: Path, part: str = "test"):
        self.directory, self.part = directory, part
        directory.mkdir(parents=True, exist_ok=True)
        self.rows = 0
        self._files: dict[str, Any] = {}

    def add(self, domain: str, line: dict[str, Any]) -> None:
        fh = self._files.get(domain)
        if fh is None:
            fh = self._files[domain] = open(  # noqa: SIM115  (closed in close())
                self.directory / awb_file(domain, self.part), "w", encoding="utf-8"
            )
        fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        self.rows += 1

    def close(self) -> int:
        for fh in self._files.values():
            fh.close()
        return self.rows


# -- manifest and verification ---------------------------------------------------------
def shard_entries(directory: Path) -> list[dict[str, Any]]:
    """Name, size and sha256 of every file written so far, in name order."""
    return [
        {"path": p.name, "bytes": p.stat().st_size, "sha256": sha256_file(str(p))}
        for p in sorted(directory.iterdir())
        if not p.name.startswith(".")
    ]


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    body = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(directory / MANIFEST, body.encode())


def verify(directory: str | os.PathLike) -> list[str]:
    """Recompute what the manifest claims; returns the problems (empty = verified): the
    manifest's shape (`load_manifest`: what the checks read, every file inside the
    export), the files (`_verify_files`: sizes, sha256, unlisted files, every Megatron
    document closed by the EOD), then the counts recounted from them
    (`recount.recount`: rows and loss tokens too, every token id within the vocabulary
    and every document start the manifest's `sampling.doc_start_id`). A split export (top manifest with
    `parts`) part by part. A damaged manifest or file is a problem, never an exception."""
    from .recount import recount  # it reads shards with this module's names

    return _verify_files(directory) + recount(directory)


COUNT_MAX = 1 << 63
"""A count is an int from 0 below this (int64, as the views and trainers read them)."""
REQUIRED_COUNTS = {
    "parquet": ("rows", "samples", "tokens", "loss_tokens"),
    "megatron": ("rows", "samples", "tokens", "loss_tokens"),
    "agentworldbench": ("rows", "samples"),
}
"""The counts of a part's manifest that `--verify` checks against the files."""


def load_manifest(directory: str | os.PathLike, part: bool = False) -> tuple[Any, list[str]]:
    """The manifest of an export (`part`: of a split export's part, which has no parts
    of its own) and, when it cannot be checked as it is, the problems that say why
    (then the manifest is None): it does not read, is not an object, a field the checks
    read has another type (counts that are no int64, shards not a list...), its format
    is unknown or its files do not fit it, or it names a file outside the export."""
    d = Path(directory)
    mpath = d / MANIFEST
    if not mpath.exists():
        return None, [f"{mpath}: missing manifest"]
    try:
        m = json.loads(mpath.read_bytes().decode("utf-8"))
    except OSError as exc:
        return None, [f"{mpath}: cannot read it: {exc.strerror or type(exc).__name__}"]
    except UnicodeDecodeError:
        return None, [f"{mpath}: not UTF-8 text"]
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return None, [f"{mpath}: invalid JSON: {exc}"]
    if not isinstance(m, dict) or not ("parts" in m or {"shards", "format"} <= m.keys()):
        return None, [f"{mpath}: not an export's manifest (no `shards` and `format`, nor `parts`)"]
    problems = [f"{mpath}: {p}" for p in _manifest_shape(d, m, part)]
    return (None, problems) if problems else (m, [])


def _manifest_shape(d: Path, m: dict[str, Any], part: bool) -> list[str]:
    """What keeps manifest `m` of directory `d` from being checked ([] when nothing)."""
    problems = []
    version = m.get(F.SCHEMA_VERSION_F)
    if version is not None and version != F.TRAINING_SCHEMA_VERSION:
        problems.append(
            f"schema_version {json_excerpt(version)} is not one this worldtrace knows "
            f"({F.TRAINING_SCHEMA_VERSION})"
        )
    fmt = m.get("format")
    if fmt not in FORMATS and ("parts" not in m or fmt is not None):  # a split's top: if said
        problems.append(f"format {json_excerpt(fmt)} is none of {', '.join(FORMATS)}")
    c = m.get("counts")
    if not isinstance(c, dict):
        problems.append(
            "counts is missing" if c is None else f"counts is not an object: {json_excerpt(c)}"
        )
    else:
        problems += _counts_shape("counts", c)
    if "parts" in m:
        if part:
            return [*problems, "a part of a split export has parts of its own"]
        return problems + _parts_shape(d, m["parts"])
    if isinstance(fmt, str) and fmt in REQUIRED_COUNTS and isinstance(c, dict):
        problems += [f"counts.{k} is missing" for k in REQUIRED_COUNTS[fmt] if k not in c]
    for key, inners in (
        ("sampling", ("seq_len", "doc_start_id")),
        ("tokenizer", ("eod_id", "vocab_size")),
    ):
        value = m.get(key)
        if value is not None and not isinstance(value, dict):
            problems.append(f"{key} is not an object: {json_excerpt(value)}")
            continue
        for inner in inners:  # what `recount` compares the rows' token ids with
            if value and (n := value.get(inner)) is not None and not _is_count(n):
                problems.append(f"{key}.{inner} is not a count: {json_excerpt(n)}")
    if not isinstance(m.get("part", MAIN_NAME), str):
        problems.append(f"part is not a name: {json_excerpt(m['part'])}")
    shards = m["shards"]
    if not isinstance(shards, list):
        return [*problems, f"shards is not a list: {json_excerpt(shards)}"]
    for k, s in enumerate(shards):
        if not isinstance(s, dict) or not isinstance(s.get("path"), str):
            problems.append(f"shards[{k}] is not a shard (path, bytes, sha256): {json_excerpt(s)}")
            continue
        if why := _outside(d, s["path"]):
            problems.append(f"shards[{k}].path {json.dumps(s['path'])}: {why}")
        if not _is_count(s.get("bytes")):
            problems.append(f"shards[{k}].bytes is not a size: {json_excerpt(s.get('bytes'))}")
        if not isinstance(s.get("sha256"), str):
            problems.append(f"shards[{k}].sha256 is not a string: {json_excerpt(s.get('sha256'))}")
    if not problems:
        problems += _format_fit(m)
    return problems


MAIN_NAME = "train"
"""A manifest without `part` is of the main part (`samples.MAIN_PART`)."""


COUNTS_SHAPE = {
    "by_domain": 2,
    "by_category": 2,
    "truncated": {"by_domain": 2},
    "turns_without_target": {"by_domain": 2},
}
"""The shape of `counts`: a count (0), an object nested N deep whose leaves are counts
(N), or an object with these shapes by key (a dict; a key not named: a count)."""


def _counts_shape(where: str, value: Any, shape: int | dict = COUNTS_SHAPE) -> list[str]:
    """Where `value` (the manifest's `counts`, at `where`) is not of `shape`."""
    if shape == 0:
        return [] if _is_count(value) else [f"{where} is not a count: {json_excerpt(value)}"]
    if not isinstance(value, dict):
        return [f"{where} is not an object: {json_excerpt(value)}"]
    problems = []
    for key, v in value.items():
        inner = shape.get(key, 0) if isinstance(shape, dict) else shape - 1
        problems += _counts_shape(f"{where}.{key}", v, inner)
    return problems


def _parts_shape(d: Path, parts: Any) -> list[str]:
    if not isinstance(parts, dict):
        return [f"parts is not an object: {json_excerpt(parts)}"]
    problems = []
    for name, p in parts.items():
        if not isinstance(p, dict) or not isinstance(p.get("path"), str):
            problems.append(
                f"parts.{name} is not a part (path, manifest_sha256): {json_excerpt(p)}"
            )
            continue
        if why := _outside(d, p["path"]):
            problems.append(f"parts.{name}.path {json.dumps(p['path'])}: {why}")
        if not isinstance(p.get("manifest_sha256"), str):
            problems.append(f"parts.{name}.manifest_sha256 is not a string")
        c = p.get("counts", {})
        if not isinstance(c, dict):
            problems.append(f"parts.{name}.counts is not an object: {json_excerpt(c)}")
        else:
            problems += _counts_shape(f"parts.{name}.counts", c)
    return problems


def _outside(d: Path, path: str) -> str | None:
    """Why a file the manifest names is not a file of the export directory `d` itself
    (None when it is). Nothing is opened: an absolute path or one that leaves `d`
    (`..`, a symbolic link) is never read, nor hashed."""
    if "\x00" in path:
        return "not a file name (a NUL byte)"
    pure = Path(path)
    if pure.is_absolute() or ".." in pure.parts:
        return "outside the export"
    try:
        inside = (d / pure).resolve().is_relative_to(d.resolve())
    except (OSError, RuntimeError) as exc:  # a symbolic link loop
        return f"cannot be resolved ({exc})"
    if not inside:
        return "outside the export (a symbolic link out of it)"
    if len(pure.parts) != 1 or path in (".", ""):
        return "not a file name of the export directory itself"
    return None


def _format_fit(m: dict[str, Any]) -> list[str]:
    """The listed files are those of the manifest's format (a format edited into another
    would read one format's files as another's)."""
    names = [s["path"] for s in m["shards"]]
    if m["format"] == "megatron":
        part = m.get("part", MAIN_NAME)
        need = [f"{megatron_name(part, k)}.{e}" for k in ("text", "mask") for e in ("bin", "idx")]
        return [f"format megatron: {n} is not in shards" for n in need if n not in names]
    suffix = ".parquet" if m["format"] == "parquet" else ".jsonl"
    return [f"format {m['format']}: shard {n} is not a {suffix} file" for n in names
            if not n.endswith(suffix)]  # fmt: skip


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value < COUNT_MAX


def _verify_files(directory: str | os.PathLike, part: bool = False) -> list[str]:
    d = Path(directory)
    m, problems = load_manifest(d, part)
    if m is None:
        return problems
    if "parts" in m:
        return _check_parts(d, m["parts"])
    problems = _check_files(d, m["shards"])
    if problems:
        return problems
    if m["format"] == "parquet":
        return []  # its rows, masks and loss tokens are read once, by `recount`
    if m["format"] == "megatron":
        return _check_megatron(d, m, m.get("part", MAIN_NAME))
    return _check_awb(d, m)


def _check_parts(d: Path, parts: dict[str, dict[str, Any]]) -> list[str]:
    problems = []
    for name, p in sorted(parts.items()):
        sub = d / p["path"]
        pm = sub / MANIFEST
        if not pm.is_file():
            problems.append(f"{pm}: missing manifest of part {name}")
            continue
        if sha256_file(str(pm)) != p["manifest_sha256"]:
            problems.append(f"{pm}: sha256 differs from the top manifest's")
        problems.extend(_verify_files(sub, part=True))
    listed = {p["path"] for p in parts.values()}
    for p in d.iterdir():
        if p.name != MANIFEST and not p.name.startswith(".") and p.name not in listed:
            problems.append(f"{p}: not listed in the manifest")
    return problems


def _check_files(d: Path, shards: list[dict[str, Any]]) -> list[str]:
    problems = []
    listed = {s["path"] for s in shards}
    for s in shards:
        p = d / s["path"]
        if not p.exists():
            problems.append(f"{p}: missing shard")
            continue
        if not p.is_file():
            problems.append(f"{p}: not a file")
            continue
        if p.stat().st_size != s["bytes"]:
            problems.append(f"{p}: size {p.stat().st_size} != manifest {s['bytes']}")
        digest = sha256_file(str(p))
        if digest != s["sha256"]:
            problems.append(f"{p}: sha256 {digest} != manifest {s['sha256']}")
    for p in d.iterdir():
        if p.name != MANIFEST and not p.name.startswith(".") and p.name not in listed:
            problems.append(f"{p}: not listed in the manifest")
    return problems


def _check_megatron(d: Path, m: dict[str, Any], part: str) -> list[str]:
    problems = []
    text = d / megatron_name(part, "text")
    try:
        sizes_t, pointers, _, dtype = read_index(f"{text}.idx")
        sizes_m, _, _, _ = read_index(d / f"{megatron_name(part, 'mask')}.idx")
    except ValueError as exc:
        return [str(exc)]
    if not np.array_equal(sizes_t, sizes_m):
        problems.append(f"{d}: text and loss-mask sequence sizes differ")
    if len(sizes_t) != m["counts"]["rows"]:
        problems.append(f"{d}: {len(sizes_t)} sequences != manifest {m['counts']['rows']}")
    if "eod_tokens" in m["counts"]:  # exports that end every document with the EOD
        problems += _check_eod(d, m, text, sizes_t, pointers, dtype)
    return problems


def _check_eod(d: Path, m: dict[str, Any], text: Path, sizes, pointers, dtype) -> list[str]:
    """Every document ends with the end-of-document token; the counts add up."""
    problems = []
    c, eod = m["counts"], (m.get("tokenizer") or {}).get("eod_id")
    if c["eod_tokens"] != len(sizes):
        problems.append(f"{d}: eod_tokens {c['eod_tokens']} != {len(sizes)} documents")
    seq_len = (m.get("sampling") or {}).get("seq_len")
    total = int(sizes.sum(dtype=np.int64))
    if not seq_len and total != c["tokens"] + c["eod_tokens"]:
        problems.append(
            f"{d}: {total} tokens != manifest tokens {c['tokens']} + eod_tokens {c['eod_tokens']}"
        )
    if seq_len and np.any(sizes != seq_len + 1):
        problems.append(f"{d}: a packed document is not seq_len + 1 = {seq_len + 1} tokens")
    if len(sizes) and np.any(sizes < 1):
        problems.append(f"{d}: an empty document has no end-of-document token")
    elif len(sizes) and eod is not None:
        data = np.memmap(f"{text}.bin", dtype=dtype, mode="r")
        last = pointers // np.dtype(dtype).itemsize + sizes.astype(np.int64) - 1
        if last.max() >= len(data):
            problems.append(f"{d}: {text.name}.bin is shorter than its index")
        else:
            bad = np.flatnonzero(data[last] != eod)
            if len(bad):
                problems.append(
                    f"{d}: {len(bad)} document(s) do not end with the end-of-document "
                    f"token {eod} (first: document {int(bad[0])})"
                )
    return problems


def _check_awb(d: Path, m: dict[str, Any]) -> list[str]:
    """Every line is UTF-8 JSON naming an in-range turn (one problem per file, with its
    first bad line); the line count matches; the lines' trajectories are no more than
    the manifest's (`trajectory_problems`)."""
    problems, n = [], 0
    ids: DistinctIds | None = DistinctIds()
    for s in m["shards"]:
        bad, first = 0, 0
        with open(d / s["path"], "rb") as fh:
            for k, raw in enumerate(fh, start=1):
                n += 1
                try:
                    rec = json.loads(raw.decode("utf-8"))
                    ok = 1 <= rec["turn_idx"] <= len(rec["prompt"]) == len(rec["response"])
                except (ValueError, KeyError, TypeError):  # JSON and UTF-8 errors are ValueErrors
                    ok, rec = False, None
                if not ok:
                    bad, first = bad + 1, first or k
                elif ids is not None:
                    tid = (rec.get(F.AWB_PROVENANCE) or {}).get("trajectory_id")
                    if isinstance(tid, str):
                        ids.add([tid])
                    else:  # written before lines said their trajectory
                        ids = None
        if bad:
            more = f" ({bad} lines, the first line {first})" if bad > 1 else ""
            problems.append(f"{d / s['path']}:{first}: not an AgentWorldBench record{more}")
    if n != m["counts"]["rows"]:
        problems.append(f"{d}: {n} records != manifest {m['counts']['rows']}")
    return problems + (
        trajectory_problems(d, m, ids.count(), turn_samples=True) if ids is not None else []
    )


class DistinctIds:
    """How many distinct trajectory ids a pass over an export's rows met, in 8 bytes an
    id (a 64-bit hash of it; kept sorted and unique, merged as batches come): a set of
    the ids themselves would hold ~100 bytes a trajectory."""

    def __init__(self) -> None:
        self._seen = np.zeros(0, np.int64)
        self._pending: list[np.ndarray] = []
        self._n_pending = 0

    def add(self, ids) -> None:
        digests = np.fromiter((hash(t) for t in ids), np.int64, len(ids))
        self._pending.append(digests)
        self._n_pending += len(digests)
        if self._n_pending > max(1 << 16, len(self._seen)):
            self._merge()

    def _merge(self) -> None:
        self._seen = np.unique(np.concatenate([self._seen, *self._pending]))
        self._pending, self._n_pending = [], 0

    def count(self) -> int:
        self._merge()
        return len(self._seen)


def trajectory_problems(d: Path, m: dict[str, Any], found: int, turn_samples: bool) -> list[str]:
    """`counts.trajectories` against the `found` distinct trajectory ids of the rows. A
    trajectory read makes rows or is counted as left out: never more in the files than
    read; fewer only by the trajectories whose every sample was left out for want of a
    target, each at least one of `turns_without_target.samples` (trajectory samples).
    Turn samples (`turn_samples`, AgentWorldBench lines; packed rows, which name their
    first sample's trajectory) only bound it from above: a trajectory without turns makes
    no turn sample and is counted nowhere."""
    c = m["counts"]
    if "trajectories" not in c:
        return []
    n, left_out = c["trajectories"], (c.get("turns_without_target") or {}).get("samples", 0)
    if found > n or (not turn_samples and found < n - left_out):
        how = "" if found > n else f" - {left_out} sample(s) left out without a target"
        return [f"{d}: {found} trajectories in the files != manifest trajectories {n}{how}"]
    return []
