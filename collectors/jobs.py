"""Running a job file directly (`worldtrace collect JOB_FILE`), and the raw layout of
collected attempts shared with the queue's workers.

Every attempt is published on its own as `raw/collect/<job>/<episode>-a<attempt>.parquet`
as soon as it ends (written atomically, never twice): an exception or a signal later in
the job loses nothing already collected. Journals of attempts in progress sit in
`raw/collect/<job>/.journals/` (hidden from readers). Re-running a job id resumes it:
published attempts stay and are not rerun, and the journal a crashed run left becomes
its attempt as it stands (outcome `incomplete`, `recorder.CUT_SHORT`), and one that
cannot be read is set aside (`<name>.bad`, a `warning` event) with its episode run again
under a new attempt number; an episode whose attempts were all cut short or failed
(retries left) runs again. One run of a job id at a time: a run
holds an exclusive lock on the job's directory (`JobBusy` otherwise), so a resume never
publishes the journal of an attempt another run is still recording. The first run
records the spec it ran (`SPEC_FILE`), so `collect --resume` refuses a job file changed
since (`resume_problem`) instead of mixing two jobs under one id. The job file format
lives in `jobspec.py`, the episode loop in `episode.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldtrace.sandboxes.base import SandboxError
from worldtrace.schemas import Observation, Trajectory
from worldtrace.schemas.tempfiles import try_lock, write_bytes_atomic

from .episode import Interrupted, attempt_episode, failure_reason, retriable
from .jobspec import JobSpec
from .recorder import BAD_SUFFIX, CUT_SHORT, JOURNAL_SUFFIX, JournalError, publish, recover

JOURNALS = ".journals"
"""Directory of a job's journals (hidden: shard readers skip it)."""
EventHook = Callable[..., None]
"""`on_event(event, **info)`: progress for the command line (see `run_job`, `Worker`)."""


def job_dir(raw_dir: str | Path, job_id: str) -> Path:
    return Path(raw_dir) / "collect" / job_id


def trajectory_path(raw_dir: str | Path, job_id: str, episode_id: str, attempt: int) -> Path:
    """The attempt's one published file (its idempotent key)."""
    return job_dir(raw_dir, job_id) / f"{episode_id}-a{attempt}.parquet"


def journal_path(raw_dir: str | Path, job_id: str, episode_id: str, attempt: int) -> Path:
    """Where the Recorder journals the attempt (`Recorder.path` for these ids)."""
    return job_dir(raw_dir, job_id) / JOURNALS / f"{episode_id}-a{attempt}{JOURNAL_SUFFIX}"


def parse_attempt_name(name: str) -> tuple[str, int]:
    """(episode id, attempt) of a journal or published file name."""
    stem = name.removesuffix(JOURNAL_SUFFIX).removesuffix(".parquet")
    episode_id, _, attempt = stem.rpartition("-a")
    return episode_id, int(attempt)


