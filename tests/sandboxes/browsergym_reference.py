"""BrowserGym's own observation of pages (run with the browsergym-core reference venv).

usage: python browsergym_reference.py WIDTH HEIGHT URL...
Prints one JSON object: {url: {"tree": ..., "viewport_only": ..., "focused": ...}}, the
AXTree text from browsergym-core's extraction (`_pre_extract`, `extract_merged_axtree`,
`extract_dom_snapshot`, `extract_dom_extra_properties`, `_post_extract`) flattened by its
`flatten_axtree_to_str`, with InlineTextBox ignored like LineBreak (worldtrace's default).
"""

import json
import sys

from browsergym.core.observation import (
    _post_extract,
    _pre_extract,
    extract_dom_extra_properties,
    extract_dom_snapshot,
    extract_focused_element_bid,
    extract_merged_axtree,
)
from browsergym.utils.obs import flatten_axtree_to_str
from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
IGNORED = ["LineBreak", "InlineTextBox"]


def main() -> None:
    width, height, urls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for url in urls:
            ctx = browser.new_context(viewport={"width": width, "height": height})
            page = ctx.new_page()
            page.goto(url)
            page.wait_for_load_state("load")
            _pre_extract(page)
            dom = extract_dom_snapshot(page)
            axtree = extract_merged_axtree(page)
            focused = extract_focused_element_bid(page)
            extra = extract_dom_extra_properties(dom, 1.0)
            _post_extract(page)
            out[url] = {
                "tree": flatten_axtree_to_str(axtree, ignored_roles=IGNORED),
                "viewport_only": flatten_axtree_to_str(
                    axtree, extra_properties=extra, filter_visible_only=True, ignored_roles=IGNORED
                ),
                "focused": focused,
            }
            ctx.close()
        browser.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
