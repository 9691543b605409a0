"""Web episodes end to end: explorer and chat-completions policies, recorded trajectories
that validate and run through the processing pipeline, and the example job files."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.policies import History
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.sandboxes.web import WebSandbox
from worldtrace.sandboxes.web_explorer import ExplorerConfig, WebExplorer, parse_tree
from worldtrace.sandboxes.web_sites import demo_jobs, start_datasette, start_docs_site
from worldtrace.schemas import Observation, read_records, validate_dict
from worldtrace.schemas.hashing import canonical_content

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    docs, library = start_docs_site(), start_datasette(tmp_path_factory.mktemp("datasette"))
    yield docs, library
    docs.stop()
    library.stop()


def collect(job: dict, raw: Path, **sandbox) -> tuple[list, WebSandbox]:
    spec = JobSpec.from_dict(job)
    sb = WebSandbox(spec.sandbox.config.__class__(**{**vars(spec.sandbox.config), **sandbox}))
    return run_job(spec, raw, sandbox=sb).trajectories, sb


def test_explorer_stays_on_its_origins_and_its_trajectories_process(sites, store):
    docs, library = sites
    trajectories, audits = [], []
    for job in demo_jobs(docs, library, episodes=1, max_turns=6):
        job["tasks"] = job["tasks"][:1]
        got, sb = collect(job, store.raw, record_requests=True)
        trajectories += got
        audits.append((sb, job["sandbox"]["start_url"]))
    for sb, start in audits:
        origin = re.match(r"^https?://[^/]+", start).group(0)
        outside = [u for u in sb.requests if not u.startswith((origin + "/", "about:", "data:"))]
        assert outside == sb.blocked  # everything else was aborted, nothing left loopback
    for t in trajectories:
        assert t.outcome.status in ("success", "incomplete") and len(t.turns) == 6
        assert validate_dict(t.to_dict()) == []
        seen = t.system.initial_state
        for turn in t.turns:
            args = json.loads(turn.action.arguments_json)
            if "bid" in args:  # the explorer acts only on what it was shown
                assert args["bid"] in {e.bid for e in parse_tree(seen)}
            origin = re.match(r"^https?://[^/]+/", t.environment.url).group(0)
            assert json.loads(turn.observation.state_json)["url"].startswith(origin)
            seen = turn.observation.text
    m = run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed)))
    acc = m["accounting"]
    assert acc["in"] == 2 and acc["balanced"] and acc["kept"] + acc["filtered"] == 2
    kept = list(read_records(store.processed / "trajectories"))
    assert all(t.domain == "web" and t.turns and t.turns[0].stats for t in kept)


def first_difference(a, b) -> str:
    """Where two episodes part (for the failure message: a flake names its cause)."""

    def diff(x: str, y: str) -> str:
        return "\n".join(
            list(difflib.unified_diff((x or "").splitlines(), (y or "").splitlines(), lineterm=""))[
                :40
            ]
        )

    if a.system.initial_state != b.system.initial_state:
        return "initial state:\n" + diff(a.system.initial_state, b.system.initial_state)
    for i, (x, y) in enumerate(zip(a.turns, b.turns, strict=False)):
        if (x.action.name, x.action.arguments_json) != (y.action.name, y.action.arguments_json):
            return f"turn {i} action: {x.action.arguments_json} | {y.action.arguments_json}"
        if x.observation.text != y.observation.text:
            return f"turn {i} ({x.action.arguments_json}) observation:\n" + diff(
                x.observation.text, y.observation.text
            )
    if len(a.turns) != len(b.turns):
        return f"turns: {len(a.turns)} | {len(b.turns)}"
    return (
        f"elsewhere in the canonical content:\n{canonical_content(a)!r}\n{canonical_content(b)!r}"
    )


def test_explorer_is_reproducible_from_the_seed(sites, store):
    docs, library = sites
    [job, _] = demo_jobs(docs, library, episodes=1, max_turns=4)
    job["tasks"] = [{"id": "tutorial", "url": docs.url + "tutorial/index.html"}]
    [a], _ = collect(job, store.raw)
    [b], _ = collect(job, store.raw)
    # same seed, same site: the same episode
    assert a.trajectory_id == b.trajectory_id, first_difference(a, b)
    start = Observation(a.system.initial_state, state_json=json.dumps({"url": a.environment.url}))
    firsts = set()
    for seed in range(8):
        explorer = WebExplorer(ExplorerConfig(), seed)
        firsts.add(explorer.act(History("", start, [])).text)
    assert len(firsts) > 2  # the seed, not the page alone, picks the walk


def test_chat_completions_policy_browses_with_tool_calls(sites, store, chat_server):
    """The model reads the page it is shown and answers with tools."""
    docs, _ = sites

    def reply(body: dict) -> dict:
        msgs = body["messages"]
        n = sum(m["role"] == "tool" for m in msgs)
        last = msgs[-1]["content"] if n else msgs[0]["content"]
        if n == 0:
            bid = re.search(r"\[(\w+)\] link 'Tutorial'", last).group(1)
            return chat_server.call("click", bid=bid)
        if n == 1:
            bid = re.search(r"\[(\w+)\] textbox 'Quick search'", last).group(1)
            return chat_server.call("fill", bid=bid, text="json")
        return {"role": "assistant", "content": "Done."}

    chat_server.replies = reply
    job = {
        "name": "llm-web", "sandbox": {"kind": "web", "start_url": docs.url + "index.html"},
        "policy": {"kind": "openai", "base_url": chat_server.base_url, "model": "fake"},
        "tasks": [{"id": "find", "instruction": "Find the json module docs."}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.action.name for x in t.turns] == ["click", "fill"] and t.outcome.status == "success"
    assert json.loads(t.turns[0].observation.state_json)["url"] == docs.url + "tutorial/index.html"
    assert "value='json'" in t.turns[1].observation.text
    requests = [r["body"] for r in chat_server.requests]
    tools = {f["function"]["name"] for f in requests[0]["tools"]}
    assert {"click", "fill", "select_option", "goto", "tab_focus", "noop"} <= tools
    assert requests[2]["messages"][-1]["role"] == "tool"


def test_example_job_files_are_valid():
    files = sorted(EXAMPLES.glob("web-*.yaml"))
    assert len(files) >= 2
    for f in files:
        spec = JobSpec.load(f)
        assert spec.sandbox.kind == "web" and spec.expand()


def test_a_job_whose_start_page_is_down_fails_every_attempt(store):
    """Nothing listens at the start URL: each attempt fails with the reason and is retried
    per `retries`; no trajectory is recorded as a success."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/index.html"  # closed again
    job = {
        "name": "webclosed", "sandbox": {"kind": "web", "start_url": url},
        "policy": "scripted", "retries": 1,
        "tasks": [{"id": "t", "instruction": "x", "actions": [{"tool": "noop", "arguments": {"ms": 10}}]}],
    }  # fmt: skip
    result = run_job(JobSpec.from_dict(job), store.raw)
    assert result.failed_attempts == 2 and len(result.trajectories) == 2
    reason = f"SandboxError: start page {url} did not load: net::ERR_CONNECTION_REFUSED"
    for t in result.trajectories:
        assert (t.outcome.status, t.outcome.error, len(t.turns)) == ("error", reason, 0)
