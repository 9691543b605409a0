"""Found (hunt 12-06b): the `openai` policy ran only the first of a reply's tool calls; the
others were in no turn, no reasoning, no message and the next request's history, while the
reply's prose ("I will ask twice.") stayed as the reasoning of an action that never ran.
Now each call is a turn, in the reply's order, the model is asked again once all have run,
and the history sends them back as one assistant message with its calls and each result.

Real parts: a loopback chat-completions server, a real MCP server (mcp-server-time), the
`worldtrace collect` and `worldtrace query` commands a user runs."""

from __future__ import annotations

import json
import subprocess

from ..conftest import ChatServer


def test_every_tool_call_of_a_reply_is_a_turn_and_goes_back_as_one_message(
    chat_server: ChatServer, tmp_path, wt_env
):
    calls = [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "get_current_time", "arguments": json.dumps({"timezone": tz})}}
        for i, tz in enumerate(["UTC", "Europe/Paris"])
    ]  # fmt: skip
    chat_server.replies = [
        {"role": "assistant", "content": "I will ask twice.", "tool_calls": calls},
        {"role": "assistant", "content": "Both answered."},
    ]
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: two-calls\nsandbox: {kind: mcp, command: [mcp-server-time]}\n"
        f'policy: {{kind: openai, base_url: "{chat_server.base_url}", model: m}}\n'
        "retries: 0\nmax_turns: 5\ntasks: [{id: t, instruction: Tell the time twice.}]\n"
    )
    r = subprocess.run(["worldtrace", "collect", str(f)], capture_output=True, text=True, env=wt_env, timeout=120)  # fmt: skip
    assert r.returncode == 0, (r.stdout, r.stderr)
    sql = (
        "SELECT t.action.text AS action_text, t.reasoning, t.observation.text AS observation_text"
        " FROM (SELECT unnest(turns) AS t FROM raw_trajectories)"
    )
    r = subprocess.run(["worldtrace", "query", "--format", "json", sql], capture_output=True, text=True, env=wt_env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    turns = json.loads(r.stdout)
    assert [t["action_text"] for t in turns] == [
        'get_current_time({"timezone": "UTC"})',
        'get_current_time({"timezone": "Europe/Paris"})',
    ], turns
    assert [t["reasoning"] for t in turns] == ["I will ask twice.", None]
    assert '"timezone": "Europe/Paris"' in turns[1]["observation_text"], turns[1]
    assert len(chat_server.requests) == 2  # asked again only once both had run
    history = chat_server.requests[1]["body"]["messages"][2:]
    assert [m["role"] for m in history] == ["assistant", "tool", "tool"], history
    sent = history[0]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in sent] == [
        {"timezone": "UTC"},
        {"timezone": "Europe/Paris"},
    ]
    assert [m["tool_call_id"] for m in history[1:]] == [c["id"] for c in sent]
    assert "Europe/Paris" in history[2]["content"]
