"""The web kind's model-free policy: a seeded random walk in the WebWorld style.

It reads the last observation's tree (`[bid] role 'name', props` lines) and state, and
picks one action a step: fill the visible form fields of a page with plausible values
for their input type (email, number, date, password, a `<select>`'s options, ...) then
submit; or follow a same-origin link (never a logout or delete link, never a download);
sometimes scroll, hover or go back. It never goes deeper than `max_depth` navigations
from the start page, never leaves the start page's origin, and acts only on bids present
in the observation it just saw. All randomness comes from the episode's seed.

It lives beside its kind and builds its actions with `schemas.actions.tool_call`, the
constructor every layer shares.
"""

from __future__ import annotations

import ast
import json
import random
import re
import string
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import Field
from worldtrace.schemas import Action
from worldtrace.schemas.actions import tool_call
from worldtrace.schemas.parsing import configclass

from .base import Explorer
from .web_spec import origin_of

LINE_RE = re.compile(r"^(\t*)\[(\w+)\] (\S+) ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")(.*)$")
URL_RE = re.compile(r"url=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
AVOID_RE = re.compile(r"log ?out|sign ?out|delete|remove|drop|unsubscribe", re.I)
DOWNLOAD_RE = re.compile(r"\.(zip|gz|bz2|xz|tar|tgz|pdf|epub|txt|json|csv|db|sqlite|exe)(\?|#|$)", re.I)  # fmt: skip
SUBMIT_RE = re.compile(r"submit|search|run|save|send|add|go|ok|apply|log ?in|sign ?in|next|filter", re.I)  # fmt: skip
TEXT_ROLES = {"textbox", "searchbox", "spinbutton", "combobox", "checkbox", "radio"}
SKIP_TYPES = {"hidden", "file", "submit", "button", "image", "reset", "range", "color"}
WORDS = (
    "library", "river", "garden", "winter", "lantern", "history", "music", "planet", "ocean",
    "journey", "data", "table", "search", "note", "report", "python", "letter", "market",
    "city", "light", "summer", "story",
)  # fmt: skip
NAMES = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Tim Peters")


@dataclass
class Element:
    bid: str
    role: str
    name: str
    props: str
    depth: int

    @property
    def url(self) -> str | None:
        m = URL_RE.search(self.props)
        return ast.literal_eval(m.group(1)) if m else None


def parse_tree(text: str) -> list[Element]:
    """The elements (lines with a bid) of an observation's accessibility tree."""
    tree = text.split("## Accessibility tree\n", 1)[-1].split("\n\n## ", 1)[0]
    out = []
    for line in tree.splitlines():
        m = LINE_RE.match(line)
        if m:
            depth, bid, role, name, props = m.groups()
            out.append(Element(bid, role, ast.literal_eval(name), props, len(depth)))
    return out


@configclass
class ExplorerConfig:
    """The random explorer's walk."""

    max_depth: Annotated[int, Field(ge=0, le=50)] = 3
    """Navigations away from the start page before it only goes back."""
    steps: Annotated[int | None, Field(ge=1)] = None
    """Stop after this many actions (default: the job's max_turns)."""
    form_probability: Annotated[float, Field(ge=0, le=1)] = 0.3
    """Chance to work on a page's form (when it has one) rather than browse."""


def plausible(kind: str, name: str, props: str, rng: random.Random) -> str:
    """A value a person might type into a field of this input type and label."""
    label = name.lower()
    if kind == "email" or "mail" in label:
        return f"{rng.choice(NAMES).split()[0].lower()}{rng.randint(1, 99)}@example.org"
    if kind == "password" or "password" in label:
        return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(12))
    if kind in ("number", "spinbutton"):
        lo = re.search(r"valuemin=(-?\d+)", props)
        hi = re.search(r"valuemax=(-?\d+)", props)
        a, b = (int(lo.group(1)), int(hi.group(1))) if lo and hi else (0, 0)
        return str(rng.randint(a, b) if b > a else rng.randint(1, 100))
    if kind == "date":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "time":
        return f"{rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}"
    if kind == "datetime-local":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00"  # fmt: skip
    if kind == "month":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}"
    if kind == "week":
        return f"{rng.randint(1990, 2030)}-W{rng.randint(1, 52):02d}"
    if kind == "tel" or "phone" in label:
        return f"+1 555 01{rng.randint(0, 99):02d}"
    if kind == "url" or "website" in label:
        return f"https://example.org/{rng.choice(WORDS)}"
    if "name" in label or "author" in label:
        return rng.choice(NAMES)
    if kind == "textarea" or "body" in label or "comment" in label:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 10))).capitalize() + "."
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


