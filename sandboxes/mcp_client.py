"""One connection to a real MCP server through the official SDK (`mcp.Client`).

Three ways to reach a server: a command spoken to over stdio (`stdio_client`), a URL
spoken to over streamable HTTP (`streamable_http_client`), or a command we start that
then serves the URL (the process is ours: stopped with its whole process group). The
connection lists every tool (following cursors, through the fault proxy) and gathers
the server's log notifications for the sandbox to attach to the next observation.
Everything here runs on the sandbox's `AsyncRunner` loop; `connect` is held open with
`AsyncRunner.hold` for as long as the server serves episodes. The processes of an
episode (set-up commands, the server, all they start) carry its folder in
`EPISODE_ENV` and end with it (`end_processes`).

A result reads as text (`render`): content parts in order (text as is; images, audio
and resources as one bracketed line each, with their URI, type and size), then the
structured content as canonical JSON unless the text parts already say it by a
convention servers follow (`_carried`: its JSON, or one key around what the parts say, as
the SDK's `{"result": ...}`, compared as JSON values: `true` is not `1`; MCP's binary
blocks in it count as their bracketed lines, never base64); a JSON-RPC error reads
`MCP error CODE: MESSAGE`, as MCP clients show it, and its `data` when it has some
(` (data: {"detail":"db connection refused"})`, compact JSON, at most `ERROR_DATA_CHARS`).

A stdio server's stdout lines that are not JSON-RPC (a banner, a stray print) are
counted and the first few kept (`StdoutNoise`), never logged: the SDK logs each one at
ERROR with a traceback (a server printing in a loop wrote 100,000 lines of them in 5 s).
Its stdout is decoded by our codec (`STDOUT_CODEC`, UTF-8): the SDK's reader stops without
a word at bytes that are not UTF-8, so the codec drops the rest and says why
(`StdoutNoise.broken`), which ends the pending call at once; and it hands the reader whole
lines, which keeps the reader's line split linear (a 40 MB answer in about a second).

A lone surrogate escape in a message (`"half \\ud83d"`: what Node's JSON.stringify writes
for a string cut inside an emoji) is valid JSON that the SDK's parser refuses: the answer
was dropped (stdio: as a line that is not JSON-RPC, and the call waited for its timeout;
HTTP: the SDK's own parse error stood as the server's answer). Each is read as `\\ufffd`
(U+FFFD, as a browser shows it) before the SDK parses the message (`mend_surrogates`:
our stdout codec, and our HTTP client's transport, `_mending_transport`).
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .base import SandboxConfigError, SandboxError, ToolSpec
from .mcp_proxy import FaultConfig, FaultProxy, list_all_tools
from .owners import proc_stat

SERVERS_ENV = "WORLDTRACE_MCP_SERVERS"
"""Folder of the set-up's MCP servers (default: `.mcp-servers` in the project)."""
PROJECT_SERVERS = Path(__file__).resolve().parents[1] / ".mcp-servers"
CLIENT_NAME = "worldtrace"
LOG_LEVEL = "info"
"""Server log messages at or above this level are asked for (2026 protocol opt-in)."""
MAX_NOTES = 200
"""Log and progress notifications kept per observation (later ones are dropped, and the
observation says so: `logs_truncated`, `progress_truncated` in its `state_json`)."""
NOTE_CHARS = 2000
"""Characters kept of one log notification's `data` (compact JSON when it is no string) or
one progress notification's `message`; the rest is cut, flagged as above."""
NOTES_CHARS = 64 << 10
"""Characters of all those kept per observation: past it the note is cut and later ones
dropped (a tool's 10 log notes of 2 MiB each made a 20 MB `state_json`)."""
PORT_POLL_S = 0.05
"""Interval between connection attempts while a started HTTP server comes up."""
SDK_STDIO_LOGGER = "mcp.client.stdio"
PARSE_FAILURE = "Failed to parse JSONRPC message from server"
"""What the SDK logs (ERROR, with the traceback) for every stdout line that is not
JSON-RPC; it has no hook for those lines, so a filter on its logger takes them."""
NOISE_KEPT = 3
"""Non-JSON stdout lines kept word for word (per server, and per observation)."""
NOISE_CHARS = 200
STDOUT_CODEC = "worldtrace_mcp_stdout"
"""UTF-8 that reports bytes it cannot decode to the connection (`_StdoutDecoder`)."""
_ESCAPE = (
    r"\\(?:\\"  # an escaped backslash, skipped whole: `\\ud83d` is no escape
    r"|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a surrogate pair: kept
    r"|(u[dD][89a-fA-F][0-9a-fA-F]{2}))"  # a lone surrogate (group 1)
)
ESCAPES = {str: re.compile(_ESCAPE), bytes: re.compile(_ESCAPE.encode())}
"""The JSON escapes `mend_surrogates` looks at, scanned from the left (a backslash in
JSON text always starts an escape, and `\\` is the one escape that holds another)."""
SURROGATE_HINT = {str: re.compile(r"\\u[dD][89a-fA-F]"), bytes: re.compile(rb"\\u[dD][89a-fA-F]")}
SESSION_HEADER = "mcp-session-id"
HTTP_TIMEOUT_S, HTTP_READ_TIMEOUT_S = 30.0, 300.0
"""The HTTP client's timeouts, as the SDK's own default client has them (a server may hold
a response stream open): ours is made to watch its responses (`SessionWatch`)."""
SESSION_NOT_FOUND = "session not found"
SESSION_REFUSED = ("session id", "not initialized")
"""Words of a 400 answer that refuses our session: the npm servers built on the
TypeScript SDK's examples answer a session id they do not hold with `Bad Request: No
valid session ID provided`, and its transport, restarted, with `Bad Request: Server not
initialized`."""


