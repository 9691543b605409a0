"""The app model: apps, activities, the widgets they are built from, launcher and system UI.

An `App` holds its persistent data (what `pm clear` resets); an `Activity` holds UI
state (focus, scroll offsets, an open dialog) and renders its content as a fresh View
tree. Activities reach the device only through the small `Host` protocol, so an app
never touches the window manager's internals.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from .ui import CONTENT, HEIGHT, NAV_BAR, STATUS_BAR, WIDTH, Bounds, View, Window, clip, decor

TOOLBAR_H = 147
ROW_H = 200


class Host(Protocol):
    """What an app may ask of the device."""

    def start(self, activity: Activity) -> None: ...

    def finish(self, activity: Activity) -> None: ...

    def crash(self, app: App) -> None: ...

    def anr(self, app: App, on_wait: Callable[[], None]) -> None: ...

    def show_keyboard(self, shown: bool) -> None: ...

    def launch(self, package: str) -> str | None: ...

    def installed(self) -> list[App]: ...


class App:
    package: ClassVar[str]
    label: ClassVar[str]
    version: ClassVar[str] = "1.0"
    launchable: ClassVar[bool] = True

    def __init__(self, host: Host):
        self.host = host
        self.data: dict[str, Any] = copy.deepcopy(self.initial_data())

    def initial_data(self) -> dict[str, Any]:
        return {}

    def clear(self) -> None:
        """`pm clear`: the app's data back to a fresh install."""
        self.data = copy.deepcopy(self.initial_data())

    def main(self) -> Activity:
        raise NotImplementedError


class Activity:
    name: ClassVar[str] = ".MainActivity"

    def __init__(self, app: App):
        self.app = app
        self.overlay: Callable[[], Window] | None = None
        """An open dialog or popup menu of this activity."""
        self.focus: str | None = None
        """Key of the focused text field."""

    @property
    def host(self) -> Host:
        return self.app.host

    @property
    def package(self) -> str:
        return self.app.package

    def rid(self, name: str) -> str:
        return f"{self.package}:id/{name}"

    def content(self) -> View:
        raise NotImplementedError

    def windows(self) -> list[Window]:
        out = [Window(self.package, self.title(), decor(self.content()))]
        if self.overlay is not None:
            out.append(self.overlay())
        return out

    def title(self) -> str:
        """The activity's window title as `dumpsys window` names it (`pkg/full.Class`)."""
        cls = self.package + self.name if self.name.startswith(".") else self.name
        return f"{self.package}/{cls}"

    # -- events the device forwards -------------------------------------------------
    def back(self) -> bool:
        """Handle back; False lets the device finish the activity."""
        if self.overlay is not None:
            self.overlay = None
            return True
        return False

    def commit_text(self, text: str) -> None:
        """The IME commits text into the focused field."""

    def clear_text(self) -> None:
        """The IME clears the focused field."""

    def key(self, name: str) -> None:
        """enter / delete with a field focused."""

    def focus_field(self, key: str) -> None:
        self.focus = key
        self.host.show_keyboard(True)


# -- widgets -----------------------------------------------------------------------
def text_view(text: str, bounds: Bounds, rid: str = "", **kw: Any) -> View:
    return View("android.widget.TextView", text=text, rid=rid, bounds=bounds, **kw)


def button(text: str, bounds: Bounds, rid: str, on_click: Callable[[], None]) -> View:
    return View(
        "android.widget.Button",
        text=text,
        rid=rid,
        bounds=bounds,
        clickable=True,
        focusable=True,
        on_click=on_click,
    )


def image_button(desc: str, bounds: Bounds, rid: str, on_click: Callable[[], None]) -> View:
    return View(
        "android.widget.ImageButton",
        desc=desc,
        rid=rid,
        bounds=bounds,
        clickable=True,
        focusable=True,
        on_click=on_click,
    )