class WebExplorer(Explorer):
    """`policy: {kind: explorer, max_depth: 3}` for the web kind."""

    config_class: ClassVar[type] = ExplorerConfig
    name = "web-explorer"

    def __init__(self, config: ExplorerConfig, seed: int = 0):
        super().__init__(config, seed)
        self.trail: list[str] = []
        """URLs from the start page to the current one (the walk's depth)."""
        self.filled: dict[str, set[str]] = {}
        """Per URL, the bids already filled."""
        self.submitted: set[str] = set()
        """URLs whose form was submitted (each page's form is filled and sent once)."""
        self.origin = ""

    def act(self, history) -> Action | None:
        n = len(history.turns)
        if self.config.steps is not None and n >= self.config.steps:
            return None
        obs = history.turns[-1].observation if history.turns else history.initial
        state = json.loads(obs.state_json or "{}")
        url = state.get("url", "")
        if not self.origin:
            self.origin = _origin(url)
        self._track(url)
        elems = parse_tree(obs.text)
        depth = len(self.trail) - 1
        if depth > self.config.max_depth or _origin(url) != self.origin:
            return tool_call("go_back", {})
        fields = self._open_fields(elems, state, url) if url not in self.submitted else []
        if fields and (url in self.filled or self.rng.random() < self.config.form_probability):
            return self._fill(fields[0], state, url, elems)
        if self.filled.get(url) and url not in self.submitted:
            button = self._submit_button(elems)
            if button is not None:
                self.submitted.add(url)
                return tool_call("click", {"bid": button.bid})
        links = [e for e in elems if self._followable(e, url)] if depth < self.config.max_depth else []  # fmt: skip
        choices: list[tuple[float, Any]] = [(6.0, "link")] if links else []
        choices += [(1.0, "scroll"), (0.5, "hover")]
        if depth > 0:
            choices.append((1.0, "back"))
        what = self.rng.choices([c for _, c in choices], [w for w, _ in choices])[0]
        if what == "link":
            return tool_call("click", {"bid": self.rng.choice(links).bid})
        if what == "back":
            return tool_call("go_back", {})
        if what == "hover" and elems:
            return tool_call("hover", {"bid": self.rng.choice(elems).bid})
        return tool_call("scroll", {"dx": 0, "dy": self.rng.choice((300, 600, -300))})

    def _track(self, url: str) -> None:
        if url in self.trail:
            del self.trail[self.trail.index(url) + 1 :]
        else:
            self.trail.append(url)

    def _open_fields(self, elems: list[Element], state: dict, url: str) -> list[Element]:
        """Form fields of this page not filled yet, in page order."""
        inputs = state.get("inputs") or {}
        done = self.filled.get(url, set())
        out = []
        for e in elems:
            kind = inputs.get(e.bid)
            if e.bid in done or e.role not in TEXT_ROLES or kind is None or kind in SKIP_TYPES:
                continue
            if kind in ("checkbox", "radio") and "checked='true'" in e.props:
                continue
            if kind not in ("checkbox", "radio", "select") and re.search(r"value='.", e.props):
                continue  # already holds text (a prefilled editor, a remembered query)
            out.append(e)
        return out

    def _fill(self, e: Element, state: dict, url: str, elems: list[Element]) -> Action:
        self.filled.setdefault(url, set()).add(e.bid)
        kind = (state.get("inputs") or {}).get(e.bid, "text")
        if kind in ("checkbox", "radio"):
            return tool_call("click", {"bid": e.bid})
        if kind == "select":
            options = []
            for o in elems[elems.index(e) + 1 :]:
                if o.depth <= e.depth:
                    break  # past the select's own subtree
                if o.role == "option":
                    options.append(o.name)
            return tool_call("select_option", {"bid": e.bid, "value": self.rng.choice(options) if options else ""})  # fmt: skip
        return tool_call("fill", {"bid": e.bid, "text": plausible(kind, e.name, e.props, self.rng)})  # fmt: skip

    def _submit_button(self, elems: list[Element]) -> Element | None:
        buttons = [e for e in elems if e.role == "button" and not AVOID_RE.search(e.name)]
        preferred = [b for b in buttons if SUBMIT_RE.search(b.name)]
        pool = preferred or buttons
        return self.rng.choice(pool) if pool else None

    def _followable(self, e: Element, here: str) -> bool:
        if e.role != "link" or AVOID_RE.search(e.name):
            return False
        target = e.url
        if not target or DOWNLOAD_RE.search(target) or target.split("#")[0] == here.split("#")[0]:
            return False
        return _origin(target) == self.origin


def _origin(url: str) -> str:
    """`web_spec.origin_of`, "" for a URL that is not http(s) (`about:blank`, `data:`)."""
    try:
        return origin_of(url)
    except ValueError:
        return ""
