"""Web sandbox speed against a bare Playwright loop, side by side on the Python docs.

Both sides run the same actions (goto, scroll, go_back over a fixed tour of the docs
site served on loopback) in the same Chromium build and read the same observation: the
pages marked with bids, the AXTree over CDP and BrowserGym's flattened text. The bare
loop is what a person would write with Playwright's sync API and nothing else; ours adds
the async runner hop, settling, frames, tabs, environment-failure checks, popup
tracking, the change flag and the JSON state. Prints one JSON line per measurement.

usage: python -m benchmarks.bench_web [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

TOUR = (
    ("goto", "index.html"),
    ("goto", "tutorial/index.html"),
    ("scroll", 600),
    ("goto", "library/json.html"),
    ("scroll", 900),
    ("go_back", None),
    ("goto", "library/os.path.html"),
    ("goto", "reference/index.html"),
    ("go_back", None),
    ("goto", "howto/index.html"),
)


def run_ours(url: str, rounds: int) -> tuple[float, float]:
    """(steps per second, observation characters per step) of WebSandbox."""
    from worldtrace.collectors.actions import tool
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.web import WebConfig, WebSandbox, WebTask

    sb = WebSandbox(WebConfig())
    chars, steps = 0, 0
    try:
        sb.reset(TaskSpec("bench", params=WebTask(url=url + "index.html")))
        start = time.perf_counter()
        for _ in range(rounds):
            for kind, arg in TOUR:
                if kind == "goto":
                    obs = sb.step(tool("goto", url=url + arg))
                elif kind == "scroll":
                    obs = sb.step(tool("scroll", dx=0, dy=arg))
                else:
                    obs = sb.step(tool("go_back"))
                chars += len(obs.text)
                steps += 1
        elapsed = time.perf_counter() - start
    finally:
        sb.close()
    return steps / elapsed, chars / steps


def run_bare(url: str, rounds: int) -> tuple[float, float]:
    """The same tour with Playwright's sync API: act, wait for load, mark, read, flatten."""
    from playwright.sync_api import sync_playwright
    from worldtrace.sandboxes.web_axtree import (
        BID_ATTR,
        MARK_JS,
        UNMARK_JS,
        TreeOptions,
        flatten,
        strip_marks,
    )
    from worldtrace.sandboxes.web_browser import BrowserConfig, launch_args

    cfg = BrowserConfig()
    chars, steps = 0, 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=cfg.executable, args=launch_args(cfg))
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        cdp = page.context.new_cdp_session(page)
        page.goto(url + "index.html")
        start = time.perf_counter()
        for _ in range(rounds):
            for kind, arg in TOUR:
                if kind == "goto":
                    page.goto(url + arg)
                elif kind == "scroll":
                    page.mouse.wheel(0, arg)
                else:
                    page.go_back()
                page.wait_for_load_state("load")
                marks = page.evaluate(MARK_JS, ["", BID_ATTR, False])
                axtree = cdp.send("Accessibility.getFullAXTree")
                strip_marks(axtree)
                page.evaluate(UNMARK_JS, [BID_ATTR])
                tree = flatten(axtree, TreeOptions(), frozenset(marks["hidden"]))
                chars += len(tree)
                steps += 1
        elapsed = time.perf_counter() - start
        browser.close()
    return steps / elapsed, chars / steps


def main() -> None:
    from worldtrace.sandboxes.web_browser import close_hosts
    from worldtrace.sandboxes.web_sites import start_docs_site

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    site = start_docs_site()
    ours, bare = [], []
    try:
        for _ in range(args.repeats):  # alternated, best of each: less noise from the machine
            bare.append(run_bare(site.url, args.rounds))
            ours.append(run_ours(site.url, args.rounds))
            close_hosts()
    finally:
        site.stop()
    o_rate, b_rate = max(r for r, _ in ours), max(r for r, _ in bare)
    o_chars, b_chars = statistics.mean(c for _, c in ours), statistics.mean(c for _, c in bare)
    steps = args.rounds * len(TOUR)
    for name, o, b, unit, notes in (
        ("steps_per_s", o_rate, b_rate, "steps/s",
         f"{steps} steps (goto/scroll/go_back) on the Python docs, best of {args.repeats}"),
        ("obs_chars_per_step", o_chars, b_chars, "chars",
         "ours: tabs + tree + focus/error sections; bare: the tree text alone"),
    ):  # fmt: skip
        print(json.dumps({"name": name, "ours": round(o, 2), "baseline": round(b, 2),
                          "ratio": round(o / b, 3), "unit": unit, "notes": notes}))  # fmt: skip


if __name__ == "__main__":
    main()
