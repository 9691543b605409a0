"""Work in progress on disk: owned temp names, sweeping leftovers, atomic small writes.

Temp names carry their owner (`.tmp-<pid>-<host>-...`, `temp_name`): a sweep removes
those of dead processes on this host at once and never a live one's; other hosts' and
unnamed leftovers go when older than an hour. A failed write (a full disk, any OSError)
removes its temp file at once and raises `StoreWriteError`, whose message is one line
naming the path; a file of the store that no longer reads is `DamagedFile`, one line
naming it, why and what to do. Every Parquet file the store writes carries a CRC32 of
each page, checked on every read (`parquet_writer`, `write_parquet`, `open_parquet`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

TMP_PREFIX = ".tmp-"
TEMP_PREFIXES = (TMP_PREFIX, ".run-", ".staging-", ".old-")
"""Hidden names of work in progress: temp shards, processing runs, staged exports, and
replaced directories waiting for removal."""
TMP_STALE_SECONDS = 3600
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_OWNED = re.compile(r"^(?:\.tmp|\.run|\.staging|\.old|worldtrace-views)-(\d+)-([0-9a-f]{8})-")
"""A temp name made by `temp_name`: the owner's pid and host hash."""


_ARROW_ERRNO = re.compile(r"\[errno (\d+)\] ([^\n]+)")
"""The system's reason inside pyarrow's message of a failed file operation."""


class StoreWriteError(OSError):
    """A write into the store failed; `str()` is one line: the path and the reason."""

    def __init__(self, path: str | os.PathLike, cause: OSError):
        reason = (cause.strerror or str(cause)).splitlines()[0] if str(cause) else repr(cause)
        arrow = _ARROW_ERRNO.search(reason)
        if arrow:  # pyarrow's: "Failed to open local file '<temp>'. Detail: [errno 30] ..."
            reason = arrow.group(2)
        if "No space left" in str(cause):
            reason = "No space left on device"
        elif isinstance(cause, FileExistsError | NotADirectoryError):  # making its folders
            file = next((p for p in Path(path).parents if p.is_file()), None)
            reason = f"{file} is a file, not a directory" if file else reason
        super().__init__(cause.errno, reason, str(path))
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


REBUILD_HINT = "`worldtrace process --rebuild` makes the processed data again from raw/"
"""What to do about a damaged file of processed/: its tables and index are made from
the raw files, and a rebuild makes them all again."""


class DamagedFile(OSError):
    """A file of the store (or an input) that no longer reads: a copy cut short, pages a
    disk fault changed, a journal edited by hand. `str()` is one line: the path, why,
    and what to do (`remedy`). An OSError, so a command that meets one where it does not
    expect it ends with that line (`errors.run_guarded`), never a traceback; `filename`
    is the file, so an export does not take it for a failure to write its output."""

    def __init__(self, path: str | os.PathLike, why: str, remedy: str = ""):
        super().__init__(None, why, str(path))
        self.path, self.why, self.remedy = Path(path), why, remedy

    def __str__(self) -> str:
        return f"{self.path}: {self.why}" + (f"; {self.remedy}" if self.remedy else "")

    def __reduce__(self):
        """Rebuilt whole from a pickle (a worker process's error reaches its parent so)."""
        return type(self), (self.path, self.why, self.remedy)


