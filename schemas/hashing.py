"""Content hashes: `trajectory_id` is a function of what a world model would learn from.

The canonical content is the system prompt components plus each turn's action and
observation, serialised as sorted-key JSON in UTF-8 (no floats, no timestamps, no
provenance), so the id is identical across runs, machines and Python versions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import fields as F

ID_HEX_CHARS = 32


def canonical_content(record: Any) -> bytes:
    """Canonical bytes of a Trajectory or of its dict form."""
    d = record if isinstance(record, dict) else record.to_dict()
    system = d.get(F.SYSTEM) or {}
    turns = []
    for t in d.get(F.TURNS) or []:
        a = t.get("action") or {}
        o = t.get("observation") or {}
        turns.append(
            [
                a.get("kind"),
                a.get("text") or "",
                a.get("name"),
                a.get("arguments_json"),
                o.get("text") or "",
            ]
        )
    content = {
        "system": [system.get(k) for k in F.SYSTEM_FIELDS],
        "turns": turns,
    }
    return json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def trajectory_id(record: Any) -> str:
    return hashlib.sha256(canonical_content(record)).hexdigest()[:ID_HEX_CHARS]


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
