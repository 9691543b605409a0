"""Recording episodes: every finished turn reaches the journal before the next step.

The Recorder appends each turn to a per-attempt journal (JSON lines handed to the OS
at once, fsynced at the episode's end or per turn with durability `fsync`), so a crash
of the collector loses at most the turn in flight. A journal belongs to one attempt: a new
Recorder for the same episode and attempt starts it afresh (never appends to a stale
one). `publish` turns a journal into the attempt's one Parquet file, written
atomically and at most once, and removes the journal only after that. Every line is
redacted before it is written: the rules, the values handed over (the sandbox's, the
policy's key), and a piece of one of those values a program printed (`Redactor.pieces`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
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
from worldtrace.schemas.records import (
    from_jsonable,
    record_to_dict,
    to_jsonable,
    trajectory_from_dict,
    utcnow,
)
from worldtrace.schemas.redact import Redactor, redact_trajectory, redactor
from worldtrace.schemas.store import read_records, write_table_atomic
from worldtrace.schemas.tempfiles import StoreWriteError
from worldtrace.schemas.validate import LONE_SURROGATE

JOURNAL_SUFFIX = ".journal.jsonl"
INITIAL_STATE_JSON = "initial_state_json"
"""The `metadata` key of the initial observation's `state_json` (what the sandbox said at
reset beside its text: an MCP server's logs since it started, or between two episodes of a
kept server). `System.initial_state` holds the text only."""
BAD_SUFFIX = ".bad"
"""Appended to a journal that cannot be read (`set_aside`): kept, never recovered again."""


class JournalError(ValueError):
    """A journal whose content is no trajectory (empty, no header, a line without a kind,
    a header missing its fields)."""


def set_aside(path: Path) -> Path:
    """Rename an unreadable journal to `<name>.bad` next to it, out of every recovery
    (never deleted: it may be the only record of its attempt)."""
    dest = path.with_name(path.name + BAD_SUFFIX)
    os.replace(path, dest)
    return dest


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
        durability: str = "flush",
        secrets_from: Any = None,
        setup: tuple[str, ...] = (),
        metadata: dict[str, Any] | None = None,
    ):
        """`secrets_from`: more holders of values that are secrets wherever they appear,
        beside the sandbox (`redact.env_secrets`): the policy, whose API key a gateway's
        error may echo into the outcome. `setup`: the task's set-up commands, kept in
        `environment.config` (a replay runs them again: `policies.replay_task`).
        `metadata`: what the record's `metadata` holds beside the initial state's
        `state_json` (a replay's `replay_of`), no part of the content id."""
        self.setup = tuple(setup)
        self.metadata = dict(metadata or {})
        self.sandbox = sandbox
        self.secrets_from = secrets_from
        self.fsync_each_turn = durability == "fsync"
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
        self._opened = False
        self._redactor: Redactor | None = None
        self.started = False
        """True once the header (the episode's start) is journaled."""

    @property
    def redactor(self) -> Redactor:
        """The rules plus the values handed to the sandbox (and `secrets_from`): the
        sandbox's environment is fixed for the episode, so built once."""
        if self._redactor is None:
            held = self.sandbox if self.secrets_from is None else (self.sandbox, self.secrets_from)
            self._redactor = redactor(held)
        return self._redactor

    def _append(self, kind: str, payload: dict[str, Any], sync: bool = False) -> None:
        """One journal line, handed to the OS before the next step: a crash of this
        process loses at most the turn in flight. An fsync (~3 ms, most of a fast MCP
        call) is paid at the episode's end, or per turn with durability `fsync` (for
        machines that may lose power mid-episode)."""
        payload = self.redactor.value(payload)[0]  # security: no secret reaches the disk
        payload = self.redactor.pieces(payload)  # nor a piece of a value handed over
        line = json.dumps({"kind": kind, **payload}, default=str, ensure_ascii=False) + "\n"
        if not line.isascii():  # half an emoji from a page, a model, a job: as a terminal
            line = LONE_SURROGATE.sub("\ufffd", line)  # draws it (no UTF-8 holds it)
        try:
            if self._fh is None:  # the first open: whatever a crashed run left here is stale;
                # after `finish` (its error handler finishes again) the journal is kept
                mode = "a" if self._opened else "w"
                self._fh = open(self.path, mode, encoding="utf-8")  # noqa: SIM115  (closed in finish)
                self._opened = True
            self._fh.write(line)
            self._fh.flush()
            if sync or self.fsync_each_turn:
                os.fsync(self._fh.fileno())
        except OSError as exc:  # the store's (a full disk): the run stops naming the journal
            raise StoreWriteError(self.path, exc) from exc

    def header(
        self, initial: Observation, describe: bool = True, known: dict[str, Any] | None = None
    ) -> None:
        """Journal the episode's start; `describe=False` when the sandbox never started
        (what it would describe may be the last episode's): `known` then says what is known
        of it all the same, in `describe()`'s keys (`episode.unstarted`). The initial
        observation's text is `system.initial_state` (unless the sandbox describes one),
        its `state_json` `metadata["initial_state_json"]`."""
        d = self.sandbox.describe() if describe else dict(known or {})
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
            config=json.dumps(
                {**(d.get("config") or {}), **({"setup": list(self.setup)} if self.setup else {})},
                sort_keys=True,
            ),
        )
        # the episode's controllable conditions (JSON list) go to Trajectory.conditions
        conditions = json.dumps(d["conditions"], sort_keys=True) if d.get("conditions") else None
        # the initial observation's state (logs at reset) was dropped: turns keep theirs
        metadata = dict(self.metadata)
        if initial.state_json:
            metadata[INITIAL_STATE_JSON] = initial.state_json
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
                **({"conditions": conditions} if conditions else {}),
                **({"metadata": metadata} if metadata else {}),
            },
        )
        self.started = True

    def step(self, action: Action, reasoning: str | None = None) -> Observation:
        started = utcnow()
        t0 = time.perf_counter()
        obs = self.sandbox.step(action)
        duration_ms = (time.perf_counter() - t0) * 1000
        obs, perturbation = take_perturbation(obs)
        turn = Turn(
            len(self.turns),
            action,
            obs,
            started_at=started,
            duration_ms=duration_ms,
            reasoning=reasoning,
            perturbation=perturbation,
        )
        self.turns.append(turn)
        record = to_jsonable({"turns": [record_to_dict(turn)]})["turns"][0]
        if obs.truncated:  # our cap cut the text at its end, maybe inside a secret
            record["observation"]["text"] = self.redactor.cut_tail(obs.text)[0]
        self._append("turn", record)
        return obs

    def finish(self, outcome: Outcome) -> Trajectory:
        self._append(
            "end", {"outcome": asdict(outcome), "ended_at": utcnow().isoformat()}, sync=True
        )
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        return journal_to_trajectory(self.path)


