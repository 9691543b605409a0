"""Rendering trajectories as chat text with the character span of every observation.

Actions are user turns, observations assistant turns (DESIGN.md). Built-in templates
are rendered directly; a user Jinja template is rendered with invisible sentinels
around each message's content that are then removed, so spans are exact for any template
that places the content verbatim.

The rendered text (`RenderedText`) also knows which of its characters are content (the
system prompt, actions, observations) rather than template: the encoder reads special
tokens only in the template's text, so an observation that contains `<|im_end|>` or
`<|endoftext|>` is tokenized as the characters it is, not as the marker.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldtrace.schemas import fields as F

SYSTEM_HEADERS = {
    "action_space": "# Action space",
    "initial_state": "# Initial state",
    "demonstrations": "# Demonstrations",
}


def system_text(system: dict[str, Any] | None) -> str:
    """task description + action space + initial state + demonstrations + simulation
    instruction; absent parts are left out with their headers."""
    system = system or {}
    parts = []
    for name in F.SYSTEM_FIELDS:
        value = system.get(name)
        if not value:
            continue
        header = SYSTEM_HEADERS.get(name)
        parts.append(f"{header}\n{value}" if header else value)
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Span:
    turn: int
    """Turn index in the trajectory."""
    turn_start: int
    """Where the turn (its action message) begins in the text."""
    start: int
    end: int
    eot_start: int
    """Character span of the end-of-turn marker right after the observation (may be empty)."""
    eot_end: int


class RenderedText(str):
    """Rendered text that knows its content: `content` holds the (start, end) character
    spans, flattened and in order, of the text the template did not write (system prompt,
    actions, observations; empty ones left out). `tokens.Encoder` recognises special
    tokens only outside them. Slicing or concatenating gives a plain `str`, which the
    encoder reads as the tokenizer does."""

    content: tuple[int, ...]

    def __new__(cls, text: str, content: tuple[int, ...] | list[int]) -> RenderedText:
        self = super().__new__(cls, text)
        self.content = tuple(content)
        return self

    def __reduce__(self):
        return RenderedText, (str(self), self.content)


def content_text(text: str) -> RenderedText:
    """`text` as content from end to end (a system prompt measured alone): no special
    token is read in it."""
    return RenderedText(text, (0, len(text)) if text else ())


@dataclass(frozen=True)
class Rendered:
    text: str
    """A `RenderedText` as `Template.render` returns it."""
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Template:
    name: str
    starts: dict[str, str]
    """Text opening a message, per role."""
    end: str
    """Text closing every message."""
    eot: str
    """The part of `end` that is the model's end-of-turn (a target when enabled)."""
    source: str | None = None
    """Jinja source, for user templates."""

    @property
    def markers(self) -> tuple[str, ...]:
        """The special-token markers a built-in template writes (`<|im_start|>`,
        `<|im_end|>`), in order; none for `plain` and for a Jinja template (whose text is
        the user's, written for their tokenizer)."""
        if self.source is not None:
            return ()
        found = re.findall(r"<\|[^|<>\s]+\|>", "".join([*self.starts.values(), self.end]))
        return tuple(dict.fromkeys(found))

    @property
    def sha256(self) -> str:
        body = self.source if self.source is not None else repr((self.starts, self.end, self.eot))
        return hashlib.sha256(body.encode()).hexdigest()

    def render(self, system: str, turns: list[dict[str, Any]]) -> Rendered:
        if self.source is not None:
            return _render_jinja(self, system, turns)
        user, assistant, end = self.starts["user"], self.starts["assistant"], self.end
        n_eot = len(self.eot)
        out: list[str] = [self.starts["system"], system, end] if system else []
        content: list[int] = [len(out[0]), len(out[0]) + len(system)] if system else []
        pos = sum(map(len, out))
        spans = []
        for t in turns:  # plain appends: this loop runs for every turn of the corpus
            action, obs = t["action"]["text"], t["observation"]["text"]
            turn_start = pos
            act = pos + len(user)
            start = act + len(action) + len(end) + len(assistant)
            stop = start + len(obs)
            out += (user, action, end, assistant, obs, end)
            pos = stop + len(end)
            spans.append(Span(t["index"], turn_start, start, stop, stop, stop + n_eot))
            if action:
                content += (act, act + len(action))
            if obs:
                content += (start, stop)
        return Rendered(RenderedText("".join(out), content), tuple(spans))


CHATML = Template(
    "chatml",
    {r: f"<|im_start|>{r}\n" for r in ("system", "user", "assistant")},
    "<|im_end|>\n",
    "<|im_end|>",
)
PLAIN = Template(
    "plain",
    {"system": "### System\n", "user": "### Action\n", "assistant": "### Observation\n"},
    "\n\n",
    "",
)
BUILTIN = {"chatml": CHATML, "plain": PLAIN}

