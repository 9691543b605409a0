"""Web defects a hunt found (1206s), each reproduced with Chromium:

- a popup that closes itself (`window.close()` from a timer, 0-120 ms after it opened)
  failed the attempt when it closed while the observation was read (`TargetClosedError:
  Page.evaluate: Target page, context or browser has been closed`, `Page.title:`,
  `Frame.evaluate:`): the tab that closed is now gone from the observation, active or
  in the background, as after a `window.close()` during the action;
- `tab_focus` with `index: 0.0` failed the attempt (`TypeError: list indices must be
  integers or slices, not float`), `1e0` was `IndexError: no tab 1.0`;
- an origin spelling the scheme's default port (`http://127.0.0.1:80`) was not the origin
  Chromium writes (`http://127.0.0.1`): the start page "redirected outside the allowed
  origins", `allowed_origins: ["http://localhost:80"]` refused its own start page;
- a page swapping its iframe from a 15 ms timer failed the attempt (`Frame.frame_element:
  Frame has been detached.`), every 30 ms at `step_timeout`, every 60 ms took 10 s per
  observation: a frame removed while read is now left out (`frames_detached: true`);
- `go_back` held by a `beforeunload` handler waited out `navigation_timeout`
  (`TimeoutError: Page.go_back: Timeout 5000ms exceeded.`): now `net::ERR_ABORTED` at once;
- a flood of alerts made an observation of 243,715 characters under `max_chars: 5000`,
  not marked truncated;
- a background tab's alert was shown as the active tab's.

Loopback servers of small pages; one on port 80."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from worldtrace.sandboxes import web, web_spec
from worldtrace.sandboxes.web import WebConfig
from worldtrace.sandboxes.web_spec import SHOWN_MAX, TOOLS, origin_of, proxy_bypass
from worldtrace.schemas import Action
from worldtrace.schemas.actions import tool
from worldtrace.schemas.parsing import parse

from ..conftest import QuietHandler, reply, serving, serving_handler
from .test_web_origins import bid, start, state

H = "<html><head><title>{}</title></head><body>{}</body></html>"
PAGES = {
    "/opener": H.format("Opener", """<button onclick="window.open('/popup')">Open</button>"""),
    "/popup": H.format("Popup", "<p>the popup</p>"),
    "/opencloser": H.format(
        "OpenCloser", """<button onclick="window.open('/closer' + location.search)">Open</button>"""
    ),
    "/closer": H.format(
        "Closer",
        """<p>closing</p>
<script>setTimeout(() => window.close(), +new URLSearchParams(location.search).get('ms'))</script>""",
    ),
    "/tabs": H.format("Tabs", """<a href="/popup" target="_blank">New tab</a>"""),
    "/form": H.format("Form", "<input name=q><button>Send</button>"),
    "/target": H.format("Target", "<h1>Target page</h1>"),
    "/rotator": H.format(
        "Rotator",
        """<p>ads</p><div id=slot></div><script>
let n = 0;
function swap() {
  const s = document.getElementById('slot'); s.innerHTML = '';
  const f = document.createElement('iframe'); f.src = '/inner?n=' + (n++); s.appendChild(f);
}
swap(); setInterval(swap, +new URLSearchParams(location.search).get('ms'));</script>""",
    ),
    "/inner": H.format("Inner", "<p>inner text</p><button>InnerBtn</button>"),
    "/framed": H.format(
        "Framed",
        """<h1>Outer</h1><div id=slot><iframe src="/inner"></iframe></div>
<button>After</button>""",
    ),
    "/bu": H.format(
        "BU",
        """<p>beforeunload page</p><input id=i><script>
addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = 'x'; });</script>""",
    ),
    "/arm": H.format(
        "Arm",
        """<button onclick="window.addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = 'x'; })">Arm</button>""",
    ),
    "/alerts": H.format(
        "Alerts",
        """<p>alerts</p>
<script>let k = 0; setInterval(() => alert('flood ' + (k++) + ' ' + 'z'.repeat(1900)), 5)</script>""",
    ),
    "/listener": H.format(
        "Listener",
        """<p>listening</p><script>
const c = new BroadcastChannel('t');
c.onmessage = () => { alert('from tab zero'); c.postMessage('ack'); };</script>""",
    ),
    "/sender": H.format(
        "Sender",
        """<button onclick="c.postMessage('ping')">Ping</button>
