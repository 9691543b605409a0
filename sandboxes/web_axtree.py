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
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

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
LOADED_SCHEMES = frozenset(("http", "https", "about", "data", "javascript"))
"""Schemes Chromium loads in a frame of a web page; a frame whose `src` has another scheme
and that never committed a document was refused (`_refused_src`)."""
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")

# Marks every element of one frame (BrowserGym's frame_mark_elements.js, trimmed to what
# the AXTree needs: bid attribute, the ARIA carriers, frame ids a, b, ..., aA; plus the
# not-rendered test and input types). Returns {hidden, inputs, visibility, walk}: a main
# document of more than `walkOver` elements only gets bids (walk: true), for WALK_JS.
MARK_JS = r"""
async ([parentBid, bidAttr, withVisibility, walkOver]) => {
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
  // which bid each element got from us: a page may set `bid` attributes of its own
  if (!("__wtBids" in window)) window.__wtBids = new WeakMap();
  const ours = window.__wtBids;
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
    // a mark left by a read that ended before its unmarking (a frame detached under it)
    // is replaced, not stacked: the tree showed its second copy
    const old = elem.hasAttribute(attr)
      ? elem.getAttribute(attr).replace(/^(?:browsergym_id_[^\s]*\s)+/, "") : "";
    elem.setAttribute(attr, `browsergym_id_${bid} ${old}`);
  };
  const seen = new Set(), hidden = [], inputs = {}, visibility = {}, observed = [];
  let elements = Array.from(document.querySelectorAll("*"));
  const walk = parentBid === "" && walkOver > 0 && elements.length > walkOver;
  for (let i = 0; i < elements.length; i++) {
    const elem = elements[i];
    if (elem.shadowRoot !== null) {
      elements = [...elements.slice(0, i + 1), ...elem.shadowRoot.querySelectorAll("*"),
                  ...elements.slice(i + 1)];
    }
  }
  const tagOf = (elem) => elem.tagName ? elem.tagName.toLowerCase() : "";
  // values of the page's own `bid` attributes on elements never marked (a custom element's):
  // a bid of ours equal to one would find two elements
  const taken = new Set();
  for (const elem of elements) {
    if (!TAGS.has(tagOf(elem)) && elem.hasAttribute(bidAttr)) taken.add(elem.getAttribute(bidAttr));
  }
  for (const elem of elements) {
    const tag = tagOf(elem);
    if (!TAGS.has(tag)) continue;
    // an element keeps the bid it got from us; a `bid` the page set is not ours (it made
    // the counter's next bid a duplicate) and is overwritten
    let bid = ours.get(elem);
    if (bid === undefined || seen.has(bid)) {
      const frame = tag === "iframe" || tag === "frame";
      do bid = `${parentBid}${frame ? nextFrameId() : window.__wtBidCounter++}`;
      while (taken.has(bid));
      ours.set(elem, bid);
    }
    if (elem.getAttribute(bidAttr) !== bid) elem.setAttribute(bidAttr, bid);
    seen.add(bid);
    if (walk) continue;  // bids only: WALK_JS reads the rest of what it shows
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
          const bid = ours.get(e.target);
          if (!(bid in visibility)) left--;
          visibility[bid] = Math.round(e.intersectionRatio * 100) / 100;
        }
        if (left <= 0) { io.disconnect(); resolve(); }
      }, {threshold: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]});
      for (const [elem] of observed) io.observe(elem);
      setTimeout(() => { io.disconnect(); resolve(); }, 1000);
    });
  }
  return {hidden, inputs, visibility, walk};
}
"""

# A frame's `sandbox` and `bid` attributes, read from its parent, which first touches
# every child frame's window: Chromium creates a document's script context when something
# first needs it, and a frame whose navigation never committed (a `file:` or `chrome:` src
# it refuses, a server that never answers; `about:blank#x` too) stays on its initial empty
# document, which nothing touched. Playwright's `evaluate` in it waited for that context
# forever, and every attempt failed at step_timeout (docs/web.md, blocked iframes).
FRAME_JS = r"""
(elem, bidAttr) => {
  // every child's window (an <embed> has no contentWindow; a page may set window.length)
  for (let i = 0; window[i] !== undefined; i++);
  return [elem.getAttribute("sandbox"), elem.getAttribute(bidAttr)];
}
"""

