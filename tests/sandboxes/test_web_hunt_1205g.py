"""Web defects a hunt found (1205g), each reproduced with Chromium:

- a navigation a page script started shortly after the action (a timer's `location`)
  was recorded in the next turn: its request was answered, the settle ran in the old
  document and found it still, and the observation read the old page (or parts of both:
  the tab's title '' over the old tree), the new one came in the next step as a change;
- the DOM walk of big pages (`tree_source: dom_walk`) printed hidden text the AXTree
  leaves out (a closed `<details>`, `content-visibility: hidden`, a zero-height box's
  own text), named an `<optgroup>` '' and put `expanded` on the `<details>` group
  instead of its disclosure triangle;
- an iframe of another origin, which the sandbox stops, was recorded as the page's
  content: Chromium's error page ("This page has been blocked by Chromium").

Loopback servers of small pages; one answers its second page late (its latency, not a
synchronisation)."""

from __future__ import annotations

import time

import pytest
from worldtrace.schemas.actions import tool

from ..conftest import QuietHandler, reply, serving_handler, serving_pages
from .test_web_origins import bid, start, state

pytestmark = pytest.mark.browser
LATE_S = 0.3
"""How late the server answers the page a script navigates to."""
PAGES = {
    "/start": """<html><head><title>Start</title></head><body><p>the start page</p>
<button onclick="armed = true">Arm</button>
<script>
// the navigation starts while the sandbox reads the page (its marks are attributes)
let armed = false;
new MutationObserver(() => { if (armed) { armed = false; location.href = '/form'; } })
  .observe(document.body, {attributes: true, subtree: true, attributeFilter: ["aria-roledescription"]});
</script></body></html>""",
    "/form": """<html><head><title>Form</title></head><body><p>the form page</p>
<a href="/done">Done</a></body></html>""",
    "/done": "<html><head><title>Done</title></head><body><p>done</p></body></html>",
}  # fmt: skip
HIDDEN = """<details><summary>More</summary><p>Closed detail text</p>Closed loose text</details>
<details open><summary>Open</summary><p>Open detail text</p></details>
<div style="height:0;overflow:hidden">Zero height text<p>Clipped paragraph</p></div>
<div style="content-visibility:hidden"><p>Skipped paragraph</p>Skipped loose text</div>
<select><optgroup label="G"><option>o1</option></optgroup><option>o2</option></select>
<p>Visible <span>text</span></p>"""
"""Hidden content of the kinds the walk printed (and visible content around it)."""


@pytest.fixture(scope="module")
def site():
    """PAGES, `/form` answered LATE_S late."""

    class Handler(QuietHandler):
        def do_GET(self):
            if self.path == "/form":
                time.sleep(LATE_S)  # the server's latency, not a synchronisation
            body = PAGES.get(self.path)
            reply(self, body or "no such page", 200 if body else 404)

    with serving_handler(Handler) as url:
        yield url


def assert_form_page(obs, site: str) -> None:
    """The observation is the form page's, all of it: tree, URL and the tab's title."""
    assert "StaticText 'the form page'" in obs.text and "the start page" not in obs.text
    s = state(obs)
    assert (s["url"], s["title"]) == (f"{site}/form", "Form")
    assert s["tabs"] == [{"title": "Form", "url": f"{site}/form"}]
    assert not obs.is_error and obs.env_failure is None


# -- 1. a navigation requested during the step -------------------------------------------------


def test_a_navigation_requested_while_the_page_is_read_is_observed_once_it_committed(make, site):
    """The page navigates as soon as the sandbox marks it, and its next page answers late:
    the observation was the old page read before the new one committed (the request
    seen, its commit not awaited); the step is now observed on the form page, whose
    bids act."""
    sb = make()
    obs = start(sb, f"{site}/start")
    obs = sb.step(tool("click", bid=bid(obs, "button", "Arm")))
    assert_form_page(obs, site)
    after = sb.step(tool("noop", ms=0))
    assert not after.changed  # it was this step's, not the next one's
    done = sb.step(tool("click", bid=bid(obs, "link", "Done")))
    assert state(done)["url"] == f"{site}/done" and not done.is_error


