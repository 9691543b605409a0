"""Web domain: pages in headless Chromium, BrowserGym's actions and observations.

An observation is the page's accessibility tree as text with a `bid` on every node
(BrowserGym's format, `web_axtree.py`) plus browser state: open tabs (title, URL), the
active tab, the focused element and the last action's error. Actions are BrowserGym's
high-level actions as tool calls (`click(bid)`, `fill(bid, text)`, `goto(url)`, ...).

Errors have owners. A bad bid, an action on a hidden element, a navigation the browser
refuses, a 404: the environment's answer, recorded as an observation (`is_error` and
the section "Error from previous action", like BrowserGym's `last_action_error`). A
browser that died or a page that does not answer within `step_timeout` raises
SandboxError: the attempt fails and is retried. So does a start page that does not load
at reset (a network error, a timeout, Chromium's error page, an HTTP 5xx): there is no
episode to record (`_open_start`; docs/web.md lists the cases); one no retry can load
(outside the allowed origins, an unsafe port, a host name the browser may not resolve)
is the job's mistake: SandboxConfigError, not retried. An error that is the
sandbox's own text (a navigation outside the allowed origins, refused) is marked
`refused: true` in the state: the pipeline never trains on it. A navigation that does not
answer within `navigation_timeout` is stopped (`_await_navigation`), so it is the action's
error, not a failed attempt. Dialogs are shown (`## Dialog`) and dismissed.

Every episode gets a fresh browser context (cookies and storage reset; optionally a
storage-state file to start logged in). Requests outside the allowed origins are
stopped, by a route handler and, for what it never sees (a redirect's next hop, a
WebSocket), by the context's proxy, and listed in the state (`blocked`). Environment
failures (HTTP error status, failed navigation, blank or CAPTCHA-like page, crashed tab) are
reported in `env_failure` (a tab that crashed while it was read too), a turn that changed
neither URL, tree nor open tabs has `changed = False`, for the pipeline's GUI filters,
and one observed while the page was still changing says `still_printing` (`_settle`).

The pure parts (action space, observation text, failure classes) are in `web_spec.py`,
the tree in `web_axtree.py`, the shared browser in `web_browser.py`; what stays here is
one class with its lifecycle, thirteen actions and the observation step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass

from .aio import AsyncTimeout
from .base import (
    SandboxConfigError,
    SandboxError,
    TaskSpec,
    ToolSpec,
    Unpicklable,
    integral_ints,
)
from .web_axtree import (
    BID_ATTR,
    TreeOptions,
    flatten,
    mark_frames,
    page_axtree,
    unmark_frames,
    walk_tree,
)
from .web_browser import BrowserConfig, Refuser, shared_host
from .web_spec import (
    ACTION_SPACE,
    DIALOGS_KEPT,
    SHOWN_MAX,
    TOOLS,
    ActionError,
    as_shown,
    classify,
    cut_shown,
    load_error,
    origin_of,
    playwright_error,
    proxy_bypass,
    render,
    shown_dialogs,
)

BID_RE = re.compile(r"^[a-zA-Z0-9]+$")
SETTLE_MAX_MS = 1000
SETTLE_QUIET_MS = 60
SETTLE_RENDER_QUIET_MS = 250
"""How long the DOM of a page that has been rendering answers as they arrive must be
still: longer than the gap between one answer shown and the next request's event
reaching the sandbox (a busy machine delays it, and a settle that saw the DOM still for
60 ms and no request observed the docs' search half done)."""
SETTLE_LOADING_MAX_S = 10.0
"""How long a settle waits, at most, for a page that keeps rendering (the docs' search
adds its results one per timer and fetches each one's summary: 66 results took 1.2-2.2 s,
324 took 4.4-5.3 s on an idle machine), and never more than a third of `step_timeout`, so
the action and the read keep the rest. A page that changes without growing or answers
arriving (an animation, a ticker) is observed at SETTLE_MAX_MS, as before."""
DATA_REQUESTS = frozenset({"fetch", "xhr"})
"""Playwright's resource types of the requests a page's scripts make for data, whose
answers they act on (render, fetch again): `_settle` gives each answer's handler
SETTLE_RENDER_QUIET_MS. Documents, styles and images are rendered by the browser."""
LAST_CHANGE_KEY = "__worldtrace_last_change_9f3c2e"
"""The window property (read-only, not enumerable) holding a function that returns the
performance.now() of the document's last DOM change: a name no page meets."""


def _fill(js: str, **names: object) -> str:
    """The script with its capitalised placeholders replaced (in order): braces would
    clash with the script's own, as in an f-string."""
    for name, value in names.items():
        js = js.replace(name, str(value))
    return js


RECORDER_JS = _fill(
    """(key, since) => {
  const have = Object.getOwnPropertyDescriptor(window, key);
  if (have) return typeof have.value === "function" ? have.value : () => since;
  let last = since;
  const aria = new Set(["aria-roledescription", "aria-description"]);
  const marked = (v) => typeof v === "string" && v.startsWith("browsergym_id_");
  const ours = (m) => m.type === "attributes" && (m.attributeName === BID_ATTR
    || (aria.has(m.attributeName)
        && (marked(m.oldValue) || marked(m.target.getAttribute(m.attributeName)))));
  new MutationObserver((records) => { if (!records.every(ours)) last = performance.now(); })
    .observe(document, {subtree: true, childList: true, attributes: true,
                        attributeOldValue: true, characterData: true});
  const read = () => last;
  Object.defineProperty(window, key, {value: read});
  return read;
}""",
    BID_ATTR=json.dumps(BID_ATTR),
)
"""Records in `window[key]` when the document last changed, from `since` on (once per
document; later calls return the same reader). The sandbox's own marks are no change,
or every step after one would wait out SETTLE_QUIET_MS: the bid attribute, and the
`browsergym_id_` prefix that `mark_frames` puts on the two ARIA attributes (still there
when the records arrive) and `unmark_frames` takes off (in the old value)."""
INIT_JS = _fill(
    """if (window === window.top) {
  try { (RECORDER)(KEY, performance.now()); } catch (e) {}
}""",
    RECORDER=RECORDER_JS,
    KEY=json.dumps(LAST_CHANGE_KEY),
)
"""Every document of the context records its changes from its creation, before its own
scripts run, so the settle sees the changes made before it began. Frames skip it: the
settle reads the main frame's only."""
SETTLE_JS = _fill(
    """(quietMs) => new Promise(r => {
  const last = (RECORDER)(KEY, -Infinity);
  const count = () => document.getElementsByTagName("*").length;
  const before = count();
  let frames = 0, over = false;
  const done = (still) => {
    over = true; clearTimeout(cap); clearTimeout(idle);
    r({still, last: last(), before, elements: count()});
  };
  const cap = setTimeout(() => done(false), MAX_MS);
  const idle = setTimeout(() => { if (!frames) done(true); }, 100);
  const quiet = () => performance.now() - last() >= quietMs;
  const tick = () => {
    if (over) return;
    if (++frames >= 2 && quiet()) setTimeout(confirm, 0);
    else requestAnimationFrame(tick);
  };
  const confirm = () => { if (!over) quiet() ? done(true) : requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
})""",
    RECORDER=RECORDER_JS,
    KEY=json.dumps(LAST_CHANGE_KEY),
    MAX_MS=SETTLE_MAX_MS,
)
"""Resolves after two animation frames once the DOM has been still for `quietMs`,
counted from its last change as INIT_JS recorded it (a page still since then: two
frames, as fast as before). A page that changes, pauses for less and changes again is
observed after the second change even when the settle began in the pause (a click's
first change, a load handler's spinner, timers a busy machine delays): counted from the
settle's own start, it was observed half done. A document without a recorder (the init
script did not run or failed: none seen, new tabs and popups included) gets one here,
and only changes from now on count, as before. A frame that finds the DOM still is
confirmed a task later: after a long task (the page's own, or a renderer short of CPU)
Chromium runs the animation frame before the timers that fell due during it, and a
change they make (a result rendered in the next task, a chain of timers) came after the
observation. At most SETTLE_MAX_MS on a page that never stops changing, then `still` is
false; 100 ms for a tab that does not render (`still`: nothing to wait for). `last` is the
time of the DOM's last change (the page's clock), and `before` and `elements` how many
elements the document had then and now, so the caller sees whether it moved and grew."""
POPUP_GRACE_S = 0.5
"""How long a step whose navigation the proxy refused waits for Playwright to report a
tab Chromium opened, before taking it for a popup that never loaded (`_close_unborn`)."""
SETTLE_EVAL_S = SETTLE_MAX_MS / 1000 + 1
"""How long the settle's script may take before the sandbox looks for a navigation that
holds it: Playwright evaluates nothing in a tab whose navigation has not committed (a URL
that never answers would hold the step until its step_timeout)."""
READS = 3
"""How many times an observation is read when a navigation keeps being requested while
it is read (`_observe`; a page that navigates on every read is observed as read last),
and how many times in one step the active tab may close under the read."""
CLOSE_EVENT_S = 1.0
"""How long a read that Playwright failed as the tab's closing waits for the tab's close
event, when the error came first (`_closed`)."""
LOCAL_SCHEMES = ("data:", "blob:", "about:")
"""Observation fields of GUI kinds this schema version has; the rest ride in state_json."""


def _url(value: str) -> str:
    if value:
        origin_of(value)
    return value


def _origin(value: str) -> str:
    """An allowed origin as `origin_of` writes it (`http://localhost:80` is
    `http://localhost`, as Chromium writes the URLs it requests)."""
    parts = urlsplit(value)
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"an origin is scheme://host[:port] with no path, got {value!r}")
    return origin_of(value)


