"""The Settings app: a scrolling list of categories, pages of toggles and facts, a search.

Pages are data (`PAGES`), so the app stays small while offering many screens: each
toggle row flips a persistent setting (what `pm clear` resets), airplane mode disables
the radios, and the search page filters every row by the typed text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worldtrace.schemas import fields as F

from .apps import (
    ROW_H,
    TOOLBAR_H,
    Activity,
    App,
    edit_text,
    scroll_by,
    scroll_list,
    text_view,
    toolbar,
)
from .ui import CONTENT, STATUS_BAR, WIDTH, Bounds, View

MODEL = F.SIMULATOR_MODEL


@dataclass(frozen=True)
class Toggle:
    key: str
    title: str
    on_summary: str = ""
    off_summary: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    summary: str
    rows: tuple[Toggle | tuple[str, str], ...]
    """Toggles, or (title, value) facts."""


PAGES: dict[str, Page] = {
    "network": Page("Network & internet", "Mobile, Wi‑Fi, hotspot", (
        Toggle("wifi", "Wi‑Fi", "AndroidWifi", "Off"),
        Toggle("mobile_data", "Mobile data", "T-Mobile", "Off"),
        Toggle("airplane", "Airplane mode"),
        Toggle("data_saver", "Data Saver", "On", "Off"),
        ("Hotspot & tethering", "Off"),
    )),
    "connected": Page("Connected devices", "Bluetooth, pairing", (
        Toggle("bluetooth", "Bluetooth", "On", "Off"),
        Toggle("nfc", "NFC", "Use NFC", "Off"),
        ("Pair new device", ""),
    )),
    "apps": Page("Apps", "Recent apps, default apps", ()),
    "notifications": Page("Notifications", "Notification history, conversations", (
        Toggle("notif_history", "Notification history"),
        Toggle("bubbles", "Bubbles"),
        Toggle("dnd", "Do Not Disturb", "On", "Off"),
    )),
    "battery": Page("Battery", "100%", (
        ("Battery level", "100%"),
        Toggle("battery_saver", "Battery Saver", "On", "Off"),
        Toggle("adaptive_battery", "Adaptive Battery"),
        Toggle("battery_pct", "Battery percentage"),
    )),
    "storage": Page("Storage", "37% used - 80.2 GB free", (
        ("Used", "47.8 GB of 128 GB"), ("Apps", "12.1 GB"), ("Images", "3.4 GB"), ("System", "18.6 GB"),
    )),
    "sound": Page("Sound & vibration", "Volume, haptics, Do Not Disturb", (
        Toggle("dnd", "Do Not Disturb", "On", "Off"),
        Toggle("vibrate_calls", "Vibrate for calls"),
        Toggle("dial_tones", "Dial pad tones"),
    )),
    "display": Page("Display", "Dark theme, font size, brightness", (
        Toggle("dark_theme", "Dark theme", "Will turn on automatically at sunset", "Will never turn on automatically"),
        Toggle("adaptive_brightness", "Adaptive brightness"),
        Toggle("auto_rotate", "Auto-rotate screen"),
        ("Screen timeout", "After 30 seconds of inactivity"),
    )),
    "wallpaper": Page("Wallpaper & style", "Colors, themed icons, app grid", (
        ("Wallpaper", "Default"), ("App grid", "4 x 5"),
    )),
    "accessibility": Page("Accessibility", "Display, interaction, audio", (
        Toggle("no_animations", "Remove animations"),
        Toggle("color_inversion", "Color inversion"),
        Toggle("high_contrast", "High contrast text"),
    )),
    "security": Page("Security & privacy", "App security, device lock, permissions", (
        ("Screen lock", "None"), Toggle("show_passwords", "Show passwords"),
    )),
    "location": Page("Location", "", (
        Toggle("location", "Use location", "On", "Off"),
        Toggle("wifi_scanning", "Wi‑Fi scanning"),
        Toggle("bt_scanning", "Bluetooth scanning"),
    )),
    "system": Page("System", "Languages, gestures, time, backup", (
        ("Languages", "English (United States)"), ("Date & time", "GMT+00:00"), ("Backup", "Off"),
    )),
    "about": Page("About phone", MODEL, (
        ("Device name", MODEL), ("Model", MODEL), ("Android version", "14"),
        ("Build number", "WTSIM.240101.001"),
    )),
}  # fmt: skip
DEFAULTS = {
    "wifi": True, "mobile_data": True, "airplane": False, "data_saver": False, "bluetooth": False,
    "nfc": True, "notif_history": False, "bubbles": True, "dnd": False, "battery_saver": False,
    "adaptive_battery": True, "battery_pct": False, "vibrate_calls": True, "dial_tones": True,
    "dark_theme": False, "adaptive_brightness": True, "auto_rotate": False, "no_animations": False,
    "color_inversion": False, "high_contrast": False, "show_passwords": True, "location": True,
    "wifi_scanning": True, "bt_scanning": True,
}  # fmt: skip
RADIOS = ("wifi", "mobile_data", "bluetooth")
"""Rows airplane mode disables."""


class SettingsApp(App):
    package = "com.android.settings"
    label = "Settings"
    version = "14"

    def initial_data(self) -> dict[str, Any]:
        return {"toggles": dict(DEFAULTS)}

    def main(self) -> Activity:
        return SettingsHome(self)

    @property
    def toggles(self) -> dict[str, bool]:
        return self.data["toggles"]

    def summary(self, key: str) -> str:
        if key == "location":
            return "On - 3 apps have access to location" if self.toggles["location"] else "Off"
        return PAGES[key].summary


def _row(
    act: Activity,
    title: str,
    summary: str,
    on_click: Callable[[], None] | None,
    switch: bool | None = None,
    enabled: bool = True,
) -> Callable[[Bounds], View]:
    """A preference row: title, summary, and a Switch when `switch` is not None."""

    def build(b: Bounds) -> View:
        row = View("android.widget.LinearLayout", bounds=b, clickable=on_click is not None,
                   focusable=on_click is not None, enabled=enabled, on_click=on_click)  # fmt: skip
        right = b[2] - 48 - (200 if switch is not None else 0)
        texts = View(
            "android.widget.RelativeLayout", bounds=(b[0] + 180, b[1] + 36, right, b[3] - 36)
        )
        texts.children.append(
            text_view(
                title,
                (b[0] + 180, b[1] + 40, right, b[1] + 110),
                "android:id/title",
                enabled=enabled,
            )
        )
        if summary:
            texts.children.append(
                text_view(
                    summary,
                    (b[0] + 180, b[1] + 110, right, b[3] - 40),
                    "android:id/summary",
                    enabled=enabled,
                )
            )
        row.children.append(
            View(
                "android.widget.ImageView",
                rid="android:id/icon",
                bounds=(b[0] + 48, b[1] + 58, b[0] + 132, b[1] + 142),
            )
        )
        row.children.append(texts)
        if switch is not None:
            row.children.append(View("android.widget.Switch", rid="android:id/switch_widget", bounds=(b[2] - 220, b[1] + 60, b[2] - 48, b[3] - 60),
                                     checkable=True, checked=switch, focusable=True, enabled=enabled))  # fmt: skip
        return row

    return build


class SettingsHome(Activity):
    name = ".Settings"
    LIST: Bounds = (0, STATUS_BAR + 420, WIDTH, CONTENT[3])

    def __init__(self, app: SettingsApp):
        super().__init__(app)
        self.scroll: dict[str, int] = {}
        self.sapp = app

    def items(self) -> list[tuple[int, Callable[[Bounds], View]]]:
        return [
            (ROW_H, _row(self, p.title, self.sapp.summary(k), lambda k=k: self.host.start(SubSettings(self.sapp, k))))
            for k, p in PAGES.items()
        ]  # fmt: skip

    def content(self) -> View:
        items = self.items()
        total = sum(h for h, _ in items)
        top = STATUS_BAR
        search = View("android.widget.LinearLayout", rid=self.rid("search_action_bar"), desc="Search settings",
                      bounds=(48, top + 250, WIDTH - 48, top + 390), clickable=True, focusable=True,
                      on_click=lambda: self.host.start(SearchSettings(self.sapp)))  # fmt: skip
        search.children.append(
            text_view(
                "Search settings",
                (150, top + 290, 700, top + 350),
                self.rid("search_action_bar_title"),
            )
        )
        return View("android.widget.FrameLayout", bounds=CONTENT, children=[
            text_view("Settings", (60, top + 90, 600, top + 210), self.rid("homepage_title")),
            search,
            scroll_list(self.rid("recycler_view"), self.LIST, items, self.scroll.get("list", 0),
                        lambda dy: scroll_by(self.scroll, "list", dy, total, self.LIST)),
        ])  # fmt: skip


class SubSettings(Activity):
    name = ".SubSettings"
    LIST: Bounds = (0, STATUS_BAR + TOOLBAR_H, WIDTH, CONTENT[3])

    def __init__(self, app: SettingsApp, page: str):
        super().__init__(app)
        self.sapp, self.page, self.scroll = app, page, {}

    def flip(self, key: str) -> None:
        t = self.sapp.toggles
        t[key] = not t[key]

    def items(self) -> list[tuple[int, Callable[[Bounds], View]]]:
        t = self.sapp.toggles
        if self.page == "apps":
            return [
                (ROW_H, _row(self, a.label, f"{a.package} · version {a.version}", None))
                for a in self.host.installed()
            ]
        out = []
        for r in PAGES[self.page].rows:
            if isinstance(r, Toggle):
                enabled = not (t["airplane"] and r.key in RADIOS)
                summary = r.on_summary if t[r.key] else r.off_summary
                out.append(
                    (
                        ROW_H,
                        _row(
                            self, r.title, summary, lambda k=r.key: self.flip(k), t[r.key], enabled
                        ),
                    )
                )
            else:
                out.append((ROW_H, _row(self, r[0], r[1], None)))
        return out  # fmt: skip

    def content(self) -> View:
        items = self.items()
        total = sum(h for h, _ in items)
        return View("android.widget.FrameLayout", bounds=CONTENT, children=[
            toolbar(self, PAGES[self.page].title, up=lambda: self.host.finish(self)),
            scroll_list(self.rid("recycler_view"), self.LIST, items, self.scroll.get("list", 0),
                        lambda dy: scroll_by(self.scroll, "list", dy, total, self.LIST)),
        ])  # fmt: skip


class SearchSettings(Activity):
    """Typing filters every category and toggle by title; a result opens its page."""

    name = ".search.SearchActivity"
    LIST: Bounds = (0, STATUS_BAR + TOOLBAR_H + 40, WIDTH, CONTENT[3])

    def __init__(self, app: SettingsApp):
        super().__init__(app)
        self.sapp, self.query = app, ""
        self.focus = "query"

    def commit_text(self, text: str) -> None:
        if self.focus == "query":
            self.query += text

    def clear_text(self) -> None:
        if self.focus == "query":
            self.query = ""

    def key(self, name: str) -> None:
        if self.focus == "query" and name == "delete":
            self.query = self.query[:-1]

    def results(self) -> list[tuple[str, str]]:
        q = self.query.strip().lower()
        if not q:
            return []
        found = [(p.title, k) for k, p in PAGES.items() if q in p.title.lower()]
        for k, p in PAGES.items():
            found += [
                (r.title, k) for r in p.rows if isinstance(r, Toggle) and q in r.title.lower()
            ]
        return list(dict.fromkeys(found))

    def content(self) -> View:
        top = STATUS_BAR
        bar = View(
            "android.widget.LinearLayout",
            rid=self.rid("search_bar"),
            bounds=(0, top, WIDTH, top + TOOLBAR_H + 40),
        )
        bar.children = [
            View("android.widget.ImageButton", desc="Navigate up", bounds=(0, top + 20, 147, top + 167), clickable=True,
                 focusable=True, on_click=lambda: self.host.finish(self)),
            edit_text(self, "query", self.query, "Search settings", (160, top + 30, WIDTH - 40, top + 157), self.rid("search_src_text")),
        ]  # fmt: skip
        results = self.results()
        items = [
            (ROW_H, _row(self, title, PAGES[k].title, lambda k=k: self.host.start(SubSettings(self.sapp, k))))
            for title, k in results
        ]  # fmt: skip
        children = [bar, scroll_list(self.rid("results"), self.LIST, items, 0, lambda dy: None)]
        if self.query and not results:
            children.append(
                text_view(
                    f"No results for “{self.query}”",
                    (60, 700, WIDTH - 60, 780),
                    self.rid("no_results"),
                )
            )
        return View("android.widget.FrameLayout", bounds=CONTENT, children=children)