# Removes the ARIA carriers again (BrowserGym's frame_unmark_elements.js) and reads the
# page state in the same round trip: focused element, HTTP status of the document.
UNMARK_JS = r"""
([bidAttr, carriers = true]) => {
  let elements = carriers ? Array.from(document.querySelectorAll("*")) : [];
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
    focused: active && active !== document.body && window.__wtBids
      ? window.__wtBids.get(active) || "" : "",
    status: nav && nav.responseStatus ? nav.responseStatus : null,
  };
}
"""

# A main document too big for the AXTree (TreeOptions.dom_walk_over) is read by a walk of
# its DOM in the page: flatten's text from the elements' own roles, names and states, in
# document order, stopping once maxChars are written. Returns {text, complete, inputs}.
WALK_JS = r"""
([bidAttr, maxChars, pruneHidden, pruneEmpty, viewportOnly, interactive]) => {
  const SKIP = new Set(["script", "style", "template", "noscript", "head", "title", "meta",
    "link", "base", "param", "source", "track", "wbr", "datalist"]);
  const NO_BOX = new Set(["option", "optgroup", "area"]);
  const INTERACTIVE = new Set(interactive);
  const LANDMARK_SCOPE = "article, aside, main, nav, section";
  const INPUT_ROLES = {checkbox: "checkbox", radio: "radio", range: "slider", number: "spinbutton",
    search: "searchbox", button: "button", submit: "button", reset: "button", image: "button",
    file: "button", date: "Date", "datetime-local": "DateTime", time: "InputTime",
    color: "ColorWell", month: "DateTime", week: "DateTime"};
  const ROLES = {p: "paragraph", button: "button", textarea: "textbox", ul: "list", ol: "list",
    menu: "list", li: "listitem", dl: "list", dt: "term", dd: "definition", table: "table",
    tr: "row", td: "cell", thead: "rowgroup", tbody: "rowgroup", tfoot: "rowgroup", caption: "caption",
    nav: "navigation", main: "main", article: "article",
    form: "form", fieldset: "group", details: "group", hgroup: "group", legend: "LegendText",
    label: "LabelText", figure: "figure", blockquote: "blockquote", code: "code",
    strong: "strong", em: "emphasis", hr: "separator", dialog: "dialog",
    summary: "DisclosureTriangle", iframe: "Iframe", frame: "Iframe", progress: "progressbar",
    meter: "meter", option: "option", optgroup: "group", mark: "mark", time: "time",
    sub: "subscript", sup: "superscript", del: "deletion", ins: "insertion", search: "search",
    output: "status", math: "math", canvas: "Canvas", video: "Video", audio: "Audio",
    h1: "heading", h2: "heading", h3: "heading", h4: "heading", h5: "heading", h6: "heading"};
  const FROM_CONTENT = new Set(["link", "button", "heading", "cell", "columnheader",
    "rowheader", "gridcell", "option", "tab", "menuitem", "menuitemcheckbox", "menuitemradio",
    "treeitem", "tooltip", "switch", "checkbox", "radio", "DisclosureTriangle", "caption", "term", "doc-noteref", "doc-backlink", "doc-biblioref",
    "doc-glossref"]);
  const MARKERS = {disc: "•", circle: "◦", square: "■"};
  const lines = [], inputs = {}, ours = window.__wtBids || new WeakMap();
  let size = 0, full = false;
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  const repr = (s) => {
    const q = s.includes("'") && !s.includes('"') ? '"' : "'";
    let out = q;
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === q || ch === "\\") out += "\\" + ch;
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (c < 0x20 || (c >= 0x7f && c < 0xa1) || c === 0xad) {
        out += "\\x" + c.toString(16).padStart(2, "0");
      } else if (/[\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u.test(ch) || (c > 0xa0 && /\p{Zs}/u.test(ch))) {
        out += c > 0xffff ? "\\U" + c.toString(16).padStart(8, "0")
                          : "\\u" + c.toString(16).padStart(4, "0");
      } else out += ch;
    }
    return out + q;
  };
  const pseudo = (el, which) => {
    const c = getComputedStyle(el, which).content;
    return /^".*"$/.test(c) ? JSON.parse(c) : "";
  };
  const textOf = (node, self = null) => {  // self: the control named, skipped inside its label
    if (node === self) return "";
    if (node.nodeType === Node.TEXT_NODE) return node.data;
    if (node.nodeType !== Node.ELEMENT_NODE) return "";
    const tag = node.localName, style = getComputedStyle(node);
    if (SKIP.has(tag) || node.getAttribute("aria-hidden") === "true") return "";
    if (style.display === "none" || style.visibility !== "visible") return "";
    if (node.hasAttribute("aria-label")) return " " + node.getAttribute("aria-label") + " ";
    if (tag === "img") return node.getAttribute("alt") || "";
    if (tag === "input" && ["submit", "button", "reset"].includes(node.type)) return node.value;
    let out = pseudo(node, "::before");
    for (const c of (node.shadowRoot || node).childNodes) out += textOf(c, self);
    out += pseudo(node, "::after");
    return style.display.startsWith("inline") ? out : ` ${out} `;
  };
  let wsOf = null, ws = "";
  const textName = (node) => {  // as Chromium keeps it: white-space: pre keeps all
    const parent = node.parentElement;
    if (parent !== wsOf) { wsOf = parent; ws = parent ? getComputedStyle(parent).whiteSpace : ""; }
    if (/^(pre|pre-wrap|break-spaces)$/.test(ws)) return node.data.trim();
    if (ws === "pre-line") return node.data.replace(/[ \t]+/g, " ").trim();
    return norm(node.data);
  };
  const roleOf = (el, tag) => {
    const explicit = (el.getAttribute("role") || "").trim().split(/\s+/)[0];
    if (explicit === "none" || explicit === "presentation") return "generic";
    if (explicit) return explicit;
    if (tag === "a" || tag === "area") return el.hasAttribute("href") ? "link" : "generic";
    if (tag === "input") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      if (type === "search" || (type === "text" && el.hasAttribute("list"))) return "searchbox";
      return INPUT_ROLES[type] || "textbox";
    }
    if (tag === "select") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "img") return el.getAttribute("alt") === "" ? "generic" : "image";
    if (tag === "th") {
      if (el.scope === "row" || el.scope === "rowgroup") return "rowheader";
      const cells = el.parentElement && el.parentElement.querySelector(":scope > td");
      return el.scope === "col" || !cells ? "columnheader" : "rowheader";
    }
    if (tag === "header" || tag === "footer" || tag === "aside") {
      if (el.parentElement && el.parentElement.closest(LANDMARK_SCOPE)) return "generic";
      return {header: "banner", footer: "contentinfo", aside: "complementary"}[tag];
    }
    if (tag === "section") return el.hasAttribute("aria-label") || el.hasAttribute("aria-labelledby") ? "region" : "generic";
    if (tag === "svg") return el.hasAttribute("aria-label") ? "image" : "generic";
    return ROLES[tag] || "generic";
  };
  const nameOf = (el, tag, role) => {
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const parts = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean);
      if (parts.length) return norm(parts.map((p) => textOf(p, el)).join(" "));
    }
    const label = el.getAttribute("aria-label");
    if (label && label.trim()) return norm(label);
    if (tag === "input" && ["submit", "reset", "button"].includes(el.type)) {
      return norm(el.value || (el.type === "submit" ? "Submit" : el.type === "reset" ? "Reset" : ""));
    }
    if (tag === "input" && el.type === "image") return norm(el.alt || el.value || "Submit");
    if (["input", "select", "textarea", "meter", "progress"].includes(tag) && el.labels && el.labels.length) {
      return norm(Array.from(el.labels).map((l) => textOf(l, el)).join(" "));
    }
    if (tag === "img" || tag === "area") return norm(el.getAttribute("alt") || el.title);
    if (tag === "optgroup") return norm(el.label);
    if (tag === "fieldset") {
      const legend = el.querySelector(":scope > legend");
      if (legend) return norm(textOf(legend));
    }
    if (tag === "table") {
      const caption = el.querySelector(":scope > caption");
      if (caption) return norm(textOf(caption));
    }
    if (FROM_CONTENT.has(role)) {
      const text = norm(textOf(el));
      if (text) return text;
    }
    if (tag === "input" || tag === "textarea") return norm(el.title || el.placeholder);
    return norm(el.title);
  };
  // a details' first summary is its disclosure triangle: `expanded` is the triangle's
  const disclosure = (el, tag) => tag === "summary" && el.parentElement
    && el.parentElement.localName === "details"
    && el.parentElement.querySelector(":scope > summary") === el;
  // as MARK_JS's test (a box of some area, visibility: visible), and not skipped by
  // Chromium's rendering: inside a closed <details> or under content-visibility: hidden
  // (their boxes have an area, the AXTree leaves them out)
  const rendered = (el) => {
    let area = 0;
    for (const r of el.getClientRects()) area += r.width * r.height;
    if (!(area > 0 && getComputedStyle(el).visibility === "visible")) return false;
    return !el.checkVisibility || el.checkVisibility({visibilityProperty: true});
  };
  // a text node whose parent shows none of its content: a closed <details> (its summary
  // is an element), an element with content-visibility: hidden (an element below one is
  // not rendered, and its text left out with it)
  let cvOf = null, cvHidden = false;
  const contentSkipped = (node) => {
    const parent = node.parentElement;
    if (!parent) return false;
    if (parent.localName === "details" && !parent.open) return true;
    if (parent !== cvOf) {
      cvOf = parent;
      cvHidden = getComputedStyle(parent).contentVisibility === "hidden";
    }
    return cvHidden;
  };
  const inView = (el) => {
    const r = el.getBoundingClientRect(), area = r.width * r.height;
    if (!area) return false;
    const w = Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0));
    const h = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
    return (w * h) / area >= 0.5;
  };
  const attrsOf = (el, tag, role) => {
    const out = [];
    const aria = (a) => el.getAttribute(a);
    if (el.disabled || aria("aria-disabled") === "true") out.push("disabled=True");
    if (el === document.activeElement) out.push("focused");
    if (el.required || aria("aria-required") === "true") out.push("required");
    if (role === "checkbox" || role === "radio" || role === "switch" || role === "menuitemcheckbox") {
      const checked = tag === "input" ? String(el.checked) : aria("aria-checked") || "false";
      out.push(`checked=${repr(el.indeterminate ? "mixed" : checked)}`);
    }
    if (role === "combobox" && tag === "select") out.push("hasPopup='menu'");
    const expanded = tag === "select" && role === "combobox" ? "false"
      : disclosure(el, tag) ? String(el.parentElement.open) : aria("aria-expanded");
    if (expanded === "true" || expanded === "false") out.push(`expanded=${expanded === "true" ? "True" : "False"}`);
    if (aria("aria-pressed")) out.push(`pressed=${repr(aria("aria-pressed"))}`);
    if (tag === "option") out.push(`selected=${el.selected ? "True" : "False"}`);
    else if (aria("aria-selected") === "true") out.push("selected=True");
    if ((tag === "a" || tag === "area") && el.href && role !== "generic") {
      out.push(`url=${repr(String(el.href))}`);
    }
    if (role === "image" && tag === "img" && el.src) out.push(`url=${repr(el.src)}`);
    const key = el.getAttribute("accesskey");
    if (key) out.push(`keyshortcuts=${repr("Alt+" + key.toUpperCase())}`);
    return out;
  };
  const valueOf = (el, tag, role) => {
    if (tag === "textarea" || (tag === "input" && ["textbox", "searchbox", "spinbutton", "slider",
        "Date", "DateTime", "InputTime", "ColorWell"].includes(role))) {
      return el.type === "password" ? "•".repeat(el.value.length) : el.value;
    }
    if (tag === "select" && role === "combobox") {
      const o = el.selectedOptions[0];
      return o ? norm(o.label || o.textContent) : "";
    }
    if (tag === "progress" || tag === "meter") return String(el.value);
    return "";
  };
  const emit = (depth, text) => {
    lines.push("\t".repeat(depth) + text);
    size += depth + text.length + 1;
    if (size > maxChars) full = true;
  };
  const visit = (node, depth, filtered, parentName) => {
    if (full) return;
    if (node.nodeType === Node.TEXT_NODE) {
      const name = textName(node);
      if (name && !parentName.includes(name) && !(pruneHidden && contentSkipped(node))
          && !(typeof filtered === "function" ? filtered() : filtered)) {
        emit(depth, `StaticText ${repr(name)}`);
      }
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node, tag = el.localName;
    if (SKIP.has(tag) || (tag === "input" && el.type === "hidden")) return;
    if (el.getAttribute("aria-hidden") === "true" || el.inert) return;
    if (!NO_BOX.has(tag) && getComputedStyle(el).display === "none") return;
    const bid = ours.get(el) ?? null;  // not a `bid` attribute the page set itself
    const role = tag === "br" ? "LineBreak" : roleOf(el, tag);
    const name = role === "generic" || role === "LineBreak" ? "" : nameOf(el, tag, role);
    let skip = role === "generic" || role === "LineBreak", mine = filtered;
    const hides = () => (pruneHidden && !rendered(el)) || (viewportOnly && !inView(el));
    // as flatten: an element of ours that is not rendered is left out, and so is the text
    // right below it; a generic one too (its own text: a zero-height box's), tested
    // when it has text to show (most generic elements have none of their own)
    if (bid !== null && !NO_BOX.has(tag)) {
      if (!skip) mine = skip = hides();
      else if (role === "generic") {
        let known = null;
        mine = () => (known === null ? (known = hides()) : known);
      }
    }
    const at = lines.length, before = size;
    let empty = true;
    if (!skip) {
      const value = valueOf(el, tag, role), attrs = attrsOf(el, tag, role);
      let text = `${role} ${repr(name)}`;
      if (bid !== null) text = `[${bid}] ${text}`;
      if (value) text += ` value=${repr(value)}`;
      if (attrs.length) text += ", " + attrs.join(", ");
      emit(depth, text);
      empty = !name && !value && !attrs.length && !INTERACTIVE.has(role);
      if (bid !== null && (tag === "input" || tag === "textarea" || tag === "select")) {
        inputs[bid] = tag === "input" ? (el.getAttribute("type") || "text").toLowerCase() : tag;
      }
    }
    if (tag === "iframe" || tag === "frame" || role === "image") return;
    if (!skip && tag === "li") {
      const type = getComputedStyle(el).listStyleType;
      const ordinal = el.value || Array.from(el.parentElement.children).indexOf(el) + 1;
      const marker = type === "decimal" ? `${ordinal}.` : MARKERS[type];
      if (marker) emit(depth + 1, `ListMarker ${repr(marker)}`);
    }
    if (!skip && tag === "input" && el.value && ["textbox", "searchbox"].includes(role)) {
      const shown = el.type === "password" ? "•".repeat(el.value.length) : el.value;
      if (!name.includes(shown)) emit(depth + 1, `StaticText ${repr(shown)}`);
    }
    if (!skip && tag === "select" && role === "combobox") {
      emit(depth + 1, "MenuListPopup ''");
      depth += 1;
    }
    let kids = el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes;
    if (tag === "slot") kids = el.assignedNodes({flatten: true});
    for (const c of kids) visit(c, skip ? depth : depth + 1, mine, name);
    if (!skip && empty && pruneEmpty && lines.length === at + 1 && !full) {
      lines.pop();
      size = before;
    }
  };
  const focused = document.hasFocus() ? ", focused" : "";
  emit(0, `RootWebArea ${repr(norm(document.title))}${focused}, url=${repr(location.href)}`);
  if (document.body) visit(document.body, 1, false, "");
  return {text: lines.join("\n"), complete: !full, inputs};
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
    dom_walk_over: int = 5000
    """A main document with more elements is read by a walk of its DOM in the page, up to
    `max_chars` (WALK_JS): Chromium's full AXTree of 10,000 elements takes seconds, of
    60,000 minutes. Its text is flatten's format from the elements' own roles and names,
    close to the AXTree's, not equal; 0 = always the AXTree."""


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