def take_perturbation(obs: Observation) -> tuple[Observation, str | None]:
    """A sandbox reports a fault it injected into this step (MCP fault proxy) as
    `state_json["perturbation"]`; the turn carries it in `Turn.perturbation` instead."""
    if not obs.state_json or '"perturbation"' not in obs.state_json:
        return obs, None
    state = json.loads(obs.state_json)
    flag = state.pop("perturbation", None) if isinstance(state, dict) else None
    if flag is None:
        return obs, None
    rest = json.dumps(state, sort_keys=True) if state else None
    return dataclasses.replace(obs, state_json=rest), json.dumps(flag, sort_keys=True)


CUT_SHORT = "collector stopped before the episode ended"
"""The error of an attempt rebuilt from a journal without an end (outcome `incomplete`):
our stop cut it, not the environment or the agent; a resume runs its episode again."""


def journal_to_trajectory(path: Path) -> Trajectory:
    """Rebuild a trajectory from a journal; one without an end is `incomplete`.

    Only the last line may fail to parse: the torn write a crash (or a power loss) cut
    short, skipped. A line that does not parse with lines after it is damage, not a
    crash: `JournalError` naming the line (the turns after it are real and must not be
    dropped in silence, nor the journal deleted for a trajectory without them)."""
    header: dict[str, Any] | None = None
    turns: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    torn: tuple[int, str] | None = None  # (line, why) of a line that did not parse
    lines = 0
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            lines = n
            if torn is not None:  # a line follows the one that did not parse
                after = 1 + sum(1 for _ in fh)
                raise JournalError(
                    f"{path}: journal line {torn[0]} is unreadable ({torn[1]}) and "
                    f"{after} line(s) follow it: damage, not the torn last line of a crash"
                )
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                torn = (n, f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}")
                continue
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                torn = (n, f"not JSON: {why}")
                continue
            if not isinstance(rec, dict) or "kind" not in rec:
                raise JournalError(f"{path}: journal line {n} has no kind")
            kind = rec.pop("kind")
            if kind == "header":
                header = rec
            elif kind == "turn":
                turns.append(rec)
            elif kind == "end":
                end = rec
    if header is None:
        raise JournalError(f"{path}: journal {'has' if lines else 'is empty:'} no header")
    try:
        d = _trajectory_dict(path, header, turns, end)
        t = trajectory_from_dict(from_jsonable(d))
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{path}: journal is malformed: {exc!r}") from exc
    return redact_trajectory(t.with_id())  # security: count


