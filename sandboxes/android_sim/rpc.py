"""The uiautomator2 server's HTTP JSON-RPC (`GET /ping`, `POST /jsonrpc/0`) on a device port.

The method names, parameters and error shapes are those uiautomator2 3.x sends and
parses (`uiautomator2/core.py`, `__init__.py`, `_selector.py`): `dumpWindowHierarchy`,
`click`, `swipe`, `pressKey`, `deviceInfo`, clipboard calls, and the UiSelector calls
(`objInfo`, `exist`, `setText`, ...). A selector error carries
`UiObjectNotFoundException`, which the client turns into `UiObjectNotFoundError`.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from .device import LONG_PRESS_MS, Device
from .net import quickack
from .ui import View

NOT_FOUND = -32002
KEYCODES = {3: "home", 4: "back", 66: "enter", 67: "delete", 187: "recent"}


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def handler_for(device: Device) -> Callable[[socket.socket], None]:
    """A device-port connection handler serving the uiautomator2 HTTP API of `device`."""
    api = Api(device)

    def serve(sock: socket.socket) -> None:
        _Http(sock, ("127.0.0.1", 0), api)

    return serve


class _Http(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "NanoHTTPD"
    disable_nagle_algorithm = True
    server: Any  # the Api (BaseHTTPRequestHandler keeps whatever it is given)

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        api: Api = self.server
        if self.path == "/ping":
            self._send(b"pong", "text/plain")
        elif self.path == "/info":
            self._send(json.dumps(api.deviceInfo()).encode())
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        api: Api = self.server
        quickack(self.connection)  # the body comes in a second send: acknowledge the headers now
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/jsonrpc/0":
            self.send_error(404)
            return
        if not api.device.count_rpc():
            self.close_connection = True  # unplugged or offline: this call is never answered
            return
        try:
            req = json.loads(body)
            reply = {
                "jsonrpc": "2.0",
                "id": req.get("id"),
                "result": api.call(req["method"], req.get("params")),
            }
        except RpcError as exc:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": exc.code, "message": str(exc)}}
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            reply = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32602, "message": f"Invalid params: {exc}"},
            }
        self._send(json.dumps(reply).encode())


class Api:
    """JSON-RPC methods by their uiautomator2 names (hence the camelCase)."""

    def __init__(self, device: Device):
        self.device = device
        self._down: tuple[int, int] | None = None

    def call(self, method: str, params: Any) -> Any:
        fn = (
            getattr(self, method, None) if not method.startswith("_") and method != "call" else None
        )
        if fn is None:
            raise RpcError(-32601, f"Method not found: {method}")
        args = params if isinstance(params, list) else []
        kwargs = params if isinstance(params, dict) else {}  # u2 sends kwargs as named params
        with self.device.lock:
            return fn(*args, **kwargs)

    # -- screen and input ---------------------------------------------------------------
    def dumpWindowHierarchy(
        self, compressed: bool = False, max_depth: int = 50, root_in_active=None
    ) -> str:
        return self.device.dump(bool(compressed), int(max_depth or 50))

    def deviceInfo(self) -> dict:
        return self.device.info()

    def click(self, x: Any, y: int | None = None, ms: int | None = None) -> bool:
        if isinstance(x, dict):  # click(selector)
            x, y = _center(self._one(x))
        if ms is not None and ms >= LONG_PRESS_MS:
            self.device.long_press(int(x), int(y))
        else:
            self.device.tap(int(x), int(y))
        return True

    def swipe(self, fx: int, fy: int, tx: int, ty: int, steps: int = 55) -> bool:
        self.device.swipe(int(fx), int(fy), int(tx), int(ty), int(steps) * 5)
        return True

    def drag(self, sx: int, sy: int, ex: int, ey: int, steps: int = 100) -> bool:
        return self.swipe(sx, sy, ex, ey, steps)

    def swipePoints(self, points: list[int], steps: int = 100) -> bool:
        return self.swipe(points[0], points[1], points[-2], points[-1], steps)

    def injectInputEvent(self, action: int, x: int, y: int, meta: int = 0) -> bool:
        if action == 0:
            self._down = (int(x), int(y))
        elif action == 1 and self._down is not None:
            (fx, fy), self._down = self._down, None
            self.device.swipe(fx, fy, int(x), int(y))
        return True

    def pressKey(self, name: str) -> bool:
        self.device.key(str(name).lower())
        return True

    def pressKeyCode(self, code: int, meta: int = 0) -> bool:
        if int(code) in KEYCODES:
            self.device.key(KEYCODES[int(code)])
        return True

    def setClipboard(self, label: str | None, text: str) -> None:
        self.device.clipboard = text

    def getClipboard(self) -> str:
        return self.device.clipboard

    def pasteClipboard(self) -> None:
        self.device.commit_text(self.device.clipboard)

    def clearInputText(self) -> None:
        self.device.clear_text()

    def takeScreenshot(self, scale: float = 1, quality: int = 80) -> None:
        raise RpcError(
            -32001, "java.lang.UnsupportedOperationException: the simulator has no pixels"
        )

    def getLastToast(self) -> None:
        return None

    def clearLastToast(self) -> None:
        return None

    def makeToast(self, text: str, duration: int = 1000) -> bool:
        return True

    def wakeUp(self) -> None:
        return None

    def sleep(self) -> None:
        return None

    def freezeRotation(self, freeze: bool = True) -> None:
        return None

    def setOrientation(self, orientation: str) -> None:
        return None

    def openNotification(self) -> bool:
        return True

    def openQuickSettings(self) -> bool:
        return True

    # -- UiSelector calls ---------------------------------------------------------------
    def _matches(self, sel: dict) -> list[tuple[View, str, int]]:
        if sel.get("childOrSibling"):
            raise RpcError(-32001, "child/sibling selectors are not supported by the simulator")
        found = [(v, pkg, i) for v, pkg, i in _views(self.device) if _match(sel, v, pkg, i)]
        if "instance" in sel:
            n = int(sel["instance"])
            found = found[n : n + 1]
        return found

    def _one(self, sel: dict) -> View:
        found = self._matches(sel)
        if not found:
            raise RpcError(
                NOT_FOUND, f"androidx.test.uiautomator.UiObjectNotFoundException: {_describe(sel)}"
            )
        return found[0][0]

    def exist(self, sel: dict) -> bool:
        return bool(self._matches(sel))

    def count(self, sel: dict) -> int:
        return len(self._matches(sel))

    def waitForExists(self, sel: dict, timeout: int = 0) -> bool:
        return self.exist(sel)  # the simulated screen changes only when acted on

    def waitUntilGone(self, sel: dict, timeout: int = 0) -> bool:
        return not self.exist(sel)

    def objInfo(self, sel: dict) -> dict:
        found = self._matches(sel)
        if not found:
            raise RpcError(
                NOT_FOUND, f"androidx.test.uiautomator.UiObjectNotFoundException: {_describe(sel)}"
            )
        return _info(*found[0][:2])

    def objInfoOfAllInstances(self, sel: dict) -> list[dict]:
        return [_info(v, pkg) for v, pkg, _ in self._matches(sel)]

    def getText(self, sel: dict) -> str:
        return self._one(sel).text

    def setText(self, sel: dict, text: str) -> bool:
        v, d = self._one(sel), self.device
        if v.on_click is None or v.cls != "android.widget.EditText":
            return False
        keyboard = d.keyboard
        v.on_click()  # ACTION_SET_TEXT on the field: focus it, replace its text
        d.clear_text()
        d.commit_text(text)
        d.keyboard = keyboard
        return True

    def clearTextField(self, sel: dict) -> bool:
        return self.setText(sel, "")


def _views(device: Device) -> Iterator[tuple[View, str, int]]:
    def walk(v: View, pkg: str, index: int) -> Iterator[tuple[View, str, int]]:
        yield v, pkg, index
        for i, c in enumerate(v.children):
            yield from walk(c, pkg, i)

    for i, w in enumerate(device.windows()):
        yield from walk(w.root, w.package, i)


_BOOL = {"checkable": "checkable", "checked": "checked", "clickable": "clickable", "longClickable": "long_clickable",
         "scrollable": "scrollable", "enabled": "enabled", "focusable": "focusable", "focused": "focused",
         "selected": "selected"}  # fmt: skip


def _match(sel: dict, v: View, pkg: str, index: int) -> bool:
    s = {
        k: val
        for k, val in sel.items()
        if k not in ("mask", "childOrSibling", "childOrSiblingSelector", "instance")
    }
    tests = {
        "text": lambda x: v.text == x, "textContains": lambda x: x in v.text,
        "textMatches": lambda x: re.fullmatch(x, v.text) is not None, "textStartsWith": lambda x: v.text.startswith(x),
        "className": lambda x: v.cls == x, "classNameMatches": lambda x: re.fullmatch(x, v.cls) is not None,
        "description": lambda x: v.desc == x, "descriptionContains": lambda x: x in v.desc,
        "descriptionMatches": lambda x: re.fullmatch(x, v.desc) is not None,
        "descriptionStartsWith": lambda x: v.desc.startswith(x),
        "packageName": lambda x: pkg == x, "packageNameMatches": lambda x: re.fullmatch(x, pkg) is not None,
        "resourceId": lambda x: v.rid == x, "resourceIdMatches": lambda x: re.fullmatch(x, v.rid) is not None,
        "index": lambda x: index == int(x),
    }  # fmt: skip
    for key, want in s.items():
        if key in _BOOL:
            if getattr(v, _BOOL[key]) != bool(want):
                return False
        elif key not in tests:
            raise RpcError(-32602, f"unsupported selector field {key}")
        elif not tests[key](want):
            return False
    return True


def _rect(b: tuple[int, int, int, int]) -> dict:
    return {"left": b[0], "top": b[1], "right": b[2], "bottom": b[3]}


def _info(v: View, pkg: str) -> dict:
    return {
        "bounds": _rect(v.bounds), "visibleBounds": _rect(v.bounds), "childCount": len(v.children),
        "className": v.cls, "contentDescription": v.desc or None, "packageName": pkg,
        "resourceName": v.rid or None, "text": v.text, "checkable": v.checkable, "checked": v.checked,
        "clickable": v.clickable, "enabled": v.enabled, "focusable": v.focusable, "focused": v.focused,
        "longClickable": v.long_clickable, "scrollable": v.scrollable, "selected": v.selected,
    }  # fmt: skip


def _center(v: View) -> tuple[int, int]:
    return (v.bounds[0] + v.bounds[2]) // 2, (v.bounds[1] + v.bounds[3]) // 2


def _describe(sel: dict) -> str:
    parts = [
        f"{k}={v!r}"
        for k, v in sel.items()
        if k not in ("mask", "childOrSibling", "childOrSiblingSelector")
    ]
    return "UiSelector[" + ", ".join(parts) + "]"
