"""Web defects a user hit (hunt 1205d), each reproduced twice:

- a plain-http start page with a host name failed every attempt as "redirected outside
  the allowed origins, to https://...": the server never redirected, Chromium upgraded
  the URL itself (HTTPS-Upgrades, which Playwright switches off, switched on again by
  our own `--disable-features`, the one switch Chromium honours);
- a tab that crashed while its observation was read failed the attempt
  (`Frame.evaluate: Target crashed`) instead of being the `crashed` observation;
- `tab_focus` and `tab_close` were `changed: False` (and dropped as `gui_no_change`)
  though the open tabs and the active one had changed;
- a page still rendering when the settle's cap fired was observed half done, unflagged,
  different on every run (the docs' search: 52-91 of 114 results);
- `go_back` of a frame's navigation worked but was recorded as a 15 s TimeoutError
  (Playwright's `go_back` waits for the main frame).

One loopback server of small pages (`PAGES`), plus one whose answers are slow."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas.actions import tool

from ..conftest import QuietHandler, reply, serving_handler, serving_pages
from .test_web_origins import bid, start, state

pytestmark = pytest.mark.browser
OLD_DEFAULT_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-features=AutofillServerCommunication",
]  # fmt: skip
"""The launch switches docs/web.md listed, as a user copies them to add one of their own."""
BUTTONS = "".join(f"<button>b{i}</button>" for i in range(50))
PAGES = {
    "/index.html": "<html><head><title>Docs</title></head><body><p>served over http</p></body></html>",
    "/same": "<html><head><title>Same</title></head><body><p>one page, two tabs</p></body></html>",
    # the page reads the sandbox's marking (a MutationObserver), says so and hangs there,
    # so the test crashes the tab while the observation is being read
    "/crash": f"""<html><head><title>Crash</title></head><body>{BUTTONS}
<button onclick="armed = true">Arm</button><script>
let armed = false;
new MutationObserver(() => {{ if (armed) {{ armed = false; console.log("reading"); while (true) {{}} }} }})
  .observe(document, {{attributes: true, subtree: true}});
</script></body></html>""",
    "/ticker": """<html><head><title>Ticker</title></head><body><p id="t">0</p><script>
let n = 0; setInterval(() => { document.getElementById("t").textContent = String(++n); }, 10);
</script></body></html>""",
    "/outer.html": """<html><head><title>Outer</title></head><body><h1>Outer</h1>
<iframe src="/inner1.html"></iframe></body></html>""",
    "/inner1.html": """<html><head><title>Inner 1</title></head><body><p>first inner</p>
<a href="/inner2.html">next</a></body></html>""",
    "/inner2.html": """<html><head><title>Inner 2</title></head><body><p>second inner</p></body></html>""",
}  # fmt: skip
RESULTS = 40
SEARCH = f"""<html><head><title>Search</title></head><body><h2 id="h">Searching</h2>
<ul id="r"></ul><script>
let left = {RESULTS};
const next = () => fetch("/item?" + left).then((r) => r.text()).then((t) => {{
  const li = document.createElement("li"); li.textContent = t;
  document.getElementById("r").appendChild(li);
  if (--left) setTimeout(next, 5); else document.getElementById("h").textContent = "Search finished";
}});
window.addEventListener("load", next);
</script></body></html>"""
"""The docs' search, in small: each result is fetched, then shown, one after the other,
for longer than the settle's 1 s cap (RESULTS answers of 60 ms each)."""


@pytest.fixture(scope="module")
def site():
    with serving_pages(PAGES) as url:
        yield url


@pytest.fixture(scope="module")
def search_site():
    """SEARCH, whose results each take 60 ms to answer."""

    class Handler(QuietHandler):
        def do_GET(self):
            if self.path.startswith("/item?"):
                time.sleep(0.06)  # the server's latency, not a synchronisation
                reply(self, "result " + self.path.split("?")[1], kind="text/plain")
            else:
                reply(self, SEARCH)

    with serving_handler(Handler) as url:
        yield url


def job(sandbox: dict, retries: int = 2) -> dict:
    return {
        "name": "hunt", "sandbox": {"kind": "web", **sandbox}, "policy": "scripted",
        "retries": retries,
        "tasks": [{"id": "t", "instruction": "x", "actions": [{"tool": "noop", "arguments": {"ms": 0}}]}],
    }  # fmt: skip


