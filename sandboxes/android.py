"""Android domain: a device (or the simulator) driven with uiautomator2 through an adb server.

The observation is the view hierarchy the uiautomator2 server dumps, compacted to informative
nodes with episode-stable ids (`android_view`), under a header with the app state
(package, activity, keyboard); `state_json` holds that state. Actions are tool calls:
`tap`, `long_press`, `swipe`, `type`, `press`, `launch`, `wait`. A reset force-stops and
relaunches the task's app (optionally clearing its data), or goes home. `type` sends the
AdbKeyboard broadcasts itself: uiautomator2's `send_keys` closes the keyboard after the
text and leaves the device on its IME; the device's own is put back at `close()`.

Errors have owners. A crash or ANR dialog, or a device adb reports `offline`, is what
the environment shows: an observation with `env_failure` (`app_crashed`, `anr`,
`device_offline`), so GUI filters can drop the trajectory; the step after such a turn
fails the attempt (no refusal answers from the last live screen). A device that disappears
from the adb server, a server that stops answering, or a device that restarted under
the episode (its boot id, read with every step's app state, changed) is infrastructure:
the step raises and the attempt fails with that reason. After every action the
hierarchy is dumped until `stable_dumps` consecutive dumps agree (animations settle); a
dump without a window is no screen: read again, and one that stays empty, like one that
is no XML, fails the attempt. A turn whose screen, app state and keyboard are unchanged
is marked `changed = False`.

One episode at a time on a device: from its first reset until `close()` a sandbox holds
an exclusive lock on its device (adb server host:port and serial; `android_device.
hold_device`), across the threads and processes of this host. Another sandbox's reset
waits for it up to `lock_timeout` (the wait is in `describe()["config"]["device_wait_s"]`),
then fails the attempt naming the holder's pid; a collector stopping meanwhile ends the wait
(StopRequested: the episode goes back to the queue).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import difflib
import json
import logging
import re
import threading
import time
import weakref
import xml.etree.ElementTree as ET
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass
from worldtrace.schemas.validate import LONE_SURROGATE

from .android_actions import ACTION_SPACE, TOOLS, check_activity, check_address, check_package
from .android_view import (
    BOOT_ID,
    STATE_COMMAND,
    AppState,
    Node,
    NodeIds,
    app_state,
    env_failure,
    nodes,
    read_dump,
    render,
)
from .base import (
    SandboxConfigError,
    SandboxError,
    TaskSpec,
    ToolSpec,
    Unpicklable,
    integral_ints,
)


@configclass
class AndroidConfig:
    """A device reached through an adb server."""

    adb: Annotated[str, AfterValidator(check_address)] = "127.0.0.1:5037"
    """The adb server, host:port (`worldtrace android-sim` serves one on 127.0.0.1:15037)."""
    serial: str | None = None
    """The device's serial; unset takes the only online device."""
    u2_port: Annotated[int, Field(ge=1, le=65535)] = 9008
    """Device port of the uiautomator2 server."""
    timeout: Annotated[float, Field(gt=0, le=600)] = 30.0
    """Seconds any one device call may stay silent before the attempt fails."""
    lock_timeout: Annotated[float, Field(ge=0, le=86_400)] = 600.0
    """Seconds a reset waits while another episode (a thread or a process of this host)
    holds the device; then the attempt fails saying so (0: fail at once)."""
    launch_timeout: Annotated[float, Field(gt=0, le=600)] = 15.0
    """Seconds a reset waits for the task's app to come to the front."""
    settle_timeout: Annotated[float, Field(ge=0, le=60)] = 3.0
    """Seconds a step keeps re-dumping while the screen still changes."""
    stable_dumps: Annotated[int, Field(ge=1, le=10)] = 2
    """Consecutive identical dumps that mean the screen has settled (1: the first dump)."""
    max_depth: Annotated[int, Field(ge=1, le=500)] = 50
    """Deepest hierarchy level dumped."""
    max_chars: Annotated[int, Field(ge=500)] = 30_000
    """Cap of the observation's node lines; further nodes are counted, not shown, and the
    turn is truncated. The header (app, keyboard), a failed launch's first line and the
    `... (N more nodes)` line come on top (at most a few hundred characters)."""
    hide_packages: tuple[str, ...] = (
        "com.android.systemui",
        "com.google.android.inputmethod.latin",
    )
    """Windows left out of observations: status and navigation bars (a ticking clock) and
    the on-screen keyboard (the header says whether it is shown; `type` types)."""