def _file(value: str | None) -> str | None:
    if value is not None and not Path(value).is_file():
        raise ValueError(f"no such file: {value!r}")
    return value


def _storage_state(value: str | None) -> str | None:
    """A file Playwright can read as a storage state (a JSON object whose `cookies` and
    `origins` are lists): one it cannot read failed every attempt of the job alike."""
    if _file(value) is None:
        return None
    try:
        data = json.loads(Path(value).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{value} is not a Playwright storage-state file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{value} is not a Playwright storage-state file (not a JSON object)")
    for key in ("cookies", "origins"):
        if not isinstance(data.get(key, []), list):
            raise ValueError(f"{value}: {key!r} is not a list (a Playwright storage state has lists of cookies and origins)")  # fmt: skip
    return value


Url = Annotated[str, AfterValidator(_url)]


@configclass
class Viewport:
    """Browser window size in CSS pixels."""

    width: Annotated[int, Field(ge=200, le=7680)] = 1280
    height: Annotated[int, Field(ge=200, le=4320)] = 720


@configclass
class WebConfig:
    """A browser sandbox."""

    start_url: Url = ""
    """Start page for tasks that do not name one (`url` in the task)."""
    allowed_origins: tuple[Annotated[str, AfterValidator(_origin)], ...] = ()
    """scheme://host:port the pages may load from; empty = the origin of the start page.
    Every other request is stopped (a redirect's next hop too: docs/web.md) and listed
    in the state as `blocked`."""
    viewport: Viewport = field(default_factory=Viewport)
    locale: str = "en-US"
    storage_state: Annotated[str | None, AfterValidator(_storage_state)] = None
    """A Playwright storage-state JSON file (cookies, localStorage) to start logged in;
    read when the job file is, so a broken one is the job file's error."""
    step_timeout: Annotated[float, Field(gt=0, le=600)] = 30.0
    """Seconds one reset or step (action and observation) may take before the attempt fails."""
    action_timeout: Annotated[float, Field(gt=0, le=60)] = 2.0
    """Seconds an element action waits for its element (BrowserGym uses 0.5)."""
    navigation_timeout: Annotated[float, Field(gt=0, le=300)] = 15.0
    """Seconds a navigation may take; then it is the action's error (at reset, the start
    page's: the attempt fails)."""
    max_chars: Annotated[int, Field(ge=1000)] = 200_000
    """Tree text beyond this is cut (the observation is marked truncated)."""
    tree: TreeOptions = field(default_factory=TreeOptions)
    browser: BrowserConfig = field(default_factory=BrowserConfig)
    record_requests: bool = False
    """Keep every requested URL in `WebSandbox.requests` (for audits and tests)."""


@configclass
class WebTask:
    """A web task's extra keys."""

    url: Url | None = None
    """The task's start page (default: the sandbox's start_url)."""


class Refusal(ActionError):
    """An action the sandbox itself refused (a URL outside the allowed origins or not
    http(s)): its text is ours, not the environment's; the observation says so with
    `refused: true` in its state (`WebSandbox._observe`)."""


class WebSandbox(Unpicklable):
    kind = "web"
    domain = "web"
    config_class = WebConfig
    task_class = WebTask
    action_kinds = ("tool_call",)
    explorer = "worldtrace.sandboxes.web_explorer:WebExplorer"

    @classmethod
    def static_action_space(cls, config: WebConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    @classmethod
    def host_paths(cls, config: WebConfig) -> list[str]:
        return [config.storage_state] if config.storage_state else []

    def __init__(self, config: WebConfig | None = None):
        self.config = config or WebConfig()
        self.host = shared_host(self.config.browser)
        self.blocked: list[str] = []
        """Every URL outside the allowed origins a page asked for (and did not get), over
        the sandbox's life."""
        self.requests: list[str] = []
        """Every requested URL (with `record_requests`)."""
        self._ctx = None
        self._page = None
        self._origins: tuple[str, ...] = ()
        self._outside_re: re.Pattern | None = None
        self._refuser = Refuser(self._refused)
        self._crashed: set = set()
        self._blocked_nav: str | None = None
        self._blocked_hop = None
        """The request of the last redirect's hop outside the allowed origins (a
        Playwright Request: its `redirected_from` answer says whose redirect it was)."""
        self._refused_nav: str | None = None
        """The last navigation the proxy refused in this step (it cannot tell the tab)."""
        self._step_blocked: list[str] = []
        self._navs: dict[Any, tuple[Any, float]] = {}
        """Top-level navigation requests not yet committed: (their tab, when they
        started). One leaves when its tab's main frame commits a document, when it fails
        (a 204, a download, another navigation replacing it) or when another hop of its
        redirect follows; an answer alone is not the commit (the old document stays a
        while, and was read as the answer's)."""
        self._nav_count = 0
        """How many top-level navigations the active tab requested (`_observe` reads the
        page again when one was requested while it read)."""
        self._stopped_nav: str | None = None
        """The active tab's navigation this step stopped at its navigation_timeout."""
        self._dialogs: list[dict[str, Any]] = []
        """Dialogs (alert, confirm, prompt, beforeunload) pages opened since the last
        observation, each dismissed: {type, message, url, page} (`_on_dialog`), the first
        DIALOGS_KEPT of them."""
        self._dialogs_more = 0
        """How many more dialogs than DIALOGS_KEPT came since the last observation."""
        self._unload_watch: tuple[Any, asyncio.Future] | None = None
        """(a tab going back or forward, a future set when its beforeunload dialog was
        dismissed: the navigation will not happen; `_history`)."""
        self._last: tuple[str, str, str, int] | None = None
        self._initial = ""
        self._page_event: asyncio.Event | None = None
        self._inflight: dict[Any, Any] = {}
        """The context's requests still in flight, each with its page."""
        self._started = 0
        self._answered = 0
        """How many of the context's requests got their answer (`_settle`)."""
        self._data_answered_at = -math.inf
        """When (the event loop's clock) a main frame's `fetch` or XHR last got its answer:
        the page's own handler of it may not have run yet (`_settle`)."""
        self._net_event: asyncio.Event | None = None
        self._nav_event: asyncio.Event | None = None
        """Set when a top-level navigation starts (`_watch_navigations`)."""
        self._ctx_id: str | None = None
        self._url = ""
        self._version = ""

    # -- the loop thread ---------------------------------------------------------------
    def _run(self, coro, what: str):
        try:
            return self.host.runner.run(coro, self.config.step_timeout)
        except AsyncTimeout:
            raise SandboxError(
                f"the browser did not finish {what} within {self.config.step_timeout:g} s"
            ) from None

    async def _alive(self) -> None:
        browser = self._ctx.browser if self._ctx is not None else None
        if browser is None or not browser.is_connected():
            raise SandboxError("the browser is gone (crashed or killed)")

    # -- lifecycle -----------------------------------------------------------------------
    def reset(self, task: TaskSpec) -> Observation:
        url = (task.params.url if task.params is not None else None) or self.config.start_url
        if not url:  # the job's mistake: no retry mends it
            raise SandboxConfigError("no start page: set the sandbox's start_url or the task's url")
        self._url = url
        self._origins = tuple(origin_of(o) for o in self.config.allowed_origins or (url,))
        self._outside_re = self._outside()
        self._run(self._close_context(), "closing the last episode")
        obs = self._run(self._reset(url), f"loading {url}")
        self._initial = obs.text
        return obs

    async def _reset(self, url: str) -> Observation:
        browser = await self.host.browser()
        self._version = browser.version
        c = self.config
        # The route handler is never asked about a redirect's next hop or a WebSocket:
        # the proxy refuses every request the bypass list (the allowed origins) does not
        # name, at Chromium's network stack, so nothing else can leave the context.
        proxy = {"server": await self._refuser.url(), "bypass": proxy_bypass(self._origins)}
        self._ctx = ctx = await browser.new_context(
            viewport={"width": c.viewport.width, "height": c.viewport.height},
            locale=c.locale,
            storage_state=c.storage_state,
            service_workers="block",  # a worker's fetches would bypass the route handler
            accept_downloads=False,
            proxy=proxy,
        )
        ctx.set_default_timeout(c.action_timeout * 1000)
        ctx.set_default_navigation_timeout(c.navigation_timeout * 1000)
        await ctx.add_init_script(INIT_JS)  # before any page: every document records
        await ctx.route(self._outside_re, self._block)
        if c.record_requests:
            ctx.on("request", lambda r: self.requests.append(r.url))
        self._inflight, self._net_event, self._navs = {}, asyncio.Event(), {}
        self._nav_event = asyncio.Event()
        self._dialogs, self._dialogs_more, self._stopped_nav = [], 0, None
        ctx.on("page", self._on_page)
        ctx.on("dialog", self._on_dialog)
        ctx.on("request", self._on_request)
        ctx.on("requestfinished", self._on_request_answered)
        ctx.on("requestfailed", self._on_request_done)
        self._crashed = set()
        self._last = None
        self._page_event = asyncio.Event()
        self._page = await ctx.new_page()
        info = await (await self._cdp(self._page)).send("Target.getTargetInfo")
        self._ctx_id = info["targetInfo"].get("browserContextId")
        # not the last episode's
        self._step_blocked, self._blocked_nav, self._refused_nav = [], None, None
        self._blocked_hop = None
        await self._open_start(url)
        return await self._observe("")

    async def _open_start(self, url: str) -> None:
        """Load the episode's start page. One that does not load starts no episode (the
        site is down, misnamed or failing): SandboxError, so the attempt fails with the
        reason and is retried. A 4xx is the site's answer (a 404, a 403 to a visitor not
        signed in): observed, as in any later step."""

        def failed(why: str) -> SandboxError:
            return SandboxError(f"start page {url} did not load: {why}")

        if origin_of(url) not in self._origins:  # the job's mistake: no retry mends it
            raise SandboxConfigError(f"start page {url} is outside the allowed origins ({', '.join(self._origins)})")  # fmt: skip
        response, exc = await self._navigate(url)
        if self._blocked_nav:  # the redirect's hop got the proxy's 204 (ERR_ABORTED) or 403
            upgrade = await self._upgrade_of(self._blocked_hop)
            if upgrade:  # the browser's own, the same on every attempt
                raise SandboxConfigError(f"start page {url} cannot load: Chromium itself upgrades it to {self._blocked_nav} ({upgrade}), outside the allowed origins ({', '.join(self._origins)})")  # fmt: skip
            raise failed(f"it redirected outside the allowed origins, to {self._blocked_nav}")
        if exc is not None:
            why = load_error(exc)
            never = self._never_loads(url, why)
            if never:
                raise SandboxConfigError(f"start page {url} cannot load: {never}")
            raise failed(why)
        if self._page.url.startswith("chrome-error://"):
            raise failed(f"Chromium's error page ({self._page.url})")
        if response is not None and response.status >= 500:
            raise failed(f"HTTP {response.status} {response.status_text}".rstrip())

    @staticmethod
    async def _upgrade_of(hop) -> str | None:
        """Why Chromium itself sent a navigation to this hop, if it did: an internal
        redirect says so in its `Non-Authoritative-Reason` header (`HSTS` for a host on
        the preload list, such as every `.dev` name; `HttpsUpgrades`), a site's never
        does."""
        redirect = hop.redirected_from if hop is not None else None
        answer = await redirect.response() if redirect is not None else None
        if answer is None:
            return None
        return (await answer.all_headers()).get("non-authoritative-reason")

    def _never_loads(self, url: str, why: str) -> str | None:
        """Why no retry can load the start page, when none can: an unsafe port (Chromium
        refuses it before any connection), a host name when this browser resolves none
        (`browser.resolve_hosts` off maps every name but localhost to NOTFOUND)."""
        if why == "net::ERR_UNSAFE_PORT":
            return f"{why} (Chromium never loads this port)"
        host = urlsplit(url).hostname or ""
        if why == "net::ERR_NAME_NOT_RESOLVED" and not self.config.browser.resolve_hosts and host != "localhost":  # fmt: skip
            return "this browser resolves no host name (browser.resolve_hosts is off)"
        return None

    def _on_page(self, page) -> None:
        page.on("crash", self._on_crash)
        page.on("framenavigated", self._on_frame_navigated)
        if self._page_event is not None:
            self._page_event.set()

    async def _popups(self) -> None:
        """Wait until Playwright has every tab Chromium opened for this context (a link
        with target=_blank creates the tab synchronously, the Page event comes later)."""
        await self._alive()  # never relaunch a dead browser in the middle of an episode
        browser_cdp = await self.host.browser_session()
        infos = (await browser_cdp.send("Target.getTargets"))["targetInfos"]
        ours = [t for t in infos if t["type"] == "page" and t.get("browserContextId") == self._ctx_id]  # fmt: skip
        loop = asyncio.get_running_loop()
        start = loop.time()

        def deadline() -> float:  # a tab whose first navigation was refused is no Page
            return start + (POPUP_GRACE_S if self._refused_nav else self.config.navigation_timeout)  # fmt: skip

        while len(self._ctx.pages) < len(ours) and loop.time() < deadline():
            self._page_event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._page_event.wait(), deadline() - loop.time())
        if self._refused_nav and len(self._ctx.pages) < len(ours):
            await self._close_unborn(browser_cdp, ours)

    async def _close_unborn(self, browser_cdp, ours: list[dict]) -> None:
        """Close the tabs Playwright never reports: a popup whose first navigation the
        proxy refused (its 204 keeps it on the initial empty document, and Playwright
        reports a popup once a navigation commits). The navigation was blocked, as one
        in an open tab is: the tab that was active stays active. A tab closing while its
        id is asked (its own `window.close()`) is gone, as after the action."""
        known = set()
        for page in list(self._ctx.pages):
            try:
                info = await (await self._cdp(page)).send("Target.getTargetInfo")
            except Exception as exc:
                if await self._closed(page, exc):
                    continue
                raise
            known.add(info["targetInfo"]["targetId"])
        for t in ours:
            if t["targetId"] not in known and t.get("url", "") in ("", "about:blank"):
                with contextlib.suppress(Exception):
                    await browser_cdp.send("Target.closeTarget", {"targetId": t["targetId"]})
                self._blocked_nav = self._blocked_nav or self._refused_nav

    def _on_request(self, request) -> None:
        redirected = request.redirected_from is not None  # the proxy refuses and records it
        if redirected and self._blocked_url(request.url) and self._top_navigation(request):
            self._blocked_nav, self._blocked_hop = request.url, request
        try:
            page = request.frame.page
        except Exception:  # no frame: a (blocked) service worker's, or a popup's first
            return  # navigation, which `_popups` and the load wait cover
        self._inflight[request] = page
        self._started += 1
        if self._top_navigation(request):
            if request.redirected_from is not None:  # the redirect's next hop replaces it
                self._navs.pop(request.redirected_from, None)
            self._navs[request] = (page, asyncio.get_running_loop().time())
            self._nav_count += page is self._page
            self._nav_event.set()

    def _on_request_answered(self, request) -> None:
        """A request answered: a navigation's stays in `_navs` until its document commits
        (`_on_frame_navigated`), which comes after its answer (the answer of a script's
        `location` came, the settle ran in the old document and found it still). Only a
        main frame's answers count as what a page may be rendering (`_settle`): a child
        frame's never change the main document, and a page that swaps its ad frames from
        a timer was taken for a page still rendering, 10 s per observation."""
        if self._main_frame_request(request):
            self._answered += 1
            if request.resource_type in DATA_REQUESTS:
                self._data_answered_at = asyncio.get_running_loop().time()
        if self._inflight.pop(request, None) is not None:
            self._net_event.set()

    def _on_request_done(self, request) -> None:
        self._navs.pop(request, None)
        if self._inflight.pop(request, None) is not None:
            self._net_event.set()

    def _on_frame_navigated(self, frame) -> None:
        """A tab's main frame committed a document: its navigations are done."""
        if frame.parent_frame is not None:
            return
        page = frame.page
        for request in [r for r, (p, _) in self._navs.items() if p is page]:
            del self._navs[request]
        if self._net_event is not None:
            self._net_event.set()

    async def _on_dialog(self, dialog) -> None:
        """Show the dialog in the next observation and dismiss it, as Playwright does
        with a dialog nobody listens to: an alert is closed, confirm answers false, prompt
        null, a beforeunload keeps the page. Which tab opened it is kept (the context's
        event covers every tab: a background tab's alert was shown as the active tab's),
        and what it showed is cut as the observation will cut it (a flood of dialogs
        is kept to its first DIALOGS_KEPT, the rest counted)."""
        page = dialog.page
        if len(self._dialogs) < DIALOGS_KEPT:
            # one more character than is shown: the observation still sees the cut
            message, url = dialog.message[: SHOWN_MAX + 1], page.url[: SHOWN_MAX + 1] if page else ""  # fmt: skip
            self._dialogs.append({"type": dialog.type, "message": message, "url": url, "page": page})  # fmt: skip
        else:
            self._dialogs_more += 1
        with contextlib.suppress(Exception):  # the page (or the browser) went away
            await dialog.dismiss()
        watch = self._unload_watch
        if dialog.type == "beforeunload" and watch and watch[0] is page and not watch[1].done():
            watch[1].set_result(True)

    async def _await_navigation(self) -> bool:
        """Wait for the tabs' top-level navigations to commit (an answer is not enough:
        `_navs`), each at most navigation_timeout from its start (the time `goto` gives
        one), and stop those still unanswered then (CDP `Page.stopLoading`: the tab stays
        on its page). A link clicked, a form sent, a script's `location` is waited for as
        `goto` is; and no later call hangs on a URL that never answers, since Playwright
        evaluates nothing in a tab whose navigation has not committed. True if there was
        one."""
        loop = asyncio.get_running_loop()
        found = False
        while True:
            pending = [(r, p, t) for r, (p, t) in self._navs.items() if not p.is_closed()]
            if not pending:
                return found
            found = True
            now = loop.time()
            late = [(r, p) for r, p, t in pending if now >= t + self.config.navigation_timeout]
            for request, page in late:
                self._navs.pop(request, None)
                self._inflight.pop(request, None)
                with contextlib.suppress(Exception):  # the tab closed meanwhile
                    await (await self._cdp(page)).send("Page.stopLoading")
                if page is self._page:
                    self._stopped_nav = request.url
            if late:
                continue
            first = min(t for _, _, t in pending) + self.config.navigation_timeout
            self._net_event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._net_event.wait(), max(first - now, 0))

    async def _watch_navigations(self) -> None:
        """While the tree is read: stop a navigation that starts meanwhile (a script's
        timer) at its navigation_timeout, which lets the reading go on in the page it
        was on (Playwright's calls wait for a navigation to commit: one that never
        answers held the step until step_timeout). Runs until cancelled."""
        while True:
            await self._await_navigation()
            self._nav_event.clear()
            if not self._navs:
                await self._nav_event.wait()

    def _loading(self, page) -> bool:
        """Whether a request of this tab is still in flight (a closed tab's never end)."""
        return any(p is page for p in self._inflight.values()) and not page.is_closed()

    async def _settle(self, page) -> bool | None:
        """Wait until the tab has no request in flight and its DOM is still: a script that
        fetches data after `load` and then renders it (the docs' glossary box, slower than
        SETTLE_QUIET_MS) is observed done, not before its answer arrived. Repeated while
        the settling itself started requests, until SETTLE_MAX_MS has passed (a long
        poll never ends); the last DOM wait may take as long again. A page still
        rendering (its document grew, or answers arrived and its DOM moved with them: the
        docs' search adds a result per timer, and fetches each one's summary) gets
        SETTLE_MAX_MS more from each wait that saw it, up to SETTLE_LOADING_MAX_S, and
        must then be still for SETTLE_RENDER_QUIET_MS: it was observed half done,
        different on every run. Found still within SETTLE_RENDER_QUIET_MS of an answer
        to the page's own data request (`DATA_REQUESTS`, any tab's), it waits out the
        rest and looks again: that answer's handler may not have run yet. True once the
        tab was found still; False when it was
        still changing (or rendering) when the wait ended: the observation says so,
        `still_printing`; None when the DOM wait did not end within SETTLE_EVAL_S (a
        navigation not committed holds it, or a page busy in a loop)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        long = start + min(SETTLE_LOADING_MAX_S, self.config.step_timeout / 3)
        deadline, seen, seen_rendering = start + SETTLE_MAX_MS / 1000, None, False
        elements = None
        while True:
            answered = self._answered
            calm = min(deadline, loop.time() + SETTLE_MAX_MS / 1000)  # a long poll: 1 s
            while self._loading(page) and loop.time() < calm:
                self._net_event.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._net_event.wait(), calm - loop.time())
            started = self._started
            quiet = SETTLE_RENDER_QUIET_MS if seen_rendering else SETTLE_QUIET_MS
            try:
                got = await asyncio.wait_for(page.evaluate(SETTLE_JS, quiet), SETTLE_EVAL_S)
            except asyncio.TimeoutError:
                return None
            if got["still"] and started == self._started and not self._loading(page):
                pause = self._data_answered_at + SETTLE_RENDER_QUIET_MS / 1000 - loop.time()
                if pause <= 0 or loop.time() >= deadline:
                    return True
                # an answer just came: its handler may yet fetch or render (a renderer short
                # of CPU ran it after two frames found the DOM still since the load)
                await asyncio.sleep(min(pause, deadline - loop.time()))
                continue
            # the document grew, or answers arrived and the DOM moved with them: the page
            # is rendering what it fetched or computed (a ticker, an animation, a poll
            # that changes nothing is not), and gets SETTLE_MAX_MS more
            moved = not got["still"] or (seen is not None and got["last"] != seen)
            grew = got["elements"] > (got["before"] if elements is None else elements)
            rendering = grew or (answered != self._answered and moved)
            if rendering:
                deadline = min(long, loop.time() + SETTLE_MAX_MS / 1000)
                seen_rendering = True
            seen, elements = got["last"], got["elements"]
            if loop.time() >= deadline:
                return got["still"] and not rendering

    def _on_crash(self, page) -> None:
        self._crashed.add(page)

    def _outside(self) -> re.Pattern:
        """URLs outside the allowed origins (matched in the driver: allowed requests are
        never intercepted, so they cost nothing)."""
        allowed = "|".join(re.escape(o) for o in self._origins)
        local = "|".join(re.escape(s) for s in LOCAL_SCHEMES)
        return re.compile(rf"^(?!(?:{allowed})(?:[/?#]|$))(?!{local})")

    def _blocked_url(self, url: str) -> bool:
        """A URL the sandbox stops (outside the allowed origins, not a local scheme)."""
        return bool(self._outside_re and self._outside_re.match(url))

    def _record(self, url: str) -> None:
        """A request outside the allowed origins was stopped: by the route handler, or by
        the context's proxy (`Refuser`: a redirect's next hop, a WebSocket)."""
        self.blocked.append(url)
        self._step_blocked.append(url)

    def _refused(self, url: str, navigation: bool, recorded: bool = False) -> None:
        if not recorded:
            self._record(url)
        if navigation:
            self._refused_nav = url
            if self._page_event is not None:
                self._page_event.set()  # `_popups` waits less for a tab now

    @staticmethod
    def _main_frame_request(request) -> bool:
        try:
            return request.frame.parent_frame is None
        except Exception:  # no frame (a worker's request, a popup's first navigation)
            return True

    @staticmethod
    def _top_navigation(request) -> bool:
        try:
            return request.is_navigation_request() and request.frame.parent_frame is None
        except Exception:  # no frame (a worker's request)
            return False

    @staticmethod
    def _unborn_navigation(request) -> bool:
        """A navigation whose frame Playwright does not know yet: a new tab's first (a
        link with target=_blank, window.open)."""
        if not request.is_navigation_request():
            return False
        try:
            request.frame  # noqa: B018 (raises when the frame is not known yet)
        except Exception:
            return True
        return False

    async def _block(self, route) -> None:
        req = route.request
        self._record(req.url)
        if self._top_navigation(req):
            self._blocked_nav, self._blocked_hop = req.url, None
            await route.fulfill(status=204)  # "No Content": the tab stays where it was
        elif self._unborn_navigation(req):
            # the 204 keeps the new tab on its empty document, which Playwright never
            # reports: `_popups` closes it (aborted, it would show Chromium's error page)
            self._refused(req.url, navigation=True, recorded=True)
            self._blocked_nav, self._blocked_hop = req.url, None
            await route.fulfill(status=204)
        else:
            await route.abort("blockedbyclient")

    def close(self) -> None:
        """Close the episode's context (the shared browser stays up for the next one)."""
        if not self.host.runner.loop.is_closed():
            self._run(self._close_context(), "closing the context")
            self.host.runner.loop.call_soon_threadsafe(self._refuser.close)

    async def _close_context(self) -> None:
        ctx, self._ctx, self._page = self._ctx, None, None
        if ctx is not None and ctx.browser is not None and ctx.browser.is_connected():
            await ctx.close()

    # -- steps ---------------------------------------------------------------------------
    def step(self, action: Action) -> Observation:
        if self._ctx is None:
            raise SandboxError("step before reset")
        return self._run(self._step(action), f"the action {action.name}")

    async def _step(self, action: Action) -> Observation:
        self._step_blocked, self._blocked_nav, self._refused_nav = [], None, None
        self._stopped_nav = None
        tool = TOOLS.get(action.name or "") if action.kind == "tool_call" else None
        try:
            args = json.loads(action.arguments_json or "{}")
        except json.JSONDecodeError:
            args = None
        if tool is None:
            return await self._observe(f"ValueError: unknown action {action.name or action.text!r} (actions: {', '.join(TOOLS)})")  # fmt: skip
        args = integral_ints(tool.input_schema, args)  # `index: 0.0` is 0, as JSON has it
        problem = tool.check(args)
        if problem:
            return await self._observe(f"ValueError: {problem}")
        # a navigation the page requested since the last read (a script's timer): its
        # document, or the page it stays on once stopped, is the one the action meets
        await self._await_navigation()
        pages_before = len(self._ctx.pages)
        error, refused = "", False
        try:
            error = await getattr(self, f"_do_{tool.name}")(**args) or ""
        except ActionError as exc:
            error, refused = str(exc), isinstance(exc, Refusal)
        except Exception as exc:
            await self._alive()  # a dead browser is ours to report, not the page's answer
            if type(exc).__module__.split(".")[0] != "playwright":
                raise
            error = playwright_error(exc)
        await self._await_navigation()  # one it started: committed, or stopped at its timeout
        await self._popups()
        if self._blocked_nav and (not error or "net::ERR_ABORTED" in error):
            error = f"Error: navigation to {self._blocked_nav} was blocked (outside the allowed origins)"  # fmt: skip
            refused = True  # our boundary, not the site's answer
        pages = self._ctx.pages
        if len(pages) > pages_before:  # a popup opened: it is the active tab now
            self._page = pages[-1]
        elif self._page.is_closed():  # the page closed itself (window.close())
            await self._next_page()
        return await self._observe(error, refused)

    async def _next_page(self):
        """The active tab once the active one closed (itself: window.close()): the last
        tab open, or a new blank one when none is."""
        pages = self._ctx.pages
        self._page = pages[-1] if pages else await self._ctx.new_page()
        return self._page

    async def _element(self, bid: str, trial: bool = False):
        """The element's locator, through the frames its bid prefix names (BrowserGym's
        get_elem_by_bid); refusals are the environment's answer. `trial`: once it is
        actionable for a click too (within action_timeout). Looked up where no
        navigation holds it (`_unheld`)."""
        return await self._unheld(lambda: self._find(bid, trial))

    async def _unheld(self, look):
        """`look()`, a look-up that acts on nothing, on a page no navigation holds: a
        top-level navigation of the tab that starts meanwhile (a script's timer, due as
        the step began) is not the action's, and Playwright evaluates nothing in the tab
        until it commits (the look-up hung until then: a URL that never answers failed
        the attempt at step_timeout, a trial click timed out). The look-up is abandoned,
        the navigation awaited (`_await_navigation`: committed, or stopped at its
        navigation_timeout) and the look-up done again, at most READS times (`_step`
        awaited any navigation pending before the action)."""
        for _ in range(READS - 1):
            navs = self._nav_count
            task = asyncio.ensure_future(look())
            try:
                while not task.done() and navs == self._nav_count:
                    self._nav_event.clear()
                    started = asyncio.ensure_future(self._nav_event.wait())
                    try:
                        await asyncio.wait((task, started), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        started.cancel()
                if task.done():
                    return task.result()
            finally:
                if not task.done():
                    task.cancel()  # Playwright aborts the call
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            await self._await_navigation()  # the one that started: committed, or stopped
        return await look()

    async def _find(self, bid: str, trial: bool):
        if not BID_RE.match(bid):
            raise ActionError(f'ValueError: Could not find element with bid "{bid}"')
        scope = self._page
        i = 0
        while bid[i:] and not bid[i:].isnumeric():
            i += 1
            while bid[i:] and bid[i].isalpha() and bid[i].isupper():
                i += 1
            frame = scope.locator(f'[{BID_ATTR}="{bid[:i]}"]')
            if not await frame.count():
                raise ActionError(f'ValueError: Could not find element with bid "{bid}"')
            scope = frame.first.content_frame
        elem = scope.locator(f'[{BID_ATTR}="{bid}"]')
        if not await elem.count():
            raise ActionError(f'ValueError: Could not find element with bid "{bid}"')
        if not await elem.first.is_visible():
            raise ActionError(f'ValueError: Element with bid "{bid}" is not visible')
        if trial:
            await elem.first.click(trial=True)  # actionability only, within action_timeout
        return elem.first

    async def _do_click(self, bid: str) -> None:
        """Click once the element is actionable within `action_timeout`; the navigation the
        click starts then gets `navigation_timeout` to commit, as `goto` does (Playwright
        waits for it within the click's timeout: under `action_timeout` a slow link was a
        failed click, though its page came)."""
        elem = await self._element(bid, trial=True)
        await elem.click(timeout=self.config.navigation_timeout * 1000, no_wait_after=False)

    async def _do_fill(self, bid: str, text: str) -> None:
        await (await self._element(bid)).fill(text)

    async def _do_select_option(self, bid: str, value: str | list[str]) -> None:
        await (await self._element(bid)).select_option(value)

    async def _do_press(self, bid: str, key: str) -> None:
        # as click: the navigation it starts (Enter in a form) gets navigation_timeout
        await (await self._element(bid)).press(key, timeout=self.config.navigation_timeout * 1000)

    async def _do_hover(self, bid: str) -> None:
        await (await self._element(bid)).hover()

    async def _do_scroll(self, dx: float, dy: float) -> None:
        await self._page.mouse.wheel(dx, dy)

    async def _do_goto(self, url: str) -> str | None:
        return await self._goto(url)

    async def _goto(self, url: str) -> str | None:
        try:
            outside = origin_of(url) not in self._origins
        except ValueError:
            raise Refusal(f"Error: cannot open {url!r} (only http and https URLs)") from None
        if outside:
            raise Refusal(f"Error: {url} is outside the allowed origins ({', '.join(self._origins)})")  # fmt: skip
        _, exc = await self._navigate(url)
        return None if exc is None else playwright_error(exc)

    async def _navigate(self, url: str) -> tuple[Any, Exception | None]:
        """`page.goto`: (the response, None), or (None, Playwright's error: the page's
        answer) once the browser is known alive; any other exception is ours: raised."""
        try:
            return await self._page.goto(url), None
        except Exception as exc:
            await self._alive()
            if type(exc).__module__.split(".")[0] != "playwright":
                raise
            return None, exc

    async def _do_go_back(self) -> str | None:
        return await self._history(-1)

    async def _do_go_forward(self) -> str | None:
        return await self._history(1)

    async def _history(self, delta: int) -> str | None:
        """Go `delta` entries back or forward. An entry of the main frame's (another URL)
        is Playwright's `go_back`/`go_forward`, which waits for the main frame; one of the
        same URL is a frame's navigation (a link in an iframe), and the step waits for
        whichever frame navigates, up to navigation_timeout (Playwright's waited for the
        main frame and was a TimeoutError, though the frame had gone back). Either ends
        when the page's `beforeunload` dialog was dismissed (the page stays, so no
        navigation comes: Playwright's call waited its whole timeout), with
        `net::ERR_ABORTED`, as `goto` held so ends (`_unload_held`)."""
        page = self._page
        cdp = await self._cdp(page)
        history = await cdp.send("Page.getNavigationHistory")
        entries, now = history["entries"], history["currentIndex"]
        if not 0 <= now + delta < len(entries):
            return None  # nothing there: as Playwright's, no navigation and no error
        what, entry = ("go_back" if delta < 0 else "go_forward"), entries[now + delta]
        held = f"Error: Page.{what}: net::ERR_ABORTED at {entry['url']}"
        if entry["url"] != entries[now]["url"]:
            go = page.go_back() if delta < 0 else page.go_forward()
            return held if await self._unload_held(page, go) else None
        navigated = asyncio.get_running_loop().create_future()

        def done(frame) -> None:
            if not navigated.done():
                navigated.set_result(frame)

        async def back() -> None:
            await cdp.send("Page.navigateToHistoryEntry", {"entryId": entry["id"]})
            await asyncio.wait_for(navigated, self.config.navigation_timeout)

        page.on("framenavigated", done)
        try:
            if await self._unload_held(page, back()):
                return held
        except asyncio.TimeoutError:
            with contextlib.suppress(Exception):  # as `_await_navigation`: the frame stays
                await cdp.send("Page.stopLoading")
            return f"TimeoutError: Page.{what}: Timeout {self.config.navigation_timeout * 1000:g}ms exceeded."  # fmt: skip
        finally:
            page.remove_listener("framenavigated", done)
        return None

    async def _unload_held(self, page, navigation) -> bool:
        """Await `navigation` (a coroutine), unless the page's `beforeunload` dialog is
        dismissed first: then the navigation will not happen, and it is abandoned (True).
        Its own outcome otherwise (False, or its exception)."""
        held = asyncio.get_running_loop().create_future()
        self._unload_watch = (page, held)
        task = asyncio.ensure_future(navigation)
        try:
            await asyncio.wait((task, held), return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                task.result()  # its exception, if any
                return False
            return True
        finally:
            self._unload_watch = None
            if not task.done():
                task.cancel()  # Playwright abandons the call
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _do_new_tab(self) -> None:
        self._page = await self._ctx.new_page()

    async def _do_tab_focus(self, index: int) -> str | None:
        pages = self._ctx.pages
        if index >= len(pages):
            return f"IndexError: no tab {index} (open tabs: 0 to {len(pages) - 1})"
        self._page = pages[index]
        await self._page.bring_to_front()
        return None

    async def _do_tab_close(self) -> None:
        await self._page.close()
        await self._next_page()

    async def _do_noop(self, ms: float = 1000) -> None:
        # not the tab's wait_for_timeout: a tab that closes itself meanwhile (a popup's
        # window.close()) made a noop "Target page, context or browser has been closed"
        await asyncio.sleep(ms / 1000)

    # -- observing ---------------------------------------------------------------------------
    async def _observe(self, error: str, refused: bool = False) -> Observation:
        """The active tab's observation. `refused`: the error is the sandbox's own text
        (a navigation outside the allowed origins, one it stopped at navigation_timeout),
        not the page's or the browser's answer: `refused: true` in the state, so the
        pipeline never trains on it.

        A tab that closes itself while it is read (a popup's window.close() from a timer)
        is gone from the observation, as one that closed during the action is (`_step`):
        the active one, and the observation is read in the tab active now; a background
        one, left out of the tabs. Its read raised Playwright's "Target page, context or
        browser has been closed", and every attempt failed."""
        from playwright.async_api import Error as PlaywrightError

        page = self._page
        reads = closes = 0
        while True:
            navs = self._nav_count
            crashed = page in self._crashed
            tree, focused, status, inputs, truncated, walked = "", "", None, {}, False, None
            unsettled = detached = closed = False
            if not crashed:
                watch = asyncio.create_task(self._watch_navigations())
                try:
                    tree, got, inputs = await self._extract(page)
                except PlaywrightError as exc:  # a crash while reading is the tab's answer too
                    if self._crash_of(page, exc):
                        crashed, tree, got, inputs = True, "", {"focused": "", "status": None}, {}
                    elif await self._closed(page, exc):
                        closed, got = True, {"focused": "", "status": None}
                    else:
                        raise
                finally:
                    watch.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await watch
                focused, status, walked = got["focused"], got["status"], got.get("walked")
                unsettled, detached = got.get("unsettled", False), got.get("detached", False)
                truncated = walked == "cut"
                if len(tree) > self.config.max_chars:
                    cut = tree.rfind("\n", 0, self.config.max_chars)
                    tree = tree[: cut if cut > 0 else self.config.max_chars]
                    truncated = True
            tabs, shown = [], []
            for p in [] if closed else self._ctx.pages:
                title = await self._title(p)
                if title is None:  # it closed while read: gone, as after the action
                    continue
                (title, cut_title), (url, cut_url) = cut_shown(title), cut_shown(p.url)
                tabs.append({"title": title, "url": url})
                shown.append(p)
                truncated = truncated or cut_title or cut_url
            if closed or page.is_closed():  # the active tab closed itself while read
                closes += 1
                if closes > READS:
                    raise SandboxError(f"the active tab closed while it was read, {closes} times in one step")  # fmt: skip
                page = await self._next_page()
                continue
            reads += 1
            # a navigation requested while the page was read (a script's timer, a click's):
            # what was read is the old document's, or parts of both; read again once it
            # committed (`_extract` waits for it, up to navigation_timeout)
            if navs == self._nav_count or crashed or reads >= READS:
                break
        if self._stopped_nav and not error:
            # a navigation no Playwright call waited for (a script's, after the action):
            # the text is ours, so the state says so
            error = f"TimeoutError: navigation to {self._stopped_nav}: Timeout {self.config.navigation_timeout * 1000:g}ms exceeded."  # fmt: skip
            refused = True
        active = shown.index(page)
        dialogs, more, self._dialogs, self._dialogs_more = self._dialogs, self._dialogs_more, [], 0  # fmt: skip
        # which tab opened each (its index among those shown; None: closed since)
        for d in dialogs:
            opener = d.pop("page")
            d["tab"] = shown.index(opener) if opener in shown else None
        nav_failed = error.startswith("Error: Page.go") and "net::ERR_" in error
        if "net::ERR_ABORTED" in error and any(d["type"] == "beforeunload" and d["tab"] == active for d in dialogs):  # fmt: skip
            nav_failed = False  # the page kept itself (its dialog dismissed): its answer
        failure = classify(page.url, status, tree, nav_failed, crashed)
        # the open tabs and the active one are the observation's too (tab_focus, tab_close)
        key = (page.url, tree, json.dumps(tabs), active)
        changed = self._last is None or key != self._last or bool(dialogs or more)
        self._last = key
        state = {
            "url": tabs[active]["url"],
            "title": tabs[active]["title"],
            "status": status,
            "tabs": tabs,
            "active_tab": active,
            "focused_bid": focused,
            "last_action_error": error,
            "inputs": inputs,
        }
        if self._step_blocked:
            state["blocked"] = list(self._step_blocked)
        if walked:
            state["tree_source"] = "dom_walk"  # not Chromium's AXTree: docs/web.md
        if unsettled:  # our clock ended the wait, not the page: the terminal's name for it
            state["still_printing"] = True
        if refused:
            state["refused"] = True
        if detached:  # a frame the page removed while it was read is left out
            state["frames_detached"] = True
        text = render(tabs, active, tree, focused, error)
        if dialogs or more:
            lines, state["dialogs"], not_shown, cut = shown_dialogs(dialogs, more, active)
            if not_shown:
                state["dialogs_not_shown"] = not_shown
            truncated = truncated or cut
            text += "\n\n## Dialog\n" + "\n".join(lines)
        return Observation(
            as_shown(text),  # a page's lone surrogate: U+FFFD, as Chromium draws it
            is_error=bool(error),
            truncated=truncated,
            state_json=as_shown(json.dumps(state, sort_keys=True, ensure_ascii=False)),
            env_failure=failure,
            changed=changed,
        )

    async def _title(self, page) -> str | None:
        """The tab's title: "" for a crashed one, None for one that closed (itself) while
        it was read."""
        from playwright.async_api import Error as PlaywrightError

        if page in self._crashed:
            return ""
        try:
            return await page.title()
        except PlaywrightError as exc:
            if self._crash_of(page, exc):
                return ""
            if await self._closed(page, exc):
                return None
            raise

    async def _closed(self, page, exc: Exception) -> bool:
        """Whether a Playwright error is the tab's closing while it was read (its
        window.close(): "Target page, context or browser has been closed"), the browser
        being alive. Playwright may raise it before it reports the tab's close event,
        which is awaited then."""
        await self._alive()
        if page.is_closed():
            return True
        said = ("has been closed", "no object with guid")  # the latter: a CDP session's
        if type(exc).__name__ != "TargetClosedError" and not any(s in str(exc) for s in said):
            return False
        with contextlib.suppress(Exception):
            await page.wait_for_event("close", timeout=CLOSE_EVENT_S * 1000)
        return page.is_closed()

    def _crash_of(self, page, exc: Exception) -> bool:
        """Whether a Playwright error is the tab's crash ("Target crashed": a call that
        was waiting when the tab died, whose crash event may come after it), noted so."""
        if page in self._crashed or "Target crashed" in str(exc):
            self._crashed.add(page)
            return True
        return False

    async def _extract(self, page, tries: int = 3):
        """(tree text, {focused, status, walked?, unsettled}, input types) of the page once
        it settled; a navigation racing the extraction (a script redirect) is waited out and
        retried. `walked` says a page too big for the AXTree was read by a DOM walk
        (`TreeOptions.dom_walk_over`), "cut" when it stopped at max_chars; `unsettled`
        that the settle ended before the page was found still (`_settle`)."""
        from playwright.async_api import Error as PlaywrightError

        for left in reversed(range(tries)):
            try:
                await self._await_navigation()
                with contextlib.suppress(PlaywrightError):  # still loading: observe what is there
                    await page.wait_for_load_state("load")
                # a navigation Playwright reported after the wait above holds the settle
                settled = await self._settle(page)
                if settled is None and await self._await_navigation() and left:
                    continue
                opts = self.config.tree
                marks = await mark_frames(page, opts.viewport_only, opts.dom_walk_over)
                if marks["walk"]:  # too big for the AXTree: walked, up to max_chars
                    walked = await walk_tree(page, opts, self.config.max_chars)
                    state = await unmark_frames(page, marks["frames"], carriers=False)
                    state["walked"] = "whole" if walked["complete"] else "cut"
                    state["unsettled"] = not settled
                    state["detached"] = marks["detached"]
                    return walked["text"], state, walked["inputs"]
                cdp = await self._cdp(page)
                try:
                    axtree = await page_axtree(page, cdp, self._blocked_url)
                finally:
                    state = await unmark_frames(page, marks["frames"])
                tree = flatten(axtree, opts, frozenset(marks["hidden"]), marks["visibility"])
                inputs = {b: t for b, t in marks["inputs"].items() if b not in marks["hidden"]}
                state["unsettled"] = not settled
                state["detached"] = marks["detached"] or axtree["detached"]
                return tree, state, inputs
            except PlaywrightError as exc:
                await self._alive()
                gone = ("context was destroyed", "detached", "navigat", "frameId")
                if left == 0 or not any(s in str(exc) for s in gone):
                    raise
        raise AssertionError("unreachable")

    async def _cdp(self, page):
        """One CDP session per page, kept for the page's life."""
        cdp = getattr(page, "_worldtrace_cdp", None)
        if cdp is None:
            cdp = await self._ctx.new_cdp_session(page)
            page._worldtrace_cdp = cdp
        return cdp

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {
            "backend": "playwright",
            "url": self._url,
            "config": {
                "browser": f"chromium {self._version}".strip(),
                "viewport": {"width": c.viewport.width, "height": c.viewport.height},
                "locale": c.locale,
                "allowed_origins": list(self._origins or c.allowed_origins),
                "logged_in": bool(c.storage_state),
                "tree": {
                    "ignored_roles": list(c.tree.ignored_roles),
                    "prune_hidden": c.tree.prune_hidden,
                    "prune_empty": c.tree.prune_empty,
                    "viewport_only": c.tree.viewport_only,
                    "dom_walk_over": c.tree.dom_walk_over,
                },
            },
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
        }
