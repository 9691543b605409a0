"""MCP tool calls per second: our sandbox and the whole collector vs a bare SDK loop.

    python -m benchmarks.bench_mcp [--calls N] [--rounds R]

Side by side in one run, on the same server and the same calls:
- baseline: `mcp.Client.call_tool` in a plain asyncio loop, nothing else;
- `*_sandbox_steps`: `MCPSandbox.step` from synchronous code (the AsyncRunner thread
  hop, fault-proxy pass-through, rendering the observation);
- `*_collector_steps`: a scripted job through `run_job` (policy, the Recorder writing
  and fsyncing every turn before the next step, the shard), timed from the first
  turn's start to the episode's end.
Two workloads: `echo` on the reference `everything` server (the cheapest call there
is: pure overhead, the worst case for the ratio) and `git_status` on mcp-server-git
(a real call). Rounds alternate the three ways and the median is kept, so load on the
machine hits all alike. Each also reports the CPU time our process spends per call
(load on a shared machine inflates wall time far more than CPU time). Prints one JSON
line per measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}  # fmt: skip


def workloads(repo: Path) -> dict[str, tuple[dict, str, dict]]:
    """name -> (sandbox config, tool, arguments)."""
    everything = {
        "command": ["mcp-server-everything", "stdio"],
        "set_env": {"GZIP_ALLOWED_DOMAINS": "127.0.0.1"},
    }
    git = {"command": ["mcp-server-git", "--repository", str(repo)], "set_env": GIT_ENV}
    return {
        "echo": (everything, "echo", {"message": "hello"}),
        "git_status": (git, "git_status", {"repo_path": str(repo)}),
    }  # fmt: skip


def bare_sdk(sandbox: dict, tool: str, args: dict, calls: int) -> float:
    import anyio
    from mcp import Client, StdioServerParameters
    from worldtrace.sandboxes.mcp_client import find_command

    argv = sandbox["command"]
    params = StdioServerParameters(
        command=find_command(argv[0]), args=argv[1:], env=sandbox.get("set_env")
    )

    async def loop() -> float:
        async with Client(params, cache=None) as client:
            for _ in range(10):  # warm-up
                await client.call_tool(tool, args)
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                await client.call_tool(tool, args)
            return _rates(calls, t0, c0)

    return anyio.run(loop)


def sandbox_steps(sandbox: dict, tool: str, args: dict, calls: int) -> float:
    from worldtrace.collectors.actions import tool_call
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.mcp import MCPConfig, MCPSandbox
    from worldtrace.schemas.parsing import parse

    box = MCPSandbox(parse(MCPConfig, sandbox))
    try:
        box.reset(TaskSpec("bench"))
        for _ in range(10):
            box.step(tool_call(tool, args))
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            box.step(tool_call(tool, args))
        return _rates(calls, t0, c0)
    finally:
        box.close()


def collector_steps(sandbox: dict, tool: str, args: dict, calls: int) -> float:
    from worldtrace.collectors.jobs import JobSpec, run_job

    actions = [{"tool": tool, "arguments": args}] * calls
    job = {"name": "bench", "sandbox": {"kind": "mcp", **sandbox}, "max_turns": calls + 1,
           "tasks": [{"id": "bench", "actions": actions}]}  # fmt: skip
    spec = JobSpec.from_dict(job)
    with tempfile.TemporaryDirectory() as raw:
        c0 = time.process_time()  # includes the server's start: a small share of N calls
        [t] = run_job(spec, raw).trajectories
        cpu = time.process_time() - c0
    return calls / (t.ended_at - t.turns[0].started_at).total_seconds(), cpu / calls * 1e6


def _rates(calls: int, t0: float, c0: float) -> tuple[float, float]:
    """(calls per second, CPU microseconds of this process per call)."""
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return calls / wall, cpu / calls * 1e6


def make_repo(path: Path) -> Path:
    path.mkdir()
    for i in range(20):
        (path / f"f{i}.txt").write_text(f"line {i}\n" * 50)
    for cmd in ("git init -q", "git add -A", "git commit -qm init", "echo x >> f1.txt"):
        subprocess.run(
            cmd, shell=True, cwd=path, check=True, env={"PATH": "/usr/bin:/bin", **GIT_ENV}
        )
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (sandbox, tool, arguments) in workloads(make_repo(Path(tmp) / "repo")).items():
            got: dict[str, list[tuple[float, float]]] = {"bare": [], "sandbox": [], "collector": []}
            ways = (("bare", bare_sdk), ("sandbox", sandbox_steps), ("collector", collector_steps))
            for _ in range(args.rounds):
                for way, fn in ways:
                    got[way].append(fn(sandbox, tool, arguments, args.calls))
            note = f"median of {args.rounds} rounds of {args.calls} {tool} calls over stdio; baseline: bare mcp.Client loop"
            base = [statistics.median(x[i] for x in got["bare"]) for i in (0, 1)]
            for way in ("sandbox", "collector"):
                ours = [statistics.median(x[i] for x in got[way]) for i in (0, 1)]
                rows = [
                    {"name": f"{name}_{way}_steps", "ours": round(ours[0], 1), "baseline": round(base[0], 1),
                     "ratio": round(ours[0] / base[0], 3), "unit": "steps/s", "notes": note},
                    {"name": f"{name}_{way}_cpu", "ours": round(ours[1]), "baseline": round(base[1]),
                     "ratio": round(base[1] / ours[1], 3), "unit": "client CPU us/step (ratio: baseline/ours)",
                     "notes": note},
                ]  # fmt: skip
                for row in rows:
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
