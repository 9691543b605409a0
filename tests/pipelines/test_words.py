"""The batched words and templates (Arrow RE2 and numpy for ASCII, Python re beyond) equal the
per-text Python definitions, on random and real texts, ASCII and not."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import numpy as np
from worldtrace.pipelines import stats as S
from worldtrace.pipelines import words as W

ASCII_PIECES = [
    "a", "Z", "_", "0", "9", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x00",
    "-", ".", "/", "0x", "deadbeef", "CAFE12", "0xABCDEF12", "12345", "g1", "abc_def",
    "ab12cd34ef", "  ", "\x7f", "!", "x",
]  # fmt: skip
OTHER_PIECES = [
    "é", "Σ", "ΑΣ.", "İ", "ß", "ǅ", "٣", "①", "½", "中文", "\u00a0", "\x85", "\u2028",
    "\u3000", "e\u0301", "🙂", "ﬁ", "Ⅻ", "\U0001d7d8", "\u200b",
]  # fmt: skip


def random_texts(n: int, seed: int, other: float) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pieces = [
            rng.choice(OTHER_PIECES if rng.random() < other else ASCII_PIECES)
            for _ in range(rng.randrange(0, 40))
        ]
        out.append("".join(pieces))
    return out


def real_texts(limit: int = 400) -> list[str]:
    """Lines of the Python standard library's sources and docs: real text, some of it
    beyond ASCII."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    for path in sorted(root.glob("*.py"))[:60]:
        text = path.read_text(errors="replace")
        out += [text[i : i + 700] for i in range(0, min(len(text), 7000), 700)]
    return [*out[:limit], "Ünïcödé façade naïve Straße İstanbul ΑΣ. x" * 3]


def check(texts: list[str]) -> None:
    w = W.words_of(texts)
    for i, text in enumerate(texts):
        got = [w.vocab[k] for k in w.ids[w.offsets[i] : w.offsets[i + 1]]]
        assert got == S.WORD_RE.findall(text.lower()), repr(text)
    pairs = texts[: len(texts) // 2 * 2]
    distinct, inter = W.set_sizes(W.words_of(pairs))
    got = W.ratios(distinct, inter, [len(t) for t in pairs[0::2]], [len(t) for t in pairs[1::2]])
    for j in range(len(pairs) // 2):
        a, o = pairs[2 * j], pairs[2 * j + 1]
        want = S.ratios(S.words(a), S.words(o), len(a), len(o))
        assert {k: got[k][j] for k in want} == want, (a, o)
    assert W.template_hashes(texts) == [S.template_hash(t) for t in texts]


def test_random_ascii_texts_match_python_re():
    check(random_texts(3000, seed=1, other=0.0))


def test_random_mixed_texts_match_python_re():
    check(random_texts(3000, seed=2, other=0.15))


def test_real_texts_match_python_re():
    texts = real_texts()
    assert any(not t.isascii() for t in texts)
    check(texts)


def test_runs_end_where_their_text_ends():
    """Digit and space runs are folded over the bytes of every text at once: a run at the
    end of one text and one at the start of the next stay two."""
    texts = ["a1", "2b", "  ", "3", "", " 4 ", "5", "x\t", "\ny", "9 9", "0x", "123456"]
    assert W.template_hashes(texts) == [S.template_hash(t) for t in texts]
    assert W.template_hashes(["", ""]) == [S.template_hash("")] * 2


def test_set_sizes_are_the_same_with_either_key_type():
    """32-bit keys where a unit's (text, word) pairs fit, 64-bit beyond."""
    w = W.words_of(random_texts(2000, seed=3, other=0.1))
    narrow, wide = W.set_sizes(w, np.uint32), W.set_sizes(w, np.int64)
    assert all((a == b).all() for a, b in zip(narrow, wide, strict=True))
    assert narrow[0].sum() > 0 and narrow[1].sum() > 0


def test_empty_inputs():
    w = W.words_of(["", ""])
    assert len(w.ids) == 0 and w.offsets.tolist() == [0, 0, 0]
    assert W.template_hashes([]) == []


def test_long_texts_templates_read_from_a_cut_equal_the_whole_texts():
    """A long observation's template is read up to its first space or newline after
    `TEMPLATE_SCAN` characters (and again from the whole text when the cut's is shorter
    than `TEMPLATE_CHARS`): the same key as `stats.template_hash` on the whole text, for
    ASCII and other texts, whitespace runs and hex runs at the cut, and a text that is
    ASCII only up to the cut."""
    rng = random.Random(4)
    scan = W.TEMPLATE_SCAN
    texts = []
    for k in range(300):
        pieces = ASCII_PIECES + (OTHER_PIECES if k % 3 == 0 else []) + [" ", "\n", "ΑΣ "]
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1500, 4000)))
        texts.append(text)
    texts += [
        "deadbeef " * 600,  # shrinks to '<h> <h> ...': the cut alone is long enough
        "0x1234567 " * 300 + "word " * 10,
        "12345678901234567890" * 150 + " tail",  # one number run past the cut, no space in it
        "a" * (scan - 1) + "  \n\t  " + "b" * 600,  # a whitespace run at the cut
        "x" * (scan + 50),  # nothing to cut at
        "ok " * (scan // 3) + "é" * 2000,  # ASCII up to the cut only
        "0 " * (scan // 2) + "ü " * 300,  # ASCII up to the cut, too short there
        "ΑΣ " * 2000,  # final sigma before each space
        "w " * 255 + "abcdef" * 400 + "g",  # cut inside the run, '<h>' would land at 510
    ]
    assert sum(len(W.template_prefix(t)) < len(t) for t in texts) > 250
    assert W.template_hashes(texts) == [S.template_hash(t) for t in texts]
