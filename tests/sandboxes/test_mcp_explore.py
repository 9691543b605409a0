"""Collecting from MCP servers without a model (the schema explorer), with a chat model
(native tool calling against a loopback chat-completions server), and with faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import ToolSpec
from worldtrace.sandboxes.mcp_explorer import is_destructive
from worldtrace.sandboxes.mcp_proxy import FAULT_KINDS, FaultConfig, FaultPlan
from worldtrace.schemas import validate_dict
from worldtrace.schemas.parsing import parse

PROJECT = Path(__file__).resolve().parents[2]
NOTES = str(PROJECT / "examples" / "data" / "notes")
GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "wt", "GIT_AUTHOR_EMAIL": "wt@x",
           "GIT_COMMITTER_NAME": "wt", "GIT_COMMITTER_EMAIL": "wt@x"}  # fmt: skip
FS = {"command": ["mcp-server-filesystem", "{workdir}"], "workdir": {"copy": NOTES}}
SEARCH = ["{python}", "-m", "worldtrace.sandboxes.mcp_search", "--corpus", "/usr/share/doc/git-doc"]
SCHEMA_ERRORS = ("Input validation error", "Invalid arguments", "validation error for")
"""What servers answer to arguments that do not fit their schema."""

SERVERS = {
    "filesystem": (FS, {"allow_destructive": True}, []),
    "git": (
        {"command": ["mcp-server-git", "--repository", "{workdir}"], "workdir": {"copy": NOTES}, "set_env": GIT_ENV},
        {"allow_destructive": True},
        ["git init -q", "git add -A", "git commit -qm init", "echo more >> todo.txt"],
    ),
    "time": ({"command": ["mcp-server-time"]}, {}, []),
    "sqlite": ({"command": ["mcp-server-sqlite", "--db-path", "{workdir}/x.db"], "protocol": "legacy"}, {"allow_destructive": True}, []),
    "memory": ({"command": ["mcp-server-memory"], "set_env": {"MEMORY_FILE_PATH": "{workdir}/m.jsonl"}}, {"allow_destructive": True}, []),
    "everything": (
        {"command": ["mcp-server-everything"], "set_env": {"GZIP_ALLOWED_DOMAINS": "127.0.0.1"}},
        {"exclude": ["trigger-long-running-operation"]},
        [],
    ),
    "search": ({"command": SEARCH, "keep_server": True}, {"seeds": ["rebase"]}, []),
}  # fmt: skip


def explore(store, sandbox, policy, setup=(), episodes=1, max_turns=8, **opts):
    job = {
        "name": "explore",
        "sandbox": {"kind": "mcp", **sandbox},
        "policy": {"kind": "explorer", **policy},
        "episodes": episodes,
        "max_turns": max_turns,
        "retries": 0,
        "tasks": [{"id": "x", "instruction": "Explore.", "setup": list(setup)}],
        **opts,
    }
    return run_job(JobSpec.from_dict(job), store.raw).trajectories


def check_valid(t) -> dict[str, ToolSpec]:
    """Every action is a declared tool called with arguments its schema accepts."""
    assert t.outcome.status in ("success", "incomplete"), t.outcome.error
    assert validate_dict(t.to_dict()) == []
    tools = {d["name"]: ToolSpec.from_dict(d) for d in json.loads(t.system.action_space)}
    for turn in t.turns:
        assert turn.action.name in tools
        assert tools[turn.action.name].check(json.loads(turn.action.arguments_json)) is None
        assert not any(e in turn.observation.text for e in SCHEMA_ERRORS), turn.observation.text
    return tools


@pytest.mark.parametrize("server", SERVERS)
def test_explorer_makes_valid_trajectories_on_every_server(store, server):
    sandbox, policy, setup = SERVERS[server]
    [t] = explore(store, sandbox, policy, setup)
    tools = check_valid(t)
    assert len(t.turns) == 8 and sum(not x.observation.is_error for x in t.turns) >= 2
    assert len({x.action.name for x in t.turns}) >= min(len(tools), 6)  # spreads over tools
    if not policy.get("allow_destructive"):
        assert not any(is_destructive(tools[x.action.name]) for x in t.turns)


def test_explorer_acts_on_state_it_has_seen(store):
    [t] = explore(store, FS, {"allow_destructive": True}, max_turns=30, seed=3)
    check_valid(t)
    workdir = t.system.initial_state.split("Working directory: ")[1].splitlines()[0]
    listed = f"{workdir}/todo.txt"  # known only from a listing answer
    first_listing = next(i for i, x in enumerate(t.turns) if "todo.txt" in x.observation.text)
    later = [x for x in t.turns[first_listing + 1 :] if listed in x.action.arguments_json]
    assert later and any("read the design document" in x.observation.text for x in t.turns)


def test_explorer_is_seeded_by_the_episode():
    from worldtrace.collectors.policies import History, PolicyContext
    from worldtrace.sandboxes.mcp_explorer import ExplorerConfig, SchemaExplorer
    from worldtrace.schemas import Observation, Turn

    space = [
        {"name": "put", "input_schema": {"type": "object", "required": ["path", "n"], "properties": {
            "path": {"type": "string"}, "n": {"type": "integer", "minimum": 2, "maximum": 5},
            "mode": {"enum": ["a", "b"]}, "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}}},
         "annotations": {"destructiveHint": False}},
        {"name": "get", "input_schema": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}},
         "annotations": {"readOnlyHint": True}},
        {"name": "wipe", "input_schema": {"type": "object", "properties": {}}},
    ]  # fmt: skip

    def run(seed):
        policy = SchemaExplorer.build(ExplorerConfig(), PolicyContext(seed=seed))
        h = History("task", Observation("Working directory: /w"), space)
        for i in range(12):
            action = policy.act(h)
            h.turns.append(Turn(i, action, Observation(f"[FILE] f{i}.txt")))
        return [x.action.text for x in h.turns]

    first = run(3)
    assert first == run(3) and first != run(4)
    assert not any(a.startswith("wipe(") for a in first)  # destructive by the spec's default
    assert any('"path": "/w/f' in a for a in first)  # a name listed under a path, reused


def test_search_explorer_fetches_urls_it_was_shown(store):
    [t] = explore(
        store, {"command": SEARCH}, {"seeds": ["merge conflict"]}, max_turns=10, domain="search"
    )
    check_valid(t)
    assert t.domain == "search"

    def shown_before(i: int) -> str:
        return "\n".join(x.observation.text for x in t.turns[:i] if x.action.name == "search")

    read = [
        x
        for i, x in enumerate(t.turns)
        if x.action.name == "fetch"
        and json.loads(x.action.arguments_json)["url"] in shown_before(i)
    ]
    assert any(not x.observation.is_error and "Manual Page" in x.observation.text for x in read)


# -- a chat model with native tool calling ----------------------------------------------
def test_chat_completions_policy_calls_server_tools_natively(store, chat_server):
    call = chat_server.call
    chat_server.replies = [
        call("write_file", path="plan.txt", content="ship it"),
        call("read_text_file", path="plan.txt"),
        {"role": "assistant", "content": "Done."},
    ]
    job = {
        "name": "chat",
        "sandbox": {"kind": "mcp", **FS},
        "policy": {"kind": "openai", "base_url": chat_server.base_url, "model": "m"},
        "tasks": [{"id": "w", "instruction": "Plan."}],
    }
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.observation.text for x in t.turns] == ["Successfully wrote to plan.txt", "ship it"]
    requests = [r["body"] for r in chat_server.requests]
    functions = {f["function"]["name"]: f["function"] for f in requests[0]["tools"]}
    space = {d["name"]: d for d in json.loads(t.system.action_space)}
    assert set(functions) == set(space)  # the server's tool list, as the model's functions
    assert functions["write_file"]["parameters"] == space["write_file"]["input_schema"]
    assert requests[2]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "ship it",
    }


# -- injected faults ---------------------------------------------------------------------
FAULTS = {"seed": 11, "error_rate": 0.15, "timeout_rate": 0.1, "rate_limit_rate": 0.1,
          "truncate_rate": 0.2, "latency_ms": 20, "latency_rate": 0.3, "page_size": 4}  # fmt: skip


def test_fault_plan_hits_its_rates_and_is_seeded():
    config = parse(FaultConfig, FAULTS)
    plan = FaultPlan(config)
    n = 8000
    drawn = [plan.decide("task", i, "echo", {"m": i % 7}) for i in range(n)]
    for kind in FAULT_KINDS:
        share = sum(f.kind == kind for f in drawn) / n
        assert abs(share - FAULTS[f"{kind}_rate"]) < 0.015, (kind, share)
    delayed = [f.latency_ms for f in drawn if f.latency_ms]
    assert abs(len(delayed) / n - 0.3) < 0.015 and min(delayed) >= 1 and max(delayed) <= 20
    assert drawn == [FaultPlan(config).decide("task", i, "echo", {"m": i % 7}) for i in range(n)]
    reseeded = FaultPlan(parse(FaultConfig, {**FAULTS, "seed": 12}))
    assert drawn != [reseeded.decide("task", i, "echo", {"m": i % 7}) for i in range(n)]


def test_faults_are_injected_flagged_and_reproducible(store):
    calls = 40
    actions = [{"tool": "read_text_file", "arguments": {"path": "todo.txt"}}] * calls
    job = {"name": "faults", "sandbox": {"kind": "mcp", **FS, "faults": FAULTS}, "max_turns": calls + 1,
           "tasks": [{"id": "f", "actions": actions}], "retries": 0}  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    [again] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert validate_dict(t.to_dict()) == [] and t.outcome.status == "success"
    assert len(json.loads(t.system.action_space)) == 14  # 4 pages of 4 followed
    full = (Path(NOTES) / "todo.txt").read_text()
    plan = FaultPlan(parse(FaultConfig, FAULTS))
    flags = []
    for i, turn in enumerate(t.turns):
        o = turn.observation
        flag = json.loads(turn.perturbation) if turn.perturbation else None
        flags.append(flag)
        fault = plan.decide("f", i, "read_text_file", {"path": "todo.txt"})
        extra = {"kept_chars": int(len(full) * fault.keep), "total_chars": len(full)}
        assert flag == fault.perturbation(**(extra if fault.kind == "truncate" else {}))
        if fault.kind == "error":
            assert o.is_error and o.text.endswith("service temporarily unavailable")
        elif fault.kind == "timeout":
            assert o.is_error and o.text == "MCP error -32001: Request timed out"
        elif fault.kind == "rate_limit":
            assert o.is_error and o.text.startswith("Rate limit exceeded")
        elif fault.kind == "truncate":
            assert o.truncated and full.startswith(o.text) and len(o.text) < len(full)
        else:
            assert o.text == full and not o.is_error and not o.truncated
        if fault.latency_ms:
            assert turn.duration_ms >= fault.latency_ms
    kinds = {f["kind"] for f in flags if f}
    assert kinds == {*FAULT_KINDS, "latency"}
    assert [json.loads(x.perturbation) if x.perturbation else None for x in again.turns] == flags


def test_an_injected_fault_is_context_never_a_target(store):
    """Found: the faults our proxy makes up ("Rate limit exceeded", a cut answer) were
    decided by their statistics like real answers, all in the loss at keep 1.0: a world
    model trained to predict our random draw. Every policy now decides such a turn
    `injected` (keep 0 unless `keep.injected` says otherwise); latency alone changes
    nothing in the answer and is decided as usual."""
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas import fields as F
    from worldtrace.schemas.views import connect

    calls = 40  # the seed draws every kind within 40 calls
    actions = [{"tool": "read_text_file", "arguments": {"path": "todo.txt"}}] * calls
    job = {"name": "faults", "sandbox": {"kind": "mcp", **FS, "faults": FAULTS}, "max_turns": calls + 1,
           "tasks": [{"id": "f", "actions": actions}], "retries": 0}  # fmt: skip
    run_job(JobSpec.from_dict(job), store.raw)
    keep_all = FilterConfig(retry_cycles=False)  # a retried error would leave as a retry cycle

    def decided(**settings):
        run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1,
                          filters=keep_all, rebuild=True, **settings))  # fmt: skip
        rows = connect(store).execute(
            "SELECT perturbation, category, keep, in_loss, rule FROM turns ORDER BY turn_index"
        )
        return [(json.loads(p)["kind"] if p else None, *rest) for p, *rest in rows.fetchall()]

    for policy in ("agentworld-v1", "agentworld-v1+info"):
        rows = decided(policy=policy)
        assert len(rows) == calls and {r[0] for r in rows} >= {*F.INJECTED_FAULTS, "latency"}
        for kind, category, keep, in_loss, rule in rows:
            if kind in F.INJECTED_FAULTS:
                assert (category, keep, in_loss) == ("injected", 0.0, False), kind
                assert rule.startswith(f"injected: a {kind} fault"), rule
            else:  # the real answer, decided by its statistics (+info: repeats cut)
                assert category != "injected", (kind, category)
                assert in_loss or policy != "agentworld-v1", (kind, category)
    rows = decided(policy_settings={"keep.injected": 1.0})
    assert all(in_loss for kind, _, _, in_loss, _ in rows if kind in F.INJECTED_FAULTS)
