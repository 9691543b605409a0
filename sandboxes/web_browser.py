"""One Chromium per process, shared by every web sandbox; a fresh context per episode.

Playwright's async API runs on one `AsyncRunner` loop thread (sandboxes/aio.py): every
call from the synchronous sandbox protocol goes through `runner.run(coro, timeout)`, so
a hung page or browser never hangs the collector, and sandboxes on several worker
threads share the loop, the driver and the browser (Chromium's start is the dominant
cost of a short episode). The sync API would need its own greenlet thread per
sandbox and has no per-call deadline. A browser that crashed or was killed is launched
again by the next `browser()` call; the episode that saw it die fails (SandboxError).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from typing import Annotated

from pydantic import Field
from worldtrace.schemas.parsing import configclass

from .aio import AsyncRunner

LAUNCH_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
"""Debian's Chromium as a headless collector: no background traffic of its own."""
NO_NAME_RESOLUTION = (
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.*, EXCLUDE [::1]"
)
"""Chromium resolves no host name (IP literals and localhost still load): a page, the
link predictor or a background service can then reach no host by name, not even
with a DNS query."""


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
    """The switches Chromium starts with."""
    return [*config.args, *(() if config.resolve_hosts else (NO_NAME_RESOLUTION,))]


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
