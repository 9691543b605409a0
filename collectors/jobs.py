"""Running a job file directly (`worldtrace collect JOB_FILE`): every episode, with retries.

The job file format and its validation live in `jobspec.py`; the episode loop shared
with the queue's workers in `episode.py`.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from worldtrace.schemas import ShardWriter, Trajectory

from .episode import attempt_episode
from .jobspec import JobSpec
from .recorder import recover

JOURNALS = ".journals"


@dataclass
class JobResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    failed_attempts: int = 0
    shards: list[Path] = field(default_factory=list)


def run_job(
    spec: JobSpec, raw_dir: str | Path, job_id: str | None = None, sandbox=None
) -> JobResult:
    """Run every episode of a job; every attempt, failed or not, is written."""
    job_id = job_id or f"{spec.name}-{uuid.uuid4().hex[:8]}"
    out = Path(raw_dir) / "collect" / job_id
    journals = out / JOURNALS
    result = JobResult()
    sandbox = sandbox or spec.build_sandbox()
    try:
        with ShardWriter(out, prefix=spec.name) as writer:
            for _, t in recover(journals):  # a previous run of this job that crashed
                writer.write(t)
                result.trajectories.append(t)
            for episode in spec.expand():
                for attempt in range(1, spec.retries + 2):
                    t = attempt_episode(
                        spec, episode, sandbox, journals, job_id, attempt, Path(raw_dir)
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
