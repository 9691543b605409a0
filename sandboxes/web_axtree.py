"""The web observation: BrowserGym's accessibility tree text, with a `bid` on every node.

BrowserGym (browsergym-core, Apache-2.0) marks every element of every frame with a `bid`
attribute, smuggles the bid into the accessibility tree through `aria-roledescription`
/ `aria-description`, reads Chromium's full AXTree over CDP, strips the marks again and
flattens the tree to indented text (`flatten_axtree_to_str`). Data recorded here is meant
to be comparable with BrowserGym/AgentLab traces, so this module follows the same steps
and prints the same text. browsergym-core itself cannot be a dependency: it pins
`playwright==1.44` and `lxml<6` (ours are newer), its package import registers gym
environments (gymnasium), and it drives Playwright's sync API. Its pure parts are
therefore ported here, and `tests/sandboxes/test_web_browsergym.py` checks the output
against browsergym-core's own functions on the same pages (in a separate venv).

Differences, each a switch in `TreeOptions`: `InlineTextBox` nodes (which Chromium >= 13x
adds below every StaticText, duplicating it; BrowserGym traces recorded on older
Chromium have none) are ignored like BrowserGym ignores `LineBreak`; elements that are
not rendered (no box, zero area, `visibility: hidden`) and empty leaves are pruned.
Viewport filtering (BrowserGym's `filter_visible_only`) is available but off, as in
AgentLab's default.
"""

from __future__ import annotations

import re
from typing import Any

from worldtrace.schemas.parsing import configclass

BID_ATTR = "bid"
"""The DOM attribute holding the element id (BrowserGym's `BROWSERGYM_ID_ATTRIBUTE`)."""
IGNORED_PROPERTIES = (
    "editable",
    "readonly",
    "level",
    "settable",
    "multiline",
    "invalid",
    "focusable",
)
"""AX properties never printed (BrowserGym's `IGNORED_AXTREE_PROPERTIES`)."""
INTERACTIVE_ROLES = frozenset((
    "button", "checkbox", "combobox", "link", "listbox", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "radio", "searchbox", "slider", "spinbutton", "switch", "tab",
    "textbox", "treeitem", "Date", "DateTime", "InputTime", "ColorWell",
))  # fmt: skip
"""Roles never pruned as empty: an unlabelled textbox is still something to act on."""

# Marks every element of one frame (BrowserGym's frame_mark_elements.js, trimmed to what
# the AXTree needs: bid attribute, the ARIA carriers, frame ids a, b, ..., aA; plus the
# not-rendered test and input types). Returns {hidden, inputs, visibility}.
MARK_JS = r"""
async ([parentBid, bidAttr, withVisibility]) => {
  const TAGS = new Set(["a","abbr","acronym","address","applet","area","article","aside",
    "audio","b","base","basefont","bdi","bdo","big","blockquote","body","br","button",
    "canvas","caption","center","cite","code","col","colgroup","data","datalist","dd","del",
    "details","dfn","dialog","dir","div","dl","dt","em","embed","fieldset","figcaption",
    "figure","font","footer","form","frame","frameset","h1","h2","h3","h4","h5","h6","head",
    "header","hgroup","hr","html","i","iframe","img","input","ins","kbd","label","legend",
    "li","link","main","map","mark","menu","meta","meter","nav","noframes","noscript",
    "object","ol","optgroup","option","output","p","param","picture","pre","progress","q",
    "rp","rt","ruby","s","samp","script","search","section","select","small","source",
    "span","strike","strong","style","sub","summary","sup","svg","table","tbody","td",
    "template","textarea","tfoot","th","thead","time","title","tr","track","tt","u","ul",
    "var","video","wbr"]);
  const NO_BOX = new Set(["option", "optgroup", "area", "head", "title", "meta", "link",
    "script", "style", "base", "template", "noscript", "param", "source", "track", "html"]);
  if (!("__wtBidCounter" in window)) { window.__wtBidCounter = 0; window.__wtFrameIds = [0]; }
  const nextFrameId = () => {
    const ids = window.__wtFrameIds, chars = "abcdefghijklmnopqrstuvwxyz", r = [];
    for (let i = 0; i < ids.length; i++) {
      const c = chars[ids[i]];
      r.unshift(i < ids.length - 1 ? c.toUpperCase() : c);
    }
    for (let i = 0; i < ids.length; i++) {
      if (++ids[i] < chars.length) return r.join("");
      ids[i] = 0;
    }
    ids.push(0);
    return r.join("");
  };
  const push = (bid, elem, attr) => {
    const old = elem.hasAttribute(attr) ? elem.getAttribute(attr) : "";
    elem.setAttribute(attr, `browsergym_id_${bid} ${old}`);
  };
  const seen = new Set(), hidden = [], inputs = {}, visibility = {}, observed = [];
  let elements = Array.from(document.querySelectorAll("*"));
  for (let i = 0; i < elements.length; i++) {
    const elem = elements[i];
    if (elem.shadowRoot !== null) {
      elements = [...elements.slice(0, i + 1), ...elem.shadowRoot.querySelectorAll("*"),
                  ...elements.slice(i + 1)];
    }
    const tag = elem.tagName ? elem.tagName.toLowerCase() : "";
    if (!TAGS.has(tag)) continue;
    let bid = elem.getAttribute(bidAttr);
    if (bid !== null && seen.has(bid)) bid = null;
    if (bid === null) {
      const local = (tag === "iframe" || tag === "frame") ? nextFrameId()
                                                          : `${window.__wtBidCounter++}`;
      bid = `${parentBid}${local}`;
      elem.setAttribute(bidAttr, bid);
    }
    seen.add(bid);
    push(bid, elem, "aria-roledescription");
    push(bid, elem, "aria-description");
    if (!NO_BOX.has(tag)) {
      const rects = elem.getClientRects();
      let area = 0;
      for (const r of rects) area += r.width * r.height;
      if (area === 0 || getComputedStyle(elem).visibility !== "visible") hidden.push(bid);
    }
    if (tag === "input") inputs[bid] = (elem.getAttribute("type") || "text").toLowerCase();
    else if (tag === "textarea" || tag === "select") inputs[bid] = tag;
    if (withVisibility) observed.push([elem, bid]);
  }
  if (withVisibility && observed.length) {
    await new Promise((resolve) => {
      let left = observed.length;
      const io = new IntersectionObserver((entries) => {
        for (const e of entries) {
          const bid = e.target.getAttribute(bidAttr);
          if (!(bid in visibility)) left--;
          visibility[bid] = Math.round(e.intersectionRatio * 100) / 100;
        }
        if (left <= 0) { io.disconnect(); resolve(); }
      }, {threshold: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]});
      for (const [elem] of observed) io.observe(elem);
      setTimeout(() => { io.disconnect(); resolve(); }, 1000);
    });
  }
  return {hidden, inputs, visibility};
}
"""

# Removes the ARIA carriers again (BrowserGym's frame_unmark_elements.js) and reads the
# page state in the same round trip: focused element, HTTP status of the document.
UNMARK_JS = r"""
([bidAttr]) => {
  let elements = Array.from(document.querySelectorAll("*"));
  for (let i = 0; i < elements.length; i++) {
    const elem = elements[i];
    if (elem.shadowRoot !== null) {
      elements = [...elements.slice(0, i + 1), ...elem.shadowRoot.querySelectorAll("*"),
                  ...elements.slice(i + 1)];
    }
    for (const attr of ["aria-description", "aria-roledescription"]) {
      if (!elem.hasAttribute(attr)) continue;
      const rest = elem.getAttribute(attr).replace(/^browsergym_id[^\s]*\s/, "");
      if (rest) elem.setAttribute(attr, rest); else elem.removeAttribute(attr);
    }
  }
  let active = document.activeElement;
  while (active && active.shadowRoot && active.shadowRoot.activeElement) {
    active = active.shadowRoot.activeElement;
  }
  const nav = performance.getEntriesByType("navigation")[0];
  return {
    focused: active && active !== document.body ? active.getAttribute(bidAttr) || "" : "",
    status: nav && nav.responseStatus ? nav.responseStatus : null,
  };
}
"""

