"""`worldtrace redact --check`: find secrets left in a store, shards or an export.

Every format the store holds is read as what a model would see: trajectory shards
field by field, training shards (Parquet and Megatron) decoded back to text with the
export's tokenizer (its sha256 in the manifest must match), JSONL and JSON files value by
value, and the job store's text columns. A finding names the file, the record, the field
and the kind of secret, never the secret itself.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldtrace.collectors.importers import LINE_SUFFIXES
from worldtrace.collectors.importers import SUFFIXES as IMPORT_SUFFIXES
from worldtrace.schemas import fields as F
from worldtrace.schemas.redact import Redactor, find_secrets
from worldtrace.schemas.sqlite import connect_read_only
from worldtrace.schemas.store import TEMP_PREFIXES
from worldtrace.schemas.tempfiles import first_line, open_parquet, read_pages

SUFFIXES = tuple(dict.fromkeys((".parquet", *IMPORT_SUFFIXES, ".bin", ".db")))
"""What a directory walk checks, whatever the case of the names: the store's files and
every file `import` reads (a user checks logs before sharing or importing them)."""
TOKEN_COLUMN = "input_ids"


@dataclass(frozen=True)
class Finding:
    path: Path
    record: str
    """`row N`, `line N`, `sequence N` or the record's id (never one holding a secret)."""
    field: str
    """Field path (`turns[2].observation.text`), `input_ids (decoded)` or a column."""
    kind: str

    def __str__(self) -> str:
        return f"{self.path}: {self.record}: {self.field}: {self.kind}"


class CannotCheck(Exception):
    """A file that cannot be checked (no matching tokenizer, unreadable): one line."""


def files_under(paths: list[Path]) -> list[Path]:
    """The files to check: given files (whatever their suffix: one of no known format is
    read as text), and every file with a known suffix under given directories (hidden
    journals included, in-flight temp files not)."""
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
            continue
        for f in sorted(p.rglob("*")):
            rel = f.relative_to(p)
            in_flight = any(q.name.startswith(TEMP_PREFIXES) for q in (rel, *rel.parents))
            if f.is_file() and f.name.lower().endswith(SUFFIXES) and not in_flight:
                out.append(f)
    return out


def _batches(path: Path, pf, **options) -> Iterator:
    """`pf`'s batches; pages that do not decode, or fail their checksum, are `CannotCheck`
    naming the file: pyarrow's error named none and ended the whole check."""
    return read_pages(
        pf.iter_batches(**options),
        lambda exc: CannotCheck(f"{path}: unreadable Parquet ({first_line(exc)})"),
    )