def first_line(exc: object) -> str:
    """The first line of an exception's message (pyarrow's and DuckDB's run to several),
    or of a text."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def try_lock(path: str | os.PathLike, shared: bool = False) -> IO[str] | None:
    """`path` opened (created if missing) and flock-ed, exclusively or `shared` (beside
    other shared holders), or None when another process holds it so. The lock lasts until
    the file is closed or its process ends, so a holder that dies holds nothing. A shared
    lock whose file cannot be made (a read-only mount, where no writer runs either) opens
    it to read, or holds a stand-in when there is none."""
    try:
        fh = open(path, "a+")  # noqa: SIM115  (held by the caller)
    except OSError:
        if not shared:
            raise
        try:
            fh = open(path)  # noqa: SIM115
        except OSError:
            return open(os.devnull)
    try:
        fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


def flock_holders(path: str | os.PathLike, kind: str | None = "WRITE") -> list[int]:
    """The pids of the live processes on this machine that hold `path` flock-ed, `kind`
    WRITE (exclusively: a writer at work, `process` on processed/.process.lock, an export
    on its output's lock), READ (shared: an export reading processed/) or None (either).
    Read from /proc/locks, not by taking the lock: a probe could refuse a writer that
    starts at that instant. Empty when unknown (no such file, no /proc)."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    at = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:  # `1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF`; a waiter: `1: ->`
        f = line.split()
        if (
            len(f) >= 6
            and f[1] == "FLOCK"
            and kind in (None, f[3])
            and f[5] == at
            and f[4].isdigit()
        ):
            pids.append(int(f[4]))
    return pids


def held_exclusively(path: str | os.PathLike) -> bool:
    """Whether a live process on this machine holds `path` flock-ed exclusively."""
    return bool(flock_holders(path, "WRITE"))


def process_said(pid: int) -> str:
    """`pid N (its command line)`, shortened; `pid N` when /proc does not say."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return f"pid {pid}"
    words = [
        os.path.basename(a.decode(errors="replace")) if i == 0 else a.decode(errors="replace")
        for i, a in enumerate(w for w in argv if w)
    ]
    if len(words) > 1 and words[0].startswith("python"):
        words = [os.path.basename(words[1]), *words[2:]]  # the console script, not python
    text = " ".join(" ".join(words).split())  # one line: `python -c` code holds newlines
    return f"pid {pid}: {text[:120] + '…' if len(text) > 120 else text}"


def wait_lock(
    path: str | os.PathLike, timeout: float, stop: threading.Event | None, holder: str
) -> tuple[IO[str] | None, float]:
    """(`try_lock(path)`'s file, seconds waited for it): while another holds the lock,
    polled up to `timeout` seconds (flock has no timeout), backing off from 20 ms to
    0.25 s; `stop` set ends the wait at once. The file is None when the wait ended
    without it (`stop.is_set()` tells a stop from the timeout); a file got holds
    `holder`, the line `lock_holder` shows the next waiter. The time to take a free
    lock is no wait (it was 1 ms under load)."""
    started = time.monotonic()
    deadline, pause = started + timeout, 0.02
    stop = stop or threading.Event()
    contended = False
    while (fh := try_lock(path)) is None:
        contended = True
        left = deadline - time.monotonic()
        if left <= 0 or stop.wait(min(pause, left)):
            return None, time.monotonic() - started
        pause = min(pause * 2, 0.25)
    fh.seek(0)
    fh.truncate()
    fh.write(holder)
    fh.flush()
    return fh, time.monotonic() - started if contended else 0.0


def lock_holder(lock: Path) -> str:
    """Who holds `lock`, as its holder wrote it (`pid N on HOST...`)."""
    try:
        return lock.read_text().strip() or "a process that has not written its name yet"
    except (OSError, UnicodeDecodeError):
        return "a process that has just finished"


def temp_name(prefix: str, name: str = "") -> str:
    """A hidden name owned by this process: `<prefix><pid>-<host>-<random>[-name]`."""
    tail = f"-{name}" if name else ""
    return f"{prefix}{os.getpid()}-{_HOST}-{uuid.uuid4().hex[:8]}{tail}"


def _drop(tmp: Path) -> None:
    """Remove a temp file that may not exist (nor its directory, when that failed). It
    runs while a failed write unwinds: a file that cannot go (its directory is read-only)
    stays hidden, swept once its writer is gone (`sweep_stale_temps`), and the write's
    own error is the one raised."""
    with contextlib.suppress(OSError):
        tmp.unlink()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _started_at(pid: int) -> float | None:
    """When process `pid` started (epoch seconds, Linux /proc), None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _owner_alive(pid: int, modified: float) -> bool:
    """Whether the process that wrote a temp (last modified at `modified`) still runs.
    A live pid that started after the temp was last written is a reused pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by another user
    started = _started_at(pid)
    return started is None or started <= modified + 2


def is_leftover(path: Path, max_age_s: float = TMP_STALE_SECONDS) -> bool:
    """Whether a hidden temp (file or directory) belongs to no running writer: its owner
    (named in it) is dead on this host, or, without an owner here, it is older than
    `max_age_s`."""
    try:
        modified = path.stat().st_mtime
    except FileNotFoundError:
        return False
    m = _OWNED.match(path.name)
    if m and m.group(2) == _HOST:
        return not _owner_alive(int(m.group(1)), modified)
    return time.time() - modified > max_age_s


def sweep_leftovers(directory: str | os.PathLike, max_age_s: float = TMP_STALE_SECONDS) -> int:
    """Remove the `.tmp-*`, `.run-*`, `.staging-*` and `.old-*` leftovers of dead writers
    in `directory` (not below it); returns how many went."""
    directory = Path(directory)
    removed = 0
    try:
        entries = [p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIXES)]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for p in entries:
        if not is_leftover(p, max_age_s):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed += 1
    return removed


def sweep_stale_temps(directory: Path, max_age_s: float = TMP_STALE_SECONDS) -> int:
    """Remove the temp shards of dead writers (kept name: `sweep_leftovers` does it)."""
    return sweep_leftovers(directory, max_age_s)


def _commit(tmp: Path, path: Path) -> None:
    """A finished temp file becomes `path`: its data on disk, then the rename, then the
    directory entry on disk."""
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


PAGE_CHECKSUMS = {"write_page_checksum": True}
"""How the store writes Parquet: a CRC32 of every page in its header. Without it a bit a
disk flipped in a page zstd kept raw (text that does not compress) or in its
Huffman-coded literals decoded, without an error, as other text, which `export` put in
the training samples (hunt 1206q: a bit flipped at 12,149 of a processed shard's 19,798
bytes read as other data; with checksums none did). Measured on the bench corpus's processed
trajectories, 93.7 MB: +0.13% bytes, a write ~1% slower, a read ~4% (0.035 s)."""
VERIFY_CHECKSUMS = {"page_checksum_verification": True}
"""How the store reads Parquet: each page whose header has a CRC32 is checked before it
is decoded; a mismatch raises OSError (`could not verify page integrity, CRC checksum
verification failed ...`), which the readers say as a damaged file. Pages written
without one (files written before 1206q, foreign files) read as before."""


def parquet_writer(where, schema: pa.Schema, **options) -> pq.ParquetWriter:
    """`pq.ParquetWriter` with page checksums (`PAGE_CHECKSUMS`)."""
    return pq.ParquetWriter(where, schema, **PAGE_CHECKSUMS, **options)


def write_parquet(table: pa.Table, where, **options) -> None:
    """`pq.write_table` with page checksums (`PAGE_CHECKSUMS`)."""
    pq.write_table(table, where, **PAGE_CHECKSUMS, **options)


def open_parquet(source, **options) -> pq.ParquetFile:
    """`pq.ParquetFile` whose reads check the pages' checksums (`VERIFY_CHECKSUMS`): the
    one way the store opens a Parquet file to read its rows (Parquet has no checksum for
    the footer, which holds no rows)."""
    return pq.ParquetFile(source, **VERIFY_CHECKSUMS, **options)


def read_pages(batches: Iterator, fail: Callable[[BaseException], Exception]) -> Iterator:
    """`batches` (`ParquetFile.iter_batches`), a page that does not decode or fails its
    checksum raised as `fail(exc)`: pyarrow's error names no file, and a caller says which
    (`export`'s input, `redact --check`)."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            raise fail(exc) from exc
        yield batch


def verified_scan_options():
    """`VERIFY_CHECKSUMS` for pyarrow's dataset layer (`ds.dataset`, `datasets`'s
    `load_dataset("parquet", fragment_scan_options=...)`), imported only when asked."""
    import pyarrow.dataset as ds

    return ds.ParquetFragmentScanOptions(**VERIFY_CHECKSUMS)


def write_table_atomic(
    path: str | os.PathLike, table: pa.Table, compression: str = "zstd", dictionary: bool = True
) -> Path:
    """Write one Parquet file that appears atomically at `path`; `dictionary=False` skips
    the dictionary encoding Parquet tries on every column first (a loss on columns of
    mostly distinct values: texts, ids)."""
    path = Path(path)
    tmp = path.parent / temp_name(TMP_PREFIX, path.name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(table, tmp, compression=compression, use_dictionary=dictionary)
        _commit(tmp, path)
    except OSError as exc:
        raise StoreWriteError(path, exc) from exc
    finally:
        _drop(tmp)
    return path


class ArrowFileWriter:
    """An Arrow IPC file (uncompressed: a reader maps it and touches only what it reads)
    written table by table, which appears atomically at `path` on `close()`; until then
    it is a hidden temp beside it (`abort()` removes it), so what it holds never waits in
    memory."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema):
        self.path, self.schema = Path(path), schema
        self._tmp = self.path.parent / temp_name(TMP_PREFIX, self.path.name)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._sink = pa.OSFile(str(self._tmp), "wb")
            self._writer = pa.ipc.new_file(self._sink, schema)
        except OSError as exc:
            self.abort()
            raise StoreWriteError(self.path, exc) from exc

    def write(self, table: pa.Table) -> None:
        try:
            self._writer.write_table(table)
        except OSError as exc:
            self.abort()
            raise StoreWriteError(self.path, exc) from exc

    def close(self) -> Path:
        try:
            self._writer.close()
            self._sink.close()
            _commit(self._tmp, self.path)
        except OSError as exc:
            raise StoreWriteError(self.path, exc) from exc
        finally:
            _drop(self._tmp)
        return self.path

    def abort(self) -> None:
        for part in ("_writer", "_sink"):
            with contextlib.suppress(Exception):
                getattr(self, part).close()
        _drop(self._tmp)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, parents: bool = True) -> Path:
    """Write `data` to a file that appears atomically at `path`. `parents`: make its
    missing directories (files of the store); False for a path a user named, where a
    missing directory is a typo to report, not to make (`query -o`)."""
    with atomic_writer(path, parents) as write:
        write(data)
    return Path(path)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, parents: bool = True) -> Iterator[Callable]:
    """A writer of bytes (called as often as there is data) to a file that appears
    atomically at `path` when the block ends, under a temp name until then: a failure or
    a stop in the block leaves neither (`parents` as `write_bytes_atomic`'s)."""
    path = Path(path)
    tmp = path.parent / temp_name(TMP_PREFIX, path.name)
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            yield fh.write
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreWriteError(path, exc) from exc
    finally:
        _drop(tmp)


@contextlib.contextmanager
def index_read(path: Path) -> Iterator[None]:
    """A read of `path`, a file of processed/`_index`: one that fails (cut short, pages
    that do not decode under its footer, a column it lacks) is `DamagedFile` naming it,
    with the rebuild that makes it again. pyarrow's error names no file, and raised in a
    pipeline step it came after Beam's traceback (`Parquet magic bytes not found in
    footer ... [while running 'Process/Earlier/IndexMatches']`). Only reads go in here:
    an error of the work on what was read is no damage."""
    import pyarrow as pa

    try:
        yield
    except DamagedFile:
        raise
    except (OSError, pa.ArrowException, KeyError) as exc:  # KeyError: a column it lacks
        raise DamagedFile(path, f"{unreadable(path)} ({first_line(exc)})", REBUILD_HINT) from exc


def unreadable(path: Path) -> str:
    """What a damaged file of `_index` is said to be, by its kind (the probe's Arrow
    files, else Parquet)."""
    return "unreadable Arrow file" if path.suffix == ".arrow" else "unreadable Parquet"