def mapped_to(site: str) -> dict:
    """Browser settings that resolve every host name to the loopback site (its port for
    every name's port 80), with the switches a user copied from the docs."""
    port = site.rsplit(":", 1)[1]
    rule = f"--host-resolver-rules=MAP * 127.0.0.1:{port}"
    return {"resolve_hosts": True, "args": [*OLD_DEFAULT_ARGS, rule]}


# -- 1. Chromium's own https upgrade ---------------------------------------------------------


def test_a_plain_http_host_name_start_page_is_the_job_files_mistake_not_a_redirect(store):
    """With the default settings the name cannot resolve, so no retry loads it. It failed
    (retried) as "redirected outside the allowed origins, to https://example.com/":
    Chromium's HTTPS-Upgrades tried https first and the context's proxy refused it."""
    url = "http://example.com/"
    result = run_job(JobSpec.from_dict(job({"start_url": url})), store.raw)
    assert [t.outcome.error for t in result.trajectories] == [
        f"SandboxConfigError: start page {url} cannot load: this browser resolves no host "
        "name (browser.resolve_hosts is off)"
    ]
    assert result.failed_attempts == 1


def test_a_plain_http_site_with_a_host_name_loads_over_http(make, site):
    """A real http-only site reached by name (here: every name mapped to the loopback
    site's port): it loads over http, nothing blocked."""
    sb = make(browser=mapped_to(site))
    obs = start(sb, "http://docs.mysite.com/index.html")
    assert state(obs)["url"] == "http://docs.mysite.com/index.html"
    assert "StaticText 'served over http'" in obs.text
    assert "blocked" not in state(obs) and sb.blocked == []


def test_a_start_page_the_browser_itself_upgrades_is_named_so(site, store):
    """`.dev` is on Chromium's HSTS preload list: the browser, not the site, sends it to
    https, on every attempt alike. Before, that was "redirected outside the allowed
    origins" and retried."""
    url = "http://docs.mysite.dev/index.html"
    result = run_job(JobSpec.from_dict(job({"start_url": url, "browser": mapped_to(site)})), store.raw)  # fmt: skip
    assert [t.outcome.error for t in result.trajectories] == [
        f"SandboxConfigError: start page {url} cannot load: Chromium itself upgrades it to "
        "https://docs.mysite.dev/index.html (HSTS), outside the allowed origins "
        "(http://docs.mysite.dev)"
    ]
    assert result.failed_attempts == 1


def test_the_browser_keeps_every_feature_playwright_switches_off(make, site):
    """Chromium honours only the last `--disable-features`: ours replaced Playwright's
    whole list (HttpsUpgrades, PaintHolding, its background-traffic switches...). The
    browser's own command line says which list it runs with."""
    for browser in ({}, mapped_to(site)):
        sb = make(browser=browser)
        start(sb, f"{site}/same" if not browser else "http://docs.mysite.com/same")
        cmdline = Path(f"/proc/{sb.host.runner.run(_browser_pid(sb), 10)}/cmdline").read_bytes()
        lists = [a.split("=", 1)[1].split(",") for a in cmdline.decode().split("\0") if a.startswith("--disable-features=")]  # fmt: skip
        playwrights, honoured = set(lists[0]), set(lists[-1])
        assert "HttpsUpgrades" in playwrights
        assert playwrights | {"AutofillServerCommunication"} <= honoured


async def _browser_pid(sb) -> int:
    cdp = await sb._ctx.browser.new_browser_cdp_session()
    info = await cdp.send("SystemInfo.getProcessInfo")
    return next(p["id"] for p in info["processInfo"] if p["type"] == "browser")


# -- 2. a crash while the observation is read -----------------------------------------------


def test_a_tab_that_crashes_while_it_is_observed_is_a_crashed_observation(make, site):
    """The page hangs when the sandbox marks its elements, and the tab is crashed there
    (CDP `Page.crash`, as out of memory would): the attempt failed with `Frame.evaluate:
    Target crashed`; the crash is the environment's answer, `env_failure: crashed`."""
    sb = make()
    arm = bid(start(sb, f"{site}/crash"), "button", "Arm")
    sends = []

    async def crash_when_read() -> None:
        cdp = await sb._ctx.new_cdp_session(sb._page)

        def on(msg) -> None:
            if msg.text == "reading":
                sends.append(asyncio.ensure_future(cdp.send("Page.crash")))  # never answers

        sb._page.on("console", on)

    sb.host.runner.run(crash_when_read(), 10)
    crashed = sb.step(tool("click", bid=arm))
    assert crashed.env_failure == "crashed" and sends
    assert state(crashed)["url"] == f"{site}/crash"
    after = sb.step(tool("noop", ms=0))  # the tab stays crashed, still observed
    assert after.env_failure == "crashed"

    async def drop_sends() -> None:
        for s in sends:
            s.cancel()
            with contextlib.suppress(BaseException):
                await s

    sb.host.runner.run(drop_sends(), 10)


