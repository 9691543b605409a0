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


def read_index(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype]:
    """(sizes, pointers, document indices, dtype) of an .idx file."""
    codes = {v: k for k, v in DTYPE_CODES.items()}
    with open(path, "rb") as fh:
        if fh.read(9) != MAGIC:
            raise ValueError(f"{path}: not an MMIDIDX index")
        (version,) = struct.unpack("<Q", fh.read(8))
        if version != VERSION:
            raise ValueError(f"{path}: unsupported index version {version}")
        (code,) = struct.unpack("<B", fh.read(1))
        (n_seq,) = struct.unpack("<Q", fh.read(8))
        (n_doc,) = struct.unpack("<Q", fh.read(8))
        sizes = np.frombuffer(fh.read(4 * n_seq), dtype=np.int32)
        pointers = np.frombuffer(fh.read(8 * n_seq), dtype=np.int64)
        docs = np.frombuffer(fh.read(8 * n_doc), dtype=np.int64)
    return sizes, pointers, docs, codes[code]
