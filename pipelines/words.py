"""Words and templates of many texts at once, with Python `re` semantics.

The documented definitions are Python's: words are `\\w+` runs (Unicode) of the
lower-cased text, templates come from three `re` substitutions (stats.template). Python's
`re` scans ~250 characters per microsecond; Arrow's kernels and numpy (RE2 for the hex
substitution, whitespace splits of texts whose bytes went through a lookup table for words,
digit and space runs folded over the bytes of a whole unit) do the same work over a unit at
once. The two agree on ASCII text (`\\w` and `\\b` are ASCII classes in RE2, digits and
Python's `\\s` are spelled out below), but not beyond it (RE2's `\\w` is ASCII-only, Unicode
lower-casing differs: 'İ'), so every text with a non-ASCII character goes through Python
`re` instead.
tests/pipelines/test_words.py checks both paths against the per-text functions on
random ASCII (control characters included) and non-ASCII texts.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import stats as S

HEX = r"\b(?:0x)?[0-9a-f]{6,}\b"
"""stats._HEX_RE, for RE2 on ASCII (where both `\\b` are ASCII word boundaries)."""


WORD_BYTES = np.full(256, ord(" "), np.uint8)
"""Lower-cased ASCII text with every non-`\\w` byte a space: its `\\w+` runs are its
whitespace-separated words (a table lookup a byte; RE2 splitting on `[^0-9a-z_]+` was 4x
slower)."""
for _c in b"0123456789abcdefghijklmnopqrstuvwxyz_":
    WORD_BYTES[_c] = _c
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
    WORD_BYTES[_c] = _c | 0x20
SPACE_BYTES = np.arange(256, dtype=np.uint8)
"""Python's `\\s` on ASCII (str.isspace: also VT and the separators 0x1c-0x1f) as a
space, every other byte as it is."""
SPACE_BYTES[list(b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")] = ord(" ")


def _mapped(arr: pa.Array, table: np.ndarray) -> pa.Array:
    """`arr` with every byte of its data passed through `table` (same offsets: the map
    keeps lengths). Only ASCII texts' results are used: a multi-byte character's bytes
    may map to spaces."""
    validity, offsets, data = arr.buffers()
    if data is None:
        return arr
    out = pa.py_buffer(table[np.frombuffer(data, np.uint8)])
    return pa.StringArray.from_buffers(len(arr), offsets, out, validity, arr.null_count, arr.offset)


@dataclass
class Words:
    """The words of n texts: token ids in text order, per-text offsets, distinct words."""

    ids: np.ndarray
    offsets: np.ndarray
    vocab: list[str]


def _ascii(arr: pa.Array) -> np.ndarray:
    return pc.string_is_ascii(arr).to_numpy(zero_copy_only=False)


def words_of(texts: list[str]) -> Words:
    """`stats.WORD_RE.findall(text.lower())` of every text, as one flat id array."""
    n = len(texts)
    arr = pa.array(texts, pa.string())
    ascii_ = _ascii(arr) if n else np.zeros(0, bool)
    split = pc.ascii_split_whitespace(_mapped(arr, WORD_BYTES))
    flat = pc.list_flatten(split)
    parents = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)
    keep = (pc.binary_length(flat).to_numpy(zero_copy_only=False) > 0) & ascii_[parents]
    tokens, parents = flat.filter(pa.array(keep)), parents[keep]
    other = np.flatnonzero(~ascii_)
    if len(other):  # Python re for texts beyond ASCII
        found = [S.WORD_RE.findall(texts[i].lower()) for i in other.tolist()]
        extra = np.repeat(other, [len(f) for f in found])
        tokens = pa.concat_arrays([tokens, pa.array([w for f in found for w in f], pa.string())])
        parents = np.concatenate([parents, extra])
        order = np.argsort(parents, kind="stable")  # each text's words stay in order
        tokens, parents = tokens.take(pa.array(order)), parents[order]
    enc = tokens.dictionary_encode()
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(parents, minlength=n), out=offsets[1:])
    ids = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return Words(ids, offsets, enc.dictionary.to_pylist())


def dedup_tokens(texts: list[str], w: Words) -> Words:
    """The tokens dedup shingles (docs/pipeline.md#dedup): each text's words (`w`, its
    `words_of`), and for a text without a single word its runs of non-space characters
    (`\\S+` of the lower-cased text: a box drawing, a dump of symbols).

    A text without words was invisible to dedup: trajectories whose only difference was
    such an output (3,000 symbols of a `cat`) had the same shingles and were dropped as
    near-duplicates of each other. A text with a word keeps exactly its words, so the
    shingles of ordinary text are those of the words alone; only the few wordless texts
    of a unit are looked at in Python. The runs hold no word character, so they never
    meet a word in the vocabulary."""
    empty = np.flatnonzero(w.offsets[1:] == w.offsets[:-1])
    runs = [(i, r) for i in empty.tolist() if (r := texts[i].lower().split())]
    if not runs:
        return w
    where, split = (list(x) for x in zip(*runs, strict=True))
    lengths = np.fromiter(map(len, split), np.int64, len(split))
    enc = pa.array(list(itertools.chain.from_iterable(split)), pa.string()).dictionary_encode()
    new = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64) + len(w.vocab)
    at = np.repeat(w.offsets[where], lengths)  # each text's place: it has no word
    counts = np.diff(w.offsets)
    counts[where] = lengths
    offsets = np.zeros_like(w.offsets)
    np.cumsum(counts, out=offsets[1:])
    return Words(np.insert(w.ids, at, new), offsets, w.vocab + enc.dictionary.to_pylist())


def set_sizes(w: Words, kind: type | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For texts paired (0, 1), (2, 3), ...: distinct words of each text, and the size of
    each pair's intersection (what OL, Nov and Jac need), without a Python set.

    A sort and a neighbour test instead of `np.unique`, and a binary search of the
    (already sorted) odd texts' keys in the even texts' instead of `np.intersect1d`:
    numpy 2's hashing `unique` and the merge's second sort took 30 us a trajectory, this
    takes 11 (16 -> 11 more with 32-bit keys where a unit's fit; `kind` forces a key
    type)."""
    n = len(w.offsets) - 1
    v = max(len(w.vocab), 1)
    if kind is None:  # a unit's (text, word) keys fit in 32 bits: half the sort
        kind = np.uint32 if n * v < 1 << 32 else np.int64
    text = np.repeat(np.arange(n, dtype=kind), np.diff(w.offsets))
    keys = text * kind(v) + w.ids.astype(kind)
    keys.sort()
    first = np.ones(len(keys), bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    pairs = keys[first]  # (text, word), each once, in order
    of = pairs // kind(v)
    distinct = np.bincount(of, minlength=n)
    pair_key = (of // kind(2)) * kind(v) + pairs % kind(v)  # sorted within even and odd texts
    even = of % 2 == 0
    a, b = pair_key[even], pair_key[~even]
    at = np.minimum(np.searchsorted(a, b), max(len(a) - 1, 0))
    both = b[a[at] == b] if len(a) else b[:0]
    inter = np.bincount(both // kind(v), minlength=n // 2)
    return distinct, inter


def ratios(distinct: np.ndarray, inter: np.ndarray, a_chars, o_chars) -> dict[str, list]:
    """stats.ratios for every pair, as lists of Python floats (bit-identical divisions)."""
    wa, wo = distinct[0::2].astype(np.float64), distinct[1::2].astype(np.float64)
    i = inter.astype(np.float64)
    union = wa + wo - i
    a, o = np.asarray(a_chars, np.float64), np.asarray(o_chars, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "ol": np.where(wa > 0, i / wa, 0.0).tolist(),
            "nov": np.where(wo > 0, (wo - i) / wo, 0.0).tolist(),
            "jac": np.where(union > 0, i / union, 0.0).tolist(),
            "r": np.where(a > 0, o / a, 0.0).tolist(),
        }


TEMPLATE_SCAN = 4 * S.TEMPLATE_CHARS
"""Characters of an observation read for its template before a cut is tried."""


def template_prefix(text: str) -> str:
    """`text` up to its first space or newline from `TEMPLATE_SCAN` on (all of it if
    none): a long observation's template is read from its start.

    No substitution of `stats.template` crosses whitespace (hex and number runs are word
    characters, `\\b` sees the same boundary at the cut as at the end), so the cut's
    template is a prefix of the whole text's, and equal to it once it reaches
    `TEMPLATE_CHARS`; a shorter one is computed again from the whole text.
    """
    if len(text) <= TEMPLATE_SCAN:
        return text
    cuts = [i for i in (text.find(" ", TEMPLATE_SCAN), text.find("\n", TEMPLATE_SCAN)) if i >= 0]
    return text[: min(cuts)] if cuts else text


def _python_template(text: str) -> str:
    cut = template_prefix(text)
    t = S.template(cut)
    return t if cut is text or len(t) >= S.TEMPLATE_CHARS else S.template(text)


def _arrow_templates(arr: pa.Array) -> pa.Array:
    """`stats.template` of ASCII texts (whole, not cut to `TEMPLATE_CHARS`): the hex
    substitution by RE2, then digit runs to one 0 and whitespace runs to one space in one
    numpy pass over the bytes (RE2's `[0-9]+` and a whitespace split and join took 20 us a
    trajectory, this 7), then the trim."""
    t = pc.replace_substring_regex(pc.ascii_lower(arr), HEX, "<h>")
    _, offsets, data = t.buffers()
    n = len(t)
    off = np.frombuffer(offsets, np.int32, n + 1, t.offset * 4)
    if data is None or off[-1] == off[0]:
        return pc.utf8_trim(t, " ")
    b = SPACE_BYTES[np.frombuffer(data, np.uint8, off[-1] - off[0], off[0])]
    off = off - off[0]
    digit = np.subtract(b, ord("0"), dtype=np.uint8) < 10
    space = b == ord(" ")
    repeat = digit[1:] & digit[:-1]  # byte i+1 repeats byte i's class
    repeat |= space[1:] & space[:-1]
    inner = off[1:-1]
    repeat[inner[(inner > 0) & (inner < len(b))] - 1] = False  # no run crosses two texts
    drop = np.flatnonzero(repeat) + 1
    b[digit] = ord("0")
    kept = (off - np.searchsorted(drop, off)).astype(np.int32)  # each text's bytes left
    folded = pa.StringArray.from_buffers(n, pa.py_buffer(kept), pa.py_buffer(np.delete(b, drop)))
    return pc.utf8_trim(folded, " ")


def template_hashes(texts: list[str]) -> list[int]:
    """`stats.template_hash` of every text: RE2 substitutions for ASCII texts, each read
    up to `template_prefix` (a 20 KB tool output costs what its first 2 KB do)."""
    if not texts:
        return []
    cut = [template_prefix(t) for t in texts]
    arr = pa.array(cut, pa.string())
    ascii_ = _ascii(arr).tolist()
    whole = _arrow_templates(arr)
    short = pc.less(pc.utf8_length(whole), S.TEMPLATE_CHARS).to_numpy(zero_copy_only=False)
    tpls = pc.utf8_slice_codeunits(whole, 0, S.TEMPLATE_CHARS).to_pylist()
    for i in np.flatnonzero(short).tolist():
        if ascii_[i] and cut[i] is not texts[i]:  # cut, and too short: the whole text
            tpls[i] = S.template(texts[i])
    return [
        S.hash_template(tpl if ok else _python_template(text))
        for text, ok, tpl in zip(texts, ascii_, tpls, strict=True)
    ]
