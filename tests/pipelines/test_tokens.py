"""Token ranges from the tokenizer's Encoding agree with a reference over all offsets."""

from __future__ import annotations

import random

import numpy as np
from worldtrace.pipelines.tokens import default_tokenizer, encode, load_tokenizer

TEXTS = [
    "<|im_start|>assistant\n日本語 😀 abc<|im_end|>\n",
    "a\u0301 e\u0301  x\n\n\t tab",  # NFC merges the combining accents: chars without a token
    "  \n\n  hi 👩‍👩‍👧 família ﬁne Ω≈ç√ \u200b zero-width",
    "def f(x):\n    return x * 42  # comment\n" * 3,
]


def reference(offsets: np.ndarray, s: int, e: int) -> tuple[int, int]:
    """Tokens lying wholly inside [s, e), by binary search over every token's offsets."""
    lo = int(offsets[:, 0].searchsorted(s, "left"))
    hi = int(offsets[:, 1].searchsorted(e, "right"))
    return lo, max(lo, hi)


def test_token_range_matches_the_offsets_reference():
    tok = load_tokenizer(str(default_tokenizer()))
    rng = random.Random(0)
    checked = 0
    for text, enc in zip(TEXTS, encode(tok, TEXTS), strict=True):
        full = tok.encode(text, add_special_tokens=False)
        offsets = np.asarray(full.offsets).reshape(-1, 2)
        assert enc.ids.tolist() == full.ids
        for _ in range(400):
            s = rng.randrange(len(text) + 1)
            e = rng.randrange(s, len(text) + 1)
            assert enc.token_range(s, e) == reference(offsets, s, e), (text, s, e)
            assert enc.first_at(s) == reference(offsets, s, s)[0]
            checked += 1
        head = enc.head(5)  # a truncated sample: ranges stop at its last token
        for s in range(len(text)):
            lo, hi = head.token_range(s, len(text))
            assert hi <= 5 and (lo, hi) == tuple(
                min(x, 5) for x in reference(offsets, s, len(text))
            )
    assert checked == 400 * len(TEXTS)