_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_PRIVATE_USE_CHARS = [chr(c) for c in range(0xE000, 0xF900)]


@dataclass(frozen=True)
class _Markers:
    """Six private-use characters a Jinja rendering cannot hold otherwise: they mark where
    each observation and each other content begins and ends in the rendered text.

    Chosen per trajectory among those its texts and the template do not use, so a record
    holding U+E000 (icon fonts in web and Android observations do) renders like any other.
    """

    open: str
    mid: str
    close: str
    turn: str
    begin: str
    end: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _marker_pattern(self)


DEFAULT_MARKERS = _Markers(*_PRIVATE_USE_CHARS[:6])


def _choose_markers(source: str, system: str, turns: list[dict[str, Any]]) -> _Markers:
    texts = [source, system]
    for t in turns:
        texts += (t["action"]["text"], t["observation"]["text"])
    used = {c for x in texts for c in _PRIVATE_USE.findall(x)}
    if not used:  # nearly always: one scan of each text
        return DEFAULT_MARKERS
    free = [c for c in _PRIVATE_USE_CHARS if c not in used][:6]
    if len(free) < 6:
        raise ValueError("the texts use every private-use character (U+E000..U+F8FF)")
    return _Markers(*free)


@functools.lru_cache(maxsize=64)
def _marker_pattern(m: _Markers) -> re.Pattern[str]:
    return re.compile(
        f"{re.escape(m.open)}(\\d+){re.escape(m.mid)}|"
        + "|".join(re.escape(c) for c in (m.close, m.turn, m.begin, m.end))
    )


