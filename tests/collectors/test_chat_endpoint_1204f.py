"""Found (a new user's walk through the docs, 2026-12-04 night): `android-openai.yaml`
pointed at a port where no chat-completions server ran (another program's web server)
failed every attempt alike, each retried, and said `RuntimeError: chat completions HTTP
501: b'<!DOCTYPE HTML>\\n<html lang="en">...`; with the key's variable unset the policy
sent `Authorization: Bearer ` (no key). Now: an endpoint that is no chat server (404,
405, 501) or refuses the key (401, 403) fails the attempt once (PolicyConfigError), says
the page's text and, when the key's variable is unset, that; a busy server (503) is
retried; no key, no Authorization header.

Real parts: loopback HTTP servers (Python's own http.server for the 501), a real MCP
server for the sandbox, the real collector."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job

from ..conftest import reply, serving

SERVER = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("chat")

@app.tool(annotations={"readOnlyHint": True})
def echo(message: str) -> str:
    return message

app.run("stdio")
"""


class Status(BaseHTTPRequestHandler):
    """Answers every POST with the status in its class, and notes what it was sent."""

    status = 503
    seen: list[dict] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Status.seen.append(dict(self.headers))
        body = json.dumps({"error": {"message": f"status {self.status}"}})
        reply(self, body, self.status, "application/json")

    def log_message(self, *args) -> None:
        pass


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def collect(store, tmp_path, url: str, retries: int = 2):
    (tmp_path / "srv.py").write_text(SERVER)
    job = {
        "name": "chat", "retries": retries,
        "sandbox": {"kind": "mcp", "command": [sys.executable, str(tmp_path / "srv.py")]},
        "policy": {"kind": "openai", "base_url": f"{url}/v1", "model": "m",
                   "api_key_env": "WT_CHAT_1204F_KEY"},
        "tasks": [{"id": "t", "instruction": "Say hi."}],
    }  # fmt: skip
    return run_job(JobSpec.from_dict(job), store.raw)


def test_a_web_server_that_is_no_chat_server_fails_once_saying_its_page(
    store, tmp_path, monkeypatch
):
    monkeypatch.delenv("WT_CHAT_1204F_KEY", raising=False)
    site = tmp_path / "site"
    site.mkdir()
    handler = lambda *a: Quiet(*a, directory=str(site))  # noqa: E731
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        r = collect(store, tmp_path, url)
    [t] = r.trajectories  # one attempt: no retry makes it a chat server
    assert t.outcome.status == "error" and not t.turns
    assert t.outcome.error == (
        f"PolicyConfigError: chat completions at {url}/v1/chat/completions: HTTP 501 "
        "(Unsupported method ('POST')): Error response Error code: 501 Message: Unsupported "
        "method ('POST'). Error code explanation: 501 - Server does not support this "
        "operation."
    )


def test_a_refused_key_whose_variable_is_unset_says_so_and_sends_no_header(
    store, tmp_path, monkeypatch
):
    monkeypatch.delenv("WT_CHAT_1204F_KEY", raising=False)
    monkeypatch.setattr(Status, "status", 401)
    monkeypatch.setattr(Status, "seen", [])
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Status)) as url:
        r = collect(store, tmp_path, url)
    [t] = r.trajectories
    assert t.outcome.error == (
        f"PolicyConfigError: chat completions at {url}/v1/chat/completions: HTTP 401 "
        '(Unauthorized): {"error": {"message": "status 401"}}; WT_CHAT_1204F_KEY (the '
        "policy's api_key_env) is not set on this host"
    )
    assert len(Status.seen) == 1 and "Authorization" not in Status.seen[0]


@pytest.mark.parametrize("status", [503, 429])
def test_a_busy_chat_server_is_retried(store, tmp_path, monkeypatch, status):
    monkeypatch.setenv("WT_CHAT_1204F_KEY", "k-1204f")
    monkeypatch.setattr(Status, "status", status)
    monkeypatch.setattr(Status, "seen", [])
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Status)) as url:
        r = collect(store, tmp_path, url, retries=2)
    assert len(Status.seen) == 3  # the first attempt and two retries
    assert all(h["Authorization"] == "Bearer k-1204f" for h in Status.seen)
    assert r.trajectories[-1].outcome.error.startswith("RuntimeError: chat completions at ")
