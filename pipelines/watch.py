"""Progress of a running `process`, read from the files its workers publish.

The DirectRunner hands back metrics only when the run is over, and a remote runner's
workers cannot call into the submitting process. Every runner we support shares the
output directory, and every unit publishes its files atomically under its stem
(`units.stem_of`), so counting them is a progress signal that holds on all of them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from worldtrace.schemas import fields as F

from . import segments as G
from .units import stem_of


class Progress(Protocol):
    """`progress(done, records)`: unit steps done (pass 1 and pass 2 of each unit) out of
    `total` (set by the watch once the run knows its units), and the records of the units
    pass 1 has finished (`worldtrace.progress.StepProgress` is one)."""

    total: int

    def __call__(self, done: int, records: int) -> None: ...


def _lines(path: str) -> int:
    """Records of a JSONL file: its non-empty lines."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _stems(directory: Path) -> set[str]:
    try:
        with os.scandir(directory) as it:
            return {
                e.name[: -len(F.SHARD_SUFFIX)]
                for e in it
                if e.name.endswith(F.SHARD_SUFFIX) and not e.name.startswith(".")
            }
    except FileNotFoundError:
        return set()


class RunWatch:
    """Polls a run directory and reports `progress(done, records)` every `every` seconds.

    Pass 1 of a unit is done when its segment or its rejects file exists; pass 2 when
    its `trajectories` file does. A unit whose records were all rejected or filtered has
    no pass 2, so the run reports the full total when it ends.
    """

    def __init__(
        self,
        run_dir: Path,
        units: Iterable[tuple],
        progress: Progress,
        root: str | None = None,
        every: float = 0.5,
    ):
        """`units`: the run's plan, (path, group, rows, n) each (`units.plan_run`), so
        the stems are those of its files (named from `root`, as pass 1 names them)."""
        self.run_dir, self.progress, self.every = Path(run_dir), progress, every
        self.rows = {
            stem_of(p, g, rows, root): (n or 0) if p.endswith(F.SHARD_SUFFIX) else _lines(p)
            for p, g, rows, n in units
        }
        self.total = 2 * len(self.rows)
        self.records = sum(self.rows.values())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-progress", daemon=True)

    def poll(self) -> tuple[int, int]:
        first = (_stems(self.run_dir / G.INDEX / G.SEGMENTS) | _stems(self.run_dir / "rejects")) & (
            self.rows.keys()
        )
        second = _stems(self.run_dir / "trajectories") & self.rows.keys()
        return len(first) + len(second), sum(self.rows[s] for s in first)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.progress(*self.poll())

    def __enter__(self) -> RunWatch:
        self.progress.total = self.total
        self.progress(0, 0)
        self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            self.progress(self.total, self.records)
