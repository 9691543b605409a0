"""What `worldtrace demo` needs for the MCP and search domains: job dicts for real
servers, and the one service they rely on (a static site on loopback for the fetch
server, serving Debian's git-doc pages).

    jobs, stop = demo_jobs(Path("worldtrace-data/demo-mcp"))
    try:
        for job in jobs:
            run_job(JobSpec.from_dict(job), store.raw)
    finally:
        stop()
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GIT_DOC = Path("/usr/share/doc/git-doc")
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "worldtrace", "GIT_AUTHOR_EMAIL": "worldtrace@example.com",
    "GIT_COMMITTER_NAME": "worldtrace", "GIT_COMMITTER_EMAIL": "worldtrace@example.com",
}  # fmt: skip
KNOWN_SERVERS = (
    "mcp-server-git", "mcp-server-time", "mcp-server-fetch", "mcp-server-sqlite",
    "mcp-server-filesystem", "mcp-server-memory", "mcp-server-everything",
)  # fmt: skip
"""The servers infra/setup.sh installs (for `worldtrace doctor`)."""
NOTES = {
    "README.md": "# Notes\n\nPlain files the demo's MCP jobs copy into each episode.\n",
    "todo.txt": "- read the design document\n- collect MCP trajectories\n",
}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def serve_site(root: Path) -> tuple[str, Callable[[], None]]:
    """A static site of `root` on a free loopback port: (base URL, stop)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="mcp-demo-site", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return f"http://127.0.0.1:{server.server_port}", stop


def demo_jobs(workdir: Path, episodes: int = 2) -> tuple[list[dict[str, Any]], Callable[[], None]]:
    """Job dicts (for `JobSpec.from_dict`) covering every demo MCP server and the
    search domain, and the callable that stops the loopback site they use."""
    notes = Path(workdir) / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    site, stop = serve_site(GIT_DOC)
    fs = {
        "kind": "mcp",
        "command": ["mcp-server-filesystem", "{workdir}"],
        "workdir": {"copy": str(notes)},
    }
    search = {
        "kind": "mcp",
        "command": ["{python}", "-m", "worldtrace.sandboxes.mcp_search", "--corpus", str(GIT_DOC)],
        "keep_server": True,
    }
    jobs = [
        {"name": "demo-mcp-filesystem", "sandbox": fs, "episodes": episodes, "max_turns": 12, "seed": 1,
         "policy": {"kind": "explorer", "allow_destructive": True},
         "tasks": [{"id": "explore", "instruction": "Explore the notes folder."}]},
        {"name": "demo-mcp-git", "sandbox": {**fs, "command": ["mcp-server-git", "--repository", "{workdir}"], "set_env": GIT_ENV},
         "tasks": [{"id": "commit", "instruction": "Commit the new todo item.",
                    "setup": ["git init -q -b main", "git add -A", "git commit -qm 'Initial notes'", "echo '- commit through MCP' >> todo.txt"],
                    "actions": [_t("git_status", repo_path="."), _t("git_add", repo_path=".", files=["todo.txt"]),
                                _t("git_commit", repo_path=".", message="Add a todo item"), _t("git_log", repo_path=".", max_count=5)]}]},
        {"name": "demo-mcp-memory", "sandbox": {"kind": "mcp", "command": ["mcp-server-memory"], "set_env": {"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"}},
         "episodes": episodes, "max_turns": 10, "policy": {"kind": "explorer", "allow_destructive": True},
         "tasks": [{"id": "graph", "instruction": "Build a small knowledge graph."}]},
        {"name": "demo-mcp-time", "sandbox": {"kind": "mcp", "command": ["mcp-server-time", "--local-timezone", "Etc/UTC"], "keep_server": True},
         "episodes": episodes, "max_turns": 6, "policy": {"kind": "explorer"},
         "tasks": [{"id": "zones", "instruction": "Compare the time in a few cities."}]},
        {"name": "demo-mcp-fetch", "sandbox": {"kind": "mcp", "command": ["mcp-server-fetch", "--allow-private-ips", "--ignore-robots-txt"], "keep_server": True},
         "tasks": [{"id": "read", "instruction": "Read the git-stash manual page.",
                    "actions": [_t("fetch", url=f"{site}/git-stash.html", max_length=3000),
                                _t("fetch", url=f"{site}/git-stash.html", max_length=3000, start_index=3000),
                                _t("fetch", url=f"{site}/no-such-page.html")]}]},
        {"name": "demo-mcp-sqlite", "sandbox": {"kind": "mcp", "command": ["mcp-server-sqlite", "--db-path", "{workdir}/notes.db"], "protocol": "legacy"},
         "episodes": episodes, "max_turns": 8, "policy": {"kind": "explorer", "allow_destructive": True},
         "tasks": [{"id": "tables", "instruction": "Keep notes in a database."}]},
        {"name": "demo-mcp-everything", "sandbox": {"kind": "mcp", "command": ["mcp-server-everything", "stdio"],
                                                    "set_env": {"GZIP_ALLOWED_DOMAINS": "127.0.0.1,localhost"},
                                                    "faults": {"seed": 7, "error_rate": 0.1, "timeout_rate": 0.05, "rate_limit_rate": 0.05,
                                                               "truncate_rate": 0.1, "latency_ms": 30, "page_size": 5}},
         "episodes": episodes, "max_turns": 15, "policy": {"kind": "explorer", "exclude": ["trigger-long-running-operation", "simulate-research-query"]},
         "tasks": [{"id": "explore", "instruction": "Exercise the test server."}]},
        {"name": "demo-search", "domain": "search", "sandbox": search,
         "tasks": [{"id": "amend", "instruction": "How do I change the message of the last commit?",
                    "actions": [_t("search", query="amend last commit message"), _t("fetch", url="doc://git-doc/git-commit.html")]}]},
        {"name": "demo-search-explorer", "domain": "search", "sandbox": search, "episodes": episodes, "max_turns": 10,
         "policy": {"kind": "explorer", "seeds": ["rebase", "merge conflict", "stash"]},
         "tasks": [{"id": "browse", "instruction": "Find out how branches are merged and rebased."}]},
    ]  # fmt: skip
    return jobs, stop


def _t(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def installed_servers() -> dict[str, str | None]:
    """Each known server's executable as the mcp kind finds it (None: not installed)."""
    from .base import SandboxError
    from .mcp_client import find_command

    found: dict[str, str | None] = {}
    for name in KNOWN_SERVERS:
        try:
            found[name] = find_command(name)
        except SandboxError:
            found[name] = None
    return found
