"""Content hashes: `trajectory_id` is a function of what a world model would learn from.

The canonical content is the system prompt components plus each turn's action and
observation, serialised as sorted-key JSON in UTF-8 (no floats, no timestamps, no
provenance), so the id is identical across runs, machines and Python versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from typing import Any

from . import fields as F

ID_HEX_CHARS = 32


def canonical_content(record: Any) -> bytes:
    """Canonical bytes of a Trajectory or of its dict form."""
    return canonical_text(record).encode()


def canonical_text(record: Any) -> str:
    """`canonical_content` before its UTF-8 encoding."""
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
    return json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def trajectory_id(record: Any) -> str:
    return _digest(canonical_text(record))


def content_ids(record: Any) -> tuple[str, str]:
    """(trajectory id, content key): the key is the id of the record's content in Unicode
    NFC, what exact dedup groups by. `é` typed as one code point or as `e` and a combining
    accent is the same text, but not the same bytes: the id, which the store keeps as it
    was recorded, tells the two apart. Equal to the id where the content is NFC already
    (ASCII: a flag; otherwise one quick check), so only other text pays a second hash.
    NFC of the JSON text is the JSON of NFC strings: every string sits between ASCII
    quotes, which compose with nothing."""
    text = canonical_text(record)
    tid = _digest(text)
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return tid, tid
    return tid, _digest(unicodedata.normalize("NFC", text))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:ID_HEX_CHARS]


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What `processed/_index/shards.parquet` records of a raw file's stat: while all four
    hold, the file is the one processed; when one moved, its sha256 decides. An mtime can
    be set back (`sed`, then `touch -r`; `cp -p`; a checkout), a ctime cannot: every
    write, rename or copy moves it, as git's index keeps it. The device is left out: a
    remount or another container gives the same file another one."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def recorded_key(row: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """`stat_key` as an index row recorded it (None where an older index has none)."""
    return row.get("size"), row.get("mtime_ns"), row.get("ctime_ns"), row.get("ino")


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
