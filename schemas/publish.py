"""Publish a `process` run's tables together, and finish a publish a dead run left half done.

A run writes every table (trajectories, turns, clusters, rejects, _index) and its
manifest in its own `.run-*` directory, then swaps each into processed/. The swaps are
several renames: a run killed between two of them left a table missing (the next run
published a table holding only its own records: the earlier ones vanished from every
view and export, and `gc` later removed their only copy) or tables of two runs side by
side. So the swaps follow a journal written first: `.publish.json` names the run
directory, what moves and where each replaced table goes. Whoever next holds the
process lock and finds a journal rolls it forward (the run's tables are complete
before the journal exists): `process` at its start, and the reading commands, `export`
and `gc`, through `finish_publish`. A journal the lock's holder is writing is its
own, live publish: readers are told, not blocked. A journal that does not read, or
does not say what a publish writes (disk damage, a hand edit), is one line naming it
and what to do (`DamagedFile`), for `process` and every reader alike.

An export is swapped in by two renames (`pipelines.writers`): the earlier export aside
as `.old-NAME-xxxxxxxx`, then the new one in. A stop between the two left no NAME, the
earlier export only under its hidden name; `restore_swaps` puts it back (the new one's
staging directory stays for `gc`), called by the export itself and by every command
that reads the store. Light on purpose: no pyarrow.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import fields as F
from .tempfiles import (
    REBUILD_HINT,
    DamagedFile,
    _fsync_dir,
    first_line,
    flock_holders,
    is_leftover,
    lock_holder,
    process_said,
    try_lock,
    write_bytes_atomic,
)

JOURNAL = ".publish.json"
"""In processed/: the publish in progress (or stopped half way)."""
OLD_PREFIX = ".old-"


def publish(run_dir: Path, output: Path, names: Iterable[str]) -> None:
    """Move each of `names` (directories or files) from `run_dir` over its namesake in
    `output`, journalled so that a stop at any point is finished by `finish_publish`;
    the replaced directories are removed after. The caller holds the process lock."""
    names = list(names)
    journal = {
        "run": run_dir.name,
        "names": names,
        "old": {n: f"{OLD_PREFIX}{n}-{uuid.uuid4().hex[:8]}" for n in names},
    }
    write_bytes_atomic(output / JOURNAL, json.dumps(journal, indent=1).encode())
    _roll_forward(output, journal)


def _roll_forward(output: Path, journal: dict) -> None:
    """Do every swap of `journal` not done yet (a name still in the run directory), then
    drop the journal and what was replaced. Each step can be repeated after a stop."""
    run_dir = output / journal["run"]
    for name in journal["names"]:
        new, final, old = run_dir / name, output / name, output / journal["old"][name]
        if new.exists():
            if final.is_dir():  # a directory cannot replace one that holds files
                os.replace(final, old)
            os.replace(new, final)
        elif not final.exists() and old.exists():  # the run directory went (removed by
            os.replace(old, final)  # hand): the earlier table stays, never none
    _fsync_dir(output)
    (output / JOURNAL).unlink(missing_ok=True)
    _fsync_dir(output)
    for old in journal["old"].values():
        shutil.rmtree(output / old, ignore_errors=True)


JOURNAL_HINT = (
    "the table swaps of the `worldtrace process` run that wrote it cannot be finished "
    "from it: delete it, then run `worldtrace process --rebuild` (it makes the processed "
    "data again from raw/)"
)
"""What to do about a damaged journal: which swaps were done is unknown, so the tables
may be of two runs; a rebuild makes them all again."""
_PLAIN = re.compile(r"^[^/\\\x00]+$")


def pending(output: Path) -> dict | None:
    """The journal of a publish not finished (live or stopped), or None; `DamagedFile`
    when it does not read or does not say what the publish moves (every name a plain
    name in processed/, so a hand edit cannot move anything elsewhere)."""
    path = output / JOURNAL
    try:
        journal = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = f"unreadable publish journal ({exc.strerror or exc})"
        raise DamagedFile(path, why, JOURNAL_HINT) from exc
    except ValueError as exc:  # not JSON, or not UTF-8
        why = f"damaged publish journal (not JSON: {str(exc).splitlines()[0]})"
        raise DamagedFile(path, why, JOURNAL_HINT) from exc
    problem = _journal_problem(journal)
    if problem:
        raise DamagedFile(path, f"damaged publish journal ({problem})", JOURNAL_HINT)
    return journal


def _journal_problem(journal: object) -> str | None:
    """What a parsed journal lacks to be rolled forward (None when it is whole)."""

    def plain(name: object) -> bool:
        return isinstance(name, str) and name not in (".", "..") and bool(_PLAIN.match(name))

    if not isinstance(journal, dict):
        return f"a JSON {type(journal).__name__}, not an object"
    run, names, old = journal.get("run"), journal.get("names"), journal.get("old")
    if not plain(run):
        return "no `run` directory"
    if not isinstance(names, list) or not names or not all(plain(n) for n in names):
        return "no list of `names` to move"
    if not isinstance(old, dict) or any(not plain(old.get(n)) for n in names):
        return "no `old` name for every name moved"
    return None


class ProcessRunning(ValueError):
    """A `worldtrace process` run holds processed/: an export reading it now would mix
    shards of its tables with the last run's (a publish swaps whole directories, and the
    shard names stay)."""


@contextlib.contextmanager
def reading(output: Path) -> Iterator[None]:
    """Hold processed/'s process lock shared for a reader that must see one run (an
    export): a `process` run cannot start meanwhile (`readers_only` names why), and one
    that runs refuses the reader at once."""
    lock = output / F.PROCESS_LOCK
    fh = try_lock(lock, shared=True)
    if fh is None:
        holder = lock_holder(lock)
        raise ProcessRunning(
            f"{output}: a `worldtrace process` run is writing this store ({holder}); "
            "export when it has finished (an export now would mix its tables with the "
            "last run's)"
        )
    try:
        yield
    finally:
        fh.close()


def readers_only(lock: Path) -> bool:
    """Whether the holders of a lock `try_lock` could not take are all readers
    (`reading`): it can be held shared."""
    fh = try_lock(lock, shared=True)
    if fh is not None:
        fh.close()
    return fh is not None


class StoreBusy(ValueError):
    """Another `process` run holds the store's processed/ directory, or an export reads it."""