<p id=s>waiting</p><script>const c = new BroadcastChannel('t');
c.onmessage = () => { document.getElementById('s').textContent = 'acked'; };</script>""",
    ),
}


class Handler(QuietHandler):
    def do_GET(self):
        body = PAGES.get(urlsplit(self.path).path)
        reply(self, body or "<p>no such page</p>", 200 if body else 404)


@pytest.fixture(scope="module")
def site():
    with serving_handler(Handler) as url:
        yield url


def call(name: str, arguments_json: str) -> Action:
    """A tool call with its arguments as written (`1e0` stays `1e0`)."""
    return Action(kind="tool_call", text=f"{name}({arguments_json})", name=name, arguments_json=arguments_json)  # fmt: skip


def consistent(obs) -> dict:
    """The state, checked to name its active tab among its tabs."""
    s = state(obs)
    assert s["url"] == s["tabs"][s["active_tab"]]["url"]
    return s


async def close_itself(page) -> None:
    """Have the tab close itself (`window.close()`, as its script would) and wait for it."""
    closed = asyncio.ensure_future(page.wait_for_event("close", timeout=10_000))
    with contextlib.suppress(Exception):  # the tab may go before it answers
        await page.evaluate("window.close()")
    await closed


# -- 1: a tab that closes itself while it is read ------------------------------------------


@pytest.mark.browser
def test_a_popup_closing_itself_soon_after_it_opened_never_fails_the_attempt(make, site):
    """The hunter's pages: whenever the popup closes (before, during or after the reads),
    the steps are observations, and the active tab is one of those listed."""
    sb = make()
    for ms in (0, 20, 40, 60, 80, 120):
        obs = start(sb, f"{site}/opencloser?ms={ms}")
        for action in (tool("click", bid=bid(obs, "button", "Open")), tool("noop", ms=10)):
            obs = sb.step(action)
            assert not obs.is_error, (ms, state(obs)["last_action_error"])
            assert {t["url"] for t in consistent(obs)["tabs"]} <= {f"{site}/opencloser?ms={ms}", f"{site}/closer?ms={ms}"}  # fmt: skip


@pytest.mark.browser
def test_the_active_tab_closing_while_its_tree_is_read_is_gone(make, site, monkeypatch):
    """The popup closes itself once marked, before its tree is read: the observation is
    the opener's, the popup gone (it raised TargetClosedError out of the step)."""
    marked = web.mark_frames

    async def closing(page, *args):
        marks = await marked(page, *args)
        if page.url.endswith("/popup"):
            await close_itself(page)
        return marks

    monkeypatch.setattr(web, "mark_frames", closing)
    sb = make()
    obs = start(sb, f"{site}/opener")
    obs = sb.step(tool("click", bid=bid(obs, "button", "Open")))
    s = consistent(obs)
    assert (s["tabs"], s["active_tab"]) == ([{"title": "Opener", "url": f"{site}/opener"}], 0)
    assert "button 'Open'" in obs.text and not obs.is_error and obs.env_failure is None


@pytest.mark.browser
def test_a_background_tab_closing_while_the_titles_are_read_is_left_out(make, site, monkeypatch):
    """The popup, in the background, closes itself as its title is read: it is left out
    of the tabs (its `page.title()` raised TargetClosedError out of the step)."""
    sb = make()
    obs = start(sb, f"{site}/opener")
    obs = sb.step(tool("click", bid=bid(obs, "button", "Open")))
    assert len(state(obs)["tabs"]) == 2
    title = sb._title

    async def closing(page):
        if page.url.endswith("/popup") and page is not sb._page:
            await close_itself(page)
        return await title(page)

    monkeypatch.setattr(sb, "_title", closing)
    obs = sb.step(tool("tab_focus", index=0))
    s = consistent(obs)
    assert (s["tabs"], s["active_tab"]) == ([{"title": "Opener", "url": f"{site}/opener"}], 0)
    assert not obs.is_error


@pytest.mark.browser
def test_a_noop_in_a_tab_closed_since_the_last_step_is_no_error(make, site):
    """The noop waits on the sandbox's clock: its tab having closed itself between two
    steps (a popup's timer) is no `Error: Page.wait_for_timeout: Target page, context or
    browser has been closed`; the tab is gone from the observation."""
    sb = make()
    obs = start(sb, f"{site}/opener")
    obs = sb.step(tool("click", bid=bid(obs, "button", "Open")))
    popup = sb._page
    assert popup.url == f"{site}/popup" and state(obs)["active_tab"] == 1
    sb._run(close_itself(popup), "closing the popup")  # its own window.close(), as a timer's
    obs = sb.step(tool("noop", ms=10))
    assert not obs.is_error, state(obs)["last_action_error"]
    assert consistent(obs)["tabs"] == [{"title": "Opener", "url": f"{site}/opener"}]


