"""Found (hunt 1205d, a user's reports, each reproduced): `worker` said `succeeded` with no
word for an episode cut at max_turns (`collect` says `incomplete ...: stopped at
max_turns`) and `jobs show --json` had `ending: null`; a `workdir.copy` folder removed
after `jobs submit` was retried `retries` times without saying SandboxConfigError, which
docs/mcp.md promises (no retry), as the other host-bound mistakes do; a job file with a lone
surrogate reported only that, hiding its other problems until it was mended.

The real CLI (in process) and worker, and a tiny real stdio MCP server written to tmp_path
that answers each tools/call with its `arguments.result`."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from worldtrace.schemas import Store

from ..sandboxes.test_mcp_hunt_1205d import MIRROR
from ..worldtrace.test_query import run_cli


def mirror_job(tmp_path, actions: int, **extra) -> str:
    """A job file: `actions` mirror calls, as JSON (YAML reads it)."""
    server = tmp_path / "mirror.py"
    server.write_text(MIRROR)
    call = {
        "tool": "mirror",
        "arguments": {"result": {"content": [{"type": "text", "text": "ok"}]}},
    }
    job = {
        "name": "mirror",
        "sandbox": {"kind": "mcp", "command": [sys.executable, str(server)], "protocol": "legacy"},
        "policy": "scripted",
        "tasks": [{"id": "t", "instruction": "t", "actions": [call] * actions}],
        **extra,
    }
    path = tmp_path / "mirror.json"
    path.write_text(json.dumps(job))
    return str(path)


def submit_and_work(store: Store, job: str):
    r = run_cli(store, "--create", "jobs", "submit", job)
    assert r.exit_code == 0, r.output
    job_id = r.stdout.strip()
    worked = run_cli(store, "worker")
    assert worked.exit_code == 0, worked.output
    shown = run_cli(store, "jobs", "show", job_id, "--json")
    assert shown.exit_code == 0, shown.output
    return job_id, worked, json.loads(shown.stdout)["attempts"]


def test_the_worker_says_an_episode_stopped_at_max_turns(tmp_path):
    store = Store.at(tmp_path / "store")
    job_id, worked, attempts = submit_and_work(store, mirror_job(tmp_path, 5, max_turns=3))
    [line] = [x for x in worked.stdout.splitlines() if "finished" in x]
    assert f"finished  {job_id}/t-e0 a1: succeeded (3 turns" in line, line
    assert line.endswith(": stopped at max_turns"), line
    [a] = attempts
    assert (a["status"], a["error"], a["ending"]) == ("succeeded", None, "stopped at max_turns")


def test_a_workdir_copy_removed_after_submit_fails_once_saying_why(tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "notes.txt").write_text("x\n")
    store = Store.at(tmp_path / "store")
    job = Path(mirror_job(tmp_path, 1, retries=2))
    data = json.loads(job.read_text())
    data["sandbox"]["workdir"] = {"copy": str(seed)}
    job.write_text(json.dumps(data))
    r = run_cli(store, "--create", "jobs", "submit", str(job))
    assert r.exit_code == 0, r.output
    shutil.rmtree(seed)
    worked = run_cli(store, "worker")
    assert worked.exit_code == 0, worked.output
    shown = json.loads(run_cli(store, "jobs", "show", r.stdout.strip(), "--json").stdout)
    [a] = shown["attempts"]  # no retry brings the folder back
    assert a["status"] == "failed", a
    assert a["error"].startswith("SandboxConfigError: "), a["error"]
    assert f"sandbox.workdir.copy: {seed} does not exist" in a["error"], a["error"]


def test_a_job_file_with_a_lone_surrogate_reports_every_problem(tmp_path):
    job = tmp_path / "half.json"
    job.write_text(
        json.dumps(
            {
                "name": "half",
                "max_turns": -1,
                "sandbox": {"kind": "mcp", "command": ["x"], "bogus": 1},
                "tasks": [{"id": "t", "instruction": "say \ud83d", "actions": ["ls\n"]}],
            }
        )
    )
    r = run_cli(Store.at(tmp_path / "store"), "--create", "jobs", "submit", str(job))
    assert r.exit_code != 0, r.output
    assert "tasks[0].instruction: a lone surrogate" in r.output, r.output
    assert "max_turns: Input should be greater than or equal to 1" in r.output, r.output
    assert "sandbox.bogus: unknown key" in r.output, r.output
    assert "Traceback" not in r.output
