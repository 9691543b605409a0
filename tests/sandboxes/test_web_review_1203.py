"""Web defects a reviewer found (review 1203): our own refusal text in training data, a
`goto` to a URL that never answers failing the attempt, a slow link recorded as a failed
click, a new tab sent outside losing the trajectory, dialogs no observation showed.

One loopback server: `/slow` answers after SLOW_S (the slow environment, not a
synchronisation), `/never` never answers (until the module ends), `/out` redirects to
another origin (refused by the context's proxy)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from worldtrace.collectors.actions import tool

from ..conftest import reply, serving
from .test_web_origins import bid, start, state

pytestmark = pytest.mark.browser
OUTSIDE = "http://example.com/"
SLOW_S = 2.5
PAGES = {
    "/home": f"""<html><head><title>Home</title></head><body><h1>Home</h1>
<a href="/out">away</a> <a href="/slow">slow</a> <a href="/never">never</a>
<a href="{OUTSIDE}" target="_blank">outside tab</a> <a href="/missing">missing</a>
<form action="/slow"><input name="q" aria-label="slow search"></form>
<form action="/never"><input name="q" aria-label="never search"></form>
</body></html>""",
    # leaves for a URL that never answers 1.5 s after its load
    "/later": """<html><head><title>Later</title></head><body><p>leaving soon</p><script>
window.addEventListener("load", () => setTimeout(() => { location.href = "/never"; }, 1500));
</script></body></html>""",
    "/dialogs": """<html><head><title>Dialogs</title></head><body><p id="r">none</p>
<button onclick="alert('Hello alert')">Alert</button>
<button onclick="document.getElementById('r').textContent = confirm('Sure?') ? 'yes' : 'no'">Confirm</button>
<button onclick="document.getElementById('r').textContent = 'got ' + prompt('Name?', 'def')">Prompt</button>
</body></html>""",
}  # fmt: skip


@pytest.fixture(scope="module")
def site():
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            path = self.path.split("?")[0]
            if path == "/never":
                release.wait(60)  # never answers while the tests run
                return
            if self.path == "/out":
                self.send_response(302)
                self.send_header("Location", OUTSIDE)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status, body = 200, PAGES.get(self.path)
            if path == "/slow":
                time.sleep(SLOW_S)  # the slow environment
                body = "<html><head><title>Slow</title></head><body><p>finally</p></body></html>"
            if body is None:
                status, body = 404, "<html><head><title>Missing</title></head><body><p>no such page</p></body></html>"  # fmt: skip
            reply(self, body, status)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    try:
        with serving(server) as url:
            yield url
    finally:
        release.set()


def test_our_refusals_are_flagged_refused_the_environments_answers_are_not(make, site):
    """Found: "navigation to http://example.com/ was blocked (outside the allowed
    origins)" is our text, not the site's, and was trained on as the environment's."""
    sb = make(navigation_timeout=5)
    home = start(sb, site + "/home")
    assert "refused" not in state(home)
    redirected = sb.step(tool("click", bid=bid(home, "link", "away")))
    assert f"navigation to {OUTSIDE} was blocked" in redirected.text
    # (Chromium may try https first: its CONNECT is refused too)
    assert state(redirected)["refused"] is True and OUTSIDE in state(redirected)["blocked"]
    direct = sb.step(tool("goto", url=OUTSIDE))
    assert direct.is_error and "outside the allowed origins" in direct.text
    assert state(direct)["refused"] is True
    scheme = sb.step(tool("goto", url="file:///etc/passwd"))
    assert scheme.is_error and state(scheme)["refused"] is True
    # the page's and the browser's own answers are not ours
    missing = sb.step(tool("goto", url=site + "/missing"))
    assert state(missing)["status"] == 404, missing.text + missing.state_json
    assert "refused" not in state(missing)
    unknown = sb.step(tool("click", bid="999"))
    assert unknown.is_error and "refused" not in state(unknown)
    back = sb.step(tool("goto", url=site + "/home"))
    assert not back.is_error and "refused" not in state(back)


def test_a_goto_that_never_answers_is_the_actions_timeout_error(make, site):
    """Found: `goto` to a URL that never answers timed out after navigation_timeout, then
    the observation waited on the pending navigation until step_timeout failed the attempt."""
    sb = make(navigation_timeout=1, step_timeout=6)
    start(sb, site + "/home")
    began = time.monotonic()
    obs = sb.step(tool("goto", url=site + "/never"))
    assert time.monotonic() - began < 5
    assert obs.is_error and "TimeoutError: Page.goto: Timeout 1000ms exceeded." in obs.text
    st = state(obs)
    assert st["url"] == site + "/home" and "refused" not in st  # the page it was on
    after = sb.step(tool("noop", ms=10))  # the tab is usable, nothing still loads
    assert not after.is_error and state(after)["url"] == site + "/home"
    again = sb.step(tool("goto", url=site + "/home"))
    assert not again.is_error and "Home" in again.text


