"""One Chromium per process, shared by every web sandbox; a fresh context per episode.

Playwright's async API runs on one `AsyncRunner` loop thread (sandboxes/aio.py): every
call from the synchronous sandbox protocol goes through `runner.run(coro, timeout)`, so
a hung page or browser never hangs the collector, and sandboxes on several worker
threads share the loop, the driver and the browser (Chromium's start is the dominant
cost of a short episode). The sync API would need its own greenlet thread per
sandbox and has no per-call deadline. A browser that crashed or was killed is launched
again by the next `browser()` call; the episode that saw it die fails (SandboxError).

Every context a sandbox opens sends what is outside its allowed origins to the
sandbox's `Refuser`, a loopback proxy that forwards nothing: the boundary that holds
where Playwright's route handler is never asked (a redirect's next hop, a WebSocket, a
preconnect; docs/web.md).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Annotated

from pydantic import Field
from worldtrace.schemas.parsing import configclass

from .aio import AsyncRunner
from .base import SandboxConfigError

LAUNCH_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
"""Debian's Chromium as a headless collector (`launch_args` adds DISABLED_FEATURES)."""
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
)
"""The features Playwright's own `--disable-features` switches off (playwright-core 1.65,
`chromiumSwitches.ts`; Edge's and Windows' ones are no feature of Debian's Chromium). Chromium honours the last `--disable-features` only, so one of
ours replaces Playwright's: it must name these again. Without them Chromium upgrades a
plain-http navigation to https itself (HttpsUpgrades: the context's proxy refused the
upgrade, and a start page on http failed as "redirected outside the allowed origins"),
and sends its own requests to Google (optimization hints, network time, search
preconnects). `tests/sandboxes/test_web_hunt_1205d.py` checks the browser's command
line still holds every feature Playwright names, so an upgrade that adds one fails there."""
DISABLED_FEATURES = (*PLAYWRIGHT_DISABLED_FEATURES, "AutofillServerCommunication")
"""What Chromium runs without: Playwright's list and the autofill service, which asks
Google about every form a page shows (through a context's proxy it would be listed as the
page's blocked requests)."""
NO_NAME_RESOLUTION = (
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.*, EXCLUDE [::1]"
)
"""Chromium resolves no host name (IP literals and localhost still load): a page, the
link predictor or a background service can then reach no host by name, not even
with a DNS query."""
NO_CONTENT = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
NO_TUNNEL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def refused(head: bytes) -> tuple[str, bool]:
    """(URL, whether a document navigation) of a request to the refusing proxy: the
    target of an http request (`ws://` for a WebSocket's upgrade), `https://host:port`
    for a CONNECT (an https or wss request: its path is inside the tunnel). A navigation
    says so in `Sec-Fetch-Dest: document`, or, to a host not potentially trustworthy
    (no Sec-Fetch headers), in `Upgrade-Insecure-Requests` (frames' too)."""
    lines = head.decode("latin-1").split("\r\n")
    method, _, rest = lines[0].partition(" ")
    target = rest.rpartition(" ")[0] or rest
    if method == "CONNECT":
        return f"https://{target}", False
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    if headers.get("upgrade") == "websocket" and target.startswith("http:"):
        return "ws" + target[4:], False
    dest = headers.get("sec-fetch-dest")
    return target, dest == "document" or (dest is None and "upgrade-insecure-requests" in headers)


