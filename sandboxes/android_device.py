"""Reaching a device through an adb server, with timeouts and without side effects.

adbutils starts an `adb` server process whenever it cannot connect to one
(`AdbConnection._safe_connect`) and gives shell and HTTP sockets 600 s of patience; a
collector must do neither. `client()` returns an adbutils client whose connections
never start a server and whose every socket read is capped at the sandbox's timeout.
Imported lazily: adbutils and uiautomator2 load only when a device is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import adbutils
from adbutils import AdbClient, AdbConnection

from .android_actions import parse_address
from .base import SandboxError


class _Connection(AdbConnection):
    def _safe_connect(self):
        return self._create_socket()  # never `adb start-server` behind the caller's back


class Client(AdbClient):
    """An adbutils client that never spawns a server and caps every socket timeout."""

    def __init__(self, host: str, port: int, timeout: float):
        super().__init__(host, port, socket_timeout=timeout)
        self.cap = timeout

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        conn = _Connection(self.host, self.port)
        conn.conn.settimeout(min(timeout or self.cap, self.cap))
        return conn


def client(adb: str, timeout: float) -> Client:
    host, port = parse_address(adb)
    return Client(host, port, timeout)


def device_states(c: Client) -> dict[str, str]:
    """serial -> state (`device`, `offline`, `unauthorized`, ...) as the server lists them."""
    return {d.serial: d.state for d in c.list()}


@dataclass
class Connected:
    """A device reached through uiautomator2, and what it says about itself."""

    client: Client
    serial: str
    device: Any
    """The `uiautomator2.Device`."""
    facts: dict[str, Any] = field(default_factory=dict)


def pick_serial(c: Client, serial: str | None) -> str:
    """The configured serial if the server has it online, else the only online device."""
    try:
        states = device_states(c)
    except (adbutils.AdbError, OSError) as exc:
        raise SandboxError(f"no adb server answers at {c.address}: {exc}") from exc
    if serial:
        if serial not in states:
            listed = ", ".join(f"{s} ({st})" for s, st in states.items()) or "none"
            raise SandboxError(
                f"device {serial} is not attached to the adb server at {c.address} (devices: {listed})"
            )
        if states[serial] != "device":
            raise SandboxError(f"device {serial} is {states[serial]}, not ready")
        return serial
    online = [s for s, st in states.items() if st == "device"]
    if len(online) != 1:
        raise SandboxError(
            f"the adb server at {c.address} has {len(online)} online devices; set `serial:` "
            f"(devices: {', '.join(states) or 'none'})"
        )
    return online[0]


def connect(adb: str, serial: str | None, u2_port: int, timeout: float) -> Connected:
    """uiautomator2 on the device (it pushes and starts its server as it needs)."""
    import uiautomator2

    c = client(adb, timeout)
    serial = pick_serial(c, serial)
    try:
        d = uiautomator2.connect(c.device(serial), port=u2_port)
        width, height = d.window_size()
        props = {
            k: d.adb_device.getprop(k)
            for k in ("ro.product.model", "ro.build.version.release", "ro.build.version.sdk")
        }
    except (
        Exception
    ) as exc:  # any failure to bring uiautomator2 up is the device's, not the agent's
        raise SandboxError(
            f"uiautomator2 could not start on {serial} at {c.address}: {type(exc).__name__}: {exc}"
        ) from exc
    facts = {"model": props["ro.product.model"], "android": props["ro.build.version.release"],
             "sdk": props["ro.build.version.sdk"], "screen": [width, height]}  # fmt: skip
    return Connected(c, serial, d, facts)


@dataclass
class DeviceCheck:
    """What `worldtrace doctor` shows for Android."""

    ok: bool
    detail: str
    fix: str = ""
    devices: dict[str, str] = field(default_factory=dict)


def check_devices(adb: str | None = None, timeout: float = 2.0) -> DeviceCheck:
    """List the devices of an adb server (default: $ANDROID_ADB_SERVER_HOST/PORT or 5037)."""
    if adb is None:
        host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
        adb = f"{host}:{os.environ.get('ANDROID_ADB_SERVER_PORT', '5037')}"
    fix = "optional: start `adb start-server` and attach a device, or run `worldtrace android-sim`"
    try:
        states = device_states(client(adb, timeout))
    except (adbutils.AdbError, OSError, ValueError) as exc:
        return DeviceCheck(False, f"no adb server answers at {adb} ({exc})", fix)
    if not states:
        return DeviceCheck(False, f"adb server at {adb}: no devices attached", fix)
    listed = ", ".join(f"{s} ({st})" for s, st in sorted(states.items()))
    ok = any(st == "device" for st in states.values())
    return DeviceCheck(ok, f"adb server at {adb}: {listed}", "" if ok else fix, states)