@dataclass
class StdoutNoise:
    """Lines a stdio server wrote to stdout that are not JSON-RPC: counted, the first
    few kept, for a failure reason and the next observation's `state_json`."""

    total: int = 0
    first: list[str] = field(default_factory=list)
    broken: str | None = None
    """Why stdout can no longer be read (bytes that are not UTF-8): the attempt fails."""
    on_break: Callable[[], None] | None = None
    """Called once when it breaks: the sandbox's pending call is cancelled by it."""
    _new: int = 0
    _new_first: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        line = line[:NOISE_CHARS]
        self.total += 1
        self._new += 1
        if len(self.first) < NOISE_KEPT:
            self.first.append(line)
        if len(self._new_first) < NOISE_KEPT:
            self._new_first.append(line)

    def broke(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason
            if self.on_break is not None:
                self.on_break()

    def take(self) -> dict[str, Any] | None:
        """The lines since the last take, as `{"lines": N, "first": [...]}`, or None."""
        if not self._new:
            return None
        taken = {"lines": self._new, "first": list(self._new_first)}
        self._new, self._new_first = 0, []
        return taken

    def summary(self) -> str:
        shown = ", ".join(repr(x) for x in self.first)
        return (
            f"it wrote {self.total} line(s) to stdout that are not JSON-RPC (first: {shown}); "
            "a stdio server must write only JSON-RPC messages there"
        )


_NOISE: contextvars.ContextVar[StdoutNoise | None] = contextvars.ContextVar(
    "worldtrace_mcp_stdout_noise", default=None
)
"""The collector of the connection whose task logs: `connect` sets it, and the SDK's
stdout reader task, started inside, inherits it."""


class _NoiseFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        noise = _NOISE.get()
        if noise is None or record.msg != PARSE_FAILURE:
            return True  # not one of our connections: the SDK's logging as it is
        noise.add(_bad_line(record.exc_info[1] if record.exc_info else None))
        return False


def _bad_line(exc: BaseException | None) -> str:
    """The offending line, from the pydantic error the SDK logs (its `input`)."""
    errors = getattr(exc, "errors", None)
    try:
        value = errors(include_url=False)[0].get("input") if errors else None
    except (IndexError, TypeError):
        value = None
    if value is None:
        return "?"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def mend_surrogates(text: str | bytes) -> str | bytes:
    """JSON text (or its UTF-8 bytes) with each lone surrogate escape (`\ud83d` that no
    `\udc00`-`\udfff` follows, or such a low half alone) written `\ufffd`; a pair, and an
    escaped backslash before `ud83d`, as they are. Whole JSON strings only: an escape cut
    at the end of `text` is not seen (lines are given: JSON text holds no raw newline
    inside a string)."""
    kind = type(text)
    if SURROGATE_HINT[kind].search(text) is None:  # the common case: one scan, no copy
        return text
    mended = "\\ufffd" if kind is str else b"\\ufffd"
    return ESCAPES[kind].sub(lambda m: mended if m.group(1) else m.group(), text)


class _StdoutDecoder(codecs.IncrementalDecoder):
    """UTF-8 for a stdio server's stdout, handed over in whole lines.

    Strict UTF-8 stops the SDK's reader for good (its drain then waits for the server to
    exit, and the call for its timeout); this one tells the connection's `StdoutNoise`
    and drops everything after, which no one can trust.

    Whole lines: the SDK's reader joins its pending line to every chunk and splits it all
    again (`(buffer + chunk).split("\n")`), quadratic in a line's length: a 30 MB answer
    (one JSON-RPC line) took 26 s, and 40 MB outlasted the default call_timeout. The
    text after the last newline is held here (a list: linear) until its line ends, so the
    reader never carries a pending line. A lone surrogate escape in a line is mended
    (`mend_surrogates`): the SDK's parser would refuse the whole message."""

    def __init__(self, errors: str = "strict"):
        super().__init__(errors)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._noise = _NOISE.get()  # made in the SDK's reader task, which inherits it
        self._held: list[str] = []
        """Decoded text of the line not yet ended."""

    def decode(self, data: bytes, final: bool = False) -> str:
        if self._noise is not None and self._noise.broken is not None:
            return ""
        try:
            text = self._utf8.decode(data, final)
        except UnicodeDecodeError as exc:
            if self._noise is None:
                raise
            bad = bytes(exc.object[max(0, exc.start - 20) : exc.end + 20])
            self._noise.broke(f"the server wrote bytes that are not UTF-8 on stdout: {bad!r}")
            self._held.clear()
            return ""
        end = len(text) if final else text.rfind("\n") + 1
        if not end:
            if text:
                self._held.append(text)
            return ""
        out = "".join((*self._held, text[:end]))
        self._held = [text[end:]] if end < len(text) else []
        return mend_surrogates(out)

    def reset(self) -> None:
        self._utf8.reset()
        self._held.clear()


def _find_codec(name: str) -> codecs.CodecInfo | None:
    if name != STDOUT_CODEC:
        return None
    utf8 = codecs.lookup("utf-8")  # stdin is plain UTF-8
    return codecs.CodecInfo(
        utf8.encode, utf8.decode, incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=_StdoutDecoder, name=STDOUT_CODEC,
    )  # fmt: skip


codecs.register(_find_codec)


def _filter_sdk_stdio_log() -> None:
    log = logging.getLogger(SDK_STDIO_LOGGER)
    if not any(isinstance(f, _NoiseFilter) for f in log.filters):
        log.addFilter(_NoiseFilter())


@dataclass
class SessionWatch:
    """What the streamable HTTP transport saw of our session. A server that restarted
    answers our session id with 404 (the spec's word for a session it no longer has), or
    with 400 and words that say so (`SESSION_REFUSED`); the SDK turns that into a JSON-RPC
    error (`-32600 Session not found` from the body, or its own `Session terminated`) that
    would pass for the server's answer to the call."""

    sent: bool = False
    """A request carried our session id (the server gave one at initialize)."""
    not_found: bool = False
    """A request carrying it was answered 404."""
    refusal: str | None = None
    """The error message of a 400 answer to a request carrying it (a transport's refusal,
    never a tool's answer; the SDK reports only `Server returned an error response`)."""

    async def on_response(self, response) -> None:
        if response.request.headers.get(SESSION_HEADER):
            self.sent = True
            self.not_found = self.not_found or response.status_code == 404
            if response.status_code == 400:
                self.refusal = error_message(await response.aread())

    def lost_by(self, message: str) -> bool:
        """Whether an error answer means our session is gone (then it is nobody's answer)."""
        refused = (self.refusal or "").lower()
        return (
            self.not_found
            or (self.sent and SESSION_NOT_FOUND in message.lower())
            or any(w in refused for w in SESSION_REFUSED)
        )


def error_message(body: bytes) -> str:
    """A JSON-RPC error body's message, else the body's first 200 characters."""
    text = body.decode("utf-8", errors="replace")
    with contextlib.suppress(ValueError, TypeError, KeyError):
        return str(json.loads(text)["error"]["message"])[:200]
    return text[:200]


@dataclass
class NoteList:
    """Notifications (log or progress) not yet attached to an observation, bounded: at most
    `MAX_NOTES`, the text of each (`key`: a log's `data`, a progress `message`) cut to
    `NOTE_CHARS` and all of them to `NOTES_CHARS`; `cut` says whether anything was."""

    key: str
    items: list[dict[str, Any]] = field(default_factory=list)
    chars: int = 0
    cut: bool = False

    def add(self, note: dict[str, Any]) -> None:
        left = min(NOTE_CHARS, NOTES_CHARS - self.chars)
        if len(self.items) >= MAX_NOTES or left <= 0:
            self.cut = True
            return
        value, size, cut = bounded(note.get(self.key), left)
        self.items.append({**note, self.key: value})
        self.chars += size
        self.cut = self.cut or cut

    def take(self) -> tuple[list[dict[str, Any]], bool]:
        """The notes since the last take, and whether any was cut or dropped."""
        taken = self.items, self.cut
        self.items, self.chars, self.cut = [], 0, False
        return taken


def bounded(value: Any, cap: int) -> tuple[Any, int, bool]:
    """(`value` or its text cut to `cap` characters, its size, whether it was cut): a
    string as it is, anything else as compact JSON (cut, it is no JSON: kept as text)."""
    if value is None:
        return None, 0, False
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) <= cap:
        return value, len(text), False
    return text[:cap], cap, True


