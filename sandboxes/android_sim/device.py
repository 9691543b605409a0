"""One simulated device: window manager, input dispatch, processes, files, settings, faults.

Everything a shell command or a JSON-RPC call does goes through a `Device` under its
lock, so concurrent adb connections see one consistent, deterministic state.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .apps import (
    LAUNCHER,
    Activity,
    App,
    Launcher,
    alert_dialog,
    navigation_bar,
    status_bar,
    text_view,
)
from .notes_app import CalculatorApp, NotesApp
from .settings_app import MODEL, SettingsApp
from .ui import CONTENT, HEIGHT, STATUS_BAR, WIDTH, View, Window, dump_xml, hit

APPS: tuple[type[App], ...] = (Launcher, SettingsApp, NotesApp, CalculatorApp)
GBOARD = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"
ADB_KEYBOARD = "com.github.uiautomator/.AdbKeyboard"
U2_JAR = "/data/local/tmp/u2.jar"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
DIRS = ("/", "/data", "/data/local", "/data/local/tmp", "/sdcard", "/system", "/system/bin")
TAP_SLOP = 16
"""A swipe shorter than this many pixels is a tap, as Android's touch slop decides."""
LONG_PRESS_MS = 500


@dataclass
class DeviceConfig:
    """How a simulated device starts and which faults it injects."""

    ime_installed: bool = True
    """The uiautomator2 app (with its AdbKeyboard IME) is installed, as after `u2 init`."""
    u2_jar: bytes | None = None
    """Contents of /data/local/tmp/u2.jar at boot (None: the client pushes it)."""
    drop_after: int | None = None
    """Unplug the device on this JSON-RPC call (the call is never answered)."""
    offline_after: int | None = None
    """Turn the device `offline` on this JSON-RPC call."""


@dataclass
class Task:
    app: App
    stack: list[Activity] = field(default_factory=list)


@dataclass
class File:
    data: bytes
    mode: int
    mtime: int


