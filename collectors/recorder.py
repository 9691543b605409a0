"""Recording episodes: every finished turn reaches the disk before the next step.

The Recorder appends each turn to a per-episode journal (JSON lines, fsynced), so a
crash loses at most the turn in flight; finished and crashed journals become
trajectories in raw shards (`recover`), and a journal is removed only after the shard
holding its trajectory is published.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from worldtrace.schemas import (
    Action,
    Agent,
    Environment,
    Observation,
    Outcome,
    Source,
    System,
    Task,
    Trajectory,
    Turn,
)
from worldtrace.schemas.records import from_jsonable, to_jsonable, trajectory_from_dict, utcnow
from worldtrace.schemas.redact import redact_payload, redact_trajectory

JOURNAL_SUFFIX = ".journal.jsonl"


class Recorder:
    """Wraps a sandbox for one episode: times each step and journals each turn."""

    def __init__(
        self,
        sandbox,
        journal_dir: str | os.PathLike,
        *,
        source: Source,
        agent: Agent,
        task_id: str,
        instruction: str,
        domain: str | None = None,
    ):
        self.sandbox = sandbox
        self.domain = domain or sandbox.domain
        self.journal_dir = Path(journal_dir)
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        self.episode_id = source.episode_id or uuid.uuid4().hex[:12]
        self.source = source
        self.agent = agent
        self.task = Task(task_id=task_id, instruction=instruction)
        self.path = self.journal_dir / f"{self.episode_id}-a{source.attempt or 1}{JOURNAL_SUFFIX}"
        self.turns: list[Turn] = []
        self.started_at = utcnow()
        self._fh = None
        self.started = False
        """True once the header (the episode's start) is journaled."""

    def _append(self, kind: str, payload: dict[str, Any]) -> None:
        payload = redact_payload(payload, self.sandbox)  # security: no secret reaches the disk
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (closed in finish)
        self._fh.write(json.dumps({"kind": kind, **payload}, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def header(self, initial: Observation, describe: bool = True) -> None:
        """Journal the episode's start; `describe=False` when the sandbox never started."""
        d = self.sandbox.describe() if describe else {}
        self.system = System(
            task_description=self.task.instruction,
            action_space=json.dumps(d.get("action_space"), sort_keys=True)
            if d.get("action_space")
            else None,
            initial_state=d.get("initial_state") or initial.text,
        )
        self.environment = Environment(
            backend=d.get("backend"),
            image=d.get("image"),
            server=d.get("server"),
            url=d.get("url"),
            device=d.get("device"),
            config=json.dumps(d.get("config") or {}, sort_keys=True),
        )
        self._append(
            "header",
            {
                "domain": self.domain,
                "source": asdict(self.source),
                "agent": asdict(self.agent),
                "task": asdict(self.task),
                "system": asdict(self.system),
                "environment": asdict(self.environment),
                "started_at": self.started_at.isoformat(),
            },
        )
        self.started = True

    def step(self, action: Action, reasoning: str | None = None) -> Observation:
        started = utcnow()
        t0 = time.perf_counter()
        obs = self.sandbox.step(action)
        turn = Turn(
            len(self.turns),
            action,
            obs,
            started_at=started,
            duration_ms=(time.perf_counter() - t0) * 1000,
            reasoning=reasoning,
        )
        self.turns.append(turn)
        self._append("turn", to_jsonable({"turns": [asdict(turn)]})["turns"][0])
        return obs

    def finish(self, outcome: Outcome) -> Trajectory:
        self._append("end", {"outcome": asdict(outcome), "ended_at": utcnow().isoformat()})
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        return journal_to_trajectory(self.path)


def journal_to_trajectory(path: Path) -> Trajectory:
    """Rebuild a trajectory from a journal; one without an end is `incomplete`."""
    header: dict[str, Any] | None = None
    turns: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # the torn last line of a crash
            kind = rec.pop("kind")
            if kind == "header":
                header = rec
            elif kind == "turn":
                turns.append(rec)
            elif kind == "end":
                end = rec
    if header is None:
        raise ValueError(f"{path}: journal has no header")
    outcome = (
        end["outcome"]
        if end
        else {
            "status": "incomplete",
            "reward": None,
            "error": "collector stopped before the episode ended",
        }
    )
    d = {
        **header,
        "turns": turns,
        "outcome": outcome,
        "ended_at": end["ended_at"]
        if end
        else (turns[-1]["started_at"] if turns else header["started_at"]),
        "metadata": {"journal": path.name},
    }
    return redact_trajectory(trajectory_from_dict(from_jsonable(d)).with_id())  # security: count


def recover(journal_dir: str | os.PathLike) -> list[tuple[Path, Trajectory]]:
    """Trajectories of every journal left in `journal_dir` (crashed or unpublished)."""
    out = []
    for p in sorted(Path(journal_dir).glob(f"*{JOURNAL_SUFFIX}")):
        try:
            out.append((p, journal_to_trajectory(p)))
        except ValueError:
            p.unlink()  # a journal without even a header holds nothing
    return out