@dataclass
class StartStage:
    """What a start is waiting for, so that one past start_timeout says so (and which
    setting to raise) rather than `no answer in time`. Set as the client sends its
    handshake's requests (`StreamWatch`), so it names the one that is pending."""

    now: str = "the server process to start"
    where: str = "stdio"
    start_timeout: float = 30.0
    probe: tuple[Any, float] | None = None
    """The request id of the `server/discover` probe (`protocol: auto`) and when it was
    sent, until an answer to it comes."""
    probe_unanswered: float | None = None
    """Seconds the probe waited before the client fell back to initialize with no answer
    from the server (the SDK's probe timeout): every start of this server waits that long."""

    def sent(self, request) -> None:
        method = request.method
        if method == "server/discover":
            from mcp.client.session import DISCOVER_TIMEOUT_SECONDS as wait

            self.probe = request.id, time.monotonic()
            hint = (
                f" (the SDK waits {wait:g} s for it, then falls back to initialize)"
                if self.start_timeout <= wait
                else ""
            )
            self.now = (
                f"its answer to server/discover ({self.where}), the probe of `protocol: auto` "
                f"for the 2026 protocol{hint}; a server that does not answer it (not even with "
                "an error) starts with `protocol: legacy`"
            )
        elif method == "initialize":
            if self.probe is not None:  # the probe timed out: the SDK fell back
                self.probe_unanswered = round(time.monotonic() - self.probe[1], 3)
                self.probe = None
            self.now = f"its answer to initialize ({self.where})"
        else:
            self.now = f"its answer to {method}"

    def answered(self, message) -> None:
        if self.probe is not None and getattr(message, "id", None) == self.probe[0]:
            self.probe = None


