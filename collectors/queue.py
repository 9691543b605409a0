"""The job store (`jobs.db`, SQLite) and the worker that drains it.

`submit` expands a job file into episode rows; workers claim one queued episode at a
time in a write transaction (so two workers never run the same episode), run it, write
the trajectory, and record the outcome. An environment failure queues a new attempt
until the job's `retries` are spent; a worker that died leaves episodes `running` with
an old heartbeat, and the next worker puts them back in the queue (resume). Episodes
are never dropped: every attempt ends as succeeded, failed or cancelled, with its error.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from worldtrace.schemas import ShardWriter

from .episode import attempt_episode
from .jobs import JOURNALS
from .jobspec import JobSpec
from .recorder import recover

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_json TEXT NOT NULL, status TEXT NOT NULL,
    episodes INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    job_id TEXT NOT NULL, episode_id TEXT NOT NULL, task_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, error TEXT, trajectory_id TEXT, worker TEXT, heartbeat REAL,
    started_at TEXT, ended_at TEXT,
    PRIMARY KEY (job_id, episode_id, attempt)
);
CREATE INDEX IF NOT EXISTS episodes_status ON episodes (status);
"""
FINAL = ("succeeded", "failed", "cancelled")


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


class JobStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._conn() as c:
            c.executescript(SCHEMA)

    @contextmanager
    def _conn(self):
        c = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        c.row_factory = sqlite3.Row
        c.execute("PRAGMA journal_mode=WAL")
        try:
            yield c
        finally:
            c.close()

    @contextmanager
    def _tx(self):
        with self._conn() as c:
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    # -- submitting and inspecting ------------------------------------------------
    def submit(self, spec: JobSpec) -> str:
        job_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        rows = [(job_id, ep.episode_id, ep.task.id) for ep in spec.expand()]
        with self._tx() as c:
            c.execute(
                "INSERT INTO jobs (job_id, name, spec_json, status, episodes, created_at) VALUES (?, ?, ?, 'queued', ?, ?)",
                (job_id, spec.name, spec.to_json(), len(rows), now()),
            )
            c.executemany(
                "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status) VALUES (?, ?, ?, 1, 'queued')",
                rows,
            )
        return job_id

    def jobs(self) -> list[dict[str, Any]]:
        with self._conn() as c:
            return [
                dict(r)
                for r in c.execute(
                    "SELECT job_id, name, status, episodes, succeeded, failed, created_at, finished_at FROM jobs ORDER BY created_at"
                )
            ]

    def job(self, job_id: str) -> dict[str, Any] | None:
        with self._conn() as c:
            row = c.execute(
                "SELECT * FROM jobs WHERE job_id = ? OR job_id LIKE ? || '%'", (job_id, job_id)
            ).fetchall()
            if len(row) != 1:
                return None
            job = dict(row[0])
            job["episode_rows"] = [
                dict(r)
                for r in c.execute(
                    "SELECT episode_id, attempt, status, error, trajectory_id, worker, started_at, ended_at FROM episodes WHERE job_id = ? ORDER BY episode_id, attempt",
                    (job["job_id"],),
                )
            ]
        return job

    def cancel(self, job_id: str) -> int:
        with self._tx() as c:
            n = c.execute(
                "UPDATE episodes SET status = 'cancelled', ended_at = ? WHERE job_id = ? AND status = 'queued'",
                (now(), job_id),
            ).rowcount
            c.execute(
                "UPDATE jobs SET status = 'cancelled', finished_at = ? WHERE job_id = ? AND status NOT IN ('succeeded', 'failed')",
                (now(), job_id),
            )
        return n

    def retry(self, job_id: str) -> int:
        """Queue a new attempt of every episode whose last attempt failed or was cancelled."""
        with self._tx() as c:
            last = c.execute(
                """SELECT episode_id, task_id, max(attempt) AS a, status FROM episodes WHERE job_id = ?
                   GROUP BY episode_id HAVING status IN ('failed', 'cancelled')""",
                (job_id,),
            ).fetchall()
            c.executemany(
                "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status) VALUES (?, ?, ?, ?, 'queued')",
                [(job_id, r["episode_id"], r["task_id"], r["a"] + 1) for r in last],
            )
            if last:
                c.execute(
                    "UPDATE jobs SET status = 'queued', finished_at = NULL WHERE job_id = ?",
                    (job_id,),
                )
        self._refresh(job_id)
        return len(last)

    # -- workers ------------------------------------------------------------------
    def requeue_stale(self, lease_s: float) -> int:
        """Episodes of workers that stopped heart-beating go back to the queue."""
        with self._tx() as c:
            return c.execute(
                "UPDATE episodes SET status = 'queued', worker = NULL WHERE status = 'running' AND heartbeat < ?",
                (time.time() - lease_s,),
            ).rowcount

    def claim(self, worker: str) -> dict[str, Any] | None:
        with self._tx() as c:
            row = c.execute(
                """SELECT e.job_id, e.episode_id, e.task_id, e.attempt, j.spec_json FROM episodes e JOIN jobs j USING (job_id)
                   WHERE e.status = 'queued' AND j.status IN ('queued', 'running') ORDER BY j.created_at, e.episode_id, e.attempt LIMIT 1"""
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "UPDATE episodes SET status = 'running', worker = ?, heartbeat = ?, started_at = ? WHERE job_id = ? AND episode_id = ? AND attempt = ?",
                (worker, time.time(), now(), row["job_id"], row["episode_id"], row["attempt"]),
            )
            c.execute(
                "UPDATE jobs SET status = 'running', started_at = coalesce(started_at, ?) WHERE job_id = ?",
                (now(), row["job_id"]),
            )
        return dict(row)

    def heartbeat(self, worker: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE episodes SET heartbeat = ? WHERE worker = ? AND status = 'running'",
                (time.time(), worker),
            )

    def finish(
        self,
        claim: dict[str, Any],
        status: str,
        trajectory_id: str | None,
        error: str | None,
        retries: int,
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE episodes SET status = ?, trajectory_id = ?, error = ?, ended_at = ? WHERE job_id = ? AND episode_id = ? AND attempt = ?",
                (
                    status,
                    trajectory_id,
                    error,
                    now(),
                    claim["job_id"],
                    claim["episode_id"],
                    claim["attempt"],
                ),
            )
            if status == "failed" and claim["attempt"] <= retries:
                c.execute(
                    "INSERT INTO episodes (job_id, episode_id, task_id, attempt, status) VALUES (?, ?, ?, ?, 'queued')",
                    (claim["job_id"], claim["episode_id"], claim["task_id"], claim["attempt"] + 1),
                )
        self._refresh(claim["job_id"])

    def _refresh(self, job_id: str) -> None:
        """Job counters and status from its episodes' last attempts."""
        with self._tx() as c:
            rows = c.execute(
                """SELECT e.status FROM episodes e JOIN (SELECT episode_id, max(attempt) a FROM episodes WHERE job_id = ? GROUP BY episode_id) m
                   ON e.episode_id = m.episode_id AND e.attempt = m.a WHERE e.job_id = ?""",
                (job_id, job_id),
            ).fetchall()
            states = [r["status"] for r in rows]
            ok, bad = states.count("succeeded"), states.count("failed")
            current = c.execute("SELECT status FROM jobs WHERE job_id = ?", (job_id,)).fetchone()[
                "status"
            ]
            if current == "cancelled":
                status = current
            elif all(s in FINAL for s in states):
                status = "succeeded" if bad == 0 else ("failed" if ok == 0 else "partial")
            else:
                status = (
                    "running" if any(s in ("running",) or s in FINAL for s in states) else "queued"
                )
            done = now() if status in ("succeeded", "failed", "partial") else None
            c.execute(
                "UPDATE jobs SET succeeded = ?, failed = ?, status = ?, finished_at = ? WHERE job_id = ?",
                (ok, bad, status, done, job_id),
            )


