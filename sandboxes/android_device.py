"""Reaching a device through an adb server, with timeouts and without side effects.

adbutils starts an `adb` server process whenever it cannot connect to one
(`AdbConnection._safe_connect`) and gives shell and HTTP sockets 600 s of patience; a
collector must do neither. `client()` returns an adbutils client whose connections
never start a server and whose every socket read is capped at the sandbox's timeout.
Imported lazily: adbutils and uiautomator2 load only when a device is used.

One episode at a time on a device: `hold_device` flock-s a lock file named from the
device's key (adb server host:port and serial) in a per-user temp directory, across
threads and processes of this host, waiting for it up to a timeout. The kernel releases
the lock when its file is closed or its process dies, so a crashed holder blocks nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .android_actions import parse_address
from .android_sim_cli import DEFAULT_PORT as SIMULATOR_PORT
from .base import SandboxConfigError, SandboxError, hold_lock

PORT_VARIABLE = "ANDROID_ADB_SERVER_PORT"
"""adb's variable naming its server's port (adb, adbutils and `doctor` read it; a job's
`adb:` names its server itself)."""


def port_variable_problem() -> str | None:
    """What is wrong with $ANDROID_ADB_SERVER_PORT, one line, or None (unset or a port)."""
    value = os.environ.get(PORT_VARIABLE)
    if value is None or (value.isascii() and value.isdigit() and 0 < int(value) < 65536):
        return None
    return (
        f"{PORT_VARIABLE}={value!r} is not a port number: it must be the adb server's port "
        "alone, 1-65535 (e.g. 5037; the host goes in ANDROID_ADB_SERVER_HOST)"
    )


@contextlib.contextmanager
def _port_variable_set_aside() -> Iterator[None]:
    """adbutils builds a default client when it is imported, and that client reads
    $ANDROID_ADB_SERVER_PORT with `int()`: a value that is no number (`127.0.0.1:15037`)
    made the import raise a bare ValueError, which failed every Android attempt, though our
    clients name their server from the job's `adb:`. The import runs without such a value
    (put back at once); `doctor` says what is wrong with it (`port_variable_problem`)."""
    value = os.environ.pop(PORT_VARIABLE) if port_variable_problem() else None
    try:
        yield
    finally:
        if value is not None:
            os.environ[PORT_VARIABLE] = value


with _port_variable_set_aside():
    import adbutils
    from adbutils import AdbClient, AdbConnection


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
    """The configured serial if the server has it online, else the only online device.
    Several online and no serial is the job's mistake (SandboxConfigError, not retried)."""
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
    if len(online) == 1:
        return online[0]
    said = (
        f"the adb server at {c.address} has {len(online)} online devices; set `serial:` "
        f"(devices: {', '.join(states) or 'none'})"
    )
    if online:  # which one the job means no retry tells, even if one of them leaves
        raise SandboxConfigError(said)
    raise SandboxError(said)  # none yet: a device booting, reconnecting, comes back


def connect(c: Client, serial: str, u2_port: int) -> Connected:
    """uiautomator2 on the device `serial` (it pushes and starts its server as it needs)."""
    import uiautomator2

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


def device_key(address: str, serial: str) -> str:
    """What identifies a device on this host: its adb server's host:port and its serial."""
    host, port = parse_address(address)
    host = "127.0.0.1" if host == "localhost" else host
    return f"{host}:{port}/{serial}"


def lock_dir() -> Path:
    """This user's directory of device lock files (created 0700; refused if not ours)."""
    d = Path(tempfile.gettempdir()) / f"worldtrace-{os.getuid()}" / "android-devices"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.parent.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise SandboxError(f"{d.parent} is not a directory of this user: no device lock there")
    return d


def lock_path(address: str, serial: str) -> Path:
    key = device_key(address, serial)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80]
    return lock_dir() / f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:8]}.lock"


@dataclass
class DeviceLock:
    """An exclusive hold on one device, from `hold_device` until `release()`."""

    key: str
    path: Path
    file: IO[str] | None
    waited: float
    """Seconds `hold_device` waited for another episode to let the device go."""

    def release(self) -> None:
        """Let the device go (the lock file stays: one small file per device, in this
        user's directory; removing it would race a waiter that just opened it)."""
        fh, self.file = self.file, None
        if fh is not None:
            fh.close()  # releases the flock


def _holder(path: Path) -> str:
    """Who holds a lock file, as its holder wrote it (`pid N`)."""
    try:
        pid = path.read_text().split()[0]
    except (OSError, IndexError):
        return "pid unknown"
    return f"pid {pid}"


def hold_device(
    address: str, serial: str, timeout: float, stop: threading.Event | None = None
) -> DeviceLock:
    """The device to ourselves, waiting up to `timeout` seconds while another episode (a
    thread or a process of this user on this host) holds it; then a SandboxError naming
    the holder's pid. A holder that died holds nothing (the kernel drops its flock).
    `stop` set while waiting (the worker is stopping) ends the wait with StopRequested."""
    path = lock_path(address, serial)
    fh, waited = hold_lock(
        path, timeout, stop, f"{os.getpid()}\n",
        f"stop requested while waiting for device {serial} on {address}",
        lambda: f"device {serial} on {address} is in use by another episode "
        f"({_holder(path)}); waited {timeout:g} s (lock_timeout)",
    )  # fmt: skip
    return DeviceLock(device_key(address, serial), path, fh, waited)


ADB_PORT = "5037"
"""adb's own server port, the default where $ANDROID_ADB_SERVER_PORT is unset."""


@dataclass
class DeviceCheck:
    """What `worldtrace doctor` shows for Android."""

    ok: bool
    detail: str
    fix: str = ""
    devices: dict[str, str] = field(default_factory=dict)


def check_devices(adb: str | None = None, timeout: float = 2.0) -> DeviceCheck:
    """List the devices of an adb server (default: $ANDROID_ADB_SERVER_HOST/PORT or 5037)."""
    named = adb is not None or PORT_VARIABLE in os.environ
    if adb is None:
        problem = port_variable_problem()
        if problem:
            return DeviceCheck(False, problem, (
                f"set {PORT_VARIABLE} to the adb server's port (e.g. {SIMULATOR_PORT} for "
                f"`worldtrace android-sim`), or unset it (adb's {ADB_PORT})"))  # fmt: skip
        host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
        adb = f"{host}:{os.environ.get(PORT_VARIABLE, ADB_PORT)}"
    fix = (
        "optional: start `adb start-server` and attach a device, or run `worldtrace "
        f"android-sim` and set ANDROID_ADB_SERVER_PORT={SIMULATOR_PORT}"
    )
    try:
        states = device_states(client(adb, timeout))
    except (adbutils.AdbError, OSError, ValueError) as exc:
        said = f"no adb server answers at {adb} ({exc})"
        sim = f"{adb.rsplit(':', 1)[0]}:{SIMULATOR_PORT}"
        if not named and check_devices(sim, timeout).ok:  # `android-sim` runs, on its port
            return DeviceCheck(False, f"{said}; the simulator's does, at {sim}", (
                f"set ANDROID_ADB_SERVER_PORT={SIMULATOR_PORT} (doctor, tests) and `adb: {sim}` "
                "in android job files"))  # fmt: skip
        return DeviceCheck(False, said, fix)
    if not states:
        return DeviceCheck(False, f"adb server at {adb}: no devices attached", fix)
    listed = ", ".join(f"{s} ({st})" for s, st in sorted(states.items()))
    ok = any(st == "device" for st in states.values())
    return DeviceCheck(ok, f"adb server at {adb}: {listed}", "" if ok else fix, states)