@dataclass
class StreamWatch:
    """What passes the connection's streams (`_watched`): the handshake's requests, for
    `StartStage`; and whether the server's stream ended (`ended`): a stdio server that
    closed its stdout (it exited or crashed), seen even between calls."""

    stage: StartStage
    stdio: bool = True
    ended: bool = False
    """The read stream ended (stdio: the server's stdout closed)."""


class _Watched:
    """An SDK transport stream that `StreamWatch` looks through: everything but what a
    subclass watches goes to the stream itself."""

    def __init__(self, stream, watch: StreamWatch) -> None:
        self._stream, self._watch = stream, watch

    def __getattr__(self, name: str) -> Any:  # `last_context` of the SDK's context streams
        return getattr(self._stream, name)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)


class _SentWatch(_Watched):
    """The client's write stream, telling `StreamWatch` what requests go out."""

    async def send(self, item, /) -> None:
        message = getattr(item, "message", None)
        if (
            getattr(message, "method", None) is not None
            and getattr(message, "id", None) is not None
        ):
            self._watch.stage.sent(message)
        await self._stream.send(item)


class _ReadWatch(_Watched):
    """The client's read stream, telling `StreamWatch` when it ends and what the probe got."""

    async def receive(self):
        import anyio

        try:
            item = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._watch.ended = True
            raise
        if self._watch.stage.probe is not None:
            self._watch.stage.answered(getattr(item, "message", None))
        return item

    def __aiter__(self) -> _ReadWatch:
        return self

    async def __anext__(self):
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


@contextlib.asynccontextmanager
async def _watched(transport, watch: StreamWatch) -> AsyncIterator[tuple[Any, Any]]:
    """`transport` (an SDK transport) with its streams watched (`StreamWatch`)."""
    async with transport as (read, write):
        yield _ReadWatch(read, watch), _SentWatch(write, watch)


@dataclass(frozen=True)
class ServerSpec:
    """A server to reach, with every placeholder already expanded."""

    argv: tuple[str, ...] = ()
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    protocol: str = "auto"
    stderr_path: Path | None = None
    """Where the server's stderr (and a started HTTP server's stdout) goes."""
    start_timeout: float = 30.0
    faults: FaultConfig | None = None
    stdout_noise: StdoutNoise = field(default_factory=StdoutNoise, compare=False)
    """Filled while the connection lives (stdio only): what it wrote that is not JSON-RPC."""
    stage: StartStage = field(default_factory=StartStage, compare=False)
    """Set by `connect` as the start goes on."""


@dataclass
class Connection:
    client: Any
    """The SDK's `mcp.Client`, entered."""
    proxy: FaultProxy
    tools: list
    """`mcp_types.Tool` of every tool the server lists."""
    server: str
    """Name and version the server reports."""
    protocol_version: str
    instructions: str | None
    logs: NoteList = field(default_factory=lambda: NoteList("data"))
    """Log notifications not yet attached to an observation (the client's logging
    callback adds to this very list)."""
    watch: StreamWatch | None = None
    process: Any = None
    """The server process we started to serve a URL (None: stdio, whose process the SDK
    holds, or a server someone else runs)."""

    def take_logs(self) -> tuple[list[dict[str, Any]], bool]:
        """The log notes since the last take, and whether any was cut or dropped."""
        return self.logs.take()

    def gone(self) -> str | None:
        """Why the server is known to be gone (on the loop: between calls, a kept server),
        or None: its stdout ended (stdio), or the process we started for its URL exited.
        A server someone else runs at its URL is never known gone here."""
        code = getattr(self.process, "returncode", None)
        if code is not None:
            return f"the server exited with code {code}"
        if self.watch is not None and self.watch.stdio and self.watch.ended:
            return "the server closed the connection (it exited, crashed or closed its stdout)"
        return None


@contextlib.asynccontextmanager
async def connect(spec: ServerSpec) -> AsyncIterator[Connection]:
    """Start (or reach) the server, initialize, list its tools; close it all on exit."""
    import httpx2  # the SDK's HTTP client library
    from mcp import Client, Implementation, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    logs = NoteList("data")
    _filter_sdk_stdio_log()
    _NOISE.set(spec.stdout_noise)  # this task's context, inherited by the SDK's reader

    async def on_log(params) -> None:
        logger = params.logger[:NOISE_CHARS] if params.logger else params.logger
        logs.add({"level": params.level, "logger": logger, "data": params.data})

    async with contextlib.AsyncExitStack() as stack:
        errlog = stack.enter_context(open(spec.stderr_path or "/dev/null", "a", encoding="utf-8"))  # noqa: SIM115
        session, process = None, None
        if spec.url is None:
            params = StdioServerParameters(
                command=spec.argv[0],
                args=list(spec.argv[1:]),
                env=spec.env,
                cwd=spec.cwd,
                encoding=STDOUT_CODEC,
            )
            transport = stdio_client(params, errlog=errlog)
        else:
            if spec.argv:
                process = await stack.enter_async_context(http_server(spec, errlog))
            session = SessionWatch()
            timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S)
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    timeout=timeout,
                    event_hooks={"response": [session.on_response]},
                    transport=_mending_transport(),
                    headers={"accept-encoding": "identity"},  # mended as sent: not packed
                )
            )
            transport = streamable_http_client(spec.url, http_client=http)
        # the stage is named as the SDK sends each request (`protocol: auto` probes with
        # server/discover first): it said initialize while the probe went unanswered
        spec.stage.where = f"at {spec.url}" if spec.url else "stdio"
        spec.stage.start_timeout = spec.start_timeout
        watch = StreamWatch(spec.stage, stdio=spec.url is None)
        client = await stack.enter_async_context(
            Client(
                _watched(transport, watch),
                mode=spec.protocol,
                logging_callback=on_log,
                log_level=LOG_LEVEL,
                cache=None,
                client_info=Implementation(name=CLIENT_NAME, version="1"),
            )
        )
        # the server's answer is the observation even when it breaks the tool's own output
        # schema: the SDK's check (`ClientSession.validate_tool_result`) would make a buggy
        # server's real answer a failure of ours, on every attempt
        client.session.validate_tool_result = _answer_as_given
        proxy = FaultProxy(client, spec.faults, session)
        spec.stage.now = "its answer to tools/list"
        tools = await list_all_tools(proxy)
        info = client.server_info
        server = " ".join(x for x in (info.name, info.version) if x) if info else ""
        conn = Connection(
            client, proxy, tools, server, client.protocol_version, client.instructions,
            logs, watch, process,
        )  # fmt: skip
        yield conn