class Unavailable:
    """Stands for a sandbox that could not be created: its episode attempt fails with
    the reason (and is retried) like any other failure of the environment."""

    def __init__(self, exc: BaseException, domain: str):
        # ours says its reason as it is (`SandboxError: cannot create the sandbox:
        # SandboxError: image ...` named it twice); another's type is part of the reason
        self.reason = failure_reason(exc).removeprefix(f"{SandboxError.__name__}: ")
        self.domain = domain

    def reset(self, task) -> Observation:
        raise SandboxError(f"cannot create the sandbox: {self.reason}")

    def step(self, action) -> Observation:
        raise SandboxError("step before reset")

    def describe(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def build_sandbox(spec: JobSpec):
    """The job's sandbox, or `Unavailable` with the reason it could not be created."""
    try:
        return spec.build_sandbox()
    except Exception as exc:  # the next attempt records why
        return Unavailable(exc, spec.domain)


@dataclass
class JobResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    failed_attempts: int = 0
    shards: list[Path] = field(default_factory=list)
    interrupted: bool = False
    """A stop request ended the run early (the episode in progress is published as
    `incomplete`; re-run the job id to finish)."""


CUT = "cut short"
"""`_published`'s status of an attempt our stop cut short (`recorder.CUT_SHORT`)."""


def _published(out: Path, episode_id: str) -> dict[int, str]:
    """Attempt -> outcome status of the episode's published attempts (`CUT` for one a
    stopped run cut short)."""
    import pyarrow.parquet as pq

    found = {}
    for p in out.glob(f"{episode_id}-a*.parquet"):
        ep, attempt = parse_attempt_name(p.name)
        if ep == episode_id:
            o = pq.read_table(p, columns=["outcome"]).column("outcome")[0].as_py()
            cut = o["status"] == "incomplete" and o.get("error") == CUT_SHORT
            found[attempt] = CUT if cut else o["status"]
    return found


def _attempts_taken(out: Path, episode_id: str) -> set[int]:
    """Attempt numbers the episode has used: published, a journal left, or one set aside
    as unreadable (`<name>.bad`). A new attempt takes a number above them all: never the
    name of a file already there (a rerun's shard beside a set-aside journal of the same
    attempt, or a new journal over one that could not be set aside)."""
    taken = set()
    journals = (out / JOURNALS).glob(f"{episode_id}-a*{JOURNAL_SUFFIX}*")
    for p in [*out.glob(f"{episode_id}-a*.parquet"), *journals]:
        try:
            ep, attempt = parse_attempt_name(p.name.removesuffix(BAD_SUFFIX))
        except ValueError:  # not an attempt's name
            continue
        if ep == episode_id:
            taken.add(attempt)
    return taken


def _over(done: dict[int, str], retries: int) -> bool:
    """Whether an episode whose attempts ended as `done` (`_published`) runs no more: an
    attempt ended (any outcome but `error`; one our stop cut short ended nothing), or
    its failures used up the retries."""
    ended = [s for s in done.values() if s != CUT]
    return any(s != "error" for s in ended) or sum(s == "error" for s in ended) > retries


class JobBusy(RuntimeError):
    """Another process is running this job id (it holds the job directory's lock)."""


def new_job_id(spec: JobSpec) -> str:
    """`<job name>-<8 hex digits>`: the id of a new run of the job file."""
    return f"{spec.name}-{uuid.uuid4().hex[:8]}"


RUN_LOCK = ".run.lock"
"""In a job's directory: held (flock, `try_lock`) by the process running the job id."""


@contextlib.contextmanager
def _one_run(out: Path, job_id: str) -> Iterator[None]:
    """Hold the job's run lock for the run (the kernel frees it when the process dies,
    even by SIGKILL)."""
    out.mkdir(parents=True, exist_ok=True)
    fh = try_lock(out / RUN_LOCK)
    if fh is None:
        raise JobBusy(
            f"job {job_id} is being run by another process (it holds {out / RUN_LOCK}); "
            "wait for it to end or stop it first"
        )
    with fh:
        yield


SPEC_FILE = ".spec.json"
"""In a job's directory: `{"sha256": ..., "spec": ...}`, the spec its first run ran."""
RUN_SETTINGS = ("retries", "priority", "durability", "schedule")
"""Settings of how a run goes, not of what its episodes are: a resume may change them
(more retries for episodes that failed) without mixing two jobs under one id."""


def _episode_spec(spec: JobSpec) -> dict[str, Any]:
    return {k: v for k, v in spec.to_dict().items() if k not in RUN_SETTINGS}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def spec_fingerprint(spec: JobSpec) -> str:
    """sha256 of the parsed spec (but `RUN_SETTINGS`) as canonical JSON: the same job,
    however its file is written (key order, comments, defaults left out), gives the same
    fingerprint."""
    return _digest(_episode_spec(spec))


def _part_digests(spec: dict[str, Any]) -> dict[str, str]:
    """A digest of each key of the spec, and of each key of a mapping (`sandbox.docker`):
    enough to name what changed without keeping a value (a job's actions and settings
    can hold secrets; the store keeps none of them)."""
    out = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": _digest(v) for k, v in value.items()})
        else:
            out[key] = _digest(value)
    return out


def record_spec(out: Path, spec: JobSpec) -> None:
    """Keep the fingerprint of the job's first run (a later run of the id leaves it)."""
    path = out / SPEC_FILE
    if not path.exists():
        doc = {"sha256": spec_fingerprint(spec), "parts": _part_digests(_episode_spec(spec))}
        write_bytes_atomic(path, json.dumps(doc, sort_keys=True, indent=1).encode())


def spec_changes(out: Path, spec: JobSpec) -> list[str] | None:
    """The keys (`episodes`, `sandbox.docker`, `tasks`) in which `spec` differs from the
    spec the job first ran, or None when it is the same or was not recorded (a job
    collected before fingerprints)."""
    path = out / SPEC_FILE
    if not path.exists():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("sha256") == spec_fingerprint(spec):
        return None
    new = _episode_spec(spec)
    # records of 12-03 kept the spec itself
    old = doc.get("parts") or _part_digests(doc.get("spec") or {})
    now = _part_digests(new)
    changed = sorted(k for k in old.keys() | now.keys() if old.get(k) != now.get(k))
    return changed or ["the spec"]


def resume_problem(
    raw_dir: Path, jobs_db: Path, spec: JobSpec, job_file: str, job_id: str
) -> str | None:
    """Why `collect JOB_FILE --resume JOB_ID` cannot finish `job_id`, or None: it must be a
    job `collect` ran in this store (not a queued one) from this job file."""
    if jobs_db.exists():
        from .jobstore import open_job_store

        queued = open_job_store(jobs_db).job(job_id)
        if queued is not None and queued["job_id"] == job_id:
            return (
                f"job {job_id} is a queued job: `worldtrace worker` runs it "
                f"(`worldtrace jobs retry {job_id}` queues its failed episodes again)"
            )
    out = job_dir(raw_dir, job_id)
    if "/" in job_id or job_id in ("", ".", "..") or not out.is_dir():
        return (
            f"no job {job_id} in {Path(raw_dir) / 'collect'}: `collect` prints the job id as "
            "it starts (`job JOB_ID: N episode(s)`), and the job's directory there has that name"
        )
    if job_id.rpartition("-")[0] != spec.name:
        return (
            f"job {job_id} is not a run of {job_file} (its name is {spec.name}, so its job "
            f"ids are {spec.name}-XXXXXXXX)"
        )
    try:
        changed = spec_changes(out, spec)
    except (OSError, ValueError) as exc:
        return f"cannot read {out / SPEC_FILE} (the spec job {job_id} ran): {exc}"
    if changed:
        return (
            f"job {job_id} ran from another version of {job_file} (changed: "
            f"{', '.join(changed)}): --resume needs the job file the job ran from"
        )
    expected = {e.episode_id for e in spec.expand()}
    found = {
        parse_attempt_name(p.name)[0]
        for p in [*out.glob("*.parquet"), *(out / JOURNALS).glob(f"*{JOURNAL_SUFFIX}")]
    }
    if found - expected:
        strange = ", ".join(sorted(found - expected)[:5])
        return (
            f"job {job_id} has episodes {job_file} does not make ({strange}): was the job "
            "file changed since? --resume needs the job file the job ran from"
        )
    return None


def run_job(
    spec: JobSpec,
    raw_dir: str | Path,
    job_id: str | None = None,
    sandbox=None,
    stop: threading.Event | None = None,
    on_event: EventHook | None = None,
) -> JobResult:
    """Run every episode of a job (with retries), publishing each attempt as it ends.

    `job_id` of a job that ran before resumes it (see the module's docstring); events:
    `job` (`published`: the outcome statuses of the attempts earlier runs published,
    `CUT` for one a stop cut short), `recovered` (a journal a stopped run left, published
    as it stands), `warning` (`reason`: one it could not read, set aside; its episode
    runs again under a new attempt number),
    `skipped` (`failed`: every attempt failed), `started`, `finished`, `interrupted`."""
    job_id = job_id or new_job_id(spec)
    out = job_dir(raw_dir, job_id)
    with _one_run(out, job_id):
        record_spec(out, spec)
        return _run_job(spec, Path(raw_dir), job_id, sandbox, stop, on_event)


def _run_job(spec, raw_dir: Path, job_id: str, sandbox, stop, on_event) -> JobResult:
    emit = on_event or (lambda event, **info: None)
    out = job_dir(raw_dir, job_id)
    result = JobResult()

    def keep(journal: Path, episode_id: str, attempt: int) -> Trajectory:
        dest = trajectory_path(raw_dir, job_id, episode_id, attempt)
        t = publish(journal, dest)
        result.trajectories.append(t)
        result.shards.append(dest)
        return t

    episodes = spec.expand()
    # what earlier runs of this job id published: a resume's progress counts the job
    before = [s for e in episodes for s in _published(out, e.episode_id).values()]
    emit("job", job_id=job_id, episodes=len(episodes), published=before)

    def set_aside(journal: Path, dest: Path, exc: JournalError) -> None:
        """Said as the worker says it (`Worker._set_aside`): the file, why, where it went;
        and what becomes of its episode (its attempt ended nothing: run again)."""
        episode_id, _ = parse_attempt_name(journal.name)
        why = str(exc).removeprefix(f"{journal}: ")
        if _over(_published(out, episode_id), spec.retries):
            then = f"{episode_id} has ended: it does not run again"
        else:
            then = f"{episode_id} runs again as attempt {max(_attempts_taken(out, episode_id)) + 1}"
        emit(
            "warning",
            reason=f"{journal}: {why}; set aside as {dest.name} (kept, never deleted; "
            f"`worldtrace doctor` lists it); {then}",
        )

    for path, _ in recover(out / JOURNALS, set_aside):  # a run of this job id that crashed
        episode_id, attempt = parse_attempt_name(path.name)
        t = keep(path, episode_id, attempt)
        result.failed_attempts += t.outcome.status == "error"
        emit("recovered", episode=episode_id, attempt=attempt, trajectory=t)
    own = sandbox is None
    try:
        for episode in episodes:
            done = _published(out, episode.episode_id)
            errors = sum(s == "error" for s in done.values())
            # an attempt our stop cut short ended nothing: the episode runs again
            ended = [s for s in done.values() if s != CUT]
            if _over(done, spec.retries):
                emit("skipped", episode=episode.episode_id, failed=errors == len(ended))
                continue
            # above every number used: a set-aside journal's attempt is not run over
            attempt = max(_attempts_taken(out, episode.episode_id), default=0) + 1
            while True:
                if stop is not None and stop.is_set():  # between attempts: none was cut short
                    result.interrupted = True
                    emit(
                        "interrupted", episode=episode.episode_id, attempt=attempt, trajectory=None
                    )
                    return result
                if sandbox is None or isinstance(sandbox, Unavailable):
                    sandbox = build_sandbox(spec)
                emit("started", episode=episode.episode_id, attempt=attempt)
                journal = journal_path(raw_dir, job_id, episode.episode_id, attempt)
                try:
                    attempt_episode(
                        spec, episode, sandbox, journal.parent, job_id, attempt, raw_dir, stop
                    )
                except Interrupted:
                    t = keep(journal, episode.episode_id, attempt) if journal.exists() else None
                    result.interrupted = True
                    emit("interrupted", episode=episode.episode_id, attempt=attempt, trajectory=t)
                    return result
                t = keep(journal, episode.episode_id, attempt)
                failed = t.outcome.status == "error"
                result.failed_attempts += failed
                errors += failed
                final = not failed or errors > spec.retries or not retriable(t)
                emit(
                    "finished", episode=episode.episode_id, attempt=attempt, trajectory=t,
                    final=final,
                )  # fmt: skip
                if final:
                    break
                attempt += 1
    finally:
        if own and sandbox is not None:
            sandbox.close()
    return result
