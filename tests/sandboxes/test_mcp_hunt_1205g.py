"""Found (hunt 1205g, each reproduced with a real server): a valid answer holding a lone
surrogate escape (`"half \\ud83d emoji"`, as Node's JSON.stringify writes a string cut
inside an emoji) was dropped as stdout noise and the call waited out call_timeout (over
HTTP the SDK's own parse error was recorded as the server's answer); what a server wrote
to stderr just before exiting after its answer was missing from the next call's reason;
an answer that is no CallToolResult failed naming no field; a JSON-RPC error's `data`
was dropped.

Tiny real servers written to tmp_path: `raw.py` (stdio) and `rawhttp.py` (streamable
HTTP, JSON or SSE answers) answer a tools/call with `arguments.line` verbatim (`{id}`
filled) or else with `arguments.result`; the stdio one writes `arguments.said` to stderr
before it answers, `arguments.stderr` after, and then exits when `arguments.exit`.
"""

from __future__ import annotations

import json
import sys

import pytest
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
from worldtrace.schemas import Action
from worldtrace.schemas.parsing import parse

from .test_mcp import collect, tool
from .test_mcp_hunt_1204d import tmpdir_root  # noqa: F401  (the fixture)

RAW = """
import json, sys
for line in sys.stdin:
    m = json.loads(line); i = m.get("id"); meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "raw", "inputSchema": {"type": "object"}}]}
    elif meth == "tools/call":
        a = m["params"]["arguments"]
        if a.get("said"):  # while answering: this call's own
            sys.stderr.write(a["said"] + "\\n"); sys.stderr.flush()
        if "line" in a:
            sys.stdout.write(a["line"].replace("{id}", json.dumps(i)) + "\\n"); sys.stdout.flush()
        else:
            print(json.dumps({"jsonrpc": "2.0", "id": i, "result": a.get("result", {"content": []})}), flush=True)
        if a.get("stderr"):
            sys.stderr.write(a["stderr"] + "\\n"); sys.stderr.flush()
        if a.get("exit"):
            sys.exit(3)
        continue
    elif i is None: continue
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": i, "result": r}), flush=True)
"""

RAW_HTTP = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        m = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        i, meth = m.get("id"), m.get("method")
        if i is None:
            self.send_response(202); self.send_header("Content-Length", "0"); self.end_headers(); return
        a = (m.get("params") or {}).get("arguments") or {}
        if meth == "initialize":
            r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "rawhttp", "version": "1"}}
        elif meth == "tools/list":
            r = {"tools": [{"name": "raw", "inputSchema": {"type": "object"}}]}
        else:
            r = a.get("result", {"content": []})
        line = a["line"].replace("{id}", json.dumps(i)) if "line" in a else json.dumps({"jsonrpc": "2.0", "id": i, "result": r})
        data = (f"event: message\\ndata: {line}\\n\\n" if a.get("sse") else line).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if a.get("sse") else "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self.send_response(405); self.send_header("Content-Length", "0"); self.end_headers()
    do_DELETE = do_GET

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

HALF = '{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "half \\ud83d emoji"}]}}'
"""Node's JSON.stringify of `"half " + "😀".slice(0, 1) + " emoji"`."""
ESCAPES = (  # a pair is its character; an escaped backslash before `ud83d` is no escape
    '{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": '
    '"\\ud83d\\ude00 \\\\ud83d \\\\\\ud83d \\ude00\\ud83d"}]}}'
)


@pytest.fixture
def raw(tmp_path) -> list[str]:
    path = tmp_path / "raw.py"
    path.write_text(RAW)
    return ["{python}", str(path)]


@pytest.fixture
def raw_http(tmp_path) -> dict:
    path = tmp_path / "rawhttp.py"
    path.write_text(RAW_HTTP)
    return {"command": ["{python}", str(path), "{port}"], "url": "http://127.0.0.1:{port}/mcp"}


def call(**arguments) -> Action:
    return Action(kind="tool_call", name="raw", arguments_json=json.dumps(arguments))


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}]}


def steps(config: dict, *actions: Action) -> list:
    """Each action's observation, or the SandboxError it raised (then the episode ends)."""
    box = MCPSandbox(parse(MCPConfig, {"protocol": "legacy", "call_timeout": 5, **config}))
    seen: list = []
    try:
        box.reset(TaskSpec("t"))
        for action in actions:
            try:
                seen.append(box.step(action))
            except SandboxError as exc:
                seen.append(exc)
                break
    finally:
        box.close()
    return seen