def _mending_transport():
    """httpx's own transport, whose response bodies (a JSON answer, an SSE stream) reach
    the SDK with lone surrogate escapes mended (`mend_surrogates`), line by line as they
    come (an SSE event is never held back); a body the server compressed all the same
    is left as it is."""
    import httpx2

    class Mended(httpx2.AsyncByteStream):
        def __init__(self, stream) -> None:
            self._stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            held: list[bytes] = []  # the line not yet ended (a list: linear)
            async for chunk in self._stream:
                end = chunk.rfind(b"\n") + 1
                if not end:
                    held.append(chunk)
                    continue
                out = b"".join((*held, chunk[:end]))
                held = [chunk[end:]] if end < len(chunk) else []
                yield mend_surrogates(out)
            if held:
                yield mend_surrogates(b"".join(held))

        async def aclose(self) -> None:
            await self._stream.aclose()

    class Mending(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request):
            response = await super().handle_async_request(request)
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                return response
            response.stream = Mended(response.stream)
            return response

    return Mending()


async def _answer_as_given(name: str, result: Any) -> None:
    """`validate_tool_result` that checks nothing (see `connect`)."""


@contextlib.asynccontextmanager
async def http_server(spec: ServerSpec, errlog) -> AsyncIterator[Any]:
    """Run `spec.argv` in its own process group until the URL's port accepts connections."""
    import anyio
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree

    parts = urlsplit(spec.url or "")
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    proc = await anyio.open_process(
        list(spec.argv),
        env={**get_default_environment(), **spec.env},
        cwd=spec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=errlog,
        stderr=errlog,
        start_new_session=True,
    )
    spec.stage.now = (
        f"{host}:{port} to accept connections (the command runs: does it serve that port?)"
    )
    try:
        with anyio.fail_after(spec.start_timeout):
            while True:
                if proc.returncode is not None:
                    raise SandboxError(f"the server exited with code {proc.returncode}")
                try:
                    stream = await anyio.connect_tcp(host, port)
                except OSError:
                    await anyio.sleep(PORT_POLL_S)  # polled until the deadline above
                    continue
                await stream.aclose()
                break
        yield proc
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                await terminate_posix_process_tree(proc, 2.0)
            with anyio.move_on_after(2.0):
                await proc.wait()


# -- the processes of an episode ---------------------------------------------------------
EPISODE_ENV = "WORLDTRACE_MCP_EPISODE"
"""Set, to the episode's folder, for every process an MCP episode starts (its set-up
commands, the server): what they start inherits it, through setsid, double forks and
nohup, so the episode's processes are found and killed when it ends (`end_processes`)."""
SETUP_ENV = "WORLDTRACE_MCP_SETUP"
"""Also set (`1`) for the set-up commands: the end of a kept server's episode ends only
theirs."""
_TAG_RE = re.compile(rb"(?:^|\0)" + EPISODE_ENV.encode() + rb"=([^\0]*)")
_SETUP_ENTRY = b"\0" + SETUP_ENV.encode() + b"=1\0"
KILL_PASSES = 100
"""Scans of /proc before the kill: each stops what the last one found (a stopped process
forks no more), so the next finds only children forked before their parent stopped."""
DEATH_WAIT_S = 5.0
"""Seconds `end_processes` waits for the killed processes to be gone."""


@dataclass(frozen=True)
class _Proc:
    ppid: int
    tag: str | None
    """Its `EPISODE_ENV` value (from /proc/PID/environ: the environment it was started with)."""
    setup: bool