def _origin_of(url: str) -> str:
    """scheme://host[:port] of a URL, as written (the URL itself when it has no host, or
    when it does not parse: a page's own `src`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


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


async def page_axtree(page, cdp, outside: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The merged AXTree of a page and its frames over one CDP session (BrowserGym's
    extract_merged_axtree): each frame's tree, iframes linked to their frame's root.

    A frame whose document is Chromium's error page for a URL `outside` says the sandbox
    stopped ("This page has been blocked by Chromium") is not the site's content: its
    tree is left out and its Iframe node says `blocked='<origin>'` (docs/web.md). So is
    one Chromium itself refused to load (`file:`, `chrome:`, `view-source:`: `_refused_src`).

    A child frame the page removes while it is read (a rotating ad: CDP no longer knows
    its id) is left out, as its node may be, and the tree says so: `detached` is True
    (the observation's `frames_detached`). The rest of the page is read."""
    from playwright.async_api import Error as PlaywrightError

    tree = await cdp.send("Page.getFrameTree")
    root = tree["frameTree"]["frame"]["id"]
    frame_ids, todo, blocked, gone = [], [tree["frameTree"]], {}, set()
    while todo:
        f = todo.pop()
        todo.extend(f.get("childFrames", []))
        fid = f["frame"]["id"]
        frame_ids.append(fid)
        if fid == root:
            continue
        lost = f["frame"].get("unreachableUrl", "")
        if lost and outside is not None and outside(lost):
            blocked[fid] = _origin_of(lost)
        elif _unloaded(f["frame"]):
            try:
                src = await _refused_src(cdp, fid)
            except PlaywrightError as exc:  # a frame removed since the frame tree was read
                if not _gone(exc):
                    raise
                gone.add(fid)
                continue
            if src:
                blocked[fid] = _origin_of(src)
    frames = {}
    for fid in frame_ids:
        if fid in blocked or fid in gone:
            continue
        # the root frame's tree asked without frameId: the same nodes, 15-25% faster on a
        # 3,000-node page (tests/sandboxes/test_web.py checks they are the same)
        params = {"frameId": fid} if fid != frame_ids[0] else None
        try:
            frames[fid] = await cdp.send("Accessibility.getFullAXTree", params)
        except PlaywrightError as exc:
            if fid == root or not _gone(exc):
                raise
            gone.add(fid)  # removed while read: CDP knows no such frame now
            continue
        strip_marks(frames[fid])
    merged: dict[str, Any] = {"nodes": []}
    for ax in frames.values():
        merged["nodes"].extend(ax["nodes"])
        for node in ax["nodes"]:
            if node["role"]["value"] != "Iframe" or "backendDOMNodeId" not in node:
                continue
            try:
                d = await cdp.send("DOM.describeNode", {"backendNodeId": node["backendDOMNodeId"]})  # fmt: skip
            except PlaywrightError as exc:  # its element removed since its tree was read
                if not _gone(exc):
                    raise
                gone.add(node["backendDOMNodeId"])
                continue
            fid = d.get("node", {}).get("frameId")
            if fid in blocked:
                prop = {"name": "blocked", "value": {"type": "string", "value": blocked[fid]}}
                node.setdefault("properties", []).append(prop)
            elif fid in frames and frames[fid]["nodes"]:
                node.setdefault("childIds", []).append(frames[fid]["nodes"][0]["nodeId"])
    merged["detached"] = bool(gone)
    return merged


