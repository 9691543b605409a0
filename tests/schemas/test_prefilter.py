"""`schemas/prefilter.py`: Python patterns rewritten for UTF-8 bytes match wherever Python's
`re` matches, on text beyond ASCII; what cannot be vouched for is refused."""

from __future__ import annotations

import random
import re
import sys

import hyperscan
import pytest
from worldtrace.schemas.prefilter import CASE_FOLDS, bounded, utf8
from worldtrace.schemas.redact import Redactor
from worldtrace.schemas.redact_rules import example_secrets


def compiled(pattern: re.Pattern) -> hyperscan.Database:
    """The screen's reading of one pattern: `utf8`, then `bounded`."""
    text = bounded(utf8(pattern.pattern, pattern.flags))
    flags = hyperscan.HS_FLAG_PREFILTER
    flags |= hyperscan.HS_FLAG_CASELESS if pattern.flags & re.I else 0
    flags |= hyperscan.HS_FLAG_DOTALL if pattern.flags & re.S else 0
    db = hyperscan.Database()
    db.compile(expressions=[text.encode()], ids=[0], elements=1, flags=[flags])
    return db


def hit(db: hyperscan.Database, text: str) -> bool:
    found: list[int] = []
    db.scan(text.encode(), match_event_handler=lambda *a: found.append(a[2]))
    return bool(found)


def test_the_case_folds_are_pythons():
    """Every non-ASCII character Python's case-blind matching takes for an ASCII one."""
    letter = re.compile("[a-zA-Z]", re.I)
    folds: dict[str, set[bytes]] = {}
    for x in range(0x80, sys.maxunicode + 1):
        ch = chr(x)
        if letter.fullmatch(ch):
            for a in "abcdefghijklmnopqrstuvwxyz":
                if re.fullmatch(a, ch, re.I):
                    folds.setdefault(a, set()).add(ch.encode())
    table = {
        a: {bytes(int(h, 16) for h in alt.split("\\x")[1:]) for alt in alts.split("|")}
        for a, alts in CASE_FOLDS.items()
    }
    assert folds == table


ODD = [
    "é", "ü", "ß", "İ", "ı", "\u212a", "ſ", "µ", "\u00a0", "\u2003", "\u3000", "\x1c", "\x1f",
    "٣", "中", "文", "😀", "—", "•", "\u200b", "Ω", "ﬀ",
]  # fmt: skip
"""Characters Python's classes treat otherwise than ASCII bytes: letters (some that
fold to ASCII), spaces, separators, non-ASCII digits, 2-, 3- and 4-byte characters."""

TRICKY = [
    (r"\w{3}-\d{2}", 0, "abc-12"), (r"x.{2}y", 0, "x..y"), (r"x.y", re.S, "xay"),
    (r"kiss\s+me", re.I, "KISS  me"), (r"[\w.]{4}@", 0, "ab.c@"), (r"a\s{2}b", 0, "a  b"),
    (r"[^ab]{3}z", 0, "cdez"), (r"[\s,]+end", 0, " , end"), (r"tok(?i:en)=\S{4}", 0, "token=abcd"),
    (r"(?i)[a-z]{5}!", 0, "ABCDE!"), (r"\W{2}q", 0, "--q"), (r"\D\d?x", 0, "x1x"),
    (r"é{2}x", 0, "ééx"), ("p \\w{2} # comment\n q", re.X, "pabq"), (r"a{,2}b", 0, "aab"),
    (r"(?:ab.){2}c", 0, "ab.ab.c"), (r"^start\w+$", re.M, "start\nstartXY"),
    (r"\bword\b", 0, "a word b"), (r"key[:=]\s*(\w{6,})", re.I, "KEY: abcdef"),
    (r"x\w?y", 0, "xay"), (r"q[^ab]{2}z", 0, "qcdz"), (r"m\s\d", 0, "m 1"),
    (r"[^\s]{2}=", 0, "ab="), (r"(?i)tas[k]", 0, "task"), (r"(?<=\w)key\w{2}", 0, "akeyzz"),
]  # fmt: skip
"""(pattern, flags, a text it matches)."""


def mutations(rng: random.Random, text: str, n: int) -> list[str]:
    """`text` with characters replaced by, and `ODD` characters inserted among, its own."""
    out = []
    for _ in range(n):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(chars) + 1)
            odd = rng.choice(ODD)
            if rng.random() < 0.5 and at < len(chars):
                chars[at] = odd
            else:
                chars.insert(at, odd)
        out.append("".join(chars))
    return out


def samples(pattern: re.Pattern, seeds: list[str], rng: random.Random) -> list[str]:
    """Texts Python's pattern matches, non-ASCII among them."""
    seeds = seeds + [line for _, line in example_secrets(rng.randint(0, 99)).values()]
    texts = [t for s in seeds for t in mutations(rng, s, 200)]
    return [t for t in texts if pattern.search(t)]


@pytest.mark.parametrize("index", range(len(Redactor().detectors) + len(TRICKY)))
def test_the_rewrite_matches_wherever_python_matches(index):
    """Each built-in detector and each tricky pattern, on texts Python matches with
    non-ASCII characters in and around the match."""
    detectors = [(d.regex, "") for d in Redactor().detectors]
    pattern, seed = (detectors + [(re.compile(p, f), s) for p, f, s in TRICKY])[index]
    assert not seed or pattern.search(seed)
    texts = samples(pattern, [seed] if seed else [], random.Random(pattern.pattern))
    assert len(texts) > 10 or not seed  # every tricky pattern is exercised
    assert not seed or any(not t.isascii() for t in texts)
    db = compiled(pattern)
    assert [t for t in texts if not hit(db, t)] == []


def test_what_the_rewrite_cannot_vouch_for_is_refused():
    for pattern, flags in (
        (r"(a)\1", 0), (r"(?P<x>a)(?P=x)", 0), (r"(a)?(?(1)b|c)", 0), (r"[é]", 0),
        (r"[\xe9]", 0), (r"[\351]", 0), (r"[^\W]", 0), (r"café", re.I), (r"(?i:café)", 0),
        (r"a(?x: b )c", 0),
    ):  # fmt: skip
        assert utf8(pattern, flags) is None, pattern
    assert utf8(r"café\w", 0) == r"caf(?:\xc3\xa9)(?:\w|[\x80-\xff]){1,4}"
    assert utf8(r"a\d{2,3}k?", re.I) == r"a(?:\d|[\x80-\xff]){2,12}(?:k|\xe2\x84\xaa)?"
    assert utf8("a b # c\n [ ]", re.X) == "ab[ ]"
    assert utf8(r"a(?<=\w)b(?![^)](x))c", 0) == "abc"  # dropped, as prefilter mode does


def test_the_screen_passes_text_beyond_ascii_that_holds_no_secret():
    """Web pages and Android screens are full of bullets, dashes and accents: with every
    rule rewritten, such text is screened like ASCII, and a secret in it still found."""
    red = Redactor()
    assert red.screen.utf8
    plain = ["• Home — Café", "Größe: 12 cm", "中文页面", "a\x1cb", "naïve 😀", "\u00a0x"]
    assert [red.screen.text(t) for t in plain] == [False] * len(plain)
    token = example_secrets(2)["github_token"][0]
    assert red.screen.text(f"• clé: {token} —") and red.text(f"• clé: {token} —")[1] == 1
