"""The job store in SQL: one implementation of `JobStore` for SQLite and PostgreSQL.

`SQLJobStore` holds every operation, written with `?` parameters and two hooks a
database fills in: `NOW` (its clock, epoch seconds; leases use it so hosts need not agree
on the time) and `CLAIM_LOCK` (row locking of a claim). `SQLiteJobStore` is the embedded
default; PostgreSQL is in `jobstore_pg.py`. The tables and columns the DuckDB `jobs` and
`episodes` views read keep their names (columns are only added). The module is long
because the SQL of every operation sits in one place, shared by both databases.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldtrace.schemas.sqlite import connect_read_only

from .jobstore import (
    FINAL,
    JOB_CANCELLED,
    LOST_LAST,
    LOST_PREFIX,
    MAX_LOST,
    Claim,
    Expired,
    Lease,
)

if TYPE_CHECKING:  # a type only: `jobs list` and `show` need no job-file parsing
    from .jobspec import JobSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_json TEXT NOT NULL, status TEXT NOT NULL,
    episodes INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT,
    priority INTEGER NOT NULL DEFAULT 0, schedule_id TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    job_id TEXT NOT NULL, episode_id TEXT NOT NULL, task_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, error TEXT, trajectory_id TEXT, worker TEXT, heartbeat DOUBLE PRECISION,
    started_at TEXT, ended_at TEXT,
    seq INTEGER NOT NULL DEFAULT 0, lease_token TEXT, lease_expires DOUBLE PRECISION,
    lost INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, episode_id, attempt)
);
CREATE INDEX IF NOT EXISTS episodes_status ON episodes (status);
CREATE TABLE IF NOT EXISTS workers (
    worker TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, process_start BIGINT,
    status TEXT NOT NULL, started_at TEXT NOT NULL, heartbeat DOUBLE PRECISION, stopped_at TEXT,
    lease DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS schedules (
    schedule_id TEXT PRIMARY KEY, spec_json TEXT NOT NULL, cron TEXT, every TEXT, missed TEXT NOT NULL,
    next_due DOUBLE PRECISION NOT NULL, last_job_id TEXT, last_run_at TEXT, created_at TEXT NOT NULL
);
"""
ADDED_COLUMNS = {
    "jobs": {"priority": "INTEGER NOT NULL DEFAULT 0", "schedule_id": "TEXT"},
    "episodes": {
        "seq": "INTEGER NOT NULL DEFAULT 0",
        "lease_token": "TEXT",
        "lease_expires": "DOUBLE PRECISION",
        "lost": "INTEGER NOT NULL DEFAULT 0",
    },
    "workers": {"lease": "DOUBLE PRECISION"},
}
"""Columns newer than the first jobs.db layout (added to an old store when a command that
writes opens it; a reading one sees them at their defaults: `_as_current_layout`)."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


class Tx:
    """One transaction: `all`/`one` return dict rows, `run` returns the row count."""

    def __init__(self, cursor, convert):
        self.cur = cursor
        self.convert = convert

    def run(self, sql: str, *params: Any) -> int:
        self.cur.execute(self.convert(sql), params)
        return self.cur.rowcount

    def all(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        self.cur.execute(self.convert(sql), params)
        names = [d[0] for d in self.cur.description]
        return [dict(zip(names, r, strict=True)) for r in self.cur.fetchall()]

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        rows = self.all(sql, *params)
        return rows[0] if rows else None

    def many(self, sql: str, rows: list[tuple]) -> None:
        if rows:
            self.cur.executemany(self.convert(sql), rows)


class SQLJobStore:
    """The `JobStore` in SQL written with `?` parameters; subclasses give `_tx`, `NOW`
    (the database clock in epoch seconds), `CLAIM_LOCK` (row locking of a claim) and
    `ROW_LOCK` (locking a row read before it is updated)."""

    NOW = ""
    CLAIM_LOCK = ""
    ROW_LOCK = ""
    url = ""

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Tx]:
        """A transaction (`write=False`: one that only reads)."""
        raise NotImplementedError

    # -- jobs ---------------------------------------------------------------------
    def submit(self, spec: JobSpec, schedule_id: str | None = None) -> str:
        with self._tx() as tx:
            return self._insert_job(tx, spec, schedule_id)

    def _insert_job(self, tx: Tx, spec: JobSpec, schedule_id: str | None) -> str:
        job_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        eps = spec.expand()
        tx.run(
            "INSERT INTO jobs (job_id, name, spec_json, status, episodes, created_at, priority, schedule_id)"
            " VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
            job_id, spec.name, spec.to_json(), len(eps), now_iso(), spec.options.priority, schedule_id,
        )  # fmt: skip
        tx.many(
            "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status, seq) VALUES (?, ?, ?, 1, 'queued', ?)",
            [(job_id, ep.episode_id, ep.task.id, i) for i, ep in enumerate(eps)],
        )
        return job_id

    def jobs(self) -> list[dict[str, Any]]:
        with self._tx(write=False) as tx:
            return tx.all(
                "SELECT job_id, name, status, priority, episodes, succeeded, failed, created_at, finished_at"
                " FROM jobs ORDER BY created_at"
            )

    def job(self, job_id: str) -> dict[str, Any] | None:
        with self._tx(write=False) as tx:
            # a prefix compared as text: LIKE read `_` as any character and ignored case
            # in SQLite (`jobs cancel data_` cancelled `data-1-...`)
            rows = tx.all(
                "SELECT * FROM jobs WHERE substr(job_id, 1, length(?)) = ?", job_id, job_id
            )
            exact = [r for r in rows if r["job_id"] == job_id]
            if len(exact or rows) != 1:
                return None
            job = (exact or rows)[0]
            job["episode_rows"] = tx.all(
                "SELECT episode_id, attempt, status, error, trajectory_id, worker, started_at, ended_at"
                " FROM episodes WHERE job_id = ? ORDER BY seq, attempt",
                job["job_id"],
            )
        return job

    def cancel(self, job_id: str) -> int:
        """Cancel the job's queued episodes (each with the reason, as every ended attempt
        has one); running ones finish."""
        with self._tx() as tx:
            n = tx.run(
                "UPDATE episodes SET status = 'cancelled', ended_at = ?, error = ?"
                " WHERE job_id = ? AND status = 'queued'",
                now_iso(), CANCELLED, job_id,
            )  # fmt: skip
            tx.run(
                "UPDATE jobs SET status = 'cancelled', finished_at = ? WHERE job_id = ?"
                " AND status NOT IN ('succeeded', 'failed', 'partial')",
                now_iso(), job_id,
            )  # fmt: skip
        return n

    def retry(self, job_id: str) -> int:
        """Queue a new attempt of every episode whose last attempt failed or was cancelled."""
        with self._tx() as tx:
            last = tx.all(
                f"SELECT e.episode_id, e.task_id, e.attempt, e.seq FROM episodes e JOIN ({_LAST}) m"
                " ON e.episode_id = m.episode_id AND e.attempt = m.a"
                " WHERE e.job_id = ? AND e.status IN ('failed', 'cancelled')",
                job_id, job_id,
            )  # fmt: skip
            tx.many(
                "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status, seq) VALUES (?, ?, ?, ?, 'queued', ?)",
                [(job_id, r["episode_id"], r["task_id"], r["attempt"] + 1, r["seq"]) for r in last],
            )
            if last:
                tx.run(
                    "UPDATE jobs SET status = 'queued', finished_at = NULL WHERE job_id = ?", job_id
                )
            self._refresh(tx, job_id)
        return len(last)

    def pending(self) -> dict[str, int]:
        """Attempts still to run: `queued` (claimable) and `running`."""
        with self._tx(write=False) as tx:
            row = tx.one(
                "SELECT sum(CASE WHEN e.status = 'queued' AND j.status IN ('queued', 'running') THEN 1 ELSE 0 END) AS queued,"
                " sum(CASE WHEN e.status = 'running' THEN 1 ELSE 0 END) AS running"
                " FROM episodes e JOIN jobs j ON j.job_id = e.job_id WHERE e.status IN ('queued', 'running')"
            )
        return {k: int((row or {}).get(k) or 0) for k in ("queued", "running")}

    # -- leases -------------------------------------------------------------------
    def claim(self, worker: str, lease_s: float) -> Claim | None:
        """The next queued attempt (higher job priority first, then older jobs)."""
        token = uuid.uuid4().hex
        with self._tx() as tx:
            row = tx.one(
                "SELECT e.job_id, e.episode_id, e.task_id, e.attempt FROM episodes e JOIN jobs j ON j.job_id = e.job_id"
                " WHERE e.status = 'queued' AND j.status IN ('queued', 'running')"
                " ORDER BY j.priority DESC, j.created_at, e.job_id, e.seq, e.attempt LIMIT 1" + self.CLAIM_LOCK
            )  # fmt: skip
            if row is None:
                return None
            tx.run(
                f"UPDATE episodes SET status = 'running', worker = ?, lease_token = ?, heartbeat = {self.NOW},"
                f" lease_expires = {self.NOW} + ?, started_at = ?"
                " WHERE job_id = ? AND episode_id = ? AND attempt = ?",
                worker, token, lease_s, now_iso(), row["job_id"], row["episode_id"], row["attempt"],
            )  # fmt: skip
            job = tx.one(
                "UPDATE jobs SET status = 'running', started_at = coalesce(started_at, ?) WHERE job_id = ?"
                " RETURNING spec_json",
                now_iso(), row["job_id"],
            )  # fmt: skip
        assert job is not None
        return Claim(**row, token=token, spec_json=job["spec_json"])

    def renew(self, tokens: list[str], lease_s: float) -> set[str]:
        """Extend the leases of `tokens`; returns those still held (the others were lost)."""
        held = set()
        with self._tx() as tx:
            for t in tokens:
                if tx.run(
                    f"UPDATE episodes SET heartbeat = {self.NOW}, lease_expires = {self.NOW} + ?"
                    " WHERE lease_token = ? AND status = 'running'",
                    lease_s, t,
                ):  # fmt: skip
                    held.add(t)
        return held

    def finish(
        self, claim: Claim, status: str, trajectory_id: str | None, error: str | None, retries: int
    ) -> bool:
        """End an attempt if `claim` still holds its lease (False: lost, nothing changed).
        A failure queues a new attempt while the episode's failures (lost attempts not
        counted) are at most `retries`."""
        with self._tx() as tx:
            if not tx.run(
                "UPDATE episodes SET status = ?, trajectory_id = ?, error = ?, ended_at = ?"
                " WHERE job_id = ? AND episode_id = ? AND attempt = ? AND lease_token = ? AND status = 'running'",
                status, trajectory_id, error, now_iso(), claim.job_id, claim.episode_id, claim.attempt, claim.token,
            ):  # fmt: skip
                return False
            if status == "failed":
                failures = tx.one(
                    "SELECT count(*) AS n FROM episodes WHERE job_id = ? AND episode_id = ? AND status = 'failed' AND lost = 0",
                    claim.job_id, claim.episode_id,
                )["n"]  # fmt: skip
                if failures <= retries:
                    self._next_attempt(tx, claim.job_id, claim.episode_id)
            self._refresh(tx, claim.job_id)
        return True

    def release(self, claim: Claim) -> bool:
        """Give an attempt back unrun (the worker is stopping): queued again, same attempt."""
        with self._tx() as tx:
            n = tx.run(
                "UPDATE episodes SET status = CASE WHEN (SELECT status FROM jobs WHERE job_id = ?) = 'cancelled'"
                " THEN 'cancelled' ELSE 'queued' END,"
                " error = CASE WHEN (SELECT status FROM jobs WHERE job_id = ?) = 'cancelled'"
                " THEN ? ELSE error END, worker = NULL, lease_token = NULL, heartbeat = NULL,"
                " lease_expires = NULL, started_at = NULL"
                " WHERE job_id = ? AND episode_id = ? AND attempt = ? AND lease_token = ? AND status = 'running'",
                claim.job_id, claim.job_id, CANCELLED, claim.job_id, claim.episode_id, claim.attempt,
                claim.token,
            )  # fmt: skip
            self._refresh(tx, claim.job_id)
        return bool(n)

    def running(self) -> list[Lease]:
        with self._tx(write=False) as tx:
            rows = tx.all(
                f"SELECT e.job_id, e.episode_id, e.attempt, e.lease_token AS token, e.worker,"
                f" CASE WHEN e.lease_expires < {self.NOW} THEN 1 ELSE 0 END AS expired, w.host, w.pid, w.process_start"
                " FROM episodes e LEFT JOIN workers w ON w.worker = e.worker WHERE e.status = 'running'"
            )  # fmt: skip
        return [Lease(**{**r, "expired": bool(r["expired"])}) for r in rows]

    def expire(self, lease: Lease, reason: str, only_if_expired: bool = True) -> Expired | None:
        """End a lost attempt (`failed`, `lost = 1`) and queue a new one unless the episode
        was lost `MAX_LOST` times or its job is cancelled, which its error then says
        (`LOST_LAST`, `JOB_CANCELLED`); None when the lease was renewed or ended meanwhile."""
        cond = f" AND lease_expires < {self.NOW}" if only_if_expired else ""
        with self._tx() as tx:
            before = tx.one(
                "SELECT count(*) AS n FROM episodes WHERE job_id = ? AND episode_id = ? AND lost = 1",
                lease.job_id, lease.episode_id,
            )["n"]  # fmt: skip
            job = tx.one("SELECT status FROM jobs WHERE job_id = ?", lease.job_id)
            why = (
                LOST_LAST if before + 1 >= MAX_LOST
                else JOB_CANCELLED if job is not None and job["status"] == "cancelled"
                else ""
            )  # fmt: skip
            if not tx.run(
                "UPDATE episodes SET status = 'failed', lost = 1, error = ?, ended_at = ?"
                " WHERE job_id = ? AND episode_id = ? AND attempt = ? AND lease_token = ? AND status = 'running'" + cond,
                LOST_PREFIX + reason + (f"; {why}" if why else ""), now_iso(), lease.job_id,
                lease.episode_id, lease.attempt, lease.token,
            ):  # fmt: skip
                return None
            if not why and not self._next_attempt(tx, lease.job_id, lease.episode_id):
                why = JOB_CANCELLED  # cancelled after the status was read (PostgreSQL)
                tx.run(
                    "UPDATE episodes SET error = ? WHERE job_id = ? AND episode_id = ? AND attempt = ?",
                    f"{LOST_PREFIX}{reason}; {why}", lease.job_id, lease.episode_id, lease.attempt,
                )  # fmt: skip
            self._refresh(tx, lease.job_id)
        return Expired(queued=not why, why=why)

    def attempt_state(self, job_id: str, episode_id: str, attempt: int) -> dict | None:
        with self._tx(write=False) as tx:
            return tx.one(
                "SELECT status, lost, trajectory_id, worker, error FROM episodes WHERE job_id = ? AND episode_id = ? AND attempt = ?",
                job_id, episode_id, attempt,
            )  # fmt: skip

    def _next_attempt(self, tx: Tx, job_id: str, episode_id: str) -> int:
        """Queue the episode's next attempt unless its job is cancelled: rows inserted."""
        return tx.run(
            "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status, seq)"
            " SELECT job_id, episode_id, task_id, max(attempt) + 1, 'queued', max(seq) FROM episodes"
            " WHERE job_id = ? AND episode_id = ? AND (SELECT status FROM jobs WHERE job_id = ?) != 'cancelled'"
            " GROUP BY job_id, episode_id, task_id",
            job_id, episode_id, job_id,
        )  # fmt: skip

    def _refresh(self, tx: Tx, job_id: str) -> None:
        """Job counters and status from its episodes' last attempts. The job row is locked
        first, so concurrent finishes of one job (PostgreSQL) read each other's results."""
        current = tx.one(
            "SELECT status, finished_at FROM jobs WHERE job_id = ?" + self.ROW_LOCK, job_id
        )
        rows = tx.all(
            f"SELECT e.status FROM episodes e JOIN ({_LAST}) m ON e.episode_id = m.episode_id"
            " AND e.attempt = m.a WHERE e.job_id = ?",
            job_id, job_id,
        )  # fmt: skip
        states = [r["status"] for r in rows]
        ok, bad = states.count("succeeded"), states.count("failed")
        if current["status"] == "cancelled":
            status = "cancelled"
        elif all(s in FINAL for s in states):
            status = "succeeded" if bad == 0 else ("failed" if ok == 0 else "partial")
        else:
            status = "running" if any(s == "running" or s in FINAL for s in states) else "queued"
        # a job that had ended keeps when it ended (a retry that reopens it clears it first)
        # a cancelled one keeps when it was cancelled (an episode still running then
        # ended later: it cleared it)
        ended = status in ("succeeded", "failed", "partial")
        done = (current["finished_at"] or now_iso()) if ended else None
        if status == "cancelled":
            done = current["finished_at"]
        tx.run(
            "UPDATE jobs SET succeeded = ?, failed = ?, status = ?, finished_at = ? WHERE job_id = ?",
            ok, bad, status, done, job_id,
        )  # fmt: skip

    # -- workers ------------------------------------------------------------------
    def register_worker(
        self, worker: str, host: str, pid: int, start: int | None, lease_s: float | None = None
    ) -> None:
        """`lease_s`: the worker's lease, by which every observer judges it silent (one
        with another lease took a live worker with a longer one for dead)."""
        with self._tx() as tx:
            tx.run(
                f"INSERT INTO workers (worker, host, pid, process_start, status, started_at, heartbeat, lease)"
                f" VALUES (?, ?, ?, ?, 'running', ?, {self.NOW}, ?)",
                worker, host, pid, start, now_iso(), lease_s,
            )  # fmt: skip

    def worker_beat(self, worker: str) -> None:
        with self._tx() as tx:
            tx.run(f"UPDATE workers SET heartbeat = {self.NOW} WHERE worker = ?", worker)

    def worker_stopped(self, worker: str, status: str) -> None:
        with self._tx() as tx:
            tx.run(
                "UPDATE workers SET status = ?, stopped_at = ? WHERE worker = ?",
                status, now_iso(), worker,
            )  # fmt: skip

    def workers(self, lease_s: float) -> list[dict[str, Any]]:
        """Workers with `gone` set when stopped or silent for longer than their own lease
        (`lease_s` for one registered without it, by an older version)."""
        with self._tx(write=False) as tx:
            return tx.all(
                f"SELECT worker, host, pid, process_start, status, started_at, stopped_at, lease,"
                f" CASE WHEN stopped_at IS NOT NULL OR heartbeat < {self.NOW} - COALESCE(lease, ?)"
                " THEN 1 ELSE 0 END AS gone FROM workers ORDER BY started_at",
                lease_s,
            )  # fmt: skip

    # -- schedules ----------------------------------------------------------------
    def save_schedule(self, spec: JobSpec, next_due: float) -> float:
        """Register (or replace) the schedule of a job file, keyed by the job's name;
        returns its next due time. Submitted again, it keeps its last run (what `overlap:
        skip` waits for) and, with the same `cron`/`every`, its next due time: replacing
        them made an edited file's schedule forget a run still going, and `every` run
        again at once."""
        s = spec.options.schedule
        assert s is not None
        with self._tx() as tx:
            [old] = tx.all(
                "SELECT cron, every, next_due, last_job_id, last_run_at FROM schedules"
                " WHERE schedule_id = ?", spec.name,
            ) or [None]  # fmt: skip
            last = (old["last_job_id"], old["last_run_at"]) if old else (None, None)
            if old and (old["cron"], old["every"]) == (s.cron, s.every):
                next_due = old["next_due"]
            tx.run("DELETE FROM schedules WHERE schedule_id = ?", spec.name)
            tx.run(
                "INSERT INTO schedules (schedule_id, spec_json, cron, every, missed, next_due,"
                " last_job_id, last_run_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                spec.name, spec.to_json(), s.cron, s.every, s.missed, next_due, *last, now_iso(),
            )  # fmt: skip
        return next_due

    def schedules(self) -> list[dict[str, Any]]:
        with self._tx(write=False) as tx:
            return tx.all("SELECT * FROM schedules ORDER BY next_due")

    def remove_schedule(self, schedule_id: str) -> bool:
        with self._tx() as tx:
            return bool(tx.run("DELETE FROM schedules WHERE schedule_id = ?", schedule_id))

    def advance_schedule(
        self, schedule_id: str, due: float, next_due: float, spec: JobSpec | None, at: str
    ) -> str | None:
        """Move a schedule from `due` to `next_due` and, with `spec`, enqueue a run, in one
        transaction; nothing happens when another scheduler moved it first (returns None)."""
        with self._tx() as tx:
            if not tx.run(
                "UPDATE schedules SET next_due = ? WHERE schedule_id = ? AND next_due = ?",
                next_due, schedule_id, due,
            ):  # fmt: skip
                return None
            if spec is None:
                return ""
            job_id = self._insert_job(tx, spec, schedule_id)
            tx.run(
                "UPDATE schedules SET last_job_id = ?, last_run_at = ? WHERE schedule_id = ?",
                job_id, at, schedule_id,
            )  # fmt: skip
            return job_id