# -- 2: integral floats for integer arguments -----------------------------------------------


def test_integral_floats_are_the_integers_an_integer_argument_takes():
    from worldtrace.sandboxes.base import integral_ints

    schema = TOOLS["tab_focus"].input_schema
    assert integral_ints(schema, {"index": 0.0}) == {"index": 0}
    assert type(integral_ints(schema, {"index": 1e0})["index"]) is int
    assert integral_ints(schema, {"index": 0.5}) == {"index": 0.5}  # the check refuses it
    assert TOOLS["tab_focus"].check(integral_ints(schema, {"index": 0.5}))
    noop = TOOLS["noop"].input_schema  # a number stays what it is
    assert type(integral_ints(noop, {"ms": 10.0})["ms"]) is float
    assert integral_ints(schema, None) is None and integral_ints(schema, [1.0]) == [1.0]


@pytest.mark.browser
def test_tab_focus_takes_an_integral_float_index(make, site):
    sb = make()
    obs = start(sb, f"{site}/tabs")
    obs = sb.step(tool("click", bid=bid(obs, "link", "New tab")))
    assert state(obs)["active_tab"] == 1
    obs = sb.step(call("tab_focus", '{"index": 0.0}'))
    assert (obs.is_error, state(obs)["active_tab"]) == (False, 0)
    obs = sb.step(call("tab_focus", '{"index": 1e0}'))
    assert (obs.is_error, state(obs)["active_tab"]) == (False, 1)
    obs = sb.step(call("tab_focus", '{"index": 0.5}'))
    assert obs.is_error and state(obs)["active_tab"] == 1
    assert state(obs)["last_action_error"] == "ValueError: tab_focus: argument index: 0.5 is not of type 'integer'"  # fmt: skip


# -- 3: origins as Chromium writes them ---------------------------------------------------


def test_an_origin_is_written_as_chromium_writes_it():
    assert origin_of("http://127.0.0.1:80/form") == "http://127.0.0.1"
    assert origin_of("https://Example.COM:443/") == "https://example.com"
    assert origin_of("http://example.com:443/") == "http://example.com:443"
    assert origin_of("https://user:pw@[::1]:8443/x?y") == "https://[::1]:8443"
    assert origin_of("HTTP://localhost:8000") == "http://localhost:8000"
    for bad in ("ftp://x/", "http:///x", "http://x:99999/", "about:blank"):
        with pytest.raises(ValueError):
            origin_of(bad)
    config = parse(WebConfig, {"allowed_origins": ["http://localhost:80", "HTTPS://A.example:443/"]})  # fmt: skip
    assert config.allowed_origins == ("http://localhost", "https://a.example")
    assert proxy_bypass(config.allowed_origins) == (
        "<-loopback>,http://localhost:80,ws://localhost:80,https://a.example:443,wss://a.example:443"
    )
    for bad in ("http://localhost/path", "http://u@localhost", "http://localhost/?q"):
        with pytest.raises(Exception, match="an origin is scheme://host"):
            parse(WebConfig, {"allowed_origins": [bad]})


@pytest.fixture
def port80():
    """The site on 127.0.0.1:80 (the scheme's default port): set-up runs as root (it
    installs Debian packages), and a fresh machine serves nothing there. Not skipped: the
    behaviour cannot be shown on another port (Chromium drops only the default one)."""
    try:
        server = ThreadingHTTPServer(("127.0.0.1", 80), Handler)
    except OSError as exc:  # not root, or the port is taken
        pytest.fail(f"cannot serve on 127.0.0.1:80 (root, and the port free, needed): {exc}")
    server.daemon_threads = True
    with serving(server):
        yield "http://127.0.0.1"
    server.server_close()


