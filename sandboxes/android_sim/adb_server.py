"""The adb server's smart-socket protocol on loopback, with the devices behind it.

A request is 4 hex digits of length and the service name; the answer starts `OKAY`, or
`FAIL` with a length-prefixed message. Host services (`host:version`, `host:devices-l`,
`host-serial:S:features`, `forward`, ...) answer and close; `host:transport:S` /
`host:tport:serial:S` switch the connection to a device, whose services follow:
`shell:` and `shell,v2:` (the device's `sh`), `exec:`, `sync:` (push/pull/stat/list),
`tcp:PORT` (a socket to a device port: the uiautomator2 server), and `reverse:`.
`host:forward` listens on a host port and tunnels each connection to a device port.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading

from .device import Device
from .net import read_exact
from .rpc import handler_for
from .shell import Result, Shell
from .sync import serve_sync

ADB_VERSION = 41
"""adb 1.0.41 (platform-tools 28+): clients then use `host:tport:serial:`."""
POLL = 0.05
"""Seconds between shutdown checks of the serving loops (stop() waits up to this)."""
FEATURES = "shell_v2,fixed_push_mkdir"
"""What the device supports beyond the basics (no `cmd`, no sync v2: clients fall back)."""


def read_request(sock: socket.socket) -> str:
    return read_exact(sock, int(read_exact(sock, 4), 16)).decode("utf-8", "replace")


def block(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):04x}".encode() + data


def fail(message: str) -> bytes:
    return b"FAIL" + block(message)


class AdbServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], devices: list[Device]):
        self.devices = devices
        self.forwards: dict[str, tuple[Device, str, socketserver.TCPServer]] = {}
        self.reverses: dict[str, dict[str, str]] = {d.serial: {} for d in devices}
        self._conns: dict[str, set[socket.socket]] = {d.serial: set() for d in devices}
        self._conns_lock = threading.Lock()
        for d in devices:
            d.on_state = self._state_changed
        super().__init__(address, _Handler)

    # -- device lookup and connection tracking ---------------------------------------------
    def listed(self) -> list[Device]:
        return [d for d in self.devices if d.state != "gone"]

    def find(self, serial: str | None = None, transport_id: int | None = None) -> Device | str:
        """The device, or adb's error message."""
        found = [d for d in self.listed() if (serial is None or d.serial == serial)
                 and (transport_id is None or d.transport_id == transport_id)]  # fmt: skip
        if not found:
            if serial:
                return f"device '{serial}' not found"
            return "no devices/emulators found"
        if len(found) > 1:
            return "more than one device/emulator"
        if found[0].state == "offline":
            return "device offline"
        return found[0]

    def track(self, d: Device, sock: socket.socket, add: bool) -> None:
        with self._conns_lock:
            (self._conns[d.serial].add if add else self._conns[d.serial].discard)(sock)

    def _state_changed(self, d: Device) -> None:
        """Offline or unplugged: cut every connection to the device, as adb does."""
        with self._conns_lock:
            socks = list(self._conns[d.serial])
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for local, (dev, _, _) in list(self.forwards.items()):
            if dev is d:
                self._kill_forward(local)

    # -- forwards ------------------------------------------------------------------------
    def forward(self, d: Device, local: str, remote: str, norebind: bool) -> str | None:
        if not local.startswith("tcp:") or not remote.startswith("tcp:"):
            return f"cannot forward {local} to {remote}: only tcp: ports"
        if norebind and local in self.forwards:
            return f"cannot rebind existing socket {local}"
        self._kill_forward(local)
        port = int(remote[4:])
        server = self

        class Tunnel(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                serve = d.listeners.get(port)
                if serve is None or d.state != "device":
                    return
                server.track(d, self.request, True)
                try:
                    serve(self.request)
                finally:
                    server.track(d, self.request, False)

        srv = socketserver.ThreadingTCPServer((self.server_address[0], int(local[4:])), Tunnel)
        srv.daemon_threads = True
        threading.Thread(
            target=srv.serve_forever, args=(POLL,), name=f"adb-forward-{local}", daemon=True
        ).start()
        self.forwards[local] = (d, remote, srv)
        return None

    def _kill_forward(self, local: str) -> bool:
        entry = self.forwards.pop(local, None)
        if entry is None:
            return False
        entry[2].shutdown()
        entry[2].server_close()
        return True

    def server_close(self) -> None:
        for local in list(self.forwards):
            self._kill_forward(local)
        for d in self.devices:
            self._state_changed(d)
        super().server_close()


class _Handler(socketserver.BaseRequestHandler):
    server: AdbServer

    def setup(self) -> None:
        # answers go out in several writes (OKAY, then data): without NODELAY each waits
        # for the client's delayed ACK (40 ms on Linux)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data: bytes) -> None:
        self.request.sendall(data)

    def handle(self) -> None:
        # OSError: the client went away, or a fault cut the device: nothing to answer
        with contextlib.suppress(OSError):
            self._serve(read_request(self.request))

    def _serve(self, req: str) -> None:
        srv = self.server
        if req.startswith(("host:transport", "host:tport:")):
            d = self._transport(req)
            if d is not None:
                srv.track(d, self.request, True)
                try:
                    self._device_service(d, read_request(self.request))
                finally:
                    srv.track(d, self.request, False)
            return
        if req.startswith(("host-serial:", "host-transport-id:", "host-usb:", "host-local:")):
            self._host_device(req)
            return
        self._host(req.removeprefix("host:"))

    # -- host services -----------------------------------------------------------------
    def _host(self, cmd: str) -> None:
        srv = self.server
        if cmd == "version":
            self.send(b"OKAY" + block(f"{ADB_VERSION:04x}"))
        elif cmd in ("devices", "devices-l"):
            lines = []
            for d in srv.listed():
                if cmd == "devices":
                    lines.append(f"{d.serial}\t{d.state}\n")
                else:
                    lines.append(f"{d.serial:<22} {d.state} product:wtsim model:WorldTrace_Simulator "
                                 f"device:wtsim transport_id:{d.transport_id}\n")  # fmt: skip
            self.send(b"OKAY" + block("".join(lines)))
        elif cmd == "list-forward":
            self.send(b"OKAY" + block(self._forward_list(None)))
        elif cmd.startswith("wait-for-"):
            self._wait_for(None)
        elif cmd.startswith(("connect:", "disconnect:")):
            self.send(b"OKAY" + block(f"unable to connect to {cmd.split(':', 1)[1]}"))
        elif cmd == "kill":
            self.send(b"OKAY")
            threading.Thread(target=srv.shutdown, daemon=True).start()
        else:
            self.send(fail(f"unknown host service '{cmd}'"))

    def _host_device(self, req: str) -> None:
        """`host-serial:SERIAL:cmd`, `host-transport-id:N:cmd` (serials may hold a ':')."""
        srv = self.server
        kind, rest = req.split(":", 1)
        target: Device | str
        if kind == "host-serial":
            serial = next(
                (d.serial for d in srv.devices if rest.startswith(d.serial + ":")),
                rest.rsplit(":", 1)[0],
            )
            cmd = rest[len(serial) + 1 :]
            if cmd.startswith("wait-for-"):
                self._wait_for(serial)
                return
            target = srv.find(serial)
        elif kind == "host-transport-id":
            tid, cmd = rest.split(":", 1)
            target = srv.find(transport_id=int(tid))
        else:
            cmd, target = rest, srv.find()
        if cmd == "get-state" and isinstance(target, str) and target == "device offline":
            self.send(b"OKAY" + block("offline"))
            return
        if isinstance(target, str):
            self.send(fail(target))
            return
        d = target
        if cmd == "get-state":
            self.send(b"OKAY" + block(d.state))
        elif cmd == "get-serialno":
            self.send(b"OKAY" + block(d.serial))
        elif cmd == "get-devpath":
            self.send(b"OKAY" + block("virtual:wtsim"))
        elif cmd == "features":
            self.send(b"OKAY" + block(FEATURES))
        elif cmd == "list-forward":
            self.send(b"OKAY" + block(self._forward_list(d)))
        elif cmd.startswith("forward:"):
            spec = cmd.removeprefix("forward:")
            norebind = spec.startswith("norebind:")
            local, _, remote = spec.removeprefix("norebind:").partition(";")
            err = srv.forward(d, local, remote, norebind)
            self.send(fail(err) if err else b"OKAYOKAY")
        elif cmd.startswith("killforward:"):
            ok = srv._kill_forward(cmd.removeprefix("killforward:"))
            self.send(b"OKAYOKAY" if ok else fail(f"listener '{cmd[12:]}' not found"))
        elif cmd == "killforward-all":
            for local, (dev, _, _) in list(srv.forwards.items()):
                if dev is d:
                    srv._kill_forward(local)
            self.send(b"OKAYOKAY")
        else:
            self.send(fail(f"unknown host service '{cmd}'"))

    def _forward_list(self, d: Device | None) -> str:
        return "".join(
            f"{dev.serial} {local} {remote}\n"
            for local, (dev, remote, _) in self.server.forwards.items()
            if d is None or dev is d
        )

    def _wait_for(self, serial: str | None) -> None:
        """The simulated devices boot instantly: present means ready."""
        found = self.server.find(serial)
        self.send(fail(found) if isinstance(found, str) else b"OKAYOKAY")

    def _transport(self, req: str) -> Device | None:
        srv = self.server
        if req.startswith(("host:transport:", "host:tport:serial:")):
            found = srv.find(
                req.rsplit(":", 1)[1] if req.startswith("host:transport:") else req[18:]
            )
        elif req.startswith(("host:transport-id:", "host:tport:transport-id:")):
            found = srv.find(transport_id=int(req.rsplit(":", 1)[1]))
        else:  # host:transport-any, host:tport:any, -usb, -local
            found = srv.find()
        if isinstance(found, str):
            self.send(fail(found))
            return None
        self.send(
            b"OKAY"
            + (struct.pack("<Q", found.transport_id) if req.startswith("host:tport:") else b"")
        )
        return found

    # -- device services ---------------------------------------------------------------
    def _device_service(self, d: Device, req: str) -> None:
        service, _, arg = req.partition(":")
        name, *options = service.split(",")
        if name in ("shell", "exec"):
            if not arg:
                self.send(fail("interactive shells are not supported by the simulator"))
                return
            self._shell(d, arg, v2="v2" in options and name == "shell")
        elif name == "sync":
            self.send(b"OKAY")
            serve_sync(self.request, d)
        elif name == "tcp":
            serve = d.listeners.get(int(arg.split(":")[0]))
            if serve is None:
                self.send(fail("closed"))
                return
            self.send(b"OKAY")
            serve(self.request)
        elif name == "reverse":
            self._reverse(d, arg)
        elif name == "root":
            self.send(b"OKAY" + b"adbd cannot run as root in production builds\n")
        else:
            self.send(fail(f"unknown service '{name}'"))

    def _shell(self, d: Device, cmd: str, v2: bool) -> None:
        result: Result = Shell(d, handler_for).run(cmd)
        if result.daemon is not None:
            result.daemon[0]()  # listening before OKAY: the client's first ping finds it
        try:
            out, err = result.out.encode(), result.err.encode()
            if v2:  # packets: 1 stdout, 2 stderr, 3 exit code
                self.send(
                    b"OKAY"
                    + b"".join(
                        bytes([k]) + struct.pack("<I", len(x)) + x
                        for k, x in ((1, out), (2, err))
                        if x
                    )
                )
            else:  # v1: one merged stream, then close
                self.send(b"OKAY" + result.stream.encode())
            if result.daemon is not None:
                _wait_closed(self.request)
            if v2:
                self.send(bytes([3]) + struct.pack("<I", 1) + bytes([result.code & 0xFF]))
        finally:
            if result.daemon is not None:
                with d.lock:
                    result.daemon[1]()

    def _reverse(self, d: Device, arg: str) -> None:
        table = self.server.reverses[d.serial]
        if arg.startswith("forward:"):
            remote, _, local = arg.removeprefix("forward:").removeprefix("norebind:").partition(";")
            table[remote] = local
            self.send(b"OKAYOKAY")
        elif arg == "list-forward":
            self.send(b"OKAY" + block("".join(f"host {r} {lc}\n" for r, lc in table.items())))
        elif arg.startswith("killforward:"):
            found = table.pop(arg.removeprefix("killforward:"), None)
            self.send(
                b"OKAYOKAY" if found is not None else fail(f"listener '{arg[12:]}' not found")
            )
        elif arg == "killforward-all":
            table.clear()
            self.send(b"OKAYOKAY")
        else:
            self.send(fail(f"unknown reverse service '{arg}'"))


def _wait_closed(sock: socket.socket) -> None:
    """Block until the client closes the connection (a daemon lives as long as its shell)."""
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass


def serve_in_thread(server: AdbServer) -> threading.Thread:
    t = threading.Thread(target=server.serve_forever, args=(POLL,), name="adb-sim", daemon=True)
    t.start()
    return t
