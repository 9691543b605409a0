"""The web sandbox's settle after a long task (found 1204f, behind a CI flake of
`test_a_page_still_rendering_after_load_is_observed_once_it_is_done`: observed at
"result 21" of 30 while other tests loaded the machine).

While the page's main thread is busy (its own long task: a framework hydrating, a big
sort; or a renderer starved of CPU on a loaded collector), its timers fall due and
wait. When the task ends, Chromium runs the animation frame before those timers: the
settle's frame saw the DOM still for longer than the quiet wait and ended, and the
change the overdue timer made came after the observation.

One loopback server of small pages (`PAGES`)."""

from __future__ import annotations

import pytest
from worldtrace.schemas.actions import tool

from ..conftest import serving_pages
from .test_web_origins import bid, start

pytestmark = pytest.mark.browser
LONG_TASK = "const t = performance.now(); while (performance.now() - t < 150) {}"
"""150 ms of the page's main thread (more than the 60 ms quiet wait)."""
STEPS = """let n = 0; const step = () => {
  el.textContent = n < 10 ? "Step " + (++n) : "Finished"; if (n < 10 || el.textContent !== "Finished") setTimeout(step, 5); };
step();"""
"""What the overdue timer starts: ten more changes 5 ms apart, then "Finished" (a page
rendering its result a part at a time)."""
PAGES = {
    "/blank": "<html><head><title>Blank</title></head><body></body></html>",
    # a click starts work: a spinner, a long task, and the result from a timer that fell
    # due during the task (as a page computes, then renders in its next task)
    "/work": f"""<html><head><title>Work</title></head><body><p id="s">Ready</p>
<button onclick="run()">Run</button><script>
function run() {{
  document.getElementById("s").textContent = "Working";
  setTimeout(() => {{ {LONG_TASK} }}, 20);
  setTimeout(() => {{ const el = document.getElementById("s"); {STEPS} }}, 25);
}}
</script></body></html>""",
}  # fmt: skip


@pytest.fixture(scope="module")
def site():
    with serving_pages(PAGES) as url:
        yield url


def test_a_change_from_a_timer_that_fell_due_in_a_long_task_is_waited_for(make, site):
    """The settle itself: the page changes, a long task begins 20 ms later, and a
    timer due at 25 ms starts changing the page again once the task lets it run."""
    sb = make()
    start(sb, f"{site}/blank")

    async def change_then_settle() -> str:
        page = sb._page
        await page.evaluate(
            f"""() => {{ document.body.textContent = "Working";
            setTimeout(() => {{ {LONG_TASK} }}, 20);
            setTimeout(() => {{ const el = document.body; {STEPS} }}, 25); }}"""
        )
        await sb._settle(page)
        return await page.evaluate("() => document.body.textContent")

    for _ in range(3):
        assert sb.host.runner.run(change_then_settle(), 10) == "Finished"


def test_a_click_whose_page_computes_then_renders_is_observed_rendered(make, site):
    """As a user's step meets it: the click's observation shows the result, not the
    spinner the page showed while it computed."""
    sb = make()
    run = bid(start(sb, f"{site}/work"), "button", "Run")
    for _ in range(3):
        done = sb.step(tool("click", bid=run))
        assert "Finished" in done.text and "Working" not in done.text
