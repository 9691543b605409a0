"""Secrets of known shape, and values we handed over, redacted at every boundary.

Collectors redact what they journal (`redact_payload`) and the trajectory they build,
importers what they read (`redact_trajectory`), and `process` what it writes
(`redact_record`), so raw data recorded under older rules is cleaned with the current
ones. A secret becomes a typed placeholder, `<secret:aws_access_key>`, that keeps the
shape of the text for the world model; values handed to a sandbox (environment
variables, MCP `set_env`, a web storage state) or to the policy (its API key) become
`<secret:env_value>` wherever they appear, also in the escaped forms programs print them
in (`written_forms`: `declare -p`, `json.dumps`, a raw stream kept in JSON). A mapping's
keys are read as its values are (`_keyed`). Texts holding terminal escape sequences are
also read with them taken out (`grep --color` cuts a value in pieces), and texts holding
a line editor's edits as the line shows once they are replayed (`line_edits`: a typed
line wrapped or corrected). What has neither
a known shape nor was handed over (a `.pgpass` line, base64 of an API key) is not found:
docs/security.md, "What is not caught". A record's `redactions` is
the number of placeholders it holds (or the count it came with, if higher), so
redacting twice counts the same.

Rules (which detectors, extra patterns, an allow-list) are a `RedactConfig`
(`redact_rules.py`), read from the YAML file `$WORLDTRACE_REDACT_CONFIG` names, else the
defaults. docs/security.md lists the kinds and the measured false-positive rate.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import datetime
import fnmatch
import functools
import hashlib
import html
import itertools
import json
import os
import re
import string
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ahocorasick
import numpy as np
import pyarrow as pa

try:
    import hyperscan
except ImportError:  # no wheel for this machine (x86-64 only): every record is redacted whole
    hyperscan = None

from . import fields as F
from . import prefilter, records
from .hashing import ID_HEX_CHARS
from .line_edits import TRIGGER, edited, may_be_edited
from .redact_rules import (
    CONFIG_ENV,
    CUT_SHAPES,
    ENV_KIND,
    GENERATED,
    PLACEHOLDER,
    PLACEHOLDER_MARK,
    SCREEN_CACHE,
    Detector,
    RedactConfig,
    RedactPattern,
    detectors,
)
from .steps import STEP_STREAMS, get_field, keystroke_runs, set_stream, stream_text, with_field
from .tempfiles import write_bytes_atomic

__all__ = [
    "ENV_KIND",
    "PLACEHOLDER",
    "RedactConfig",
    "RedactPattern",
    "Redactor",
    "active_config",
    "command_secrets",
    "env_secrets",
    "find_secrets",
    "redact_payload",
    "redact_record",
    "redact_trajectory",
    "redactor",
    "screen",
    "storage_state_values",
    "written_forms",
]

_PLACEHOLDER_RE = re.compile(r"<secret:[a-z0-9_]+>")
_JOIN = "\n\x00\n"
SKIP_KEYS = frozenset({F.TRAJECTORY_ID, F.SCHEMA_VERSION_F, "exact_hash", "cluster_id"})
"""Fields that hold our own hashes and versions: not scanned while they hold one
(`_ours`), so a value handed over never cuts an id (`env_value` inside a hash)."""
OWN_VALUE = re.compile(rf"c?[0-9a-f]{{{ID_HEX_CHARS}}}|[0-9a-f]{{64}}|worldtrace\.[a-z]+/\d+")
"""What those fields hold when we made them: a `trajectory_id` (`hashing.trajectory_id`),
a cluster id (`c` + one), a sha256, a schema version. Anything else there came from
outside (a foreign file, a hand-made row) and is scanned like any field (2026-12-05: a
GitHub token as a Parquet row's `trajectory_id` was reported as 0 secrets)."""


FIELD_NAMES = frozenset(
    f.name
    for cls in vars(records).values()
    if isinstance(cls, type)
    and dataclasses.is_dataclass(cls)
    and cls.__module__ == records.__name__
    for f in dataclasses.fields(cls)
)
"""Our records' field names: keys a record's mapping holds that are never redacted (a
value handed over that spells one, `system`, would cut the record's shape); any other
key is redacted like a value (`_keyed`)."""


def _ours(key: str, value: Any) -> bool:
    """Whether `value` under `key` is our own hash or version: not scanned."""
    return key in SKIP_KEYS and (type(value) is not str or OWN_VALUE.fullmatch(value) is not None)


class _Gates:
    """Which detectors' literals occur in a text. Many literals: one Aho-Corasick pass
    (pyahocorasick, ~8 ns a character); a few: a substring search each (~0.4 ns a
    character per literal). The 40 default case-sensitive literals over a 1.8 KB record:
    31 -> 15 us."""

    AUTOMATON_FROM = 20
    """Literals from which the one pass is the faster (measured break-even: ~19)."""

    def __init__(self, table: dict[str, set[int]]):
        self.automaton = None
        self.literals = [(literal, frozenset(d)) for literal, d in table.items()]
        if len(self.literals) >= self.AUTOMATON_FROM:
            self.automaton = ahocorasick.Automaton()
            for literal, detectors in self.literals:
                self.automaton.add_word(literal, detectors)
            self.automaton.make_automaton()

    def add_hits(self, text: str, hit: set[int]) -> None:
        if self.automaton is None:
            for literal, detectors in self.literals:
                if literal in text:
                    hit |= detectors
        else:
            for _, detectors in self.automaton.iter(text):
                hit |= detectors


@functools.lru_cache(maxsize=8)
def _gating(
    detectors: tuple[Detector, ...],
) -> tuple[list[int], _Gates, _Gates, list[tuple[re.Pattern, set[int]]]]:
    """The detectors always run, and the gates of the others (`Redactor._active`), made
    once per rule set: the table cells' gates are thousands of literals, and a
    redactor made per sandbox (its environment's values) built their automaton again
    (3.5 ms a redactor)."""
    always: list[int] = []
    lits: dict[str, set[int]] = {}
    folded: dict[str, set[int]] = {}
    rxs: dict[re.Pattern, set[int]] = {}
    for i, d in enumerate(detectors):
        if d.gates is None:
            always.append(i)
        for g in d.gates or ():
            table = rxs if not isinstance(g, str) else folded if d.fold else lits
            table.setdefault(g, set()).add(i)
    return always, _Gates(lits), _Gates(folded), list(rxs.items())


PIECE_MIN_CHARS = 8
"""The fewest characters of a handed-over value's start or end that are redacted wherever
they stand (`handed_pieces`; more when `env_min_chars` says so). A shorter piece is the
hint programs show on purpose (a key's last four, `sk-...AbCd`) and tells little of a
key; eight random letters and digits (~48 bits) come about by chance once in ~10^14
places, so a piece that long that reads as generated is the value's, not other text's."""
_PIECE_WORD = frozenset(string.ascii_letters + string.digits)
_PIECE_RUN = re.compile(r"[A-Za-z0-9]{4,}")
_PIECE_CASES = re.compile(r"[a-z][A-Za-z0-9]*[A-Z]")
_PIECE_ESCAPE = re.compile(r"(?:\\[nrtbf]|(?:\x1b|\\u001[bB])\[[0-9;?]*[A-Za-z])\Z")
"""What may end right before a word without being part of it: a JSON escape (`\\n` of a
raw stream kept in `state_json`), or a terminal's colour or erase (`grep --color`)."""


def _generated(piece: str) -> bool:
    """Whether `piece` holds what a generated value holds and words do not: a run of 4 or
    more letters and digits with both, or with a lower-case letter before an upper-case
    one (`Zq8L`, `a7f3`, `bQxY`; not `Password`, `example.com/api/v1`, `2026-12-07`)."""
    return any(
        not (run.isdigit() or run.isalpha()) or _PIECE_CASES.search(run)
        for run in _PIECE_RUN.findall(piece)
    )


def _opens(text: str, at: int) -> bool:
    """Whether a word of `text` may start at `at`."""
    return (
        at == 0
        or text[at - 1] not in _PIECE_WORD
        or _PIECE_ESCAPE.search(text, max(0, at - 24), at) is not None
    )


def _alike(a: str, b: str) -> int:
    """How many characters `a` and `b` start with alike."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _finds(text: str, part: str) -> Iterator[int]:
    """Every index at which `part` starts in `text`, overlapping ones too."""
    at = text.find(part)
    while at >= 0:
        yield at
        at = text.find(part, at + 1)


def handed_pieces(
    text: str, forms: Iterable[str], least: int = PIECE_MIN_CHARS
) -> list[tuple[int, int]]:
    """(start, end) of each piece of a handed-over value in `text`, merged where they meet:
    `least` or more of the start or the end of one of `forms` (the values and the forms
    they are printed in, `Redactor.forms`) that reads as generated (`_generated`) and is a
    word of its own where it stops being the value (nothing but a letter or a digit there
    would go on). A set-up's `echo $KEY | cut -c1-20`, a `${KEY: -12}` or a display's
    `wtk_Zq8Lm3vX...` kept the piece until 12-07 (only our own output cap's cut was read
    as one: `Redactor.cut_tail`); a value's public start (`https://api.example.com/`),
    a word it starts with, or a text that goes on where it parts from the value, stay."""
    found = []
    for form in forms:
        if len(form) <= least:  # the whole value: the redactor's
            continue
        for at in _finds(text, form[:least]):  # its start, as long as the text goes on so
            end = at + _alike(text[at : at + len(form)], form)
            if (end == len(text) or text[end] not in _PIECE_WORD) and _generated(text[at:end]):
                found.append((at, end))
        for at in _finds(text, form[-least:]):  # its end, as far back as the text holds it
            end = at + least
            start = end - _alike(text[max(0, end - len(form)) : end][::-1], form[::-1])
            if _opens(text, start) and _generated(text[start:end]):
                found.append((start, end))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


class Redactor:
    """Finds and replaces secrets in text and in nested records."""

    def __init__(self, config: RedactConfig | None = None, literals: Iterable[str] = ()):
        """`literals`: exact values to redact as `env_value` (a sandbox's environment)."""
        self.config = config or RedactConfig()
        on = self.config.enabled
        self.detectors = detectors(self.config) if on else ()
        allow = [f"(?:{a})" for a in self.config.allow]
        self.allow = re.compile("|".join(allow)) if allow else None
        values = sorted({v for v in literals if v}, key=len, reverse=True) if on else []
        self.values = tuple(values)
        """The values handed over (`env_value`), longest first."""
        forms = {f for v in values for f in written_forms(v)}
        self.forms = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        """The values handed over and the escaped forms programs print them in
        (`written_forms`), longest first: what the literal matches and a cut tail ends."""
        self.literal = re.compile("|".join(map(_literal, self.forms))) if forms else None
        self._always, self._lits, self._folded, self._rxs = _gating(self.detectors)
        # No built-in detector matches fewer than 6 characters (`://:b@`); a text shorter
        # than that and than any environment value is skipped. User patterns may be short.
        self._min_chars = 1 if self.config.patterns else min(6, self.config.env_min_chars)

    @functools.cached_property
    def screen(self) -> _Screen | None:
        """The batch screen of these rules (`_Screen`), None where it cannot vouch."""
        patterns = [d.regex for d in self.detectors]
        patterns += [self.literal] if self.literal is not None else []
        return _Screen.build([*patterns, re.compile(re.escape(PLACEHOLDER_MARK))])

    def _active(self, text: str) -> list[int]:
        """Indexes of the detectors whose gate `text` passes, in priority order."""
        hit = set(self._always)
        self._lits.add_hits(text, hit)
        low = text.lower()
        self._folded.add_hits(low, hit)
        for idxs in [i for g, i in self._rxs if g.search(low) is not None]:
            hit |= idxs
        return sorted(hit)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, kind) of every secret in `text`, merged where they overlap.

        Also those of the text with its terminal escape sequences taken out, and of the
        text as a line editor's edits leave it shown (`line_edits`: readline's wraps,
        backspaces, cursor moves), mapped back from a secret's first character to its
        last, what lies between included: a terminal's raw stream (`grep --color`, a
        prompt's colours, a long or corrected typed line) cuts a value into pieces no rule
        and no literal matches. A text without ESC or its JSON escape pays two substring
        tests for the first; one without an edit one hyperscan pass for the second. A web
        tree's text is also read as its runs of inline text joined (`_InlineText`), and
        the pieces a named element shows below its name are cut where its name was
        (`_shown_pieces`)."""
        found = self._spans(text)
        escapes = _escapes(text)
        stripped = text
        if escapes is not None:
            stripped = escapes.sub("", text)
            if len(stripped) < len(text):
                extra = self._spans(stripped)
                if extra:
                    found = _merged([*found, *_mapped(text, escapes, extra)])
        if _edits_in(text):
            view = edited(text)
            if view.text != stripped:
                extra = self._spans(view.text)
                if extra:
                    found = _merged([*found, *((*view.raw_span(s, e), k) for s, e, k in extra)])
        if _STATIC_MARK in text:
            inline = _InlineText.of(text)
            extra = self._spans(inline.view) if inline is not None else []
            if extra and (pieces := inline.pieces(extra, found, self._whole)):
                found = _merged([*found, *pieces])
            if found and (shown := _shown_pieces(text, found)):
                found = _merged([*found, *shown])
        return found

    def _whole(self, text: str, start: int, end: int) -> bool:
        """Whether the rules read `text[start:end]`, with what precedes it, as one whole
        secret (a value with its name before it)."""
        lo = max(0, start - 1024)
        return any(s == start - lo for s, e, _ in self._spans(text[lo:end]) if e == end - lo)

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        if len(text) < self._min_chars:
            return []
        found: list[tuple[int, int, int, str]] = []
        if self.literal is not None:
            found += [(m.start(), m.end(), 0, ENV_KIND) for m in self.literal.finditer(text)]
        for prio in self._active(text):
            d = self.detectors[prio]
            for m in d.regex.finditer(text):
                if d.cells is not None:  # a column's values below its header
                    spans = d.cells(text, m)
                elif d.group >= 0:
                    spans = [m.span(d.group)]
                else:  # detect-secrets' findall semantics: each non-empty group, else all
                    groups = [i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)] or [0]
                    spans = [m.span(g) for g in groups]
                for s, e in spans:
                    if d.extend and s < e < len(text) and (text[e] in _ALNUM or text[e - 1] == "."):
                        e = _token_end(text, s, e)
                    value = text[s:e]
                    if e <= s or (d.check is not None and not d.check(value)):
                        continue
                    if self.allow is not None and self.allow.fullmatch(value):
                        continue
                    found.append((s, e, prio + 1, d.kind))
        if not found:
            return []
        kept = (
            [p.span() for p in _PLACEHOLDER_RE.finditer(text)] if PLACEHOLDER_MARK in text else []
        )
        # at one start the earliest rule names the secret, the longest match its end: a
        # key of known shape after a name keeps its kind when the name's rule reads on
        # (`GITHUB_TOKEN=ghp_...;x` in a dotenv line, `redact_rules._assigned`)
        found.sort(key=lambda f: (f[0], f[2], f[0] - f[1]))
        return _merged(
            (
                (s, e, kind)
                for s, e, _, kind in found
                if not any(s < pe and ps < e for ps, pe in kept)  # in a placeholder: redacted
            ),
            presorted=True,
        )

    def text(self, text: str) -> tuple[str, int]:
        """`text` with every secret replaced, and how many were."""
        spans = self.spans(text)
        return (_replaced(text, spans), len(spans)) if spans else (text, 0)

    def cut_tail(self, text: str) -> tuple[str, int]:
        """`text`, which our output cap cut at its end, with the start of a secret left
        there replaced, and 1 if one was (else 0).

        A value cut short matches neither its literal nor its shape's rule (`ghp_` + 8
        of 36), yet what is left is part of a secret: so the tail that is a prefix of a
        handed-over value or of a form it is printed in (`written_forms`: `declare -p`
        cut in `Zq8\\"Lm\\$3`; `env_min_chars` or more of it), or a key's literal start
        (`CUT_SHAPES`, a private key's header or body) followed only by its characters,
        becomes a placeholder. Only where a cut is known (`Observation.truncated`): the
        same tail ends ordinary texts too (`sk-` + a word)."""
        if not self.config.enabled or not text:
            return text, 0
        starts = [self._value_cut(text, v) for v in self.forms]
        found = [(s, ENV_KIND) for s in starts if s is not None]
        window = max(0, len(text) - _CUT_WINDOW)
        run = _KEY_RUN.match(text[window:][::-1]).end()  # a cut key lies in the last run
        if run and (m := _CUT_KEY.search(text, len(text) - run)):
            found.append((m.start(), _CUT_KINDS[m.lastgroup]))
        begin = text.rfind("-----BEGIN ", window)
        if begin >= 0 and "-----END" not in text[begin:] and _PEM_CUT.fullmatch(text, begin):
            found.append((begin, "private_key"))
        if not found:
            return text, 0
        start, kind = min(found, key=lambda f: f[0])
        return text[:start] + PLACEHOLDER.format(kind=kind), 1

    def _value_cut(self, text: str, value: str) -> int | None:
        """Where the longest prefix of `value` (`env_min_chars` or more) that ends `text`
        starts, if one does."""
        least = max(self.config.env_min_chars, 1)
        if len(value) < least:
            return None
        head, lo = value[:least], max(0, len(text) - len(value))
        at = text.find(head, lo)
        while at >= 0:  # the first such start is the longest prefix
            n = len(text) - at  # the last character first: no copy where it differs
            if text[-1] == value[n - 1] and text.endswith(value[:n]):
                return at
            at = text.find(head, at + 1)
        return None

    def pieces(self, obj: Any) -> Any:
        """A copy of a nested value (JSON shape) with every piece of a handed-over value
        (`handed_pieces`, at least `PIECE_MIN_CHARS` or `env_min_chars` characters) a
        program printed replaced; `obj` itself when no value was handed over."""
        if not self.forms:
            return obj
        least = max(PIECE_MIN_CHARS, self.config.env_min_chars)

        def walk(o: Any) -> Any:
            if isinstance(o, str):
                spans = handed_pieces(o, self.forms, least)
                if not spans:
                    return o
                out, pos = [], 0
                for start, end in spans:
                    out += [o[pos:start], PLACEHOLDER.format(kind=ENV_KIND)]
                    pos = end
                return "".join([*out, o[pos:]])
            if isinstance(o, dict):
                return {k: walk(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return type(o)(walk(v) for v in o)
            return o

        return walk(obj)

    # -- records -----------------------------------------------------------------------
    def value(self, obj: Any) -> tuple[Any, int]:
        """A copy of a nested value (dicts, lists, tuples, dataclasses, strings) with every
        string redacted, and the number of placeholders it now holds."""
        out, held, _ = self.value_counts(obj)
        return out, held

    def value_counts(self, obj: Any) -> tuple[Any, int, int]:
        """`value`, plus how many secrets this call replaced.

        The strings are first searched joined (a separator no detector crosses keeps
        matches apart): a record without secrets, the common case, is returned as is
        after one pass per detector instead of one per string and detector. A value with
        turns (a trajectory, a record) is then read across its steps (`across_steps`)."""
        strings: list[str] = []
        _collect(obj, strings)
        joined = _JOIN.join(strings)
        held = replaced = 0
        if self.spans(joined):

            def fix(s: str) -> str:
                nonlocal held, replaced
                out, n = self.text(s)
                replaced += n
                held += out.count(PLACEHOLDER_MARK) if n or PLACEHOLDER_MARK in s else 0
                return out

            obj = _map_strings(obj, fix)
        else:
            held = joined.count(PLACEHOLDER_MARK)
        if isinstance(turns := get_field(obj, F.TURNS), list):
            turns, added = self.across_steps(turns)
            if added:
                obj, held, replaced = (
                    with_field(obj, F.TURNS, turns),
                    held + added,
                    replaced + added,
                )
        return obj, held, replaced

    def record(self, d: dict[str, Any], unscreened: Iterable[str] | None = None) -> dict[str, Any]:
        """A record dict (Arrow row or JSON shape) redacted, with `redactions` set.

        `unscreened`: the record's strings were screened (`screen`) and none may hold a
        secret, except possibly these: it is redacted whole only if one of them may."""
        if unscreened is not None and self.screen is not None:
            texts = [t for t in unscreened if t]
            if not any(self.screen.text(t) for t in texts):
                return {**d, F.REDACTIONS: d.get(F.REDACTIONS) or 0}  # as below, nothing held
        out, n = self.value(d)
        return {**out, F.REDACTIONS: max(n, d.get(F.REDACTIONS) or 0)}

    def across_steps(self, turns: list[Any]) -> tuple[list[Any], int]:
        """`turns` (dicts or `Turn`s) with every secret a step boundary cut replaced, and
        how many placeholders that added.

        A terminal's steps are one session cut in time: keys typed over several steps
        (`ghp_AbCd` now, the rest next), output cut where a step stopped waiting. Along
        each run of keystroke steps the keys, the observations and the raw streams
        (`state_json.raw`) are each read joined; a secret found across a boundary is
        replaced in every text holding a piece of it. Texts are redacted one by one
        before (`value_counts`); here only what crosses a boundary is left to find."""
        out = list(turns)
        added = 0
        for i, (part, name, key), pieces in self.step_pieces(out):
            holder = get_field(out[i], part)
            text = _replaced(stream_text(holder, name, key), pieces)
            out[i] = with_field(out[i], part, set_stream(holder, name, key, text))
            added += len(pieces)
        return out, added

    def step_pieces(
        self, turns: list[Any]
    ) -> Iterator[tuple[int, tuple[str, str, str | None], list[tuple[int, int, str]]]]:
        """(turn, stream, spans in that turn's text) of every piece of a secret a step
        boundary cut (`across_steps`)."""
        for run in keystroke_runs(turns):
            for stream in STEP_STREAMS:
                part, name, key = stream
                pieces = [stream_text(get_field(turns[i], part), name, key) for i in run]
                cuts = list(itertools.accumulate(map(len, pieces), initial=0))
                crossing = [
                    (s, e, kind)
                    for s, e, kind in self.spans("".join(pieces))
                    if bisect.bisect_right(cuts, s) != bisect.bisect_left(cuts, e)
                ]
                for k, i in enumerate(run):
                    lo, hi = cuts[k], cuts[k + 1]
                    mine = [(max(s, lo) - lo, min(e, hi) - lo, kind) for s, e, kind in crossing]
                    if mine := [m for m in mine if m[0] < m[1]]:
                        yield i, stream, mine


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    parts, pos = [], 0
    for s, e, kind in spans:
        parts += [text[pos:s], PLACEHOLDER.format(kind=kind)]
        pos = e
    return "".join([*parts, text[pos:]])


def _merged(
    spans: Iterable[tuple[int, int, str]], presorted: bool = False
) -> list[tuple[int, int, str]]:
    """Spans in order, overlapping ones as one secret of the first one's kind (by start,
    then the longest; `presorted`: so already, priority breaking ties)."""
    if not presorted:
        spans = sorted(spans, key=lambda f: (f[0], f[0] - f[1]))
    out: list[list[Any]] = []
    for s, e, kind in spans:
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e, kind])
    return [(s, e, k) for s, e, k in out]


_CUT_KINDS = {f"k{i}": kind for i, (kind, *_) in enumerate(CUT_SHAPES)}


def _cut_alternatives(anywhere: bool) -> str:
    return "|".join(
        f"(?P<k{i}>(?:{lit})[{chars}]+)"
        for i, (_, lit, chars, inside) in enumerate(CUT_SHAPES)
        if inside == anywhere
    )


_CUT_KEY = re.compile(  # a start as `_start` takes it (also after a JSON escape), or a URL's user
    r"(?:(?:(?<![A-Za-z0-9_+/-])|(?<=\\[bfnrt])|(?<=\\u[0-9A-Fa-f]{4})|(?<=://)"
    rf"|(?:(?<=[+/-])|(?<=%[0-9A-Fa-f]{{2}}))(?:{GENERATED}))"
    f"(?:{_cut_alternatives(False)})|{_cut_alternatives(True)})\\Z"
)
_KEY_RUN = re.compile(r"[A-Za-z0-9_.+/=-]*")
"""Characters of every key in `CUT_SHAPES`: a cut key lies in the last run of them."""
_CUT_WINDOW = 20_100
"""How far from its end a cut key is looked for: a private key's body is taken to 20,000."""


def _prefixes(word: str) -> str:
    """A regex of every prefix of `word`, the longest first."""
    return "|".join(re.escape(word[:i]) for i in range(len(word), -1, -1))


_PEM_CUT = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*(?:PRIVATE KEY(?: BLOCK)?-----(?:\\[nrt]|[A-Za-z0-9+/=:,.\s-])*"
    + f"|{_prefixes('PRIVATE KEY BLOCK-----')}|{_prefixes('PRIVATE KEY-----')})"
)
"""A private key block cut in its header or its body (the built-in rule's classes)."""

_ALNUM = frozenset(string.ascii_letters + string.digits)
_B64URL_RUN = re.compile(r"[A-Za-z0-9_-]*")
_CLASS = {
    **dict.fromkeys(string.ascii_lowercase, 0),
    **dict.fromkeys(string.ascii_uppercase, 1),
    **dict.fromkeys(string.digits, 2),
}


def _token_end(text: str, start: int, end: int) -> int:
    """Where the token of a match `text[start:end]` ends: past every following character
    of the classes (lower case, upper case, digits) its last run of letters and digits
    holds. `sk_live_` + 24 of a 99-character key goes to the 99th; hex stays hex. A match
    ending in `.` goes over the base64url run after it: detect-secrets' JWT rule is lazy
    after its payload's `.` and left the signature (2026-12-07, a hunt)."""
    if text[end - 1] == ".":
        return _B64URL_RUN.match(text, end).end()
    i = end
    while i > start and text[i - 1] in _ALNUM:
        i -= 1
    classes = {_CLASS[c] for c in text[i:end]}
    n = len(text)
    while end < n and _CLASS.get(text[end]) in classes:
        end += 1
    return end


_ESC_BODY = (
    r"(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erases, modes
    r"|\][^\x07\x1b\n\xff]{0,512}?(?:\x07|\\u0007|\x1b\\|\\u001[bB]\\\\)"  # OSC ... BEL, ST
    r"|[()*+][A-Za-z0-9]"  # character sets
    r"|[=>78DEHMNOZc])"  # two-character sequences
)
_ESC_LEADS = {  # ESC as it stands, and its JSON escape (a raw stream kept in `state_json`)
    (True, False): r"\x1b",
    (False, True): r"\\u001[bB]",
    (True, True): r"(?:\x1b|\\u001[bB])",
}
_ESCAPES = {k: re.compile(lead + _ESC_BODY) for k, lead in _ESC_LEADS.items()}
_ESCAPES_B = {k: re.compile((lead + _ESC_BODY).encode()) for k, lead in _ESC_LEADS.items()}
"""Terminal escape sequences (ECMA-48 CSI and OSC, charset and two-character ones), raw
or JSON-escaped: what a terminal's raw stream interleaves with the text it shows. By
which forms a text holds: a pattern led by its literal is searched ~6x faster."""


def _escapes(text: str) -> re.Pattern | None:
    """The escape-sequence pattern for the forms `text` holds (None: neither)."""
    raw, js = "\x1b" in text, "\\u001" in text
    return _ESCAPES[raw, js] if raw or js else None


def _mapped(
    text: str, escapes: re.Pattern, spans: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """Spans of `text` with its `escapes` taken out, as spans of `text`."""
    starts: list[int] = []  # where each kept piece starts, taken out and in `text`
    origins: list[int] = []
    pos = n = 0
    for m in escapes.finditer(text):
        a, b = m.span()
        if a > pos:
            starts.append(n)
            origins.append(pos)
            n += a - pos
        pos = b
    starts.append(n)
    origins.append(pos)

    def at(i: int) -> int:
        k = bisect.bisect_right(starts, i) - 1
        return origins[k] + i - starts[k]

    return [(at(s), at(e - 1) + 1, kind) for s, e, kind in spans]


_STATIC_MARK = "StaticText "
_STATIC_TEXT = re.compile(
    r"StaticText (?<![^\t\n]StaticText )"
    r"(?:'([^'\\\n]*(?:\\.[^'\\\n]*)*)'|\"([^\"\\\n]*(?:\\.[^\"\\\n]*)*)\")$",
    re.M,
)
"""A `StaticText` line of a web observation's accessibility tree (`web_axtree`: one for
each text node, its name as Python's `repr` writes it); group 1 or 2 is the text."""
_INLINE_ROLES = (
    "code", "strong", "emphasis", "mark", "time", "subscript", "superscript", "deletion",
    "insertion", "Abbr",
)  # fmt: skip
_INLINE_LINE = r"(?:\[[^\]\n]{1,40}\] )?(?:" + "|".join(_INLINE_ROLES) + r") ''"
_INLINE_GAP = re.compile(rf"(?:\n\t*{_INLINE_LINE})*\n\t*")
"""What lies between two `StaticText` lines of one run of inline text: a newline and an
indent, and any number of lines of inline elements with no name of their own (`[7] mark
''`, `code ''`: `<mark>`, `<code>`, `<strong>`, `<em>`; a `<span>`, `<b>`, `<i>` make no
line at all), none less indented than the run's first piece or the inline elements it
opens in (`_InlineText.of`). A block's line (`paragraph ''`), a link's, a named or valued
element's, ends the run, and so does a line less indented (text after the block)."""
_GAP_LINES = re.compile(r"\n(\t*)")
_OPENED_BY = re.compile(rf"(\t*){_INLINE_LINE}\n")
_KEY_START = re.compile("|".join(f"(?:{lit})" for _, lit, _, _ in CUT_SHAPES))
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_+/-")
_TAIL = re.compile(r"(?=[^\s]*(?:\d|[a-z][^\s]*[A-Z]|[A-Z][^\s]*[a-z]))[A-Za-z0-9_+/=.-]{8,}")
"""A piece that reads as the rest of a key, not a word: 8 or more of a key's characters
holding a digit or both cases (`Rt1Vw3Yb…`, `Ij90Kl12…`)."""


def _depth(text: str, at: int) -> int:
    """How many tabs indent the line whose text starts at `at`."""
    i = at
    while i > 0 and text[i - 1] == "\t":
        i -= 1
    return at - i


def _floor(text: str, at: int, depth: int) -> int:
    """The least indent of a run of inline text whose first piece's line (indented `depth`)
    starts at `at`: that of the inline elements it opens in (`[7] mark ''` right above,
    one tab less each), else its own."""
    while at > 0:
        start = text.rfind("\n", 0, at - 1) + 1
        m = _OPENED_BY.fullmatch(text, start, at)
        if m is None or len(m.group(1)) != depth - 1:
            break
        at, depth = start, depth - 1
    return depth


class _InlineText:
    """The runs of text a web page shows inline, joined: Chromium's accessibility tree
    gives every text node its own `StaticText` line, so a key a page splits over inline
    elements (syntax highlighting's spans, a search hit's `<mark>`, `<b>sk-proj-…</b><i>…
    </i>`) is in pieces no rule matches (2026-12-06, a hunt: four keys so split reached the
    raw, processed and exported data, and `redact --check` found none). A run's pieces are
    joined as the page draws them, with nothing between (their names are trimmed, so a
    blank between two words is lost too), but for a newline before a piece that starts
    like a key of known shape (`CUT_SHAPES`) after one ending in a key character (`Your
    key` + `sk-ant-…`: a key's start must follow no key character). Read joined, as
    `Redactor.across_steps` reads a terminal's steps."""

    __slots__ = ("origins", "starts", "view")

    def __init__(self, view: str, starts: list[int], origins: list[int]):
        self.view = view
        self.starts = starts
        """Where each piece starts in `view` (and where the view ends, last)."""
        self.origins = origins
        """Where each piece starts in the text (-1: a separator of ours)."""

    @classmethod
    def of(cls, text: str) -> _InlineText | None:
        """The runs of two or more pieces of `text`, each joined, runs apart (`_JOIN`);
        None if there is none."""
        runs: list[list[tuple[int, int]]] = []
        run: list[tuple[int, int]] = []
        last = first = 0
        floor = None  # the run's least indent, found when a second piece would join it
        for m in _STATIC_TEXT.finditer(text):
            at = m.start()
            joined = False
            if run:
                indent = text.count("\t", last + 1, at) == at - last - 1  # the next line
                if indent or _INLINE_GAP.fullmatch(text, last, at) is not None:
                    if floor is None:
                        depth = _depth(text, first)
                        floor = _floor(text, first - depth, depth)
                    if indent:
                        joined = at - last - 1 >= floor
                    else:
                        gaps = _GAP_LINES.finditer(text, last, at)
                        joined = all(len(g[1]) >= floor for g in gaps)
            if not joined:
                if len(run) > 1:
                    runs.append(run)
                run, first, floor = [], at, None
            run.append(m.span(1 if m.start(1) >= 0 else 2))
            last = m.end()
        if len(run) > 1:
            runs.append(run)
        if not runs:
            return None
        parts: list[str] = []
        starts: list[int] = []
        origins: list[int] = []

        n = 0

        def add(part: str, origin: int) -> None:
            nonlocal n
            starts.append(n)
            origins.append(origin)
            parts.append(part)
            n += len(part)

        for r in runs:
            if parts:
                add(_JOIN, -1)
            prev = ""
            for a, b in r:
                piece = text[a:b]
                if prev and prev[-1] in _KEY_CHARS and _KEY_START.match(piece):
                    add("\n", -1)
                add(piece, a)
                prev = piece
        starts.append(n)
        return cls("".join(parts), starts, origins)

    def pieces(
        self,
        spans: list[tuple[int, int, str]],
        found: list[tuple[int, int, str]],
        whole: Callable[[str, int, int], bool],
    ) -> list[tuple[int, int, str]]:
        """The spans of the text, one per piece, of each secret of `spans` (spans of
        `view`) that crosses a piece's end, or that lies in one piece and the text's own
        spans (`found`) lack (a value whose name is in the element before: `Password:`
        + `<code>Hn4$kQ9!wLp2</code>`). A secret that is `whole` (a complete one to the
        rules) before the last piece it reaches ends before it, unless it takes all of
        that piece and the piece reads as a key's tail (`_TAIL`): a key and the word or
        the stop after it (`ghp_…` + `is invalid`, read `ghp_…is`; `password=secr3t` +
        `.`), not a key's tail in the next element."""
        out: list[tuple[int, int, str]] = []
        for s, e, kind in spans:
            first = bisect.bisect_right(self.starts, s) - 1
            last = bisect.bisect_left(self.starts, e) - 1
            parts = []
            for k in range(first, last + 1):
                lo, hi, at = self.starts[k], self.starts[k + 1], self.origins[k]
                a, b = max(s, lo), min(e, hi)
                if at >= 0 and a < b:
                    parts.append((at + a - lo, at + b - lo, kind, a == lo and b == hi, lo))
            if (
                len(parts) > 1
                and not (parts[-1][3] and _TAIL.fullmatch(self.view, parts[-1][4], e))
                and whole(self.view, s, parts[-1][4])
            ):
                parts.pop()  # read on into a word of the next element
            if len(parts) == 1:
                a, b = parts[0][:2]
                if any(a < fe and fs < b for fs, fe, _ in found):
                    continue  # the piece's own: found already
            out += [(a, b, kind) for a, b, kind, _, _ in parts]
        return out


_NAMED_LINE = re.compile(
    r"(\t*)(?:\[[^\]\n]{1,40}\] )?[A-Za-z]+ "
    r"(?:'([^'\\\n]*(?:\\.[^'\\\n]*)*)'|\"([^\"\\\n]*(?:\\.[^\"\\\n]*)*)\")"
)
"""A node's line of a web tree and its name (`web_axtree`: `[5] link 'NAME', url=...`,
`cell 'NAME'`, `button 'NAME'`): group 1 its indent, 2 or 3 its name as `repr` writes it."""
_STATIC_LINE = re.compile(_STATIC_TEXT.pattern.replace("StaticText ", r"\t*StaticText ", 1))


def _shown_pieces(text: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans of the `StaticText` pieces below a web tree's named element that show part of
    a secret `found` in its name. An element's name is its text joined (a link's, a
    cell's, a button's), and the tree shows below it only the pieces that are not part of
    its own text node's name (`web_axtree`: one in a `<span>`, a `<code>`): so
    `<a><span>ghp_Zx8K…</span>Rt1V…</a>` is `link 'ghp_Zx8K…Rt1V…'` and `StaticText
    'ghp_Zx8K…'`, and the piece kept 16 characters of the key its parent's name lost
    (2026-12-06, z: a link's, a table cell's and a button's). Each piece is found in the
    name after the one before it; what of it lies in a secret of the name is replaced."""
    out: list[tuple[int, int, str]] = []
    seen: set[int] = set()
    n = len(text)
    for s, _, _ in found:
        start = text.rfind("\n", 0, s) + 1
        if start in seen or (m := _NAMED_LINE.match(text, start)) is None:
            continue
        seen.add(start)
        g = 2 if m.start(2) >= 0 else 3
        a, b = m.span(g)
        secrets = [(fs - a, fe - a, k) for fs, fe, k in found if fs < b and a < fe]
        if not secrets:
            continue
        name, below, cursor = text[a:b], m.group(1) + "\t", 0
        pos = text.find("\n", b) + 1
        while 0 < pos < n and text.startswith(below, pos):  # its subtree: indented more
            end = text.find("\n", pos)
            end = n if end < 0 else end
            if (piece := _STATIC_LINE.fullmatch(text, pos, end)) is not None:
                pg = 1 if piece.start(1) >= 0 else 2
                pa, pb = piece.span(pg)
                at = name.find(text[pa:pb], cursor) if pb > pa else -1
                if at >= 0:
                    cursor = at + pb - pa
                    for fs, fe, k in secrets:
                        lo, hi = max(fs, at), min(fe, cursor)
                        if lo < hi:
                            out.append((pa + lo - at, pa + hi - at, k))
            pos = end + 1
    return out


class _Screen:
    """Which strings may hold a secret, for a whole batch in one pass of C: a record none
    of whose strings may is returned as it is, without the walk and the per-record gates
    (~80 us of a 1.9 KB record in `process`, against ~5 us a record here).

    Hyperscan (PyPI `hyperscan`) compiles every detector's regex in prefilter mode, which
    matches a superset of what the regex matches (lookarounds dropped), with bounded
    repeats of more than `prefilter.WIDE_FROM` widened to unbounded (a superset too: the
    private key's 20,000-character body took minutes to compile as it was) and the
    assertions on a match's surroundings dropped (`prefilter.CONTEXT`): a column's strings
    are scanned back to
    back, so no string is read in its neighbours' context. Python reads code points and
    hyperscan bytes: every rule is first rewritten for UTF-8 text (`prefilter.utf8`), and
    where one cannot be (`utf8` False) the screen vouches only for ASCII text without the
    separators \\x1c-\\x1f (Python's `\\s` matches them, PCRE's does not), where the two
    agree: any other string counts as a hit, as a placeholder always does, and its record
    takes the full path. A pattern hyperscan refuses, or one whose syntax it reads
    otherwise (`_FOREIGN`), turns the screen off: every record takes the full path, as
    before it existed.

    Rewriting and compiling take ~100 ms, which every run paid on its critical path; the
    compiled database is kept in the user's cache (`SCREEN_CACHE`), named by the hash of
    the rules and of the code that rewrites them (`_rules_key`), and loads in ~4 ms.
    """

    _FLAGS = {re.I: "HS_FLAG_CASELESS", re.M: "HS_FLAG_MULTILINE", re.S: "HS_FLAG_DOTALL"}
    _KNOWN = re.I | re.M | re.S | re.U | re.A | re.X
    _FOREIGN = re.compile(r"\[([:=.])[^\]]*\1\]|\\[NuU]")
    """What Python and PCRE read differently: `[:alpha:]`, `[=a=]`, `[.a.]` (PCRE's
    classes, characters to Python) and Python's `\\N{name}`, `\\u`, `\\U` escapes."""

    def __init__(self, db: Any, utf8: bool = False):
        self.rules = _Scanner(db)
        self.utf8 = utf8
        """Every rule rewritten for UTF-8 text (`prefilter.utf8`); else only ASCII text
        without the separators is screened, and any other string counts as a hit."""
        _edits()  # ~2 ms: with the rest, in a worker's warm-up

    @classmethod
    def build(cls, patterns: list[re.Pattern]) -> _Screen | None:
        if hyperscan is None:
            return None
        # kept by what it is made from: the rewriting and compiling cost ~100 ms a
        # process (`prefilter` in Python ~40 ms), a load ~4 ms
        made = _cache_home() / SCREEN_CACHE / f"{_rules_key(patterns)}.hsdb"
        with contextlib.suppress(OSError, hyperscan.error):
            data = made.read_bytes()
            db = hyperscan.loadb(data[1:], hyperscan.HS_MODE_BLOCK)
            return cls(db, data[:1] == b"u")
        screen = cls._build(patterns)
        if screen is not None:
            with contextlib.suppress(OSError):  # a read-only home: made again next time
                write_bytes_atomic(
                    made, (b"u" if screen.utf8 else b"a") + hyperscan.dumpb(screen.rules.db)
                )
        return screen

    @classmethod
    def _build(cls, patterns: list[re.Pattern]) -> _Screen | None:
        if any(
            not isinstance(p.pattern, str)
            or prefilter.folds_to_ascii(p.pattern, p.flags)
            or p.flags & ~cls._KNOWN
            or cls._FOREIGN.search(p.pattern)
            for p in patterns
        ):
            return None
        wide = [prefilter.utf8(p.pattern, p.flags) for p in patterns]
        utf8 = all(w is not None for w in wide)  # else ASCII text only (`text`, `_strings`)
        exprs, flags = [], []
        for p, w in zip(patterns, wide, strict=True):
            verbose = bool(p.flags & re.X) and not utf8  # `utf8` drops spaces and comments
            text = prefilter.bounded(w if utf8 else p.pattern, verbose)
            exprs.append((f"(?x){text}\n" if verbose else text).encode())  # PCRE's (?x)
            f = hyperscan.HS_FLAG_PREFILTER
            for bit, name in cls._FLAGS.items():
                f |= getattr(hyperscan, name) if p.flags & bit else 0
            flags.append(f)
        db = hyperscan.Database()
        try:
            db.compile(
                expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags
            )
        except hyperscan.error:
            return None
        return cls(db, utf8)

    def _scan(self, data: Any, found: list[int] | None) -> bool:
        """Hit end offsets of `data` into `found`, or (found None) whether there is one."""
        if found is None:
            return self.rules.scan(data, _stop)
        self.rules.scan(data, lambda i, s, e, f, c: found.append(e - 1))
        return bool(found)

    def text(self, text: str) -> bool:
        """Whether `text` may hold a secret or a placeholder (also once its escape
        sequences are taken out: `Redactor.spans`)."""
        if not self.utf8 and (not text.isascii() or any(c in text for c in _SEPARATORS)):
            return True
        data = text.encode()
        return (
            self._scan(data, None)
            or self._unescaped(data)
            or self._edited(text)
            or self._inline(text)
        )

    def _inline(self, text: str) -> bool:
        """Whether the runs of inline text of a web page's tree, joined, may hold a secret
        (`_InlineText`, read as `_inline_joined` reads them)."""
        if _STATIC_MARK not in text:
            return False
        views = _inline_joined(text.encode())
        return bool(views) and any(self._scan(v, None) for v in views)

    def _edited(self, text: str) -> bool:
        """Whether `text` as a line editor's edits leave it shown may hold a secret."""
        return _edits_in(text) and self._scan(edited(text).text.encode(), None)

    def _unescaped(self, data: bytes) -> bool:
        """Whether `data` with its escape sequences taken out may hold a secret."""
        raw, js = b"\x1b" in data, b"\\u001" in data
        if not (raw or js):
            return False
        stripped = _ESCAPES_B[raw, js].sub(b"", data)
        return len(stripped) < len(data) and self._scan(stripped, None)

    def rows(self, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of `batch`, whether any string of it may hold a secret or placeholder."""
        out = np.zeros(batch.num_rows, bool)
        rows = np.arange(batch.num_rows)
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name not in SKIP_KEYS:
                self._mark(column, rows, out)
        return out

    def _mark(self, arr: pa.Array, rows: np.ndarray, out: np.ndarray) -> None:
        t = arr.type
        if pa.types.is_struct(t):
            for i, f in enumerate(t):
                if f.name not in SKIP_KEYS:
                    self._mark(arr.field(i), rows, out)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            offsets = arr.offsets.to_numpy()  # into the unsliced children
            inner = np.repeat(rows, np.diff(offsets))
            start, size = int(offsets[0]), int(offsets[-1] - offsets[0])
            for child in (arr.keys, arr.items) if pa.types.is_map(t) else (arr.values,):
                self._mark(child.slice(start, size), inner, out)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            self._strings(arr, rows, out)
        elif not (pa.types.is_primitive(t) or pa.types.is_null(t) or pa.types.is_binary(t)):
            out[rows] = True  # strings in a shape not read here (dictionary, view): whole path

    def _strings(self, arr: pa.Array, rows: np.ndarray, out: np.ndarray) -> None:
        if not len(arr):
            return
        width = 8 if pa.types.is_large_string(arr.type) else 4
        _, offs_buf, data = arr.buffers()
        offsets = np.frombuffer(offs_buf, f"<i{width}", len(arr) + 1, arr.offset * width)
        start, stop = int(offsets[0]), int(offsets[-1])
        if stop <= start:
            return
        b = np.frombuffer(data, np.uint8, stop - start, start)
        found: list[int] = []
        self._scan(b, found)  # the column's strings back to back: `prefilter.CONTEXT`
        at = np.asarray(found, np.int64)
        if not self.utf8:  # non-ASCII, \x1c-\x1f
            at = np.concatenate([np.flatnonzero((b >= 0x80) | ((b & 0xFC) == 0x1C)), at])
        at += start
        if len(at):
            out[rows[np.searchsorted(offsets, at, side="right") - 1]] = True
        self._escaped(b, start, offsets, rows, out)
        self._line_edits(b, start, offsets, rows, out)
        self._inline_runs(b, start, offsets, rows, out)

    def _escaped(
        self, b: np.ndarray, start: int, offsets: np.ndarray, rows: np.ndarray, out: np.ndarray
    ) -> None:
        """Flag the rows of strings that may hold a secret once their escape sequences
        (ESC, or `\\u001b` in JSON text) are taken out. A column without one costs two
        vector compares; else the strings that hold one (of rows not flagged yet) are
        joined, their sequences cut out in one `sub` (~2 ns a byte) and the rest scanned
        in one call."""
        esc = np.flatnonzero(b == 0x1B)
        slash = np.flatnonzero(b[:-5] == 0x5C)
        if len(slash):
            slash = slash[
                (b[slash + 1] == 0x75)  # u001b, u001B
                & (b[slash + 2] == 0x30)
                & (b[slash + 3] == 0x30)
                & (b[slash + 4] == 0x31)
                & ((b[slash + 5] | 0x20) == 0x62)
            ]
        if not len(esc) and not len(slash):
            return
        at = np.concatenate([esc, slash]) + start
        strings = _unflagged(at, offsets, rows, out)
        if not len(strings):
            return
        joined = b"\xff".join(_pieces(b, start, offsets, strings))
        stripped = _ESCAPES_B[bool(len(esc)), bool(len(slash))].sub(b"", joined)
        if len(stripped) < len(joined):  # else an ESC in no sequence
            self._flag_joined(stripped, strings, rows, out)

    def _flag_joined(
        self, joined: bytes, strings: np.ndarray, rows: np.ndarray, out: np.ndarray
    ) -> None:
        """Scan `joined`, the texts of `strings` joined by 0xFF (which no UTF-8 text holds
        and no sequence takes), back to back as the column (`prefilter.CONTEXT`), and flag
        the rows of those with a hit: a hit's string is the number of 0xFF before it."""
        found: list[int] = []
        self._scan(joined, found)
        if found:
            cuts = np.flatnonzero(np.frombuffer(joined, np.uint8) == 0xFF)
            out[rows[strings[np.searchsorted(cuts, np.asarray(found, np.int64))]]] = True

    def _line_edits(
        self, b: np.ndarray, start: int, offsets: np.ndarray, rows: np.ndarray, out: np.ndarray
    ) -> None:
        """Flag the rows of strings that may hold a secret as a line editor's edits leave
        them shown (`line_edits`). The edits are found by one hyperscan pass over the
        column (~0.5 us a record of the bench corpus, which holds none); the strings that
        hold one (of rows not flagged yet) are replayed one by one and what they show is
        scanned in one call."""
        ends: list[int] = []
        _edits().scan(b, lambda i, s, e, f, c: ends.append(e - 1))
        if not ends:
            return
        strings = _unflagged(np.asarray(ends, np.int64) + start, offsets, rows, out)
        kept: list[int] = []
        shown: list[bytes] = []
        for k, piece in enumerate(_pieces(b, start, offsets, strings)):
            text = bytes(piece).decode("utf-8", "replace")
            view = edited(text).text  # the column's pass found its edit: no second search
            if view != text:
                kept.append(k)
                shown.append(view.encode())
        if shown:
            self._flag_joined(b"\xff".join(shown), strings[kept], rows, out)

    def _inline_runs(
        self, b: np.ndarray, start: int, offsets: np.ndarray, rows: np.ndarray, out: np.ndarray
    ) -> None:
        """Flag the rows of strings whose runs of inline text, joined, may hold a secret
        (`_InlineText`: a web observation's tree). A column without a `StaticText` line
        costs one literal search; else its strings that hold one (of rows not flagged yet)
        are read as `_inline_joined` reads them, and what that gives scanned in one call
        each (+~115 us a 24 KB tree of the git-doc pages, whose own scan costs ~65)."""
        at: list[int] = []  # the first `StaticText` of each string holding one
        pos = 0
        while (m := _STATIC_MARK_B.search(b, pos)) is not None:
            at.append(m.start() + start)
            pos = int(offsets[np.searchsorted(offsets, at[-1], side="right")]) - start
        if not at:
            return
        strings = _unflagged(np.asarray(at, np.int64), offsets, rows, out)
        kept: list[int] = []
        views: list[tuple[bytes, bytes]] = []
        for k, piece in enumerate(_pieces(b, start, offsets, strings)):
            if joined := _inline_joined(piece):
                kept.append(k)
                views.append(joined)
        for i in range(2):
            if views:
                self._flag_joined(b"\xff".join(v[i] for v in views), strings[kept], rows, out)


_STATIC_MARK_B = re.compile(rb"StaticText ")
"""Where a column's strings hold a `StaticText` line (`_Screen._inline_runs`)."""
_STATIC_TEXT_B = re.compile(_STATIC_TEXT.pattern.encode(), re.M)


def _inline_joined(data: Any) -> tuple[bytes, bytes] | tuple[()]:
    """For the batch screen, a superset of the runs `_InlineText` joins in a UTF-8 text:
    every `StaticText` piece of it joined with nothing between, and with a newline
    between (where `_InlineText` puts one: a key's start after a key character); () when
    it holds fewer than two. Every run is a substring of one of the two (prefilter mode
    reads no lookaround), but for a secret that crosses both a newline `_InlineText` put
    and a piece's end it did not (`Bearer` + `sk-…` + a tail: none is known). One
    `findall` of C, ~200 MB/s, where cutting the line breaks out (`re.sub`) ran ~70."""
    pieces = [a or b for a, b in _STATIC_TEXT_B.findall(data)]
    return (b"".join(pieces), b"\n".join(pieces)) if len(pieces) > 1 else ()


def _unflagged(at: np.ndarray, offsets: np.ndarray, rows: np.ndarray, out: np.ndarray) -> Any:
    """The strings of a column holding the byte positions `at` (in `offsets`' terms),
    less those whose rows are flagged already: they need no second look."""
    strings = np.unique(np.searchsorted(offsets, at, side="right") - 1)
    return strings[~out[rows[strings]]]


def _pieces(b: np.ndarray, start: int, offsets: np.ndarray, strings: np.ndarray) -> list[Any]:
    """The bytes of `strings` of a column (`b` its data from `start`), as views."""
    view = memoryview(b)
    lo = (offsets[strings] - start).tolist()
    hi = (offsets[strings + 1] - start).tolist()
    return [view[x:y] for x, y in zip(lo, hi, strict=True)]


def _rules_key(patterns: list[re.Pattern]) -> str:
    """What a screen's database is made from (`_Screen.build`): the rules, hyperscan's
    version and the code that rewrites them (this module and `prefilter`)."""
    h = hashlib.sha256(
        repr((hyperscan.__version__, [(p.pattern, p.flags) for p in patterns])).encode()
    )
    for module in (__file__, prefilter.__file__):
        h.update(Path(module).read_bytes())
    return h.hexdigest()[:32]


class _Scanner:
    """A hyperscan database and a scratch space for each thread that scans with it (a
    scratch is one thread's)."""

    def __init__(self, db: Any):
        self.db = db
        self._local = threading.local()

    def scan(self, data: Any, on_match: Callable[..., Any]) -> bool:
        """Scan `data`, `on_match` called for each hit; True if it stopped the scan."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self.db)
        try:
            self.db.scan(data, match_event_handler=on_match, scratch=scratch)
        except hyperscan.ScanTerminated:
            return True
        return False


_SEPARATORS = "\x1c\x1d\x1e\x1f"


@functools.cache
def _edits() -> _Scanner:
    """`line_edits.TRIGGER` for hyperscan: where strings hold an edit."""
    db = hyperscan.Database()
    db.compile(expressions=[TRIGGER.pattern.encode()], ids=[0], elements=1, flags=[0])
    return _Scanner(db)


def _edits_in(text: str) -> bool:
    """`line_edits.may_be_edited`, by hyperscan where there is one: ~0.5 ns a character
    against Python's regex's ~25, paid by every text the full path reads."""
    if hyperscan is None:
        return may_be_edited(text)
    return _edits().scan(text.encode("utf-8", "surrogatepass"), _stop)


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _stop(*_: Any) -> bool:
    return True  # the first hit answers a yes-or-no question


def screen(batch: pa.RecordBatch) -> np.ndarray:
    """Per row of `batch` (records as Arrow rows), whether it must be redacted whole: its
    strings may hold a secret or a placeholder under the active rules (all True when the
    screen cannot vouch for these rules, `_Screen`)."""
    s = redactor().screen
    return s.rows(batch) if s is not None else np.ones(batch.num_rows, bool)


def _map_strings(obj: Any, fn) -> Any:
    """`obj` with `fn` applied to every string: values, and the keys of its mappings
    (`_keyed`; also an Arrow map's `(key, value)` pairs, as a row holds `metadata`)."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        items = [(k, v if _ours(k, v) else _map_strings(v, fn)) for k, v in obj.items()]
        return dict(_keyed(items, fn))
    if isinstance(obj, list) and _pairs(obj):
        return _keyed([(k, _map_strings(v, fn)) for k, v in obj], fn)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_strings(v, fn) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: _map_strings(v, fn)
            for f in dataclasses.fields(obj)
            if not _ours(f.name, v := getattr(obj, f.name))
        }
        return dataclasses.replace(obj, **changes)
    return obj


def _pairs(items: list[Any]) -> bool:
    """Whether `items` are an Arrow map's entries as a row holds them: `(key, value)`
    tuples with string keys (no JSON value is a tuple)."""
    return bool(items) and all(
        type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in items
    )


def _keyed(items: list[tuple[Any, Any]], fn) -> list[tuple[Any, Any]]:
    """A mapping's `(key, value)` items with each string key but our field names
    (`FIELD_NAMES`) redacted by `fn`: a secret used as a key (`{"metadata":
    {"ghp_...": "owner token"}}`) was kept in raw data until 2026-12-06, as only values
    were read.

    Keys redacted to the same text (two GitHub tokens, each `<secret:github_token>`), or
    to a key the mapping already holds, stay distinct entries: the key a redaction changed
    takes ` (2)`, ` (3)`, ... after it, in the mapping's order, and a key no redaction
    changed keeps its name. No entry is lost, and the result is the same when redacted
    again (a placeholder and its suffix hold no secret)."""
    keys = [fn(k) if type(k) is str and k not in FIELD_NAMES else k for k, _ in items]
    changed = [new != k for new, (k, _) in zip(keys, items, strict=True)]
    if not any(changed):
        return items
    taken = {new for new, c in zip(keys, changed, strict=True) if not c}
    out = []
    for new, c, (_, v) in zip(keys, changed, items, strict=True):
        if c:
            key, n = new, 1
            while key in taken:
                n += 1
                key = f"{new} ({n})"
            taken.add(key)
            new = key
        out.append((new, v))
    return out


_LEAVES = frozenset({type(None), bool, int, float, bytes, datetime.datetime, datetime.date})
"""Values that hold no string: skipped without a call (most of a record's values)."""


def _collect(obj: Any, out: list[str]) -> None:
    """Append every string of a nested value to `out` (the fast path's walk: no paths,
    no generators, no call for a number)."""
    t = type(obj)
    if t is str:
        out.append(obj)
    elif t is dict:
        for k, v in obj.items():
            if k in FIELD_NAMES:  # the set tests first: most keys are ours
                if k in SKIP_KEYS and _ours(k, v):
                    continue
            elif type(k) is str:  # a key of no field of ours: read as a value (`_keyed`)
                out.append(k)
            tv = type(v)
            if tv is str:
                out.append(v)
            elif tv not in _LEAVES:
                _collect(v, out)
    elif t is list or t is tuple:
        for v in obj:
            tv = type(v)
            if tv is str:
                out.append(v)
            elif tv not in _LEAVES:
                _collect(v, out)
    elif hasattr(t, "__dataclass_fields__") and not isinstance(obj, type):
        for name in t.__dataclass_fields__:
            if not _ours(name, v := getattr(obj, name)):
                _collect(v, out)


def _walk_strings(obj: Any, path: str, red: Redactor | None = None) -> Iterator[tuple[str, str]]:
    """(field path, string) of every string of a nested value. With `red`, also every
    mapping's keys but our field names (`_keyed`), each as its entry's path, and every
    key in a path as `red` redacts it: a path never shows a secret used as a key."""
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if _ours(k, v):
                continue
            name = str(k) if red is None or k in FIELD_NAMES else red.text(str(k))[0]
            at = f"{path}.{name}" if path else name
            if red is not None and type(k) is str and k not in FIELD_NAMES:
                yield at, k
            yield from _walk_strings(v, at, red)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk_strings(v, f"{path}[{i}]", red)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if not _ours(f.name, v := getattr(obj, f.name)):
                yield from _walk_strings(v, f"{path}.{f.name}" if path else f.name, red)


def find_secrets(obj: Any, red: Redactor | None = None) -> Iterator[tuple[str, str]]:
    """(field path, kind) of every secret left in a nested value; never the secret."""
    red = red or redactor()
    for path, s in _walk_strings(obj, "", red):
        for _, _, kind in red.spans(s):
            yield path, kind
    turns = get_field(obj, F.TURNS)
    if isinstance(turns, list):  # pieces of a secret a step boundary cut
        for i, (part, name, key), pieces in red.step_pieces(turns):
            where = f"{F.TURNS}[{i}].{part}.{name}" + (f".{key}" if key else "")
            for _, _, kind in pieces:
                yield where, kind


# -- environment values handed to sandboxes ------------------------------------------
_SHELL_SPECIAL = frozenset(" \t\n'\"\\|&;()<>!{}*[]?^$`,")
"""What bash's `printf %q` puts a backslash before (`#` only first, `~` only first or
after `=` or `:`)."""
_HEX_ESCAPE = re.compile(r"(?<=\\u)[0-9a-f]{4}")


def _printf_q(value: str) -> str:
    """`value` as bash's `printf %q` (and `set -x`'s backslash form) writes one of
    printable characters: `Zq8\\"Lm\\$3vX9pR\\!w`."""
    out = []
    for i, c in enumerate(value):
        first = i == 0
        if (
            c in _SHELL_SPECIAL
            or (c == "#" and first)
            or (c == "~" and (first or value[i - 1] in "=:"))
        ):
            out.append("\\")
        out.append(c)
    return "".join(out)


_ANSI_C = {
    "\a": "\\a", "\b": "\\b", "\x1b": "\\E", "\f": "\\f", "\n": "\\n", "\r": "\\r",
    "\t": "\\t", "\v": "\\v", "'": "\\'", "\\": "\\\\",
}  # fmt: skip


def _ansi_c(value: str, wide: bool) -> str:
    """What bash's `$'...'` holds for `value` (`declare -p`, `printf %q` and `${X@Q}` of a
    value with a control character, and in the C locale, docker's default, of one beyond
    ASCII: `$'P\\303\\244ssw...'`); `wide`: such characters as they are (a UTF-8 locale)."""
    out = []
    for c in value:
        if c in _ANSI_C:
            out.append(_ANSI_C[c])
        elif (c.isascii() or wide) and c.isprintable():
            out.append(c)
        else:
            out.extend(f"\\{b:03o}" for b in c.encode("utf-8", "surrogatepass"))
    return "".join(out)


def _json_bodies(value: str) -> tuple[str, ...]:
    """What a JSON string of `value` holds between its quotes: `json.dumps` with and
    without `ensure_ascii`, PHP's `json_encode` (`/` as `\\/`) and Go's (`<`, `>`, `&`
    as `\\u003c`, ...)."""
    ascii_, utf8 = json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]
    go = utf8.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return ascii_, utf8, ascii_.replace("/", "\\/"), go


_URL_SAFE = ("", "/", "-_.!~*'()")
"""What percent-encoders leave as it is, beyond letters, digits and `_.-~`: Python's
`quote(safe="")`, its default `quote(value)` (`/`: a URL's path), JavaScript's
encodeURIComponent."""
_PCT = re.compile(r"%[0-9A-F]{2}")
_HTML_QUOTES = (("&quot;", "&#x27;"), ("&#34;", "&#39;"), ("&quot;", "&#039;"), ('"', "'"))
"""How HTML escapers write `"` and `'`: Python's `html.escape`, Jinja/markupsafe, PHP's
`htmlspecialchars`, and `html.escape(quote=False)`."""


def _url_forms(value: str) -> set[str]:
    """`value` percent-encoded as a URL's path or query or a form body holds it: Python's
    `quote`/`quote_plus` and JavaScript's `encodeURIComponent` (`_URL_SAFE`), each with
    the hex in capitals and in lower case (Go, some clients)."""
    out = set()
    for safe in _URL_SAFE:
        for quote in (urllib.parse.quote, urllib.parse.quote_plus):
            form = quote(value, safe=safe)
            out |= {form, _PCT.sub(lambda m: m[0].lower(), form)}
    return out


def _html_forms(value: str) -> set[str]:
    """`value` as HTML text holds it (`_HTML_QUOTES`): a page's source or a template's
    output shows `&amp;`, `&lt;`, `&quot;` where the value has `&`, `<`, `"`."""
    out = set()
    for dq, sq in _HTML_QUOTES:  # `html.escape(quote=False)` leaves both quotes
        out.add(html.escape(value, quote=False).replace('"', dq).replace("'", sq))
    return out


def written_forms(value: str) -> frozenset[str]:
    """`value` and the escaped forms in which programs print it: a value handed over is
    a secret in each (2026-12-06, a hunt: `Zq8"Lm$3vX9pR!w` leaked as `declare -p`,
    `json.dumps` and a raw stream kept in JSON print it, `Zq8\\"Lm\\$3v...`,
    `Zq8\\"Lm$3v...`; about a third of random passwords hold `"` or `\\`).

    The forms: a JSON string's (`_json_bodies`), Python's `repr` and a C-like string's in
    either quote (`\\\\`, `\\"`, `\\'`), a shell's double quotes (`declare -p`, `set`:
    `\\"`, `\\\\`, `\\$`, `` \\` ``), `printf %q`'s backslashes, a shell's single quotes
    (`${X@Q}`'s `'\\''`, `shlex.quote`'s `'"'"'`) and bash's `$'...'` (`_ansi_c`); each
    also as a JSON string holds it (a terminal's raw stream in `state_json`, a command in
    `arguments_json`: plain `env` there reads `Zq8\\"Lm`), and a `\\u` escape's hex also
    in capitals; percent-encoded in a URL or a form (`_url_forms`: `curl
    --data-urlencode`, a token in a query string) and as HTML text (`_html_forms`), each
    of those missed before 12-06; a value of several lines also as a terminal prints it,
    each `\\n` a `\\r\\n` (2026-12-07, a hunt: `printf '%s\\n' "$MULTI"` in a terminal
    kept the value in `state_json.raw`). A value of letters and digits has one form,
    itself."""
    c_like = value.replace("\\", "\\\\")
    base = {
        value,
        *_json_bodies(value),
        repr(value)[1:-1],
        c_like.replace('"', '\\"'),
        c_like.replace("'", "\\'"),
        c_like.replace('"', '\\"').replace("$", "\\$").replace("`", "\\`"),
        _printf_q(value),
        value.replace("'", "'\\''"),
        value.replace("'", "'\"'\"'"),
    }
    if "\n" in value:  # a tty's output (`ONLCR`): each `\n` printed as `\r\n`
        crlf = value.replace("\r\n", "\n").replace("\n", "\r\n")
        base |= {crlf, *_json_bodies(crlf)}
    base |= _url_forms(value) | _html_forms(value)
    if not (value.isascii() and value.isprintable()):
        base |= {_ansi_c(value, wide=False), _ansi_c(value, wide=True)}
    forms = base | {b for f in base for b in _json_bodies(f)[:2]}
    return frozenset(forms | {_HEX_ESCAPE.sub(lambda m: m[0].upper(), f) for f in forms})


def _literal(form: str) -> str:
    """A regex of `form` exactly, a backslash written `[\\\\]`: the batch screen refuses a
    rule holding `\\u`, `\\N` or `\\U`, which `re.escape` writes for `\\u00e4` or
    `C:\\Users` (`_Screen._FOREIGN`)."""
    return "".join("[\\\\]" if c == "\\" else re.escape(c) for c in form)


def env_secrets(source: Any, config: RedactConfig | None = None) -> list[str]:
    """Values of the environment a sandbox (or a config, or a policy) hands to what it
    starts, and the other values handed over as they are: they are secrets wherever
    they appear (`<secret:env_value>`).

    Found by shape, so every kind is covered: an object's `resolved_env()` (DockerConfig),
    any `env` or `set_env` mapping (values: MCP's `set_env`), any `env` tuple of names
    (looked up here), an `api_key_env` name (a policy's key), a `storage_state` (a
    Playwright storage-state file or mapping: every cookie and localStorage value), the
    values of credential options in a `command` (`command_secrets`: an MCP server's
    `--api-key V`), followed through `config` and nested dataclasses. A value that cannot
    be resolved (a missing env file, an unreadable state file) is skipped: the sandbox
    cannot have received it either. `env_keep` names and values shorter than
    `env_min_chars` stay.
    """
    config = config or active_config()
    out: dict[str, str] = {}
    seen: set[int] = set()
    handed: list[str] = []  # values with no variable name (env_keep does not apply)

    def visit(o: Any, depth: int) -> None:
        if o is None or depth > 6 or id(o) in seen or isinstance(o, (str, bytes, int, float)):
            return
        seen.add(id(o))
        resolve = getattr(o, "resolved_env", None)
        if callable(resolve):
            with contextlib.suppress(OSError, ValueError, KeyError):
                out.update(resolve())
        env = getattr(o, "env", None)
        if isinstance(env, Mapping):
            out.update({str(k): str(v) for k, v in env.items() if v is not None})
        elif isinstance(env, (list, tuple)) and not callable(resolve):
            out.update({n: os.environ[n] for n in env if isinstance(n, str) and n in os.environ})
        set_env = getattr(o, "set_env", None)
        if isinstance(set_env, Mapping):
            out.update({str(k): str(v) for k, v in set_env.items() if v is not None})
        key_env = getattr(o, "api_key_env", None)
        if isinstance(key_env, str) and key_env in os.environ:
            out[key_env] = os.environ[key_env]
        state = getattr(o, "storage_state", None)
        if isinstance(state, (str, os.PathLike, Mapping)):
            handed.extend(storage_state_values(state, config))
        command = getattr(o, "command", None)
        if isinstance(command, (list, tuple)):
            handed.extend(command_secrets(command))
        visit(getattr(o, "config", None), depth + 1)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            for f in dataclasses.fields(o):
                if f.name not in ("env", "config"):
                    visit(getattr(o, f.name), depth + 1)
        elif isinstance(o, (list, tuple)):
            for v in o:
                visit(v, depth + 1)

    visit(source, 0)
    keep = {k for k in config.env_keep if "*" not in k}
    globs = [k for k in config.env_keep if "*" in k]

    def kept(name: str) -> bool:
        return name in keep or any(fnmatch.fnmatchcase(name, g) for g in globs)

    values = {v for k, v in out.items() if not kept(k)} | set(handed)
    return sorted(v for v in values if len(v) >= config.env_min_chars)


_CREDENTIAL_OPTION = re.compile(
    r"--(?:[a-z0-9]+-)*(?:token|secret|password|passwd|pass|pwd|api-?key|apikey|access-key"
    r"|secret-key|private-key|auth-key|license-key|credentials?)(?:=(.*))?",
    re.I | re.S,
)
"""A command-line option naming a credential (`--api-key`, `--token`, `--db-password`,
`--client-secret`), its value after `=` or as the next argument; not `--token-file`,
`--key-file`, `--password-stdin` (a name ending in another word)."""
_NOT_HANDED = re.compile(r"-|[$%{<\[]|\.{0,2}/|~|[\w.-]*\.[A-Za-z][A-Za-z0-9]{0,4}$")
"""An option's value that is no credential: the next option, a variable, a template or a
placeholder, a path, a file's name."""


def command_secrets(argv: Iterable[Any]) -> list[str]:
    """The values of credential options in a command a sandbox runs (an MCP server's
    `command`: `[srv.py, --api-key, V, --token=W]`): values handed over, as an
    environment's are (2026-12-06, a hunt: the server printed its `--api-key` and the key
    reached the store, and `environment.config` records the command). Only those: the
    other arguments (the script, ports, paths, `--repository {workdir}`) are ordinary text
    every observation may show, and values of no credential's shape (a path, a variable,
    the next option, a file's name) stay."""
    args = [a for a in argv if isinstance(a, str)]
    out = []
    for i, arg in enumerate(args):
        m = _CREDENTIAL_OPTION.fullmatch(arg)
        if m is None:
            continue
        value = m.group(1) if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
        value = (value or "").strip("\"'")
        if value and not _NOT_HANDED.match(value):
            out.append(value)
    return out


_HELD_NAMES = re.compile(r"token|secret|passw|auth|session|jwt|credential|api_?key", re.I)
"""Keys of a stored JSON value whose strings are credentials (a bare `token` too: an
app's `{"token": ...}` in localStorage is one, unlike a tokenizer's in free text)."""


def _held_in_json(value: str, config: RedactConfig) -> list[str]:
    """The secrets inside a stored value that is a JSON object or array (`{"access_token":
    "...", "expires_at": ...}`): what the rules find in its text, and the strings under a
    key naming a credential. A page shows or sends the token, not the whole blob (until
    2026-12-06 only the whole value was a literal, and the token reached the store)."""
    if not value.lstrip().startswith(("{", "[")):
        return []
    try:
        doc = json.loads(value)
    except ValueError:
        return []
    found = [value[a:b] for a, b, _ in _redactor(config, ()).spans(value)]
    for path, v in _walk_strings(doc, ""):
        key = re.sub(r"(?:\[\d+\])+$", "", path).rsplit(".", 1)[-1]  # the string's own key
        if _HELD_NAMES.search(key):
            found.append(v)
    return found


def storage_state_values(
    state: str | os.PathLike | Mapping, config: RedactConfig | None = None
) -> list[str]:
    """Every cookie value and localStorage value of a Playwright storage state (a file's
    path, or its mapping), and the secrets inside one that is JSON (`_held_in_json`);
    none of a file that cannot be read as one."""
    if not isinstance(state, Mapping):
        try:
            state = json.loads(Path(state).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
    if not isinstance(state, Mapping):
        return []

    def values(items: Any) -> list[str]:
        items = items if isinstance(items, list) else []
        return [str(i["value"]) for i in items if isinstance(i, Mapping) and i.get("value")]

    out = values(state.get("cookies"))
    for origin in state.get("origins") or []:
        if isinstance(origin, Mapping):
            out += values(origin.get("localStorage"))
    config = config or active_config()  # the rules in force find what the JSON holds
    return out + [v for value in out for v in _held_in_json(value, config)]


# -- the active rules ------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _config_at(path: str, mtime_ns: int) -> RedactConfig:
    return RedactConfig.load(path)


def active_config() -> RedactConfig:
    """The YAML file `$WORLDTRACE_REDACT_CONFIG` names (re-read when it changes), else
    the defaults."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return _DEFAULT
    return _config_at(path, Path(path).stat().st_mtime_ns)


_DEFAULT = RedactConfig()


@functools.lru_cache(maxsize=32)
def _redactor(config: RedactConfig, literals: tuple[str, ...]) -> Redactor:
    return Redactor(config, literals)


def redactor(env_source: Any = None, config: RedactConfig | None = None) -> Redactor:
    """The redactor of the active rules, plus the environment values of `env_source`."""
    config = config or active_config()
    literals = tuple(env_secrets(env_source, config)) if env_source is not None else ()
    return _redactor(config, literals)


# -- the boundary hooks (one call each in collectors, importers and process) -------------
def redact_payload(payload: dict[str, Any], env_source: Any = None) -> dict[str, Any]:
    """A journal entry (header, turn or end, JSON shape) with its secrets replaced;
    `env_source` is the sandbox whose environment values are secrets too."""
    return redactor(env_source).value(payload)[0]


def redact_trajectory(t: Any, env_source: Any = None) -> Any:
    """A Trajectory redacted, `redactions` set and the id recomputed if text changed."""
    out, held, replaced = redactor(env_source).value_counts(t)
    out = dataclasses.replace(out, redactions=max(held, t.redactions or 0))
    return out.with_id() if replaced else out


def redact_record(d: dict[str, Any], unscreened: Iterable[str] | None = None) -> dict[str, Any]:
    """A record dict (Arrow row shape, as `process` carries it) redacted with the current
    rules, `redactions` set (`Redactor.record`, `unscreened` included). The id is left to
    the caller (process recomputes it)."""
    return redactor().record(d, unscreened)
