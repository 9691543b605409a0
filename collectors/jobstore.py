"""The job store: jobs, the attempts of their episodes under leases, workers, schedules.

`JobStore` is the interface workers, the scheduler and the CLI use; `open_job_store`
picks an implementation from a path or URL. Both implementations share the SQL of
`jobstore_sql.SQLJobStore`: `SQLiteJobStore` (the embedded default, `jobs.db` in WAL
mode) and `PostgresJobStore` (`jobstore_pg.py`, for workers on several hosts).

Leases: a claim marks one queued attempt `running` with a random lease token and an
expiry (`lease_expires`, in the database's clock, so hosts need not agree on the time).
The owner renews it every heartbeat; finishing or releasing an attempt requires the
token, so a worker that lost its lease cannot overwrite the new owner's result. An
attempt whose lease expired (or whose worker process is known dead) ends `failed` with
`lost = 1` and the error `worker lost: ...`; a new attempt is queued without consuming
the job's `retries`, at most `MAX_LOST` times per episode (a poison episode that kills
its worker cannot loop forever): that last one's error ends `; lost 3 times: not queued
again` (`LOST_LAST`).

Addresses are shown with their password masked (`shown_address`): error lines go to logs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .jobspec import JobSpec

MAX_LOST = 3
"""Lost attempts (worker died or lost its lease) after which an episode is not requeued."""
FINAL = ("succeeded", "failed", "cancelled")
"""Statuses an attempt ends in."""
LOST_PREFIX = "worker lost: "
"""Start of the error of an attempt whose worker died or lost its lease."""
LOST_LAST = f"lost {MAX_LOST} times: not queued again"
"""Said after the reason of an episode's last lost attempt (`JobStore.expire`)."""
JOB_CANCELLED = "its job is cancelled: not queued again"
"""Said after the reason of a lost attempt of a cancelled job (`JobStore.expire`)."""
JOBS_ENV = "WORLDTRACE_JOBS"
"""The variable naming the job store the commands use (`--jobs`)."""


@dataclass(frozen=True)
class Expired:
    """A lost attempt `JobStore.expire` ended: `queued` again under the next attempt
    number, or not, and then `why` not (`LOST_LAST`, `JOB_CANCELLED`). A worker said
    `requeued` of an episode lost its third time, which was not."""

    queued: bool
    why: str = ""


@dataclass(frozen=True)
class Claim:
    """One attempt a worker holds; `token` proves ownership of the lease."""

    job_id: str
    episode_id: str
    task_id: str
    attempt: int
    token: str
    spec_json: str


@dataclass(frozen=True)
class Lease:
    """A running attempt as other workers see it (with its worker's host and pid)."""

    job_id: str
    episode_id: str
    attempt: int
    token: str
    worker: str
    expired: bool
    host: str | None
    pid: int | None
    process_start: int | None


class JobStore(Protocol):
    """What workers, the scheduler and the CLI need from a job store."""

    def submit(self, spec: JobSpec, schedule_id: str | None = None) -> str: ...
    def jobs(self) -> list[dict[str, Any]]: ...
    def job(self, job_id: str) -> dict[str, Any] | None: ...
    def cancel(self, job_id: str) -> int: ...
    def retry(self, job_id: str) -> int: ...
    def pending(self) -> dict[str, int]: ...
    def claim(self, worker: str, lease_s: float) -> Claim | None: ...
    def renew(self, tokens: list[str], lease_s: float) -> set[str]: ...
    def finish(
        self, claim: Claim, status: str, trajectory_id: str | None, error: str | None, retries: int
    ) -> bool: ...
    def release(self, claim: Claim) -> bool: ...
    def running(self) -> list[Lease]: ...
    def expire(self, lease: Lease, reason: str, only_if_expired: bool) -> Expired | None: ...
    def attempt_state(self, job_id: str, episode_id: str, attempt: int) -> dict | None: ...
    def register_worker(
        self, worker: str, host: str, pid: int, start: int | None, lease_s: float | None = None
    ) -> None: ...
    def worker_beat(self, worker: str) -> None: ...
    def worker_stopped(self, worker: str, status: str) -> None: ...
    def workers(self, lease_s: float) -> list[dict[str, Any]]: ...
    def save_schedule(self, spec: JobSpec, next_due: float) -> float: ...
    def schedules(self) -> list[dict[str, Any]]: ...
    def remove_schedule(self, schedule_id: str) -> bool: ...
    def advance_schedule(
        self, schedule_id: str, due: float, next_due: float, spec: JobSpec | None, at: str
    ) -> str | None: ...


