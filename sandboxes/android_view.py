"""The android observation: a uiautomator dump compacted to what an agent can act on.

A dump carries ~20 attributes per node and many layout containers; the observation
keeps one line per informative node (text, content-desc, or something to act on),
indented under its informative ancestors:

    [com.example.notes/.EditorActivity] keyboard: shown
    [4] ImageButton desc="Navigate up" clickable [0,110][147,257]
    [7] EditText "Title" hint="Title" #title_input clickable long-clickable focused [42,287][1038,427]

Node ids are stable within an episode: a node keeps its number while its path (the
class, resource id and label of it and its ancestors, see `_label`) stays the same, so
scrolling, typing or a dialog opening does not renumber the rest of the screen; rows
alike in all that are matched with the rows seen before (`NodeIds.ordinals`). `parse`
reads the lines back (the explorer does).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from worldtrace.schemas.validate import LONE_SURROGATE

Bounds = tuple[int, int, int, int]
EDITABLE = ("EditText", "AutoCompleteTextView", "SearchAutoComplete")
FLAG_ORDER = (
    "clickable",
    "long-clickable",
    "checked",
    "unchecked",
    "focused",
    "scrollable",
    "disabled",
)
BOUNDS_RE = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
LINE_RE = re.compile(
    r"^(?P<indent> *)\[(?P<id>\d+)\] (?P<cls>\S+)"
    r'(?: (?P<text>"(?:[^"\\]|\\.)*"))?(?: hint=(?P<hint>"(?:[^"\\]|\\.)*"))?'
    r'(?: desc=(?P<desc>"(?:[^"\\]|\\.)*"))?(?: #(?P<rid>\S+))?'
    r"(?P<flags>(?: [a-z-]+)*) \[(?P<b0>-?\d+),(?P<b1>-?\d+)\]\[(?P<b2>-?\d+),(?P<b3>-?\d+)\]$"
)


@dataclass(frozen=True)
class Node:
    id: int
    cls: str
    """Class without its package (`TextView`)."""
    text: str = ""
    hint: str = ""
    """A field's hint where its text equals it: Android 8+ reports an empty field's hint
    as its text, and uiautomator2's dump cannot tell that from typed text (both kept)."""
    desc: str = ""
    rid: str = ""
    """Resource id without `package:id/`."""
    flags: frozenset[str] = frozenset()
    bounds: Bounds = (0, 0, 0, 0)
    depth: int = 0

    @property
    def center(self) -> tuple[int, int]:
        return (self.bounds[0] + self.bounds[2]) // 2, (self.bounds[1] + self.bounds[3]) // 2

    @property
    def editable(self) -> bool:
        return self.cls in EDITABLE

    def line(self) -> str:
        parts = ["  " * self.depth + f"[{self.id}] {self.cls}"]
        if self.text:
            parts.append(_quote(self.text))
        if self.hint:
            parts.append("hint=" + _quote(self.hint))
        if self.desc:
            parts.append("desc=" + _quote(self.desc))
        if self.rid:
            parts.append("#" + self.rid)
        parts += [f for f in FLAG_ORDER if f in self.flags]
        b = self.bounds
        parts.append(f"[{b[0]},{b[1]}][{b[2]},{b[3]}]")
        return " ".join(parts)


LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
"""Line ends JSON leaves as they are and `str.splitlines` splits at: escaped, so that a
node stays one line (and `parse` reads it back)."""


def _quote(value: str) -> str:
    out = json.dumps(value, ensure_ascii=False)
    for raw, escaped in LINE_BREAKS.items():
        out = out.replace(raw, escaped)
    return out


def shorten(node: Node, cap: int) -> Node:
    """The node with its text, hint and description cut at `cap` characters each (the
    cut says how much is left out), so one huge text does not crowd out the screen."""
    cut = {}
    for name in ("text", "hint", "desc"):
        value = getattr(node, name)
        if len(value) > cap:
            cut[name] = f"{value[:cap]}… (+{len(value) - cap} chars)"
    return replace(node, **cut) if cut else node


Sibling = tuple[tuple, bytes]
"""A child as `NodeIds.ordinals` tells it: (base, signature)."""