def _read_proc(pid: int, uid: int) -> _Proc | None:
    """A live process of user `uid`, or None (another user's, a zombie, gone)."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return None
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:
        return None
    fields = proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    m = _TAG_RE.search(environ)
    tag = m.group(1).decode("utf-8", "surrogateescape") if m else None
    return _Proc(int(fields[1]), tag, _SETUP_ENTRY in b"\0" + environ + b"\0")


def _processes() -> dict[int, _Proc]:
    """This user's live processes, but this one and its ancestors (never ours to end)."""
    uid, procs = os.getuid(), {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (p := _read_proc(int(name), uid)) is not None:
            procs[int(name)] = p
    pid = os.getpid()
    while (p := procs.pop(pid, None)) is not None:
        pid = p.ppid
    return procs


def episode_tags(prefix: str) -> dict[str, int]:
    """The `EPISODE_ENV` values starting with `prefix` that live processes of this user
    carry, and how many carry each (one scan of /proc)."""
    found: dict[str, int] = {}
    for p in _processes().values():
        if p.tag is not None and p.tag.startswith(prefix):
            found[p.tag] = found.get(p.tag, 0) + 1
    return found


def _episode(procs: dict[int, _Proc], tag: str, setup_only: bool) -> set[int]:
    """The processes carrying `tag` (only set-up commands': `setup_only`) and every live
    descendant of theirs: one that cleared its environment (`env -i`) is found through its
    parent, while that lives."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    stack = [pid for pid, p in procs.items() if p.tag == tag and (p.setup or not setup_only)]
    found: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def end_processes(tag: str, setup_only: bool = False) -> int:
    """SIGKILL every live process of this user that an episode started (`EPISODE_ENV` is
    `tag`; `setup_only`: its set-up commands' only) and all they started; returns how many.

    Each scan of /proc stops (SIGSTOP) what it finds, so the tree holds still (a stopped
    process forks no more, and a child keeps its stopped parent, through which one that
    cleared its environment is found) until a scan finds nothing new; then all are killed
    and waited for (their pidfds: a pid reused meanwhile is never signalled). Limits: a
    process that cleared its environment (`env -i`, an explicit execve environment) and
    whose parent exited is no longer found; nor one that moved to another user."""
    uid, held = os.getuid(), {}  # pid -> pidfd (None: no pidfd here, signalled by pid)
    try:
        for _ in range(KILL_PASSES):
            procs = _processes()
            new = _episode(procs, tag, setup_only) - held.keys()
            if not new:
                break
            for pid in sorted(new):
                fd = _pidfd(pid)
                if fd == -1:
                    continue  # gone
                p = _read_proc(pid, uid)  # the pidfd's process, unless the pid was reused
                tagged = p is not None and p.tag == tag and (p.setup or not setup_only)
                if not (tagged or (p is not None and (p.ppid in held or p.ppid in new))):
                    _close(fd)
                    continue
                held[pid] = fd
                _signal(pid, fd, signal.SIGSTOP)
        for pid, fd in held.items():
            _signal(pid, fd, signal.SIGKILL)
        _wait_gone([fd for fd in held.values() if fd is not None], DEATH_WAIT_S)
    finally:
        for fd in held.values():
            _close(fd)
    return len(held)


def _pidfd(pid: int) -> int | None:
    """A pidfd for `pid`; -1 when it is gone; None when this kernel has none."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except (AttributeError, OSError):
        return None


def _signal(pid: int, fd: int | None, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if fd is None:
            os.kill(pid, sig)
        else:
            signal.pidfd_send_signal(fd, sig)


def _close(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        os.close(fd)


def _wait_gone(fds: list[int], timeout: float) -> None:
    """Until each pidfd's process has exited (its pidfd reads readable), up to `timeout`."""
    import select

    poll, left = select.poll(), set(fds)
    for fd in fds:
        poll.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    while left and (wait := deadline - time.monotonic()) > 0:
        for fd, _ in poll.poll(wait * 1000):
            poll.unregister(fd)
            left.discard(fd)


def find_command(name: str) -> str:
    """Absolute path of the server's executable: a path as given (relative to the current
    directory), a bare name on PATH, beside this interpreter (the `mcp-servers` extra),
    then in the set-up's server folder ($WORLDTRACE_MCP_SERVERS or the project's
    `.mcp-servers`: `bin/`, `node_modules/.bin/`, which run node directly).
    SandboxConfigError when there is none: a job's mistake, which no retry mends."""
    if "/" in name:
        path = Path(os.path.abspath(os.path.expanduser(name)))  # symlinks kept: a venv python
        if not path.exists():
            raise SandboxConfigError(f"MCP server command {name!r} does not exist")
        return str(path)
    servers = Path(os.environ.get(SERVERS_ENV) or PROJECT_SERVERS)
    dirs = [
        os.environ.get("PATH", ""),
        str(Path(sys.executable).parent),
        str(servers / "bin"),
        str(servers / "node_modules" / ".bin"),
    ]
    found = shutil.which(name, path=os.pathsep.join(dirs))
    if found is None:
        raise SandboxConfigError(  # no retry installs it: the attempt is not retried
            f"MCP server command {name!r} not found on PATH, beside {sys.executable} or in "
            f"{servers} (infra/setup.sh installs the known servers)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


SERVER_LOG_CAP = 8 << 20
"""Bytes a server's stderr log may hold (`cap_log`): a chatty server kept across episodes
(`keep_server`) would otherwise grow it in the temp dir without bound."""
SERVER_LOG_KEEP = 1 << 20
"""What `cap_log` keeps of it: its end, where `stderr_tail` reads a failure's reason."""


def cap_log(path: Path | None, cap: int = SERVER_LOG_CAP, keep: int = SERVER_LOG_KEEP) -> bool:
    """Cut the server log at `path` to its last `keep` bytes once it holds more than `cap`;
    whether it was cut. The server holds it open in append mode (inherited: O_APPEND), so
    it writes on at the new end; what it writes between our read and the truncation is
    lost, and what it writes before our own append comes first (a log's matter, not the
    data's: the log only gives failure reasons)."""
    try:
        if path is None or path.stat().st_size <= cap:
            return False
        with open(path, "rb") as fh:
            fh.seek(-keep, os.SEEK_END)
            tail = fh.read()
        os.truncate(path, 0)
        with open(path, "ab") as fh:
            fh.write(tail[tail.find(b"\n") + 1 :])  # from a whole line on
    except OSError:  # gone with its folder, or the disk is full: nothing to keep then
        return False
    return True


def stderr_tail(path: Path | None, lines: int = 5, chars: int = 600, since: int = 0) -> str:
    """The last lines the server wrote to stderr, for a failure reason; `since`: from that
    byte of the log on (`log_size` taken earlier; the whole log once `cap_log` cut it)."""
    try:
        with open(path or os.devnull, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(since if since <= end else 0, end - 8192))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:  # gone with its folder
        return ""
    tail = [x.strip() for x in text.splitlines() if x.strip()][-lines:]
    return " | ".join(tail)[-chars:]


def log_size(path: Path | None) -> int:
    """Bytes in the server's stderr log now: where `stderr_tail(since=)` reads from."""
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:  # gone with its folder
        return 0


def invalid_answer(exc: BaseException) -> str | None:
    """What is wrong with an answer the SDK could not read as its result type (a pydantic
    ValidationError), briefly, or None for any other error. Its own message counts the
    errors and names no field (`13 validation errors for CallToolResult`): a content block
    of an unknown type fails each member of the union once. Said here: the first place,
    and for a union the members it fits none of, with what it holds."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    title, found = exc.title, exc.errors(include_url=False)
    if not found:
        return None
    first, count = found[0], len(found)
    loc = tuple(first.get("loc") or ())
    # a union's members are named in the location (`content/0/TextContent/type`)
    at = next((i for i, k in enumerate(loc) if isinstance(k, str) and k[:1].isupper()), None)
    said = f"{count} validation error{'s' if count != 1 else ''}"
    if at is None:
        where = "/".join(map(str, loc)) or "the result"
        return f"the server's answer is no valid {title} ({said}): {where}: {first.get('msg')}"
    where = "/".join(map(str, loc[:at])) or "the result"
    here = [e for e in found if tuple(e["loc"][:at]) == loc[:at] and len(e["loc"]) > at]
    members = list(dict.fromkeys(e["loc"][at] for e in here))
    typed = [  # the member its `type` names (`text`: TextContent), if one does
        m for m in members
        if not any(e["loc"][at:] == (m, "type") and e["type"] == "literal_error" for e in here)
    ]  # fmt: skip
    if len(typed) == 1 and len(members) > 1:
        e = next(e for e in here if e["loc"][at] == typed[0])
        inner = "/".join(map(str, e["loc"][at + 1 :])) or typed[0]
        return (
            f"the server's answer is no valid {title} ({said}): {where} ({typed[0]}): "
            f"{inner}: {e.get('msg')}"
        )
    held = next(  # a missing field's input is the object that lacks it: the one at `where`
        (e.get("input") for e in found if e["type"] == "missing" and len(e["loc"]) == at + 2),
        None,
    )
    shown = f": {json.dumps(held, default=str)[:200]}" if isinstance(held, dict) else ""
    return (
        f"the server's answer is no valid {title} ({said}): {where} is none of "
        f"{', '.join(map(str, members))}{shown}"
    )


def root_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap failures in them)."""
    while getattr(exc, "exceptions", None):  # BaseExceptionGroup (3.11+ or the backport)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


# -- rendering --------------------------------------------------------------------------
def dump(model) -> Any:
    """A protocol object as it is on the wire (JSON names, nothing unset)."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def tool_spec(tool) -> ToolSpec:
    """An MCP `Tool` as our ToolSpec (name, description, schemas, annotations)."""
    return ToolSpec.from_dict(dump(tool))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


ERROR_DATA_CHARS = 1000
"""Characters of a JSON-RPC error's `data` (compact JSON) its observation keeps."""


def render(answer, cap: int) -> tuple[str, bool, bool]:
    """(text, is_error, truncated) of a CallToolResult or of a JSON-RPC ErrorData."""
    import mcp_types as types

    if isinstance(answer, types.ErrorData):
        text, is_error = f"MCP error {answer.code}: {answer.message}", True
        if answer.data is not None:  # what the server says went wrong: it was dropped
            data = json.dumps(answer.data, ensure_ascii=False, separators=(",", ":"), default=str)
            cut = data[: ERROR_DATA_CHARS - 1] + "…" if len(data) > ERROR_DATA_CHARS else data
            text += f" (data: {cut})"
    else:
        parts = [render_part(p) for p in answer.content]
        structured = _without_blobs(answer.structured_content)
        if structured is not None and not _carried(structured, parts, answer.content):
            parts.append(canonical(structured))
        text, is_error = "\n".join(parts), bool(answer.is_error)
    if len(text) > cap:
        return text[:cap], is_error, True
    return text, is_error, False


def _size(data: str | bytes) -> int:
    """Bytes of base64 `data` once decoded (its `=` padding is not data), without
    decoding it; bytes as they are."""
    if isinstance(data, bytes | bytearray):
        return len(data)
    text = "".join(data.split())
    return len(text) * 3 // 4 - (len(text) - len(text.rstrip("=")))


def render_part(part) -> str:
    """One content part as text (dispatch on the wire `type`: cheaper than isinstance on
    pydantic models, and it is what the protocol defines)."""
    kind = getattr(part, "type", None)
    if kind == "text":
        return part.text
    if kind in ("image", "audio"):
        return f"[{kind}: {part.mime_type}, {_size(part.data)} bytes]"
    if kind == "resource_link":
        desc = f" - {part.description}" if part.description else ""
        return f"[resource link: {part.uri} ({part.name}){desc}]"
    if kind == "resource":
        r = part.resource
        if getattr(r, "text", None) is not None:
            return f"[resource: {r.uri}]\n{r.text}"
        return f"[resource: {r.uri}, {r.mime_type or 'binary'}, {_size(r.blob)} bytes]"
    return canonical(dump(part))


BASE64_RE = re.compile(r"[A-Za-z0-9+/\s]*={0,2}\s*")
"""Base64 as MCP's binary fields hold it (whitespace tolerated, as MIME writes it)."""
BINARY_KEYS = {
    "image": frozenset({"type", "data", "mimeType", "annotations", "_meta"}),
    "audio": frozenset({"type", "data", "mimeType", "annotations", "_meta"}),
    "blob": frozenset({"uri", "blob", "mimeType", "_meta"}),
}
"""The keys MCP's ImageContent, AudioContent and BlobResourceContents may have."""


def _without_blobs(value: Any, resource: bool = False) -> Any:
    """Structured content with each MCP binary block (ImageContent or AudioContent with
    its base64 `data`, BlobResourceContents with its base64 `blob`) as the bracketed line
    `render_part` makes of it. Servers mirror their content parts there
    (server-filesystem's `read_media_file`: `{"content": [{"type": "image", "data":
    ...}]}`), and the canonical JSON put a photo's base64 into the observation, up to
    output_cap; so mirrored, it is carried by the parts.

    Only those shapes, where they can be: a typed content block anywhere (its `type` says
    what it is), untyped resource contents as an embedded resource's `resource` or in a
    list (a read's `contents`), each with nothing but the spec's keys and base64 in it. A
    blob store's listing (`{"container": ..., "blob": "2024/cat.jpg"}`) is data, and was
    replaced by a made-up `[resource: None, binary, 9 bytes]`. `resource`: `value` is in
    one of the places untyped resource contents can be."""
    if isinstance(value, list):
        return [_without_blobs(v, True) for v in value]
    if not isinstance(value, dict):
        return value
    kind, mime = value.get("type"), value.get("mimeType")
    if kind in ("image", "audio") and _binary(value, "data", BINARY_KEYS[kind], required=True):
        return f"[{kind}: {mime}, {_size(value['data'])} bytes]"
    if (
        resource
        and _binary(value, "blob", BINARY_KEYS["blob"])
        and isinstance(value.get("uri"), str)
    ):
        return f"[resource: {value['uri']}, {mime or 'binary'}, {_size(value['blob'])} bytes]"
    return {k: _without_blobs(v, kind == "resource" and k == "resource") for k, v in value.items()}


def _binary(value: dict, field: str, keys: frozenset[str], required: bool = False) -> bool:
    """Whether `value` has only `keys`, base64 text in `field` and a string mimeType
    (`required`: it must have one)."""
    mime = value.get("mimeType")
    return (
        value.keys() <= keys
        and (isinstance(mime, str) if required or mime is not None else True)
        and isinstance(value.get(field), str)
        and BASE64_RE.fullmatch(value[field]) is not None
    )


def _carried(value: Any, parts: list[str], content: list) -> bool:
    """Whether the content parts already say the structured content, by a convention
    servers follow: a part is its JSON (the spec's advice; the SDK's MCPServer for a
    returned dict or model), or it is an object of one key around what the parts say (the
    SDK's `{"result": ...}` of a str, number or list return, a list's items one part each;
    server-filesystem's `{"content": text}` and its mirror of the parts, server-memory's
    `{"entities": [...]}`). Values that merely occur in the text do not: `ok: 3 of 30`
    does not say `{"done": 3, "total": 30, "failed": 3}`."""
    if not parts:
        return False
    forms = [(p, _json(p)) for p in parts]  # each part as text and as the JSON it holds
    mirror = _without_blobs([dump(c) for c in content])

    def said(v: Any) -> bool:
        each = isinstance(v, list) and len(v) == len(forms)
        return (
            same(v, mirror)
            or any(_in(v, f) for f in forms)
            or (each and all(_in(x, f) for x, f in zip(v, forms, strict=True)))
        )

    inner = [*value.values()] if isinstance(value, dict) and len(value) == 1 else []
    return said(value) or any(said(v) for v in inner)


def _in(value: Any, forms: tuple[str, Any]) -> bool:
    return any(same(value, f) for f in forms)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is no number, as Python's `True == 1` has it (the text
    `{"active": 1}` said `{"active": true}`, which was dropped); numbers compare by value
    (`2.0` is `2`), objects and arrays member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


_NOT_JSON = object()


def _json(text: str) -> Any:
    """The JSON value `text` holds, else `_NOT_JSON` (which equals nothing)."""
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def scalars(value: Any):
    """Every non-null leaf of a JSON value (dicts, lists), in order."""
    if isinstance(value, dict):
        for v in value.values():
            yield from scalars(v)
    elif isinstance(value, list):
        for v in value:
            yield from scalars(v)
    elif value is not None:
        yield value