def edit_text(act: Activity, key: str, value: str, hint: str, bounds: Bounds, rid: str) -> View:
    """An EditText; empty ones report their hint as text, as Android 8+ accessibility does."""
    return View(
        "android.widget.EditText",
        text=value or hint,
        hint=hint,
        rid=rid,
        bounds=bounds,
        clickable=True,
        long_clickable=True,
        focusable=True,
        focused=act.focus == key,
        on_click=lambda: act.focus_field(key),
    )


def toolbar(
    act: Activity,
    title: str,
    up: Callable[[], None] | None = None,
    actions: list[tuple[str, str, Callable[[], None]]] | None = None,
) -> View:
    """An app bar: optional Navigate up, the title, action buttons (desc, id, handler)."""
    top = STATUS_BAR
    bar = View(
        "android.view.ViewGroup", rid=act.rid("toolbar"), bounds=(0, top, WIDTH, top + TOOLBAR_H)
    )
    x = 0
    if up is not None:
        bar.children.append(image_button("Navigate up", (0, top, 147, top + TOOLBAR_H), "", up))
        x = 147
    right = WIDTH
    buttons = []
    for desc, rid, handler in reversed(actions or []):
        buttons.insert(
            0, image_button(desc, (right - 126, top, right, top + TOOLBAR_H), rid, handler)
        )
        right -= 126
    bar.children.append(text_view(title, (x + 42, top + 40, right - 20, top + 107)))
    bar.children.extend(buttons)
    return bar


def scroll_list(
    rid: str,
    viewport: Bounds,
    items: list[tuple[int, Callable[[Bounds], View]]],
    offset: int,
    on_scroll: Callable[[int], None],
) -> View:
    """A RecyclerView: builds the items at `offset`, keeps only what shows, cut to view."""
    lst = View(
        "androidx.recyclerview.widget.RecyclerView",
        rid=rid,
        bounds=viewport,
        scrollable=sum(h for h, _ in items) > viewport[3] - viewport[1],
        focusable=True,
        on_scroll=on_scroll,
    )
    y = viewport[1] - offset
    for h, build in items:
        b = (viewport[0], y, viewport[2], y + h)
        y += h
        if clip(b, viewport) is not None:
            lst.children.append(clipped(build(b), viewport))
    return lst


def clipped(v: View, viewport: Bounds) -> View:
    """Bounds cut to the viewport, as getBoundsInScreen reports them; hidden children go."""
    shown = clip(v.bounds, viewport) or (v.bounds[0], viewport[1], v.bounds[2], viewport[1])
    kids = [clipped(c, viewport) for c in v.children if clip(c.bounds, viewport) is not None]
    return View(**{**v.__dict__, "bounds": shown, "children": kids})


def scroll_by(state: dict[str, int], key: str, dy: int, content_h: int, viewport: Bounds) -> None:
    """Move a scroll offset by dy pixels, clamped to the content."""
    limit = max(0, content_h - (viewport[3] - viewport[1]))
    state[key] = max(0, min(limit, state.get(key, 0) + dy))


def alert_dialog(
    package: str,
    title_text: str,
    message: str,
    buttons: list[tuple[str, str, Callable[[], None]]],
    window_title: str,
    on_outside: Callable[[], None] | None = None,
) -> Window:
    """A centred AlertDialog: title, message and buttons (text, resource id, handler)."""
    left, right, top = 84, WIDTH - 84, 880
    bottom = top + 560
    box = View("android.widget.FrameLayout", bounds=(left, top, right, bottom))
    panel = View("android.widget.LinearLayout", rid="android:id/parentPanel", bounds=box.bounds)
    panel.children.append(
        text_view(title_text, (left + 72, top + 66, right - 72, top + 150), "android:id/alertTitle")
    )
    if message:
        panel.children.append(
            text_view(message, (left + 72, top + 190, right - 72, top + 330), "android:id/message")
        )
    bar = View(
        "android.widget.LinearLayout",
        rid="android:id/buttonPanel",
        bounds=(left, bottom - 160, right, bottom),
    )
    x = right - 42
    for text, rid, handler in reversed(buttons):
        w = 60 + 34 * len(text)
        bar.children.insert(0, button(text, (x - w, bottom - 150, x, bottom - 30), rid, handler))
        x -= w + 24
    panel.children.append(bar)
    box.children.append(panel)
    return Window(package, window_title, box, modal=True, on_outside=on_outside)


