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
since (`resume_problem`) instead of mixing two jobs under one id. Without the job file
(a quick `--sandbox` run has none), `publish_left` does a resume's first half: it publishes
the journals a stopped run left and runs nothing. A published attempt that does not read
stops a run of its job before anything is done (`DamagedAttempt`). Hidden names in a job's
directories (a writer's `.tmp-*` files, `.spec.json`, `.run.lock`) are never attempts. The
job file format lives in `jobspec.py`, the episode loop in `episode.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldtrace.sandboxes.base import SandboxConfigError, SandboxError
from worldtrace.schemas import Observation, Trajectory
from worldtrace.schemas.store import read_parquet, visible
from worldtrace.schemas.tempfiles import try_lock, write_bytes_atomic

from .episode import Interrupted, attempt_episode, failure_reason, retriable
from .jobspec import JobSpec
from .recorder import BAD_SUFFIX, CUT_SHORT, JOURNAL_SUFFIX, JournalError, publish, recover

if TYPE_CHECKING:
    from .jobstore import JobStore

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


def _visible(paths: Iterable[Path]) -> list[Path]:
    """`paths` but hidden names (`store.visible`). pathlib's glob matches names that start
    with a dot, and a writer's temp file (`.tmp-<pid>-<host>-<random>-t-e1-a1.parquet`,
    made while an attempt is published) is no attempt: read as one, a resume named
    `.tmp-...-t-e1` an episode the job file does not make and was refused (hunt 1206o).
    Episode ids start with a letter or digit (`jobspec.NAME_RE`)."""
    return sorted(filter(visible, paths))


def attempt_files(out: Path) -> list[Path]:
    """The published attempt files of a job's directory `out` (`<episode>-a<n>.parquet`)."""
    return _visible(out.glob("*.parquet"))


def journal_files(out: Path) -> list[Path]:
    """The journals in a job's directory `out` (`.journals/<episode>-a<n>.journal.jsonl`;
    not those set aside as unreadable, `.bad`)."""
    return _visible((out / JOURNALS).glob(f"*{JOURNAL_SUFFIX}"))


class Unavailable:
    """Stands for a sandbox that could not be created: its episode attempt fails with
    the reason, and is retried like any other failure of the environment (an engine that
    does not answer, a start that timed out), unless the job's configuration is to blame
    (a SandboxConfigError: an image this machine lacks, `docker.ImageMissing`), which
    fails every attempt alike: until 12-07 such an attempt was retried too, and every
    episode spent its `retries` on it."""

    def __init__(self, exc: BaseException, domain: str):
        self.kind = SandboxConfigError if isinstance(exc, SandboxConfigError) else SandboxError
        # ours says its reason as it is (`SandboxError: cannot create the sandbox:
        # SandboxError: image ...` named it twice); another's type is part of the reason
        self.reason = failure_reason(exc).removeprefix(f"{self.kind.__name__}: ")
        self.domain = domain

    def reset(self, task) -> Observation:
        raise self.kind(f"cannot create the sandbox: {self.reason}")

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


class DamagedAttempt(RuntimeError):
    """A published attempt file of the job does not read (emptied, cut short, damaged by
    the disk: the writer's rename is atomic, so no run of ours leaves one): whether its
    episode ended is unknown, so a run of the job stops before it publishes or runs
    anything. `worldtrace doctor` lists the same file as a `store shard` problem, and the
    views leave it out; it is never moved or deleted here (it may be all there is of the
    attempt)."""

    def __init__(self, path: Path, why: str):
        self.path, self.why = path, why
        try:
            episode_id, attempt = parse_attempt_name(path.name)
        except ValueError:  # no attempt's name: a file put there
            what, episode_id, instead = "a file", "its episode", ""
        else:
            what = f"attempt {attempt} of {episode_id}, which an earlier run published"
            journal = path.parent / JOURNALS / f"{episode_id}-a{attempt}{JOURNAL_SUFFIX}"
            instead = (
                f" (the journal {journal.name} left of that attempt is then published in its place)"
                if journal.exists()
                else f" ({episode_id} then runs again)"
            )
        super().__init__(
            f"cannot read {path}, {what}: {why}; whether {episode_id} ended is unknown, so "
            f"nothing of job {path.parent.name} was run or published: put back a good copy of "
            f"the file, or move it out of the store{instead}, then resume again "
            "(`worldtrace doctor` lists it)"
        )


def _status(path: Path) -> str:
    """The outcome status of a published attempt (`CUT` for one a stopped run cut short);
    `DamagedAttempt` when the file does not read."""
    import pyarrow as pa

    try:
        o = read_parquet(path, ["outcome"]).column("outcome")[0].as_py()
        status, error = o["status"], o.get("error")
    except (OSError, pa.ArrowException, ValueError, LookupError, TypeError) as exc:
        # IndexError: no row; TypeError: a null outcome; OSError: no read permission too
        from worldtrace.schemas.views import shard_problem

        # said as `doctor` says it (`unreadable Parquet (...)`), else what failed
        why = shard_problem(path) or f"no outcome read ({type(exc).__name__}: {exc})"
        raise DamagedAttempt(path, why) from exc
    return CUT if status == "incomplete" and error == CUT_SHORT else status


def _published(out: Path, episode_id: str) -> dict[int, str]:
    """Attempt -> outcome status of the episode's published attempts (`CUT` for one a
    stopped run cut short); `DamagedAttempt` for one that does not read."""
    found = {}
    for p in _visible(out.glob(f"{episode_id}-a*.parquet")):
        try:
            ep, attempt = parse_attempt_name(p.name)
        except ValueError:  # not an attempt's name (`t-e1-a-x.parquet`)
            continue
        if ep == episode_id:
            found[attempt] = _status(p)
    return found


def _attempts_taken(out: Path, episode_id: str) -> set[int]:
    """Attempt numbers the episode has used: published, a journal left, or one set aside
    as unreadable (`<name>.bad`). A new attempt takes a number above them all: never the
    name of a file already there (a rerun's shard beside a set-aside journal of the same
    attempt, or a new journal over one that could not be set aside)."""
    taken = set()
    journals = (out / JOURNALS).glob(f"{episode_id}-a*{JOURNAL_SUFFIX}*")
    for p in _visible(itertools.chain(out.glob(f"{episode_id}-a*.parquet"), journals)):
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
"""In a job's directory: `{"sha256": ..., "parts": {...}}`, digests of the spec its first run
ran (`record_spec`), and `"quick": true` for a quick `--sandbox` run's."""
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


def record_spec(out: Path, spec: JobSpec, quick: bool = False) -> None:
    """Keep the fingerprint of the job's first run (a later run of the id leaves it), and
    `quick`: the job is a quick `--sandbox` run (no job file: `publish_left` is its
    resume, and `gc`/`doctor` say so)."""
    path = out / SPEC_FILE
    if not path.exists():
        doc = {"sha256": spec_fingerprint(spec), "parts": _part_digests(_episode_spec(spec))}
        if quick:
            doc["quick"] = True
        write_bytes_atomic(path, json.dumps(doc, sort_keys=True, indent=1).encode())


def collect_run(out: Path) -> str | None:
    """What ran the job of directory `out`: `"quick"` (a quick `collect --sandbox` run),
    `"file"` (`collect JOB_FILE`), or None when no `collect` run left its record (a
    queued job, which workers run: they keep neither `SPEC_FILE` nor `RUN_LOCK`; or a job
    collected before 2026-12-03)."""
    path = out / SPEC_FILE
    if path.exists():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "file"
        return "quick" if isinstance(doc, dict) and doc.get("quick") is True else "file"
    return "file" if (out / RUN_LOCK).exists() else None


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


def queued_job(store: JobStore, job_id: str) -> bool:
    """Whether `job_id` is a job of the job store `store` (queued by `jobs submit` or the
    scheduler, run by workers), not one `collect` ran."""
    job = store.job(job_id)
    return job is not None and job["job_id"] == job_id


def resume_problem(
    raw_dir: Path, jobs_db: Path, spec: JobSpec | None, job_file: str | None, job_id: str
) -> str | None:
    """Why `collect JOB_FILE --resume JOB_ID` cannot finish `job_id`, or None: it must be a
    job `collect` ran in this store (not a queued one) from this job file. `spec` None:
    `collect --resume JOB_ID` without the job file (`publish_left`), which needs a job a
    `collect` run left its record in (`collect_run`)."""
    if jobs_db.exists():
        from .jobstore import open_job_store

        if queued_job(open_job_store(jobs_db), job_id):
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
    if spec is None:
        if collect_run(out) is None:
            return (
                f"job {job_id} has no record of a `worldtrace collect` run ({out / SPEC_FILE}): "
                "a queued job's journals are the workers' (the next `worldtrace worker` "
                "publishes or drops them); a job collected before 2026-12-03 resumes with "
                f"its job file: worldtrace collect JOB_FILE --resume {job_id}"
            )
        return None
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
    found = set()
    for p in [*attempt_files(out), *journal_files(out)]:
        try:
            found.add(parse_attempt_name(p.name)[0])
        except ValueError:  # no attempt's name: the file is named
            found.add(p.name)
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
    quick: bool = False,
) -> JobResult:
    """Run every episode of a job (with retries), publishing each attempt as it ends.

    `job_id` of a job that ran before resumes it (see the module's docstring); events:
    `job` (`published`: the outcome statuses of the attempts earlier runs published,
    `CUT` for one a stop cut short), `recovered` (a journal a stopped run left, published
    as it stands), `warning` (`reason`: one it could not read, set aside; its episode
    runs again under a new attempt number),
    `skipped` (`failed`: every attempt failed), `started`, `finished`, `interrupted`.
    `quick`: the spec is a quick `--sandbox` run's (`record_spec`). A published attempt
    that does not read raises `DamagedAttempt` before anything is done."""
    job_id = job_id or new_job_id(spec)
    out = job_dir(raw_dir, job_id)
    with _one_run(out, job_id):
        record_spec(out, spec, quick)
        return _run_job(spec, Path(raw_dir), job_id, sandbox, stop, on_event)