def test_a_lone_surrogate_escape_is_read_as_a_replacement_character(store, raw, tmpdir_root):  # noqa: F811
    """The answer was dropped as a line that is not JSON-RPC (the SDK's parser refuses a
    lone surrogate), and the call waited out call_timeout: the episode was lost."""
    actions = [tool("raw", line=HALF), tool("raw", line=ESCAPES), tool("raw", result=text("next"))]
    sandbox = {"command": raw, "protocol": "legacy", "call_timeout": 5}
    [t] = collect(store, sandbox, [{"id": "t", "actions": actions}]).trajectories
    assert t.outcome.status == "success", t.outcome
    assert [x.observation.text for x in t.turns] == [
        "half \ufffd emoji",
        "\U0001f600 \\ud83d \\\ufffd \ufffd\ufffd",
        "next",
    ]
    assert not any(x.observation.is_error for x in t.turns)
    assert all(x.observation.state_json is None for x in t.turns)  # no stdout noise


@pytest.mark.parametrize("sse", [False, True])
def test_a_lone_surrogate_escape_over_http_is_the_servers_answer(raw_http, tmpdir_root, sse):  # noqa: F811
    """Over streamable HTTP the SDK's parse error (`MCP error -32700: Failed to parse JSON
    response: ...`) was recorded as the server's answer, `is_error`."""
    seen = steps(raw_http, call(line=HALF, sse=sse), call(result=text("next"), sse=sse))
    assert [(o.text, o.is_error) for o in seen] == [("half \ufffd emoji", False), ("next", False)]


def test_a_servers_last_words_after_its_answer_are_in_the_next_calls_reason(raw, tmpdir_root):  # noqa: F811
    """It answers, writes to stderr at once and exits: the line was in the log before the
    step returned (where the mark was taken), so the reason left it out, every time."""
    seen = steps(
        {"command": raw},
        call(result=text("ok"), stderr="exiting after answering", exit=True),
        call(result=text("never")),
    )
    assert seen[0].text == "ok"
    assert isinstance(seen[1], SandboxError), seen
    assert str(seen[1]) == (
        "tools/call raw: the server closed the connection (it exited, crashed or closed its "
        "stdout); server stderr: exiting after answering"
    )


def test_a_hang_still_leaves_out_an_earlier_calls_own_stderr(raw, tmpdir_root):  # noqa: F811
    """The mark of a hang stays the last answer: what the server said before it is not
    this call's."""
    seen = steps(
        {"command": raw, "call_timeout": 1},
        call(result=text("ok"), said="Traceback: an earlier call's own"),
        call(line="not an answer"),  # no answer to this call: it hangs
    )
    assert seen[0].text == "ok"
    assert isinstance(seen[1], SandboxError), seen
    assert "server stderr" not in str(seen[1]), seen[1]


@pytest.mark.parametrize(
    "result, said",
    [
        (
            {"content": [{"type": "video"}]},
            "(13 validation errors): content/0 is none of TextContent, ImageContent, "
            'AudioContent, ResourceLink, EmbeddedResource: {"type": "video"}',
        ),
        ({}, "(1 validation error): content: Field required"),
        (
            {"content": [{"type": "text", "txt": "typo"}]},
            "(12 validation errors): content/0 (TextContent): text: Field required",
        ),
    ],
)
def test_an_answer_that_is_no_call_result_says_what_is_wrong(raw, tmpdir_root, result, said):  # noqa: F811
    """It read `ValidationError: 13 validation errors for CallToolResult`, naming nothing."""
    [failure] = steps({"command": raw}, call(result=result))
    assert isinstance(failure, SandboxError), failure
    assert str(failure) == f"tools/call raw: the server's answer is no valid CallToolResult {said}"


def test_a_json_rpc_errors_data_is_kept(raw, tmpdir_root):  # noqa: F811
    """The error is the server's answer (an observation, is_error); its `data` was dropped."""
    error = '{"jsonrpc": "2.0", "id": {id}, "error": {"code": -32603, "message": "Internal error", "data": %s}}'
    big = json.dumps({"log": "x" * 5000})
    seen = steps(
        {"command": raw},
        call(line=error % '{"detail": "db connection refused"}'),
        call(line=error % big),
        call(line=error.replace(', "data": %s', "")),
        call(result=text("next")),
    )
    assert [(o.text[:120], o.is_error) for o in seen] == [
        ('MCP error -32603: Internal error (data: {"detail":"db connection refused"})', True),
        ('MCP error -32603: Internal error (data: {"log":"' + "x" * 72, True),
        ("MCP error -32603: Internal error", True),
        ("next", False),
    ]
    assert seen[1].text.endswith("x…)") and len(seen[1].text) < 1100, len(seen[1].text)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