def test_a_click_on_a_link_that_never_answers_is_a_timeout_too(make, site):
    sb = make(navigation_timeout=1, step_timeout=6)
    home = start(sb, site + "/home")
    began = time.monotonic()
    obs = sb.step(tool("click", bid=bid(home, "link", "never")))
    assert time.monotonic() - began < 5
    assert obs.is_error and obs.text.rsplit("\n", 1)[1].startswith("TimeoutError: ")
    assert "refused" not in state(obs) and state(obs)["url"] == site + "/home"
    after = sb.step(tool("noop", ms=10))
    assert not after.is_error and state(after)["url"] == site + "/home"


def test_a_click_on_a_slow_link_is_done_and_shows_the_new_page(make, site):
    """Found: `TimeoutError: Locator.click: Timeout 2000ms exceeded.` for a link whose page
    answered after 8 s and was shown: the click waited for the navigation it started."""
    sb = make(action_timeout=1, navigation_timeout=5, step_timeout=9)
    home = start(sb, site + "/home")
    obs = sb.step(tool("click", bid=bid(home, "link", "slow")))
    assert not obs.is_error, obs.text
    assert state(obs)["url"] == site + "/slow" and "finally" in obs.text


def test_a_new_tab_sent_outside_is_closed_and_the_navigation_blocked(make, site):
    """Found: the route handler aborted a popup's first navigation (its frame is not known
    yet), so Chromium's own error page became the active tab and the trajectory was
    dropped as navigation_failed."""
    sb = make(navigation_timeout=5)
    home = start(sb, site + "/home")
    obs = sb.step(tool("click", bid=bid(home, "link", "outside tab")))
    st = state(obs)
    # Chromium asks for https://example.com/ (it upgrades a new tab's http navigation)
    assert obs.is_error and "example.com/ was blocked (outside the allowed origins)" in obs.text
    assert st["refused"] is True and {urlsplit(u).hostname for u in st["blocked"]} == {
        "example.com"
    }
    assert len(st["tabs"]) == 1 and st["url"] == site + "/home" and obs.env_failure is None


def test_dialogs_are_shown_in_the_observation_and_dismissed(make, site):
    """Found: alert, confirm and prompt vanished (Playwright dismissed them unseen)."""
    sb = make()
    page = start(sb, site + "/dialogs")
    alert = sb.step(tool("click", bid=bid(page, "button", "Alert")))
    assert "\n## Dialog\nalert: Hello alert" in alert.text and not alert.is_error
    assert state(alert)["dialogs"] == [{"type": "alert", "message": "Hello alert"}]
    confirm = sb.step(tool("click", bid=bid(page, "button", "Confirm")))
    assert "confirm: Sure?" in confirm.text and "StaticText 'no'" in confirm.text
    prompt = sb.step(tool("click", bid=bid(page, "button", "Prompt")))
    assert "prompt: Name?" in prompt.text and "StaticText 'got null'" in prompt.text
    quiet = sb.step(tool("noop", ms=10))
    assert "## Dialog" not in quiet.text and "dialogs" not in state(quiet)


def test_enter_in_a_form_waits_for_its_slow_page(make, site):
    """The navigation a key press starts is waited for as a click's (not under
    action_timeout): the slow page is shown."""
    sb = make(action_timeout=1, navigation_timeout=5, step_timeout=9)
    home = start(sb, site + "/home")
    slow = sb.step(tool("press", bid=bid(home, "textbox", "slow search"), key="Enter"))
    assert not slow.is_error and "finally" in slow.text
    assert state(slow)["url"] == site + "/slow?q="


def test_enter_in_a_form_that_never_answers_times_out_as_goto(make, site):
    """...and one that never answers is stopped at navigation_timeout, the tab usable."""
    sb = make(navigation_timeout=1, step_timeout=6)
    home = start(sb, site + "/home")
    began = time.monotonic()
    never = sb.step(tool("press", bid=bid(home, "textbox", "never search"), key="Enter"))
    assert time.monotonic() - began < 5
    assert never.is_error and never.text.endswith("TimeoutError: Locator.press: Timeout 1000ms exceeded.")  # fmt: skip
    assert state(never)["url"] == site + "/home" and "refused" not in state(never)
    after = sb.step(tool("noop", ms=10))
    assert not after.is_error and state(after)["url"] == site + "/home"


def test_a_scripts_navigation_that_never_answers_is_stopped_and_flagged(make, site):
    """A navigation no Playwright call waited for (a script's timer, while the agent
    waits) is stopped at navigation_timeout, with our text about it: flagged `refused`."""
    sb = make(navigation_timeout=1, step_timeout=6)
    start(sb, site + "/later")
    began = time.monotonic()
    obs = sb.step(tool("noop", ms=3000))  # the page leaves meanwhile
    assert time.monotonic() - began < 5.5
    assert obs.text.endswith(f"TimeoutError: navigation to {site}/never: Timeout 1000ms exceeded.")
    assert state(obs)["refused"] is True and state(obs)["url"] == site + "/later"
    after = sb.step(tool("noop", ms=10))
    assert not after.is_error and "refused" not in state(after) and "leaving soon" in after.text