CANCELLED = "cancelled by `worldtrace jobs cancel` before it ran"
"""The error of an attempt the job's cancel kept from running."""
_LAST = "SELECT episode_id, max(attempt) AS a FROM episodes WHERE job_id = ? GROUP BY episode_id"
"""Each episode's last attempt (binds the job id)."""


class SQLiteJobStore(SQLJobStore):
    """The embedded store: one SQLite file in WAL mode (readers never block the writer);
    every write is a `BEGIN IMMEDIATE` transaction, so claims never race."""

    NOW = "((julianday('now') - 2440587.5) * 86400.0)"

    def __init__(self, path: str | Path, read_only: bool = False):
        """`read_only`: for commands that only look (`jobs list`, `jobs show`): the file
        is neither made nor migrated, and is opened so that nothing can change it (a
        store on a read-only mount lists its jobs); no file reads as no jobs."""
        self.path = Path(path)
        self.url = str(self.path)
        self.read_only = read_only
        if read_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._create()
        except sqlite3.OperationalError as exc:  # SQLite says "unable to open database file"
            raise _unwritable(self.path) or _advised(exc, self.path) from exc
        except sqlite3.DatabaseError as exc:  # not a database, or damaged
            raise _advised(exc, self.path) from exc

    def _create(self) -> None:
        """The tables, made or migrated."""
        c = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            c.execute("PRAGMA journal_mode=WAL")
            c.executescript(SCHEMA)
            for table, cols in ADDED_COLUMNS.items():
                have = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                for name, decl in cols.items():
                    if name not in have:
                        c.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
        finally:
            c.close()

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Tx]:
        """A transaction; a job store that is locked, damaged or no job store says what
        to do about it (`_advised`)."""
        try:
            with self._tx_plain(write) as tx:
                yield tx
        except sqlite3.DatabaseError as exc:
            new = _advised(exc, self.path)
            if new is exc:
                raise
            raise new from exc

    @contextmanager
    def _tx_plain(self, write: bool) -> Iterator[Tx]:
        c = self._connect()
        try:
            c.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield Tx(c.cursor(), str)
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:  # a failed COMMIT (a full disk) rolled back already:
                    c.execute("ROLLBACK")  # ROLLBACK then hid its error behind its own
                raise
        finally:
            c.close()

    def _connect(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.path, timeout=30, isolation_level=None)
        if not self.path.exists():  # no job store yet: its tables, empty
            c = sqlite3.connect(":memory:", isolation_level=None)
            c.executescript(SCHEMA)
            return c
        c = connect_read_only(self.path, timeout=30, isolation_level=None)
        try:
            _as_current_layout(c)
        except BaseException:
            c.close()
            raise
        return c


