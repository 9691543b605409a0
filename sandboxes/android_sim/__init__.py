"""An Android device simulator that speaks the real protocols, for tests and demos.

No emulator image can be had on these machines, so the android collector is proven
against this: an adb server on loopback (`adb_server`: smart sockets, shell v1/v2,
sync, forward/reverse, device tcp ports), behind it the uiautomator2 server's HTTP
JSON-RPC (`rpc`), a device `sh` (`shell`), and a deterministic app model (`device`,
`apps`, `settings_app`, `notes_app`): a launcher, Settings with toggles and search,
Notes with a list, an editor and a delete dialog, a Calculator. The real
`uiautomator2` / `adbutils` clients run unchanged against it, over real sockets.

`start()` serves in this process (a thread); `spawn()` starts `python -m
worldtrace.sandboxes.android_sim` as a separate process, the way a device is one;
`main(argv)` is that command (`worldtrace android-sim`); `start_demo()` returns the
demo's job dicts and a stop callable.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .adb_server import AdbServer, serve_in_thread
from .device import Device, DeviceConfig

LOOPBACK = ("127.0.0.1", "localhost")
"""Where the simulator listens: IPv4 loopback, as adb clients (adbutils' `socket.socket()`)
reach an adb server over IPv4 only."""


@dataclass
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    devices: int = 1
    """Simulated devices, serials emulator-5554, emulator-5556, ..."""
    device: DeviceConfig = field(default_factory=DeviceConfig)

    def serials(self) -> list[str]:
        return [f"emulator-{5554 + 2 * i}" for i in range(self.devices)]


class Simulator:
    """A running simulator in this process; `stop()` closes every socket."""

    def __init__(self, config: SimConfig | None = None):
        self.config = config or SimConfig()
        host = self.config.host
        if ":" in host:  # IPv6: the server would listen where no adb client reaches it
            raise ValueError(
                f"the simulator listens on IPv4 loopback only ({' or '.join(LOOPBACK)}), not "
                f"{host}: adb clients (adbutils) reach an adb server over IPv4"
            )
        if host not in LOOPBACK:
            raise ValueError(f"the simulator listens on loopback only, not {host}")
        self.devices = [
            Device(s, self.config.device, i + 1) for i, s in enumerate(self.config.serials())
        ]
        self.server = AdbServer((self.config.host, self.config.port), self.devices)
        self.port = self.server.server_address[1]
        self._thread = serve_in_thread(self.server)

    @property
    def adb(self) -> str:
        """`host:port` of the simulated adb server (the android sandbox's `adb:`)."""
        return f"{self.config.host}:{self.port}"

    @property
    def serial(self) -> str:
        return self.devices[0].serial

    def device(self, serial: str | None = None) -> Device:
        return next(d for d in self.devices if serial in (None, d.serial))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start(config: SimConfig | None = None, **device: Any) -> Simulator:
    """Serve a simulator from a thread of this process; keyword args set `DeviceConfig`."""
    if device:
        config = config or SimConfig()
        config.device = DeviceConfig(**{**config.device.__dict__, **device})
    return Simulator(config)


@dataclass
class SimProcess:
    """A simulator in its own process."""

    proc: subprocess.Popen
    adb: str
    serials: list[str]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM by pid, then SIGKILL if it has not exited within `timeout`."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def spawn(args: list[str] | None = None, timeout: float = 30.0) -> SimProcess:
    """Start `python -m worldtrace.sandboxes.android_sim ARGS` and wait for its address."""
    cmd = [sys.executable, "-m", "worldtrace.sandboxes.android_sim", "--port", "0", *(args or [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("android-sim listening on "):
            adb, _, rest = line.removeprefix("android-sim listening on ").partition(" ")
            return SimProcess(proc, adb, rest.strip().removeprefix("serials ").split(","))
    proc.kill()
    proc.wait()
    raise RuntimeError(f"the simulator did not start within {timeout:g} s (exit {proc.poll()})")


def u2_jar() -> bytes | None:
    """The uiautomator2 server jar the installed client would push, if the client is here.
    uiautomator2 imports adbutils, whose import reads $ANDROID_ADB_SERVER_PORT with `int()`:
    `android_device` imports it first, with a value that is no number set aside."""
    try:
        from importlib.resources import files

        from worldtrace.sandboxes import android_device  # noqa: F401

        return (files("uiautomator2") / "assets" / "u2.jar").read_bytes()
    except (ImportError, FileNotFoundError):
        return None


def serve(config: SimConfig) -> None:
    """Serve until SIGTERM or SIGINT; the first line printed is the address."""
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    sim = Simulator(config)
    print(f"android-sim listening on {sim.adb} serials {','.join(config.serials())}", flush=True)
    try:
        stopped.wait()
    finally:
        sim.stop()


def main(argv: list[str] | None = None) -> int:
    """The command line (`worldtrace android-sim`, `python -m worldtrace.sandboxes.android_sim`)."""
    from ..android_sim_cli import command

    return command.main(argv, prog_name="worldtrace android-sim")


def start_demo() -> tuple[list[dict[str, Any]], Callable[[], None]]:
    """Start a simulator in this process for the demo: (its job dicts, stop)."""
    sim = start(u2_jar=u2_jar())
    return demo_jobs(sim.adb, sim.serial), sim.stop


def demo_jobs(adb: str, serial: str = "emulator-5554") -> list[dict[str, Any]]:
    """The job files the demo collects from a running simulator (scripted and explorer)."""
    sandbox = {"kind": "android", "adb": adb, "serial": serial}
    note = [
        ("tap", {"x": 934, "y": 2128}),  # New note
        ("tap", {"x": 540, "y": 357}),  # the title field
        ("type", {"text": "Call the plumber"}),
        ("press", {"key": "enter"}),  # to the note's body
        ("type", {"text": "Tuesday 9am"}),
        ("press", {"key": "back"}),  # closes the keyboard (typing leaves it up)
        ("press", {"key": "back"}),  # leaving saves the note
    ]
    return [
        {
            "name": "android-notes-demo",
            "sandbox": sandbox,
            "policy": "scripted",
            "tasks": [
                {
                    "id": "new-note",
                    "instruction": "Write a note titled 'Call the plumber' saying 'Tuesday 9am'.",
                    "app": "com.example.notes",
                    "clear_data": True,
                    "actions": [{"tool": t, "arguments": a} for t, a in note],
                }
            ],
        },
        {
            "name": "android-explore-demo",
            "sandbox": sandbox,
            "policy": {"kind": "explorer"},
            "episodes": 2,
            "max_turns": 12,
            "seed": 7,
            "tasks": [
                {
                    "id": "explore-settings",
                    "instruction": "Explore Settings.",
                    "app": "com.android.settings",
                },
                {
                    "id": "explore-notes",
                    "instruction": "Explore Notes.",
                    "app": "com.example.notes",
                    "clear_data": True,
                },
                {
                    "id": "explore-calculator",
                    "instruction": "Use the calculator.",
                    "app": "com.google.android.calculator",
                },
            ],
        },
    ]