def busy_said(output: Path) -> str:
    """Why a `process` run cannot take processed/'s lock, which another holds: a run
    writing it (named as it wrote its line) or exports reading it (their pids)."""
    lock = output / F.PROCESS_LOCK
    if readers_only(lock):
        readers = "; ".join(map(process_said, flock_holders(lock, "READ")))
        return (
            f"{output}: a `worldtrace export` is reading this store"
            f"{f' ({readers})' if readers else ''}; run again when it has finished "
            "(a run now would swap the tables under it)"
        )
    return (
        f"{output}: another `worldtrace process` is writing this store "
        f"({lock_holder(lock)}); run again when it has finished"
    )


def refuse_busy(output: Path) -> None:
    """Refuse a `process` run at once when processed/'s lock is held, as the run's own
    lock would (`busy_said`), but before the run loads Beam: seconds, under load, that a
    refused run kept its user waiting. Read from /proc/locks, so asking takes nothing
    from a run starting this instant; the run's lock stays the rule."""
    lock = output / F.PROCESS_LOCK
    if flock_holders(lock, None):
        raise StoreBusy(busy_said(output))


def finish_stopped(output: Path) -> bool:
    """Roll forward a journal left behind; the caller holds the process lock (so no run
    is publishing). True when there was one."""
    journal = pending(output)
    if journal is None:
        return False
    _roll_forward(output, journal)
    return True


def finish_publish(output: Path) -> str | None:
    """For commands that read processed/ (or tidy it): finish a publish a dead `process`
    run left half done, when the lock is free. Returns a note for the user when a live
    run is publishing right now (what is read may mix its tables with the last run's),
    else None. `UnfinishedPublish` when the store is not writable (a read-only mount):
    the tables would be read half swapped."""
    if pending(output) is None:  # a damaged journal is said as such, writable or not
        return None
    try:
        fh = try_lock(output / F.PROCESS_LOCK)
    except OSError as exc:
        raise UnfinishedPublish.of(output, exc) from None
    if fh is None:
        return (
            "a `worldtrace process` run is publishing its tables right now: what is read "
            "may mix them with the last run's; run again in a moment"
        )
    try:
        finish_stopped(output)
    except OSError as exc:
        raise UnfinishedPublish.of(output, exc) from None
    finally:
        fh.close()
    return None


FINISH_HINT = (
    "any reading command (`worldtrace stats`) or `worldtrace process` finishes them, on a "
    "writable store (a read-only one: make it writable, or copy it with `cp -a` and read "
    "the copy)"
)
"""What to do about a stopped publish: the next command that may write finishes it."""


