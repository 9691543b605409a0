"""A fault-injecting proxy between the MCP client and a real server, driven by a seeded plan.

So that a world model learns how tools fail, a job may ask for faults:

```yaml
sandbox: {kind: mcp, command: [...], faults: {seed: 7, error_rate: 0.1, timeout_rate: 0.05,
          rate_limit_rate: 0.05, truncate_rate: 0.1, latency_ms: 300, page_size: 5}}
```

Per tool call the plan draws at most one answer-changing fault (`error`, `timeout`,
`rate_limit`, `truncate`, at their rates) plus, independently, extra latency. The draw
is a pure function of (seed, task id, call index, tool, arguments), so an episode, and a
replay of it, gets the same faults on every machine. Each injected fault is returned as
the turn's perturbation `{"kind": ..., ...}`; `page_size` serves `tools/list` in pages
(the client must follow the cursors).

The proxy runs in-process around the SDK client's `call_tool`/`list_tools` instead of as
a process on the wire: it hands back the same protocol objects a wire proxy would
(a `CallToolResult`, or the `ErrorData` of a JSON-RPC error), and the flag of each fault
reaches the recorder with the very call it belongs to, with no side channel and no
extra process per episode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from worldtrace.schemas import fields as F
from worldtrace.schemas.parsing import configclass

from .base import SandboxError

Rate = Annotated[float, Field(ge=0, le=1)]
FAULT_KINDS = F.INJECTED_FAULTS
"""Answer-changing faults, in the order their rates are stacked on one uniform draw."""
REQUEST_TIMEOUT = -32001
"""JSON-RPC code the MCP SDKs use for a request that timed out."""
CONNECTION_CLOSED = -32000
"""JSON-RPC code the MCP SDK uses when the transport closed under a pending request."""
FAULT_TASK_ID = "fault_task_id"
"""The `environment.config` key of the task id an episode's fault draw was keyed on: a
replay draws on it whatever its own task's id, so it gets the recording's faults."""
MAX_LIST_PAGES = 100
"""A server whose tools/list cursors never end cannot hang a start."""


@configclass
class FaultConfig:
    """Faults injected between the client and the server (rates are per tool call)."""

    seed: int = 0
    """Seed of the plan: the same seed, task and calls give the same faults."""
    error_rate: Rate = 0.0
    """The call is not forwarded; answered with a tool error (`isError` result)."""
    timeout_rate: Rate = 0.0
    """The call is forwarded (its effects happen) but answered with a JSON-RPC timeout."""
    rate_limit_rate: Rate = 0.0
    """The call is not forwarded; answered with a rate-limit tool error and a retry delay."""
    truncate_rate: Rate = 0.0
    """The call is forwarded and its text content cut to a random 20-80 %."""
    latency_ms: Annotated[int, Field(ge=0, le=60_000)] = 0
    """Upper bound of extra latency before a call is forwarded (uniform 1..latency_ms)."""
    latency_rate: Rate = 1.0
    """Share of calls delayed when `latency_ms` > 0."""
    page_size: Annotated[int, Field(ge=1)] | None = None
    """Serve tools/list in pages of this many tools (None: as the server pages it)."""

    def __post_init__(self) -> None:
        total = self.error_rate + self.timeout_rate + self.rate_limit_rate + self.truncate_rate
        if total > 1 + 1e-9:
            raise ValueError(
                f"error, timeout, rate_limit and truncate rates add up to {total:g} > 1"
            )


@dataclass(frozen=True)
class Fault:
    """What the plan decided for one call."""

    kind: str | None = None
    """One of FAULT_KINDS, or None."""
    latency_ms: int = 0
    keep: float = 1.0
    """Share of the text kept by a `truncate` fault."""
    retry_after_s: int = 0
    """Delay a `rate_limit` answer asks for."""

    def perturbation(self, **extra: Any) -> dict[str, Any] | None:
        """The turn's perturbation flag (None when nothing was injected)."""
        if self.kind is None and not self.latency_ms:
            return None
        flag: dict[str, Any] = {"kind": self.kind or "latency"}
        if self.latency_ms:
            flag["latency_ms"] = self.latency_ms
        if self.kind == "rate_limit":
            flag["retry_after_s"] = self.retry_after_s
        return {**flag, **extra}


