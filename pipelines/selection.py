"""`export --where`: which trajectories an export takes, as a DuckDB condition.

The condition sees the columns of the `trajectories` view (`worldtrace query --views`:
`domain`, `source`, `environment`, `outcome`, `num_turns`, ...), computed per shard file
over the same Parquet files export streams, so `worldtrace query "SELECT count(*) FROM
trajectories WHERE <condition>"` counts what the export takes. Each file's answer is a
row mask (one byte a row), so memory stays flat however large the corpus.

It runs on a locked connection (`schemas.lockdown`: read-only, files only under the
input directory) as one expression: a `;` or a statement that writes is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from worldtrace.schemas.lockdown import locked_connection, refusal
from worldtrace.schemas.tables import STORED_TURNS_SCHEMA
from worldtrace.schemas.views import corrected_trajectories, trajectory_select

from . import corpus

ROW = "_worldtrace_row"


@dataclass
class Selection:
    """The rows of each shard file for which `where` holds (NULL counts as false)."""

    where: str
    root: Path
    """The input directory: the only place the condition's connection may read."""
    left_out: int = 0
    """Trajectories the condition left out so far."""

    def __post_init__(self) -> None:
        processed = Path(self.root).parent  # a store's: its turns and template counts
        counts = corpus.TemplateCounts(processed)
        tables = {
            "_counts": pa.table({"key": counts.keys, "count": counts.counts}),
            "_empty_turns": STORED_TURNS_SCHEMA.empty_table(),
        }
        allowed = [self.root, processed] if (processed / "turns").is_dir() else [self.root]
        self._con = locked_connection([], tables, allowed)

    def _sql(self, where: str, f: Path) -> tuple[str, dict[str, str]]:
        """The condition over file `f` read as the `trajectories` view reads it: with its
        stored turns' corpus-count fields under the current counts where they exist."""
        rows = f"(SELECT *, file_row_number AS {ROW} FROM read_parquet($f, file_row_number = true))"
        turns = corpus.turns_file(f)
        if turns.exists():
            stored = "(SELECT * FROM read_parquet($t) UNION ALL BY NAME SELECT * FROM _empty_turns)"
            source = corrected_trajectories(rows, stored, "_counts")
            select, params = trajectory_select(fixed=True), {"f": str(f), "t": str(turns)}
        else:
            source, select, params = rows, trajectory_select(), {"f": str(f)}
        sql = (
            f"SELECT {ROW} FROM (SELECT {select}, {ROW} FROM {source}) AS trajectories "
            f"WHERE coalesce((\n{where}\n), false)"  # a `--` comment ends at its line
        )
        return sql, params

    def check(self, first: Path) -> None:
        """Refuse a condition that is not one expression over the view's columns, before
        the export reads or writes anything (ValueError naming the option)."""
        where = self.where.strip()
        if not where:
            raise ValueError("where: the condition is empty")
        sql, params = self._sql(where, first)
        try:
            one = len(duckdb.extract_statements(sql)) == 1
        except duckdb.Error as exc:
            raise ValueError(f"where {self.where!r}: {_first_line(exc)}") from exc
        why = refusal(sql) if one else "a `;` ends it"
        if why:
            raise ValueError(f"where {self.where!r}: not one condition ({why})")
        if drawn := _volatile(where):
            raise ValueError(
                f"where {self.where!r}: {', '.join(f'{f}()' for f in drawn)} gives another "
                "answer on every run, and an export gives the same files from the same data "
                "and settings (a fixed sample: hash(trajectory_id) % 10 = 0)"
            )
        try:
            self._con.execute(f"{sql} LIMIT 0", params)
        except duckdb.CatalogException as exc:
            if not (table := _TABLE_RE.search(str(exc))):
                raise ValueError(f"where {self.where!r}: {_first_line(exc)}") from exc
            raise ValueError(
                f"where {self.where!r}: a condition on each trajectory's own columns, read "
                f"one shard file at a time, names no table or view ({table[1]}: a subquery "
                "over the store would see one file, its avg that file's): name the "
                "trajectories by their columns, or list their ids (trajectory_id IN ('a', "
                "'b'), from `worldtrace query`)"
            ) from exc
        except duckdb.Error as exc:
            raise ValueError(f"where {self.where!r}: {_first_line(exc)}") from exc

    def rows(self, f: Path, n: int) -> np.ndarray:
        """A boolean mask of the `n` rows of shard file `f`: True where the condition holds."""
        try:
            got = self._con.execute(*self._sql(self.where, f)).fetchnumpy()[ROW]
        except duckdb.Error as exc:
            raise ValueError(f"{f}: where {self.where!r}: {_first_line(exc)}") from exc
        mask = np.zeros(n, dtype=bool)
        mask[np.asarray(got, dtype=np.int64)] = True
        self.left_out += n - int(mask.sum())
        return mask


_FUNCTION_RE = re.compile(r'"function_name":"([^"]+)"')
_TABLE_RE = re.compile(r"Table with name (\S+) does not exist")
"""DuckDB's words for a table or view the condition's connection does not hold: a
subquery over `trajectories` (until 2026-12-06 said as such, though the docs name it)."""


def _volatile(where: str) -> list[str]:
    """The functions of `where` DuckDB calls volatile (`random`, `uuid`, `nextval`...:
    another value on every call), but `error` (it only stops the query). Read from the
    parsed condition (`json_serialize_sql`: no table is bound), not its text."""
    con = duckdb.connect()
    try:
        tree = con.execute("SELECT json_serialize_sql($q)", {"q": f"SELECT 1 WHERE ({where})"})
        used = set(_FUNCTION_RE.findall(tree.fetchall()[0][0]))
        volatile = {r[0] for r in con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE stability = 'VOLATILE'"
        ).fetchall()}  # fmt: skip
    finally:
        con.close()
    return sorted((used & volatile) - {"error"})


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
