"""The job store on PostgreSQL, for workers on several hosts (`--jobs postgresql://...`).

The SQL is `SQLJobStore`'s; this module supplies connections (one per thread, psycopg
3), the database clock and the claim lock: `FOR UPDATE SKIP LOCKED`, so concurrent
claims skip each other's rows instead of queueing behind them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .jobstore_sql import ADDED_COLUMNS, SCHEMA, SQLJobStore, Tx

SCHEMA_LOCK = 7_244_953
"""Advisory lock key serialising schema creation between processes starting at once."""


@functools.lru_cache(maxsize=512)
def _convert(sql: str) -> str:
    """`?` parameters to psycopg's `%s` (a literal `%` doubles)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresJobStore(SQLJobStore):
    NOW = "extract(epoch FROM clock_timestamp())::double precision"
    CLAIM_LOCK = " FOR UPDATE OF e SKIP LOCKED"
    ROW_LOCK = " FOR UPDATE"

    def __init__(self, url: str, connect_timeout: float = 10.0):
        self.url = url
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        with self._tx() as tx:
            tx.run("SELECT pg_advisory_xact_lock(?)", SCHEMA_LOCK)
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    tx.run(stmt)
            # columns newer than a store's layout (`lease` of workers): looked up first, as
            # an ALTER locks its table against the running workers' claims even when it adds
            # nothing
            have = {
                (r["table_name"], r["column_name"])
                for r in tx.all(
                    "SELECT table_name, column_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema()"
                )
            }
            for table, cols in ADDED_COLUMNS.items():
                for name, decl in cols.items():
                    if (table, name) not in have:
                        tx.run(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {decl}")

    def _conn(self):
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=int(self.connect_timeout)
            )
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Tx]:
        conn = self._conn()
        with conn.transaction(), conn.cursor() as cur:
            yield Tx(cur, _convert)

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
