"""Found (an import hunt with the real foreign files, 2026-12-07): a SWE-agent import never
carried its model (read from `info.model_stats`, which holds costs only; 1.x keeps it in
`replay_config`) and dropped `model_stats`; a piped import (`/dev/stdin`, `<(...)`) stored
`/proc/PID/fd/pipe:[N]` as its origin, so the same records piped again were stored again
(and a whole file's task id was `63`, the fd); a SWE-agent step with `"action": null`
became an empty action that `process` dropped with the observation it answered, the
import saying nothing. Real parts: files in the shapes SWE-agent writes, the `worldtrace`
CLI in a subprocess (through bash for a process substitution), the real importers."""

from __future__ import annotations

import json
import subprocess

from .test_import_fidelity import items
from .test_import_hunt_1205f import stored

COSTS = {"instance_cost": 0.5, "tokens_sent": 5000, "tokens_received": 300, "api_calls": 2}
"""SWE-agent's `InstanceStats`: costs and counts, no model."""


def step(action, observation, seconds=0.2):
    """A SWE-agent 1.x trajectory step (sweagent/types.py `TrajectoryStep`)."""
    return {
        "action": action,
        "observation": observation,
        "response": "r",
        "thought": "t",
        "execution_time": seconds,
        "state": {"working_dir": "/repo"},
        "query": [],
        "extra_info": {},
    }


def run_1x(steps, replay_config):
    """A SWE-agent 1.x `.traj` as `Agent.get_trajectory_data` writes it: `replay_config` is
    the run's `RunSingleConfig.model_dump_json()`."""
    return {
        "trajectory": steps,
        "history": [],
        "info": {
            "exit_status": "submitted",
            "submission": "diff",
            "model_stats": COSTS,
        },
        "replay_config": replay_config,
        "environment": "main",
    }


def test_a_swe_agent_run_carries_its_model_and_its_costs(tmp_path):
    config = {
        "env": {"repo": {"path": "/repo"}},
        "agent": {"model": {"name": "claude-3-5-sonnet-20241022", "per_instance_cost_limit": 3.0}},
    }
    f = tmp_path / "run.traj"
    f.write_text(json.dumps(run_1x([step("ls\n", "a.py\n")], json.dumps(config))))
    [t], problems = items(f)
    assert problems == []
    assert t.agent.model == "claude-3-5-sonnet-20241022"
    assert json.loads(t.metadata["model_stats"]) == COSTS
    # a config written as an object, one without a model, one that is not JSON: no model
    for other, model in [
        (config, "claude-3-5-sonnet-20241022"),
        ({"agent": {}}, None),
        ("{not json", None),
        (None, None),
    ]:
        f.write_text(json.dumps(run_1x([step("ls\n", "a.py\n")], other)))
        [t], _ = items(f)
        assert t.agent.model == model, other


def test_a_null_swe_agent_action_is_invalid_and_named(tmp_path):
    steps = [step("ls\n", "a.py\n"), step(None, "[File: /repo/a.py (10 lines total)]\n1:x\n")]
    f = tmp_path / "run.traj"
    f.write_text(json.dumps(run_1x(steps, None)))
    trajectories, problems = items(f)
    assert trajectories == []
    assert [p.kind for p in problems] == ["invalid"]
    assert "trajectory[1].action: expected a string, got null" in problems[0].message
    # from `history` alone too: an assistant message whose `action` is null
    history = [
        {"role": "system", "content": "You are SWE-agent."},
        {"role": "user", "content": "Fix the bug"},
        {"role": "assistant", "content": "t", "thought": "t", "action": None},
        {"role": "user", "content": "a.py\n"},
    ]
    f.write_text(json.dumps({"history": history, "info": {"exit_status": "submitted"}}))
    trajectories, problems = items(f)
    assert trajectories == []
    assert "history[2].action: expected a string, got null" in problems[0].message


CALL = {"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}


def chat(i):
    return {
        "id": f"c{i}",
        "messages": [
            {"role": "user", "content": f"list the files of project {i}"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "a", "content": f"file_{i}.py\n"},
        ],
    }


def test_piping_the_same_records_again_finds_them_present(tmp_path, wt_env):
    text = "".join(json.dumps(chat(i)) + "\n" for i in range(3))
    args = ["worldtrace", "import", "--create", "--format", "openai", "/dev/stdin"]
    for _ in range(2):
        r = subprocess.run(args, input=text, capture_output=True, text=True, env=wt_env)
        assert r.returncode == 0, r.stdout + r.stderr
    assert "already present" in r.stdout, r.stdout
    got = stored(wt_env)
    assert len(got) == 3
    assert {t.source.origin_path for t in got} == {"<stdin>"}
    # a process substitution: `<pipe>`, and a whole file's task id is no fd number
    f = tmp_path / "run.traj"
    f.write_text(json.dumps(run_1x([step("ls\n", "a.py\n")], None)))
    for _ in range(2):
        r = subprocess.run(
            ["bash", "-c", f"worldtrace import <(cat {f})"],
            capture_output=True,
            text=True,
            env=wt_env,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    assert "already present" in r.stdout, r.stdout
    [swe] = [t for t in stored(wt_env) if t.source.origin_format == "swe-agent"]
    assert (swe.source.origin_path, swe.task.task_id) == ("<pipe>", "pipe")
    # a file given on stdin by redirection keeps its own path
    f2 = tmp_path / "chats.jsonl"
    f2.write_text(json.dumps(chat(7)) + "\n")
    with f2.open() as stdin:
        r = subprocess.run(
            [*args[:-1], "/dev/stdin"], stdin=stdin, capture_output=True, text=True, env=wt_env
        )
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(f2) in {t.source.origin_path for t in stored(wt_env)}


def test_a_pipe_read_with_other_options_is_imported_beside_the_earlier(tmp_path, wt_env):
    """An earlier import's records at the same place are found by reading the input again
    with that import's options; a pipe cannot be read again: new records beside them."""
    text = "".join(json.dumps(chat(i)) + "\n" for i in range(2))
    base = ["worldtrace", "import", "--create", "--format", "openai"]
    for extra in ([], ["--max-observation-chars", "4"]):
        r = subprocess.run(
            base + extra + ["/dev/stdin"],
            input=text,
            capture_output=True,
            text=True,
            env=wt_env,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    texts = sorted(t.turns[0].observation.text for t in stored(wt_env))
    assert texts == ["file", "file", "file_0.py\n", "file_1.py\n"]


def test_import_takes_at_most_four_workers_a_core(tmp_path, wt_env):
    """Found (a CLI hunt, 12-07): `import --workers N` had no upper bound: 50 forked 26
    processes for a 5-record file, and 100000 ended in the kernel's out-of-memory killer
    (exit 137, nothing said). It is refused as `process --workers` is, past 4 a core."""
    from worldtrace.schemas.config import max_workers

    f = tmp_path / "chats.jsonl"
    f.write_text(json.dumps(chat(1)) + "\n")
    args = ["worldtrace", "import", "--create", str(f), "--workers"]
    r = subprocess.run([*args, "100000"], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--workers: expected 0 (auto) to {max_workers()} (4 per core)" in r.stderr
    assert stored(wt_env) == []
    r = subprocess.run([*args, str(max_workers())], capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(stored(wt_env)) == 1
