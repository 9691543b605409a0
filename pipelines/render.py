"""Rendering trajectories as chat text with the character span of every observation.

Actions are user turns, observations assistant turns (DESIGN.md). Built-in templates
are rendered directly; a user Jinja template (a model's `chat_template`) is rendered as
transformers' `apply_chat_template` renders it for training text, with invisible sentinels
around each message's content that are then removed, so spans are exact for any template
that places the content verbatim (or trims it: `_Text`).

The rendered text (`RenderedText`) also knows which of its characters are content (the
system prompt, actions, observations) rather than template: the encoder reads special
tokens only in the template's text, so an observation that contains `<|im_end|>` or
`<|endoftext|>` is tokenized as the characters it is, not as the marker.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
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
    tokens: tuple[tuple[str, str], ...] = ()
    """For a Jinja template: the special tokens (`bos_token`...) its model's
    tokenizer_config.json gives, passed to it as transformers passes them."""
    now: datetime | None = None
    """For a Jinja template: the time its `strftime_now` gives (`export_time`)."""

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
        if self.tokens:  # they are in its text as much as its source is
            body += "\0" + json.dumps(dict(self.tokens), sort_keys=True)
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
    """Seven private-use characters a Jinja rendering cannot hold otherwise: they mark where
    each observation and each other content begins and ends in the rendered text, and
    which content is the system prompt.

    Chosen per trajectory among those its texts and the template do not use, so a record
    holding U+E000 (icon fonts in web and Android observations do) renders like any other.
    """

    open: str
    mid: str
    close: str
    turn: str
    begin: str
    end: str
    system: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _marker_pattern(self)


N_MARKERS = len(_Markers.__dataclass_fields__)
DEFAULT_MARKERS = _Markers(*_PRIVATE_USE_CHARS[:N_MARKERS])


def _choose_markers(source: str, system: str, turns: list[dict[str, Any]]) -> _Markers:
    texts = [source, system]
    for t in turns:
        texts += (t["action"]["text"], t["observation"]["text"])
    used = {c for x in texts for c in _PRIVATE_USE.findall(x)}
    if not used:  # nearly always: one scan of each text
        return DEFAULT_MARKERS
    free = [c for c in _PRIVATE_USE_CHARS if c not in used][:N_MARKERS]
    if len(free) < N_MARKERS:
        raise ValueError("the texts use every private-use character (U+E000..U+F8FF)")
    return _Markers(*free)


@functools.lru_cache(maxsize=64)
def _marker_pattern(m: _Markers) -> re.Pattern[str]:
    return re.compile(
        f"{re.escape(m.open)}(\\d+){re.escape(m.mid)}|"
        + "|".join(re.escape(c) for c in (m.close, m.turn, m.begin, m.end, m.system))
    )


class _Text(str):
    """A message's content between the markers that find it, as a template sees it. The
    str methods that read or cut a text's ends (strip, lstrip, rstrip, startswith,
    endswith, len and so truth) act on the text, not on the markers: `m.content|trim`
    (Llama 3, Gemma, Mistral) and `content.lstrip('\\n')` (Qwen3) write the changed text
    between its markers, what they write from the text alone. Anything else sees the
    markers; `_check_text_kept` refuses a template where that changes what it writes."""

    def __new__(cls, head: str, text: str, tail: str) -> _Text:
        self = super().__new__(cls, head + text + tail)
        self._parts = (head, text, tail)  # a name a sandboxed template cannot read
        return self

    def _with(self, text: str) -> _Text:
        head, _, tail = self._parts
        return _Text(head, text, tail)

    def strip(self, chars: str | None = None) -> _Text:
        return self._with(self._parts[1].strip(chars))

    def lstrip(self, chars: str | None = None) -> _Text:
        return self._with(self._parts[1].lstrip(chars))

    def rstrip(self, chars: str | None = None) -> _Text:
        return self._with(self._parts[1].rstrip(chars))

    def startswith(self, *args: Any) -> bool:
        return self._parts[1].startswith(*args)

    def endswith(self, *args: Any) -> bool:
        return self._parts[1].endswith(*args)

    def __len__(self) -> int:
        return len(self._parts[1])


TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
"""Where a Hugging Face model directory keeps its chat template now (transformers reads it
before tokenizer_config.json's `chat_template`)."""
SPECIAL_TOKENS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"
)  # fmt: skip
"""The special tokens transformers passes a chat template (`special_tokens_map`), by the
names tokenizer_config.json gives them."""
SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"


