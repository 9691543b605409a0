"""Job files: parsed and validated completely before anything runs.

```yaml
name: terminal-basics
sandbox: {kind: terminal, docker: {image: worldtrace/debian:latest, memory: 512m}}
policy: scripted               # or {kind: openai, base_url: ..., model: ...}, {kind: explorer}
episodes: 1                    # per task
max_turns: 30
retries: 1                     # extra attempts when the environment (not the agent) fails
priority: 0                    # higher runs first
seed: 0                        # explorer policies and sampled conditions derive from it
schedule: {every: 15m}         # or {cron: "*/30 * * * *"}; enqueued by `worldtrace scheduler`
conditions: {rate: 0.5, apply: [disk_full, {memory_low: 64m}]}   # docs/conditions.md
tasks:
  - id: list-files
    instruction: List the files.
    setup: ["mkdir -p /root/x"]
    actions: ["ls -la\\n", {keystrokes: C-c}, {tool: bash, arguments: {command: ls}}]
```

Everything is checked at parse time: known keys, types and ranges (the sandbox kind's
config class), duplicate task ids, an instruction in each task of a policy that chooses
its actions for it (`openai`; `jobparse.GIVEN_ACTIONS` need none), each scripted action
against the kind's action kinds and static tool schemas, host paths (they must exist;
a relative one starts at the directory `worldtrace` runs in and the spec keeps it
absolute, so a worker anywhere finds it). What needs the store or this host is checked
by `check_store` when the job is submitted or run: no host path overlaps the store, the
docker image is on this host's engine, and each `replay` prefix names one raw trajectory
that the sandbox kind can replay. Every problem names the file, line and key path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, Strict
from worldtrace.sandboxes.base import TaskSpec, action_kinds, load, static_action_space
from worldtrace.sandboxes.conditions import Condition, ConditionsSpec
from worldtrace.schemas import Action
from worldtrace.schemas import fields as F
from worldtrace.schemas.parsing import (
    ConfigError,
    ConfigProblem,
    LineMap,
    configclass,
    load_yaml,
    to_mapping,
)

from .actions import arguments_of
from .policies import (
    PolicyContext,
    find_replay,
    load_policy,
    raw_trajectory_ids,
    replay_mismatch,
)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
"""Job names and task ids appear in file names and episode ids."""
TASK_KEYS = ("id", "instruction", "setup", "actions", "replay")
MAX_EPISODES = 100_000
"""Episodes of one run of a job at most (tasks x episodes): the job store holds a row per
episode, and `collect` lists them all before the first one runs."""
EVERY_RE = re.compile(r"^(\d+)\s*([smhd])$")
EVERY_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
EVERY_EXAMPLES = "30s, 15m, 2h, 1d"


def _name(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            f"{value!r} must be 1-100 ASCII letters, digits, '.', '_' or '-', the first a "
            "letter or digit (it names files)"
        )
    return value


MAX_EVERY_S = 3650 * 86400
"""The longest interval (ten years): `every: 3000000d` registered, then every tick of
the scheduler failed with `OverflowError: date value out of range`."""


def parse_every(value: str, zero: bool = False) -> timedelta:
    """`15m`, `2h`, `30s`, `1d` as a timedelta; `zero`: `0s` is one too (an age, where a
    schedule's interval must be positive)."""
    m = EVERY_RE.match(value.strip())
    if not m or int(m.group(1)) < (0 if zero else 1):
        raise ValueError(f"not an interval: {value!r} (write e.g. {EVERY_EXAMPLES})")
    seconds = int(m.group(1)) * EVERY_UNITS[m.group(2)]
    if seconds > MAX_EVERY_S:  # past datetime's range, or no run in this century
        raise ValueError(f"{value!r} is longer than {MAX_EVERY_S // 86400}d")
    return timedelta(seconds=seconds)


def _unit_given(value: Any) -> Any:
    """`every: 15` (a number, no unit) says what to write, not pydantic's `Input should
    be a valid string`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        others = ", ".join(f"{value}{u}" for u in EVERY_UNITS if u != "m")
        as_ = f"as {value}m (or {others})" if isinstance(value, int) else f"e.g. {EVERY_EXAMPLES}"
        raise ValueError(f"{value} has no unit: write a whole number and its unit, {as_}")
    return value


def _every(value: str | None) -> str | None:
    if value is not None:
        parse_every(value)
    return value


def _cron(value: str | None) -> str | None:
    """A valid cron expression that matches some time: `0 0 31 2 *` is valid but never
    due, and would break `jobs submit` and the scheduler (croniter finds no next time).
    A field out of its range or a range written high to low names the field."""
    if value is not None:
        from croniter import CroniterBadDateError, croniter

        macro = value.strip().startswith("@")
        if not macro and len(value.split()) != 5:
            # croniter reads a sixth field as seconds (`* * * * * */5`: every 5 s), and a
            # Quartz `0 */5 * * * *` (seconds first) as every second of minute 0
            raise ValueError(
                f"{value!r} has {len(value.split())} fields: cron takes five (minute hour "
                "day-of-month month day-of-week)"
            )
        if not macro:
            _cron_fields(value)
        if not croniter.is_valid(value):
            raise ValueError(f"not a cron expression: {value!r}")
        try:
            cron_iter(value).get_next(float)
        except CroniterBadDateError:
            raise ValueError(f"{value!r} never matches") from None
    return value


CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                      "nov", "dec")),
    ("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)  # fmt: skip
"""The five fields of a cron expression: name, lowest and highest value (day-of-week 7
is Sunday, as 0), names (the first is the lowest value)."""
_CRON_ITEM = re.compile(r"^(\w+)(?:-(\w+))?(/\d+)?$")


def cron_iter(expr: str, start: Any = None):
    """`croniter(expr, start)` that reads the two day fields as Vixie cron does: a day
    must match both when either field begins with `*`, either one otherwise. croniter ORs
    them unless one is `*` itself: `0 0 */2 * 1` ran on every odd day and every Monday
    where cron runs on the odd Mondays (hunt 1205g)."""
    from croniter import croniter

    fields = expr.split()
    day_or = len(fields) != 5 or not (fields[2].startswith("*") or fields[4].startswith("*"))
    return croniter(expr, start, day_or=day_or)


def _cron_fields(value: str) -> None:
    """Refuse, naming the field, a value out of its field's range (croniter said only
    `not a cron expression`), a range written high to low (`5-1`, `22-2`, `fri-mon`):
    Vixie cron refuses it, and croniter wraps it around in silence (`5-1` ran Friday to
    Monday), so the job would run at times the file does not say; and the items of other
    dialects (`R`, `H`, `CRON_EXTENSIONS`)."""
    for text, (field_name, low, high, names) in zip(value.split(), CRON_FIELDS, strict=True):
        for item in text.split(","):
            if item[:1].upper() in ("R", "H"):  # no name begins so
                raise ValueError(
                    f"{value!r}: {field_name} {item} is croniter's random or hashed value, "
                    "which cron has not: it would run at other times each time it is "
                    "computed; write the time"
                )
            if why := _not_cron(item):
                raise ValueError(
                    f"{value!r}: {field_name} {item} is {why}, an item standard cron has "
                    f"not: {'write *' if item == '?' else CRON_ITEMS}"
                )
            m = _CRON_ITEM.match(item)
            if m is None:
                continue  # `*`, `*/5`, ...: croniter checks them
            ends = [_cron_value(v, low, names) for v in m.group(1, 2) if v is not None]
            if None in ends:
                continue  # not a number or a name: croniter says what it is
            top = high - 1 if field_name == "day-of-week" else high  # 7 only as Sunday
            for v in ends:
                if not low <= v <= high:
                    raise ValueError(
                        f"{value!r}: {field_name} {v} is out of range: it takes {low}-{top}"
                        + (" (or 7: Sunday)" if field_name == "day-of-week" else "")
                    )
            if len(ends) < 2:
                continue
            a, b = ends
            lo, hi = m.group(1, 2)
            sunday = field_name == "day-of-week" and a % 7 == 0 and b % 7 == 0
            if a == b or (sunday and a == 7):  # croniter reads `3-3`, `7-0` as `*`
                one, write = ("Sunday", "0 (or 7)") if sunday else (lo, lo)
                step = m.group(3) or ""
                read = f"*{step}" if step else f"* (every {field_name})"
                raise ValueError(
                    f"{value!r}: {field_name} range {item} is {one} alone, which croniter "
                    f"would read as {read}: write {write}"
                )
            if field_name == "day-of-week" and a == 7:  # Sunday's other number
                raise ValueError(
                    f"{value!r}: day-of-week range {item} runs from high to low, which cron "
                    f"refuses: write it low to high, as 0-{hi}{m.group(3) or ''}"
                )
            if a <= b:
                continue
            end, start = (names[top - low], names[0]) if lo.isalpha() else (str(top), str(low))
            fix = ",".join(f"{x}-{y}" if x != y else x for x, y in ((lo, end), (start, hi)))
            way = (
                f"write it low to high, as {fix}"
                if not m.group(3)
                else f"write it low to high, in two parts with the step each: from {lo} to "
                f"{end} and from {start} to {hi}"
            )
            raise ValueError(
                f"{value!r}: {field_name} range {item} runs from high to low, which cron "
                f"refuses (it would wrap around past {end}): {way}"
            )


CRON_EXTENSIONS = {
    "#": "croniter's Nth weekday of the month (#)",
    "L": "croniter's last day or weekday (L)",
    "W": "the nearest weekday (W) of Quartz",
    "?": "Quartz's no specific value (?)",
}
"""Items of cron dialects that Vixie cron has not, refused as `R` and `H` are: a schedule
is standard cron, which any cron reads alike (croniter also read `15 * 1#2`'s two day
fields otherwise than its own `#`, and said it never matches)."""
_CRON_EXTENSION = re.compile(r"^(?:\d*L|L?W|\d+W|\d+#\d+|\?)$")
"""A part (between `-` and `/`) of a cron item, in capitals, that is a `CRON_EXTENSIONS` item."""
CRON_ITEMS = "write the field with numbers, names, ranges (a-b), steps (/n) and lists (a,b)"


def _not_cron(item: str) -> str | None:
    """What `CRON_EXTENSIONS` item a cron field's item holds (`L`, `5L`, `L-2`, `LW`,
    `15W`, `1#2`, `?`; a name such as `jul` or `wed` is none), or None."""
    for part in re.split(r"[-/]", item.upper()):
        if _CRON_EXTENSION.match(part):
            return CRON_EXTENSIONS[next((m for m in "#?L" if m in part), "W")]
    return None


def _cron_value(v: str, low: int, names: tuple[str, ...]) -> int | None:
    """A cron field's value as a number (a name by its place), or None."""
    if v.isdigit():
        return int(v)
    if v.lower() in names:
        return low + names.index(v.lower())
    return None


