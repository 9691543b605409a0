"""A page's own navigation pending as a step begins (hunt 1206b, data-wrong): a button
whose handler sets `location` from a timer, to a URL that never answers or answers
late, broke the next step's action. Playwright evaluates nothing in a tab whose
navigation has not committed, so the next click's look-up hung: `TimeoutError:
Locator.click: Timeout 2000ms exceeded.` for a plain button, the click never done; or
8-11 s and `Could not find element with bid` despite `navigation_timeout: 3`; or the
attempt failed at step_timeout. The navigation is now awaited before the action (and
one that starts during the look-up abandons it): committed, or stopped at its
`navigation_timeout` with our text, flagged `refused`; the action then runs.

One loopback server per test: `/go` answers when the test lets it (the page then
leaves: a navigation requested between two steps, deterministically), `/never` never
answers (until the test ends), `/slow` answers after SLOW_S (the slow environment),
`/next` at once; `seen` says which paths were asked for."""

from __future__ import annotations

import threading
import time

import pytest
from worldtrace.collectors.actions import tool

from ..conftest import QuietHandler, reply, serving_handler
from .test_web_origins import bid, start, state

pytestmark = pytest.mark.browser
SLOW_S = 4.0
NAV_S = 1.5
PAGE = """<html><head><title>Timer</title></head><body>
<button onclick="fetch('/go').then(() => { location = 'TARGET'; })">Leave later</button>
<button onclick="setTimeout(() => { location = 'TARGET'; }, 60)">Leave soon</button>
<button onclick="document.title = 'clicked'">Title</button>
</body></html>"""
NEXT = "<html><head><title>Next</title></head><body><p>the next page</p></body></html>"


class Site:
    def __init__(self):
        self.go = threading.Event()
        self.release = threading.Event()
        self.seen: dict[str, threading.Event] = {}
        self.url = ""

    def saw(self, path: str) -> threading.Event:
        return self.seen.setdefault(path, threading.Event())


@pytest.fixture
def site():
    s = Site()

    class Handler(QuietHandler):
        def do_GET(self):
            path = self.path.split("?")[0]
            s.saw(path).set()
            if path == "/go":
                s.go.wait(30)
                reply(self, "{}", kind="application/json")
            elif path == "/never":
                s.release.wait(60)  # never answers while the test runs
            elif path == "/slow":
                time.sleep(SLOW_S)  # the slow environment
                reply(self, NEXT)
            elif path == "/next":
                reply(self, NEXT)
            else:
                reply(self, PAGE.replace("TARGET", path.removeprefix("/to")))

    with serving_handler(Handler) as url:
        s.url = url
        try:
            yield s
        finally:
            s.go.set()
            s.release.set()


def leave_between_steps(make, site, target: str):
    """The page at `target`'s start; its navigation to `target` requested after step 0's
    read ended, before step 1 begins: (sandbox, the step-0 observation)."""
    sb = make(navigation_timeout=NAV_S, step_timeout=8)
    page = start(sb, f"{site.url}/to{target}")
    armed = sb.step(tool("click", bid=bid(page, "button", "Leave later")))
    assert not armed.is_error, armed.text
    assert not site.saw(target).is_set()
    site.go.set()  # /go answers: the page sets `location`
    assert site.saw(target).wait(10), f"the page never asked for {target}"
    return sb, armed


@pytest.mark.parametrize("target", ["/never", "/slow"])
def test_a_navigation_pending_as_the_step_begins_is_stopped_before_the_click(make, site, target):
    sb, armed = leave_between_steps(make, site, target)
    began = time.monotonic()
    obs = sb.step(tool("click", bid=bid(armed, "button", "Title")))
    took = time.monotonic() - began
    st = state(obs)
    # the click was done, on the page the tab stayed on
    assert st["title"] == "clicked" and st["url"] == f"{site.url}/to{target}", obs.text
    assert "Locator.click" not in obs.text and "Could not find" not in obs.text, obs.text
    # the navigation was stopped at its navigation_timeout, our text, flagged refused
    assert obs.text.endswith(
        f"TimeoutError: navigation to {site.url}{target}: Timeout {NAV_S * 1000:g}ms exceeded."
    ), obs.text
    assert obs.is_error and st["refused"] is True and obs.changed
    assert took < NAV_S + 2.5, took  # not until the page answers, nor step_timeout
    after = sb.step(tool("noop", ms=10))
    assert not after.is_error and "refused" not in state(after)
    assert state(after)["title"] == "clicked"


def test_a_navigation_pending_as_the_step_begins_commits_before_the_action(make, site):
    """One that answers in time is the page the action meets, and the one observed: the
    old page's bid is not on it (the environment's answer, not ours)."""
    sb, armed = leave_between_steps(make, site, "/next")
    obs = sb.step(tool("click", bid=bid(armed, "button", "Title")))
    st = state(obs)
    assert st["url"] == site.url + "/next" and "the next page" in obs.text, obs.text
    assert obs.text.endswith('ValueError: Could not find element with bid "' + bid(armed, "button", "Title") + '"')  # fmt: skip
    assert "refused" not in st


def test_a_timer_navigation_right_after_a_click_leaves_the_next_click_alone(make, site):
    """The hunter's job: a 60 ms timer, the next action at once. The navigation is
    requested during step 0's read, between the steps or during step 1's look-up: in
    each case the title button's click is done, and no step waits for the page."""
    sb = make(navigation_timeout=NAV_S, step_timeout=8)
    page = start(sb, f"{site.url}/to/never")
    steps = []
    for action in (
        tool("click", bid=bid(page, "button", "Leave soon")),
        tool("click", bid=bid(page, "button", "Title")),
        tool("noop", ms=10),
    ):
        began = time.monotonic()
        steps.append(sb.step(action))
        assert time.monotonic() - began < NAV_S + 2.5
    assert site.saw("/never").is_set()
    for obs in steps:
        assert "Locator.click" not in obs.text and "Could not find" not in obs.text, obs.text
        assert not obs.is_error or state(obs)["refused"] is True, obs.text
    assert [state(o)["title"] for o in steps][1:] == ["clicked", "clicked"]
    stopped = [o for o in steps if o.is_error]
    assert len(stopped) == 1 and f"navigation to {site.url}/never" in stopped[0].text