def load_template(name_or_path: str, eot: str = "") -> Template:
    """A built-in template by name; or a model's chat template: a Jinja file rendering
    `messages` (role, content), or a tokenizer_config.json holding one (`chat_source`)."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise FileNotFoundError(
            f"template {name_or_path!r} is neither built in ({', '.join(BUILTIN)}) nor a file"
        )
    source, where, tokens = chat_source(path)
    from .prompt import refuse_secrets

    key = "chat_template" if where.suffix == ".json" else None
    refuse_secrets(where, source, "template", key)  # its text is in every sample
    import jinja2
    import jinja2.meta

    try:  # a broken file is said before any shard is written, once, not per trajectory
        ast = _jinja().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template {where}: line {exc.lineno}: {exc.message}") from None
    if tokens is None:  # a Jinja file with no tokenizer_config.json beside it
        if needs := sorted(jinja2.meta.find_undeclared_variables(ast) & set(SPECIAL_TOKENS)):
            raise ValueError(
                f"template {path}: it writes {' and '.join(needs)}, which only its model's "
                f"{TOKENIZER_CONFIG} gives: put that file beside the template, or pass it as "
                "--template (it holds the chat_template too)"
            )
        tokens = {}
    template = Template(
        path.stem, {}, "", eot, source=source, tokens=tuple(tokens.items()), now=export_time()
    )
    _check_text_kept(path, template)
    if eot:
        _check_eot(path, template)
    return template


def chat_source(path: Path) -> tuple[str, Path, dict[str, str] | None]:
    """The chat template a file gives, the file its text is in, and the special tokens of
    its model (None: unknown), as transformers loads them from a model directory: a
    tokenizer_config.json gives its `chat_template` (a `chat_template.jinja` beside it
    first) and its tokens; a Jinja file is the template, and a tokenizer_config.json
    beside it gives the tokens."""
    from worldtrace.schemas.text import read_utf8

    text = read_utf8(path, "template")  # its text is in every sample: no U+FFFD in each
    if path.suffix != ".json":
        beside = path.with_name(TOKENIZER_CONFIG)
        return text, path, _special_tokens(beside, _config(beside)) if beside.is_file() else None
    config = _config(path, text)
    beside = path.with_name(CHAT_TEMPLATE_FILE)
    if beside.is_file():
        return read_utf8(beside, "template"), beside, _special_tokens(path, config)
    source = config.get("chat_template")
    if isinstance(source, list):  # named templates (Command R, Hermes): the default one
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        if not isinstance(named.get("default"), str):
            raise ValueError(
                f"template {path}: its chat templates ({', '.join(map(str, named))}) hold no "
                "'default' one, the one transformers renders a conversation without tools with"
            )
        source = named["default"]
    if not isinstance(source, str):
        raise ValueError(
            f"template {path}: no chat_template in it (nor a {CHAT_TEMPLATE_FILE} beside it): "
            "give the model's tokenizer_config.json, or its chat template as a Jinja file"
        )
    return source, path, _special_tokens(path, config)


def _config(path: Path, text: str | None = None) -> dict[str, Any]:
    if text is None:
        from worldtrace.schemas.text import read_utf8

        text = read_utf8(path, "template")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"template {path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(config, dict):
        raise ValueError(f"template {path}: not a tokenizer config (a JSON object)")
    return config


def _special_tokens(path: Path, config: dict[str, Any]) -> dict[str, str]:
    """The special tokens a tokenizer config names, as text: a token is a string or an
    AddedToken entry (`{"content": ...}`); a null one is left out, as transformers leaves
    it (the template sees it undefined)."""
    out = {}
    for name in SPECIAL_TOKENS:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"template {path}: {name} {value!r} is not a token's text")
        out[name] = value
    return out


def export_time() -> datetime:
    """The time a template's `strftime_now` gives: `$SOURCE_DATE_EPOCH` (UTC) when set, so
    that a dated template (Llama 3.2/3.3) gives the same bytes on another day; else now,
    taken once when the template is loaded (one date for the whole export)."""
    epoch = os.environ.get(SOURCE_DATE_EPOCH)
    if not epoch:
        return datetime.now()
    try:
        return datetime.fromtimestamp(int(epoch), timezone.utc)
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"${SOURCE_DATE_EPOCH} {epoch!r} is no number of seconds") from None


class TextCut(ValueError):
    """A template cut an end of a text it was given (a slice, a split): no span can be
    found."""


PROBE = "\n  a probe line, its spaces kept \n" * 40
"""A text a filter or a slice of the template would change (newlines and spaces at both
ends, 1,360 characters): `_check_text_kept`."""


def _check_text_kept(path: Path, template: Template) -> None:
    """Refuse a template that changes the text it is given in a way that cannot be told
    apart from the markers around it (a slice, a filter on more than the text: `_Text`
    applies trim and its kin to the text itself): its spans are found by those markers,
    so the samples would not be what the template writes (or a marker is cut). Checked on
    a probe conversation rendered with and without the markers, before any record is
    read."""
    turns = [
        {"index": n, "action": {"text": PROBE}, "observation": {"text": PROBE}} for n in range(2)
    ]
    messages = [{"role": "system", "content": PROBE}]
    for _ in turns:
        messages += ({"role": "user", "content": PROBE}, {"role": "assistant", "content": PROBE})
    try:
        as_written = _compiled(template.source).render(messages=messages, **_context(template))
        kept = str(template.render(PROBE, turns).text) == as_written
    except TextCut:  # a marker cut away with the text around it
        kept = False
    except Exception:  # a template that fails otherwise: each record's rendering says how
        return
    if not kept:
        raise ValueError(
            f"template {path}: it changes the message text it is given (a filter on more "
            "than the text, or a slice): the loss spans could not be the text it writes; "
            "insert each message's content unchanged ({{ m.content }}) or trimmed "
            "({{ m.content|trim }})"
        )


def _check_eot(path: Path, template: Template) -> None:
    """Refuse an end-of-turn text the template does not write after an observation: the
    manifest would record it as trained while no token of it is a target. Checked on a
    two-turn conversation, before any record is read."""
    turns = [
        {"index": n, "action": {"text": f"action {n}"}, "observation": {"text": f"observation {n}"}}
        for n in range(2)
    ]
    try:
        spans = template.render("system", turns).spans
    except ValueError:  # a template that cannot render it: each record's rendering says how
        return
    if not any(sp.eot_end > sp.end for sp in spans):
        raise ValueError(
            f"template {path}: template_eot (--template-eot) {template.eot!r} is not what it "
            "writes after an assistant message, so no end-of-turn token would be trained; "
            "give the text it writes there, or no --template-eot"
        )


@functools.cache
def _jinja():
    """transformers' chat template environment (`_compile_jinja_template`): sandboxed,
    `trim_blocks` and `lstrip_blocks`, loop controls, `{% generation %}`, its `tojson`
    and `raise_exception`; undefined names are empty, as there."""
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}` around what the assistant writes (for
        transformers' assistant mask): rendered as it stands."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller) -> str:
            return caller()

    def raise_exception(message: str):
        raise jinja2.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
        # transformers' own: no HTML escapes, keys in their order
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, "jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


@functools.lru_cache(maxsize=8)
def _compiled(source: str):
    """A user template compiled once per export, not once per trajectory."""
    return _jinja().from_string(source)


def _context(tpl: Template) -> dict[str, Any]:
    """What `apply_chat_template` passes a template besides `messages`, for training text:
    no generation prompt, no tools or documents, the special tokens, `strftime_now`."""
    now = tpl.now or datetime.now()
    return {
        "add_generation_prompt": False,
        "tools": None,
        "documents": None,
        "strftime_now": now.strftime,
        **dict(tpl.tokens),
    }


def _render_jinja(tpl: Template, system: str, turns: list[dict[str, Any]]) -> Rendered:
    source = tpl.source or ""
    mk = _choose_markers(source + "".join(v for _, v in tpl.tokens), system, turns)
    messages = [{"role": "system", "content": _Text(mk.system + mk.begin, system, mk.end)}]
    if not system:
        messages = []
    for n, t in enumerate(turns):
        obs, action = t["observation"]["text"], t["action"]["text"]
        messages.append({"role": "user", "content": _Text(mk.turn + mk.begin, action, mk.end)})
        messages.append(
            {"role": "assistant", "content": _Text(f"{mk.open}{n}{mk.mid}", obs, mk.close)}
        )
    try:  # what the template refuses (raise_exception), or asks of a field there is not
        raw = _compiled(source).render(messages=messages, **_context(tpl))
    except Exception as exc:  # the user's template failing: one line naming it
        raise ValueError(f"template {tpl.name}: {type(exc).__name__}: {exc}") from None
    out: list[str] = []
    spans: dict[int, list[int]] = {}
    turn_starts: list[int] = []
    content: list[int] = []
    pos = last = 0
    current = begin = None
    wrote_system = cut_start = False
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
        elif m.group(0) == mk.system:
            wrote_system = True
        elif m.group(0) == mk.begin:
            begin = pos
        else:  # the end of an observation (close) or of other content (end)
            if m.group(0) == mk.close:
                if current is None or len(spans[current]) == 2:  # no start: a split cut it
                    cut_start = True
                else:
                    spans[current].append(pos)
            if begin is not None and pos > begin:
                content += (begin, pos)
            begin = None
    out.append(raw[last:])
    text = "".join(out)
    if system and not wrote_system:
        raise ValueError(
            f"template {tpl.name!r} dropped the system prompt (system message): the samples "
            "would lack the simulation instructions (a template that writes it only before a "
            "last user message, as Mistral's v0.3, drops it from training text, which ends "
            "with an assistant message); use a template that writes it"
        )
    for n in range(len(turns)):
        if n not in spans and cut_start:
            raise TextCut(
                f"template {tpl.name!r} changes the observation of turn {n} (its start is cut "
                "away, as a split or a slice does): insert each message's content unchanged "
                "({{ m.content }})"
            )
        if n not in spans or n >= len(turn_starts):
            part = "observation (assistant message)" if n not in spans else "action (user message)"
            raise ValueError(f"template {tpl.name!r} dropped the {part} of turn {n}")
        if len(spans[n]) != 2:  # a slice or filter cut the end of this text away
            raise TextCut(
                f"template {tpl.name!r} changes the observation of turn {n} (its end is cut "
                "away): insert each message's content unchanged ({{ m.content }})"
            )
    if cut_start:
        raise TextCut(
            f"template {tpl.name!r} changes an observation (writes its end twice): insert each "
            "message's content unchanged ({{ m.content }})"
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
    first differ, `_common`); turn 0 starts where the rendering of the system prompt alone
    ends."""
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


_SETTLED = re.compile(r"[\s>\]})]")
"""Where a header or marker the template writes ends: a space, or a closing bracket."""


def _common(a: str, text: str, start: int, stop: int) -> int:
    """How many first characters of `a` and `text[start:stop]` are the same; where they
    differ before either ends, only those up to the last space or closing bracket among
    them: what the template writes only at the end (Phi-3's `<|endoftext|>` after
    `<|end|>\n`) may begin as the next message's header does (`<|user|>`), and those
    characters are the header's (the turn started at `user|>`)."""
    n = min(len(a), stop - start)
    for k in range(n):
        if a[k] != text[start + k]:
            return max((m.end() for m in _SETTLED.finditer(a, 0, k)), default=0)
    return n