_DATA_RE = re.compile(r"^browsergym_id_([a-zA-Z0-9]+)\s?(.*)", re.S)


@configclass
class TreeOptions:
    """How the AXTree is printed (BrowserGym's flatten_axtree_to_str switches)."""

    ignored_roles: tuple[str, ...] = ("LineBreak", "InlineTextBox")
    """Roles never printed (their children are); BrowserGym ignores LineBreak."""
    prune_hidden: bool = True
    """Drop elements that are not rendered (no box, zero area, visibility: hidden)."""
    prune_empty: bool = True
    """Drop non-interactive leaves with no name, value or properties (e.g. an empty `<p>`)."""
    viewport_only: bool = False
    """Drop elements less than half inside the viewport (BrowserGym's filter_visible_only)."""


def strip_marks(axtree: dict[str, Any]) -> None:
    """Move each node's smuggled bid to `browsergym_id` and restore its ARIA values
    (BrowserGym's extract_all_frame_axtrees post-processing), in place."""
    for node in axtree["nodes"]:
        bid = None
        props = node.get("properties") or []
        for i, prop in enumerate(props):
            if prop["name"] == "roledescription":
                bid, rest = _split(prop["value"]["value"])
                prop["value"]["value"] = rest
                if rest == "":
                    del props[i]
                break
        if "description" in node:
            fallback, rest = _split(node["description"]["value"])
            node["description"]["value"] = rest
            if rest == "":
                del node["description"]
            bid = bid or fallback
        if bid:
            node["browsergym_id"] = bid


def _split(value: str) -> tuple[str | None, str]:
    m = _DATA_RE.fullmatch(value)
    return (m.group(1), m.group(2)) if m else (None, value)


def flatten(
    axtree: dict[str, Any],
    options: TreeOptions = TreeOptions(),
    hidden: frozenset[str] = frozenset(),
    visibility: dict[str, float] | None = None,
) -> str:
    """The tree as indented text, one node a line: `[bid] role 'name' value=..., props`.

    With `prune_hidden`, `prune_empty` and `viewport_only` off this prints exactly what
    BrowserGym's `flatten_axtree_to_str(tree, ignored_roles=...)` prints (lines are
    collected in a list instead of concatenated strings: same text, linear time).
    """
    nodes = axtree["nodes"]
    if not nodes:
        return ""
    index = {n["nodeId"]: i for i, n in enumerate(nodes)}
    ignored = set(options.ignored_roles)
    visibility = visibility or {}

    def dfs(i: int, depth: int, parent_filtered: bool, parent_name: str) -> list[str]:
        node = nodes[i]
        role = node["role"]["value"]
        name = ""
        skip = filtered = prunable = False
        line = None
        if role in ignored or "name" not in node:
            skip = True
        else:
            name = node["name"]["value"]
            value = node["value"].get("value") if "value" in node else None
            bid = node.get("browsergym_id")
            attrs = []
            for prop in node.get("properties", []):
                if "value" not in prop or "value" not in prop["value"]:
                    continue
                pname, pvalue = prop["name"], prop["value"]["value"]
                if pname in IGNORED_PROPERTIES:
                    continue
                if pname in ("required", "focused", "atomic"):
                    if pvalue:
                        attrs.append(pname)
                else:
                    attrs.append(f"{pname}={pvalue!r}")
            if role == "generic" and not attrs:
                skip = True
            if role == "StaticText":
                if parent_filtered or name in parent_name:
                    skip = True
            elif bid is not None:
                if options.prune_hidden and bid in hidden:
                    filtered = True
                if options.viewport_only and visibility.get(bid, 0) < 0.5:
                    filtered = True
                skip = skip or filtered
            if not skip:
                text = role if role == "generic" and not name else f"{role} {name.strip()!r}"
                if bid is not None:
                    text = f"[{bid}] {text}"
                if value is not None:
                    text += f" value={value!r}"
                if attrs:
                    text += ", " + ", ".join(attrs)
                line = "\t" * depth + text
                empty = not name.strip() and value is None and not attrs
                prunable = options.prune_empty and empty and role not in INTERACTIVE_ROLES
        out: list[str] = []
        for child in node.get("childIds", ()):
            j = index.get(child)
            if j is None or child == node["nodeId"]:
                continue
            out += dfs(j, depth if skip else depth + 1, filtered, name)
        if line is None or (prunable and not out):
            return out
        return [line, *out]

    return "\n".join(dfs(0, 0, False, ""))


