"""Secrets handed to real sandboxes reach no shard (the audit of 2026-12-02): an env value
the terminal prints split by colour codes, a web sandbox's cookies and localStorage, an
MCP server's `set_env` values, and the policy's own API key echoed by a 401."""

from __future__ import annotations

import json
import sys
import textwrap
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.worker import Worker, WorkerConfig

from ..conftest import serving

PLAIN = "plaintokenvalue9876"


def shard_text(raw_dir) -> str:
    """Every string of every raw shard under `raw_dir`, as JSON."""
    rows = [r for f in sorted(raw_dir.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert rows
    return json.dumps(rows, default=str)


@pytest.mark.docker
def test_an_env_value_the_terminal_colours_reaches_no_shard(docker_engine, store, monkeypatch):
    monkeypatch.setenv("MY_PLAIN_TOKEN", PLAIN)
    job = {
        "name": "colour",
        "sandbox": {"kind": "terminal", "docker": {"env": ["MY_PLAIN_TOKEN"]}},
        "retries": 0,
        "tasks": [
            {
                "id": "c",
                "instruction": "grep the environment in colour",
                "actions": [
                    "env | grep --color=always value\n",
                    "printf 'plaintoken\\033[1mvalue9876\\033[0m\\n'\n",
                ],
            }
        ],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    text = shard_text(store.raw)
    assert PLAIN not in text
    first, second = (json.loads(x.observation.state_json)["raw"] for x in t.turns)
    assert "MY_PLAIN_TOKEN=<secret:env_value>" in first and "\x1b[?2004h" in first
    assert "plaintoken" not in first and "9876" not in first  # no piece of it either
    assert "\r<secret:env_value>\x1b[0m\r\n" in second and "\rplaintoken" not in second
    assert t.turns[0].observation.text.splitlines()[1] == "MY_PLAIN_TOKEN=<secret:env_value>"


@pytest.mark.docker
def test_a_token_typed_with_a_correction_reaches_no_shard(docker_engine, store):
    """Found: a key corrected while typing reached the raw stream as readline drew it,
    `ghp_...X\\b\\e[K...`, in pieces no rule matched (`schemas/line_edits.py`)."""
    token = "ghp_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    typed = f"echo {token[:20]}X\x7f{token[20:]} > /dev/null\n"  # X, then Backspace
    job = {
        "name": "typo",
        "sandbox": {"kind": "terminal", "cols": 40},
        "retries": 0,
        "tasks": [{"id": "t", "instruction": "type a token", "actions": [typed]}],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    raw = json.loads(t.turns[0].observation.state_json)["raw"]
    assert raw.startswith("echo <secret:github_token> > /dev/null\r\n")  # edits and all
    text = shard_text(store.raw)
    assert not [token[i : i + 8] for i in range(4, len(token) - 7) if token[i : i + 8] in text]
    assert t.turns[0].observation.text.startswith("echo <secret:github_token> > /dev/null")


@pytest.mark.docker
def test_a_token_typed_over_several_steps_reaches_no_shard(docker_engine, store):
    """Found: keys sent in three steps left a piece of the token in each step's keys,
    screen and raw stream (`Redactor.across_steps`)."""
    token = "ghp_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    keys = ["echo " + token[:14], token[14:30], token[30:] + " > /dev/null\n"]
    actions = [{"keystrokes": k, "duration": 0.3} for k in keys[:-1]] + [keys[-1]]
    job = {
        "name": "steps",
        "sandbox": {"kind": "terminal"},
        "retries": 0,
        "tasks": [{"id": "s", "instruction": "type in steps", "actions": actions}],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.observation.text for x in t.turns[:2]] == [
        "echo <secret:github_token>", "<secret:github_token>"
    ]  # fmt: skip
    text = shard_text(store.raw)
    assert not [token[i : i + 6] for i in range(4, len(token) - 5) if token[i : i + 6] in text]


# -- the web kind: the storage state's values ------------------------------------------
PAGE = """<html><body><h1>Account</h1><p id=c></p><p id=l></p><p id=j></p><script>
document.getElementById('c').textContent = 'cookie: ' + document.cookie;
document.getElementById('l').textContent = 'token: ' + localStorage.getItem('apitoken');
const auth = JSON.parse(localStorage.getItem('auth'));
document.getElementById('j').textContent =
  'signed in: ' + auth.access_token + ' ' + auth.session.token + ' as ' + auth.user;
</script></body></html>"""
AUTH = {"access_token": "at-7Hq2Lm9Xc4Vb8Nz1", "expires_at": 1893456000,
        "session": {"token": "plainSessionTokenValue"}, "user": "roberto"}  # fmt: skip
"""A stored JSON value whose parts a page shows (hunt 12-06b: only the whole value was
redacted, the token it holds reached the shard)."""


@pytest.mark.browser
def test_storage_state_values_the_page_shows_reach_no_shard(store, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text(PAGE)
    handler = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    site = str(tmp_path / "site")
    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=site))
    with serving(server) as url:
        state = {
            "cookies": [{"name": "session", "value": "plainsessioncookie4242abc",
                         "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": False,
                         "secure": False, "sameSite": "Lax"}],
            "origins": [{"origin": url, "localStorage": [
                {"name": "apitoken", "value": "plainlocalstoragetoken777"},
                {"name": "auth", "value": json.dumps(AUTH)}]}],
        }  # fmt: skip
        (tmp_path / "state.json").write_text(json.dumps(state))
        job = {
            "name": "logged-in",
            "sandbox": {"kind": "web", "start_url": f"{url}/index.html",
                        "storage_state": str(tmp_path / "state.json")},
            "retries": 0,
            "tasks": [{"id": "t", "instruction": "look",
                       "actions": [{"tool": "noop", "arguments": {"ms": 10}}]}],
        }  # fmt: skip
        [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    text = shard_text(store.raw)
    assert t.outcome.status == "success"
    assert "plainsessioncookie4242abc" not in text and "plainlocalstoragetoken777" not in text
    assert "cookie: session=<secret:env_value>" in t.system.initial_state
    assert "token: <secret:env_value>" in t.turns[0].observation.text
    assert "at-7Hq2Lm9Xc4Vb8Nz1" not in text and "plainSessionTokenValue" not in text
    shown = "signed in: <secret:env_value> <secret:env_value> as roberto"
    assert shown in t.turns[0].observation.text, t.turns[0].observation.text


# -- the mcp kind with set_env, and the openai policy's key ------------------------------
SERVER = textwrap.dedent(
    """
    import os
    from mcp.server.mcpserver import MCPServer
    app = MCPServer("env")

    @app.tool()
    def show_env() -> str:
        \"\"\"The server's environment.\"\"\"
        return "\\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))

    app.run()
    """
)


class Refuse(BaseHTTPRequestHandler):
    """A chat-completions gateway answering 401 with the key it was sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").split(" ")[-1]
        body = json.dumps({"error": {"message": f"Invalid API key: {key}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_set_env_values_and_the_policys_key_reach_no_shard_jobs_db_or_event(
    store, tmp_path, monkeypatch
):
    key = "gatewaykeyplainvalue8899"
    monkeypatch.setenv("MY_LLM_KEY", key)
    (tmp_path / "srv.py").write_text(SERVER)
    sandbox = {
        "kind": "mcp",
        "command": [sys.executable, str(tmp_path / "srv.py")],
        "set_env": {"SET_ENV_SECRET": "setenvsecretvalue777"},
    }
    tasks = [
        {"id": "env", "instruction": "env", "actions": [{"tool": "show_env", "arguments": {}}]}
    ]
    events: list[dict] = []
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Refuse)) as url:
        js = open_job_store(store.jobs_db)
        js.submit(JobSpec.from_dict({"name": "setenv", "sandbox": sandbox, "tasks": tasks}))
        policy = {"kind": "openai", "base_url": f"{url}/v1", "model": "m", "api_key_env": "MY_LLM_KEY"}  # fmt: skip
        ask = [{"id": "ask", "instruction": "show the environment"}]
        js.submit(JobSpec.from_dict({"name": "pol", "sandbox": sandbox, "policy": policy, "retries": 0, "tasks": ask}))  # fmt: skip
        on_event = lambda event, **info: events.append({"event": event, **info})  # noqa: E731
        Worker(js, store.raw, WorkerConfig(concurrency=1), on_event=on_event).run()
    text = shard_text(store.raw)
    assert "SET_ENV_SECRET=<secret:env_value>" in text and "setenvsecretvalue777" not in text
    assert key not in text and "Invalid API key: <secret:env_value>" in text
    [failed] = [e for e in events if e["event"] == "finished" and e.get("error")]
    assert "HTTP 401" in failed["error"] and key not in failed["error"]
    db = b"".join(p.read_bytes() for p in store.jobs_db.parent.glob("jobs.db*"))
    assert key.encode() not in db and b"Invalid API key: <secret:env_value>" in db