class Device:
    def __init__(self, serial: str, config: DeviceConfig | None = None, transport_id: int = 1):
        self.serial = serial
        self.config = config or DeviceConfig()
        self.transport_id = transport_id
        self.lock = threading.RLock()
        self.state = "device"
        """`device`, `offline`, or `gone` (unplugged: no longer listed)."""
        self.on_state: Callable[[Device], None] | None = None
        self.apps: dict[str, App] = {cls.package: cls(self) for cls in APPS}
        self.home = self.apps[LAUNCHER].main()
        self.tasks: list[Task] = []
        self.front: Task | None = None
        self.overview = False
        self.system_dialog: Callable[[], Window] | None = None
        self.system_dialog_pkg: str | None = None
        self._dialog_back: Callable[[], None] = lambda: None
        self.keyboard = False
        self.clipboard = ""
        self.pids: dict[str, int] = {}
        self._next_pid = 4100
        self.files: dict[str, File] = {}
        self.settings = {"secure": {"default_input_method": GBOARD}, "system": {}, "global": {}}
        self.imes = [GBOARD] + ([ADB_KEYBOARD] if self.config.ime_installed else [])
        self.enabled_imes = [GBOARD]
        self.listeners: dict[int, Callable] = {}
        """Device TCP ports with a server (the uiautomator2 server) -> connection handler."""
        self.rpc_calls = 0
        self.boot_id = str(uuid.uuid4())
        """The kernel's boot id: a new random UUID each boot (a restarted simulator is a
        rebooted device), as `cat /proc/sys/kernel/random/boot_id` reads it."""
        if self.config.u2_jar is not None:
            self.write(U2_JAR, self.config.u2_jar, 0o100644)

    # -- faults ----------------------------------------------------------------------
    def count_rpc(self) -> bool:
        """Count one JSON-RPC call; False when a fault cuts the device off instead."""
        with self.lock:
            self.rpc_calls += 1
            n, c = self.rpc_calls, self.config
            if c.drop_after is not None and n >= c.drop_after:
                self.set_state("gone")
            elif c.offline_after is not None and n >= c.offline_after:
                self.set_state("offline")
            return self.state == "device"

    def set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            if self.on_state is not None:
                self.on_state(self)

    # -- files -----------------------------------------------------------------------
    def write(self, path: str, data: bytes, mode: int) -> None:
        self.files[path] = File(data, mode, int(time.time()))

    def stat(self, path: str) -> tuple[int, int, int] | None:
        """(mode, size, mtime) of a file or directory, None when absent."""
        path = path.rstrip("/") or "/"
        if path in DIRS:
            return (0o040771, 4096, 1700000000)
        f = self.files.get(path)
        return (f.mode, len(f.data), f.mtime) if f else None

    def listdir(self, path: str) -> list[str]:
        base = path.rstrip("/") + "/"
        names = {
            p[len(base) :].split("/")[0]
            for p in (*self.files, *DIRS)
            if p.startswith(base) and p != base
        }
        return sorted(n for n in names if n)

    # -- the Host protocol apps use ----------------------------------------------------
    def installed(self) -> list[App]:
        return list(self.apps.values())

    def _task(self, app: App) -> Task:
        for t in self.tasks:
            if t.app is app:
                return t
        t = Task(app)
        self.tasks.append(t)
        self.pids.setdefault(app.package, self._pid())
        return t

    def _pid(self) -> int:
        self._next_pid += 7
        return self._next_pid

    def _bring(self, task: Task) -> None:
        self.tasks.remove(task)
        self.tasks.append(task)
        self.front, self.overview = task, False
        self.keyboard = task.stack[-1].focus is not None

    def start(self, activity: Activity) -> None:
        task = self._task(activity.app)
        task.stack.append(activity)
        self._bring(task)

    def finish(self, activity: Activity) -> None:
        for t in list(self.tasks):
            if activity in t.stack:
                t.stack.remove(activity)
                if not t.stack:
                    self.tasks.remove(t)
                    if self.front is t:
                        self.front = None
                elif self.front is t:
                    self.keyboard = t.stack[-1].focus is not None
                    return
        self.keyboard = False

    def launch(self, package: str) -> str | None:
        """Bring the app's task to the front, or start it; an error message when impossible."""
        app = self.apps.get(package)
        if app is None or not app.launchable:
            return "** No activities found to run, monkey aborted."
        for t in self.tasks:
            if t.app is app:
                self._bring(t)
                return None
        self.start(app.main())
        return None

    def show_keyboard(self, shown: bool) -> None:
        self.keyboard = shown

    def force_stop(self, package: str) -> None:
        self.tasks = [t for t in self.tasks if t.app.package != package]
        if self.front is not None and self.front.app.package == package:
            self.front, self.keyboard = None, False
        self.pids.pop(package, None)
        if self.system_dialog_pkg == package:
            self.system_dialog = self.system_dialog_pkg = None

    def crash(self, app: App) -> None:
        self.force_stop(app.package)

        def info() -> None:
            self._dismiss()
            self.launch("com.android.settings")

        self._show_dialog(app.package, self._dismiss, lambda: alert_dialog(
            "android", f"{app.label} keeps stopping", "",
            [("App info", "android:id/aerr_app_info", info), ("Close app", "android:id/aerr_close", self._dismiss)],
            f"Application Error: {app.package}",
        ))  # fmt: skip

    def anr(self, app: App, on_wait: Callable[[], None]) -> None:
        def wait() -> None:
            self._dismiss()
            on_wait()

        def close() -> None:
            self.force_stop(app.package)
            self._dismiss()

        self._show_dialog(app.package, wait, lambda: alert_dialog(
            "android", f"{app.label} isn't responding", "",
            [("Close app", "android:id/aerr_close", close), ("Wait", "android:id/aerr_wait", wait)],
            f"Application Not Responding: {app.package}",
        ))  # fmt: skip

    def _show_dialog(
        self, package: str, on_back: Callable[[], None], build: Callable[[], Window]
    ) -> None:
        """A system dialog (crash, ANR) over everything; back runs `on_back`."""
        self.system_dialog, self.system_dialog_pkg, self.keyboard = build, package, False
        self._dialog_back = on_back

    def _dismiss(self) -> None:
        self.system_dialog = self.system_dialog_pkg = None

    # -- what is on screen -----------------------------------------------------------
    def activity(self) -> Activity:
        return self.front.stack[-1] if self.front is not None else self.home

    def windows(self) -> list[Window]:
        wins = [status_bar()]
        wins += [self._overview()] if self.overview else self.activity().windows()
        if self.system_dialog is not None:
            wins.append(self.system_dialog())
        wins.append(
            navigation_bar(
                lambda: self.key("back"), lambda: self.key("home"), lambda: self.key("recent")
            )
        )
        return wins

    def _overview(self) -> Window:
        root = View(
            "android.widget.FrameLayout", rid=f"{LAUNCHER}:id/overview_panel", bounds=CONTENT
        )
        for i, t in enumerate(reversed(self.tasks)):
            top = STATUS_BAR + 120 + i * 520
            card = View("android.widget.FrameLayout", rid=f"{LAUNCHER}:id/snapshot", desc=t.app.label,
                        bounds=(140, top, WIDTH - 140, top + 480), clickable=True, on_click=lambda t=t: self._bring(t))  # fmt: skip
            card.children.append(
                text_view(
                    t.app.label, (180, top + 20, WIDTH - 180, top + 90), f"{LAUNCHER}:id/title"
                )
            )
            root.children.append(card)
        if self.tasks:
            root.children.append(text_view("Clear all", (400, 2100, 680, 2200), f"{LAUNCHER}:id/clear_all",
                                           clickable=True, on_click=self._clear_all))  # fmt: skip
        else:
            root.children.append(
                text_view("No recent items", (300, 1100, 780, 1180), f"{LAUNCHER}:id/empty")
            )
        return Window(LAUNCHER, self.home.title(), root)

    def _clear_all(self) -> None:
        for t in list(self.tasks):
            self.force_stop(t.app.package)
        self.overview = False

    def dump(self, compressed: bool = False, max_depth: int = 50) -> str:
        return dump_xml(self.windows(), compressed, max_depth)

    def focus(self) -> tuple[str, str]:
        """(mCurrentFocus title, mFocusedApp `pkg/.Activity`) as `dumpsys window` shows them."""
        act = self.home if self.overview else self.activity()
        pkg, cls = act.title().split("/", 1)
        short = cls[len(pkg) :] if cls.startswith(pkg + ".") else cls
        app = f"{pkg}/{short}"
        if self.system_dialog is not None:
            return self.system_dialog().title, app
        return act.title(), app

    # -- input -----------------------------------------------------------------------
    def _touch_order(self) -> list[Window]:
        wins = self.windows()
        bars, rest = wins[:1] + wins[-1:], wins[1:-1]
        return [*bars, *reversed(rest)]

    def _dispatch(
        self, x: int, y: int, want: Callable[[View], bool]
    ) -> tuple[Window, View | None] | None:
        for w in self._touch_order():
            if w.root.contains(x, y):
                return w, hit(w.root, x, y, want)
            if w.modal:
                if w.on_outside is not None:
                    w.on_outside()
                return None
        return None

    def tap(self, x: int, y: int) -> None:
        found = self._dispatch(x, y, lambda v: v.clickable)
        if found and found[1] is not None and found[1].on_click is not None:
            found[1].on_click()

    def long_press(self, x: int, y: int) -> None:
        found = self._dispatch(x, y, lambda v: v.long_clickable or v.clickable)
        if not found or found[1] is None:
            return
        v = found[1]
        if v.long_clickable and v.on_long_click is not None:
            v.on_long_click()
        elif v.on_click is not None:  # not consumed: the release clicks, as View.onTouchEvent does
            v.on_click()

    def swipe(self, fx: int, fy: int, tx: int, ty: int, duration_ms: int = 0) -> None:
        if abs(tx - fx) < TAP_SLOP and abs(ty - fy) < TAP_SLOP:
            (self.long_press if duration_ms >= LONG_PRESS_MS else self.tap)(fx, fy)
            return
        found = self._dispatch(fx, fy, lambda v: v.scrollable)
        if (
            found
            and found[1] is not None
            and found[1].on_scroll is not None
            and abs(ty - fy) >= abs(tx - fx)
        ):
            found[1].on_scroll(fy - ty)

    def key(self, name: str) -> None:
        """A key by uiautomator2's name: back, home, recent, enter, delete, ..."""
        name = {"del": "delete", "app_switch": "recent", "recents": "recent"}.get(name, name)
        if name == "back":
            self.back()
        elif name == "home":
            self.front, self.overview, self.keyboard = None, False, False
        elif name == "recent":
            if self.overview:
                self.overview = False
            else:
                self.overview, self.keyboard = True, False
        elif name in ("enter", "delete") and not self.overview:
            self.activity().key(name)

    def back(self) -> None:
        if self.system_dialog is not None:
            self._dialog_back()
            return
        if self.keyboard:
            self.keyboard = False
            return
        if self.overview:
            self.overview = False
            return
        if self.front is None:
            return
        act = self.activity()
        if act.back():
            return
        if len(self.front.stack) == 1:  # Android 12+: back on a root activity moves the task back
            self.front, self.keyboard = None, False
        else:
            self.finish(act)

    def commit_text(self, text: str) -> None:
        if not self.overview and self.system_dialog is None:
            self.activity().commit_text(text)

    def clear_text(self) -> None:
        if not self.overview and self.system_dialog is None:
            self.activity().clear_text()

    def info(self) -> dict:
        """uiautomator2's `deviceInfo`."""
        pkg = self.focus()[1].split("/")[0]
        return {
            "currentPackageName": pkg, "displayHeight": HEIGHT, "displayRotation": 0,
            "displaySizeDpX": 411, "displaySizeDpY": 914, "displayWidth": WIDTH,
            "productName": "wtsim", "screenOn": True, "sdkInt": 34, "naturalOrientation": True,
        }  # fmt: skip

    def props(self) -> dict[str, str]:
        return {
            "ro.serialno": self.serial, "ro.build.version.sdk": "34", "ro.build.version.release": "14",
            "ro.product.brand": "worldtrace", "ro.product.manufacturer": "worldtrace",
            "ro.product.model": MODEL, "ro.product.name": "wtsim", "ro.product.device": "wtsim",
            "ro.product.cpu.abi": "x86_64", "ro.build.id": "WTSIM.240101.001",
            "ro.build.fingerprint": "worldtrace/wtsim/wtsim:14/WTSIM.240101.001/1:user/release-keys",
            "sys.boot_completed": "1", "ro.sf.lcd_density": "420",
        }  # fmt: skip
