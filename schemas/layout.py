"""A store's layout (DESIGN.md): where raw/, processed/, export/ and jobs.db lie. Apart
from `store`'s readers and writers, so that a command that only finds the store (`jobs`)
loads no pyarrow."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import fields as F


@dataclass(frozen=True)
class Store:
    """One store root with the layout of DESIGN.md: raw/, processed/, export/, jobs.db."""

    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike | None = None) -> Store:
        chosen = root or os.environ.get(F.STORE_ENV) or F.DEFAULT_STORE
        return cls(Path(chosen).absolute())

    @property
    def raw(self) -> Path:
        return self.root / F.RAW_DIR

    @property
    def processed(self) -> Path:
        return self.root / F.PROCESSED_DIR

    @property
    def export(self) -> Path:
        return self.root / F.EXPORT_DIR

    @property
    def jobs_db(self) -> Path:
        return self.root / F.JOBS_DB

    def table(self, name: str) -> Path:
        """Directory of one processed table (trajectories, turns, clusters, rejects)."""
        return self.processed / name
