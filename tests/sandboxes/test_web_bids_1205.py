"""Web observations that misreported the page (found 1205).

- A page's own `bid` attribute was taken for ours, and the counter gave the next element
  the same bid: two `[6]` lines, `click("6")` acting on the first, and the duplicate
  renumbered at the next observation (a noop `changed`, though nothing changed).
- The DOM walk named a control inside its `<label>` from the label's whole text, the
  control's own options and text included (`combobox 'Pick Alpha Beta'`).

One loopback server of small pages (`PAGES`).
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.web_explorer import parse_tree

from ..conftest import serving_pages
from .test_web_origins import start

pytestmark = pytest.mark.browser


def _button(n: str) -> str:
    return (
        f"<button onclick=\"document.getElementById('o').textContent='clicked {n.upper()}'\">"
        f"{n}</button>"
    )


PAGES = {
    "/bid.html": "<!doctype html><html><head><title>Bids</title></head><body>"
    + _button("First").replace("<button ", '<button bid="6" ')
    + _button("Second")
    + _button("Third")
    + _button("Fourth")
    + '<div id="o">none</div></body></html>',
    "/labels.html": "<!doctype html><html><head><title>Labels</title></head><body>"
    "<label>Pick <select><option>Alpha</option><option>Beta</option></select></label>"
    "<label>Note <textarea>hello</textarea></label>"
    '<label>Size <select><option value="s">Small</option>'
    '<option value="l" selected>Large</option></select> cm</label>'
    "<p>a</p><p>b</p><p>c</p><p>d</p></body></html>",
}


@pytest.fixture(scope="module")
def site():
    with serving_pages(PAGES) as url:
        yield url


def tree(obs) -> str:
    return obs.text.split("## Accessibility tree")[1].split("\n## ")[0]


def test_a_page_s_own_bid_attribute_makes_no_duplicate_bid(make, site):
    sb = make()
    first = start(sb, f"{site}/bid.html")
    shown = parse_tree(first.text)
    bids = [e.bid for e in shown]
    assert len(bids) == len(set(bids)), tree(first)  # was: [6] 'First' and [6] 'Fourth'
    buttons = {e.name: e.bid for e in shown if e.role == "button"}
    assert set(buttons) == {"First", "Second", "Third", "Fourth"}

    noop = sb.step(tool("noop", ms=10))  # the page did not change: nor do its bids
    assert noop.changed is False and tree(noop) == tree(first)

    for name, bid in buttons.items():  # every bid shown acts on the element shown with it
        clicked = sb.step(tool("click", bid=bid))
        assert not clicked.is_error, clicked.text
        assert f"StaticText 'clicked {name.upper()}'" in clicked.text, (name, bid)
        assert {e.name: e.bid for e in parse_tree(clicked.text) if e.role == "button"} == buttons


def test_the_dom_walk_names_a_control_in_its_label_as_the_axtree_does(make, site):
    """The accessible-name computation skips the labelled control itself."""
    lines = {}
    for over in (0, 5):  # 0: Chromium's AXTree; 5: the page's 13 elements are walked
        obs = start(make(tree={"dom_walk_over": over}), f"{site}/labels.html")
        assert ("dom_walk" in obs.state_json) == (over == 5)
        lines[over] = [
            (e.role, e.name) for e in parse_tree(obs.text) if e.role in ("combobox", "textbox")
        ]
    assert lines[0] == [("combobox", "Pick"), ("textbox", "Note"), ("combobox", "Size cm")]
    assert lines[5] == lines[0]