def _as_current_layout(c: sqlite3.Connection) -> None:
    """Let a read-only connection to a job store of an older layout (without the
    `ADDED_COLUMNS`, or the `workers` and `schedules` tables) read as the current one:
    temporary views with the added columns at their defaults (what the migration of a
    writing command gives the old rows), and empty temporary tables, which shadow the
    file's own for this connection alone. The file is not changed: a command that only
    looks must not migrate it (a store on a read-only mount, an older worldtrace still
    using it), and `jobs list` failed on such a store with `no such column: priority`.
    A file without the `jobs` and `episodes` tables is left as it is (no job store)."""
    have = {
        r[0]: {x[1] for x in c.execute(f"PRAGMA main.table_info({r[0]})")}
        for r in c.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
    }
    if not {"jobs", "episodes"} <= set(have):
        return
    stmts = []
    for table, cols in ADDED_COLUMNS.items():
        missing = [n for n in cols if table in have and n not in have[table]]
        if missing:
            added = ", ".join(f"{_default(cols[n])} AS {n}" for n in missing)
            stmts.append(f"CREATE TEMP VIEW {table} AS SELECT *, {added} FROM main.{table}")
    for table, create in _TABLES.items():
        if table not in have:
            stmts.append(create.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))
    if not stmts:
        return
    c.execute("PRAGMA query_only = OFF")  # temporary objects only: the file is not touched
    try:
        for stmt in stmts:
            c.execute(stmt)
    finally:
        c.execute("PRAGMA query_only = ON")