@pytest.mark.browser
def test_the_default_port_spelled_out_is_the_same_origin(make, port80):
    obs = start(make(), "http://127.0.0.1:80/form")
    assert state(obs)["url"] == "http://127.0.0.1/form" and "button 'Send'" in obs.text
    obs = start(make(allowed_origins=["http://localhost:80"]), "http://localhost/form")
    assert state(obs)["url"] == "http://localhost/form"
    sb = make()
    start(sb, "http://127.0.0.1/form")
    obs = sb.step(tool("goto", url="http://127.0.0.1:80/target"))
    assert not obs.is_error and state(obs)["url"] == "http://127.0.0.1/target"
    assert "Target page" in obs.text and "blocked" not in state(obs)


# -- 4: frames removed while read ---------------------------------------------------------


@pytest.mark.browser
def test_a_page_swapping_its_iframe_every_15_ms_is_observed(make, site):
    sb = make(step_timeout=60)
    observations = [start(sb, f"{site}/rotator?ms=15")]
    observations += [sb.step(tool("noop", ms=10)) for _ in range(2)]
    for obs in observations:
        assert "StaticText 'ads'" in obs.text and not obs.is_error and obs.env_failure is None
        assert "browsergym_id" not in obs.text  # no mark of ours left behind
    assert any(state(obs).get("frames_detached") for obs in observations)


@pytest.mark.browser
def test_a_page_swapping_its_iframe_every_60_ms_is_observed_at_the_cap(make, site, monkeypatch):
    """Its frames' documents answering were taken for the page rendering what it fetched:
    10 s per observation (SETTLE_LOADING_MAX_S); now the cap of a page that keeps
    changing, 1.0-1.4 s on a shared 2-core machine (up to 6 s under a load of 10). The
    loading cap is raised to 20 s for the steps so that the two stay far apart."""
    sb = make(step_timeout=60)
    start(sb, f"{site}/rotator?ms=60")
    monkeypatch.setattr(web, "SETTLE_LOADING_MAX_S", 20.0)
    for _ in range(2):
        began = time.monotonic()
        obs = sb.step(tool("noop", ms=10))
        assert time.monotonic() - began < web.SETTLE_LOADING_MAX_S / 2
        assert "StaticText 'ads'" in obs.text and state(obs)["still_printing"]


class Replacing:
    """A CDP session whose child frames' trees are asked for after the page replaced
    their iframe (as a rotating ad does): each read finds its frame gone."""

    def __init__(self, cdp, page):
        self.cdp, self.page = cdp, page

    async def send(self, method, params=None):
        if method == "Accessibility.getFullAXTree" and params:
            gone = asyncio.ensure_future(self.page.wait_for_event("framedetached", timeout=10_000))
            await self.page.evaluate("""() => { const f = document.createElement('iframe');
                f.src = '/inner'; document.querySelector('iframe').replaceWith(f); }""")
            await gone
        return await self.cdp.send(method, params)


@pytest.mark.browser
def test_a_frame_gone_before_its_tree_is_read_is_left_out(make, site, monkeypatch):
    """The rest of the page observed, the state saying a frame was left out (the read
    was retried with the whole settle, and failed the attempt the third time)."""
    axtree = web.page_axtree
    monkeypatch.setattr(web, "page_axtree", lambda page, cdp, *a: axtree(page, Replacing(cdp, page), *a))  # fmt: skip
    obs = start(make(), f"{site}/framed")
    assert "heading 'Outer'" in obs.text and bid(obs, "button", "After")
    assert "inner text" not in obs.text and state(obs)["frames_detached"] is True
    assert not obs.is_error and obs.env_failure is None


# -- 5: a history navigation held by beforeunload -----------------------------------------


@pytest.mark.browser
def test_go_back_and_forward_held_by_beforeunload_end_at_once(make, site):
    timeout = 10.0
    sb = make(navigation_timeout=timeout)
    start(sb, f"{site}/target")
    obs = sb.step(tool("goto", url=f"{site}/bu"))
    sb.step(tool("fill", bid=bid(obs, "textbox", ""), text="typed"))  # the user's activation
    for action, there in ((tool("go_back"), "/target"), (tool("goto", url=f"{site}/target"), None)):
        began = time.monotonic()
        obs = sb.step(action)
        assert time.monotonic() - began < timeout / 2
        s = state(obs)
        assert s["url"] == f"{site}/bu" and "value='typed'" in obs.text
        assert obs.env_failure is None and s["dialogs"][0]["type"] == "beforeunload"
        if there:
            assert s["last_action_error"] == f"Error: Page.go_back: net::ERR_ABORTED at {site}{there}"  # fmt: skip
    # forward: back on a page that holds its navigations only once armed
    sb = make(navigation_timeout=timeout)
    start(sb, f"{site}/arm")
    sb.step(tool("goto", url=f"{site}/target"))
    obs = sb.step(tool("go_back"))
    assert state(obs)["url"] == f"{site}/arm" and not obs.is_error
    sb.step(tool("click", bid=bid(obs, "button", "Arm")))
    began = time.monotonic()
    obs = sb.step(tool("go_forward"))
    assert time.monotonic() - began < timeout / 2
    assert state(obs)["last_action_error"] == f"Error: Page.go_forward: net::ERR_ABORTED at {site}/target"  # fmt: skip
    assert state(obs)["url"] == f"{site}/arm" and obs.env_failure is None