class Refuser:
    """A loopback HTTP proxy that forwards nothing: a context sends it every request its
    bypass list (the allowed origins) does not name, and Chromium's network stack obeys
    the proxy for every request, a redirect's next hop, a WebSocket and a preconnect
    included (Playwright's route handler is never asked about those). It answers
    `204 No Content` to a request for an http URL (a navigation that gets it does not
    happen: the tab stays, as with the route handler's 204; a subresource gets nothing)
    and `403` to a CONNECT (Chromium fails the https or wss request), and calls
    `refused(url, navigation)` first, on the loop thread. One per sandbox, so what it refused is
    that sandbox's."""

    def __init__(self, refused: Callable[[str, bool], None]):
        self.refused = refused
        self._server: asyncio.Server | None = None

    async def url(self) -> str:
        """`http://127.0.0.1:<port>`, listening from the first call on."""
        if self._server is None:
            self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Then the rest of the request (a body) is read until the browser closes, so
        that unread bytes do not turn the close into a reset racing the answer."""
        with contextlib.suppress(Exception):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            self.refused(*refused(head))
            writer.write(NO_TUNNEL if head.startswith(b"CONNECT ") else NO_CONTENT)
            await writer.drain()
            writer.write_eof()
            async with asyncio.timeout(2):
                while await reader.read(65536):
                    pass
        writer.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


@configclass
class BrowserConfig:
    """Which browser runs the pages (shared by sandboxes with the same settings)."""

    executable: str = "/usr/bin/chromium"
    """Chromium binary (Debian's; Playwright's own browser builds cannot be downloaded)."""
    args: tuple[str, ...] = LAUNCH_ARGS
    """Command-line switches."""
    headless: bool = True
    resolve_hosts: bool = False
    """Resolve host names. Off by default: only loopback sites are collected on these
    machines; turn it on to collect from sites with host names."""
    launch_timeout: Annotated[float, Field(gt=0, le=600)] = 30.0
    """Seconds Chromium may take to start."""


def launch_args(config: BrowserConfig) -> list[str]:
    """The switches Chromium starts with: `browser.args`, with one `--disable-features`
    after them that names DISABLED_FEATURES and every feature the args disable (Chromium
    honours the last such switch only: a job's own would switch Playwright's back on)."""
    flag = "--disable-features="
    features = dict.fromkeys(DISABLED_FEATURES)
    for arg in config.args:
        if arg.startswith(flag):
            features.update(dict.fromkeys(f for f in arg[len(flag) :].split(",") if f))
    return [
        *(a for a in config.args if not a.startswith(flag)),
        flag + ",".join(features),
        *(() if config.resolve_hosts else (NO_NAME_RESOLUTION,)),
    ]


class BrowserHost:
    """A Playwright driver and a Chromium on one event-loop thread."""

    def __init__(self, config: BrowserConfig):
        self.config = config
        self.runner = AsyncRunner("worldtrace-web")
        self._pw = None
        self._browser = None
        self._session = None
        self._lock: asyncio.Lock | None = None
        self.launches = 0
        """How many times Chromium was started (a crash makes the next call relaunch)."""

    async def browser(self):
        """The running browser, launched (again) when there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._browser is None or not self._browser.is_connected():
                from playwright.async_api import async_playwright

                if self._pw is None:
                    self._pw = await async_playwright().start()
                c = self.config
                if not os.access(c.executable, os.X_OK) or not os.path.isfile(c.executable):
                    # no retry installs it: the attempt fails and is not retried
                    raise SandboxConfigError(f"no Chromium at {c.executable} (browser.executable)")  # fmt: skip
                self._browser = await self._pw.chromium.launch(
                    executable_path=c.executable,
                    args=launch_args(c),
                    headless=c.headless,
                    timeout=c.launch_timeout * 1000,
                )
                self._session = None
                self.launches += 1
            return self._browser

    async def browser_session(self):
        """A browser-level CDP session (targets of every context), one per launch."""
        browser = await self.browser()
        if self._session is None:
            self._session = await browser.new_browser_cdp_session()
        return self._session

    def close(self, timeout: float = 10.0) -> None:
        async def shut() -> None:
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    await self._browser.close()
            if self._pw is not None:
                with contextlib.suppress(Exception):
                    await self._pw.stop()
            self._browser = self._pw = None

        with contextlib.suppress(Exception):
            self.runner.run(shut(), timeout)
        self.runner.close()


_HOSTS: dict[BrowserConfig, BrowserHost] = {}
_HOSTS_LOCK = threading.Lock()


def shared_host(config: BrowserConfig) -> BrowserHost:
    """The process's host for these browser settings (created on first use)."""
    with _HOSTS_LOCK:
        host = _HOSTS.get(config)
        if host is None or host.runner.loop.is_closed():
            host = _HOSTS[config] = BrowserHost(config)
        return host


@atexit.register
def close_hosts() -> None:
    """Stop every shared browser (at exit, or by a test that wants a cold start)."""
    with _HOSTS_LOCK:
        hosts = list(_HOSTS.values())
        _HOSTS.clear()
    for h in hosts:
        h.close()