class FaultPlan:
    """Seeded decisions: `decide(...)` is a pure function of its arguments and the seed."""

    def __init__(self, config: FaultConfig):
        self.config = config
        c = config
        rates = (c.error_rate, c.timeout_rate, c.rate_limit_rate, c.truncate_rate)
        self._bounds = [sum(rates[: i + 1]) for i in range(len(rates))]

    def decide(self, task_id: str, index: int, tool: str, arguments: Any) -> Fault:
        key = json.dumps([self.config.seed, task_id, index, tool, arguments], sort_keys=True)
        rng = random.Random(hashlib.sha256(key.encode()).digest())
        u, v, keep, retry = rng.random(), rng.random(), rng.uniform(0.2, 0.8), rng.randint(1, 30)
        kind = next((k for k, b in zip(FAULT_KINDS, self._bounds, strict=False) if u < b), None)
        latency = 0
        if self.config.latency_ms and v < self.config.latency_rate:
            latency = 1 + int(rng.random() * self.config.latency_ms)
        return Fault(kind, latency, round(keep, 3), retry)


SDK_LOST = ("Connection closed", "SSE stream ended without a response",
            "SSE stream ended and reconnection attempts were exhausted")  # fmt: skip
"""The errors the SDK makes up (code -32000) for a request whose answer can never come:
the stdio connection closed, or a streamable-HTTP stream that ended or failed
(`mcp.client.streamable_http._resolve_abandoned_request`). A server may answer -32000
itself (the implementation-defined range), so the code alone does not tell."""


SESSION_LOST = "the server lost the MCP session (restarted?)"


class SessionLost(SandboxError):
    """The HTTP server no longer knows our session (it restarted, or dropped it): the SDK
    hands this over as an ordinary JSON-RPC error, which must not pass for an answer."""


def is_transport_failure(code: int, message: str) -> bool:
    """An SDK error meaning the connection is gone (infrastructure), not a server answer."""
    return code == CONNECTION_CLOSED and (
        message in SDK_LOST or message.startswith("SSE stream failed: ")
    )


class FaultProxy:
    """Wraps an SDK `Client`: tools/list in pages, tools/call with the plan's faults.

    `call` takes the call's `decide`d fault and returns (answer, perturbation), the answer
    being a `CallToolResult` or the `ErrorData` of a JSON-RPC error; errors the server
    itself sends still raise, as from the client, so the caller treats injected and real
    answers alike.
    """

    def __init__(self, client, config: FaultConfig | None, session=None):
        self.client = client
        self.config = config
        self.session = session
        """The HTTP session's watch (`mcp_client.SessionWatch`), None over stdio."""
        self.plan = FaultPlan(config) if config else None
        self._listing: list | None = None

    def use(self, config: FaultConfig | None) -> None:
        """The faults of the next episode (a kept server's connection serves several)."""
        self.config = config
        self.plan = FaultPlan(config) if config else None

    async def list_tools(self, cursor: str | None = None):
        import mcp_types as types

        page_size = self.config.page_size if self.config else None
        if page_size is None:
            return await self.client.list_tools(cursor=cursor)
        if self._listing is None or cursor is None:
            self._listing = await list_all_tools(self.client)
        start = int(cursor or 0)
        end = start + page_size
        return types.ListToolsResult(
            tools=self._listing[start:end],
            next_cursor=str(end) if end < len(self._listing) else None,
        )

    def decide(self, name: str, arguments: dict[str, Any], key: tuple[str, int]) -> Fault:
        """The plan's fault for this call (task id and call index in `key`): decided before
        the call, so the caller adds its latency to the time it waits for the answer."""
        return self.plan.decide(key[0], key[1], name, arguments) if self.plan else Fault()

    async def call(self, name: str, arguments: dict[str, Any], fault: Fault, progress):
        import anyio
        import mcp_types as types

        if fault.latency_ms:
            await anyio.sleep(fault.latency_ms / 1000)  # the injected latency itself
        if fault.kind == "error":
            return _tool_error(f"Error executing tool {name}: service temporarily unavailable"), (
                fault.perturbation()
            )
        if fault.kind == "rate_limit":
            text = f"Rate limit exceeded: too many requests. Retry after {fault.retry_after_s} seconds."
            return _tool_error(text), fault.perturbation()
        if fault.kind == "timeout":  # the server does the work; its answer is lost
            from mcp.shared.exceptions import MCPError

            try:
                await self._forward(name, arguments, progress)
            except MCPError as exc:
                if is_transport_failure(exc.code, exc.message):
                    raise
            error = types.ErrorData(code=REQUEST_TIMEOUT, message="Request timed out")
            return error, fault.perturbation()
        result = await self._forward(name, arguments, progress)
        if fault.kind == "truncate":
            result, kept, total = truncate(result, fault.keep)
            return result, fault.perturbation(kept_chars=kept, total_chars=total)
        return result, fault.perturbation()

    async def _forward(self, name: str, arguments: dict[str, Any], progress):
        """The server's answer; an error that says our session is gone raises SessionLost."""
        from mcp.shared.exceptions import MCPError

        try:
            return await self.client.call_tool(name, arguments, progress_callback=progress)
        except MCPError as exc:
            if self.session is not None and self.session.lost_by(exc.message):
                said = f" (HTTP 400: {self.session.refusal})" if self.session.refusal else ""
                raise SessionLost(
                    f"{SESSION_LOST}: MCP error {exc.code}: {exc.message}{said}"
                ) from None
            raise


