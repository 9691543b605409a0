"""Python regexes rewritten as byte patterns that match at least as much in UTF-8 text.

The redaction screen (`redact._Screen`) scans UTF-8 bytes with hyperscan, which reads
PCRE. On ASCII text the two agree once `bounded` has done its rewrites; on
other text Python matches code points and hyperscan bytes. `utf8` rewrites a pattern so
that wherever Python matches in a text, the rewrite matches in the text's bytes:

- an atom that can match a non-ASCII character in Python (`.`, `\\w`, `\\d`, `\\s` and
  their negations, a negated class, a class holding one of those, and a class that
  matches `i`, `k` or `s` without regard to case) also matches every byte from 0x80
  (`\\s` also the separators 0x1c-0x1f, spaces to Python), and counts up to 4 bytes for
  each character Python counts: `{m,n}` becomes `{m,4n}`, `?` `{0,4}`, a bare atom
  `{1,4}`;
- a letter that Python's case-blind matching folds to a non-ASCII character (`CASE_FOLDS`)
  also matches that character's bytes;
- a non-ASCII literal is written as its bytes, grouped, so a repeat takes all of them;
- a verbose pattern loses its spaces and comments (`_unverbose`);
- lookarounds are dropped (prefilter mode drops them: kept, a widened lookbehind would
  not compile).

What it cannot vouch for is refused (None): backreferences, conditionals, a non-ASCII
character inside a class, a negated class holding a negated escape (`[^\\W]` is `\\w`),
a non-ASCII character matched without regard to case, a verbose group in a pattern that
is not verbose as a whole. Hand-written because no library
translates Python's `re` to PCRE for bytes; `tests/schemas/test_prefilter.py` checks
rewrites against Python's own `re` on random UTF-8 text. `bounded`, applied to every
pattern after, writes what PCRE reads otherwise or too slowly.
"""

from __future__ import annotations

import re

WIDE_FROM = 64
"""Bounded repeats longer than this are widened to unbounded (`bounded`)."""
CONTEXT = {"\\b": "", "\\B": "", "\\A": "", "\\Z": "", "^": "", "$": ""}
"""What reads a match's surroundings, dropped (a superset, as lookarounds are dropped
in prefilter mode): the screen scans a column's strings back to back, so each string's
start and end would be read in its neighbours' context (`Bearer <token>` after a
string ending in a letter had no `\\b` before it, and passed)."""
HIGH = r"[\x80-\xff]"
"""Any byte of a multi-byte UTF-8 character."""
CASE_FOLDS = {"i": r"\xc4\xb0|\xc4\xb1", "k": r"\xe2\x84\xaa", "s": r"\xc5\xbf"}
"""The ASCII letters Python's case-blind matching folds to non-ASCII characters (the
dotted and dotless i U+0130 and U+0131, the Kelvin sign U+212A, the long s U+017F),
with those characters' UTF-8 bytes (`test_prefilter` checks the table against `re`)."""
_WIDE_ESCAPES = {
    r"\w": rf"(?:\w|{HIGH})",
    r"\d": rf"(?:\d|{HIGH})",
    r"\s": r"(?:\s|[\x1c-\x1f\x80-\xff])",
    r"\W": r"\W",  # bytes from 0x80 are not ASCII word, digit or space bytes: matched
    r"\D": r"\D",
    r"\S": r"\S",
}
_INLINE_I = re.compile(r"\(\?[aiLmsux-]*i")
_LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")
_QUANTIFIER = re.compile(r"(?:([*+?])|\{(\d*)(,?)(\d*)\})([?+]?)")
_CLASS_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|.)", re.S)
_REPEAT = re.compile(r"\{(\d*),(\d*)\}")


def caseless(pattern: str, flags: int) -> bool:
    """Whether any part of `pattern` may match without regard to case."""
    return bool(flags & re.I) or _INLINE_I.search(pattern) is not None