class Checker:
    """Scans files with one redactor; decodes training shards with the export's tokenizer."""

    def __init__(self, red: Redactor, tokenizer: str | None = None):
        self.red = red
        self.tokenizer_path = tokenizer
        self._tokenizers: dict[str, Any] = {}

    def check(self, path: Path) -> Iterator[Finding]:
        name = path.name.lower()
        if name.endswith(".parquet"):
            yield from self._parquet(path)
        elif name.endswith(LINE_SUFFIXES):  # as `import` reads them: a record a line
            yield from self._jsonl(path)
        elif name.endswith(IMPORT_SUFFIXES):  # the others `import` reads: one document
            yield from self._json(path)
        elif name.endswith(".bin") and path.with_suffix(".idx").exists():
            yield from self._megatron(path)
        elif name.endswith(".db"):
            yield from self._sqlite(path)
        elif name.endswith(".bin"):
            raise CannotCheck(f"{path}: a token shard without its .idx index beside it")
        else:  # a file named on the command line (a log, a page): its text, line by line
            yield from self._text(path)

    def _label(self, rid: Any, fallback: str) -> str:
        """A record's id as its label, or `fallback` (`row N`, `line N`) when it has none or
        the id holds a secret: a finding never shows one (2026-12-05: a JSONL record whose
        `id` was a key was listed as `FILE: sk-ant-...: id: anthropic_key`)."""
        if rid in (None, ""):
            return fallback
        rid = str(rid)
        return fallback if self.red.spans(rid) else rid

    def _found(self, path: Path, record: str, obj: Any, prefix: str = "") -> Iterator[Finding]:
        for field, kind in find_secrets(obj, self.red):
            yield Finding(path, record, f"{prefix}{field}" if prefix else field, kind)

    # -- files ---------------------------------------------------------------------------
    def _parquet(self, path: Path) -> Iterator[Finding]:

        try:
            pf = open_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise CannotCheck(f"{path}: unreadable Parquet ({first_line(exc)})") from exc
        names = pf.schema_arrow.names
        if TOKEN_COLUMN in names:
            yield from self._training(path, pf)
            return
        row = 0
        for batch in _batches(path, pf, batch_size=256):
            for d in batch.to_pylist():
                yield from self._found(path, self._label(d.get(F.TRAJECTORY_ID), f"row {row}"), d)
                row += 1

    def _jsonl(self, path: Path) -> Iterator[Finding]:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    yield from self._found(path, f"line {n}", line)
                    continue
                rid = d.get(F.TRAJECTORY_ID) or d.get("id") if isinstance(d, dict) else None
                yield from self._found(path, self._label(rid, f"line {n}"), d)

    def _text(self, path: Path) -> Iterator[Finding]:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = list(enumerate(fh, 1))
        except OSError as exc:
            raise CannotCheck(f"{path}: unreadable ({exc.strerror or exc})") from exc
        for n, line in lines:
            for _, _, kind in self.red.spans(line):
                yield Finding(path, f"line {n}", "text", kind)

    def _json(self, path: Path) -> Iterator[Finding]:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = text
        yield from self._found(path, "file", data)

    def _sqlite(self, path: Path) -> Iterator[Finding]:
        try:
            con = connect_read_only(path)
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
        except sqlite3.Error as exc:
            raise CannotCheck(f"{path}: unreadable SQLite database ({first_line(exc)})") from exc
        try:
            for table in tables:
                cur = con.execute(f'SELECT rowid, * FROM "{table}"')
                cols = [d[0] for d in cur.description][1:]
                for rowid, *values in cur:
                    for col, v in zip(cols, values, strict=True):
                        if isinstance(v, str):
                            yield from self._found(path, f"{table} row {rowid}", v, col)
        finally:
            con.close()

    # -- token shards --------------------------------------------------------------------
    def _tokenizer(self, directory: Path):
        """The tokenizer the export in `directory` was written with."""
        from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
        from worldtrace.schemas.hashing import sha256_file

        manifest = directory / "manifest.json"
        want = None
        if manifest.exists():
            want = (json.loads(manifest.read_text()).get("tokenizer") or {}).get("sha256")
        for candidate in (self.tokenizer_path, default_tokenizer()):
            if candidate and Path(candidate).is_file():
                digest = sha256_file(str(candidate))
                if want is None or digest == want:
                    if digest not in self._tokenizers:
                        self._tokenizers[digest] = load_tokenizer(str(candidate))
                    return self._tokenizers[digest]
        raise CannotCheck(
            f"{directory}: cannot decode the token shards: no tokenizer with sha256 {want} "
            "(the manifest's); pass --tokenizer"
        )

    def _decoded(self, path: Path, tok, ids: list, record: str) -> Iterator[Finding]:
        text = tok.decode(list(ids), skip_special_tokens=False)
        for _, _, kind in self.red.spans(text):
            yield Finding(path, record, f"{TOKEN_COLUMN} (decoded)", kind)

    def _training(self, path: Path, pf) -> Iterator[Finding]:
        tok = self._tokenizer(path.parent)
        cols = [c for c in ("sample_id", TOKEN_COLUMN) if c in pf.schema_arrow.names]
        row = 0
        for batch in _batches(path, pf, batch_size=64, columns=cols):
            for d in batch.to_pylist():
                label = self._label(d.get("sample_id"), f"row {row}")
                yield from self._decoded(path, tok, d[TOKEN_COLUMN], label)
                row += 1

    def _megatron(self, path: Path) -> Iterator[Finding]:
        import numpy as np

        from worldtrace.pipelines.megatron import read_index

        sizes, pointers, _, dtype = read_index(path.with_suffix(".idx"))
        if np.dtype(dtype) == np.uint8:
            return  # a loss-mask sidecar, not tokens
        tok = self._tokenizer(path.parent)
        data = np.memmap(path, dtype=dtype, mode="r")
        step = np.dtype(dtype).itemsize
        for i, (size, ptr) in enumerate(zip(sizes, pointers, strict=True)):
            ids = data[ptr // step : ptr // step + size].tolist()
            yield from self._decoded(path, tok, ids, f"sequence {i}")