class NodeIds:
    """Episode-scoped node numbering by path; new paths get the next number.

    Siblings alike in class, resource id and label (list rows with the same first text)
    are told apart by an ordinal in their path. Not by their position among themselves:
    a row inserted above an identical one took its id (and the older row a new one), so
    an agent's `tap node=9` opened the new row. `ordinals` matches them with the rows
    seen before instead."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        self._last: dict[tuple, list[tuple[Sibling, int]]] = {}
        """Parent path -> its children when last seen, with their ordinals."""
        self._known: dict[tuple, list[int]] = {}
        """(parent path, signature) -> the ordinals children with it had."""

    def get(self, key: tuple) -> int:
        return self._ids.setdefault(key, len(self._ids) + 1)

    def ordinals(self, parent: tuple, children: list[Sibling]) -> list[int]:
        """The ordinal of each child of `parent` (screen order), found in turn:

        1. the parent's children when last seen, aligned with these by signature (base
           and every text below; difflib over the whole sibling list, so a row identical
           to another is placed by the rows around it): an unchanged row keeps its own;
        2. the one a child with the same signature had before the last screen (a row
           scrolled back into view, a screen returned to);
        3. that of a last-seen child of its base that these replace in the alignment (a
           row or field whose texts changed where it stood);
        4. the lowest of its base that neither a child now nor one last seen has: a new
           row never takes the id of a row on this screen or the last.

        Deterministic (the same screens in the same order get the same ids); a screen
        seen the first time is numbered by position among alike siblings."""
        before = self._last.get(parent, [])
        if not children and not before:
            return []
        out = [0] * len(children)
        matcher = difflib.SequenceMatcher(
            None, [c[1] for c, _ in before], [c[1] for c in children], autojunk=False
        )
        opcodes = matcher.get_opcodes()
        for tag, i1, i2, j1, _ in opcodes:
            if tag == "equal":
                out[j1 : j1 + i2 - i1] = [o for _, o in before[i1:i2]]
        taken = {(c[0], o) for c, o in zip(children, out, strict=True) if o}

        def give(j: int, options) -> None:
            base = children[j][0]
            out[j] = next((o for o in options if (base, o) not in taken), 0)
            taken.add((base, out[j]))

        held = {(c[0], o) for c, o in before}  # on the last screen: not a row come back
        for j, (base, sig) in enumerate(children):
            if not out[j]:
                give(j, [o for o in self._known.get((parent, sig), ()) if (base, o) not in held])
        for tag, i1, i2, j1, j2 in opcodes:
            for j in range(j1, j2) if tag == "replace" else ():
                if not out[j]:
                    give(j, [o for (b, _), o in before[i1:i2] if b == children[j][0]])
        for j, (base, _) in enumerate(children):
            if not out[j]:
                give(j, (k for k in itertools.count(1) if (base, k) not in held))
        for (_, sig), o in zip(children, out, strict=True):
            known = self._known.setdefault((parent, sig), [])
            if o not in known:
                known.append(o)
        self._last[parent] = list(zip(children, out, strict=True))
        return out


def _true(el: ET.Element, name: str) -> bool:
    return el.get(name) == "true"


def _short_id(rid: str) -> str:
    return rid.split(":id/", 1)[1] if ":id/" in rid else rid


def _text(el: ET.Element) -> str:
    """The first text or description in a subtree (editable fields' contents excluded)."""
    own = "" if el.get("class", "").endswith(EDITABLE) else (el.get("text") or "")
    return own or el.get("content-desc") or next((t for c in el if (t := _text(c))), "")


def _sibling(el: ET.Element, base: tuple) -> Sibling:
    """A child as `NodeIds.ordinals` matches it: its base, and a digest of its base and
    every text and description below it (what tells two rows with the same first text
    apart; a digest, as a long text would otherwise be kept for every screen)."""
    texts = [v for n in el.iter("node") for v in (n.get("text") or "", n.get("content-desc") or "")]
    return base, hashlib.blake2b(json.dumps([base, texts]).encode(), digest_size=16).digest()


def _label(el: ET.Element) -> str:
    """What tells a node apart from its siblings beyond class and resource id.

    A clickable container (a list row) is known by its first text, so rows keep their
    ids when a list scrolls; a node with a resource id needs nothing more; a field by
    its hint (its text changes as one types); anything else by its text.
    """
    clickable = _true(el, "clickable") or _true(el, "long-clickable")
    if clickable and len(el):
        return _text(el)
    if el.get("resource-id"):
        return ""
    if el.get("class", "").endswith(EDITABLE):
        return el.get("hint") or ""
    return el.get("text") or el.get("content-desc") or ""


def _node(el: ET.Element, node_id: int, depth: int) -> Node | None:
    """The compact node, or None when the element carries nothing worth a line."""
    cls = (el.get("class") or "").rsplit(".", 1)[-1]
    text, hint, desc = el.get("text") or "", el.get("hint") or "", el.get("content-desc") or ""
    # Android 8+ reports an empty field's hint as its text. Appium's server dumps
    # `showing-hint` (isShowingHintText); uiautomator2's does not, so there an empty field
    # and one holding its hint's words dump alike: both kept, typed text is never lost.
    shows_hint = cls in EDITABLE and hint != "" and text == hint
    showing = el.get("showing-hint")
    if shows_hint and showing == "true":
        text = ""
    elif not (shows_hint and showing is None):
        hint = ""
    if desc == text:
        desc = ""
    flags = {n for n in ("clickable", "long-clickable", "focused", "scrollable") if _true(el, n)}
    if _true(el, "checkable"):
        flags.add("checked" if _true(el, "checked") else "unchecked")
    acts = bool(flags) or cls in EDITABLE
    if not (text or hint or desc or acts):
        return None
    if el.get("enabled") == "false":
        flags.add("disabled")
    m = BOUNDS_RE.match(el.get("bounds") or "")
    bounds = tuple(int(v) for v in m.groups()) if m else (0, 0, 0, 0)
    rid = _short_id(el.get("resource-id") or "")
    return Node(node_id, cls, text, hint, desc, rid, frozenset(flags), bounds, depth)  # type: ignore[arg-type]


NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot carry: uiautomator's dumper replaces them with "." (see
`stripInvalidXMLChars`), a server that does not would make the dump unreadable."""


class UnreadableDump(ValueError):
    """A dump that is no view hierarchy: half of one, or an error line instead of XML."""


def read_dump(xml: str) -> ET.Element | None:
    """The dump's root, or None when it holds no window: the uiautomator2 server answers
    "" or a bare `<hierarchy rotation="0" />` while no window is accessible (between two
    activities), which is no screen. UnreadableDump when it is no hierarchy at all."""
    if not xml.strip():
        return None
    # half of a UTF-16 pair (an app cut a text inside an emoji; the server's JSON carries it
    # escaped, `\\ud83c`): no UTF-8 encoder takes it
    xml = LONE_SURROGATE.sub("\ufffd", NOT_XML.sub(".", xml))
    try:
        root = ET.fromstring(xml.encode("utf-8") if xml.lstrip().startswith("<?xml") else xml)
    except ET.ParseError as exc:
        said = repr(xml) if len(xml) <= 80 else f"{len(xml)} chars ending {xml[-60:]!r}"
        raise UnreadableDump(f"the dump is not XML ({exc}): {said}") from exc
    if root.tag != "hierarchy":
        raise UnreadableDump(f"the dump is no view hierarchy (its root is <{root.tag}>)")
    return root if root.find("node") is not None else None


def nodes(
    dump: str | ET.Element | None, ids: NodeIds, hide_packages: tuple[str, ...] = ()
) -> list[Node]:
    """The informative nodes of a dump (its XML, or `read_dump`'s root) in document order,
    numbered by `ids`."""
    root = read_dump(dump) if isinstance(dump, str) else dump
    out: list[Node] = []
    if root is None:
        return out

    def walk(el: ET.Element, path: tuple, depth: int) -> None:
        shown = [c for c in el if c.tag == "node" and c.get("package") not in hide_packages]
        bases = [(c.get("class"), c.get("resource-id"), _label(c)) for c in shown]
        found = ids.ordinals(path, [_sibling(c, b) for c, b in zip(shown, bases, strict=True)])
        for child, base, ordinal in zip(shown, bases, found, strict=True):
            key = (*path, (*base, ordinal))
            n = _node(child, ids.get(key), depth)
            if n is not None:
                out.append(n)
            walk(child, key, depth + (n is not None))

    walk(root, (), 0)
    return out


def render(found: list[Node], max_chars: int) -> tuple[str, bool]:
    """The node lines, cut at `max_chars` with a count of what was left out. A text
    longer than a tenth of `max_chars` is shortened (and the turn truncated): a long
    note or log view would otherwise push every node after it off the observation."""
    lines, size, cap, shortened = [], 0, max(100, max_chars // 10), False
    for i, n in enumerate(found):
        short = shorten(n, cap)
        shortened |= short is not n
        line = short.line()
        if size + len(line) + 1 > max_chars:
            lines.append(f"... ({len(found) - i} more nodes)")
            return "\n".join(lines), True
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines), shortened


def parse(text: str) -> Iterator[Node]:
    """The nodes of an observation's text (lines that are not nodes are skipped)."""
    for line in text.splitlines():
        m = LINE_RE.match(line)
        if m is None:
            continue
        g = m.groupdict()
        yield Node(
            int(g["id"]),
            g["cls"],
            json.loads(g["text"]) if g["text"] else "",
            json.loads(g["hint"]) if g["hint"] else "",
            json.loads(g["desc"]) if g["desc"] else "",
            g["rid"] or "",
            frozenset(g["flags"].split()),
            (int(g["b0"]), int(g["b1"]), int(g["b2"]), int(g["b3"])),
            len(g["indent"]) // 2,
        )


# -- app state from `dumpsys` ------------------------------------------------------------
BOOT_ID = "/proc/sys/kernel/random/boot_id"
"""The kernel's id of this boot (a random UUID each boot; readable from adb shell)."""
STATE_COMMAND = (
    "dumpsys window windows | grep -E 'mCurrentFocus|mFocusedApp'; "
    f"dumpsys input_method | grep mInputShown; cat {BOOT_ID}"
)
"""One shell round trip for the window in focus, the resumed activity, the keyboard, and
the boot id (a restart under the episode is noticed at no extra round trip)."""
BOOT_RE = re.compile(r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.M)
FOCUS_RE = re.compile(r"mCurrentFocus=Window\{\S+ \S+ ([^}]*)\}")
APP_RE = re.compile(r"mFocusedApp=\S*?\{\S+ \S+ ([^\s/}]+)/([^\s}]+)")
FAILURES = {"Application Error": "app_crashed", "Application Not Responding": "anr"}
FAILURE_IDS = {"aerr_wait": "anr", "aerr_close": "app_crashed"}


@dataclass(frozen=True)
class AppState:
    package: str | None
    activity: str | None
    keyboard: bool
    window: str | None = None
    """The focused window when it is not the activity (a crash or ANR dialog)."""
    boot: str | None = field(default=None, compare=False)
    """The device's boot id (None: unreadable); not part of the observation."""

    def header(self) -> str:
        where = f"[{self.package}/{self.activity}]" if self.package else "[unknown app]"
        extra = [f"window: {self.window}"] if self.window else []
        extra.append("keyboard: shown" if self.keyboard else "keyboard: hidden")
        return " ".join([where, *extra])

    def to_dict(self) -> dict[str, object]:
        return {"package": self.package, "activity": self.activity, "keyboard": self.keyboard,
                "window": self.window}  # fmt: skip


def _short_activity(package: str, activity: str) -> str:
    return activity[len(package) :] if activity.startswith(package + ".") else activity


def app_state(dumpsys: str) -> AppState:
    """Package, activity, keyboard, a non-activity focused window and the boot id from
    STATE_COMMAND."""
    app = APP_RE.search(dumpsys)
    focus = FOCUS_RE.search(dumpsys)
    package = activity = window = None
    if app:
        package, activity = app.group(1), _short_activity(app.group(1), app.group(2))
    if focus:
        title = focus.group(1).strip()
        if "/" in title and " " not in title:
            package, act = title.split("/", 1)
            activity = _short_activity(package, act)
        else:
            window = title
    keyboard = "mInputShown=true" in dumpsys
    boot = BOOT_RE.search(dumpsys)
    return AppState(package, activity, keyboard, window, boot.group(1) if boot else None)


def env_failure(state: AppState, found: list[Node]) -> str | None:
    """`app_crashed` / `anr` when a system error dialog is up (by window, else by its ids)."""
    if state.window:
        for prefix, reason in FAILURES.items():
            if state.window.startswith(prefix):
                return reason
    ids = {n.rid for n in found}
    return next((reason for rid, reason in FAILURE_IDS.items() if rid in ids), None)
