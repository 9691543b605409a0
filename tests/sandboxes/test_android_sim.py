"""The device simulator against the real adbutils / uiautomator2 clients, over real sockets.

Every client here is pointed at the simulator's own loopback port; nothing talks to
an adb server on 5037 and no `adb` process is started.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import urllib.request
import xml.etree.ElementTree as ET

import adbutils
import pytest
import uiautomator2 as u2
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.android import AndroidConfig, AndroidSandbox, AndroidTask
from worldtrace.sandboxes.android_device import client
from worldtrace.sandboxes.android_sim import SimConfig, Simulator, spawn, start, u2_jar
from worldtrace.sandboxes.android_sim.device import U2_JAR
from worldtrace.sandboxes.base import SandboxError, TaskSpec

ATTRS = ("index", "text", "resource-id", "class", "package", "content-desc", "checkable", "checked",
         "clickable", "enabled", "focusable", "focused", "scrollable", "long-clickable", "password",
         "selected", "bounds")  # fmt: skip


def _device(sim: Simulator):
    """A device through our client: a lost simulator can never make adbutils start `adb`."""
    return client(sim.adb, 10.0).device(sim.serial)


def test_host_services_shell_and_transport(sim):
    host, port = sim.adb.split(":")
    c = adbutils.AdbClient(host, int(port))
    assert c.server_version() == 41
    [info] = c.list(extended=True)
    assert (info.serial, info.state, info.tags["transport_id"]) == ("emulator-5554", "device", "1")
    dev = c.device(sim.serial)
    assert dev.get_state() == "device" and dev.get_serialno() == sim.serial
    assert "shell_v2" in dev.get_features()
    assert dev.shell("getprop ro.build.version.sdk") == "34"
    v1 = dev.shell2("echo hi; nosuchcmd")  # v1: the exit code rides on `echo X4EXIT:$?`
    assert (
        v1.returncode == 127
        and "hi" in v1.output
        and "nosuchcmd: inaccessible or not found" in v1.output
    )
    v2 = dev.shell2("md5sum /nope", v2=True)
    assert (v2.returncode, v2.stdout, v2.stderr.strip()) == (
        1,
        "",
        "md5sum: /nope: No such file or directory",
    )
    assert dev.window_size() == (1080, 2400)
    with pytest.raises(adbutils.AdbError, match="device 'emulator-9999' not found"):
        c.device("emulator-9999").shell("true")


def test_sync_push_stat_list_pull(sim):
    dev = _device(sim)
    dev.sync.push(b"hello sync", "/data/local/tmp/a.txt", check=True)
    st = dev.sync.stat("/data/local/tmp/a.txt")
    assert st.size == 10 and st.mode & 0o100000
    assert "a.txt" in [f.path for f in dev.sync.list("/data/local/tmp")]
    assert dev.sync.read_bytes("/data/local/tmp/a.txt") == b"hello sync"
    assert dev.sync.stat("/data/local/tmp/missing").mtime is None
    assert (
        dev.shell("md5sum /data/local/tmp/a.txt").split()[0]
        == hashlib.md5(b"hello sync").hexdigest()
    )
    with pytest.raises(adbutils.AdbError, match="No such file"):
        dev.sync.read_bytes("/data/local/tmp/missing")


def test_connect_pushes_the_server_and_drives_apps(sim):
    d = u2.connect(_device(sim))
    jar = sim.device().files[U2_JAR].data
    assert jar == u2_jar()  # connect pushed the client's own server jar over sync
    assert d.info["displayWidth"] == 1080 and d.info["currentPackageName"].endswith("nexuslauncher")
    d.app_start("com.example.notes")
    assert d.app_current()["package"] == "com.example.notes"
    d(description="New note").click()
    assert d.app_current()["activity"] == "com.example.notes.EditorActivity"
    d(text="Title").click()
    d.send_keys("Dentist")  # through the AdbKeyboard IME: am broadcast ADB_KEYBOARD_INPUT_TEXT
    assert d(resourceId="com.example.notes:id/title_input").get_text() == "Dentist"
    d.press("back")
    assert d(resourceId="com.example.notes:id/note_title", instance=0).get_text() == "Dentist"
    assert d(text="Meeting notes").exists and not d(text="Nothing like it").exists
    with pytest.raises(u2.UiObjectNotFoundError):
        d(text="Nothing like it").get_text()
    d.swipe_ext("up")  # a swipe on a list too short to scroll changes nothing
    d.app_stop("com.example.notes")
    assert d.app_current()["package"].endswith("nexuslauncher")


def test_typing_without_the_ime_goes_through_the_clipboard():
    with start(ime_installed=False) as s:
        d = u2.connect(_device(s))
        d.app_start("com.android.settings")
        d(text="Search settings").click()
        d.send_keys("dark")  # no AdbKeyboard: setClipboard + pasteClipboard over JSON-RPC
        assert d(text="Dark theme").exists
        assert s.device().clipboard == "dark"


def test_forward_tunnels_to_the_uiautomator2_server_and_reverse_is_listed(sim):
    dev = _device(sim)
    u2.connect(dev)
    local = dev.forward_port(9008)
    assert [(f.local, f.remote) for f in dev.forward_list()] == [(f"tcp:{local}", "tcp:9008")]
    with urllib.request.urlopen(f"http://127.0.0.1:{local}/ping", timeout=5) as r:
        assert r.read() == b"pong"
    dev.forward_remove(f"tcp:{local}")
    assert dev.forward_list() == []
    dev.reverse("tcp:7000", "tcp:8000")
    assert [(r.remote, r.local) for r in dev.reverse_list()] == [("tcp:7000", "tcp:8000")]
    dev.reverse_remove_all()
    assert dev.reverse_list() == []


def test_dump_is_a_real_uiautomator_hierarchy(sim):
    d = u2.connect(_device(sim))
    d.app_start("com.android.settings")
    xml = d.dump_hierarchy()
    root = ET.fromstring(xml.encode())
    assert root.tag == "hierarchy" and root.get("rotation") == "0"
    nodes = list(root.iter("node"))
    assert nodes and all(all(a in n.attrib for a in ATTRS) for n in nodes)
    assert {n.get("package") for n in nodes} == {"com.android.systemui", "com.android.settings"}
    toggles_page = [n for n in nodes if n.get("text") == "Network & internet"]
    assert toggles_page and toggles_page[0].get("resource-id") == "android:id/title"
    compressed = d.dump_hierarchy(compressed=True)
    assert len(compressed) < len(xml) and "Network &amp; internet" in compressed

    def depth(el: ET.Element) -> int:
        return 1 + max((depth(c) for c in el), default=0)

    assert depth(root) > 4 and depth(ET.fromstring(d.dump_hierarchy(max_depth=2).encode())) == 3


def test_simulator_in_its_own_process_stopped_by_pid():
    proc = spawn(["--preinstall-u2"])
    try:
        d = u2.connect(client(proc.adb, 10.0).device(proc.serials[0]))
        d.app_start("com.google.android.calculator")
        for key in ("digit_7", "op_mul", "digit_6"):
            d(resourceId=f"com.google.android.calculator:id/{key}").click()
        assert d(resourceId="com.google.android.calculator:id/result_preview").get_text() == "42"
        sb = AndroidSandbox(AndroidConfig(adb=proc.adb, serial=proc.serials[0], timeout=5.0))
        sb.reset(TaskSpec("t", "", (), AndroidTask(app="com.android.settings")))
        assert "Network & internet" in sb.step(tool("tap", x=540, y=630)).text
    finally:
        proc.stop()
    assert proc.proc.returncode == 0  # SIGTERM by pid: a clean exit
    with pytest.raises(SandboxError, match=f"the adb server at {proc.adb} stopped answering"):
        sb.step(tool("press", key="back"))  # the device's process is gone mid-episode
    with pytest.raises((adbutils.AdbError, OSError)):
        client(proc.adb, 2.0).list()  # nothing listens any more; no adb server was started


def test_command_line_refuses_non_loopback_addresses():
    with pytest.raises(ValueError, match="loopback only"):
        Simulator(SimConfig(host="0.0.0.0"))
    r = subprocess.run(
        [sys.executable, "-m", "worldtrace.sandboxes.android_sim", "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0 and "--drop-after" in r.stdout


def test_the_documented_command_serves_a_device(wt_env):
    """Examples, doctor's hint and docs/android.md say `worldtrace android-sim`: the CLI
    had no such command."""
    proc = subprocess.Popen(
        ["worldtrace", "android-sim", "--port", "0", "--devices", "2"],
        stdout=subprocess.PIPE, text=True, env=wt_env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("android-sim listening on 127.0.0.1:"), line
        adb = line.split()[3]
        serials = [d.serial for d in client(adb, 10.0).device_list()]
        assert serials == ["emulator-5554", "emulator-5556"]
    finally:
        proc.terminate()  # our own process, by pid
        proc.wait(timeout=30)
    assert proc.returncode == 0
    r = subprocess.run(
        ["worldtrace", "android-sim", "--help"], capture_output=True, text=True, env=wt_env
    )
    assert r.returncode == 0 and "--drop-after" in r.stdout and "Example:" in r.stdout


def test_an_address_the_simulator_cannot_serve_is_one_line(wt_env):
    """Found: `--host 0.0.0.0` (refused: loopback only) and a port in use ended in a
    traceback."""
    import socket

    run = lambda *a: subprocess.run(  # noqa: E731
        ["worldtrace", "android-sim", *a], capture_output=True, text=True, env=wt_env, timeout=60
    )
    r = run("--host", "0.0.0.0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "Invalid value for --host: the simulator listens on loopback only" in r.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run("--port", str(port))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}: "), r.stderr