def _default(decl: str) -> str:
    """The value an added column's declaration gives existing rows."""
    m = re.search(r"\bDEFAULT\s+(\S+)", decl)
    return m.group(1) if m else "NULL"


_TABLES = {
    stmt.split("EXISTS", 1)[1].split("(", 1)[0].strip(): stmt.strip()
    for stmt in SCHEMA.split(";")
    if stmt.strip().startswith("CREATE TABLE")
}
"""The tables of `SCHEMA` by name, each with its CREATE statement."""


def _advised(exc: sqlite3.DatabaseError, path: Path) -> sqlite3.DatabaseError:
    """`exc` (of its own class) with what to do about the job store at `path` after
    SQLite's words (`views.job_store_fix`): a locked one is waited for, a damaged one
    moved aside. SQLite's "file is not a database" or "database is locked" alone named
    no way on. `exc` itself when there is nothing to add."""
    from worldtrace.schemas.views import job_store_fix

    text = str(exc)
    fix = job_store_fix(path, text)
    if fix is None or fix in text:
        return exc
    new = type(exc)(f"{text}; {fix}")
    for name in ("sqlite_errorcode", "sqlite_errorname"):
        if hasattr(exc, name):
            setattr(new, name, getattr(exc, name))
    return new


def _unwritable(path: Path) -> sqlite3.OperationalError | None:
    """`DIR is not writable (Read-only file system)` when the job store's directory is
    not (SQLite's own words, "unable to open database file", name no reason), or None."""
    parent = path.absolute().parent
    if os.access(parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK)):
        return None
    read_only = os.statvfs(parent).f_flag & os.ST_RDONLY
    why = os.strerror(errno.EROFS if read_only else errno.EACCES)
    return sqlite3.OperationalError(f"{parent} is not writable ({why})")