def _needs_app(value: Any, info: ValidationInfo) -> Any:
    """`activity` and `clear_data` are about the task's app: without one the reset went
    home and left them unsaid, and the episode was recorded as a success all the same."""
    if value and "app" in info.data and info.data["app"] is None:  # (an app refused: said)
        what = "it starts app/activity" if info.field_name == "activity" else "it clears its data"
        raise ValueError(
            f"needs the task's app ({what}); without one the episode starts from the home "
            f"screen: set app:, or leave {info.field_name} out"
        )
    return value


Activity = Annotated[str | None, AfterValidator(check_activity), AfterValidator(_needs_app)]


@configclass
class AndroidTask:
    """What a task adds for Android (recorded in `environment.config`: a replay restores it)."""

    app: Annotated[str | None, AfterValidator(check_package)] = None
    """Package force-stopped and launched at reset; unset starts from the home screen."""
    activity: Activity = None
    """Activity to start (`am start -n app/activity`) instead of the app's launcher entry."""
    clear_data: Annotated[bool, AfterValidator(_needs_app)] = False
    """Clear the app's data first (`pm clear`): every episode starts from a fresh install."""


def observation(text: str, state: dict[str, Any], *, changed: bool | None, env_failure: str | None,
                is_error: bool = False, truncated: bool = False) -> Observation:  # fmt: skip
    """An Observation with the GUI flags the pipeline's filters read."""
    return Observation(
        text,
        is_error=is_error,
        truncated=truncated,
        state_json=json.dumps(state, sort_keys=True),
        changed=changed,
        env_failure=env_failure,
    )


_HOLDERS: dict[str, tuple[int, weakref.ref[AndroidSandbox]]] = {}
"""Device key -> the thread and sandbox of this process holding it. A thread runs one
episode at a time, so a sandbox of the thread that holds the device is idle: a reset in
that thread (a worker slot keeps a sandbox per job) closes it instead of waiting for it."""
_HOLDERS_LOCK = threading.Lock()


LAUNCH_MISTAKES = (
    "does not exist",  # am start: Error: Activity class {app/.Nope} does not exist.
    "No activities found to run",  # monkey: the app has no launcher entry
    "unable to resolve Intent",  # am start: nothing answers that component
)
"""What `am start` / `monkey` say when the job names what the device cannot launch."""


ADB_KEYBOARD = "com.github.uiautomator/.AdbKeyboard"
"""uiautomator2's input method (its app-uiautomator.apk): types what `am broadcast` sends it."""
OUR_PACKAGES = ("com.github.uiautomator", "com.github.uiautomator.test")
"""uiautomator2's own apps (its keyboard; the older instrumentation apk): the collector's
helpers, not the task's environment, so the initial state does not list them."""
IME_BIND_TIMEOUT = 5.0
"""Seconds a keyboard broadcast nobody received is sent again: after `ime set` the
system binds the new input method, which registers its receiver, a moment later."""
TYPE_CHUNK_BYTES = 2_880
"""UTF-8 bytes of text one AdbKeyboard broadcast carries: their base64 (3,840 characters)
and the `am broadcast` command fit in 4,096 bytes, the longest adb service request a
device before Android 7 takes (adb's MAX_PAYLOAD_V1); the adb server reads a request's
length as 4 hex digits (at most 65,535 bytes). A longer text goes in several broadcasts:
AdbKeyboard commits each at the cursor, so they add up to the text."""
IME_MARK = "worldtrace_ime_before"
"""A global setting a sandbox writes on the device when it first switches to AdbKeyboard:
the device's input method and whether AdbKeyboard was enabled (`ID|0`), removed when
they are put back; a reset that finds it after a collector died restores from it."""
EMPTY_DUMP_PAUSE = 0.1
"""Seconds between dumps while the hierarchy comes back without a window."""
EMPTY_DUMP_WAIT = 2.0
"""Seconds a hierarchy without a window is read again at least, whatever `settle_timeout`
(0 allowed): one between two activities is no failure (uiautomator2's own dump retried
for about as long)."""
BROADCAST_RESULT = re.compile(r'result=(-?\d+)(?:, data="(.*)")?', re.S)
"""`am broadcast`'s last line: `Broadcast completed: result=-1, data="success"`."""

