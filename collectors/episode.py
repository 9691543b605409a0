"""The one episode loop every sandbox kind and policy shares.

Errors have owners. What the environment answers comes back from `sandbox.step` as an
Observation and is recorded. Anything raised (a SandboxError, a docker API error, a bug
in a tool, a policy that cannot reach its model) is ours or the infrastructure's: the
attempt ends with outcome `error` and the reason, and is retried per the job's policy,
unless it is a SandboxConfigError: the job's configuration cannot work with its
environment (a `shell:` the image lacks), every retry would fail alike, and the episode
ends with that attempt (`retriable`). Such text never becomes an observation.

An environment may end an episode itself (a terminal whose shell exited): the sandbox
then sets `ended` to why after that step, which is recorded like any other; the episode
ends with outcome `success` and that reason, since no later action could reach it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worldtrace.sandboxes.base import (
    SandboxConfigError,
    StopRequested,
    action_kinds,
    static_action_space,
)
from worldtrace.sandboxes.condition_kinds import within
from worldtrace.sandboxes.conditions import Condition, Plan, reset_sandbox
from worldtrace.schemas import Agent, Observation, Outcome, Source, Trajectory
from worldtrace.schemas.tempfiles import StoreWriteError

from .jobspec import Episode, JobSpec
from .policies import (
    History,
    Policy,
    PolicyConfigError,
    ReplayPolicy,
    ScriptedPolicy,
    replay_mismatch,
    replay_task,
)
from .recorder import Recorder


class Interrupted(Exception):
    """The collector was asked to stop (SIGTERM/SIGINT) between two steps."""


def run_episode(
    sandbox,
    policy: Policy,
    task,
    recorder: Recorder,
    max_turns: int,
    stop: threading.Event | None = None,
    conditions: tuple = (),
) -> Trajectory:
    """Policy <-> sandbox until the policy stops or `max_turns`; raises on our failures."""
    try:
        initial = reset_sandbox(sandbox, task, conditions, recorder.episode_id, stop)
    except StopRequested as exc:  # waiting for a device when the worker stopped
        raise Interrupted(str(exc)) from exc
    recorder.header(initial)
    history = History(task.instruction, initial, sandbox.describe().get("action_space") or [])
    if isinstance(policy, ReplayPolicy):
        _check_live_tools(policy, sandbox, recorder.domain, history.action_space)
    status = "success"
    for _ in range(max_turns):
        if stop is not None and stop.is_set():
            if not _plays_on(policy, history):  # it had played all: the episode is over
                break
            raise Interrupted("stop requested")
        action = policy.act(history)
        if action is None:
            break
        recorder.step(action, history.pending_reasoning)
        history.pending_reasoning = None
        history.turns = recorder.turns
        ended = getattr(sandbox, "ended", None)
        if ended:  # the environment itself is over (the shell exited): say why
            return recorder.finish(Outcome(status="success", error=ended))
    else:  # max_turns ran out: cut, unless a script had played its last action
        if _plays_on(policy, history):
            status = "incomplete"
    failed = _ended_failed(recorder.turns) if status == "success" else None
    if failed:
        return recorder.finish(Outcome(status="failure", error=failed))
    return recorder.finish(Outcome(status=status))


def _plays_on(policy: Policy, history: History) -> bool:
    """Whether the policy may have an action left, asked without playing it: a scripted
    or replay policy knows (its list is played out); any other is assumed to (a model is
    not called after a stop). A stop that came during a script's last step marked the
    finished episode cut short, and a resume ran it again; a script of exactly
    `max_turns` actions was recorded `incomplete`."""
    if isinstance(policy, ScriptedPolicy):
        return len(history.turns) < len(policy.actions)
    return True


def _check_live_tools(
    policy: ReplayPolicy, sandbox, domain: str, action_space: list[dict[str, Any]]
) -> None:
    """A replay against a sandbox whose tools only the live one knows (MCP lists them at
    reset; `jobs submit` checked the others) calls only tools it has: against another
    server it recorded `MCP error -32602: Unknown tool: ...` on every turn as success."""
    if static_action_space(type(sandbox), getattr(sandbox, "config", None)) is not None:
        return
    tools = {t.get("name") for t in action_space if isinstance(t, dict)}
    kind = getattr(sandbox, "kind", "?")
    why = replay_mismatch(policy.recorded, kind, domain, action_kinds(type(sandbox)), tools)
    if why:
        raise SandboxConfigError(f"replay of {why}")


ENDING_FAILURES = ("app_crashed", "anr", "device_offline", "crashed", "navigation_failed")
"""The environment failures an episode cannot end well on (`Observation.env_failure`):
an app or a page crashed, an app not responding, a device gone, a navigation that never
arrived. Not a page's state a script may end on by design (`http_error:404`), nor one
guessed from the page's tree (`blank_page`, `captcha`)."""


def _ended_failed(turns) -> str | None:
    """Why an episode the policy ended is no success: its last observation is one of the
    `ENDING_FAILURES` the sandbox flagged, where an explorer stops (`stop_on_failure`)
    and a script may end. It said `success` (an Android explorer's crash counted as the
    demo's one success); the environment answered, so this is `failure`, not our
    `error`, and no retry is made."""
    last = turns[-1].observation if turns else None
    if last is None or last.env_failure not in ENDING_FAILURES:
        return None
    return f"the episode ended on an environment failure: {last.env_failure} (turn {len(turns)})"