def bounded(pattern: str, verbose: bool = False) -> str:
    """`pattern` with each repeat `{m,n}` outside a character class widened where n >
    `WIDE_FROM` (the private key's 20,000-character body took minutes to compile as it
    was), Python's `{,n}` written `{0,n}` and `{,}` `{0,}` (PCRE reads them as text), and
    the assertions on a match's surroundings dropped (`CONTEXT`); a verbose pattern's
    comments are kept as they are."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" or (c == "#" and verbose):
            end = i + 2 if c == "\\" else (pattern.find("\n", i) + 1 or len(pattern))
            text = pattern[i:end]  # an escape, or a comment to the end of its line
            out.append(CONTEXT.get(text, text))
            i = end
        elif c == "[":
            end = _class_end(pattern, i)
            out.append(pattern[i:end])  # members, whatever they spell
            i = end
        elif c in "^$":
            i += 1  # `CONTEXT`
        elif m := _REPEAT.match(pattern, i):
            low, high = m.group(1) or "0", m.group(2)
            wide = not high or int(high) > WIDE_FROM
            out.append(f"{{{low},}}" if wide else f"{{{low},{high}}}")
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def folds_to_ascii(pattern: str, flags: int) -> bool:
    """A non-ASCII character matched without regard to case: Python folds some to ASCII
    (the Kelvin sign U+212A matches `k`; `ſ` matches `s`), PCRE on bytes does not; no
    screen can vouch for such a pattern, even on ASCII text."""
    return not pattern.isascii() and caseless(pattern, flags)


def utf8(pattern: str, flags: int) -> str | None:
    """`pattern` (read with `flags`, less `re.X`) for UTF-8 bytes, or None."""
    blind = caseless(pattern, flags)
    if flags & re.X:
        pattern = _unverbose(pattern)
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c, wide = pattern[i], False
        if c == "\\":
            tok = pattern[i : i + 4] if pattern.startswith("\\x", i) else pattern[i : i + 2]
            if (tok[1:2].isdigit() and tok[1] != "0") or tok in (r"\g", r"\k"):
                return None  # a backreference
            if not tok.isascii() or (tok.startswith(r"\x") and int(tok[2:], 16) >= 0x80):
                if blind:
                    return None
                atom = _bytes_of(tok[1] if not tok.startswith(r"\x") else chr(int(tok[2:], 16)))
            else:
                wide = tok in _WIDE_ESCAPES
                atom = _WIDE_ESCAPES.get(tok, tok)
            i += len(tok)
        elif c == "[":
            end = _class_end(pattern, i)
            rewritten = _class(pattern[i:end], blind)
            if rewritten is None:
                return None
            atom, wide = rewritten
            i = end
        elif c == "(":
            end = _group_start_end(pattern, i)
            if end is None:
                return None
            if pattern.startswith(_LOOKAROUNDS, i):  # dropped, as prefilter mode drops them
                i = _group_end(pattern, end)
                continue
            out.append(pattern[i:end])
            i = end
            continue
        elif c in "|)^$":
            out.append(c)
            i += 1
            continue
        elif c == ".":
            atom, wide, i = ".", True, i + 1
        elif not c.isascii():
            if blind:
                return None
            atom, i = _bytes_of(c), i + 1
        else:
            fold = CASE_FOLDS.get(c.lower()) if blind else None
            atom, i = (f"(?:{c}|{fold})" if fold else c), i + 1
        m = _QUANTIFIER.match(pattern, i)
        if m and (m.group(1) or m.group(2) or m.group(3)):
            out.append(atom + (_widened(m) if wide else m.group(0)))
            i = m.end()
        else:
            out.append(atom + ("{1,4}" if wide else ""))
    return "".join(out)


def _bytes_of(char: str) -> str:
    return "(?:" + "".join(f"\\x{b:02x}" for b in char.encode()) + ")"


def _widened(m: re.Match) -> str:
    """The quantifier of an atom that counts bytes where Python counts characters."""
    sign, low, comma, high, mode = m.groups()
    if sign == "?":
        return "{0,4}" + mode
    if sign:
        return sign + mode
    low = low or "0"
    if not comma:
        return f"{{{low},{4 * int(low)}}}{mode}"
    return (f"{{{low},{4 * int(high)}}}" if high else f"{{{low},}}") + mode


def _class_end(pattern: str, start: int) -> int:
    """Index after the `]` that closes the class opening at `start`."""
    j = start + 1 + (pattern[start + 1 : start + 2] == "^")
    if pattern[j : j + 1] == "]":  # a leading `]` is a member
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _class(text: str, blind: bool) -> tuple[str, bool] | None:
    """A class for bytes, and whether it can match a non-ASCII character in Python."""
    negated = text.startswith("[^")
    escapes = _CLASS_ESCAPE.findall(text)
    if not text.isascii() or any(
        (e.startswith(r"\x") and int(e[2:], 16) >= 0x80) or e[1] in "1234567" for e in escapes
    ):
        return None  # a non-ASCII member (`\351` is octal for `é` in a class)
    if negated:
        if any(e in (r"\W", r"\D", r"\S") for e in escapes):
            return None  # `[^\W]` is `\w`: it leaves out the bytes from 0x80
        return text, True  # bytes from 0x80 are not among its members: matched
    if r"\s" in escapes:
        return rf"(?:{text}|[\x1c-\x1f\x80-\xff])", True
    folds = blind and any(re.fullmatch(text, ch, re.I) for ch in "iks")
    if folds or any(e in _WIDE_ESCAPES for e in escapes):
        return f"(?:{text}|{HIGH})", True
    return text, False


def _group_start_end(pattern: str, i: int) -> int | None:
    """Index after the opening syntax of the group at `i` (`(`, `(?:`, `(?P<name>`, a
    lookaround, inline flags, a comment); None for a backreference or a conditional."""
    if pattern[i + 1 : i + 2] != "?":
        return i + 1
    rest = pattern[i + 2 :]
    if rest.startswith(("P=", "(")):
        return None
    if rest.startswith(("#", "P<")):
        end = pattern.find(")" if rest[0] == "#" else ">", i)
        return None if end < 0 else end + 1
    for opener in (":", "=", "!", "<=", "<!", ">"):
        if rest.startswith(opener):
            return i + 2 + len(opener)
    m = re.match(r"[aiLmsux]*(?:-[imsx]+)?[:)]", rest)
    if m is None or (i > 0 and "x" in m.group(0)):
        return None  # verbose in part: its spaces and comments are not dropped here
    return i + 2 + m.end()


def _group_end(pattern: str, i: int) -> int:
    """Index after the `)` closing the group whose body starts at `i`."""
    depth = 1
    while i < len(pattern) and depth:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
            continue
        depth += (c == "(") - (c == ")")
        i += 1
    return i


def _unverbose(pattern: str) -> str:
    """A verbose pattern without the spaces and comments Python skips (outside classes,
    not escaped)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "[":
            end = _class_end(pattern, i)
            out.append(pattern[i:end])
            i = end
        elif c == "#":
            nl = pattern.find("\n", i)
            i = n if nl < 0 else nl + 1
        elif c.isspace():
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)
