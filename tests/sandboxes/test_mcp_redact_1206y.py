"""An MCP server's launch argv holds its key (`command: [srv.py, --api-key, K, --token=T]`,
as Claude Desktop configs and many servers' READMEs pass one): the recorder ran that
command itself and records it in `environment.config`, and the server says the key back
(`authenticated with key K ok`). A hunt (2026-12-06, y) found K in the raw shard: the
values handed over were read from `env`, `set_env`, the storage state and the policy's
key only. Now the values of credential options in the command are handed over too
(`redact.command_secrets`). A real server process (the `mcp` SDK), a real job."""

from __future__ import annotations

import json
import textwrap

from worldtrace.collectors.jobs import JobSpec, run_job

KEY = "Kq7vLm2pRt9sKw4zB7Yx"
TOKEN = "Tz8wPn3qSu0tLx5aC8Zy"

SERVER = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("argvy")

    @app.tool()
    def status() -> str:
        return "started as: " + " ".join(sys.argv[1:])

    @app.tool()
    def whoami() -> str:
        return "authenticated with key " + sys.argv[sys.argv.index("--api-key") + 1] + " ok"

    app.run("stdio")
    """
)


def test_credential_option_values_of_the_servers_command_reach_no_file(tmp_path, store):
    server = tmp_path / "srv.py"
    server.write_text(SERVER)
    job = {
        "name": "argvy",
        "retries": 0,
        "sandbox": {
            "kind": "mcp",
            "command": [
                "{python}", str(server), "--api-key", KEY, f"--token={TOKEN}", "--port", "8080",
            ],
        },
        "policy": "scripted",
        "tasks": [{"id": "t1", "instruction": "Check the server.", "actions": [
            {"tool": "status", "arguments": {}}, {"tool": "whoami", "arguments": {}},
        ]}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    said = [x.observation.text for x in t.turns]
    assert said == [
        "started as: --api-key <secret:env_value> --token=<secret:env_value> --port 8080",
        "authenticated with key <secret:env_value> ok",
    ]
    command = json.loads(t.environment.config)["command"]
    assert command[2:] == ["--api-key", "<secret:env_value>", "--token=<secret:env_value>",
                           "--port", "8080"]  # fmt: skip
    assert t.redactions >= 5
    for f in store.raw.rglob("*"):  # the shard, and any journal left
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in data and TOKEN.encode() not in data, f
