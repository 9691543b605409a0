"""Megatron-LM indexed dataset files (`.bin` + `.idx`, the MMIDIDX format).

.idx layout (little endian): magic b"MMIDIDX\\x00\\x00", version u64 = 1, dtype code u8,
sequence count u64, document count u64, sizes int32[seq], pointers int64[seq] (byte
offsets into .bin), document indices int64[doc] (sequence index where each document
starts, then the total). The loss-mask sidecar uses the same layout with dtype uint8.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}


class IndexedDatasetWriter:
    """Streams sequences into `<prefix>.bin`; `close` writes `<prefix>.idx`. Both appear
    atomically (temp name, fsync, rename)."""

    def __init__(self, prefix: str | os.PathLike, dtype: np.dtype):
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        self._bin_tmp = self.prefix.with_name(f".tmp-{self.prefix.name}.bin")
        self._bin = open(self._bin_tmp, "wb")  # noqa: SIM115  (closed in close())
        self.sizes: list[int] = []
        self.doc_idx: list[int] = [0]

    def add(self, values: np.ndarray, end_document: bool = True) -> None:
        arr = np.asarray(values, dtype=self.dtype)
        self._bin.write(arr.tobytes(order="C"))
        self.sizes.append(len(arr))
        if end_document:
            self.doc_idx.append(len(self.sizes))

    def close(self) -> tuple[Path, Path]:
        self._bin.flush()
        os.fsync(self._bin.fileno())
        self._bin.close()
        sizes = np.asarray(self.sizes, dtype=np.int32)
        pointers = np.zeros(len(sizes), dtype=np.int64)
        if len(sizes) > 1:
            pointers[1:] = np.cumsum(sizes[:-1].astype(np.int64)) * self.dtype.itemsize
        idx_tmp = self.prefix.with_name(f".tmp-{self.prefix.name}.idx")
        with open(idx_tmp, "wb") as fh:
            fh.write(MAGIC)
            fh.write(struct.pack("<Q", VERSION))
            fh.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
            fh.write(struct.pack("<Q", len(sizes)))
            fh.write(struct.pack("<Q", len(self.doc_idx)))
            fh.write(sizes.tobytes())
            fh.write(pointers.tobytes())
            fh.write(np.asarray(self.doc_idx, dtype=np.int64).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        bin_path, idx_path = Path(f"{self.prefix}.bin"), Path(f"{self.prefix}.idx")
        os.replace(self._bin_tmp, bin_path)
        os.replace(idx_tmp, idx_path)
        return bin_path, idx_path


INDEX_HEADER = 34
"""Bytes of an .idx header: magic (9), version (8), dtype code (1), sequences (8),
documents (8)."""


def read_index(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype]:
    """(sizes, pointers, document indices, dtype) of an .idx file. A damaged one is a
    ValueError naming the file (`export --verify` reads exports it has not seen whole):
    its header is checked against the file's size before anything it claims is read,
    and its sizes and pointers (each document right after the one before, as the writer
    puts them) against each other and the `.bin`'s size, so what reads the `.bin` by
    them stays inside it."""
    path = Path(path)
    codes = {v: k for k, v in DTYPE_CODES.items()}
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(INDEX_HEADER)
            if len(head) < INDEX_HEADER or head[:9] != MAGIC:
                raise ValueError(f"{path}: not an MMIDIDX index")
            version, code, n_seq, n_doc = struct.unpack("<QBQQ", head[9:])
            if version != VERSION or code not in codes:
                raise ValueError(f"{path}: index version {version} or dtype code {code} unknown")
            if size != (want := INDEX_HEADER + 12 * n_seq + 8 * n_doc):
                raise ValueError(
                    f"{path}: {size} bytes, not the {want} of its header's {n_seq} sequences"
                    f" and {n_doc} documents"
                )
            sizes = np.frombuffer(fh.read(4 * n_seq), dtype=np.int32)
            pointers = np.frombuffer(fh.read(8 * n_seq), dtype=np.int64)
            docs = np.frombuffer(fh.read(8 * n_doc), dtype=np.int64)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    dtype = codes[code]
    ends = np.cumsum(sizes, dtype=np.int64) * np.dtype(dtype).itemsize
    if len(sizes) and (
        sizes.min() < 0 or pointers[0] or not np.array_equal(pointers[1:], ends[:-1])
    ):
        raise ValueError(f"{path}: its sizes and pointers do not follow one another")
    data = path.with_suffix(".bin")
    total = int(ends[-1]) if len(sizes) else 0
    if data.is_file() and data.stat().st_size != total:
        raise ValueError(f"{data}: {data.stat().st_size} bytes != {total} its index says")
    return sizes, pointers, docs, dtype
