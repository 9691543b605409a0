"""Collection jobs: a YAML job file -> episodes run with retries -> raw shards.

```yaml
name: terminal-basics
sandbox: terminal            # terminal | swe
docker: {image: worldtrace/debian:latest, memory: 512m, pids_limit: 128, step_timeout: 30}
swe: {repo: ./my-repo}       # for sandbox: swe
policy: scripted             # scripted | replay | openai
openai: {base_url: http://127.0.0.1:8000/v1, model: m}
episodes: 1                  # per task
max_turns: 30
retries: 1                   # extra attempts when the environment (not the agent) fails
tasks:
  - id: list-files
    instruction: List the files.
    setup: ["mkdir -p /root/x"]
    actions: ["ls -la\\n", {keystrokes: "C-c"}, {tool: bash, args: {command: ls}}]
```
"""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.schemas import Agent, Observation, Outcome, ShardWriter, Source, Trajectory

from .actions import from_spec
from .policies import History, OpenAIChatPolicy, Policy, ReplayPolicy, ScriptedPolicy
from .recorder import Recorder, recover

JOURNALS = ".journals"


@dataclass
class TaskEntry:
    id: str
    instruction: str = ""
    setup: list[str] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    replay: str | None = None
    """trajectory_id (or prefix) of a raw trajectory to replay."""


@dataclass
class JobSpec:
    name: str
    sandbox: str = "terminal"
    docker: dict[str, Any] = field(default_factory=dict)
    swe: dict[str, Any] = field(default_factory=dict)
    policy: str = "scripted"
    openai: dict[str, Any] = field(default_factory=dict)
    episodes: int = 1
    max_turns: int = 30
    retries: int = 1
    tasks: list[TaskEntry] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        data = yaml.safe_load(Path(path).read_text()) or {}
        return cls.from_dict(data, default_name=Path(path).stem)

    @classmethod
    def from_dict(cls, data: dict[str, Any], default_name: str = "job") -> JobSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown job field(s): {', '.join(sorted(unknown))}")
        tasks = [TaskEntry(**t) for t in data.get("tasks") or []]
        if not tasks:
            raise ValueError("a job needs at least one task")
        return cls(**{**data, "name": data.get("name") or default_name, "tasks": tasks})


@dataclass
class JobResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    failed_attempts: int = 0
    shards: list[Path] = field(default_factory=list)


def make_sandbox(spec: JobSpec):
    """The job's sandbox from the lazy registry; options under the sandbox's own key."""
    from worldtrace.sandboxes.base import load
    from worldtrace.sandboxes.docker import DockerConfig

    try:
        cls = load(spec.sandbox)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from exc
    options = getattr(spec, spec.sandbox, None) or {}
    return cls(cls.config_class(docker=DockerConfig(**spec.docker), **options))


def make_policy(spec: JobSpec, task: TaskEntry, raw_dir: Path | None) -> Policy:
    if spec.policy == "scripted":
        return ScriptedPolicy([from_spec(a) for a in task.actions])
    if spec.policy == "replay":
        from worldtrace.schemas import read_records

        found = (
            [
                t
                for t in read_records(raw_dir)
                if task.replay and t.trajectory_id.startswith(task.replay)
            ]
            if raw_dir
            else []
        )
        if len(found) != 1:
            raise ValueError(
                f"task {task.id}: replay {task.replay!r} matches {len(found)} raw trajectories"
            )
        return ReplayPolicy(found[0])
    if spec.policy == "openai":
        return OpenAIChatPolicy(terminal=spec.sandbox == "terminal", **spec.openai)
    raise ValueError(f"unknown policy {spec.policy!r} (scripted, replay, openai)")


def run_episode(
    sandbox, policy: Policy, task: TaskEntry, recorder: Recorder, max_turns: int
) -> Trajectory:
    """The episode loop: policy <-> sandbox until the policy stops or max_turns."""
    initial = sandbox.reset(TaskSpec(task.id, task.instruction, tuple(task.setup)))
    recorder.header(initial)
    history = History(task.instruction, initial, sandbox.describe().get("action_space") or [])
    status = "success"
    for _ in range(max_turns):
        action = policy.act(history)
        if action is None:
            break
        recorder.step(action, history.pending_reasoning)
        history.pending_reasoning = None
        history.turns = recorder.turns
    else:
        status = "incomplete"  # stopped by max_turns
    return recorder.finish(Outcome(status=status))


def run_job(
    spec: JobSpec, raw_dir: str | Path, job_id: str | None = None, sandbox=None
) -> JobResult:
    """Run every episode of a job; every attempt, failed or not, is written."""
    job_id = job_id or f"{spec.name}-{uuid.uuid4().hex[:8]}"
    out = Path(raw_dir) / "collect" / job_id
    journals = out / JOURNALS
    result = JobResult()
    sandbox = sandbox or make_sandbox(spec)
    try:
        with ShardWriter(out, prefix=spec.name) as writer:
            for _, t in recover(journals):  # a previous run of this job that crashed
                writer.write(t)
                result.trajectories.append(t)
            for task in spec.tasks:
                for e in range(spec.episodes):
                    episode_id = f"{task.id}-e{e}"
                    for attempt in range(1, spec.retries + 2):
                        t = attempt_episode(
                            spec, task, sandbox, journals, job_id, episode_id, attempt, raw_dir
                        )
                        writer.write(t)
                        result.trajectories.append(t)
                        if t.outcome.status != "error":
                            break
                        result.failed_attempts += 1
        result.shards = list(writer.paths)
        shutil.rmtree(journals, ignore_errors=True)  # everything journaled is now in a shard
    finally:
        sandbox.close()
    return result


def attempt_episode(
    spec, task, sandbox, journals, job_id, episode_id, attempt, raw_dir
) -> Trajectory:
    policy = make_policy(spec, task, Path(raw_dir))
    source = Source(
        kind="collector", name=spec.sandbox, job_id=job_id, episode_id=episode_id, attempt=attempt
    )
    agent = Agent(name=policy.name, model=getattr(policy, "model", None), policy=spec.policy)
    rec = Recorder(
        sandbox, journals, source=source, agent=agent, task_id=task.id, instruction=task.instruction
    )
    try:
        return run_episode(sandbox, policy, task, rec, spec.max_turns)
    except (SandboxError, OSError, RuntimeError) as exc:
        if not rec.path.exists():
            rec.header(Observation(""))  # reset failed: no initial observation
        return rec.finish(Outcome(status="error", error=f"{type(exc).__name__}: {exc}"))
