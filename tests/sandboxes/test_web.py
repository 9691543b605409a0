"""The web sandbox in real headless Chromium, against real sites on loopback.

One browser serves every test (the process's shared host); each episode gets a fresh
context. Sites: the Python docs from Debian's python3-doc, datasette over a SQLite
database, and a few pages written here for the edge cases (hidden elements, frames,
requests to other origins, a CAPTCHA wall).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from worldtrace.collectors.actions import tool, tool_call
from worldtrace.pipelines.filters import FilterConfig, apply_filters
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.web import (
    LAST_CHANGE_KEY,
    SETTLE_QUIET_MS,
    WebSandbox,
    WebTask,
)
from worldtrace.sandboxes.web_browser import NO_NAME_RESOLUTION, BrowserConfig, launch_args
from worldtrace.sandboxes.web_explorer import parse_tree
from worldtrace.sandboxes.web_sites import start_datasette, start_docs_site
from worldtrace.schemas import Trajectory, Turn

from ..conftest import QuietHandler, reply, serving_handler

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
REFERENCE_VENV = ROOT / ".venv-browsergym"
PAGES = {
    "edge.html": """<html><head><title>Edge cases</title></head><body>
<h1>Edge cases</h1>
<img src="http://blocked.invalid/pixel.png" alt="remote pixel">
<p>Go <a href="http://blocked.invalid/away">elsewhere</a> or <a href="other.html" target="_blank">open a tab</a>.</p>
<div style="display:none"><button>Gone</button></div>
<div style="visibility:hidden"><button id="ghost">Ghost</button></div>
<label>Colour <select name="c"><option value="r">Red</option><option value="g">Green</option></select></label>
<p></p><div></div>
<iframe srcdoc="<p>framed <button>Inside</button></p>"></iframe>
</body></html>""",
    "other.html": """<html><head><title>Other</title></head><body><p>The other page.</p>
<button onclick="window.close()">Close me</button></body></html>""",
    "blank.html": "<html><head><title></title></head><body></body></html>",
    "wall.html": "<html><head><title>Check</title></head><body><h1>Please verify you are human</h1></body></html>",
    "signup.html": "<html><head><title>Sign up</title></head><body><form action='blank.html'><label>Email"
    " <input name='email'></label><button>Join</button></form><footer><small>This site is protected"
    " by reCAPTCHA and the Google Privacy Policy and Terms of Service apply.</small></footer></body></html>",
    "robot.html": "<html><head><title>Check</title></head><body><p>One more step</p><label><input"
    " type='checkbox'> I'm not a robot</label></body></html>",
    # renders after its load event, a few nodes at a time (as a docs search fills in results)
    "late.html": """<html><head><title>Late</title></head><body><h1>Results</h1><ul id="r"></ul>
<p id="s">Searching</p><script>
window.addEventListener("load", () => {
  let n = 0;
  const add = () => {
    const li = document.createElement("li"); li.textContent = "result " + (++n);
    document.getElementById("r").appendChild(li);
    if (n < 30) setTimeout(add, 5); else document.getElementById("s").textContent = "All 30 results";
  };
  setTimeout(add, 5);
});
</script></body></html>""",
    # a click that changes the page at once and again after the same pause; "Add" adds a
    # node (a new bid to mark) and notes when
    "click.html": """<html><head><title>Click</title></head><body><p id="s">Ready</p>
<button onclick="const s = document.getElementById('s'); s.textContent = 'Working';
setTimeout(() => { s.textContent = 'Finished after a pause'; }, 45)">Run</button>
<button onclick="window.changedAt = performance.now();
document.body.insertAdjacentHTML('beforeend', '<p>Added</p>')">Add</button>
<script>window.changedAt = performance.now();</script></body></html>""",
}  # fmt: skip


@pytest.fixture(scope="module")
def docs():
    site = start_docs_site()
    yield site
    site.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    for name, html in PAGES.items():
        (root / name).write_text(html)
    site = start_docs_site(root)
    yield site
    site.stop()


def fetching(first: str) -> str:
    """The page of `FETCHING`, whose first answer comes from the JavaScript `first`."""
    return """<html><head><title>Fetching</title></head><body><h1>Glossary</h1>
