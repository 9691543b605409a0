"""What `worldtrace gc` removes from a store, and why each item is safe to remove.

Writers leave hidden names behind only when they stop mid-way: `.tmp-*` files
(ShardWriter, atomic writes, Megatron writers), `.run-*` directories of `process` runs
under processed/, `.staging-*` directories of exports, `.old-*` directories of an
interrupted swap, and episode journals. Names made by `schemas.tempfiles.temp_name`
(ShardWriter's and atomic writes' `.tmp-*`, `.run-*`, `.staging-*`) carry the writer's
pid and host (`.tmp-<pid>-<host>-<random>-name`); Megatron's `.tmp-NAME.bin`/`.idx`,
`.old-*` and journals carry none, and a pid names a process only on the host that
wrote it (a store on a shared disk has writers elsewhere). So gc does not read the pid:
a live writer is told apart by two tests that must both pass before anything is
removed: nothing in the item was modified for `min_age` seconds, and no process on this
machine has a file in it open (read from /proc; as a non-root user only that user's
processes are visible). A journal is removed only when the trajectory it holds is
already in a published raw shard; an `.old-*` directory only when the directory it was
swapped out of exists again. What is kept is listed too, saying why (too recent, open
in a process, the only copy...), as what is removed is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from worldtrace.schemas import Store
from worldtrace.schemas import fields as F
from worldtrace.schemas.store import TMP_PREFIX, TMP_STALE_SECONDS, read_parquet, shard_files
from worldtrace.schemas.tempfiles import held_exclusively

RUN_PREFIX, STAGING_PREFIX, OLD_PREFIX = ".run-", ".staging-", ".old-"
LEFTOVER_PREFIXES = (TMP_PREFIX, RUN_PREFIX, STAGING_PREFIX, OLD_PREFIX)
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Item:
    """One thing gc found: removable (`remove`) or kept with the reason why."""

    kind: str
    """temp, run, staging, old, journal, export, container or volume."""
    target: str
    """A path, or a container or volume name."""
    size: int | None
    """Bytes on disk (None for containers)."""
    why: str
    remove: bool = True
    """False: reported but kept (e.g. a journal whose trajectory is not published yet)."""
    job: str | None = None
    """A journal's job, when its run stopped before publishing it (a resume publishes it)."""
    resume: str | None = None
    """For such a journal: the command that publishes it (`doctor` prints it)."""


def find(
    store: Store,
    *,
    min_age_s: float = TMP_STALE_SECONDS,
    exports_older_than_s: float | None = None,
    now: float | None = None,
) -> list[Item]:
    """Every leftover under the store (nothing is removed)."""
    now = time.time() if now is None else now
    if not store.root.is_dir():
        return []
    open_paths = _open_paths(store.root)
    items: list[Item] = []

    def idle(path: Path, kind: str, what: str, gone: str = "") -> Item:
        """`path` (`what`: what it is; `gone`: why it is garbage once no writer owns it),
        removable when no live writer can own it, else kept saying why: a kept item is
        listed too (gc promises each item and why; one left out looked forgotten)."""
        age = now - _newest_mtime(path)
        if _holds(path, open_paths):
            why = f"kept: open in a running process: {what}, in use"
            return Item(kind, str(path), _size(path), why, remove=False)
        if age < 0 and min_age_s > 0:  # not "untouched for -7199s"; 0s: whatever the age
            why = (
                f"kept: {untouched(age)} (a clock out of step: this machine's, or the "
                f"writer's): {what}, perhaps still in use; gc judges it once that time has "
                "passed"
            )
            return Item(kind, str(path), _size(path), why, remove=False)
        if 0 <= age < min_age_s:
            why = (
                f"kept: {untouched(age)} (< --min-age {exact_age(min_age_s)}): "
                f"{what}, perhaps still in use"
            )
            return Item(kind, str(path), _size(path), why, remove=False)
        why = f"{what}{gone}; {untouched(age)}, open in no process"
        return Item(kind, str(path), _size(path), why)

    found = _leftovers(store.root)
    running = held_exclusively(store.processed / F.PROCESS_LOCK)  # a `process` run at work
    publishing, kept_why = _publishing(store)
    if running:
        kept_why = f"kept: {RUNNING}: part of its publish"
    for path in [p for prefix in (RUN_PREFIX, OLD_PREFIX) for p in found[prefix]]:
        if path in publishing:  # what a stopped publish still moves in: never removed
            found[RUN_PREFIX if path.name.startswith(RUN_PREFIX) else OLD_PREFIX].remove(path)
            items.append(Item("run", str(path), _size(path), kept_why, remove=False))
    stopped = " that stopped"
    for path in found[TMP_PREFIX]:
        items.append(idle(path, "temp", "temp file of a writer", stopped))
    for path in found[RUN_PREFIX]:
        if path.parent != store.processed:  # `process` runs work only there
            continue
        if running:  # its files are open only while written: the lock says it works
            why = f"kept: {RUNNING}: its work directory, in use"
            items.append(Item("run", str(path), _size(path), why, remove=False))
            continue
        items.append(idle(path, "run", "work directory of a `process` run", stopped))
    for path in found[STAGING_PREFIX]:
        if _export_running(path):
            why = "kept: the export writing it holds its output's lock: in use"
            items.append(Item("staging", str(path), _size(path), why, remove=False))
            continue
        items.append(idle(path, "staging", "staging directory of an export", stopped))
    for path in found[OLD_PREFIX]:
        items.append(_old(path, idle))
    items.extend(_journals(store, idle, open_paths))
    if exports_older_than_s is not None:
        items.extend(_old_exports(store, now, exports_older_than_s, open_paths))
    return items