class UnfinishedPublish(OSError):
    """A stopped publish (`.publish.json` left) that a reading command cannot finish: the
    store is not writable. Its tables may be half swapped, so nothing is read; `str()` is
    one line naming the journal and what to do (it was `[Errno 30] Read-only file system:
    .../.process.lock`)."""

    def __init__(self, journal: Path, why: str):
        super().__init__(None, why, str(journal))
        self.journal, self.why = journal, why

    @classmethod
    def of(cls, output: Path, exc: OSError) -> OSError:
        """`exc` met finishing the publish in `output`: this when the store refuses
        writes (read-only, permissions), else `exc` itself (a disk fault says itself)."""
        if isinstance(exc, DamagedFile) or exc.errno not in _NOT_WRITABLE:
            return exc
        return cls(output / JOURNAL, exc.strerror or str(exc))

    def __str__(self) -> str:
        return (
            f"{self.journal}: a `worldtrace process` run stopped between its table swaps, "
            "which are finished before its tables are read, and the store is not writable "
            f"({self.why}); {FINISH_HINT}"
        )


_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


SWAPPED_OUT = re.compile(r"^\.old-(.+)-[0-9a-f]{8}$")
"""`.old-NAME-xxxxxxxx`: a directory an export swap set aside (`pipelines.writers`)."""
STAGING = re.compile(r"^\.staging-\d+-[0-9a-f]{8}-[0-9a-f]{8}-(.+)$")
"""`.staging-<pid>-<host>-<random>-NAME`: an export being written (`temp_name`)."""


def interrupted_swaps(parent: Path, name: str | None = None) -> list[Path]:
    """The `.old-NAME-*` export directories under `parent` that are the only copy of
    NAME (no NAME beside them) and that no live export is swapping (no staging
    directory of NAME whose writer runs): an export stopped between its two renames.
    `name`: only those of that export."""
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return []
    staging = [p for p in entries if STAGING.match(p.name)]
    out = []
    for p in entries:
        m = SWAPPED_OUT.match(p.name)
        if not m or (name is not None and m.group(1) != name):
            continue
        real = parent / m.group(1)
        if real.exists() or not (p / "manifest.json").is_file():
            continue
        live = any(
            STAGING.match(s.name).group(1) == m.group(1) and not is_leftover(s) for s in staging
        )
        if not live:
            out.append(p)
    return out


def restore_swaps(parent: Path, name: str | None = None) -> list[Path]:
    """Put each export `interrupted_swaps` finds back in its place (the earlier export:
    the new one was never confirmed); returns the places restored. A rename that fails
    (a live export published meanwhile, a read-only directory) leaves it as it is:
    `gc` and `doctor` name it."""
    restored = []
    for old in interrupted_swaps(parent, name):
        real = parent / SWAPPED_OUT.match(old.name).group(1)
        try:
            os.rename(old, real)  # not over a directory a live export just put there
        except OSError:
            continue
        restored.append(real)
    if restored:
        with contextlib.suppress(OSError):
            _fsync_dir(parent)
    return restored


def run_manifest(path: Path) -> dict:
    """The last `process` run's manifest (`processed/manifest.json`) as a JSON object in
    its shape, or `DamagedFile` naming it with the fix: the one reader of `process` and of
    every command that reads the store (they ended in a traceback on a manifest that is
    not UTF-8 or holds `inputs: 5`, or took one that is no JSON for none)."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:  # none: the caller's to say
        raise
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON
        why = f"the last run's manifest does not read ({first_line(exc)})"
        raise DamagedFile(path, why, REBUILD_HINT) from None
    if not isinstance(run, dict):
        why = f"the last run's manifest is a JSON {type(run).__name__}, not an object"
        raise DamagedFile(path, why, REBUILD_HINT)
    if problem := _manifest_problem(run):
        raise DamagedFile(path, f"the last run's manifest {problem}", REBUILD_HINT)
    return run


TABLES_RUN = "tables_run"
"""The run manifest field naming the run that published the tables processed/ holds: the
run itself, or when it read nothing new (and published no table), the one before it."""


def tables_run(run: dict) -> str | None:
    """The run whose tables processed/ holds, by run manifest `run` (a manifest from before
    `TABLES_RUN` was written: its own `run_id`); None when it names none."""
    value = run.get(TABLES_RUN) or run.get("run_id")
    return value if isinstance(value, str) else None


def _manifest_problem(run: dict) -> str | None:
    """What of a run manifest's fields is not in its shape (None when all are): `config`
    and `accounting.in` (without them an incremental run would say "settings changed"
    for settings no one changed), `inputs` and `config.output` (the files it read)."""
    config, accounting, inputs = run.get("config"), run.get("accounting"), run.get("inputs")
    if not isinstance(config, dict):
        return "has no config"
    if not isinstance(accounting, dict) or not isinstance(accounting.get("in"), int):
        return "has no accounting.in"
    if inputs is not None and (
        not isinstance(inputs, list) or not all(isinstance(p, str) for p in inputs)
    ):
        return f"has inputs {json.dumps(inputs)[:80]}, not a list of paths"
    output = config.get("output")
    if output is not None and not isinstance(output, str):
        return f"has config.output {json.dumps(output)[:80]}, not a path"
    return None
