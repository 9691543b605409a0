"""Found (hunt 12-06n), around replay and stopping:

- an MCP replay drew other faults than the recording (the draw was keyed on the replay
  task's id), and a replay job without `faults:` drew none;
- a stop during a script's last step marked the finished episode cut short, and a
  resume ran it again;
- a replay prefix of digits only (`replay: 00123`, read by YAML as the octal 83) was
  refused as if it were missing;
- a replay's record kept no link to what it replayed;
- an MCP replay against a server without the recorded tools recorded its `Unknown tool`
  answers as success;
- `jobs submit --dry-run` of a replay job said `actions 0`.

Real parts: a real MCP server (mcp-server-time, mcp-server-git from the venv), `run_job`
with a real store, `worldtrace jobs submit --dry-run`. The stop is set from a sandbox
hook at the step it is meant to come in, never by timing a signal.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import job_dir, run_job
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.recorder import CUT_SHORT
from worldtrace.sandboxes.mcp import MCPSandbox
from worldtrace.schemas import Store, read_records
from worldtrace.schemas.parsing import ConfigError

TIME = {"kind": "mcp", "command": ["mcp-server-time", "--local-timezone", "Etc/UTC"]}
FAULTS = {"seed": 7, "error_rate": 0.5}
CONVERT = [
    {
        "tool": "convert_time",
        "arguments": {
            "source_timezone": "Europe/Paris",
            "time": f"{h:02d}:30",
            "target_timezone": "Asia/Tokyo",
        },
    }
    for h in range(9, 15)
]


def perturbations(t) -> list[str | None]:
    return [turn.perturbation for turn in t.turns]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Store, object]:
    """A store holding the hunter's job m1: six conversions under `error_rate: 0.5`."""
    store = Store.at(tmp_path_factory.mktemp("hunt1206n") / "store")
    spec = JobSpec.from_dict(
        {
            "name": "m1",
            "sandbox": {**TIME, "faults": FAULTS},
            "tasks": [{"id": "convert", "instruction": "Convert times.", "actions": CONVERT}],
        }
    )
    [t] = run_job(spec, store.raw).trajectories
    faults = perturbations(t)
    assert t.outcome.status == "success" and any(faults) and not all(faults), faults
    return store, t


def replay(store: Store, rec, task_id: str, sandbox: dict) -> object:
    spec = JobSpec.from_dict(
        {"name": "r", "sandbox": sandbox, "policy": "replay", "retries": 0,
         "tasks": [{"id": task_id, "replay": rec.trajectory_id[:8]}]}
    )  # fmt: skip
    spec.check_store(store.root)
    [t] = run_job(spec, store.raw).trajectories
    return t


# -- 2: a replay gets the recording's faults ---------------------------------------------


@pytest.mark.parametrize("faults", ["the job's", "the recording's"])
def test_an_mcp_replay_draws_the_recordings_faults_whatever_its_task_id(recorded, faults):
    store, rec = recorded
    sandbox = {**TIME, "faults": FAULTS} if faults == "the job's" else dict(TIME)
    t = replay(store, rec, "again", sandbox)  # another task id than the recording's
    assert perturbations(t) == perturbations(rec)
    assert t.trajectory_id == rec.trajectory_id  # the same episode, the same content id
    config, was = json.loads(t.environment.config), json.loads(rec.environment.config)
    assert config["faults"] == was["faults"]
    assert config["fault_task_id"] == was["fault_task_id"] == "convert"
    assert t.task.task_id == "again"  # the record says the replay's own task


# -- 6: a replay's record names what it replayed -----------------------------------------


def test_a_replay_record_names_the_trajectory_it_replayed_outside_its_content_id(recorded):
    store, rec = recorded
    t = replay(store, rec, "convert", {**TIME, "faults": FAULTS})
    assert t.metadata["replay_of"] == rec.trajectory_id
    assert t.trajectory_id == rec.trajectory_id
    [published] = [
        x for f in sorted(store.raw.rglob("*.parquet")) if "/r-" in str(f)
        for x in read_records(f) if x.metadata.get("replay_of") and x.task.task_id == "convert"
    ]  # fmt: skip
    assert published.metadata["replay_of"] == rec.trajectory_id


# -- 4: a replay against a server without the recorded tools -----------------------------


def test_an_mcp_replay_against_a_server_without_its_tools_fails_not_retried(recorded):
    store, rec = recorded
    git = {"kind": "mcp", "command": ["mcp-server-git", "--repository", "{workdir}"]}
    spec = JobSpec.from_dict(
        {"name": "rg", "sandbox": git, "policy": "replay", "retries": 2,
         "tasks": [{"id": "convert", "replay": rec.trajectory_id[:8], "setup": ["git init -q"]}]}
    )  # fmt: skip
    result = run_job(spec, store.raw)
    [t] = result.trajectories  # one attempt: no retry mends it
    assert t.outcome.status == "error" and not t.turns, t.outcome
    assert t.outcome.error.startswith(f"SandboxConfigError: replay of {rec.trajectory_id}")
    assert "'convert_time'" in t.outcome.error and "git_status" in t.outcome.error
    assert "\n" not in t.outcome.error