# -- 2. the DOM walk's hidden text ---------------------------------------------------------------


def test_the_walk_leaves_out_the_hidden_text_the_accessibility_tree_leaves_out(make):
    """The same page read by the AXTree (dom_walk_over 0) and by the walk (1): closed
    details, content-visibility: hidden, a zero-height box's own text; an optgroup's
    label and a disclosure triangle's `expanded` as the AXTree has them."""
    page = f"<html><head><title>Hidden</title></head><body>{HIDDEN}</body></html>"
    texts = []
    with serving_pages({"/hidden": page}) as url:
        for over in (0, 1):
            obs = start(make(tree={"dom_walk_over": over}), f"{url}/hidden")
            assert ("tree_source" in state(obs)) == bool(over)
            texts.append(obs.text)
    ax, walked = texts
    for hidden in ("Closed detail text", "Closed loose text", "Zero height text",
                   "Skipped paragraph", "Skipped loose text"):  # fmt: skip
        assert hidden not in ax
    assert "group 'G'" in ax and "DisclosureTriangle 'More', expanded=False" in ax
    assert walked == ax


def test_a_big_page_by_the_walk_leaves_out_the_hidden_text(make):
    """The hunt's page: the hidden elements followed by 2,600 paragraphs (over 5,000
    elements: walked at the default `dom_walk_over`), as the AXTree reads them alone."""
    paras = "".join(f"<p>P{i} <a href=x>L{i}</a></p>" for i in range(2600))
    pages = {
        "/small": f"<html><body>{HIDDEN}</body></html>",
        "/big": f"<html><body>{HIDDEN}{paras}</body></html>",
    }
    with serving_pages(pages) as url:
        small = start(make(), f"{url}/small")
        big = start(make(), f"{url}/big")
    assert state(big)["tree_source"] == "dom_walk" and "tree_source" not in state(small)
    head = small.text.split("## Accessibility tree\n")[1].split("\n")[1:]
    lines = big.text.split("## Accessibility tree\n")[1].split("\n")[1:]
    assert lines[: len(head)] == head
    first, text = lines[len(head)], lines[len(head) + 1]
    assert first.endswith("] paragraph ''") and text == "\t\tStaticText 'P0'"


# -- 3. a blocked iframe -------------------------------------------------------------------------


def test_a_blocked_iframe_is_shown_blocked_not_as_chromiums_error_page(make):
    """An iframe of another origin: stopped (listed in `blocked`), and its frame shows
    Chromium's error page. That page was the tree's, a target like the site's own text;
    now the Iframe says it was blocked and the rest of the page is observed as it was."""
    with serving_pages({"/x": "<p>outside</p>"}) as other:
        pages = {
            "/frame": f"""<html><head><title>Framed</title></head><body><p>Main text</p>
<iframe src="{other}/x"></iframe><button>After</button></body></html>""",
            "/inner": "<html><body><p>inner text</p></body></html>",
            "/same": """<html><head><title>Same</title></head><body>
<iframe src="/inner"></iframe></body></html>""",
        }
        with serving_pages(pages) as url:
            sb = make()
            obs = start(sb, f"{url}/frame")
            assert state(obs)["blocked"] == [f"{other}/x"]
            assert "chrome-error" not in obs.text and "blocked by Chromium" not in obs.text
            assert f"\t[a] Iframe '', blocked='{other}'" in obs.text.splitlines()
            assert "StaticText 'Main text'" in obs.text and bid(obs, "button", "After")
            assert obs.env_failure is None and not obs.is_error
            # a frame of the allowed origin is read as before
            same = sb.step(tool("goto", url=f"{url}/same"))
            assert "StaticText 'inner text'" in same.text and "blocked=" not in same.text