RUNNING = "a running `worldtrace process` holds processed/.process.lock"
"""Why gc keeps a `process` run's work directories while one runs (`held_exclusively`):
Beam and our writers close their files between writes, so `--min-age 0s` found none open
and removed a live run's directory, which then failed (found 2026-12-06, hunt k2)."""


def _export_running(staging: Path) -> bool:
    """Whether the export `staging` is for still runs: it holds its output's lock
    (`writers.output_lock`) all the while, as an export closes its files between writes."""
    from worldtrace.pipelines.writers import LOCK_FORMAT, STAGING_NAME

    m = STAGING_NAME.match(staging.name)
    return m is not None and held_exclusively(staging.parent / LOCK_FORMAT.format(m["name"]))


def _publishing(store: Store) -> tuple[set[Path], str]:
    """The run directory and swapped-out tables a publish journal names (`schemas.publish`):
    a stopped publish is finished from them; and why they are kept. A damaged journal
    names nothing for sure: every run directory and swapped-out table of processed/ is
    kept (one may hold the only copy of a table)."""
    from worldtrace.schemas.publish import JOURNAL, pending
    from worldtrace.schemas.tempfiles import DamagedFile

    why = (
        "part of a `process` run's publish that stopped half way; `worldtrace "
        "process` (or any command reading the store) finishes it"
    )
    try:
        journal = pending(store.processed)
    except DamagedFile:
        try:
            kept = {
                p for p in store.processed.iterdir() if p.name.startswith((RUN_PREFIX, OLD_PREFIX))
            }
        except OSError:
            kept = set()
        return kept, f"kept: {store.processed / JOURNAL} is damaged and may name it"
    if journal is None:
        return set(), why
    return {
        store.processed / journal["run"],
        *(store.processed / o for o in journal["old"].values()),
    }, why


def mcp_workdirs(dry_run: bool) -> list[Item]:
    """MCP episode folders (`$TMPDIR/worldtrace-mcp-UID/N/`) whose sandbox stopped: nobody
    holds their lock. The sandbox code removes them under that lock
    (`sandboxes.mcp.sweep_workdirs`), so a live one's is never touched."""
    try:
        from worldtrace.sandboxes.mcp import sweep_workdirs
    except ImportError:  # installed without the MCP extra: it made none
        return []
    return [
        Item(MCP_WORKDIR, f["path"], f["size"], f["reason"])
        for f in sweep_workdirs(dry_run=dry_run)
    ]


MCP_WORKDIR = "mcp workdir"
SWEPT_BY_OWNER = ("container", "volume", MCP_WORKDIR)
"""Kinds removed by the code that finds them (`remove` is not called for them)."""


def _old(path: Path, idle) -> Item:
    """`.old-NAME-xxxxxxxx`: garbage once NAME is back in place; else the only copy."""
    name = path.name[len(OLD_PREFIX) :].rsplit("-", 1)[0]
    if not (path.parent / name).exists():
        why = f"the only copy of {name} (an interrupted swap); rename it back to {name}"
        return Item("old", str(path), _size(path), why, remove=False)
    return idle(path, "old", f"previous {name}", ", replaced by a finished run")