log = logging.getLogger(__name__)


class DeviceOffline(Exception):
    """adb lists the device as offline (an environment failure, recorded as such)."""


class AndroidSandbox(Unpicklable):
    kind = "android"
    domain = "android"
    config_class = AndroidConfig
    task_class = AndroidTask
    action_kinds = ("tool_call",)
    explorer = "worldtrace.sandboxes.android_explorer:AndroidExplorer"
    close_between_episodes = True
    """It holds its device until `close()` (and a reset after close reconnects): the
    episode loop (`collectors.episode.attempt_episode`) closes it after every attempt, so
    that another runner's episode waiting for the device gets it."""

    @classmethod
    def static_action_space(cls, config: AndroidConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    def __init__(self, config: AndroidConfig | None = None):
        self.config = config or AndroidConfig()
        self._conn = None
        self._lock = None  # android_device.DeviceLock, from the first reset until close
        self._waited = 0.0
        self._ids = NodeIds()
        self._nodes: dict[int, Node] = {}
        self._state = AppState(None, None, False)
        self._boot: str | None = None
        """The device's boot id read first this episode ("" unreadable; None: not yet)."""
        self._started = False
        """The episode's reset is done: a device lost now is lost mid-episode."""
        self._steps = 0
        """Steps of this episode so far (the offline step is named in the failure after it)."""
        self._offline: int | None = None
        """The step at which the device went offline this episode (None: it did not)."""
        self._last: str | None = None
        self._initial = ""
        self._ime_before: tuple[str, bool] | None = None
        """The device's input method, and whether AdbKeyboard was enabled, before a `type`
        first switched to AdbKeyboard (None: not switched); put back by `_restore_ime`."""
        self._has_keyboard: bool | None = None
        """AdbKeyboard is installed on the connected device (None: not asked yet)."""
        self._task = AndroidTask()
        """The episode's task keys (app, activity, clear_data): `describe()` records them."""

    # -- device calls ------------------------------------------------------------------
    @property
    def _d(self):
        if self._conn is None:
            raise SandboxError("no device: reset first")
        return self._conn.device

    def _call(self, what: str, fn, *args: Any, **kw: Any) -> Any:
        """A device call; its failure is classified by asking the adb server about the device."""
        try:
            return fn(*args, **kw)
        except Exception as exc:
            raise self._failure(what, exc) from exc

    def _failure(self, what: str, exc: Exception) -> Exception:
        reason = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        state = self._listed(what, reason)
        if isinstance(state, Exception):
            return state
        if state == "offline":
            return DeviceOffline(f"device {self._conn.serial} offline")
        return SandboxError(f"{what} failed on {self._conn.serial} ({state}): {reason}")

    def _listed(self, what: str, reason: str) -> str | Exception:
        """The device's state as the adb server lists it (`device`, `offline`, ...), or
        the failure when the server stopped answering or no longer lists the device
        (then the connection is dropped: the next reset reconnects)."""
        from .android_device import adbutils, device_states

        conn, self._conn = self._conn, None
        assert conn is not None
        try:
            states = device_states(conn.client)
        except (adbutils.AdbError, OSError) as lost:
            return SandboxError(
                f"{what}: the adb server at {conn.client.address} stopped answering ({lost}) after {reason}"
            )
        state = states.get(conn.serial)
        if state is None:
            when = "mid-episode" if self._started else "at reset"
            return SandboxError(
                f"{what}: device {conn.serial} disappeared from the adb server at {conn.client.address} {when} ({reason})"
            )
        self._conn = conn  # still attached
        return state

    def _shell(self, what: str, cmd: list[str] | str) -> tuple[str, int]:
        r = self._call(what, self._d.shell, cmd, timeout=self.config.timeout)
        return r.output, r.exit_code

    def _app_state(self) -> AppState:
        """The app state, read with the boot id in the same round trip: a device that
        rebooted (or a simulator restarted) answers calls as a fresh device, and
        uiautomator2 restarts its server there without a word, so only the boot id
        tells that the screen is no longer this episode's."""
        state = app_state(self._shell("window state", STATE_COMMAND)[0])
        boot = state.boot or ""
        if self._boot is None:
            self._boot = boot
        elif boot != self._boot:
            raise SandboxError(
                f"the device {self._conn.serial} restarted under the episode (boot id "
                f"{self._boot or 'unreadable'} -> {boot or 'unreadable'}, {BOOT_ID}): its "
                "screen is a fresh boot's, not this episode's"
            )
        return state

    # -- lifecycle -----------------------------------------------------------------------
    accepts_stop = True  # its reset may wait for the device (`reset_sandbox`)

    def reset(self, task: TaskSpec, stop: threading.Event | None = None) -> Observation:
        params = task.params if isinstance(task.params, AndroidTask) else AndroidTask()
        self._task, self._waited = params, 0.0  # recorded even when the reset fails
        self._started, self._steps, self._offline = False, 0, None
        if (params.activity or params.clear_data) and not params.app:  # a job file: refused
            raise SandboxConfigError(  # when read; a TaskSpec built in Python: here
                "the task's activity or clear_data needs its app (without one the episode "
                "would start from the home screen)"
            )
        if self._conn is None:
            from .android_device import client, connect, pick_serial

            c = self.config
            adb = client(c.adb, c.timeout)
            serial = pick_serial(adb, c.serial)
            self._hold(adb.address, serial, stop)
            self._conn, self._has_keyboard = connect(adb, serial, c.u2_port), None
        self._ids, self._last, self._nodes, self._boot = NodeIds(), None, {}, None
        try:
            self._restore_ime()  # an episode before, on this device without a close
            self._reclaim_ime()  # an episode before, of a collector that died
            self._recover()
            if params.app:
                self._start(params)
            else:
                self._call("press home", self._d.press, "home")
            obs = self._observe()
        except DeviceOffline as exc:
            self._conn = None
            raise SandboxError(f"cannot start the episode: {exc}") from exc
        f = self._conn.facts
        apps, _ = self._shell("list packages", ["pm", "list", "packages", "-3"])
        listed = {p.removeprefix("package:") for p in apps.split()}
        third = ", ".join(sorted(listed - set(OUR_PACKAGES)))
        self._initial = (
            f"Device: {f['model']}, Android {f['android']} (SDK {f['sdk']}), screen {f['screen'][0]}x{f['screen'][1]}\n"
            f"Installed apps (third-party): {third or 'none'}\n\n{obs.text}"
        )
        self._started = True
        return obs

    def _hold(self, address: str, serial: str, stop: threading.Event | None = None) -> None:
        """The device to ourselves before anything touches it (kept until `close`)."""
        from .android_device import device_key, hold_device

        key = device_key(address, serial)
        if self._lock is not None and self._lock.key == key:
            return
        self._release()  # the only online device changed since the last reset
        with _HOLDERS_LOCK:
            thread, ref = _HOLDERS.get(key, (None, None))
        other = ref() if ref is not None else None
        if thread == threading.get_ident() and other is not None and other is not self:
            other.close()  # ours, and idle: this thread is starting another episode
        self._lock = hold_device(address, serial, self.config.lock_timeout, stop)
        self._waited = self._lock.waited
        with _HOLDERS_LOCK:
            _HOLDERS[key] = (threading.get_ident(), weakref.ref(self))

    def _release(self) -> None:
        self._ime_before = None  # the device is another episode's now: hands off its IME
        lock, self._lock = self._lock, None
        if lock is not None:
            with _HOLDERS_LOCK:
                held = _HOLDERS.get(lock.key)
                if held is not None and held[1]() is self:
                    del _HOLDERS[lock.key]
            lock.release()

    def _recover(self) -> None:
        """Dismiss crash/ANR dialogs an earlier episode left on screen (back closes them)."""
        for _ in range(3):
            state = self._app_state()
            if env_failure(state, []) is None:
                return
            self._call("press back", self._d.press, "back")

    def _start(self, p: AndroidTask) -> None:
        app, d = p.app, self._d
        self._call("force-stop", d.app_stop, app)
        if p.clear_data:
            self._call("clear data", d.app_clear, app)
        if p.activity:
            out, code = self._shell("am start", ["am", "start", "-n", f"{app}/{p.activity}"])
        else:
            out, code = self._shell(
                "monkey", ["monkey", "-p", app, "-c", "android.intent.category.LAUNCHER", "1"]
            )
        if code != 0 or "Error" in out or "aborted" in out:
            last = out.strip().splitlines()[-1] if out.strip() else f"exit {code}"
            why = f"cannot launch {app} on {self._conn.serial}: {last}"
            if any(m in out for m in LAUNCH_MISTAKES):
                # the job names an app the device lacks, or an activity (or launcher entry)
                # the app lacks: every attempt would fail alike
                raise SandboxConfigError(why + self._missing(app))
            raise SandboxError(why)
        deadline = time.monotonic() + self.config.launch_timeout
        while True:
            state = self._app_state()
            if state.package == app or env_failure(state, []):
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"{app} did not come to the front within {self.config.launch_timeout:g} s (front: {state.package})"
                )
            time.sleep(0.2)  # a real device's activity start takes a few hundred ms

    def _missing(self, app: str) -> str:
        """What to tell a job whose app would not launch: ` (not installed; did you mean
        ...?)` when the device lacks it, else nothing."""
        out, _ = self._shell("pm path", ["pm", "path", app])
        if "package:" in out or out.strip():  # installed, or no answer about it
            return ""
        listed, _ = self._shell("list packages", ["pm", "list", "packages"])
        installed = [p.removeprefix("package:") for p in listed.split()]
        close = difflib.get_close_matches(app, installed, n=3, cutoff=0.8)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f" ({app} is not installed{hint})"

    def close(self) -> None:
        conn = self._conn
        if conn is not None:
            try:
                self._restore_ime()
            except Exception as exc:  # the device is gone: its input method went with it
                log.warning("could not restore the input method on %s: %s", conn.serial, exc)
        self._conn = None
        if conn is not None:
            atexit.unregister(
                conn.device.stop_uiautomator
            )  # uiautomator2 registers one per connect
            with contextlib.suppress(Exception):  # the device may be gone: nothing left to free
                conn.device.stop_uiautomator(wait=False)
        self._release()  # after our last device call: the next episode has it to itself

    # -- observing -----------------------------------------------------------------------
    def _dump(self) -> tuple[str, ET.Element | None]:
        """The server's dump and its root (None: no window). Asked directly, not through
        `Device.dump_hierarchy`, which answers an empty dump with a blank hierarchy of its
        own after 2 s of retries; a dump that is no XML fails like any device call."""

        def dump() -> tuple[str, ET.Element | None]:
            xml = self._d.jsonrpc.dumpWindowHierarchy(False, self.config.max_depth)
            return xml, read_dump(xml)

        return self._call("dump hierarchy", dump)

    def _settled(self) -> ET.Element:
        """Dump until `stable_dumps` consecutive dumps agree, or `settle_timeout` passes.
        A dump without a window (between two activities) is no screen: it is read again,
        and if none has one by then (`EMPTY_DUMP_WAIT` at least) the attempt fails."""
        c = self.config
        began = time.monotonic()
        deadline = began + c.settle_timeout
        last, root, same = None, None, 0
        while True:
            xml, cur = self._dump()
            if cur is not None:
                same = same + 1 if xml == last else 1
                last, root = xml, cur
            now = time.monotonic()
            if root is not None and (same >= c.stable_dumps or now >= deadline):
                break
            if root is None:
                if now >= max(deadline, began + EMPTY_DUMP_WAIT):
                    raise SandboxError(
                        f"dump hierarchy: the view hierarchy of device {self._conn.serial} came "
                        f"back empty (no window) for {now - began:.1f} s: no screen to observe"
                    )
                time.sleep(EMPTY_DUMP_PAUSE)  # the next window is being drawn
        return root

    def _observe(self, prefix: str = "", is_error: bool = False) -> Observation:
        root = self._settled()
        self._state = self._app_state()
        found = nodes(root, self._ids, self.config.hide_packages)
        body, truncated = render(found, self.config.max_chars)
        screen = f"{self._state.header()}\n{body}"
        # the screen (header, hierarchy), not an error said before it: a failed launch
        # leaves the screen as it was
        changed = None if self._last is None else screen != self._last
        self._last, self._nodes = screen, {n.id: n for n in found}
        text = f"{prefix}{screen}"
        failure = env_failure(self._state, found)
        return observation(text, self._state.to_dict(), changed=changed, env_failure=failure,
                           is_error=is_error, truncated=truncated)  # fmt: skip

    def _answer(self, message: str) -> Observation:
        """The environment refusing an action (unknown node, bad arguments): nothing moved.
        Asked of a device the adb server still lists as attached: the refusal shows the
        last screen's state, which an offline device no longer vouches for."""
        state = self._listed("refuse the action", f"refusing it: {message}")
        if isinstance(state, Exception):
            raise state
        if state == "offline":
            raise DeviceOffline(f"device {self._conn.serial} offline")
        if state != "device":
            raise SandboxError(f"refuse the action: device {self._conn.serial} is {state}")
        return observation(
            f"error: {message}",
            self._state.to_dict(),
            changed=False,
            env_failure=None,
            is_error=True,
        )

    # -- acting --------------------------------------------------------------------------
    def step(self, action: Action) -> Observation:
        if self._conn is None:
            raise SandboxError("step before reset (or after the device was lost)")
        self._steps += 1
        if self._offline is not None:
            # the device_offline turn ended what it can show: a refusal would answer from
            # its last screen and an action would land on a screen nobody observed since
            raise SandboxError(
                f"device {self._conn.serial} went offline at step {self._offline} of this "
                "episode (the adb server listed it offline): no screen to go on from"
            )
        try:
            return self._act(action)
        except DeviceOffline:
            self._offline = self._steps
            state = {
                "package": None,
                "activity": None,
                "keyboard": False,
                "window": None,
                "device": "offline",
            }
            return observation(
                "error: device offline",
                state,
                changed=None,
                env_failure="device_offline",
                is_error=True,
            )

    def _act(self, action: Action) -> Observation:
        tool = TOOLS.get(action.name or "")
        if action.kind != "tool_call" or tool is None:
            return self._answer(
                f"unknown action {action.name or action.text!r} (tools: {', '.join(TOOLS)})"
            )
        try:
            args = json.loads(action.arguments_json or "{}")
        except json.JSONDecodeError as exc:
            return self._answer(f"arguments are not JSON: {exc}")
        args = integral_ints(tool.input_schema, args)  # `node: 3.0` is 3
        problem = tool.check(args)
        if problem:
            return self._answer(problem)
        return getattr(self, f"_do_{tool.name}")(args)

    def _point(self, args: dict[str, Any]) -> tuple[int, int] | str:
        if "node" in args:
            if "x" in args:
                return "give a node or x and y, not both"
            n = self._nodes.get(args["node"])
            if n is None:
                return f"no node {args['node']} on the screen"
            return n.center
        w, h = self._conn.facts["screen"]
        if not (args["x"] < w and args["y"] < h):
            return f"({args['x']}, {args['y']}) is outside the {w}x{h} screen"
        return args["x"], args["y"]

    def _do_tap(self, args: dict[str, Any]) -> Observation:
        p = self._point(args)
        if isinstance(p, str):
            return self._answer(p)
        self._call("tap", self._d.click, *p)
        return self._observe()

    def _do_long_press(self, args: dict[str, Any]) -> Observation:
        p = self._point(args)
        if isinstance(p, str):
            return self._answer(p)
        self._call("long press", self._d.long_click, *p, float(args.get("duration", 1.0)))
        return self._observe()

    def _do_swipe(self, args: dict[str, Any]) -> Observation:
        if "node" in args:
            n = self._nodes.get(args["node"])
            if n is None:
                return self._answer(f"no node {args['node']} on the screen")
            left, top, right, bottom = n.bounds
        else:
            w, h = self._conn.facts["screen"]
            left, top, right, bottom = 0, int(h * 0.15), w, int(h * 0.85)
        cx, cy = (left + right) // 2, (top + bottom) // 2
        dx, dy = int((right - left) * 0.35), int((bottom - top) * 0.35)
        vec = {"up": (0, -dy), "down": (0, dy), "left": (-dx, 0), "right": (dx, 0)}[
            args["direction"]
        ]
        self._call("swipe", self._d.swipe, cx - vec[0], cy - vec[1], cx + vec[0], cy + vec[1])
        return self._observe()

    def _do_type(self, args: dict[str, Any]) -> Observation:
        text, clear = args["text"], bool(args.get("clear"))
        half = LONE_SURROGATE.search(text)
        if half:  # no keyboard can type it: the IME's base64 and the clipboard want UTF-8
            return self._answer(
                f"text is not valid Unicode: a lone surrogate \\u{ord(half.group()):04x} at "
                f"position {half.start()} (half of an emoji's UTF-16 pair)"
            )
        if not self._use_keyboard():
            self._paste(text, clear)
            return self._observe()
        # uiautomator2's send_keys, without the ADB_KEYBOARD_HIDE it sends after the text:
        # the turn shows what typing leaves on screen, the keyboard still up
        sends = [("ADB_KEYBOARD_CLEAR_TEXT", {})] if clear else []
        sends += [("ADB_KEYBOARD_INPUT_TEXT", {"text": b64}) for b64 in _pieces(text)]
        for action, extras in sends:
            said = self._keyboard(action, extras)
            if said is not None:  # the keyboard answered: the environment's word
                return self._observe(
                    prefix=f"type failed: AdbKeyboard answered {said!r}\n", is_error=True
                )
        return self._observe()

    def _use_keyboard(self) -> bool:
        """Make AdbKeyboard the input method (False: it is not installed), remembering the
        device's own before the first switch: `_restore_ime` puts it back."""
        out, _ = self._shell("input method", ["settings", "get", "secure", "default_input_method"])
        now = out.strip()
        if now == ADB_KEYBOARD:
            return True
        if self._has_keyboard is None:
            listed = self._shell("input methods", ["ime", "list", "-s", "-a"])[0].split()
            self._has_keyboard = ADB_KEYBOARD in listed
        if not self._has_keyboard:
            return False
        if self._ime_before is None:
            enabled = self._shell("input methods", ["ime", "list", "-s"])[0].split()
            self._ime_before = (now, ADB_KEYBOARD in enabled)
            mark = f"{now or 'null'}|{int(ADB_KEYBOARD in enabled)}"  # for `_reclaim_ime`
            self._shell("mark input method", ["settings", "put", "global", IME_MARK, mark])
        for verb in ("enable", "set"):
            out, code = self._shell("switch input method", ["ime", verb, ADB_KEYBOARD])
            if code != 0:
                raise SandboxError(
                    f"`ime {verb} {ADB_KEYBOARD}` failed on {self._conn.serial}: {out.strip()[:300]}"
                )
        return True

    def _reclaim_ime(self) -> None:
        """Give the device its own input method back when an episode of a collector that
        died (killed with -9 before `close()`) left AdbKeyboard on: the first switch
        wrote what the device had in a global setting of ours (`IME_MARK`), which a
        restore removes. AdbKeyboard on without the mark is the owner's choice (or an
        older version's leftover): left as it is."""
        mark = self._shell("input method mark", ["settings", "get", "global", IME_MARK])[0].strip()
        ime, _, enabled = mark.partition("|")
        if mark in ("", "null") or enabled not in ("0", "1"):
            return
        self._ime_before = (ime, enabled == "1")
        self._restore_ime()

    def _keyboard(self, action: str, extras: dict[str, str]) -> str | None:
        """Broadcast an AdbKeyboard action: None when it took it, else what it answered
        (`error:...`). A broadcast nobody received (the keyboard not bound yet after the
        switch) is sent again for IME_BIND_TIMEOUT s, then fails the attempt."""
        cmd = ["am", "broadcast", "-a", action]
        for k, v in extras.items():
            cmd += ["--es", k, v]
        deadline = time.monotonic() + IME_BIND_TIMEOUT
        while True:
            out, _ = self._shell("type", cmd)
            m = BROADCAST_RESULT.search(out)
            if m is None:
                raise SandboxError(
                    f"type: `am broadcast -a {action}` on {self._conn.serial} gave no result: {out.strip()[:300]}"
                )
            if m.group(1) == "-1":  # Activity.RESULT_OK
                return None
            if m.group(2):
                return m.group(2)
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"type: no AdbKeyboard received {action} on {self._conn.serial} within "
                    f"{IME_BIND_TIMEOUT:g} s of switching to it (broadcast result={m.group(1)})"
                )
            time.sleep(0.1)  # the system binds the input method it switched to

    def _paste(self, text: str, clear: bool) -> None:
        """Type without AdbKeyboard, as uiautomator2 does: its server clears the focused
        field and pastes the text from the clipboard (JSON-RPC); no input method changes."""
        d = self._d
        if clear:
            self._call("clear", d.jsonrpc.clearInputText)
        if not text:
            return
        self._call("type", d.set_clipboard, text)
        if self._call("type", d.jsonrpc.getClipboard) != text:
            raise SandboxError(f"type: the clipboard of {self._conn.serial} did not take the text")
        self._call("type", d.jsonrpc.pasteClipboard)

    def _restore_ime(self) -> None:
        """Put the device's input method back if a `type` switched to AdbKeyboard (and
        disable AdbKeyboard again if it was): the device leaves as it came."""
        before, self._ime_before = self._ime_before, None
        if before is None:
            return
        ime, enabled = before
        undo = [] if ime in ("", "null") else [["ime", "set", ime]]  # "null": it had none
        undo += [] if enabled else [["ime", "disable", ADB_KEYBOARD]]
        undo += [["settings", "delete", "global", IME_MARK]]
        for cmd in undo:
            out, code = self._shell("restore input method", cmd)
            if code != 0:
                log.warning("`%s` failed on %s: %s", " ".join(cmd), self._conn.serial, out.strip())

    def _do_press(self, args: dict[str, Any]) -> Observation:
        self._call("press", self._d.press, args["key"])
        return self._observe()

    def _do_launch(self, args: dict[str, Any]) -> Observation:
        out, code = self._shell(
            "launch",
            ["monkey", "-p", args["package"], "-c", "android.intent.category.LAUNCHER", "1"],
        )
        if code != 0 or "aborted" in out:
            last = out.strip().splitlines()[-1] if out.strip() else f"exit {code}"
            return self._observe(prefix=f"launch {args['package']} failed: {last}\n", is_error=True)
        return self._observe()

    def _do_wait(self, args: dict[str, Any]) -> Observation:
        time.sleep(float(args["seconds"]))  # the action itself: the agent waits for the app
        return self._observe()

    def describe(self) -> dict[str, Any]:
        """`config` holds the task's keys (`app`, `activity`, `clear_data`) beside the
        device's: a replay starts where the recording did (`policies.replay_task`)."""
        c, task = self.config, self._task
        conn = self._conn
        return {
            "backend": "adb",
            "server": c.adb,
            "device": conn.serial if conn else c.serial,
            "config": {"adb": c.adb, "serial": conn.serial if conn else c.serial, **(conn.facts if conn else {}),
                       "stable_dumps": c.stable_dumps, "hide_packages": list(c.hide_packages),
                       "device_wait_s": round(self._waited, 3),
                       "app": task.app, "activity": task.activity, "clear_data": task.clear_data},
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
        }  # fmt: skip


def _pieces(text: str) -> list[str]:
    """`text`'s UTF-8 in base64, cut into pieces of TYPE_CHUNK_BYTES at most, each of
    whole characters (AdbKeyboard decodes every broadcast on its own)."""
    data, out, start = text.encode(), [], 0
    while start < len(data):
        end = min(start + TYPE_CHUNK_BYTES, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # inside a character
            end -= 1
        out.append(base64.b64encode(data[start:end]).decode())
        start = end
    return out


def doctor_check(adb: str | None = None, timeout: float = 2.0) -> tuple[bool, str, str]:
    """(ok, detail, fix) for `worldtrace doctor`: the devices an adb server lists."""
    try:
        from .android_device import check_devices
    except ImportError:
        return False, "uiautomator2/adbutils not installed", "pip install -e '.[android]'"
    r = check_devices(adb, timeout)
    return r.ok, r.detail, r.fix