def failure_reason(exc: BaseException) -> str:
    """`Class: first line`, one line: a message of several lines keeps its first and its
    last (`first … last`: what failed, and the error a command's output ends with, which
    the first line alone lost); a configuration mistake is named by its kind
    (`SandboxConfigError: ...` for docker's `EnvError` too): the record says by itself
    that no retry can mend it (`retriable`)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " … ".join([lines[0][:1000], lines[-1][-900:]] if len(lines) > 1 else lines)
    kind = next((c for c in NOT_RETRIED_KINDS if isinstance(exc, c)), type(exc))
    return f"{kind.__name__}: {text}".rstrip(": ")[:2000]


NOT_RETRIED_KINDS = (SandboxConfigError, PolicyConfigError)
"""Failures no retry can mend: a configuration mistake fails every attempt alike."""
NOT_RETRIED = tuple(f"{cls.__name__}: " for cls in NOT_RETRIED_KINDS)
"""How the error of an attempt no retry can mend begins (its `failure_reason`): the record
says so itself, for a run of the job and for a worker alike."""


def retriable(t: Trajectory) -> bool:
    """Whether another attempt may mend the failed attempt `t`: not after a
    SandboxConfigError or PolicyConfigError (a configuration mistake fails every attempt
    alike)."""
    return not (t.outcome.error or "").startswith(NOT_RETRIED)


CONFIGURED_KEYS = ("backend", "image", "config")
"""What `describe()` says of a sandbox whose reset failed that its configuration, not the
failed reset, holds: the rest (initial state, conditions, server, url, device) may be
the last episode's."""


def unstarted(sandbox, conditions: Sequence[Condition]) -> dict[str, Any]:
    """What is known of an attempt whose sandbox did not start (`Recorder.header`'s
    `known`): its configured environment, and the conditions drawn for it as a started
    one records them (`Plan.records`: under the job's limits, the defaults that depend on
    the sandbox spelled out; not what a set-up would have chosen, corrupt_file's offset),
    so that failures group by condition as successes do."""
    d = sandbox.describe()
    known = {k: d[k] for k in CONFIGURED_KEYS if d.get(k) is not None}
    if conditions and getattr(sandbox, "accepts_conditions", False):
        config = sandbox.config
        plan = Plan(within(conditions, config.docker), sandbox.where(config))
        known["conditions"] = plan.records()
    elif conditions:  # a kind that takes none (its reset refused them): as drawn
        known["conditions"] = [
            {k: v for k, v in c.record().items() if v is not None} for c in conditions
        ]
    return known


REPLAY_OF = "replay_of"
"""The `metadata` key of a replay's record: the id of the trajectory it replayed (metadata
is no part of the content id, so a replay that came out identical keeps the same id)."""


def attempt_episode(
    spec: JobSpec,
    episode: Episode,
    sandbox,
    journals: Path,
    job_id: str,
    attempt: int,
    raw_dir: Path | None,
    stop: threading.Event | None = None,
) -> Trajectory:
    """One attempt of one episode; a failure of ours ends it as outcome `error`.

    `Interrupted` propagates: the caller releases the episode instead of failing it. A
    sandbox that says `close_between_episodes` (it holds a device) is closed after every
    attempt, whoever runs it; its next reset takes the device again.
    """
    source = Source(
        kind="collector",
        name=spec.sandbox.kind,
        job_id=job_id,
        episode_id=episode.episode_id,
        attempt=attempt,
    )
    rec = None
    task, conditions = episode.task.spec(), spec.conditions_for(episode)
    metadata: dict[str, str] = {}  # a replay's `replay_of`, whether it runs or fails
    try:
        policy = spec.build_policy(episode, raw_dir)
        agent = Agent(
            name=policy.name, model=getattr(policy, "model", None), policy=spec.policy.kind
        )
        if isinstance(policy, ReplayPolicy):  # where the recording ran, unless the job says
            task, conditions = replay_task(policy.recorded, task, conditions, spec.sandbox_class)
            metadata[REPLAY_OF] = policy.source_id
        rec = Recorder(
            sandbox,
            journals,
            source=source,
            agent=agent,
            task_id=episode.task.id,
            instruction=task.instruction,
            domain=spec.domain,
            durability=spec.options.durability,
            secrets_from=policy,  # its API key: a gateway's error may echo it
            setup=task.setup,
            metadata=metadata,
        )
        return run_episode(sandbox, policy, task, rec, spec.max_turns, stop, conditions)
    except (Interrupted, StoreWriteError):  # released; or the store is full: the run stops
        raise  # and its journal waits for a resume
    except Exception as exc:  # ours or the infrastructure's: the attempt fails with its reason
        if rec is None:
            rec = Recorder(
                sandbox,
                journals,
                source=source,
                agent=Agent(policy=spec.policy.kind),
                task_id=episode.task.id,
                instruction=task.instruction,
                domain=spec.domain,
                setup=task.setup,
                metadata=metadata,
            )
        if not rec.started:  # the reset failed: what is known without it
            rec.header(Observation(""), describe=False, known=unstarted(sandbox, conditions))
        return rec.finish(Outcome(status="error", error=failure_reason(exc)))
    finally:
        if getattr(sandbox, "close_between_episodes", False):
            sandbox.close()  # it holds a device: let it go, another episode may wait for it