def _journals(store: Store, idle, open_paths: set[str]) -> Iterator[Item]:
    """Journals whose attempt a published raw shard already holds: the same trajectory
    (content hash) of the same episode and attempt (equal content alone is not enough:
    two attempts that failed alike hash alike). Any other journal is kept, saying what
    publishes it: the process that has it open, or the next run of its job."""
    from worldtrace.collectors.recorder import JOURNAL_SUFFIX, JournalError, journal_to_trajectory

    published: dict[Path, set[tuple]] = {}
    for path in sorted(store.raw.glob(f"collect/*/.journals/**/*{JOURNAL_SUFFIX}")):
        job_dir = next(p for p in path.parents if p.name == ".journals").parent
        if job_dir not in published:
            files = shard_files(job_dir) if job_dir.exists() else []
            published[job_dir] = {_attempt(r) for f in files for r in _rows(f)}
        try:
            t = journal_to_trajectory(path)
        except JournalError as exc:
            why = f"{str(exc).removeprefix(f'{path}: ')} (`worldtrace worker`, or `collect --resume` of its job, sets it aside)"
            yield Item("journal", str(path), _size(path), why, remove=False)
            continue
        key = _attempt({F.TRAJECTORY_ID: t.trajectory_id, F.SOURCE: vars(t.source)})
        if key in published[job_dir]:
            yield idle(
                path,
                "journal",
                f"journal of a published trajectory ({key[0][:12]}, episode {key[1]})",
            )
        elif _holds(path, open_paths):
            why = (
                "an attempt in progress: the process recording it publishes or drops it as it ends"
            )
            yield Item("journal", str(path), _size(path), why, remove=False)
        else:
            job = job_dir.name
            why, resume = _publisher(store, job_dir)
            yield Item(
                "journal", str(path), _size(path), f"its trajectory is in no shard yet: {why}",
                remove=False, job=job, resume=resume,
            )  # fmt: skip


def _rows(shard: Path) -> list[dict]:
    """The trajectory id and source of each record of a published shard; none for one
    that does not read (its journal, if any, is then kept: `doctor` lists the file as a
    damaged `store shard`, and a resume stops on it, naming it: `jobs.DamagedAttempt`).
    One such file made gc and doctor end in a traceback (hunt 1206o)."""
    import pyarrow as pa

    try:
        return read_parquet(shard, [F.TRAJECTORY_ID, F.SOURCE]).to_pylist()
    except (OSError, pa.ArrowException, ValueError):
        return []


def _publisher(store: Store, job_dir: Path) -> tuple[str, str]:
    """What publishes a journal a stopped run of the job left, and the command to run:
    `worldtrace collect --resume JOB` for a quick `--sandbox` run (no job file; before
    hunt 1206o the advice named one, and the journal stayed for good), the job file's
    resume for a job `collect` ran from one, the next worker for a queued job
    (`jobs.collect_run` tells them apart; the store's jobs.db knows its queued jobs). Both
    of the last two are named only when neither tells (a job store named apart, a job
    collected before 2026-12-03): a killed worker's journal was offered a `collect
    --resume` that `collect` then refused (a queued job)."""
    from worldtrace.collectors.jobs import collect_run

    job = job_dir.name
    run = collect_run(job_dir)
    if run == "quick":
        command = f"worldtrace collect --resume {job}"
        return (
            f"its job is a quick `--sandbox` run that stopped: `{command}` publishes it as "
            "it stands",
            f"{command} (publishes it as it stands)",
        )
    if run == "file":
        return (
            f"`worldtrace collect JOB_FILE --resume {job}` publishes it as it stands and "
            f"runs what the job has left (`worldtrace collect --resume {job}`, without the "
            "job file, publishes it alone)",
            f"worldtrace collect JOB_FILE --resume {job} (or, without the job file, "
            f"worldtrace collect --resume {job}: publishes it alone)",
        )
    if _queued(store, job):
        return (
            "its job is a queued job: the next `worldtrace worker` publishes it or drops "
            "it, as its attempt ended",
            "worldtrace worker (publishes or drops it, as its attempt ended)",
        )
    return (
        "for a queued job, the next `worldtrace worker` publishes it or drops it, as its "
        "attempt ended; for a job `worldtrace collect` ran before 2026-12-03, "
        f"`worldtrace collect JOB_FILE --resume {job}` publishes it as it stands",
        f"the next `worldtrace worker` (a queued job); a job collect ran: worldtrace "
        f"collect JOB_FILE --resume {job}",
    )


def _queued(store: Store, job: str) -> bool:
    """Whether the store's jobs.db holds `job` (read only; one that does not read tells
    nothing: `doctor` says what is wrong with it)."""
    import sqlite3

    from worldtrace.collectors.jobs import queued_job
    from worldtrace.collectors.jobstore import open_job_store

    if not store.jobs_db.exists():
        return False
    try:
        return queued_job(open_job_store(store.jobs_db, read_only=True), job)
    except sqlite3.Error:
        return False