GONE_ERRORS = ("not found", "No node", "No frame", "detached")
"""What CDP answers about a frame or node the page removed since it was listed ("Frame
with the given frameId is not found.", "No node with given id found")."""


def _gone(exc: Exception) -> bool:
    return any(s in str(exc) for s in GONE_ERRORS)


def _unloaded(frame: dict[str, Any]) -> bool:
    """A frame (CDP `Page.Frame`) that did not load its own document: none committed (its
    initial empty one), or Chromium's `about:blank#blocked`, where it sends a frame whose
    URL it refuses to show (a `chrome-untrusted:` one)."""
    url = frame.get("url", "")
    return not url or (url == "about:blank" and frame.get("urlFragment") == "#blocked")


async def _refused_src(cdp, frame_id: str) -> str | None:
    """The URL a frame that never committed a document was to load, when Chromium refuses
    to load it from a page of the web (a `file:`, `chrome:`, `view-source:`, `devtools:`,
    `filesystem:` or `mailto:` URL: "Not allowed to load local resource"). Such a frame
    stays on its initial empty document for good (or on `about:blank#blocked`), with no
    error page to tell it from a frame still loading (an http URL) or one a script wrote
    (`javascript:`, no `src`)."""
    owner = await cdp.send("DOM.getFrameOwner", {"frameId": frame_id})
    node = (await cdp.send("DOM.describeNode", {"backendNodeId": owner["backendNodeId"]}))["node"]
    attrs = node.get("attributes", [])  # name, value, name, value, ...
    src = dict(zip(attrs[::2], attrs[1::2], strict=True)).get("data" if node.get("localName") == "object" else "src")  # fmt: skip
    src = re.sub(r"[\t\n\r]", "", (src or "").strip())  # as a URL is parsed
    scheme = _SCHEME_RE.match(src)
    return src if scheme and scheme.group(1).lower() not in LOADED_SCHEMES else None