@configclass
class ScheduleSpec:
    """When `worldtrace scheduler` enqueues a new run of the job."""

    cron: Annotated[str | None, AfterValidator(_cron)] = None
    """A cron expression of five fields (UTC), e.g. `*/30 * * * *`."""
    every: Annotated[str | None, BeforeValidator(_unit_given), AfterValidator(_every)] = None
    """A fixed interval: 30s, 15m, 2h, 1d."""
    missed: Literal["one", "skip"] = "one"
    """Runs missed while no scheduler ran: `one` enqueues a single catch-up run, `skip`
    waits for the next due time."""
    overlap: Literal["skip", "queue"] = "skip"
    """A run due while the last one is still queued or running: `skip` enqueues none (and
    says so), so a queue whose workers are down does not fill with runs; `queue` enqueues
    it anyway."""

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ValueError("a schedule needs exactly one of cron or every")


@configclass
class JobOptions:
    """The job's scalar settings (everything but sandbox, policy and tasks)."""

    name: Annotated[str, AfterValidator(_name)]
    # counts are integers as written: `episodes: "3"` or `episodes: true` (run once) is a
    # mistake in the file, not a number
    episodes: Annotated[int, Strict(), Field(ge=1, le=MAX_EPISODES)] = 1
    """Episodes per task (times the tasks, at most `MAX_EPISODES` a job)."""
    max_turns: Annotated[int, Strict(), Field(ge=1, le=10_000)] = 30
    retries: Annotated[int, Strict(), Field(ge=0, le=20)] = 1
    """Extra attempts when the environment or our code (not the agent) fails."""
    priority: Annotated[int, Strict(), Field(ge=-1000, le=1000)] = 0
    """Workers claim episodes of higher-priority jobs first."""
    seed: Annotated[int, Strict()] = 0
    domain: Literal[F.DOMAINS] | None = None  # type: ignore[valid-type]
    """Override the sandbox kind's domain (e.g. `search` for an MCP search server)."""
    schedule: ScheduleSpec | None = None
    durability: Literal["flush", "fsync"] = "flush"
    """How each turn reaches the journal: `flush` (to the OS: a crash of the collector
    loses at most the turn in flight) or `fsync` (to the disk: a power loss too; ~3 ms a
    turn)."""


