"""Turn statistics: the report's OL, Nov, Jac, R (DESIGN.md) plus worldtrace's own.

Pure functions on strings; the Beam stages call them per turn.
"""

from __future__ import annotations

import hashlib
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass

WORD_RE = re.compile(r"\w+")
ZLIB_LEVEL = 6
RAW_DEFLATE = -15  # no zlib header/trailer: measures content, not framing


def words(text: str) -> set[str]:
    """W = lower-cased, de-duplicated `\\w+` runs (Python re, Unicode)."""
    return set(WORD_RE.findall(text.lower()))


@dataclass(frozen=True)
class ReportStats:
    ol: float
    nov: float
    jac: float
    r: float


def report_stats(action: str, observation: str) -> ReportStats:
    """Report Table 3 statistics; a ratio with a zero denominator is 0."""
    wa, wo = words(action), words(observation)
    inter = len(wa & wo)
    union = len(wa | wo)
    return ReportStats(
        ol=inter / len(wa) if wa else 0.0,
        nov=len(wo - wa) / len(wo) if wo else 0.0,
        jac=inter / union if union else 0.0,
        r=len(observation) / len(action) if action else 0.0,
    )


def byte_entropy(data: bytes) -> float:
    """Shannon entropy of the byte distribution, bits per byte (0..8)."""
    n = len(data)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


def deflated_size(data: bytes) -> int:
    c = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, RAW_DEFLATE)
    return len(c.compress(data)) + len(c.flush())


def zlib_ratio(data: bytes, deflated: int | None = None) -> float:
    """Compressed size over raw size: low means self-repetitive text."""
    if not data:
        return 0.0
    return (deflated if deflated is not None else deflated_size(data)) / len(data)


class ConditionalNovelty:
    """Compressed size of each observation given the preceding turns, over its size alone.

    One deflate stream carries the history; its 32 KiB window is the bound on how far
    back a repeat is found. Near 0: the observation was already seen (the second `cat` of
    a file); near 1: nothing before it helps.
    """

    def __init__(self) -> None:
        self._history = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, RAW_DEFLATE)
        self._pending = b""

    def observe(self, action: bytes, observation: bytes, alone: int | None = None) -> float:
        """Score `observation` after `action`; `alone` is its deflated size if known."""
        # the last observation and this action enter the history in one sync flush
        self._history.compress(self._pending + action)
        self._history.flush(zlib.Z_SYNC_FLUSH)
        self._pending = observation
        if not observation:
            return 0.0
        probe = self._history.copy()
        given = len(probe.compress(observation)) + len(probe.flush(zlib.Z_SYNC_FLUSH))
        return given / (alone if alone is not None else deflated_size(observation))


_HEX_RE = re.compile(r"\b(?:0x)?[0-9a-f]{6,}\b")
_NUM_RE = re.compile(r"\d+")
_WS_RE = re.compile(r"\s+")
TEMPLATE_CHARS = 512


def template(observation: str) -> str:
    """Normalized template: lower case, hashes -> <h>, numbers -> 0, spaces folded."""
    t = _HEX_RE.sub("<h>", observation.lower())
    t = _NUM_RE.sub("0", t)
    return _WS_RE.sub(" ", t).strip()[:TEMPLATE_CHARS]


def template_key(observation: str) -> str:
    return hashlib.blake2b(template(observation).encode(), digest_size=8).hexdigest()


def surprisal(count: int, total: int) -> float:
    """-log2 of the template's corpus frequency (bits)."""
    return -math.log2(max(count, 1) / total) if total else 0.0
