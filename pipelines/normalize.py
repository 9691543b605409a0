"""Record normalisation for CPT (non-thinking form) and the shape of a rejects row."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.redact import OWN_VALUE, redact_record, redactor

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)


def micros(value: Any) -> Any:
    """A timestamp as integer microseconds since the epoch (UTC), the Arrow column's unit.

    Beam's fast coder has no datetime encoding and pickles each one; integers travel
    natively, and Arrow reads them back into the same timestamp column. Text (a foreign
    shard's ISO-8601 column, validated) is read as the JSON path reads it: naive is UTC.
    """
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return (aware - _EPOCH) // _MICRO
    return value


@functools.lru_cache(maxsize=4096)
def canonical_arguments(text: str) -> str:
    """Tool arguments as sorted-key JSON. Remembered: a unit's calls repeat their
    arguments (a third of them distinct in the bench corpus), and most are canonical
    as written."""
    return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)


def normalize(record: dict[str, Any], screened: bool = False) -> dict[str, Any]:
    """Non-thinking form: reasoning stripped, tool arguments canonical, CRLF in actions
    folded, metadata as map pairs, timestamps as epoch microseconds, secrets redacted
    (schemas/redact.py). Observation text is otherwise never touched.

    `screened`: the record's strings as read were screened (`redact.screen`) and none may
    hold a secret; the strings rewritten here are screened again, and the record is
    redacted whole only if one of them may.
    """
    out = dict(record)
    for k in (F.STARTED_AT, F.ENDED_AT):
        out[k] = micros(out.get(k))
    turns, rewritten = [], []
    for t in record[F.TURNS]:
        a = dict(t["action"])
        if "\r\n" in a["text"]:
            a["text"] = a["text"].replace("\r\n", "\n")
            rewritten.append(a["text"])
        if (text := a.get("arguments_json")) and (canon := canonical_arguments(text)) != text:
            a["arguments_json"] = canon
            rewritten.append(canon)  # as read, it was screened already
        turns.append(
            {**t, "action": a, "reasoning": None, "started_at": micros(t.get("started_at"))}
        )
    out[F.TURNS] = turns
    meta = record.get(F.METADATA) or {}
    out[F.METADATA] = sorted(meta.items() if isinstance(meta, dict) else (tuple(p) for p in meta))
    # security: current rules, also on raw data recorded before them
    return redact_record(out, rewritten if screened else None)


def redacted(text: str | None) -> str | None:
    """`text` with every secret replaced (None as is): for what processing stores beside
    a record's content that `redact_record` leaves alone, the id a raw record was written
    with and the name of the file it was read from. An id of ours (`redact.OWN_VALUE`)
    is passed as it is: it holds no secret, and it is every record's (4 us saved)."""
    if not text or OWN_VALUE.fullmatch(text):
        return text
    return redactor().text(text)[0]


def reject_row(uid: str, stage: str, reason: str, tid: str | None = None) -> dict[str, Any]:
    """A `rejects` row: file, record within it, stage, reason, trajectory id if known.
    Its text is redacted: the reason may quote what it rejects (a filter's or a
    validator's), the id is the record's as written and the file's name is the user's."""
    path, _, record = uid.rpartition(":")
    if not path:
        path, record = uid, ""
    return {
        "source_path": redacted(path),
        "record": record,
        "stage": stage,
        "reason": redacted(reason),
        "trajectory_id": redacted(tid),
    }