@dataclass(frozen=True)
class Part:
    """A kind with its parsed config: the job's sandbox or its policy."""

    kind: str
    config: Any

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **to_mapping(self.config)}


@dataclass(frozen=True)
class TaskEntry:
    id: str
    instruction: str = ""
    setup: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    replay: str | None = None
    """trajectory_id (or prefix) of a raw trajectory to replay."""
    params: Any = None
    """The sandbox kind's task payload (its `task_class`), if it has one."""

    def spec(self) -> TaskSpec:
        return TaskSpec(self.id, self.instruction, self.setup, self.params)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "instruction": self.instruction}
        if self.setup:
            d["setup"] = list(self.setup)
        if self.actions:
            d["actions"] = [action_to_spec(a) for a in self.actions]
        if self.replay:
            d["replay"] = self.replay
        if self.params is not None:
            d.update(to_mapping(self.params))
        return d


@dataclass(frozen=True)
class Episode:
    task: TaskEntry
    index: int
    episode_id: str
    seed: int


@dataclass(frozen=True)
class JobSpec:
    options: JobOptions
    sandbox: Part
    policy: Part
    tasks: tuple[TaskEntry, ...] = field(default_factory=tuple)
    conditions: ConditionsSpec | None = None
    """Controllable conditions drawn per episode (docs/conditions.md)."""
    lines: LineMap | None = field(default=None, compare=False, repr=False)
    """The job file's key lines (`load`), so checks after parsing name their line."""
    source: str | None = field(default=None, compare=False, repr=False)
    """The job file (`load`)."""

    # -- convenient access -------------------------------------------------------
    @property
    def name(self) -> str:
        return self.options.name

    @property
    def episodes(self) -> int:
        return self.options.episodes

    @property
    def max_turns(self) -> int:
        return self.options.max_turns

    @property
    def retries(self) -> int:
        return self.options.retries

    @property
    def sandbox_class(self) -> type:
        return load(self.sandbox.kind)

    @property
    def domain(self) -> str:
        return self.options.domain or self.sandbox_class.domain

    def build_sandbox(self):
        return self.sandbox_class(self.sandbox.config)

    def build_policy(self, episode: Episode, raw_dir: Path | None = None):
        cls = load_policy(self.policy.kind, self.sandbox_class)
        ctx = PolicyContext(
            actions=episode.task.actions,
            replay=episode.task.replay,
            raw_dir=raw_dir,
            seed=episode.seed,
            action_kinds=action_kinds(self.sandbox_class),
        )
        return cls.build(self.policy.config, ctx)

    def task(self, task_id: str) -> TaskEntry:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"job {self.name} has no task {task_id!r}")

    def expand(self) -> list[Episode]:
        """Every episode of one run, in order, with its seed."""
        return [
            Episode(t, e, episode_id(t.id, e), episode_seed(self.options.seed, t.id, e))
            for t in self.tasks
            for e in range(self.episodes)
        ]

    def episode(self, episode_id_: str) -> Episode:
        for ep in self.expand():
            if ep.episode_id == episode_id_:
                return ep
        raise KeyError(f"job {self.name} has no episode {episode_id_!r}")

    def conditions_for(self, episode: Episode) -> tuple[Condition, ...]:
        """The episode's conditions, drawn from its seed (the same on every run): a
        `Drawn` (none, maybe) when the job has a `conditions:` block, which a replay keeps
        instead of the recording's; `()` when it has none."""
        return self.conditions.sample(episode.seed) if self.conditions else ()

    def host_paths(self) -> list[str]:
        fn = getattr(self.sandbox_class, "host_paths", None)
        return list(fn(self.sandbox.config)) if fn else []

    def check_store(self, store_root: str | Path) -> None:
        """What the job needs of the store and this host, before it is queued or run: no
        host path overlaps the store (a sandbox must never see or change it), its docker
        env file reads and its named variables are set here, its docker image is on this
        host's engine (when one answers: `DockerConfig.image_problems`), what the sandbox
        kind says this host lacks (`host_problems`: mcp's `env` unset, a `workdir.at` folder
        of the user's) is there, and with `policy: replay` each task's prefix names exactly
        one raw trajectory, which this sandbox kind can replay.
        Raises a ConfigError naming each problem's key (and line, for a loaded file)."""
        from worldtrace.schemas import Store

        root = Path(store_root).resolve()
        problems = self._overlaps(root)
        docker = getattr(self.sandbox.config, "docker", None)
        for why in docker.env_problems() if docker is not None else ():
            # an env file that cannot be read, or a variable this host lacks: every attempt
            # would fail at its start with it
            key = "env_file" if why.startswith("docker.env_file") else "env"
            problems.append(ConfigProblem(("sandbox", "docker", key), why))
        for why in docker.image_problems() if docker is not None else ():
            # an image this host's engine lacks: every attempt would fail at its start
            problems.append(ConfigProblem(("sandbox", "docker", "image"), why))
        host = getattr(self.sandbox.config, "host_problems", None)
        for key, why in host() if host is not None else ():  # the kind's own (mcp's env)
            problems.append(ConfigProblem(("sandbox", *key), why))
        if self.policy.kind == "replay":
            raw = Store.at(root).raw
            ids = raw_trajectory_ids(raw)
            cls = self.sandbox_class
            space = static_action_space(cls, self.sandbox.config)
            tools = None if space is None else {t.name for t in space}
            for i, task in enumerate(self.tasks):
                path = ("tasks", i, "replay")
                try:
                    found = find_replay(raw, task.replay or "", ids)
                except ValueError as exc:
                    problems.append(ConfigProblem(path, str(exc)))
                    continue
                why = replay_mismatch(found, cls.kind, self.domain, action_kinds(cls), tools)
                if why:
                    problems.append(ConfigProblem(path, why))
        if problems:
            raise ConfigError(
                [dataclasses.replace(p, line=self._line(p.path)) for p in problems],
                self.source,
            )

    def check_overlap(self, store_root: str | Path) -> None:
        """No host path overlaps the store at `store_root` (a ConfigError naming each).
        A worker checks it against its own store before each attempt: a job queued from
        another store was checked against that one, and the worker ran it on a repository
        that was its own store (its raw data the observations, or copied into the
        container)."""
        problems = self._overlaps(Path(store_root).resolve())
        if problems:
            raise ConfigError(problems, self.source)

    def _overlaps(self, root: Path) -> list[ConfigProblem]:
        """A problem per host path that is the store at `root`, inside it, or holds it."""
        problems = []
        for p in self.host_paths():
            real = Path(p).resolve()
            if real == root or real.is_relative_to(root) or root.is_relative_to(real):
                problems.append(
                    ConfigProblem(self._key_of(p), f"{p} overlaps the store {root}: refused")
                )
        return problems

    def _key_of(self, value: str) -> tuple:
        """The key path of the sandbox setting holding `value` (a host path)."""

        def walk(node: Any, path: tuple) -> tuple | None:
            if node == value:
                return path
            items = (
                node.items() if isinstance(node, Mapping)
                else enumerate(node) if isinstance(node, (list, tuple))
                else ()
            )  # fmt: skip
            for k, v in items:
                if (found := walk(v, (*path, k))) is not None:
                    return found
            return None

        return walk(to_mapping(self.sandbox.config), ("sandbox",)) or ("sandbox",)

    def _line(self, path: tuple) -> int | None:
        return self.lines.line(path) if self.lines else None

    # -- (de)serialization ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The normalized mapping (what jobs.db stores; `from_dict` reads it back)."""
        opts = {k: v for k, v in to_mapping(self.options).items() if v is not None}
        return {
            **opts,
            "sandbox": self.sandbox.to_dict(),
            "policy": self.policy.to_dict(),
            "tasks": [t.to_dict() for t in self.tasks],
            **({"conditions": self.conditions.to_dict()} if self.conditions else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        data, lines = load_yaml(path)
        return cls.from_dict(data, default_name=Path(path).stem, source=str(path), lines=lines)

    @classmethod
    def from_dict(
        cls,
        data: Any,
        default_name: str = "job",
        source: str | None = None,
        lines: LineMap | None = None,
    ) -> JobSpec:
        from .jobparse import parse_job

        try:
            spec = parse_job(data, default_name)
        except ConfigError as exc:
            raise exc.located(lines, source) from None
        return dataclasses.replace(spec, lines=lines, source=source)


def episode_id(task_id: str, index: int) -> str:
    return f"{task_id}-e{index}"


def episode_seed(seed: int, task_id: str, index: int) -> int:
    """A stable 32-bit seed per episode (the same on every machine and run)."""
    h = hashlib.sha256(f"{seed}:{task_id}:{index}".encode()).digest()
    return int.from_bytes(h[:4], "big")


def action_to_spec(action: Action) -> Any:
    """The job-file form of an action (inverse of `actions.from_spec`)."""
    if action.kind == "keystrokes":
        args = arguments_of(action)
        if args.get("duration") is None:
            return {"keystrokes": args.get("keystrokes", action.text)}
        return {"keystrokes": args.get("keystrokes", action.text), "duration": args["duration"]}
    return {"tool": action.name, "arguments": arguments_of(action)}