def _trajectory_dict(
    path: Path, header: dict[str, Any], turns: list[dict[str, Any]], end: dict[str, Any] | None
) -> dict[str, Any]:
    outcome = (
        end["outcome"]
        if end
        else {
            "status": "incomplete",
            "reward": None,
            "error": CUT_SHORT,
        }
    )
    return {
        **header,
        "turns": turns,
        "outcome": outcome,
        "ended_at": end["ended_at"] if end else _last_moment(header, turns),
        "metadata": {**(header.get("metadata") or {}), "journal": path.name},
    }


def _last_moment(header: dict[str, Any], turns: list[dict[str, Any]]) -> Any:
    """When a journal without an end (a stop, a crash) last saw its episode run: the end
    of its latest turn (its start plus `duration_ms`), or the episode's start without
    turns. The start of the last turn, used before, put `ended_at` before that turn's
    end: a trajectory cut after a 4 s step claimed to end 4 s before its last answer.
    A time that does not parse is passed on as it is, for the validator to report."""
    last = header["started_at"]
    for turn in turns:
        start = _moment(turn.get("started_at"))
        try:
            end = start + timedelta(milliseconds=float(turn.get("duration_ms") or 0.0))
        except (TypeError, ValueError, OverflowError):  # the turn's validation names it
            continue
        begun = _moment(last)
        if begun is None or end > begun:
            last = end.isoformat()
    return last


def _moment(value: Any) -> datetime | None:
    """An ISO time of the journal as an aware datetime (UTC when it names no zone)."""
    try:
        dt = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def recover(
    journal_dir: str | os.PathLike,
    on_set_aside: Callable[[Path, Path, JournalError], None] | None = None,
) -> list[tuple[Path, Trajectory]]:
    """Trajectories of every journal left in `journal_dir` (crashed or unpublished).

    A journal that cannot be read (empty, no header, a line without a kind, a damaged
    line before its last) is set aside (`set_aside`, never deleted: even an empty one
    says an attempt started, and a damaged one holds turns a person may still read), and
    `on_set_aside(journal, where it went, why)` is told."""
    out = []
    for p in sorted(Path(journal_dir).glob(f"*{JOURNAL_SUFFIX}")):
        try:
            out.append((p, journal_to_trajectory(p)))
        except JournalError as exc:
            dest = set_aside(p)
            if on_set_aside is not None:
                on_set_aside(p, dest, exc)
    return out


def publish(journal: Path, dest: Path) -> Trajectory:
    """The journal's trajectory as one Parquet file `dest`, then the journal goes.

    `dest` is the attempt's idempotent key: written atomically (temp file, fsync,
    rename) and never twice, so a redo after a crash between writing and removing the
    journal publishes nothing new.
    """
    import pyarrow as pa
    from worldtrace.schemas.arrow import to_batch

    try:
        t = journal_to_trajectory(journal)
    except FileNotFoundError:
        if not dest.exists():
            raise
        [t] = read_records(dest)  # published meanwhile by another worker (the same content)
        return t
    if not dest.exists():
        write_table_atomic(dest, pa.Table.from_batches([to_batch([t])]))
    journal.unlink(missing_ok=True)
    return t
