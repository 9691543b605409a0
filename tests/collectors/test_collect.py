"""Episodes end to end on real containers: recording, replay, crash recovery, policies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.collectors.recorder import recover
from worldtrace.schemas import read_records, validate_dict

from ..conftest import remove_containers, wait_until
from .test_queue import slow_job

pytestmark = pytest.mark.docker

TERMINAL_JOB = {
    "name": "basics",
    "sandbox": "terminal",
    "tasks": [
        {
            "id": "files",
            "instruction": "Make a file and read it back.",
            "setup": ["mkdir -p /root/proj"],
            "actions": [
                "cd /root/proj\n",
                "printf 'a\\nb\\n' > notes.txt\n",
                "wc -l notes.txt\n",
                "cat notes.txt\n",
                "echo $((6 * 7))\n",
            ],
        }
    ],
}


def test_recorded_trajectory_validates_with_system_prompt(docker_engine, store):
    r = run_job(JobSpec.from_dict(TERMINAL_JOB), store.raw)
    [t] = r.trajectories
    assert validate_dict(t.to_dict()) == []
    assert t.domain == "terminal" and t.outcome.status == "success" and len(t.turns) == 5
    assert t.system.task_description == "Make a file and read it back."
    assert json.loads(t.system.action_space)[0]["name"] == "keystrokes"
    assert "Debian" in t.system.initial_state and "user@sandbox" in t.system.initial_state
    assert (
        t.environment.backend == "docker" and json.loads(t.environment.config)["network"] == "none"
    )
    assert all(x.duration_ms is not None and x.started_at is not None for x in t.turns)
    assert "42\n" in t.turns[4].observation.text
    assert [x.trajectory_id for x in read_records(store.raw)] == [t.trajectory_id]
    assert not list(
        (store.raw / "collect").rglob("*.journal.jsonl")
    )  # journals gone once published


def test_replay_reproduces_deterministic_observations(docker_engine, store):
    [original] = run_job(JobSpec.from_dict(TERMINAL_JOB), store.raw).trajectories
    replay = {
        **TERMINAL_JOB,
        "name": "replay",
        "policy": "replay",
        "tasks": [
            {**TERMINAL_JOB["tasks"][0], "actions": [], "replay": original.trajectory_id[:12]}
        ],
    }
    [again] = run_job(JobSpec.from_dict(replay), store.raw).trajectories
    assert [x.observation.text for x in again.turns] == [x.observation.text for x in original.turns]
    assert again.trajectory_id == original.trajectory_id  # same content, same id
    assert again.source.job_id != original.source.job_id


def test_a_replay_runs_under_the_recordings_instruction_setup_and_conditions(docker_engine, store):
    """Found: the documented `{id: r, replay: PREFIX}` replayed the actions without the
    recording's set-up (`cd /root/proj: No such file or directory`), instruction ("") and
    conditions, and kept that other episode as a success."""
    job = {**TERMINAL_JOB, "conditions": [{"kind": "memory_low", "limit": "128m"}]}
    [original] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert json.loads(original.environment.config)["setup"] == ["mkdir -p /root/proj"]
    replay = {
        "name": "replay",
        "sandbox": "terminal",
        "policy": "replay",
        "tasks": [{"id": "r", "replay": original.trajectory_id[:12]}],
    }
    [again] = run_job(JobSpec.from_dict(replay), store.raw).trajectories
    assert [x.observation.text for x in again.turns] == [x.observation.text for x in original.turns]
    assert again.trajectory_id == original.trajectory_id
    assert again.task.instruction == "Make a file and read it back."
    assert json.loads(again.conditions) == json.loads(original.conditions)
    assert json.loads(again.environment.config) == json.loads(original.environment.config)


def test_swe_job(docker_engine, store, repo):
    job = {
        "name": "swe",
        "sandbox": {"kind": "swe", "repo": str(repo)},
        "tasks": [{"id": "fix-add", "instruction": "add() subtracts; fix it.", "actions": [
            {"tool": "read", "arguments": {"path": "pkg/calc.py"}},
            {"tool": "edit", "arguments": {"path": "pkg/calc.py", "old": "a - b", "new": "a + b"}},
            {"tool": "bash", "arguments": {"command": "python3 -c 'from pkg.calc import add; print(add(1, 2))'"}},
        ]}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.action.name for x in t.turns] == ["read", "edit", "bash"]
    assert t.turns[2].observation.text == "3\n"
    assert {a["name"] for a in json.loads(t.system.action_space)} == {"read", "edit", "bash"}
    assert "pkg/calc.py" in t.system.initial_state
    assert validate_dict(t.to_dict()) == []


def test_environment_failure_is_retried_and_recorded(docker_engine, store):
    job = {
        **TERMINAL_JOB,
        "retries": 1,
        "tasks": [{"id": "broken", "setup": ["exit 3"], "actions": ["ls\n"]}],
    }
    r = run_job(JobSpec.from_dict(job), store.raw)
    assert [(t.source.attempt, t.outcome.status) for t in r.trajectories] == [
        (1, "error"),
        (2, "error"),
    ]
    assert "task setup failed (3)" in r.trajectories[0].outcome.error
    assert r.failed_attempts == 2
    assert len(list(read_records(store.raw))) == 2  # never dropped


CRASHER = textwrap.dedent(
    """
    import sys
    from worldtrace.collectors.actions import keystrokes
    from worldtrace.collectors.recorder import Recorder
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.terminal import TerminalSandbox
    from worldtrace.schemas import Agent, Source
    sb = TerminalSandbox()
    rec = Recorder(sb, sys.argv[1], source=Source(episode_id="ep1", attempt=1), agent=Agent(name="t"), task_id="t", instruction="crash test")
    rec.header(sb.reset(TaskSpec("t")))
    rec.step(keystrokes("echo one\\n"))
    rec.step(keystrokes("echo two\\n"))
    print(sb.pool.pool_id, flush=True)
    sys.stdin.readline()
    """
)


def test_crash_loses_at_most_the_turn_in_flight(docker_engine, tmp_path):
    journals = tmp_path / "journals"
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(journals)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    pool_id = proc.stdout.readline().strip()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # the killed collector could not clean up its own containers
    remove_containers(docker_engine, {"label": f"worldtrace.sandbox.pool={pool_id}"})
    [(_, t)] = recover(journals)
    assert t.outcome.status == "incomplete"
    assert [x.observation.text.splitlines()[1] for x in t.turns] == ["one", "two"]
    assert validate_dict(t.to_dict()) == []


def test_openai_policy_against_local_server(docker_engine, store, repo, chat_server, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sk-local")
    chat_server.replies = [
        {
            "role": "assistant",
            "content": "Let me read the file first.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "pkg/calc.py"}'},
                }
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "It subtracts.",
            "tool_calls": [
                {
                    "id": "b",
                    "type": "function",
                    "function": {
                        "name": "edit",
                        "arguments": '{"path": "pkg/calc.py", "old": "a - b", "new": "a + b"}',
                    },
                }
            ],
        },
        {"role": "assistant", "content": "Done."},
    ]
    job = {
        "name": "llm", "sandbox": {"kind": "swe", "repo": str(repo)},
        "policy": {"kind": "openai", "base_url": chat_server.base_url, "model": "scripted-model", "api_key_env": "TEST_KEY"},
        "tasks": [{"id": "fix", "instruction": "Fix add()."}],
    }  # fmt: skip
    [t] = run_job(JobSpec.from_dict(job), store.raw).trajectories
    assert [x.action.name for x in t.turns] == ["read", "edit"]
    assert (
        t.turns[0].reasoning == "Let me read the file first."
        and t.turns[1].reasoning == "It subtracts."
    )
    assert "Let me" not in t.turns[0].action.text
    assert t.agent.model == "scripted-model" and t.outcome.status == "success"
    reqs = chat_server.requests
    assert (
        len(reqs) == 3
        and reqs[0]["path"] == "/v1/chat/completions"
        and reqs[0]["auth"] == "Bearer sk-local"
    )
    assert {x["function"]["name"] for x in reqs[0]["body"]["tools"]} == {"read", "edit", "bash"}
    last = reqs[2]["body"]["messages"]
    assert last[-1]["role"] == "tool" and "+    return a + b" in last[-1]["content"]


def test_collect_cli_quick_run(docker_engine, wt_env):
    r = subprocess.run(
        ["worldtrace", "collect", "--sandbox", "docker", "--keys", "echo quick\\n", "--keys", "pwd\\n"],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "success (2 turns)" in r.stdout
    v = subprocess.run(
        ["worldtrace", "validate", f"{wt_env['WORLDTRACE_STORE']}/raw"],
        capture_output=True,
        text=True,
        env=wt_env,
    )
    assert v.returncode == 0, v.stdout


CRASHING_RUN = textwrap.dedent(
    """
    import json, sys
    from worldtrace.collectors.jobs import JobSpec, run_job
    spec = JobSpec.from_dict(json.loads(sys.argv[1]))
    sb = spec.build_sandbox()
    print(sb.pool.pool_id, flush=True)
    run_job(spec, sys.argv[2], job_id="crashed", sandbox=sb)
    """
)


def test_rerunning_a_crashed_job_id_resumes_without_appending(docker_engine, store):
    """A run killed mid-episode leaves a journal; running the job id again publishes it
    as it stands, runs that episode again (our kill cut it short: found, a resume never
    finished it) and the rest: every attempt once, turn indices 0..n-1."""
    job = {**TERMINAL_JOB, "episodes": 2, "tasks": [{"id": "t", "actions": [
        "echo one\n", {"keystrokes": "sleep 2\n", "duration": 4}, "echo two\n"]}]}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING_RUN, json.dumps(job), str(store.raw)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    pool_id = proc.stdout.readline().strip()
    journal = store.raw / "collect" / "crashed" / ".journals" / "t-e0-a1.journal.jsonl"
    wait_until(lambda: journal.exists() and '"kind": "turn"' in journal.read_text(), what="a turn")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # the killed collector could not clean up its own containers
    remove_containers(docker_engine, {"label": f"worldtrace.sandbox.pool={pool_id}"})
    r = run_job(JobSpec.from_dict(job), store.raw, job_id="crashed")
    got = {(t.source.episode_id, t.source.attempt): t for t in r.trajectories}
    assert sorted(got) == [("t-e0", 1), ("t-e0", 2), ("t-e1", 1)]
    assert got[("t-e0", 1)].outcome.status == "incomplete"
    for done in (("t-e0", 2), ("t-e1", 1)):
        assert got[done].outcome.status == "success" and len(got[done].turns) == 3
    for t in read_records(store.raw):
        assert [x.index for x in t.turns] == list(range(len(t.turns)))
    assert sorted(p.name for p in (store.raw / "collect" / "crashed").glob("*.parquet")) == [
        "t-e0-a1.parquet",
        "t-e0-a2.parquet",
        "t-e1-a1.parquet",
    ]
    assert run_job(JobSpec.from_dict(job), store.raw, job_id="crashed").trajectories == []


def test_an_interrupt_keeps_the_episodes_already_collected(docker_engine, wt_env, tmp_path, repo):
    """Ctrl-C during the second episode: the first one is published, the second one is
    published as it stands (incomplete); before, the run's shard was discarded. Two steps
    an episode: a stop in the last step ends a finished episode (hunt 1206n)."""
    f = tmp_path / "job.yaml"
    f.write_text(json.dumps(slow_job(repo, episodes=2, steps=2)))
    proc = subprocess.Popen(
        ["worldtrace", "collect", str(f)], env=wt_env, stdout=subprocess.PIPE, text=True
    )
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"

    def second_started():  # the first has ended: its shard is published
        return list(raw.glob("collect/*/t-e0-a1.parquet")) and list(
            raw.glob("collect/*/.journals/t-e1-a1.*")
        )

    wait_until(second_started, timeout=60, what="the second episode's start")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "t-e0 attempt 1: success (2 turns)  [1/2" in out  # plain progress lines off a TTY
    got = {t.source.episode_id: t.outcome.status for t in read_records(raw)}
    assert got == {"t-e0": "success", "t-e1": "incomplete"}


def test_a_stop_between_attempts_records_no_attempt_and_a_resume_runs_it(docker_engine, store):
    """Ctrl-C landing between two episodes recorded a 0-turn `incomplete` attempt of the
    next one, which a resume then never ran: nothing had started."""
    job = JobSpec.from_dict({**TERMINAL_JOB, "episodes": 2})
    stop = threading.Event()
    events = []

    def on_event(event, **info):
        events.append((event, info.get("episode")))
        if event == "finished":
            stop.set()  # after the first episode, before the second starts

    first, second = (e.episode_id for e in job.expand())
    r = run_job(job, store.raw, job_id="between", stop=stop, on_event=on_event)
    assert r.interrupted and [t.source.episode_id for t in r.trajectories] == [first]
    assert ("started", second) not in events and ("interrupted", second) in events
    assert not list((store.raw / "collect" / "between").glob(".journals/*"))
    again = run_job(job, store.raw, job_id="between")
    assert [(t.source.episode_id, t.outcome.status) for t in again.trajectories] == [
        (second, "success")
    ]
