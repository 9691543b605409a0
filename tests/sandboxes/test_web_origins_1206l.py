"""Origins a user writes as Chromium does not (items the 12-06 note left):

- a host spelled `127.1`, `0x7f.0.0.1` or `2130706433` is `127.0.0.1` to Chromium, which
  requests `http://127.0.0.1:PORT/`: the start page "redirected outside the allowed
  origins" and a `goto` to the same site was refused or let through by spelling;
- an IDN host (`bücher.example`) is `xn--bcher-kva.example` in every URL Chromium writes,
  so an allowed origin written in Unicode never matched its own pages;
- a percent-escaped host (`a%41.example`) is `aa.example`.

Origins now go through the WHATWG URL parser (ada, the one Node.js uses), which writes
hosts as Chromium does. A loopback server of two pages."""

from __future__ import annotations

import pytest
from worldtrace.sandboxes import web
from worldtrace.sandboxes.web import WebConfig
from worldtrace.sandboxes.web_spec import origin_of
from worldtrace.schemas.actions import tool
from worldtrace.schemas.parsing import parse

from ..conftest import QuietHandler, reply, serving_handler
from .test_web_origins import bid, start, state

H = "<html><head><title>{}</title></head><body>{}</body></html>"
PAGES = {
    "/form": H.format("Form", "<input name=q><button>Send</button>"),
    "/target": H.format("Target", "<h1>Target page</h1>"),
}


class Handler(QuietHandler):
    def do_GET(self):
        page = PAGES.get(self.path)
        reply(self, page or "no such page", 200 if page else 404)


@pytest.fixture
def site():
    with serving_handler(Handler) as url:
        yield url


def test_hosts_are_written_as_chromium_writes_them():
    assert origin_of("http://127.1:8080/x") == "http://127.0.0.1:8080"
    assert origin_of("http://0x7f.0.0.1/") == "http://127.0.0.1"
    assert origin_of("http://2130706433:81") == "http://127.0.0.1:81"
    assert origin_of("https://Bücher.Example/") == "https://xn--bcher-kva.example"
    assert origin_of("http://a%41.example") == "http://aa.example"
    assert origin_of("http://[::ffff:127.0.0.1]:80") == "http://[::ffff:7f00:1]"
    assert origin_of("http://example.com.:80") == "http://example.com."  # a name of its own
    config = parse(WebConfig, {"allowed_origins": ["http://Bücher.example:80", "http://127.1:9"]})
    assert config.allowed_origins == ("http://xn--bcher-kva.example", "http://127.0.0.1:9")
    for bad in ("http://a b/", "http://[::1/", "http://x:99999/", "http://1.2.3.4.5/"):
        with pytest.raises(ValueError):
            origin_of(bad)


@pytest.mark.browser
def test_a_start_page_and_a_goto_on_a_numeric_spelling_of_the_host(make, site):
    port = site.rsplit(":", 1)[1]
    obs = start(make(), f"http://127.1:{port}/form")
    assert not obs.is_error and state(obs)["url"] == f"http://127.0.0.1:{port}/form"
    assert "button 'Send'" in obs.text
    sb = make()
    start(sb, f"{site}/form")
    obs = sb.step(tool("goto", url=f"http://0x7f.1:{port}/target"))
    assert not obs.is_error and state(obs)["url"] == f"http://127.0.0.1:{port}/target"
    assert "Target page" in obs.text and "blocked" not in state(obs)


# -- a tab closing while the sandbox looks for popups that never loaded -------------------
TWO = H.format(
    "Two",
    """<button onclick="window.open('/target')">Open</button>
<button onclick="window.open('http://127.0.0.1:9/away')">Away</button>""",
)


class ClosingOnLookup:
    """A tab's CDP session whose tab closes as `_close_unborn` asks for its target id (a
    popup's own `window.close()` at that instant): the session's answer is CDP's error."""

    def __init__(self, cdp, page):
        self.cdp, self.page = cdp, page

    async def send(self, method, params=None):
        if method == "Target.getTargetInfo" and not self.page.is_closed():
            await self.page.close()
        return await self.cdp.send(method, params)


@pytest.mark.browser
def test_a_tab_closing_while_unborn_popups_are_looked_for_is_gone(make, site, monkeypatch):
    """`_close_unborn` asked every tab's target id unguarded: a tab closing at that instant
    failed the attempt (`Target page, context or browser has been closed`)."""
    monkeypatch.setitem(PAGES, "/two", TWO)
    sb = make()
    obs = start(sb, f"{site}/two")
    open_, away = bid(obs, "button", "Open"), bid(obs, "button", "Away")
    obs = sb.step(tool("click", bid=open_))
    assert [t["url"] for t in state(obs)["tabs"]] == [f"{site}/two", f"{site}/target"]
    obs = sb.step(tool("tab_focus", index=0))
    cdp = web.WebSandbox._cdp

    async def closing(self, page):
        session = await cdp(self, page)
        return ClosingOnLookup(session, page) if page.url.endswith("/target") else session

    monkeypatch.setattr(web.WebSandbox, "_cdp", closing)
    obs = sb.step(tool("click", bid=away))
    s = state(obs)
    assert (
        obs.env_failure is None and "navigation to http://127.0.0.1:9/away was blocked" in obs.text
    )
    assert [t["url"] for t in s["tabs"]] == [f"{site}/two"] and s["url"] == f"{site}/two"
    assert s["blocked"] == ["http://127.0.0.1:9/away"]
