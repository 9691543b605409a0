"""Hunt 1206: with `worldtrace android-sim` running, as `doctor`'s fix for the `android
devices` check said, the check still failed: it asks adb's own port (5037) and the
simulator never listens there (15037). It now says where the simulator answers and what
to set. Real adb protocol: the simulator's server, the adbutils client."""

from __future__ import annotations

import socket

from worldtrace.sandboxes import android_device
from worldtrace.sandboxes.android_device import check_devices


def _closed_port() -> str:
    with socket.socket() as s:  # bound, never listening: nothing answers there
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_the_check_names_the_simulator_s_port_when_adb_s_is_silent(sim, monkeypatch):
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    port = sim.adb.rsplit(":", 1)[1]
    monkeypatch.setattr(android_device, "SIMULATOR_PORT", int(port))
    monkeypatch.setattr(android_device, "ADB_PORT", _closed_port())
    r = check_devices(timeout=1.0)
    assert not r.ok and r.detail.endswith(f"; the simulator's does, at 127.0.0.1:{port}")
    assert r.fix.startswith(f"set ANDROID_ADB_SERVER_PORT={port} ")
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", port)  # as the fix says: the check passes
    assert check_devices(timeout=1.0).ok


def test_a_port_named_by_the_user_is_the_only_one_asked(sim, monkeypatch):
    monkeypatch.setattr(android_device, "SIMULATOR_PORT", int(sim.adb.rsplit(":", 1)[1]))
    closed = f"127.0.0.1:{_closed_port()}"
    r = check_devices(closed, timeout=1.0)
    assert (
        not r.ok
        and "simulator" not in r.detail
        and r.detail.startswith(f"no adb server answers at {closed}")
    )
    assert "android-sim` and set ANDROID_ADB_SERVER_PORT=" in r.fix