async def page_axtree(page, cdp) -> dict[str, Any]:
    """The merged AXTree of a page and its frames over one CDP session (BrowserGym's
    extract_merged_axtree): each frame's tree, iframes linked to their frame's root."""
    tree = await cdp.send("Page.getFrameTree")
    frame_ids, todo = [], [tree["frameTree"]]
    while todo:
        f = todo.pop()
        todo.extend(f.get("childFrames", []))
        frame_ids.append(f["frame"]["id"])
    frames = {}
    for fid in frame_ids:
        # the root frame's tree asked without frameId: the same nodes, 15-25% faster on a
        # 3,000-node page (tests/sandboxes/test_web.py checks they are the same)
        params = {"frameId": fid} if fid != frame_ids[0] else None
        frames[fid] = await cdp.send("Accessibility.getFullAXTree", params)
        strip_marks(frames[fid])
    merged: dict[str, Any] = {"nodes": []}
    for ax in frames.values():
        merged["nodes"].extend(ax["nodes"])
        for node in ax["nodes"]:
            if node["role"]["value"] != "Iframe" or "backendDOMNodeId" not in node:
                continue
            d = await cdp.send("DOM.describeNode", {"backendNodeId": node["backendDOMNodeId"]})
            fid = d.get("node", {}).get("frameId")
            if fid in frames and frames[fid]["nodes"]:
                node.setdefault("childIds", []).append(frames[fid]["nodes"][0]["nodeId"])
    return merged


async def mark_frames(page, with_visibility: bool) -> dict[str, Any]:
    """Mark every frame (recursively, child bids prefixed by their frame's bid).

    Returns the union of the frames' hidden bids, input types and viewport ratios.
    """
    out: dict[str, Any] = {"hidden": set(), "inputs": {}, "visibility": {}, "frames": {}}

    async def mark(frame, prefix: str) -> None:
        out["frames"][prefix] = frame
        res = await frame.evaluate(MARK_JS, [prefix, BID_ATTR, with_visibility])
        out["hidden"].update(res["hidden"])
        out["inputs"].update(res["inputs"])
        out["visibility"].update(res["visibility"])
        for child in frame.child_frames:
            if child.is_detached():
                continue
            elem = await child.frame_element()
            sandbox = await elem.get_attribute("sandbox")
            if sandbox is not None and "allow-scripts" not in sandbox.split():
                continue
            bid = await elem.get_attribute(BID_ATTR)
            if bid:
                await mark(child, bid)

    await mark(page.main_frame, "")
    return out


async def unmark_frames(page, frames: dict[str, Any]) -> dict[str, Any]:
    """Remove the ARIA carriers from every marked frame (keyed by bid prefix).

    Returns the main document's HTTP status and the focused element's bid, followed
    into frames (BrowserGym's extract_focused_element_bid)."""
    found = {}
    for prefix, frame in frames.items():
        if not frame.is_detached():
            found[prefix] = await frame.evaluate(UNMARK_JS, [BID_ATTR])
    main = found.get("", {"focused": "", "status": None})
    focused = main["focused"]
    while focused in found and found[focused]["focused"]:
        focused = found[focused]["focused"]
    return {"focused": focused, "status": main["status"]}