async def mark_frames(page, with_visibility: bool, walk_over: int = 0) -> dict[str, Any]:
    """Mark every frame (recursively, child bids prefixed by their frame's bid).

    Returns the union of the frames' hidden bids, input types and viewport ratios, and
    `walk`: the main document has more than `walk_over` elements, so only its elements got
    bids (no ARIA carriers, no frames): `walk_tree` reads it.
    """
    from playwright.async_api import Error as PlaywrightError

    out: dict[str, Any] = {
        "hidden": set(), "inputs": {}, "visibility": {}, "frames": {}, "walk": False,
        "detached": False,
    }  # fmt: skip

    async def mark(frame, prefix: str) -> None:
        out["frames"][prefix] = frame
        res = await frame.evaluate(MARK_JS, [prefix, BID_ATTR, with_visibility, walk_over])
        out["hidden"].update(res["hidden"])
        out["inputs"].update(res["inputs"])
        out["visibility"].update(res["visibility"])
        if res.get("walk"):
            out["walk"] = True
            return
        for child in frame.child_frames:
            if child.is_detached():
                continue
            try:
                elem = await child.frame_element()
                sandbox, bid = await elem.evaluate(FRAME_JS, BID_ATTR)
                if sandbox is not None and "allow-scripts" not in sandbox.split():
                    continue
                if bid:
                    await mark(child, bid)
            except PlaywrightError as exc:
                if not detached(child, exc):
                    raise
                out["detached"] = True  # removed while read (a rotating ad): left out

    await mark(page.main_frame, "")
    return out