# -- 6, 7: dialogs -----------------------------------------------------------------------


def test_the_dialogs_shown_are_bounded_and_say_their_tab():
    from worldtrace.sandboxes.web_spec import DIALOGS_SHOWN_MAX, shown_dialogs

    long = "m" * (SHOWN_MAX + 10)
    dialogs = [{"type": "alert", "message": long, "tab": 0, "url": "http://a/"}] * 5
    lines, entries, hidden, cut = shown_dialogs(dialogs, 3, 0)
    assert sum(len(line) + 1 for line in lines[:-1]) <= DIALOGS_SHOWN_MAX
    assert (len(entries), hidden, cut) == (1, 7, True)
    assert lines == ["alert: " + "m" * (SHOWN_MAX - 1) + "…", "(7 more dialogs not shown)"]
    few = [
        {"type": "alert", "message": "here", "tab": 1, "url": "http://a/1"},
        {"type": "confirm", "message": "there", "tab": 0, "url": "http://a/0"},
        {"type": "alert", "message": "gone", "tab": None, "url": "http://a/2"},
    ]
    lines, entries, hidden, cut = shown_dialogs(few, 0, 1)
    assert lines == ["alert: here", "confirm from tab 0 (http://a/0): there", "alert from a closed tab (http://a/2): gone"]  # fmt: skip
    assert (entries, hidden, cut) == ([{"type": "alert", "message": "here"}, *few[1:]], 0, False)


@pytest.mark.browser
def test_a_flood_of_alerts_is_cut_and_flagged(make, site):
    max_chars = 5000
    sb = make(max_chars=max_chars)
    start(sb, f"{site}/alerts")
    obs = sb.step(tool("noop", ms=300))
    s = state(obs)
    assert obs.truncated and s["dialogs_not_shown"] >= 1
    section = obs.text.split("\n\n## Dialog\n", 1)[1]
    assert len(obs.text) < 2 * max_chars and len(obs.state_json) < 2 * max_chars
    assert len(section) <= web_spec.DIALOGS_SHOWN_MAX + 40
    assert section.endswith(f"({s['dialogs_not_shown']} more dialogs not shown)")
    assert all(d.keys() == {"type", "message"} and d["message"].startswith("flood ") for d in s["dialogs"])  # fmt: skip


@pytest.mark.browser
def test_a_background_tabs_dialog_is_shown_as_that_tabs(make, site):
    """Tab 0 alerts when tab 1 pings it, and answers once the alert was dismissed: the
    observations up to the answer show it once, as tab 0's."""
    sb = make()
    start(sb, f"{site}/listener")
    sb.step(tool("new_tab"))
    obs = sb.step(tool("goto", url=f"{site}/sender"))
    obs = sb.step(tool("click", bid=bid(obs, "button", "Ping")))
    seen = [obs]
    while "acked" not in obs.text and len(seen) < 50:  # tab 0 answered after its alert
        obs = sb.step(tool("noop", ms=50))
        seen.append(obs)
    assert "acked" in obs.text
    dialogs = [(o, d) for o in seen for d in state(o).get("dialogs", [])]
    assert [d for _, d in dialogs] == [{"type": "alert", "message": "from tab zero", "tab": 0, "url": f"{site}/listener"}]  # fmt: skip
    shown, _ = dialogs[0]
    assert shown.text.endswith(f"\n\n## Dialog\nalert from tab 0 ({site}/listener): from tab zero")
    assert state(shown)["active_tab"] == 1 and shown.changed
    assert json.loads(shown.state_json)["tabs"][0]["url"] == f"{site}/listener"
