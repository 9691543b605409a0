"""Shared fixtures: real temp stores and small generated corpora."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.sandboxes.owners import SCOPE_ENV
from worldtrace.schemas import Store

VENV_BIN = Path(sys.executable).parent

SUDO = [] if os.geteuid() == 0 else ["sudo", "-n"]
"""Mounting a tmpfs needs root; set-up has it (it installs Debian packages)."""


@pytest.fixture
def tmpfs(tmp_path):
    """A real 20 MB tmpfs (a disk that fills up, or is remounted read-only)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(
        [
            *SUDO,
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size=20m,uid={os.getuid()},gid={os.getgid()}",
            "tmpfs",
            str(mnt),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"cannot mount a tmpfs (root or sudo, as set-up has): {r.stderr}"
    try:
        yield mnt
    finally:
        subprocess.run([*SUDO, "umount", "-l", str(mnt)], check=True)


def pytest_configure(config: pytest.Config) -> None:
    """Commands started by tests take Ctrl-C as they would on a terminal. A shell starts
    a background job (`make test &`, a CI agent's script) with SIGINT ignored, every
    child inherits that, and the Ctrl-C tests then saw a command ignore it (a `jobs list
    --watch` that never stopped, a `process` run that finished)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Each xdist worker is an installation of its own on the shared engine: the orphans a
    # test leaves on purpose wait for that test's sweep, not the other worker's.
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ[SCOPE_ENV] = f"pytest-{worker}"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty store that exists (reading commands refuse a store that does not)."""
    s = Store.at(tmp_path / "store")
    s.root.mkdir(parents=True)
    return s


@pytest.fixture
def corpus():
    return generate(SyntheticConfig(n=40, seed=3))


def cli_env(store: Path) -> dict[str, str]:
    """An environment whose `worldtrace` is the venv's console script, on `store` (made
    here: a store must exist, or be made with --create)."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["WORLDTRACE_STORE"] = str(store)
    store.mkdir(exist_ok=True)
    return env


def _forked_cli():
    """tests/cli_zygote.py, loaded by its path (the tests are no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "cli_zygote", Path(__file__).with_name("cli_zygote.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A plain run of the console script (its output captured or dropped, no other process
# options) is forked from a process that has loaded it (tests/cli_zygote.py): loading was
# most of a short command's CPU. WT_FORKED_CLI=0 starts each as a user does.
FORKED_CLI = _forked_cli()
REAL_RUN = subprocess.run
if os.environ.get("WT_FORKED_CLI", "1") != "0":
    subprocess.run = FORKED_CLI.routed(REAL_RUN)


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The console script under `env` (`cli_env`, `wt_env`), as a user runs it."""
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def wt_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the installed `worldtrace` console script."""
    return cli_env(tmp_path / "store")


def _engine_error() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure means no usable engine
        return str(exc)
    return None


@pytest.fixture(scope="session")
def docker_engine():
    err = _engine_error()
    if err:
        pytest.fail(f"no docker engine answers ({err}); `make test` starts one via infra/setup.sh")
    import docker

    return docker.from_env()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small host repository for SWE sandboxes."""
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (r / "README.md").write_text("# calc\n")
    return r


def _official_loader(directory: Path) -> tuple[list[tuple[str, list[dict], str]], list[str]]:
    """The evaluation's reading, written from its description: every `*_test.jsonl`; per
    record the system message is `system_str`, then for turns 1..turn_idx-1 user=prompt[i],
    assistant=response[i], then user=prompt[turn_idx-1]; the target is response[turn_idx-1]."""
    items, errors = [], []
    for f in sorted(directory.glob("*_test.jsonl")):
        domain = f.name.removesuffix("_test.jsonl")
        for k, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                r = json.loads(line)
                t = r["turn_idx"]
                if not isinstance(t, int) or not 1 <= t <= len(r["prompt"]):
                    raise ValueError(f"turn_idx {t!r} out of range")
                if not r["task"].endswith(f"/{domain}"):
                    raise ValueError(f"task {r['task']!r} is not of {domain}")
                messages = [{"role": "system", "content": r["system_str"]}]
                for i in range(t - 1):
                    messages.append({"role": "user", "content": r["prompt"][i]})
                    messages.append({"role": "assistant", "content": r["response"][i]})
                messages.append({"role": "user", "content": r["prompt"][t - 1]})
                items.append((r["id"], messages, r["response"][t - 1]))
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                errors.append(f"{f.name}:{k}: {exc}")
    return items, errors


@pytest.fixture
def official_loader():
    """AgentWorldBench's reading of `*_test.jsonl` eval files, written from its description
    (independent of our writer): returns (items, errors)."""
    return _official_loader


class ChatServer:
    """A loopback OpenAI-compatible chat-completions endpoint, for the `openai` policy on
    every kind: each request gets the next of `replies` (assistant messages), or what
    `replies(body)` returns; `requests` keeps {path, auth, body} of each."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, HTTPServer

        self.requests: list[dict] = []
        self.replies: Any = []
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization")
                chat.requests.append({"path": self.path, "auth": auth, "body": body})
                replies = chat.replies
                msg = replies(body) if callable(replies) else replies[len(chat.requests) - 1]
                data = json.dumps(
                    {"id": "x", "object": "chat.completion",
                     "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]}
                ).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"

    @staticmethod
    def call(name: str, **arguments: Any) -> dict:
        """An assistant message calling one tool."""
        fn = {"name": name, "arguments": json.dumps(arguments)}
        return {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": fn}]}  # fmt: skip


def reply(handler, body: str | bytes, status: int = 200, kind: str = "text/html") -> None:
    """An `http.server` handler's whole answer: status, type, length, body."""
    data = body.encode() if isinstance(body, str) else body
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextlib.contextmanager
def serving(server) -> Iterator[str]:
    """An `http.server` bound to 127.0.0.1, served from a thread while the block runs:
    its base URL (no trailing slash)."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing on the test's stderr."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threading loopback server of `handler`, served while the block runs: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    with serving(server) as url:
        yield url


@contextlib.contextmanager
def serving_pages(pages: dict[str, str]) -> Iterator[str]:
    """A loopback site of `pages` (path -> HTML; any other path a 404 page), served while
    the block runs: its base URL."""

    class Handler(QuietHandler):
        def do_GET(self):
            body = pages.get(self.path)
            reply(self, body or "<html><body>no such page</body></html>", 200 if body else 404)

    with serving_handler(Handler) as url:
        yield url


@pytest.fixture
def chat_server():
    chat = ChatServer()
    with serving(chat.server):
        yield chat


def remove_containers(docker_engine, filters: dict) -> None:
    """Remove the containers `filters` selects (and the volumes we made for them), as
    `sweep_orphans` does. A killed run's containers have a dead owner, so a pool started
    meanwhile by a test in another xdist worker sweeps them too: the second remover gets
    404 (gone) or 409 (`removal ... is already in progress`), both fine. Low-level list:
    `containers.list()` inspects each one and raises NotFound for one removed meanwhile."""
    from worldtrace.sandboxes.owners import our_volumes, remove_container

    def left() -> list[dict]:
        return docker_engine.api.containers(all=True, filters=filters)

    for info in left():
        remove_container(docker_engine.api, info["Id"], our_volumes(info.get("Mounts")))
    wait_until(lambda: not left(), timeout=30, what=f"containers {filters} removed")


def start_collect(tmp_path: Path, job: dict[str, Any], env: dict[str, str]) -> subprocess.Popen:
    """`worldtrace collect` of `job` (written as tmp_path/job.yaml), started as a user
    starts it; the caller waits for it (or stops it)."""
    f = tmp_path / "job.yaml"
    f.write_text(json.dumps(job))
    return subprocess.Popen(
        ["worldtrace", "collect", str(f)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition"):
    """Poll `cond` until it is truthy (returns its value) or fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)  # polling interval of a condition with a deadline


def takers(pid: int, sig: int) -> list[int]:
    """The threads of `pid` other than its main one that do not block `sig` (the
    kernel picks one of those when the main thread is busy; C library threads block it),
    oldest first: short-lived ones (a docker stream's) may end while listed (CI, 12-07)."""
    out = []
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        try:
            status = (Path(f"/proc/{pid}/task/{tid}/status")).read_text()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended since listed
            continue
        blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.M).group(1), 16)
        if tid != pid and not blocked >> (sig - 1) & 1:
            out.append(tid)
    return out
