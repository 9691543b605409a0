"""Found (hunt 12-05): the `openai` policy failed its attempt with a bare Python exception
when the model's tool call carried arguments that are no JSON object (`JSONDecodeError:
Expecting property name ...`, `TypeError: cannot convert dictionary update sequence
...`), and with `URLError: <urlopen error [Errno 111] Connection refused>`, no URL, when
nothing listened at `base_url`. Now the reason names the policy, the tool and the
arguments' text (cut), or the URL it could not reach.

Real parts: a loopback chat-completions server, a real MCP server (mcp-server-time), the
`worldtrace collect` command a user runs."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from ..conftest import ChatServer


def collect(tmp_path: Path, wt_env: dict, base_url: str) -> str:
    """`worldtrace collect` of a one-task MCP job whose policy asks `base_url`: stdout."""
    f = tmp_path / "job.yaml"
    f.write_text(
        "name: mcp-oai\n"
        "sandbox: {kind: mcp, command: [mcp-server-time]}\n"
        f'policy: {{kind: openai, base_url: "{base_url}", model: m}}\n'
        "retries: 0\n"
        "tasks: [{id: t, instruction: Tell the time in UTC.}]\n"
    )
    r = subprocess.run(
        ["worldtrace", "collect", str(f)], capture_output=True, text=True, env=wt_env, timeout=120
    )
    assert r.returncode == 3, (r.stdout, r.stderr)  # the episode failed for good
    return r.stdout


def a_call(arguments: str) -> dict:
    fn = {"name": "get_current_time", "arguments": arguments}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": fn}]}  # fmt: skip


LONG = '{"timezone": "' + "x" * 5000  # unterminated, and far too long to quote whole


@pytest.mark.parametrize(
    "arguments, said",
    [
        (
            "{not json",
            "'{not json' (not JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
        ),
        ("[1, 2]", "'[1, 2]' (a JSON array)"),
        ('"UTC"', "'\"UTC\"' (a JSON string)"),
        (LONG, f"{LONG[:200]!r}... (5014 characters; not JSON: Unterminated string"),
    ],
)
def test_arguments_that_are_no_json_object_name_the_policy_tool_and_text(
    chat_server: ChatServer, tmp_path, wt_env, arguments, said
):
    chat_server.replies = [a_call(arguments)]
    out = collect(tmp_path, wt_env, chat_server.base_url)
    assert (
        "t-e0 attempt 1: error (0 turns): RuntimeError: policy openai (model m): the model "
        f"called get_current_time with arguments that are not a JSON object: {said}"
    ) in out, out
    assert len(chat_server.requests) == 1


def test_an_endpoint_nobody_listens_at_is_named(tmp_path, wt_env):
    with socket.socket() as s:  # bound, never listening: a connection is refused at once
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        out = collect(tmp_path, wt_env, url)
    assert (
        f"error (0 turns): RuntimeError: chat completions at {url}/chat/completions: "
        "cannot connect: [Errno 111] Connection refused"
    ) in out, out


def test_an_answer_that_is_no_chat_completion_is_named(chat_server, tmp_path, wt_env):
    chat_server.replies = lambda body: None  # the server answers `{"choices": [{"message": null}]}`
    out = collect(tmp_path, wt_env, chat_server.base_url)
    assert (
        f"error (0 turns): RuntimeError: chat completions at {chat_server.base_url}"
        "/chat/completions: the answer is no chat completion (no choices[0].message): "
        + json.dumps(
            {"id": "x", "object": "chat.completion",
             "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}
        )
    ) in out, out  # fmt: skip
