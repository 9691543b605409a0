"""A frame whose document never commits held the observation until `step_timeout` (hunt
1206): a page with `<iframe src="file:///...">` failed every attempt ("the browser did not
finish loading ... within 30 s"). Chromium refuses such a URL in a page of the web ("Not
allowed to load local resource") and leaves the frame on its initial empty document, whose
script context it creates only when something touches the frame's window; Playwright's
`evaluate` in the frame waits for that context. The same for `chrome:`, `view-source:`,
`devtools:`, an `about:blank#...` frame and a frame whose server never answers.

Such frames are now observed at once: one Chromium refused says `blocked=` as a blocked
frame of another origin does, the others are their empty document. Loopback servers of
small pages; one never answers a frame's request until the test ends."""

from __future__ import annotations

import contextlib
import threading
import time
from urllib.parse import unquote

import pytest
from worldtrace.schemas.actions import tool

from ..conftest import QuietHandler, reply, serving_handler
from .test_web_origins import bid, start, state

pytestmark = pytest.mark.browser
STEP_TIMEOUT = 20.0
"""The attempts' limit: a hang failed the step at this."""
QUICK_S = STEP_TIMEOUT / 2
"""What a step on these small pages may take on a loaded machine (0.3-1 s idle, 3.5 s with
the frame that never loads)."""
LOAD_WAIT_S = 2.0
"""`navigation_timeout`, how long an observation waits for a load event (`_extract`): a
page whose frame never answers never fires one."""
SECRET = "the file's own text"


def page(src: str) -> str:
    return f"""<html><head><title>Framed</title></head><body><h1>IF</h1>
<iframe src="{src}"></iframe><button>After</button></body></html>"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """`/frame?<src>`: a page framing <src>; `/never`: answered when the test ends;
    `/link`: a link to a page framing `/never`."""
    local = tmp_path_factory.mktemp("local") / "secret.txt"
    local.write_text(SECRET)
    release = threading.Event()

    class Handler(QuietHandler):
        def do_GET(self):
            path, _, query = self.path.partition("?")
            if path == "/never":
                release.wait()  # a frame's server that never answers (until the test ends)
                with contextlib.suppress(OSError):  # the browser is gone by then
                    reply(self, "<p>late</p>")
            elif path == "/frame":
                reply(self, page(unquote(query)))
            elif path == "/link":
                reply(self, '<title>Link</title><a href="/frame?/never">framed</a>')
            else:
                reply(self, "<p>inner</p>")

    with serving_handler(Handler) as url:
        yield url, local.as_uri()
        release.set()


def iframe_line(obs) -> str:
    [line] = [ln for ln in obs.text.splitlines() if "] Iframe " in ln]
    return line.strip()


def observed(make, url: str):
    """The start page's observation and how long the reset took."""
    sb = make(step_timeout=STEP_TIMEOUT, navigation_timeout=LOAD_WAIT_S)
    began = time.monotonic()
    obs = start(sb, url)
    return sb, obs, time.monotonic() - began


@pytest.mark.parametrize(
    "src, shown",
    [
        ("{file}", "{file}"),
        ("chrome://version", "chrome://version"),
        ("view-source:{url}/inner", "view-source:{url}/inner"),
        ("devtools://devtools/bundled/inspector.html", "devtools://devtools"),
        ("filesystem:{url}/temporary/x", "filesystem:{url}/temporary/x"),
    ],
)
def test_a_frame_chromium_refuses_is_observed_blocked(make, site, src, shown):
    """The page is observed, its frame as blocked (Chromium's refusal, as the sandbox's of
    another origin is shown: the URL's origin, or the URL when it has none), quickly."""
    url, file = site
    src, shown = (s.format(url=url, file=file) for s in (src, shown))
    sb, obs, took = observed(make, f"{url}/frame?{src}")
    assert took < QUICK_S
    assert state(obs)["title"] == "Framed" and "heading 'IF'" in obs.text
    assert iframe_line(obs) == f"[a] Iframe '', blocked={shown!r}"
    assert SECRET not in obs.text and bid(obs, "button", "After")
    assert obs.env_failure is None and not obs.is_error
    # the page is usable: its bids act, and a step reads it as quickly again
    began = time.monotonic()
    again = sb.step(tool("click", bid=bid(obs, "button", "After")))
    assert time.monotonic() - began < QUICK_S
    assert not again.is_error and iframe_line(again) == iframe_line(obs)


def test_an_about_blank_fragment_frame_is_its_empty_document(make, site):
    """`about:blank#x` commits (it is no refusal), yet held the observation as the
    refused ones did: observed now, the frame empty and not said to be blocked."""
    url, _ = site
    _, obs, took = observed(make, f"{url}/frame?about:blank%23x")
    assert took < QUICK_S
    assert iframe_line(obs) == "[a] Iframe ''" and bid(obs, "button", "After")


def test_a_frame_whose_server_never_answers_does_not_hold_the_step(make, site):
    """A link to a page whose frame never loads: the page committed, its frame's request
    never ends, and the page's load event never comes. The step observes the page (its
    frame empty, still loading: not blocked) once the wait for the load event and the
    settle's cap on requests in flight ended, not at step_timeout."""
    url, _ = site
    sb, obs, _ = observed(make, f"{url}/link")
    began = time.monotonic()
    obs = sb.step(tool("click", bid=bid(obs, "link", "framed")))
    assert time.monotonic() - began < QUICK_S
    assert state(obs)["url"] == f"{url}/frame?/never" and "heading 'IF'" in obs.text
    assert iframe_line(obs) == "[a] Iframe ''" and not obs.is_error


def test_a_frame_a_script_fills_is_still_read(make, site):
    """A `javascript:` frame never commits a navigation either, but its script writes its
    document: it is read, with bids, as before."""
    url, _ = site
    _, obs, _ = observed(make, f"{url}/frame?javascript:'<p>written</p>'")
    assert "StaticText 'written'" in obs.text and "blocked=" not in obs.text