def publish_left(raw_dir: str | Path, job_id: str, on_event: EventHook | None = None) -> JobResult:
    """`collect --resume JOB_ID` without the job file: publish the journals the job's
    stopped run left, as `run_job` does first, and run nothing (the episodes, and so what
    is left to run, come from the job file; a quick `--sandbox` run has none, and no job
    file can be made for it: its spec is kept as digests only, `SPEC_FILE`). Events:
    `job` (`quick`: a quick run's job), `recovered`, `warning` (a journal set aside). Under the job's run lock (`JobBusy`);
    a published attempt that does not read raises `DamagedAttempt` first (a journal of
    it would otherwise be dropped as published)."""
    raw_dir = Path(raw_dir)
    out = job_dir(raw_dir, job_id)
    emit = on_event or (lambda event, **info: None)
    result = JobResult()
    with _one_run(out, job_id):
        for p in attempt_files(out):
            _status(p)
        quick = collect_run(out) == "quick"
        emit("job", job_id=job_id, quick=quick)

        def then(episode_id: str) -> str:
            if _over(_published(out, episode_id), retries=math.inf):
                return f"{episode_id} has ended: it does not run again"
            if quick:
                return f"{episode_id} does not run again (a quick --sandbox run has no job file)"
            return (
                f"`worldtrace collect JOB_FILE --resume {job_id}` runs {episode_id} again "
                "(while it has retries left)"
            )

        _recover(raw_dir, job_id, result, emit, then)
    return result


