"""A DuckDB connection that reads the store and nothing else.

Two layers. The engine: the views live in a database opened read-only (only temporary
objects can be created or changed), files are reachable only under the allowed
directories (`enable_external_access = false` with `allowed_directories`), extensions
cannot be installed or auto-loaded, persistent secrets are off, and the configuration
is locked. The statement check (`refusal`): DuckDB's own parser classifies each
statement, and those that would write files inside the allowed directories (COPY ...
TO, EXPORT DATABASE) or open other databases, change settings, load extensions or run
prepared statements are refused before anything runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa

from .tempfiles import is_leftover, temp_name

READ_ONLY_PRAGMAS = frozenset(
    {
        "version", "platform", "user_agent", "table_info", "show", "show_tables",
        "show_tables_expanded", "show_databases", "database_list", "database_size",
        "storage_info", "functions", "collations", "metadata_info",
    }
)  # fmt: skip
"""PRAGMAs that only report; every other PRAGMA changes settings or data."""
_WHY = {
    "COPY": "COPY reads or writes files; query only reads the views (save results with --output)",
    "EXPORT": "EXPORT DATABASE writes files; query only reads the views",
    "ATTACH": "ATTACH opens another database; query only reads the store's views",
    "DETACH": "DETACH changes the attached databases",
    "LOAD": "INSTALL and LOAD of extensions are disabled",
    "SET": "SET, RESET and USE change settings, which are locked",
    "PREPARE": "prepared statements are not available (write the statement itself)",
    "EXECUTE": "prepared statements are not available (write the statement itself)",
    "VACUUM": "VACUUM and ANALYZE maintain a database; the views are read-only",
    "COPY_DATABASE": "COPY FROM DATABASE writes a database",
}
_ALLOWED = frozenset(
    {"SELECT", "EXPLAIN", "CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER",
     "TRANSACTION", "CALL", "MULTI", "PRAGMA"}
)  # fmt: skip
"""Statement types that run; CREATE and the DML/DDL reach only temporary objects because
the views' database is read-only."""


def _words(query: str, n: int) -> list[str]:
    """The first `n` tokens of a statement, lower case (DuckDB's tokenizer)."""
    toks = duckdb.tokenize(query)[: n + 1]
    ends = [p for p, _ in toks[1:]] + [len(query)]
    return [query[p:e].strip().lower() for (p, _), e in zip(toks, ends, strict=False)][:n]


def refusal(sql: str) -> str | None:
    """Why `sql` may not run on a locked connection (one line), or None.

    A syntax error is not refused here: running it reports DuckDB's own message."""
    try:
        statements = [(st, st.type.name) for st in duckdb.extract_statements(sql)]
    except duckdb.ParserException:
        return None
    except ValueError:  # a statement type this duckdb build's Python enum lacks
        return "refused: a statement of a kind query does not run (only reads are allowed)"
    for st, kind in statements:
        if kind == "PRAGMA":
            words = _words(st.query, 2)
            if words[:1] != ["pragma"] or words[1:2] == [] or words[1] not in READ_ONLY_PRAGMAS:
                shown = " ".join(words).upper()
                return f"refused: {shown} changes settings or data; only reporting PRAGMAs run"
        elif kind not in _ALLOWED:
            why = _WHY.get(kind, f"{kind} statements are not allowed")
            return f"refused: {why}"
    return None


SCRATCH_PREFIX = "worldtrace-views-"


def _scratch() -> str:
    """A private directory for the views database and DuckDB's spill files, removed with
    the connection (or at exit); on tmpfs when there is one, where creating the database
    file costs no fsync. Those of processes that died without cleaning up are swept."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    for old in base.glob(f"{SCRATCH_PREFIX}*"):
        if is_leftover(old):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=temp_name(SCRATCH_PREFIX) + "-", dir=base)


def locked_connection(
    ddl: Iterable[str], tables: dict[str, pa.Table], allowed: Iterable[Path]
) -> duckdb.DuckDBPyConnection:
    """Run `ddl` (CREATE VIEW ...) in a fresh database with `tables` registered, then
    reopen it read-only and lock it, with files reachable only under `allowed`."""
    scratch = _scratch()
    db = os.path.join(scratch, "views.duckdb")
    try:
        with duckdb.connect(db) as build:
            for name, table in tables.items():
                build.register(name, table)
            for stmt in ddl:
                build.execute(stmt)
        con = duckdb.connect(db, read_only=True, config={"temp_directory": scratch})
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    weakref.finalize(con, shutil.rmtree, scratch, ignore_errors=True)
    for name, table in tables.items():
        con.register(name, table)
    roots = sorted(
        {str(p) + os.sep for a in allowed for p in (Path(a).absolute(), Path(a).resolve())}
    )
    con.execute("SET allowed_directories = $d", {"d": roots})
    for setting in (
        "allow_persistent_secrets = false",
        "autoinstall_known_extensions = false",
        "autoload_known_extensions = false",
        "allow_community_extensions = false",
        "enable_external_access = false",
        "lock_configuration = true",
    ):
        con.execute(f"SET {setting}")
    return con