class Worker:
    """Runs queued episodes with `concurrency` threads, each with its own sandboxes."""

    def __init__(
        self, store: JobStore, raw_dir: str | Path, concurrency: int = 1, lease_s: float = 120.0
    ):
        self.store = store
        self.raw_dir = Path(raw_dir)
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.name = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self.done = 0

    def run(self, forever: bool = False, poll_s: float = 2.0) -> int:
        """Drain the queue (or keep polling with `forever`); returns episodes run."""
        self.store.requeue_stale(self.lease_s)
        self._recover_journals()
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(stop,), daemon=True)
        beat.start()
        threads = [
            threading.Thread(target=self._loop, args=(f"{self.name}-{i}", forever, poll_s))
            for i in range(self.concurrency)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        return self.done

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.lease_s / 4):
            for i in range(self.concurrency):
                self.store.heartbeat(f"{self.name}-{i}")

    def _recover_journals(self) -> None:
        for jdir in self.raw_dir.glob(f"collect/*/{JOURNALS}/*"):
            found = recover(jdir)
            if found:
                with ShardWriter(jdir.parent.parent, prefix="recovered") as w:
                    w.write([t for _, t in found])
                for p, _ in found:
                    p.unlink()

    def _loop(self, worker: str, forever: bool, poll_s: float) -> None:
        sandboxes: dict[str, Any] = {}
        try:
            while True:
                claim = self.store.claim(worker)
                if claim is None:
                    if not forever:
                        return
                    time.sleep(poll_s)  # an idle poll of the queue, not synchronisation
                    continue
                spec = JobSpec.from_dict(json.loads(claim["spec_json"]))
                sandbox = sandboxes.get(claim["job_id"]) or sandboxes.setdefault(
                    claim["job_id"], spec.build_sandbox()
                )
                self._run_one(worker, claim, spec, sandbox)
        finally:
            for s in sandboxes.values():
                s.close()

    def _run_one(self, worker: str, claim: dict[str, Any], spec: JobSpec, sandbox) -> None:
        out = self.raw_dir / "collect" / claim["job_id"]
        journals = out / JOURNALS / worker
        try:
            t = attempt_episode(
                spec,
                spec.episode(claim["episode_id"]),
                sandbox,
                journals,
                claim["job_id"],
                claim["attempt"],
                self.raw_dir,
            )
        except Exception as exc:  # a policy or config error: recorded, never lost
            self.store.finish(claim, "failed", None, f"{type(exc).__name__}: {exc}", 0)
            return
        with ShardWriter(out, prefix=spec.name) as w:
            w.write(t)
        for p in journals.glob("*"):
            p.unlink()  # its trajectory is published
        failed = t.outcome.status == "error"
        self.store.finish(
            claim,
            "failed" if failed else "succeeded",
            t.trajectory_id,
            t.outcome.error,
            spec.retries if failed else 0,
        )
        self.done += 1
