"""adb's file sync protocol (`sync:`): STAT, LIST, SEND (push), RECV (pull), QUIT.

Each request is a 4-byte id and a little-endian u32 length, then the path; a push
streams `DATA` chunks and ends with `DONE` + mtime, answered `OKAY`.
"""

from __future__ import annotations

import socket
import struct

from .device import Device
from .net import read_exact

MAX_CHUNK = 64 * 1024


def _fail(sock: socket.socket, message: str) -> None:
    data = message.encode()
    sock.sendall(b"FAIL" + struct.pack("<I", len(data)) + data)


def serve_sync(sock: socket.socket, d: Device) -> None:
    """Answer sync requests until QUIT or the client closes."""
    while True:
        try:
            head = read_exact(sock, 8)
        except ConnectionError:
            return
        cmd, size = head[:4].decode("ascii", "replace"), struct.unpack("<I", head[4:])[0]
        path = read_exact(sock, size).decode("utf-8", "replace")
        if cmd == "STAT":
            with d.lock:
                st = d.stat(path) or (0, 0, 0)
            sock.sendall(b"STAT" + struct.pack("<III", *st))
        elif cmd == "LIST":
            with d.lock:
                entries = [(n, d.stat(path.rstrip("/") + "/" + n)) for n in d.listdir(path)]
            for name, st in entries:
                raw = name.encode()
                sock.sendall(b"DENT" + struct.pack("<IIII", *(st or (0, 0, 0)), len(raw)) + raw)
            sock.sendall(b"DONE" + bytes(16))
        elif cmd == "SEND":
            _receive_file(sock, d, path)
        elif cmd == "RECV":
            with d.lock:
                f = d.files.get(path)
            if f is None:
                _fail(sock, "No such file or directory")
                continue
            for i in range(0, len(f.data), MAX_CHUNK):
                chunk = f.data[i : i + MAX_CHUNK]
                sock.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
            sock.sendall(b"DONE" + bytes(4))
        elif cmd == "QUIT":
            return
        else:
            _fail(sock, f"unknown sync command {cmd!r}")
            return


def _receive_file(sock: socket.socket, d: Device, spec: str) -> None:
    path, _, mode = spec.rpartition(",")
    if not path:
        path, mode = spec, "33188"
    data = bytearray()
    while True:
        head = read_exact(sock, 8)
        kind, n = head[:4], struct.unpack("<I", head[4:])[0]
        if kind == b"DATA":
            if n > MAX_CHUNK:
                _fail(sock, "data chunk too large")
                return
            data += read_exact(sock, n)
        elif kind == b"DONE":
            mtime = n  # DONE carries the file's mtime where DATA carries a length
            break
        else:
            _fail(sock, f"unexpected {kind!r} in a push")
            return
    parent = path.rsplit("/", 1)[0] or "/"
    with d.lock:
        if d.stat(parent) is None:
            _fail(sock, f"secure_mkdirs failed: {parent}: Permission denied")
            return
        d.write(path, bytes(data), int(mode))
        d.files[path].mtime = mtime
    sock.sendall(b"OKAY" + bytes(4))
