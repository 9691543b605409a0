"""Opening a store's SQLite file (the job store) for a command that only reads it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote


def connect_read_only(path: str | Path, **kwargs) -> sqlite3.Connection:
    """A connection that cannot change `path` and sees a live writer's commits.

    The job store is a WAL database; whoever opens one needs its `-shm` file. Where the
    file and its directory are writable it is opened as a writer would (`mode=rw`: never
    made) with `query_only`: the last connection to close removes the `-wal`/`-shm`
    files, as before (a `mode=ro` one cannot, and left them). Elsewhere `mode=ro`; on a
    read-only mount or snapshot, where SQLite cannot make the `-shm` and that open fails
    ("unable to open database file") though every row is there, nothing can be writing
    either: `immutable=1` (no locks, no `-shm`). `kwargs` go to `sqlite3.connect`.
    """
    p = Path(path).absolute()
    uri = "file:" + quote(str(p))
    if os.access(p, os.W_OK) and os.access(p.parent, os.W_OK):
        con = sqlite3.connect(f"{uri}?mode=rw", uri=True, **kwargs)
        con.execute("PRAGMA query_only = ON")
        return con
    try:
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, **kwargs)
        try:
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # the open itself is lazy
        except BaseException:
            con.close()
            raise
        return con
    except sqlite3.OperationalError:
        if not p.is_file() or os.access(p.parent, os.W_OK):
            raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, **kwargs)