# -- 3: a stop during the last step ------------------------------------------------------


class StopAt(MCPSandbox):
    """The test's hook: `stop` is set while step number `at` runs (its answer is in)."""

    def __init__(self, config, stop: threading.Event, at: int):
        super().__init__(config)
        self.stop, self.at, self.steps = stop, at, 0

    def step(self, action):
        obs = super().step(action)
        self.steps += 1
        if self.steps == self.at:
            self.stop.set()
        return obs


def stopped_run(tmp_path: Path, actions: int, at: int, max_turns: int = 30, policy=None):
    """One scripted episode of `actions` calls (or `policy`'s) whose stop comes during step
    `at`: (spec, raw dir, the run's result)."""
    task = (
        {"id": "t", "actions": CONVERT[:actions]}
        if policy is None
        else {"id": "t", "instruction": "Convert."}
    )
    spec = JobSpec.from_dict(
        {"name": "k", "sandbox": TIME, "max_turns": max_turns, "tasks": [task],
         **({"policy": policy} if policy else {})}
    )  # fmt: skip
    raw, stop = tmp_path / "raw", threading.Event()
    sandbox = StopAt(spec.sandbox.config, stop, at)
    try:
        result = run_job(spec, raw, job_id="k-1", sandbox=sandbox, stop=stop)
    finally:
        sandbox.close()
    return spec, raw, result


def published(raw: Path) -> list[str]:
    return sorted(p.name for p in job_dir(raw, "k-1").glob("*.parquet"))


def test_a_stop_during_the_last_step_ends_the_episode_and_a_resume_runs_nothing(tmp_path):
    spec, raw, result = stopped_run(tmp_path, actions=3, at=3)
    [t] = result.trajectories
    assert (t.outcome.status, t.outcome.error, len(t.turns)) == ("success", None, 3)
    events: list[str] = []
    again = run_job(spec, raw, job_id="k-1", on_event=lambda e, **kw: events.append(e))
    assert not again.trajectories and "skipped" in events and "started" not in events
    assert published(raw) == ["t-e0-a1.parquet"]  # once, not run again


def test_a_stop_during_the_max_turns_th_step_ends_the_episode_at_max_turns(tmp_path):
    _, raw, result = stopped_run(tmp_path, actions=5, at=3, max_turns=3)
    [t] = result.trajectories
    assert (t.outcome.status, t.outcome.error, len(t.turns)) == ("incomplete", None, 3)
    assert published(raw) == ["t-e0-a1.parquet"]


def test_a_stop_before_the_last_step_still_cuts_the_episode(tmp_path):
    *_, result = stopped_run(tmp_path, actions=3, at=2)
    [t] = result.trajectories
    assert result.interrupted and (t.outcome.status, t.outcome.error) == ("incomplete", CUT_SHORT)
    assert len(t.turns) == 2


def test_a_stop_after_a_models_step_asks_the_model_nothing_more(tmp_path, chat_server):
    call = {"id": "c0", "type": "function",
            "function": {"name": "get_current_time", "arguments": '{"timezone": "UTC"}'}}  # fmt: skip
    chat_server.replies = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    policy = {"kind": "openai", "base_url": chat_server.base_url, "model": "m"}
    *_, result = stopped_run(tmp_path, actions=0, at=1, policy=policy)
    [t] = result.trajectories
    assert result.interrupted and (t.outcome.status, t.outcome.error) == ("incomplete", CUT_SHORT)
    assert len(chat_server.requests) == 1  # whether it had more to do is not asked of it


# -- 5: a prefix of digits only ----------------------------------------------------------


def test_a_replay_prefix_yaml_reads_as_a_number_is_refused_saying_to_quote_it(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(
        "name: r\nsandbox: {kind: terminal}\npolicy: replay\n"
        "tasks:\n  - {id: a, replay: 00123}\n  - {id: b, replay: 12345678}\n"
    )
    with pytest.raises(ConfigError) as info:
        JobSpec.load(f)
    lines = info.value.render().splitlines()
    assert len(lines) == 2, lines
    assert (
        "tasks[0].replay: YAML read the trajectory id prefix as the number 123" in lines[0]
    )  # YAML 1.2: no octal
    assert "number 12345678" in lines[1]
    assert all("quote it as written, replay: '00123'" in x for x in lines), lines


# -- 7: the dry run of a replay job ------------------------------------------------------


def test_the_dry_run_of_a_replay_job_counts_the_recordings_actions(recorded, tmp_path, wt_env):
    store, rec = recorded
    f = tmp_path / "r.yaml"
    f.write_text(
        f"name: r\nsandbox: {json.dumps(TIME)}\npolicy: replay\n"
        f"tasks: [{{id: again, replay: '{rec.trajectory_id[:8]}'}}]\n"
    )
    env = {**wt_env, "WORLDTRACE_STORE": str(store.root), "COLUMNS": "200"}
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", "--dry-run", str(f)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, (r.stdout, r.stderr)
    [row] = [x for x in r.stdout.splitlines() if "again-e0" in x]
    cells = [c.strip() for c in row.strip(" │|").split("│")]
    assert cells[0] == "again" and cells[-1] == "6", r.stdout