def detached(frame, exc: Exception) -> bool:
    """Whether a Playwright error reading a child frame is the frame's removal from its
    page while it was read ("Frame was detached", "Frame has been detached")."""
    return frame.is_detached() or "detached" in str(exc)


async def unmark_frames(page, frames: dict[str, Any], carriers: bool = True) -> dict[str, Any]:
    """Remove the ARIA carriers from every marked frame (keyed by bid prefix); without
    `carriers` (a walked document has none) only read the state.

    Returns the main document's HTTP status and the focused element's bid, followed
    into frames (BrowserGym's extract_focused_element_bid)."""
    from playwright.async_api import Error as PlaywrightError

    found = {}
    for prefix, frame in frames.items():
        if frame.is_detached():
            continue  # its document went with it, our marks too
        try:
            found[prefix] = await frame.evaluate(UNMARK_JS, [BID_ATTR, carriers])
        except PlaywrightError as exc:
            if prefix == "" or not detached(frame, exc):
                raise
    main = found.get("", {"focused": "", "status": None})
    focused = main["focused"]
    while focused in found and found[focused]["focused"]:
        focused = found[focused]["focused"]
    return {"focused": focused, "status": main["status"]}


async def walk_tree(page, options: TreeOptions, max_chars: int) -> dict[str, Any]:
    """The main document's tree text by WALK_JS, about `max_chars` long at most:
    {text, complete (the whole document was written), inputs (bid -> type, shown fields)}."""
    args = [
        BID_ATTR,
        max_chars,
        options.prune_hidden,
        options.prune_empty,
        options.viewport_only,
        sorted(INTERACTIVE_ROLES),
    ]
    return await page.main_frame.evaluate(WALK_JS, args)
