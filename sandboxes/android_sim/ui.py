"""Views of the simulated screen: a tree rebuilt on every render, dumped as uiautomator XML.

A `View` carries what an AccessibilityNodeInfo carries (class, text, resource-id,
content-desc, flags, bounds) plus the handlers the app model attached (click, long
click, scroll). Apps rebuild their tree from state on every dump and every touch, so
the XML always matches what a touch would hit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

Bounds = tuple[int, int, int, int]
WIDTH, HEIGHT = 1080, 2400
STATUS_BAR = 110
"""Height of the status bar; app content starts below it."""
NAV_BAR = 126
"""Height of the three-button navigation bar at the bottom."""
CONTENT: Bounds = (0, STATUS_BAR, WIDTH, HEIGHT - NAV_BAR)
XML_HEADER = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\r\n"
_ESCAPES = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


@dataclass
class View:
    cls: str
    text: str = ""
    rid: str = ""
    """Full resource id, e.g. `com.example.notes:id/fab`."""
    desc: str = ""
    bounds: Bounds = (0, 0, 0, 0)
    clickable: bool = False
    long_clickable: bool = False
    checkable: bool = False
    checked: bool = False
    enabled: bool = True
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    password: bool = False
    selected: bool = False
    hint: str = ""
    children: list[View] = field(default_factory=list)
    on_click: Callable[[], None] | None = None
    on_long_click: Callable[[], None] | None = None
    on_scroll: Callable[[int], None] | None = None
    """Scrollable views: called with the content offset change in pixels (+ = down)."""

    def contains(self, x: int, y: int) -> bool:
        left, top, right, bottom = self.bounds
        return left <= x < right and top <= y < bottom

    def walk(self) -> Iterator[View]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass
class Window:
    """One window of the screen: an activity, a dialog, a popup or a system bar."""

    package: str
    title: str
    """What `dumpsys window` names it: `pkg/activity`, `Application Error: pkg`, ..."""
    root: View
    modal: bool = False
    """Dialogs and popups take every touch; touches outside call `on_outside`."""
    on_outside: Callable[[], None] | None = None


def hit(root: View, x: int, y: int, want: Callable[[View], bool]) -> View | None:
    """The topmost (last drawn, deepest) enabled view at (x, y) that `want` accepts."""
    if not root.contains(x, y):
        return None
    for child in reversed(root.children):
        found = hit(child, x, y, want)
        if found is not None:
            return found
    return root if root.enabled and want(root) else None


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufdd0-\ufddf]")
"""What uiautomator's AccessibilityNodeInfoDumper (`stripInvalidXMLChars`) replaces with
"." before it writes a text into the dump (control characters XML cannot carry)."""


def _attr(value: str) -> str:
    return escape(_NOT_XML.sub(".", value), _ESCAPES)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _node_xml(
    v: View, package: str, index: int, out: list[str], depth: int, max_depth: int
) -> None:
    left, top, right, bottom = v.bounds
    out.append(
        f'<node index="{index}" text="{_attr(v.text)}" resource-id="{_attr(v.rid)}" '
        f'class="{v.cls}" package="{package}" content-desc="{_attr(v.desc)}" '
        f'checkable="{_flag(v.checkable)}" checked="{_flag(v.checked)}" '
        f'clickable="{_flag(v.clickable)}" enabled="{_flag(v.enabled)}" '
        f'focusable="{_flag(v.focusable)}" focused="{_flag(v.focused)}" '
        f'scrollable="{_flag(v.scrollable)}" long-clickable="{_flag(v.long_clickable)}" '
        f'password="{_flag(v.password)}" selected="{_flag(v.selected)}" '
        f'bounds="[{left},{top}][{right},{bottom}]" drawing-order="{index + 1}" '
        f'hint="{_attr(v.hint)}"'
    )
    kids = v.children if depth < max_depth else []
    if not kids:
        out.append(" />")
        return
    out.append(">")
    for i, c in enumerate(kids):
        _node_xml(c, package, i, out, depth + 1, max_depth)
    out.append("</node>")


def _unimportant(v: View) -> bool:
    """What uiautomator's compressed mode hides: layout containers without content."""
    return not (
        v.text or v.desc or v.clickable or v.long_clickable or v.checkable or v.scrollable
    ) and bool(v.children)


def _compress(v: View) -> list[View]:
    kids = [k for c in v.children for k in _compress(c)]
    if _unimportant(v):
        return kids
    return [View(**{**v.__dict__, "children": kids})]


def dump_xml(windows: list[Window], compressed: bool = False, max_depth: int = 50) -> str:
    """The hierarchy as uiautomator's dumpWindowHierarchy returns it (one line of XML)."""
    out = [XML_HEADER, '<hierarchy rotation="0">']
    for i, w in enumerate(windows):
        roots = _compress(w.root) if compressed else [w.root]
        for root in roots:
            _node_xml(root, w.package, i, out, 1, max_depth)
    out.append("</hierarchy>")
    return "".join(out)


# -- layout helpers --------------------------------------------------------------
def decor(content: View, bounds: Bounds = (0, 0, WIDTH, HEIGHT)) -> View:
    """The window decor every activity sits in (DecorView > LinearLayout > content)."""
    inner = View("android.widget.FrameLayout", rid="android:id/content", bounds=CONTENT)
    inner.children = [content]
    return View(
        "android.widget.FrameLayout",
        bounds=bounds,
        children=[View("android.widget.LinearLayout", bounds=bounds, children=[inner])],
    )


def rows(top: int, heights: list[int], left: int = 0, right: int = WIDTH) -> list[Bounds]:
    """Bounds of views stacked vertically from `top`."""
    out = []
    for h in heights:
        out.append((left, top, right, top + h))
        top += h
    return out


def inset(b: Bounds, dx: int, dy: int = 0) -> Bounds:
    return (b[0] + dx, b[1] + dy, b[2] - dx, b[3] - dy)


def clip(b: Bounds, viewport: Bounds) -> Bounds | None:
    """`b` cut to the viewport, or None when nothing of it shows."""
    left, top = max(b[0], viewport[0]), max(b[1], viewport[1])
    right, bottom = min(b[2], viewport[2]), min(b[3], viewport[3])
    return (left, top, right, bottom) if left < right and top < bottom else None