async def list_all_tools(client) -> list:
    """Every tool of the server, following tools/list cursors."""
    tools, cursor = [], None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise RuntimeError(f"tools/list still had a next cursor after {MAX_LIST_PAGES} pages")


def _tool_error(text: str):
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def truncate(result, keep: float):
    """The result with its text parts cut to `keep` of their length (structured content,
    which would no longer parse, dropped); returns (result, kept chars, total chars)."""
    import mcp_types as types

    texts = [p for p in result.content if isinstance(p, types.TextContent)]
    total = sum(len(p.text) for p in texts)
    budget = kept = int(total * keep)
    parts = []
    for p in result.content:
        if isinstance(p, types.TextContent):
            if budget <= 0:
                break
            parts.append(types.TextContent(type="text", text=p.text[:budget]))
            budget -= len(parts[-1].text)
        else:
            parts.append(p)
    return types.CallToolResult(content=parts, is_error=result.is_error), kept, total


# -- the network boundary (loopback_only) ------------------------------------------------
REFUSAL = "Forbidden by the sandbox: no connections beyond this machine (loopback_only)"
"""The reason phrase and body of the proxy's answer: the agent reads whose refusal it was
(a closed port made it `ConnectError('All connection attempts failed')`, as if the
network were down)."""
MAX_REFUSED = 50
"""Refused targets listed per observation (`egress_refused`); later ones are counted only."""


class EgressRefuser:
    """The proxy a server's `HTTP(S)_PROXY`/`ALL_PROXY` name under `loopback_only`: a
    loopback port that forwards nothing. Each connection is counted as it is accepted
    (`total`), before it is answered `403` (a CONNECT and a plain request alike), so a
    tool call whose answer comes after the refusal already sees it counted: the sandbox
    flags that observation `refused` (`pipelines.mask`: out of the loss), and lists the
    targets (`take`). One per sandbox, on its loop, so what it refused is that sandbox's."""

    def __init__(self) -> None:
        self.total = 0
        self._targets: list[str] = []
        self._server = None
        self._wanted = 0

    async def url(self, port: int = 0) -> str:
        """`http://127.0.0.1:<port>`, listening from the first call on: at `port` (0: any),
        else, when another socket holds it, at one the system picks; moved when a later
        call wants another (a sandbox whose next episode took another folder)."""
        import asyncio

        if self._server is not None and self._wanted != port:
            self._server.close()  # its listening socket: the port is free at once
            self._server = None
        if self._server is None:
            self._wanted = port
            try:  # no SO_REUSEPORT: a port another socket listens at is refused
                self._server = await asyncio.start_server(self._answer, "127.0.0.1", port)
            except OSError:
                self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def take(self) -> list[str]:
        """The targets refused since the last take (`https://host:port` for a CONNECT)."""
        taken, self._targets = self._targets[:MAX_REFUSED], []
        return taken

    async def _answer(self, reader, writer) -> None:
        import asyncio

        self.total += 1
        with contextlib.suppress(Exception):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            self._targets.append(_target(head))
            body = (REFUSAL + "\n").encode()
            writer.write(
                f"HTTP/1.1 403 {REFUSAL}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            writer.write_eof()
            async with asyncio.timeout(2):  # the rest (a body) read: no reset races the answer
                while await reader.read(65536):
                    pass
        writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


def _target(head: bytes) -> str:
    """What a proxy request asks for: its URL, or `https://host:port` for a CONNECT."""
    method, _, rest = head.decode("latin-1").split("\r\n", 1)[0].partition(" ")
    target = rest.rpartition(" ")[0] or rest
    return f"https://{target}" if method == "CONNECT" else target
