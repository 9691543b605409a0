"""What a web sandbox takes and answers, without a browser: the action space (BrowserGym's
high-level actions as JSON-Schema tools), the observation text, environment-failure
classification and the error text of a refused action."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import ada_url
from worldtrace.schemas.pages import shows_captcha

from .base import ToolSpec


def as_shown(text: str) -> str:
    """`text` with each lone UTF-16 surrogate replaced by U+FFFD, as Chromium draws it. A
    page's strings are UTF-16: one cut inside a character (`'😀'.slice(0, 1)`, a title cut
    at a fixed length) reaches Python as a lone surrogate, which no UTF-8 writer takes
    (the recorder's hashing raised and the whole `collect` run died). A pair of halves
    becomes its character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


SHOWN_MAX = 2000
"""Characters of a tab's title or URL, or a dialog's message, an observation shows: a page
may set a title of megabytes (`max_chars` bounds the tree only: a 300,000-character title
made the observation 60 times `max_chars`). A browser shows far less of either."""


def cut_shown(text: str, limit: int = SHOWN_MAX) -> tuple[str, bool]:
    """(`text`, False), or its first `limit - 1` characters and `…` and True."""
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


DIALOGS_SHOWN_MAX = 4000
"""Characters of the `## Dialog` section one observation shows (each dialog's message, and
a background tab's URL, cut at SHOWN_MAX too): a page that opens an alert from a 5 ms
timer opened hundreds during one observation, and showed them all (243,715 characters
under `max_chars: 5000`, not marked truncated). The first dialog is always shown; the
rest are counted (`dialogs_not_shown`) and the observation is marked truncated."""
DIALOGS_KEPT = 100
"""Dialogs the sandbox keeps between two observations; later ones are only counted."""


def shown_dialogs(
    dialogs: list[dict[str, Any]], more: int, active: int
) -> tuple[list[str], list[dict[str, Any]], int, bool]:
    """The `## Dialog` lines of `dialogs` ({type, message, tab, url}: `tab` the index of
    the tab that opened it, None when it closed since), the state's entries for those
    shown, how many were not shown (`more` beyond those given too) and whether anything
    was cut. A dialog of the active tab reads `alert: Hello`, its entry {type, message}
    as before; of another tab, `alert from tab 0 (http://...): Hello`, of a tab closed
    since, `alert from a closed tab (...)`, their entries with the `tab` and `url`."""
    lines: list[str] = []
    entries: list[dict[str, Any]] = []
    size, cut_any = 0, False
    for d in dialogs:
        (message, cut), (url, cut_url) = cut_shown(d["message"]), cut_shown(d["url"])
        if d["tab"] == active:
            where = ""
        elif d["tab"] is None:
            where = f" from a closed tab ({url})"
        else:
            where = f" from tab {d['tab']} ({url})"
        line = f"{d['type']}{where}: {message}"
        if lines and size + len(line) + 1 > DIALOGS_SHOWN_MAX:
            break
        size += len(line) + 1
        lines.append(line)
        entry = {"type": d["type"], "message": message}
        entries.append(entry | {"tab": d["tab"], "url": url} if where else entry)
        cut_any = cut_any or cut or (cut_url and bool(where))
    hidden = len(dialogs) - len(entries) + more
    if hidden:
        lines.append(f"({hidden} more dialog{'s' * (hidden > 1)} not shown)")
    return lines, entries, hidden, cut_any or bool(hidden)


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """The origin of an http(s) URL as Chromium writes it (ValueError for any other URL):
    `scheme://host[:port]`, no user info, the port only when it is not the scheme's
    default, the host as the WHATWG URL standard writes it (ada, the parser Node.js
    uses): lower case, IDN as punycode (`bücher.example` is `xn--bcher-kva.example`),
    `127.1`, `0x7f.0.0.1` and `2130706433` as `127.0.0.1`, escapes decoded. Every
    comparison of origins (a start page, `allowed_origins`, a `goto`, the route handler's
    pattern) goes through it: an origin written otherwise never matched the URLs Chromium
    requests, so the start page itself was "outside the allowed origins". A URL with no
    authority (`http:///x`, `http:x`) is refused, though a browser would guess a host."""
    written = urlsplit(url)  # ValueError for a bracket left open
    if written.scheme.lower() not in DEFAULT_PORTS or not written.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    try:
        return ada_url.URL(url).origin
    except ValueError:  # ada names no reason: a bad host or a port past 65535
        raise ValueError(f"not an http(s) URL: {url!r}") from None


def proxy_bypass(origins: tuple[str, ...] | list[str]) -> str:
    """Chromium's proxy bypass list for a context that may reach only `origins` (the
    context's proxy refuses everything else, redirects included: `WebSandbox._reset`).
    Each origin is one rule for its scheme and one for its WebSocket scheme, with the
    port written out (a rule without one would match every port). `<-loopback>` first:
    Chromium never proxies loopback hosts otherwise, and the sites are on loopback."""
    rules = ["<-loopback>"]
    for origin in origins:
        parts = urlsplit(origin)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        socket = "ws" if parts.scheme == "http" else "wss"
        rules += [f"{parts.scheme}://{host}:{port}", f"{socket}://{host}:{port}"]
    return ",".join(rules)


def _tool(name: str, doc: str, props: dict[str, Any], required: tuple[str, ...] = ()) -> ToolSpec:
    schema = {"type": "object", "properties": props, "required": list(required)}
    return ToolSpec(name, doc, {**schema, "additionalProperties": False})


_BID = {"type": "string", "description": "the element's bid, e.g. '12' or 'a3'"}
ACTION_SPACE = [
    _tool("click", "Click an element.", {"bid": _BID}, ("bid",)),
    _tool("fill", "Clear a text field and type into it (input, textarea, contenteditable).",
          {"bid": _BID, "text": {"type": "string"}}, ("bid", "text")),
    _tool("select_option", "Select an option of a <select> by value or label (several for a multiple select).",
          {"bid": _BID, "value": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}},
          ("bid", "value")),
    _tool("press", "Focus an element and press a key or combination, e.g. Enter, Control+a.",
          {"bid": _BID, "key": {"type": "string"}}, ("bid", "key")),
    _tool("hover", "Move the mouse over an element.", {"bid": _BID}, ("bid",)),
    _tool("scroll", "Scroll the page by pixels (positive: right, down).",
          {"dx": {"type": "number"}, "dy": {"type": "number"}}, ("dx", "dy")),
    _tool("goto", "Open a URL in the active tab.", {"url": {"type": "string"}}, ("url",)),
    _tool("go_back", "Go back in the active tab's history.", {}),
    _tool("go_forward", "Go forward in the active tab's history.", {}),
    _tool("new_tab", "Open a new blank tab and make it active.", {}),
    _tool("tab_focus", "Make the tab with this index (0-based) active.",
          {"index": {"type": "integer", "minimum": 0}}, ("index",)),
    _tool("tab_close", "Close the active tab.", {}),
    _tool("noop", "Do nothing; wait some milliseconds.",
          {"ms": {"type": "number", "minimum": 0, "maximum": 10000}}),
]  # fmt: skip
TOOLS = {t.name: t for t in ACTION_SPACE}