def load_template(name_or_path: str, eot: str = "") -> Template:
    """A built-in template by name, or a Jinja file rendering `messages` (role, content)."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise FileNotFoundError(
            f"template {name_or_path!r} is neither built in ({', '.join(BUILTIN)}) nor a file"
        )
    from worldtrace.schemas.text import read_utf8

    source = read_utf8(path, "template")  # its text is in every sample: no U+FFFD in each
    from .prompt import refuse_secrets

    refuse_secrets(path, source, "template")  # its text is in every sample
    import jinja2

    try:  # a broken file is said before any shard is written, once, not per trajectory
        _jinja().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template {path}: line {exc.lineno}: {exc.message}") from None
    template = Template(path.stem, {}, "", eot, source=source)
    _check_text_kept(path, template)
    if eot:
        _check_eot(path, template)
    return template


class TextCut(ValueError):
    """A template cut the end of a text it was given (a slice): no span can be found."""


PROBE = "  a probe line, its spaces kept \n" * 40
"""A text a filter or a slice of the template would change (whitespace at both ends,
1,320 characters): `_check_text_kept`."""


def _check_text_kept(path: Path, template: Template) -> None:
    """Refuse a template that changes the text it is given (`|trim`, a slice): its spans
    are found by markers around each text, which such a filter sees instead of the text's
    ends, so the samples would not be what the template writes (or a marker is cut).
    Checked on a probe conversation rendered with and without the markers, before any
    record is read."""
    turns = [
        {"index": n, "action": {"text": PROBE}, "observation": {"text": PROBE}} for n in range(2)
    ]
    messages = [{"role": "system", "content": PROBE}]
    for _ in turns:
        messages += ({"role": "user", "content": PROBE}, {"role": "assistant", "content": PROBE})
    try:
        as_written = _compiled(template.source).render(messages=messages)
        kept = str(template.render(PROBE, turns).text) == as_written
    except TextCut:  # a marker cut away with the text around it
        kept = False
    except Exception:  # a template that fails otherwise: each record's rendering says how
        return
    if not kept:
        raise ValueError(
            f"template {path}: it changes the message text it is given (a filter such as "
            "trim, or a slice): the loss spans could not be the text it writes; insert each "
            "message's content unchanged ({{ m.content }})"
        )


def _check_eot(path: Path, template: Template) -> None:
    """Refuse an end-of-turn text the template does not write after an observation: the
    manifest would record it as trained while no token of it is a target. Checked on a
    two-turn conversation, before any record is read."""
    turns = [
        {"index": n, "action": {"text": f"action {n}"}, "observation": {"text": f"observation {n}"}}
        for n in range(2)
    ]
    if not any(sp.eot_end > sp.end for sp in template.render("system", turns).spans):
        raise ValueError(
            f"template {path}: template_eot (--template-eot) {template.eot!r} is not what it "
            "writes after an assistant message, so no end-of-turn token would be trained; "
            "give the text it writes there, or no --template-eot"
        )


def _jinja():
    import jinja2

    return jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


@functools.lru_cache(maxsize=8)
def _compiled(source: str):
    """A user template compiled once per export, not once per trajectory."""
    return _jinja().from_string(source)


def _render_jinja(tpl: Template, system: str, turns: list[dict[str, Any]]) -> Rendered:
    import jinja2

    mk = _choose_markers(tpl.source or "", system, turns)
    messages = [{"role": "system", "content": f"{mk.begin}{system}{mk.end}"}] if system else []
    for n, t in enumerate(turns):
        obs, action = t["observation"]["text"], t["action"]["text"]
        messages.append({"role": "user", "content": f"{mk.turn}{mk.begin}{action}{mk.end}"})
        messages.append({"role": "assistant", "content": f"{mk.open}{n}{mk.mid}{obs}{mk.close}"})
    try:  # what the template asks of a message that has no such field, say
        raw = _compiled(tpl.source).render(messages=messages)
    except jinja2.TemplateError as exc:
        raise ValueError(f"template {tpl.name}: {type(exc).__name__}: {exc}") from None
    out: list[str] = []
    spans: dict[int, list[int]] = {}
    turn_starts: list[int] = []
    content: list[int] = []
    pos = last = 0
    current = begin = None
    for m in mk.pattern.finditer(raw):
        out.append(raw[last : m.start()])
        pos += m.start() - last
        last = m.end()
        if m.group(1) is not None:
            current = int(m.group(1))
            if current in spans:  # a copy before the target hands the model its answer
                raise ValueError(
                    f"template {tpl.name!r} writes the observation (assistant message) of "
                    f"turn {current} twice: the copy before it would put the target in "
                    "its own context"
                )
            spans[current] = [pos]
            begin = pos
        elif m.group(0) == mk.turn:
            turn_starts.append(pos)
        elif m.group(0) == mk.begin:
            begin = pos
        else:  # the end of an observation (close) or of other content (end)
            if m.group(0) == mk.close:
                spans[current].append(pos)
            if begin is not None and pos > begin:
                content += (begin, pos)
            begin = None
    out.append(raw[last:])
    text = "".join(out)
    for n in range(len(turns)):
        if n not in spans or n >= len(turn_starts):
            part = "observation (assistant message)" if n not in spans else "action (user message)"
            raise ValueError(f"template {tpl.name!r} dropped the {part} of turn {n}")
        if len(spans[n]) != 2:  # a slice or filter cut the end of this text away
            raise TextCut(
                f"template {tpl.name!r} changes the observation of turn {n} (its end is cut "
                "away): insert each message's content unchanged ({{ m.content }})"
            )
    starts = _turn_starts(tpl, system, text, turn_starts, [spans[n][1] for n in range(len(turns))])
    result = []
    for n, t in enumerate(turns):
        start, end = spans[n]
        eot_end = end + len(tpl.eot) if tpl.eot and text.startswith(tpl.eot, end) else end
        result.append(Span(t["index"], starts[n], start, end, end, eot_end))
    pairs = sorted(zip(content[::2], content[1::2], strict=True))  # in text order
    return Rendered(RenderedText(text, [x for p in pairs for x in p]), tuple(result))


def _turn_starts(
    tpl: Template, system: str, text: str, actions: list[int], ends: list[int]
) -> list[int]:
    """Where each turn starts: where the template's rendering of the turns before it ends
    (`render(system, turns[:n])` is the text's first `start` characters), as the built-in
    templates have it, not where its action's text begins: the header the template writes
    before that text (`<|im_start|>user\n`) is the turn's. `--overflow split` charges a
    turn the tokens from its start to the next one's; from its action's text it charged
    every part one header more than it holds, and closed parts a turn early.

    Found without rendering every prefix: after turn n-1 the template writes the same
    text (`tail`, after the last observation) when the conversation ends there as before
    the next message, so turn n starts where the two first differ (for a template that
    writes a text after the last message only: where that text and the next message's
    first differ); turn 0 starts where the rendering of the system prompt alone ends."""
    if not actions:
        return []
    tail = text[ends[-1] :]
    try:
        first = _common(_render_jinja(tpl, system, []).text, text, 0, actions[0])
    except ValueError:  # a template that cannot render no turns: the most the head can
        first = actions[0]  # hold (a part is then charged too much, never too little)
    starts = [first]
    for end, at in zip(ends, actions[1:], strict=False):
        # an action written before the observation it follows: where its text begins
        starts.append(end + _common(tail, text, end, at) if at >= end else at)
    return starts


def _common(a: str, text: str, start: int, stop: int) -> int:
    """How many first characters of `a` and `text[start:stop]` are the same."""
    n = min(len(a), stop - start)
    for k in range(n):
        if a[k] != text[start + k]:
            return k
    return n