def _recover(raw_dir: Path, job_id: str, result: JobResult, emit, then) -> None:
    """Publish the journals a stopped run of the job left (`recorder.recover`), each one a
    `recovered` event and a trajectory of `result`; one that cannot be read is set aside
    (a `warning` event: `then(episode)` says what becomes of its episode). A journal whose
    attempt is published already (a crash between the rename and the journal's removal)
    is removed: the attempt is an earlier run's (the `job` event counts it), not one this
    run published (it was said `[published from the journal ...]` and counted twice)."""
    out = job_dir(raw_dir, job_id)

    def set_aside(journal: Path, dest: Path, exc: JournalError) -> None:
        """Said as the worker says it (`Worker._set_aside`): the file, why, where it went;
        and what becomes of its episode (its attempt ended nothing: run again)."""
        episode_id, _ = parse_attempt_name(journal.name)
        why = str(exc).removeprefix(f"{journal}: ")
        emit(
            "warning",
            reason=f"{journal}: {why}; set aside as {dest.name} (kept, never deleted; "
            f"`worldtrace doctor` lists it); {then(episode_id)}",
        )

    for path, _ in recover(out / JOURNALS, set_aside):  # a run of this job id that crashed
        episode_id, attempt = parse_attempt_name(path.name)
        dest = trajectory_path(raw_dir, job_id, episode_id, attempt)
        if dest.exists():  # the attempt is published: the journal goes, nothing is written
            _status(dest)  # unless that file does not read (the journal may be all there is)
            publish(path, dest)
            continue
        t = publish(path, dest)
        result.trajectories.append(t)
        result.shards.append(dest)
        result.failed_attempts += t.outcome.status == "error"
        emit("recovered", episode=episode_id, attempt=attempt, trajectory=t)


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
    # what earlier runs of this job id published: a resume's progress counts the job (and
    # a file of them that does not read stops the run here: `DamagedAttempt`)
    before = [s for e in episodes for s in _published(out, e.episode_id).values()]
    emit("job", job_id=job_id, episodes=len(episodes), published=before)

    def then(episode_id: str) -> str:
        if _over(_published(out, episode_id), spec.retries):
            return f"{episode_id} has ended: it does not run again"
        taken = _attempts_taken(out, episode_id)
        return f"{episode_id} runs again as attempt {max(taken, default=0) + 1}"

    _recover(raw_dir, job_id, result, emit, then)
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