def popup_menu(
    package: str,
    anchor: Bounds,
    items: list[tuple[str, Callable[[], None]]],
    window_title: str,
    on_outside: Callable[[], None],
) -> Window:
    """An overflow menu dropping from `anchor`'s right edge."""
    right, top = anchor[2] - 20, anchor[1] + 20
    left = right - 560
    lst = View("android.widget.ListView", bounds=(left, top, right, top + 147 * len(items) + 32))
    y = top + 16
    for text, handler in items:
        row = View(
            "android.widget.LinearLayout",
            bounds=(left, y, right, y + 147),
            clickable=True,
            focusable=True,
            on_click=handler,
        )
        row.children.append(
            text_view(text, (left + 48, y + 40, right - 48, y + 107), "android:id/title")
        )
        lst.children.append(row)
        y += 147
    return Window(package, window_title, lst, modal=True, on_outside=on_outside)


# -- launcher and system UI -----------------------------------------------------------
LAUNCHER = "com.google.android.apps.nexuslauncher"
SYSTEMUI = "com.android.systemui"


class Launcher(App):
    package = LAUNCHER
    label = "Pixel Launcher"
    launchable = False

    def main(self) -> Activity:
        return Home(self)


class Home(Activity):
    name = ".NexusLauncherActivity"

    def content(self) -> View:
        ws = View("android.widget.ScrollView", rid=self.rid("workspace"), bounds=CONTENT)
        apps = [a for a in self.host.installed() if a.launchable]
        for i, app in enumerate(apps):
            col, row = i % 4, i // 4
            left, top = 30 + col * 255, 1500 + row * 300
            ws.children.append(
                text_view(
                    app.label,
                    (left, top, left + 255, top + 300),
                    desc=app.label,
                    clickable=True,
                    focusable=True,
                    on_click=lambda p=app.package: self.host.launch(p),
                )
            )
        search = View(
            "android.widget.FrameLayout",
            rid=self.rid("search_container_hotseat"),
            desc="Search",
            bounds=(60, 2080, WIDTH - 60, 2230),
        )
        return View("android.widget.FrameLayout", bounds=CONTENT, children=[ws, search])


def status_bar(clock: str = "12:00") -> Window:
    bar = View(
        "android.widget.FrameLayout",
        rid=f"{SYSTEMUI}:id/status_bar",
        bounds=(0, 0, WIDTH, STATUS_BAR),
    )
    bar.children = [
        text_view(clock, (60, 30, 200, 90), f"{SYSTEMUI}:id/clock", desc=clock),
        View("android.widget.LinearLayout", rid=f"{SYSTEMUI}:id/battery", desc="Battery 100 percent.", bounds=(960, 30, 1040, 90)),
    ]  # fmt: skip
    return Window(SYSTEMUI, "StatusBar", bar)


def navigation_bar(
    back: Callable[[], None], home: Callable[[], None], recents: Callable[[], None]
) -> Window:
    top = HEIGHT - NAV_BAR
    bar = View(
        "android.widget.FrameLayout",
        rid=f"{SYSTEMUI}:id/navigation_bar_frame",
        bounds=(0, top, WIDTH, HEIGHT),
    )
    bar.children = [
        View("android.widget.ImageView", rid=f"{SYSTEMUI}:id/back", desc="Back", bounds=(150, top, 330, HEIGHT), clickable=True, on_click=back),
        View("android.widget.ImageView", rid=f"{SYSTEMUI}:id/home", desc="Home", bounds=(450, top, 630, HEIGHT), clickable=True, on_click=home),
        View("android.widget.ImageView", rid=f"{SYSTEMUI}:id/recent_apps", desc="Overview", bounds=(750, top, 930, HEIGHT), clickable=True, on_click=recents),
    ]  # fmt: skip
    return Window(SYSTEMUI, "NavigationBar", bar)
