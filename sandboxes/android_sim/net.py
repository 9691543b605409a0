"""Socket reads for the simulator's protocols.

Clients write a request in several small sends (http.client sends headers, then the
body; adbutils sends a sync header, then its data). With Nagle on the client and a
delayed ACK here, each second send waits 40 ms; acknowledging at once (Linux
TCP_QUICKACK) before every read keeps a round trip at loopback speed.
"""

from __future__ import annotations

import contextlib
import socket

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def quickack(sock: socket.socket) -> None:
    if _QUICKACK is not None:
        with contextlib.suppress(OSError):  # not a TCP socket: nothing to acknowledge
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


def read_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes; ConnectionError when the peer closes first."""
    buf = b""
    while len(buf) < n:
        quickack(sock)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf
