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
own, live publish: readers are told, not blocked. Light on purpose: no pyarrow.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

from . import fields as F
from .tempfiles import _fsync_dir, try_lock, write_bytes_atomic

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


def pending(output: Path) -> dict | None:
    """The journal of a publish not finished (live or stopped), or None."""
    try:
        return json.loads((output / JOURNAL).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{output / JOURNAL}: unreadable publish journal: {exc}") from exc


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
    else None."""
    if not (output / JOURNAL).exists():
        return None
    fh = try_lock(output / F.PROCESS_LOCK)
    if fh is None:
        return (
            "a `worldtrace process` run is publishing its tables right now: what is read "
            "may mix them with the last run's; run again in a moment"
        )
    try:
        finish_stopped(output)
    finally:
        fh.close()
    return None