def open_job_store(url: str | Path, read_only: bool = False) -> JobStore:
    """A job store from a path (SQLite) or a `postgresql://` URL. `read_only`: a command
    that only looks (`SQLiteJobStore`; PostgreSQL's server holds its own rights)."""
    path = sqlite_path(url)
    if path is None:
        from .jobstore_pg import PostgresJobStore

        return PostgresJobStore(postgres_url(url))
    from .jobstore_sql import SQLiteJobStore

    return SQLiteJobStore(path, read_only=read_only)


def sqlite_path(url: str | Path) -> Path | None:
    """The SQLite file a job store address names, or None for a PostgreSQL URL: the one
    reading of an address, for `open_job_store` and for the CLI's check that a command
    which only reads names a store that exists (`sqlite://x.db` and `Sqlite:///x.db`
    opened `x.db` and escaped that check, which looked for `sqlite:///` alone).
    `sqlite:///PATH` (three slashes: PATH relative; four: absolute), `sqlite://PATH`,
    or a path; a ValueError for another scheme (`postgresq:/` was a typo that made a
    SQLite file named after the URL) or a `sqlite://` naming no file."""
    text = str(url)
    m = ADDRESS.match(text)
    if m is None:
        return Path(text)
    scheme, rest = m.group(1).lower(), text[m.end() :]
    if scheme.split("+")[0] in ("postgresql", "postgres"):  # SQLAlchemy's `+psycopg` too
        return None
    if scheme != "sqlite":
        raise ValueError(
            f"{scheme}:// is no job store address (`postgresql://USER@HOST:PORT/DB`, "
            "`sqlite:///PATH` or a path)"
        )
    path = rest.removeprefix("/")  # `sqlite:///PATH`: three slashes, PATH relative
    if not path:
        raise ValueError(f"{text} names no file (`sqlite:///PATH`)")
    return Path(path)


def other_job_store(jobs_db: Path) -> str | None:
    """The address `$WORLDTRACE_JOBS` names when it is not `jobs_db` (a store's own job
    store: the same path, or the same file by another), else None; one that is no job
    store address is returned too (it is not that file either). `doctor` checks it, and
    `stats`, whose views read jobs.db alone, says it is not read."""
    url = os.environ.get(JOBS_ENV)
    if not url:
        return None
    try:
        path = sqlite_path(url)
    except ValueError:
        return url
    if path is not None and (
        path.absolute() == jobs_db.absolute()
        or (path.exists() and jobs_db.exists() and path.samefile(jobs_db))
    ):
        return None
    return url


def postgres_url(url: str | Path) -> str:
    """A PostgreSQL address as psycopg takes it (`postgres://`, `postgresql+psycopg://`
    and an uppercase scheme read as `postgresql://`)."""
    text = str(url)
    m = ADDRESS.match(text)
    assert m is not None
    return f"postgresql://{text[m.end() :]}"


ADDRESS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
"""A job store address with a scheme (`postgresql://`, `sqlite:///PATH`): anything else
with one is refused, never taken for a path."""


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*:)[^/?#]*@")
"""A URL's user-info password: `postgresql://USER:PASSWORD@HOST`."""
_PASSWORD_KV = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)
"""A password given as `password=...`: a URL's query parameter, or key=value conninfo."""
MASK = "***"


def shown_address(url: str | Path) -> str:
    """A job store address as it may be printed: its password, if any, as `***` (the
    user-info password of a `postgresql://` URL, `?password=`, conninfo's `password=`).
    Every job store error printed the whole URL, password included, into logs."""
    text = _URL_PASSWORD.sub(lambda u: f"{u.group(1)}{MASK}@", str(url))
    return _PASSWORD_KV.sub(lambda k: k.group(1) + MASK, text)