<div id="out"></div><p>Below the box</p><script>
window.addEventListener("load", () => {
  const get = (url) => fetch(url).then((r) => r.json());
  FIRST.then((a) => get("/slow/second").then((b) => {
    document.getElementById("out").insertAdjacentHTML("afterbegin",
      '<div style="display:none"><span>hidden</span></div><p>' + a.text + " " + b.text + "</p>");
  }));
  if (location.search === "?poll") get("/never");
});
</script></body></html>""".replace("FIRST", first)


FETCHING = fetching('get("/slow/first")')
"""Renders what two chained fetches answer after `load`, each slower than the DOM-quiet
wait (the docs' search page prepends its hidden glossary box this way); `?poll` also
leaves a request open that never answers."""
PAUSING = fetching('get("/slow/first").then((a) => new Promise((go) => setTimeout(go, 150, a)))')
"""`FETCHING` with 150 ms between the first answer and the second request: the gap a
renderer short of CPU leaves between handling an answer and acting on it."""


@pytest.fixture(scope="module")
def slow_site():
    """A loopback server whose JSON answers take 250 ms, and one that never answers."""
    release = threading.Event()

    class Handler(QuietHandler):
        def do_GET(self):
            if self.path.startswith("/never"):
                release.wait()
                return
            if self.path.startswith("/slow/"):
                time.sleep(0.25)  # the network's latency, not a synchronisation
                body, kind = json.dumps({"text": self.path.rsplit("/", 1)[1]}), "application/json"
            else:
                body, kind = (PAUSING if "pausing" in self.path else FETCHING), "text/html"
            reply(self, body, kind=kind)

    try:
        with serving_handler(Handler) as url:
            yield url + "/"
    finally:
        release.set()  # the handler still holding /never returns


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    site = start_datasette(tmp_path_factory.mktemp("datasette"))
    yield site
    site.stop()


def start(sb: WebSandbox, url: str):
    return sb.reset(TaskSpec("t", params=WebTask(url=url)))


def state(obs) -> dict:
    """Browser state plus the GUI flags the pipeline's filters read."""
    return {**json.loads(obs.state_json), "changed": obs.changed, "env_failure": obs.env_failure}


def bid(obs, role: str, name: str) -> str:
    [e] = [e for e in parse_tree(obs.text) if e.role == role and e.name == name]
    return e.bid


def test_filling_and_submitting_a_form_changes_the_next_observation(make, library):
    sb = make(storage_state=library.storage_state)  # signed in as root
    form = start(sb, library.url + "library/add_note")
    assert "root" in form.text and state(form)["status"] == 200
    sb.step(tool("fill", bid=bid(form, "textbox", "title"), text="Borges"))
    filled = sb.step(tool("fill", bid=bid(form, "textbox", "body"), text="Read The Aleph next"))
    assert "value='Read The Aleph next'" in filled.text and state(filled)["changed"]
    sent = sb.step(tool("click", bid=bid(form, "button", "Run SQL")))
    assert "Note saved" in sent.text and not sent.is_error
    notes = sb.step(tool("goto", url=library.url + "library/notes"))
    assert "Read The Aleph next" in notes.text and "Borges" in notes.text

    anonymous = make()  # a fresh context: no session, and the site says so
    refused = start(anonymous, library.url + "library/add_note")
    assert "Forbidden" in refused.text and state(refused)["env_failure"] == "http_error:403"


def test_bids_are_stable_across_loads_of_the_same_page(make, docs):
    sb = make()
    url = docs.url + "library/os.path.html"
    first = start(sb, url)
    again = start(sb, url)  # a new episode, a new context
    assert first.text == again.text and "[" in first.text
    reload = sb.step(tool("goto", url=url))  # a new document in the same tab
    assert reload.text == first.text and state(reload)["changed"] is False
    elems = parse_tree(first.text)
    assert len(elems) > 200 and len({e.bid for e in elems}) == len(elems)


def test_http_errors_and_dead_urls_are_environment_failures(make, docs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once closed
    sb = make(allowed_origins=[docs.url.rstrip("/"), dead])
    ok = start(sb, docs.url)
    assert state(ok)["env_failure"] is None
    missing = sb.step(tool("goto", url=docs.url + "no-such-page.html"))
    assert state(missing)["env_failure"] == "http_error:404" and state(missing)["status"] == 404
    assert not missing.is_error  # the server answered: a page, not a failed action
    gone = sb.step(tool("goto", url=dead + "/"))
    assert state(gone)["env_failure"] == "navigation_failed" and gone.is_error
    assert "Error: Page.goto: net::ERR_CONNECTION_REFUSED" in gone.text
    assert state(sb.step(tool("goto", url=docs.url)))["env_failure"] is None  # still usable


def closed_port() -> str:
    """The base URL of a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_start_page_that_does_not_load_fails_the_attempt(make, docs):
    """At reset a dead start page is ours to report (the site is down, no episode can
    start); the same navigation in a later step is the environment's answer (above)."""
    dead = closed_port() + "/index.html"
    sb = make(allowed_origins=[docs.url.rstrip("/"), dead.rsplit("/", 1)[0]])
    with pytest.raises(SandboxError) as failed:
        start(sb, dead)
    assert str(failed.value) == f"start page {dead} did not load: net::ERR_CONNECTION_REFUSED"
    ok = start(sb, docs.url)  # the next attempt starts cleanly on a live site
    assert state(ok)["env_failure"] is None and not ok.is_error
    gone = sb.step(tool("goto", url=dead))  # a dead link later on: an observation
    assert state(gone)["env_failure"] == "navigation_failed" and gone.is_error
    assert "Error: Page.goto: net::ERR_CONNECTION_REFUSED" in gone.text


@pytest.fixture(scope="module")
def status_site():
    """A loopback server answering `/status/NNN` with that HTTP status and a page."""

    class Handler(QuietHandler):
        def do_GET(self):
            code = int(self.path.rsplit("/", 1)[1])
            data = f"<html><body><h1>Status {code}</h1><p>Said the server.</p></body></html>"
            self.send_response(code)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

    with serving_handler(Handler) as url:
        yield url


def test_a_server_error_at_the_start_page_fails_the_attempt_a_client_error_does_not(
    make, status_site
):
    sb = make()
    with pytest.raises(SandboxError) as failed:
        start(sb, status_site + "/status/503")
    url = status_site + "/status/503"
    assert str(failed.value) == f"start page {url} did not load: HTTP 503 Service Unavailable"
    missing = start(sb, status_site + "/status/404")  # the site's answer: observed, then dropped
    assert state(missing)["env_failure"] == "http_error:404" and "Status 404" in missing.text
    later = sb.step(tool("goto", url=status_site + "/status/500"))  # later: an observation
    assert state(later)["env_failure"] == "http_error:500" and "Status 500" in later.text


def test_blank_and_captcha_pages_are_environment_failures(make, pages):
    sb = make()
    assert state(start(sb, pages.url + "blank.html"))["env_failure"] == "blank_page"
    assert state(sb.step(tool("goto", url=pages.url + "wall.html")))["env_failure"] == "captcha"


def test_a_page_that_only_mentions_recaptcha_is_no_wall(make, pages):
    """Found (a hunt, 12-07): the bare word `reCAPTCHA` anywhere in the tree made a page a
    CAPTCHA wall, so the footer "This site is protected by reCAPTCHA ..." under countless
    forms flagged every step of a working sign-up and `process` dropped the trajectory.
    A page that asks for one still is a wall."""
    sb = make()
    o = start(sb, pages.url + "signup.html")
    assert "protected by reCAPTCHA" in o.text and state(o)["env_failure"] is None
    robot = sb.step(tool("goto", url=pages.url + "robot.html"))
    assert "not a robot" in robot.text and state(robot)["env_failure"] == "captcha"


def test_a_page_still_rendering_after_load_is_observed_once_it_is_done(make, pages):
    """Two animation frames after `load` caught a page that fills in its content from
    timers half done (the docs' search results: one step observed differently one time
    in ten); the sandbox waits until the DOM stops changing."""
    for _ in range(3):
        text = start(make(), pages.url + "late.html").text
        assert "All 30 results" in text and text.count("result ") == 30


def test_a_click_that_changes_the_page_twice_is_observed_after_the_second(make, pages):
    """The click's first change comes before the settle begins; the step still waits
    out the pause before its second."""
    sb = make()
    run = bid(start(sb, pages.url + "click.html"), "button", "Run")
    for _ in range(3):
        done = sb.step(tool("click", bid=run))
        assert "Finished after a pause" in done.text and "Working" not in done.text


def test_the_dom_quiet_wait_counts_from_the_last_change_before_it_began(make, pages):
    """The hole itself, without the step's own latency: the page changes, the settle
    begins at once and the page changes again 45 ms later (more than two frames)."""
    sb = make()
    start(sb, pages.url + "blank.html")

    async def change_then_settle() -> str:
        page = sb._page
        await page.evaluate(
            """() => { document.body.textContent = "Working";
            setTimeout(() => { document.body.textContent = "Finished"; }, 45); }"""
        )
        await sb._settle(page)
        return await page.evaluate("() => document.body.textContent")

    for _ in range(3):
        assert sb.host.runner.run(change_then_settle(), 10) == "Finished"


def test_marking_bids_is_no_change_of_the_page(make, pages):
    """Marking bids and unmarking the ARIA carriers after every settle must not count as
    the page changing, or every step after it would wait out the DOM-quiet wait; the
    recorded last change stays the page's own (its parse, then its click handler)."""
    sb = make()
    obs = start(sb, pages.url + "click.html")

    def last_and_own() -> tuple[float, float]:
        js = f"() => [window[{LAST_CHANGE_KEY!r}](), window.changedAt]"
        return tuple(sb.host.runner.run(sb._page.evaluate(js), 5))

    parsed, parsed_at = last_and_own()  # recorded from the document's start, marks ignored
    assert abs(parsed - parsed_at) < SETTLE_QUIET_MS
    sb.step(tool("noop", ms=0))
    assert last_and_own()[0] == parsed
    added = sb.step(tool("click", bid=bid(obs, "button", "Add")))  # a new node, a new bid
    assert "StaticText 'Added'" in added.text
    clicked, clicked_at = last_and_own()
    assert 0 <= clicked - clicked_at < SETTLE_QUIET_MS  # the marks came later than that
    sb.step(tool("noop", ms=0))
    assert last_and_own()[0] == clicked


def test_a_page_rendering_what_it_fetched_after_load_is_observed_with_it(make, slow_site):
    """The docs' search page prepends a hidden glossary box once a JSON fetch answers;
    when the answer came later than the DOM-quiet wait, the box was missing from one
    observation in twenty and every bid after it shifted (an explorer episode parted
    from its seed's twin). The sandbox waits for the tab's requests too."""
    texts = {start(make(), slow_site + "page.html").text for _ in range(2)}
    [text] = texts  # the same observation each time
    assert "StaticText 'first second'" in text and "hidden" not in text
    assert text.index("first second") < text.index("Below the box")
    # a request that never answers delays the observation by the cap, not forever
    polled = start(make(step_timeout=10), slow_site + "page.html?poll").text
    assert "StaticText 'first second'" in polled


def test_a_page_that_acts_on_an_answer_after_a_pause_is_observed_once_it_did(make, slow_site):
    """Found 12-07 (CI, `test_a_page_rendering_what_it_fetched_after_load_is_observed_with_it`,
    two resets of one page observed differently): the settle ended as soon as the first
    answer arrived and the DOM had been still since the load. Its handler (the JSON read,
    the next `fetch`) had not run yet in a renderer short of CPU, and the box rendered
    after both answers was missing. After an answer of the page's own requests the DOM
    must stay still `SETTLE_RENDER_QUIET_MS`, counted from that answer."""
    text = start(make(), slow_site + "pausing.html").text
    assert "StaticText 'first second'" in text, text


def test_no_op_and_refused_actions_change_nothing(make, pages):
    sb = make()
    first = start(sb, pages.url + "edge.html")
    noop = sb.step(tool("noop", ms=0))
    assert state(noop)["changed"] is False and not noop.is_error
    bad = sb.step(tool("click", bid="9999"))
    assert bad.is_error and state(bad)["changed"] is False
    assert 'ValueError: Could not find element with bid "9999"' in bad.text
    hidden = sb.step(tool("click", bid=_ghost_bid(sb)))
    assert hidden.is_error and "is not visible" in state(hidden)["last_action_error"]
    typo = sb.step(tool("click", id="3"))
    assert typo.is_error and "'bid' is a required property" in typo.text
    unknown = sb.step(tool_call("dance", {}))
    assert unknown.is_error and "unknown action 'dance'" in unknown.text
    assert first.text.split("## Accessibility tree")[1] == noop.text.split("## Accessibility tree")[1]  # fmt: skip


def _ghost_bid(sb: WebSandbox) -> str:
    """The bid of the `visibility: hidden` button (pruned from the tree, still in the DOM)."""
    return sb.host.runner.run(sb._page.get_attribute("#ghost", "bid"), 5)


def test_tree_prunes_hidden_and_empty_nodes_and_reads_frames(make, pages):
    obs = start(make(), pages.url + "edge.html")
    tree = obs.text
    assert "Gone" not in tree and "Ghost" not in tree  # display: none, visibility: hidden
    assert "button 'Inside'" in tree and "RootWebArea '', url='about:srcdoc'" in tree
    inside = bid(obs, "button", "Inside")
    assert inside.startswith("a")  # frame bids carry the frame's prefix, as in BrowserGym
    full = start(make(tree={"prune_hidden": False, "prune_empty": False}), pages.url + "edge.html")
    assert full.text.count("paragraph ''") == tree.count("paragraph ''") + 1  # the empty <p>


def test_the_root_frame_tree_asked_without_frame_id_is_the_same_tree(make, pages, docs):
    """page_axtree asks the root frame's AXTree without frameId (faster); CDP must give
    the same nodes as with it, on a page with an iframe and on a large docs page."""
    sb = make()
    for url in (pages.url + "edge.html", docs.url + "library/os.path.html"):
        start(sb, url)

        async def both():
            cdp = await sb._cdp(sb._page)
            root = (await cdp.send("Page.getFrameTree"))["frameTree"]["frame"]["id"]
            plain = await cdp.send("Accessibility.getFullAXTree")
            return plain, await cdp.send("Accessibility.getFullAXTree", {"frameId": root})

        plain, with_id = sb.host.runner.run(both(), 30)
        assert len(plain["nodes"]) > 10 and plain == with_id, url


def test_requests_outside_the_allowed_origins_are_blocked(make, pages):
    sb = make(record_requests=True)
    obs = start(sb, pages.url + "edge.html")
    assert state(obs)["blocked"] == ["http://blocked.invalid/pixel.png"]
    away = sb.step(tool("click", bid=bid(obs, "link", "elsewhere")))
    assert away.is_error and "was blocked" in away.text
    assert state(away)["url"] == pages.url + "edge.html"  # the tab stayed
    refused = sb.step(tool("goto", url="http://blocked.invalid/"))
    assert refused.is_error and "outside the allowed origins" in refused.text
    assert sb.blocked == ["http://blocked.invalid/pixel.png", "http://blocked.invalid/away"]
    origin = pages.url.rstrip("/")
    outside = [u for u in sb.requests if not u.startswith((origin + "/", "about:", "data:"))]
    assert outside == sb.blocked  # every request that was not loopback was aborted


def test_a_new_episode_reports_only_its_own_blocked_requests(make, pages):
    sb = make()
    obs = start(sb, pages.url + "edge.html")
    away = sb.step(tool("click", bid=bid(obs, "link", "elsewhere")))
    assert state(away)["blocked"] == ["http://blocked.invalid/away"]
    assert "blocked" not in state(start(sb, pages.url + "other.html"))  # nothing of its own


def test_tabs_popups_and_history(make, pages):
    sb = make()
    obs = start(sb, pages.url + "edge.html")
    popup = sb.step(tool("click", bid=bid(obs, "link", "open a tab")))
    st = state(popup)
    assert st["active_tab"] == 1 and st["tabs"][1]["title"] == "Other"
    assert "Tab 1 (active tab)" in popup.text and "The other page." in popup.text
    shut = sb.step(tool("click", bid=bid(popup, "button", "Close me")))  # window.close()
    assert state(shut)["title"] == "Edge cases" and len(state(shut)["tabs"]) == 1
    popup = sb.step(tool("click", bid=bid(obs, "link", "open a tab")))
    assert state(sb.step(tool("tab_focus", index=0)))["title"] == "Edge cases"
    assert "no tab 5" in sb.step(tool("tab_focus", index=5)).text
    blank = sb.step(tool("new_tab"))
    assert state(blank)["url"] == "about:blank" and state(blank)["env_failure"] is None
    closed = sb.step(tool("tab_close"))
    assert len(state(closed)["tabs"]) == 2
    sb.step(tool("tab_focus", index=0))
    sb.step(tool("goto", url=pages.url + "other.html"))
    assert state(sb.step(tool("go_back")))["title"] == "Edge cases"
    assert state(sb.step(tool("go_forward")))["title"] == "Other"
    sel = start(sb, pages.url + "edge.html")
    chosen = sb.step(tool("select_option", bid=bid(sel, "combobox", "Colour"), value="Green"))
    assert "value='Green'" in chosen.text


def test_gui_filters_use_the_reported_fields(make, docs):
    sb = make()
    start(sb, docs.url)
    pages = ("library/index.html", None, "library/http.client.html")
    turns = [sb.step(tool("goto", url=docs.url + p) if p else tool("noop", ms=0)) for p in pages]
    assert "404 Not Found" in turns[2].text  # an example in the docs, not an error

    def record(observations):
        steps = [Turn(i, tool("x"), o) for i, o in enumerate(observations)]
        return Trajectory("web", turns=steps).to_dict()

    kept, removed, reason = apply_filters(record(turns), FilterConfig())
    assert reason is None and [r[1] for r in removed] == ["gui_no_change"]
    assert len(kept["turns"]) == 2
    guessed = [dataclasses.replace(o, env_failure=None, changed=None) for o in turns]  # as imported
    assert apply_filters(record(guessed), FilterConfig())[2] == "gui_env_failure:http_error"
    turns.append(sb.step(tool("goto", url=docs.url + "nope.html")))
    assert apply_filters(record(turns), FilterConfig())[2] == "gui_env_failure:http_error:404"


def test_a_crashed_tab_is_reported_and_a_dead_browser_fails_the_attempt(make, docs):
    own = {"browser": {"launch_timeout": 29.0}}  # its own Chromium: killing it spares the rest
    sb = make(**own)
    start(sb, docs.url)
    sb.host.runner.run(_crash_tab(sb), 10)
    crashed = sb.step(tool("noop", ms=0))
    assert state(crashed)["env_failure"] == "crashed"
    start(sb, docs.url)
    launches = sb.host.launches
    os.kill(sb.host.runner.run(_browser_pid(sb), 10), signal.SIGKILL)
    with pytest.raises(SandboxError, match="browser"):
        sb.step(tool("goto", url=docs.url + "about.html"))
    assert state(start(sb, docs.url))["env_failure"] is None  # relaunched for the next episode
    assert sb.host.launches == launches + 1


async def _crash_tab(sb):
    crash = asyncio.ensure_future(sb._page.wait_for_event("crash", timeout=10_000))
    cdp = await sb._ctx.new_cdp_session(sb._page)
    send = asyncio.ensure_future(cdp.send("Page.crash"))  # never answers: the tab is gone
    await crash
    send.cancel()
    with contextlib.suppress(BaseException):
        await send


async def _browser_pid(sb) -> int:
    cdp = await sb._ctx.browser.new_browser_cdp_session()
    info = await cdp.send("SystemInfo.getProcessInfo")
    return next(p["id"] for p in info["processInfo"] if p["type"] == "browser")


def test_no_name_resolution_unless_asked():
    assert launch_args(BrowserConfig())[-1] == NO_NAME_RESOLUTION
    assert NO_NAME_RESOLUTION not in launch_args(BrowserConfig(resolve_hosts=True))


def test_tree_text_equals_browsergym_on_the_same_pages(make, docs, pages, library):
    assert (REFERENCE_VENV / "bin" / "python").exists(), (
        "no BrowserGym reference venv: infra/setup.sh creates .venv-browsergym"
    )
    urls = [
        pages.url + "edge.html",
        docs.url + "tutorial/index.html",
        library.url + "library/books",
    ]
    proc = subprocess.Popen(
        [str(REFERENCE_VENV / "bin" / "python"), str(Path(__file__).parent / "browsergym_reference.py"), "1280", "720", *urls],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    origins = [s.url.rstrip("/") for s in (docs, pages, library)]
    plain = {"prune_hidden": False, "prune_empty": False}
    ours = {}
    for mode, tree in (("tree", plain), ("viewport_only", {**plain, "viewport_only": True})):
        sb = make(allowed_origins=origins, tree=tree)
        for url in urls:
            text = start(sb, url).text.split("## Accessibility tree\n")[1].split("\n\n## ")[0]
            ours[url, mode] = text
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    reference = json.loads(out)
    for (url, mode), text in ours.items():
        assert _untimed(text) == _untimed(reference[url][mode]), (mode, url)
        assert "[" in text  # bids are printed


def _untimed(tree: str) -> str:
    """datasette's footer says how long its queries took: the one line that varies."""
    return re.sub(r"took [\d.]+ms", "took Nms", tree)
