"""Turn statistics: the report's OL, Nov, Jac, R (docs/pipeline.md#turn-statistics) plus worldtrace's own.

Pure functions on strings; the Beam stages call them per turn.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass

from worldtrace.schemas import fields as F

WORD_RE = re.compile(r"\w+")
ZLIB_LEVEL = 6
RAW_DEFLATE = -15  # no zlib header/trailer: measures content, not framing


def nfc(text: str) -> str:
    """`text` in Unicode NFC, what the statistics, words, shingles, templates and mask
    decisions read (`units.score`; the stored text stays as recorded; the exact dedup
    key: `hashing.content_ids`): `élève` with combining accents (NFD, as macOS file names
    and some tools write it) is the same text, but `\\w` takes no combining mark, so its
    words were `e`, `le`, `ve`. ASCII and text already NFC come back as they are (a flag,
    then a quick check in C: `normalize` makes no copy of them)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def words(text: str) -> set[str]:
    """W = lower-cased, de-duplicated `\\w+` runs (Python re, Unicode). Processing passes
    the NFC text (`nfc`)."""
    return set(WORD_RE.findall(text.lower()))


@dataclass(frozen=True)
class ReportStats:
    ol: float
    nov: float
    jac: float
    r: float


def ratios(wa: set[str], wo: set[str], action_chars: int, obs_chars: int) -> dict[str, float]:
    """OL, Nov, Jac, R from the two word sets and the two lengths in characters."""
    inter = len(wa & wo)
    union = len(wa) + len(wo) - inter
    return {
        "ol": inter / len(wa) if wa else 0.0,
        "nov": (len(wo) - inter) / len(wo) if wo else 0.0,
        "jac": inter / union if union else 0.0,
        "r": obs_chars / action_chars if action_chars else 0.0,
    }


def report_stats(action: str, observation: str) -> ReportStats:
    """Report Table 3 statistics; a ratio with a zero denominator is 0."""
    return ReportStats(**ratios(words(action), words(observation), len(action), len(observation)))


def byte_entropy(data: bytes) -> float:
    """Shannon entropy of the byte distribution, bits per byte (0..8)."""
    n = len(data)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


FRAME = b"\n"
"""What a text's size alone comes after: one byte, its own deflate block, so that the text
starts at stream position 1 as it does after a history. zlib never takes position 0 as a
match source (its hash chains' "none"): alone at 0, `----------` could not copy its first
byte, and came out a byte larger than after any action (hunt 1206). One byte is no
source either (it sits at 0, and a match is 3 or more)."""


def deflated_size(data: bytes) -> int:
    """The size of `data` alone at `ZLIB_LEVEL` (zlib's default memory level and
    strategy), framed as in a history: the bits of its blocks after a `FRAME` block, in
    whole bytes rounded up (`ConditionalNovelty.given`; 0 when empty). An observation
    nothing before helps has the same blocks and size given its history."""
    return ConditionalNovelty().given(FRAME, data)


def zlib_ratio(data: bytes, deflated: int | None = None) -> float:
    """Compressed size (`deflated_size`) over raw size: low means self-repetitive text."""
    if not data:
        return 0.0
    return (deflated if deflated is not None else deflated_size(data)) / len(data)


class ConditionalNovelty:
    """Compressed size of each observation given the preceding turns, over its size alone.

    One deflate stream carries the history; its 32 KiB window is the bound on how far
    back a repeat is found. Each action and observation is closed as its own deflate
    block (`Z_BLOCK`: no byte alignment, no empty marker block). Both sizes are the bits
    of the observation's blocks in whole bytes, rounded up as a stream ends, framed
    alike: given, where its blocks start and end in the history, whatever bits of the
    action's last byte they share it with; alone (`deflated_size`), after a one-byte
    block, so that it starts at stream position 1 there too. Like with like: near 0, the
    observation was already seen (the second `cat` of a file); 1, nothing before it helps
    (the same blocks, the same size; clamped: blocks that found a repeat may still come
    out a byte larger).
    """

    def __init__(self) -> None:
        self._history = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, RAW_DEFLATE)
        self._written = 0  # bytes the history has written

    def observe(self, action: bytes, observation: bytes, alone: int | None = None) -> float:
        """Score `observation` after `action`; `alone` is its deflated size if known."""
        given = self.given(action, observation)
        if not observation:
            return 0.0
        return novelty(given, alone if alone is not None else deflated_size(observation))

    def given(self, action: bytes, observation: bytes) -> int:
        """Add the turn to the history; the size of the observation's blocks (0: empty)."""
        self._add(action)
        if not observation:
            return 0
        start = self._bits()
        self._add(observation)
        return (self._bits() - start + 7) // 8  # in whole bytes, rounded up as alone

    def _add(self, part: bytes) -> None:
        h = self._history
        self._written += len(h.compress(part)) + len(h.flush(zlib.Z_BLOCK))

    def _bits(self) -> int:
        """Where the history stream is, in bits: what it wrote and what it holds."""
        return 8 * self._written + held_bits(self._history)