class ActionError(Exception):
    """The environment refused the action (bad bid, hidden element): an observation."""


def render(tabs: list[dict[str, str]], active: int, tree: str, focused: str, error: str) -> str:
    """The observation text (AgentLab's prompt sections, without the agent's notes)."""
    out = ["## Open tabs"]
    for i, tab in enumerate(tabs):
        out += [f"Tab {i}" + " (active tab)" * (i == active), f"  Title: {tab['title']}", f"  URL: {tab['url']}"]  # fmt: skip
    out += ["", "## Accessibility tree", tree]
    if focused:
        out += ["", "## Focused element", f"bid={focused!r}"]
    if error:
        out += ["", "## Error from previous action", error]
    return "\n".join(out)


def classify(
    url: str, status: int | None, tree: str, nav_failed: bool, crashed: bool
) -> str | None:
    """The environment failure a state shows, if any (the pipeline drops such trajectories)."""
    if crashed:
        return "crashed"
    if nav_failed or url.startswith("chrome-error://"):
        return "navigation_failed"
    if status is not None and status >= 400:
        return f"http_error:{status}"
    if url.startswith(("http://", "https://")) and "\n" not in tree.strip():
        return "blank_page"  # nothing below the root
    if shows_captcha(tree):
        return "captcha"
    return None


NET_ERROR_RE = re.compile(r"net::ERR_[A-Z0-9_]+")


def load_error(exc: BaseException) -> str:
    """Why a navigation did not load, in a few words: Chromium's network error
    (`net::ERR_CONNECTION_REFUSED`, `net::ERR_NAME_NOT_RESOLVED`) or Playwright's error
    without its call log (`TimeoutError: Page.goto: Timeout 15000ms exceeded.`)."""
    text = playwright_error(exc)
    found = NET_ERROR_RE.search(text)
    return found.group(0) if found else text


def playwright_error(exc: BaseException) -> str:
    """BrowserGym's `last_action_error` text, without Playwright's call log."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    message = getattr(exc, "message", None) or str(exc)
    first = message.split("Call log:")[0].strip()
    return f"{'TimeoutError' if isinstance(exc, PlaywrightTimeout) else 'Error'}: {first}"
