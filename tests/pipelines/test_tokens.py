"""Token offsets computed from byte lengths agree with the tokenizer's own; token ranges
agree with a reference over all offsets."""

from __future__ import annotations

import random

import numpy as np
import pytest
from worldtrace.pipelines.prompt import SystemPrompt
from worldtrace.pipelines.render import CHATML
from worldtrace.pipelines.tokens import Encoder, default_tokenizer, load_tokenizer
from worldtrace.schemas.store import read_table

TEXTS = [
    "<|im_start|>assistant\n日本語 😀 abc<|im_end|>\n",
    "a\u0301 e\u0301  x\n\n\t tab",  # not NFC: the normaliser changes it, the tokenizer's offsets are used
    "  \n\n  hi 👩‍👩‍👧 família ﬁne Ω≈ç√ \u200b zero-width \U0001d54f𝕏 ǅ",
    "def f(x):\n    return x * 42  # comment\n" * 3,
    "",
    "<|im_end|><|im_start|>",
    "\x00\x01 control \r\n crlf \ufeff bom ﷽ ",
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(str(default_tokenizer()))


def own(tok, text):
    e = tok.encode(text, add_special_tokens=False)
    return e.ids, np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)


def test_computed_offsets_are_the_tokenizers_own(tok, processed):
    encoder = Encoder(tok)
    assert encoder.byte_len is not None and encoder.nfc  # the Qwen tokenizer takes the fast path
    prompt = SystemPrompt()
    rows = read_table(processed.table("trajectories"), columns=["domain", "system", "turns"])
    texts = TEXTS + [CHATML.render(prompt.text(r), r["turns"]).text for r in rows.to_pylist()[:150]]
    for text, enc in zip(texts, encoder(texts), strict=True):
        ids, offsets = own(tok, text)
        assert enc.ids.tolist() == ids, text[:60]
        assert enc.offsets.tolist() == offsets.tolist(), text[:60]


def reference(offsets: np.ndarray, s: int, e: int) -> tuple[int, int]:
    """Tokens lying wholly inside [s, e), by linear scan."""
    inside = [i for i, (a, b) in enumerate(offsets) if s <= a and b <= e]
    lo = (
        inside[0]
        if inside
        else next((i for i, (a, _) in enumerate(offsets) if a >= s), len(offsets))
    )
    return lo, (inside[-1] + 1 if inside else lo)


def test_token_range_matches_a_linear_scan(tok):
    rng = random.Random(0)
    for text, enc in zip(TEXTS, Encoder(tok)(TEXTS), strict=True):
        _, offsets = own(tok, text)
        for _ in range(300):
            s = rng.randrange(len(text) + 1)
            e = rng.randrange(s, len(text) + 1)
            assert enc.token_range(s, e) == reference(offsets, s, e), (text, s, e)
            assert enc.first_at(s) == reference(offsets, s, len(text) + 1)[0]
        head = enc.head(5)  # a truncated sample: ranges stop at its last token
        for s in range(len(text)):
            assert head.token_range(s, len(text)) == tuple(
                min(x, 5) for x in reference(offsets, s, len(text))
            )


def test_a_tokenizer_that_is_not_byte_level_uses_its_own_offsets(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    t = Tokenizer(WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = Whitespace()
    [enc] = Encoder(t)(["hello  brave world"])
    assert Encoder(t).byte_len is None
    assert enc.ids.tolist() == [0, 2, 1] and enc.offsets.tolist() == [[0, 5], [7, 12], [13, 18]]
