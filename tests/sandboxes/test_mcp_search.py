"""The search domain: our search MCP server over Debian's git-doc HTML, its index cache,
HTTP transport to a server we did not start, and the pipeline scoring MCP turns."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.mcp_client import free_port
from worldtrace.sandboxes.mcp_search import Index, build_index, page_text
from worldtrace.schemas import validate_dict

PROJECT = Path(__file__).resolve().parents[2]
GIT_DOC = Path("/usr/share/doc/git-doc")
NOTES = str(PROJECT / "examples" / "data" / "notes")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("search-cache")


@pytest.fixture(scope="module")
def index(cache) -> Index:
    return Index(build_index(GIT_DOC, cache))


def search_sandbox(cache: Path, **extra) -> dict:
    command = [
        sys.executable,
        "-m",
        "worldtrace.sandboxes.mcp_search",
        "--corpus",
        str(GIT_DOC),
        "--cache",
        str(cache),
    ]
    return {"kind": "mcp", "command": command, **extra}  # fmt: skip


def test_index_is_built_once_per_corpus_content(cache, tmp_path):
    path = build_index(GIT_DOC, cache)
    built = path.stat().st_mtime_ns
    assert build_index(GIT_DOC, cache) == path and path.stat().st_mtime_ns == built  # reused
    with sqlite3.connect(path) as db:
        assert db.execute("select count(*) from pages").fetchone()[0] == len(
            list(GIT_DOC.rglob("*.html"))
        )
    small = tmp_path / "docs"
    small.mkdir()
    (small / "a.html").write_text("<title>A</title><p>alpha</p>")
    first = build_index(small, cache)
    (small / "a.html").write_text("<title>A</title><p>alpha beta</p>")
    assert build_index(small, cache) != first  # new content, new index
    assert list(cache.glob("*.tmp")) == []


def test_html_text_keeps_words_and_lines():
    title, text = page_text(
        "<html><head><title>T &amp; U</title><style>p{}</style></head>"
        "<body><h1>Head</h1><p>one&nbsp;two</p><script>x()</script><ul><li>a</li><li>b</li></ul>"
    )
    assert title == "T & U" and text == "Head\n\none two\n\na\n\nb"


def test_search_ranks_with_bm25_and_pages(index):
    text, total = index.search("amend commit message")
    assert total > 10 and text.startswith(f'Results 1-10 of {total} for "amend commit message"')
    first = text.split("\n\n1. ")[1]
    assert (
        first.startswith("git-commit(1)\n   doc://git-doc/git-commit.html") and "[amend]" in first
    )
    second, _ = index.search("amend commit message", 2)
    assert second.startswith("Results 11-") and "\n11. " in second
    assert index.search("zzqx qqvw")[0] == 'No results for "zzqx qqvw".'
    any_word, total_any = index.search("zzqx rebase")  # no page has both: any of them
    assert total_any == index.search("rebase")[1] and "git-rebase(1)" in any_word
    with pytest.raises(ValueError, match="no words"):
        index.search(" ?! ")
    page = index.fetch("doc://git-doc/git-stash.html")
    assert (
        page.startswith("git-stash(1)\ndoc://git-doc/git-stash.html")
        and "fetch with start=8000" in page
    )


def test_search_domain_job_over_stdio_with_server_logs(store, cache):
    actions = [
        {"tool": "search", "arguments": {"query": "stash pop"}},
        {"tool": "fetch", "arguments": {"url": "doc://git-doc/git-stash.html", "start": 8000}},
        {"tool": "fetch", "arguments": {"url": "doc://git-doc/nope.html"}},
    ]
    job = {"name": "search", "domain": "search", "sandbox": search_sandbox(cache, keep_server=True), "episodes": 2,
           "tasks": [{"id": "stash", "instruction": "Bring back stashed changes.", "actions": actions}]}  # fmt: skip
    r = run_job(JobSpec.from_dict(job), store.raw)
    for t in r.trajectories:
        assert t.domain == "search" and validate_dict(t.to_dict()) == []
        assert "1. git-stash(1)" in t.turns[0].observation.text
        logs = json.loads(t.turns[0].observation.state_json)["logs"]
        assert logs == [
            {"data": "search 'stash pop' page 1: 2 results", "level": "info", "logger": "search"}
        ]
        assert t.turns[1].observation.state_json is None  # fetch logs nothing
        assert (
            t.turns[2].observation.is_error
            and "no page at doc://git-doc/nope.html" in t.turns[2].observation.text
        )
    space = {d["name"]: d for d in json.loads(r.trajectories[0].system.action_space)}
    assert set(space) == {"search", "fetch"} and space["search"]["annotations"]["readOnlyHint"]
    assert space["search"]["input_schema"]["properties"]["page"]["minimum"] == 1


def test_http_url_of_a_server_running_elsewhere(store, cache):
    port = free_port()
    cmd = [sys.executable, "-m", "worldtrace.sandboxes.mcp_search", "--corpus", str(GIT_DOC), "--cache", str(cache), "--transport", "http", "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the server we did not start listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        job = {"name": "remote", "domain": "search", "sandbox": {"kind": "mcp", "url": f"http://127.0.0.1:{port}/mcp"},
               "tasks": [{"id": "r", "actions": [{"tool": "search", "arguments": {"query": "rebase onto"}}]}]}  # fmt: skip
        [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
        assert t.outcome.status == "success", t.outcome.error
        assert "git-rebase(1)" in t.turns[0].observation.text
        assert t.environment.url == f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


def test_pipeline_scores_mcp_and_search_turns(store, cache):
    from worldtrace.pipelines.process import ProcessConfig, run

    fs = {
        "kind": "mcp",
        "command": ["mcp-server-filesystem", "{workdir}"],
        "workdir": {"copy": NOTES},
    }
    jobs = [
        {"name": "fs", "sandbox": fs, "tasks": [{"id": "fs", "actions": [
            {"tool": "list_directory", "arguments": {"path": "."}},
            {"tool": "write_file", "arguments": {"path": "n.txt", "content": "the heron waits in the shallows"}},
            {"tool": "read_text_file", "arguments": {"path": "n.txt"}}]}]},
        {"name": "search", "domain": "search", "sandbox": search_sandbox(cache), "tasks": [{"id": "s", "actions": [
            {"tool": "search", "arguments": {"query": "cherry pick"}},
            {"tool": "fetch", "arguments": {"url": "doc://git-doc/git-cherry-pick.html"}}]}]},
    ]  # fmt: skip
    collected = [t for j in jobs for t in run_job(JobSpec.from_dict(j), store.raw).trajectories]
    assert all(json.loads(t.system.action_space) for t in collected)
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1))
    assert m["accounting"]["kept"] == 2
    rows = (
        duckdb.connect()
        .execute(
            f"select domain, category, keep from read_parquet('{store.processed / 'turns'}/*.parquet') order by domain"
        )
        .fetchall()
    )
    assert [r[0] for r in rows] == ["mcp"] * 3 + ["search"] * 2
    assert all(category and keep is not None for _, category, keep in rows)
    search = [(category, keep) for domain, category, keep in rows if domain == "search"]
    assert all(c in ("retrieval", "expansion") and k == 1.0 for c, k in search)  # kept whole


def test_example_job_files_load():
    files = sorted((PROJECT / "examples").glob("mcp-*.yaml")) + sorted(
        (PROJECT / "examples").glob("search-*.yaml")
    )
    assert len(files) >= 10
    for path in files:
        spec = JobSpec.load(path)
        assert spec.sandbox.kind == "mcp" and spec.tasks
        assert JobSpec.from_dict(spec.to_dict()).to_dict() == spec.to_dict()  # as jobs.db keeps it
        if path.name.startswith("search-"):
            assert spec.domain == "search"


def test_demo_jobs_parse_and_their_site_serves_git_doc(tmp_path):
    import urllib.request

    from worldtrace.sandboxes.mcp_demo import demo_jobs, installed_servers

    assert all(installed_servers().values()), installed_servers()  # infra/setup.sh installs them

    jobs, stop = demo_jobs(tmp_path / "demo")
    try:
        specs = [JobSpec.from_dict(j) for j in jobs]
        assert {s.domain for s in specs} == {"mcp", "search"} and len(specs) == 9
        fetch = next(j for j in jobs if j["name"] == "demo-mcp-fetch")
        url = fetch["tasks"][0]["actions"][0]["arguments"]["url"]
        with urllib.request.urlopen(url, timeout=10) as page:
            assert b"git-stash(1)" in page.read()
    finally:
        stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