def _attempt(row: dict) -> tuple:
    source = row[F.SOURCE] or {}
    return row[F.TRAJECTORY_ID], source.get("episode_id"), source.get("attempt")


def _old_exports(store: Store, now: float, older_s: float, open_paths: set[str]) -> Iterator[Item]:
    for manifest in sorted(store.export.glob(f"*/{MANIFEST}")):
        d = manifest.parent
        age = now - manifest.stat().st_mtime
        if age >= older_s and not _holds(d, open_paths):
            yield Item("export", str(d), _size(d), f"export written {human_age(age)} ago")


def _leftovers(root: Path) -> dict[str, list[Path]]:
    """Paths under root named with each leftover prefix, in one walk, sorted; nothing
    inside a leftover directory is listed on its own (it is removed whole)."""
    found: dict[str, list[Path]] = {p: [] for p in LEFTOVER_PREFIXES}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted([*dirnames, *filenames]):
            prefix = next((p for p in LEFTOVER_PREFIXES if name.startswith(p)), None)
            if prefix:
                found[prefix].append(Path(dirpath) / name)
        dirnames[:] = [n for n in dirnames if not n.startswith(LEFTOVER_PREFIXES)]
    return {p: sorted(paths) for p, paths in found.items()}


def _walk_files(path: Path) -> Iterable[Path]:
    if path.is_dir() and not path.is_symlink():
        for dirpath, _, filenames in os.walk(path):
            yield Path(dirpath)
            for n in filenames:
                yield Path(dirpath) / n
    else:
        yield path


def _newest_mtime(path: Path) -> float:
    """Latest modification of the path or anything under it (a live run keeps touching it)."""
    newest = 0.0
    for p in _walk_files(path):
        try:
            newest = max(newest, p.lstat().st_mtime)
        except FileNotFoundError:
            continue
    return newest


def _size(path: Path) -> int:
    total = 0
    for p in _walk_files(path):
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        if not p.is_dir():
            total += st.st_size
    return total


def _open_paths(root: Path) -> set[str]:
    """Files under `root` that some process has open or as its working directory.

    Read from /proc by hand: the standard library has no API for it, and psutil would be
    a dependency for these few lines. Processes of other users are invisible unless root.
    """
    prefix = str(root.resolve())
    found: set[str] = set()
    proc = Path("/proc")
    for pid_dir in proc.glob("[0-9]*") if proc.is_dir() else ():
        links = [pid_dir / "cwd"]
        with contextlib.suppress(OSError):  # gone, or not ours to read
            links.extend((pid_dir / "fd").iterdir())
        for link in links:
            try:
                target = os.readlink(link)
            except OSError:
                continue
            if target.startswith(prefix):
                found.add(target)
    return found


def _holds(path: Path, open_paths: set[str]) -> bool:
    p = str(path.resolve())
    return any(o == p or o.startswith(p + os.sep) for o in open_paths)


def remove(item: Item) -> None:
    """Remove one found path (files and directories; containers are removed by docker)."""
    p = Path(item.target)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def containers(dry_run: bool) -> tuple[list[Item], str | None]:
    """Sandbox containers and volumes whose owner process is dead, via the sandbox code's
    `sweep_orphans`; (items, note) where a note says why none were looked at."""
    try:
        from worldtrace.sandboxes.owners import sweep_orphans
    except ImportError as exc:  # the docker extra is not installed
        return [], f"containers not checked: {exc}"
    try:
        found = sweep_orphans(dry_run=dry_run)
    except Exception as exc:  # no engine answers: gc still does the files
        return [], f"containers not checked: no docker engine answers ({str(exc)[:200]})"
    items = [
        Item(f.get("kind", "container"), f.get("name") or f.get("id", "?"), None, f["reason"])
        for f in found
    ]
    return items, None


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def exact_age(seconds: float) -> str:
    """An age as `--min-age` takes it, in the largest unit that says it exactly (5400 s
    is `90m`: `human_age` would round it to `2h`)."""
    for unit, s in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % s == 0:
            return f"{seconds // s:.0f}{unit}"
    return f"{seconds:g}s"


def untouched(age: float) -> str:
    """How long ago an item was last modified, `age` seconds; a time in the future (a
    clock out of step, or a writer on a machine whose clock is ahead) said as such."""
    if age < 0:
        return f"modified {human_age(-age)} in the future"
    return f"untouched for {human_age(age)}"


def human_age(seconds: float) -> str:
    for unit, s in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= s:
            return f"{seconds / s:.0f}{unit}"
    return f"{seconds:.0f}s"