# -- 3. tab_focus and tab_close change the tabs ------------------------------------------------


def test_focusing_or_closing_a_tab_is_a_change(make, site):
    """Two tabs on the same page: switching between them changes neither the URL nor the
    tree, but the open tabs and the active one (the observation's first section and
    state_json). They were `changed: False`, dropped by `process` as gui_no_change."""
    sb = make()
    start(sb, f"{site}/same")
    sb.step(tool("new_tab"))
    sb.step(tool("goto", url=f"{site}/same"))
    focus = sb.step(tool("tab_focus", index=0))
    assert (state(focus)["active_tab"], focus.changed) == (0, True)
    close = sb.step(tool("tab_close"))
    assert (len(state(close)["tabs"]), state(close)["active_tab"], close.changed) == (1, 0, True)
    again = sb.step(tool("tab_focus", index=0))  # the tab already active: nothing changed
    assert again.changed is False


# -- 4. a page still rendering at the settle's cap --------------------------------------------


def test_a_page_still_changing_at_the_cap_is_flagged(make, site):
    """A page that never stops changing is observed at the cap, as before, but says so
    (`still_printing`, as the terminal's wait cut mid-stream: the pipeline never trains
    on where our clock stopped it); a still page does not."""
    sb = make()
    ticking = start(sb, f"{site}/ticker")
    assert state(ticking).get("still_printing") is True
    assert state(sb.step(tool("noop", ms=0))).get("still_printing") is True
    still = sb.step(tool("goto", url=f"{site}/same"))
    assert "still_printing" not in state(still)


def test_a_page_rendering_what_it_fetches_is_observed_finished(make, search_site):
    """The docs' search shows each result once its fetch answers, for longer than the
    1 s cap: observed with 52-91 of 114 results, different every run. While a page
    renders answers that keep arriving, the settle waits on."""
    obs = start(make(), f"{search_site}/search")
    assert "heading 'Search finished'" in obs.text, obs.text
    assert obs.text.count("StaticText 'result ") == RESULTS
    assert "still_printing" not in state(obs)


# -- 5. go_back of a frame's navigation ---------------------------------------------------------


def test_going_back_in_a_frame_is_recorded_as_done(make, site):
    """A link inside an iframe navigates the frame; `go_back` takes the frame back, and
    was recorded as `TimeoutError: Page.go_back: Timeout ...` (Playwright waits for the
    main frame). `go_forward` the same."""
    sb = make(navigation_timeout=3)
    link = bid(start(sb, f"{site}/outer.html"), "link", "next")
    inner2 = sb.step(tool("click", bid=link))
    assert "StaticText 'second inner'" in inner2.text and not inner2.is_error
    back = sb.step(tool("go_back"))
    assert not back.is_error, state(back)["last_action_error"]
    assert "StaticText 'first inner'" in back.text and back.changed
    forward = sb.step(tool("go_forward"))
    assert not forward.is_error, state(forward)["last_action_error"]
    assert "StaticText 'second inner'" in forward.text
    top = sb.step(tool("goto", url=f"{site}/same"))
    assert "StaticText 'one page, two tabs'" in top.text
    home = sb.step(tool("go_back"))  # the main frame's history: Playwright's, as before
    assert not home.is_error and state(home)["url"] == f"{site}/outer.html"
    assert "StaticText 'second inner'" in home.text or "StaticText 'first inner'" in home.text


def test_going_forward_with_no_entry_after_is_no_error(make, site):
    """At the end of the history there is nothing to go to: no error, no change (as
    Playwright's own `go_forward`)."""
    sb = make()
    start(sb, f"{site}/same")
    forward = sb.step(tool("go_forward"))
    assert not forward.is_error and forward.changed is False
