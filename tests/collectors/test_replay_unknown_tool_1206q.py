"""A recording in which the agent called a tool the server does not have (the server's
`Unknown tool` answer recorded as the observation, docs/mcp.md) could never be replayed:
the replay check refused it, comparing the call with the live server's tools only (hunt
12-06q). A tool the recording's own action space lacked too is the agent's error, which
the replay records again; a replay against a server without a tool the recording's
server had is still refused.

Real parts: a real MCP server (mcp-server-time from the venv), `run_job`, a real store.
"""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import run_job
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas import Store

TIME = {"kind": "mcp", "command": ["mcp-server-time", "--local-timezone", "Etc/UTC"]}
NOW = {"tool": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}
NOPE = {"tool": "nope", "arguments": {}}


def replay_job(prefix: str, sandbox: dict) -> JobSpec:
    return JobSpec.from_dict(
        {"name": "r", "sandbox": sandbox, "policy": "replay", "retries": 0,
         "tasks": [{"id": "again", "replay": prefix}]}
    )  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    store = Store.at(tmp_path_factory.mktemp("unknown-tool") / "store")
    spec = JobSpec.from_dict(
        {"name": "m", "sandbox": TIME,
         "tasks": [{"id": "t", "instruction": "Time.", "actions": [NOPE, NOW]}]}
    )  # fmt: skip
    [t] = run_job(spec, store.raw).trajectories
    assert t.outcome.status == "success" and "nope" in t.turns[0].observation.text
    return store, t


def test_a_recording_with_an_unknown_tool_call_replays(recorded):
    store, t = recorded
    spec = replay_job(t.trajectory_id[:10], TIME)
    spec.check_store(store.root)  # refused before: "calls tool 'nope', which ... does not have"
    [r] = run_job(spec, store.raw).trajectories
    assert r.outcome.status == "success", r.outcome
    assert [x.action.name for x in r.turns] == ["nope", "get_current_time"]
    assert r.turns[0].observation.text == t.turns[0].observation.text


def test_a_replay_against_a_server_without_a_recorded_tool_is_still_refused(recorded):
    store, t = recorded
    spec = replay_job(t.trajectory_id[:10], {"kind": "mcp", "command": ["mcp-server-git"]})
    spec.check_store(store.root)  # MCP tools are known at reset only
    [r] = run_job(spec, store.raw).trajectories
    assert r.outcome.status == "error" and not r.turns
    assert "calls tool 'get_current_time', which sandbox kind mcp does not have" in (
        r.outcome.error or ""
    )


def test_a_recording_whose_action_holds_a_redacted_secret_is_refused(recorded, tmp_path):
    """Hunt 12-06s: a web replay of a `goto ...?echo=<secret:env_value>` (the recorder
    redacted the cookie value the page echoed) opened `%3Csecret:env_value%3E` and was
    recorded as a success: a replay sends the action as stored, not the value."""
    import dataclasses

    from worldtrace.schemas import ShardWriter

    store, t = recorded
    args = '{"timezone": "Europe/<secret:env_value>"}'
    secret = dataclasses.replace(t.turns[1].action, arguments_json=args)
    held = dataclasses.replace(
        t, turns=[t.turns[0], dataclasses.replace(t.turns[1], action=secret)]
    ).with_id()
    with ShardWriter(store.raw / "held") as w:
        w.write([held])
    spec = replay_job(held.trajectory_id[:10], TIME)
    with pytest.raises(Exception, match=r"turn 1: its action holds a redacted secret"):
        spec.check_store(store.root)