def held_bits(stream: zlib._Compress) -> int:
    """The bits a raw deflate stream holds after a `Z_BLOCK` flush (0-7), which CPython's
    `zlib` does not tell (C: `deflatePending`). A copy of it finished writes them, then an
    empty final fixed block (bits 1, 1, 0 and a 7-bit end code of zeros) and zero padding:
    its last 1 bit is the one right after them."""
    return int.from_bytes(stream.copy().flush(zlib.Z_FINISH), "little").bit_length() - 2


def novelty(given: int, alone: int) -> float:
    """`ConditionalNovelty`'s value from the observation's two deflated sizes."""
    return min(1.0, given / alone)


def deflated_sizes(blobs: list[bytes]) -> list[int]:
    """`deflated_size` of each blob (`_deflate` when built: one stream, reset between)."""
    if _C is not None:
        return _C.deflated_sizes(blobs, ZLIB_LEVEL, RAW_DEFLATE)
    return [deflated_size(b) for b in blobs]


def history_sizes(actions: list[bytes], observations: list[bytes], starts: list[int]) -> list[int]:
    """For every turn, the deflated size of its observation given the turns before it in
    its record (`ConditionalNovelty`'s numerator; 0 for an empty observation). Record k
    is turns `starts[k]:starts[k + 1]`."""
    if _C is not None:
        return _C.history_sizes(actions, observations, starts, ZLIB_LEVEL, RAW_DEFLATE)
    out = []
    for a, e in itertools.pairwise(starts):
        given = ConditionalNovelty().given
        out += map(given, actions[a:e], observations[a:e])
    return out


def verbatim_repeats(observations: list[bytes], records: list[int]) -> list[int]:
    """The turns (indices into `observations`) whose observation equals an earlier one of
    its record (`records`: each turn's record), `cond_novelty` 0: a verbatim repeat of
    the context wherever it is. Deflate finds a repeat only within its 32 KiB window, so
    the second of two 40,000-character outputs scored 0.878, as if nothing before helped,
    and one of 20,000 0.035 (hunt 1206p). One dict look-up a turn (the blobs' hashes are
    cached); an observation found inside a longer context is left to deflate: a search
    of every earlier byte per turn cost 4x the deflates on a trajectory of 3,000 outputs
    of 300 bytes."""
    first: dict[tuple[int, bytes], int] = {}
    keys = zip(records, observations, strict=True)
    return [n for n, key in enumerate(keys) if first.setdefault(key, n) != n]


def _compiled():
    """The C loop (pipelines/_deflate.c) when it was built and runs with the zlib this
    interpreter's `zlib` does (other sizes otherwise), else None."""
    try:
        from . import _deflate
    except ImportError:
        return None
    return _deflate if _deflate.zlib_version() == zlib.ZLIB_RUNTIME_VERSION else None


_C = _compiled()


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
    """`template_hash` in hex (16 digits)."""
    return f"{template_hash(observation):016x}"


def template_hash(observation: str) -> int:
    """The template key as an unsigned 64-bit integer (how segments and the index store it)."""
    return hash_template(template(observation))


def hash_template(template: str) -> int:
    """`template_hash` of an observation whose template is `template`."""
    return int.from_bytes(hashlib.blake2b(template.encode(), digest_size=8).digest(), "big")


SURPRISAL_REFERENCE = F.SURPRISAL_REFERENCE


def surprisal(count: int) -> float:
    """Bits of rarity of a template seen `count` times in the processed corpus:
    log2(SURPRISAL_REFERENCE / min(count, SURPRISAL_REFERENCE)), from 4 (seen once) to 0.

    A fixed reference instead of the corpus size: -log2(count / turns) is at most
    log2(turns), so in a small corpus every template looked common; counts mean the same
    in any corpus, and a new batch changes only the turns whose own template is still
    rarer than the reference. It is filled at read time from the template counts
    (docs/pipeline.md#corpus-counts-at-read-time), so a new batch rewrites no earlier file.
    """
    return math.log2(SURPRISAL_REFERENCE / min(max(count, 1), SURPRISAL_REFERENCE))
