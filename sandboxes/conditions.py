"""Controllable conditions: real edge cases on demand (docs/conditions.md).

A live terminal cannot be asked for a full disk; a container can. A job's `conditions:`
names conditions (`condition_kinds.py`: disk_full, memory_low, missing_commands, ...),
applied to every episode or to a seeded share of them:

```yaml
conditions: [disk_full, {memory_low: 64m}]           # every episode, all of them
conditions: {rate: 0.5, pick: one, apply: [disk_full, {kind: clock, offset: -3y, rate: 2}]}
```

`ConditionsSpec.sample(seed)` draws an episode's conditions from the episode seed alone
(reproducible on any machine). The episode loop hands them to `reset` as an argument
(`reset_sandbox`): the sandbox's config is never changed per episode, and a warm
container is used only when no condition changes how the container starts. `Plan`
applies them and says them: `Condition: ...` lines in the initial state, and
`describe()["conditions"]`, the records (`{"kind": ..., ...}`) the trajectory keeps.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from worldtrace.schemas.parsing import ConfigError, ConfigProblem, parse

from .base import SandboxConfigError, SandboxError, TaskSpec
from .condition_kinds import KINDS, Condition, Run, Session, Where

__all__ = [
    "KINDS",
    "Condition",
    "ConditionsSpec",
    "Entry",
    "Plan",
    "Session",
    "Where",
    "demo_job",
    "mount_clashes",
    "parse_conditions",
    "reset_sandbox",
]
PICKS = ("all", "one")


@dataclass(frozen=True)
class Entry:
    """One listed condition and its own rate."""

    condition: Condition
    rate: float = 1.0
    """`pick: all`: the chance it applies to an episode under conditions; `pick: one`:
    its weight in the draw."""


@dataclass(frozen=True)
class ConditionsSpec:
    """A job's conditions and how episodes draw them."""

    apply: tuple[Entry, ...]
    rate: float = 1.0
    """Share of episodes under conditions (the others run plain)."""
    pick: Literal["all", "one"] = "all"
    """`all`: each listed condition (by its own rate); `one`: one of them, by weight."""

    def sample(self, seed: int) -> tuple[Condition, ...]:
        """The conditions of the episode with this seed (the same on every machine)."""
        rng = random.Random(f"worldtrace.conditions:{seed}")
        under = rng.random() < self.rate
        if self.pick == "one":
            chosen = rng.choices(self.apply, [e.rate for e in self.apply])
        else:
            draws = [rng.random() for _ in self.apply]  # always drawn: stable streams
            chosen = [e for e, d in zip(self.apply, draws, strict=True) if d < e.rate]
        if not under:
            return ()
        return tuple(_seeded(e.condition, seed) for e in chosen)

    def to_dict(self) -> dict[str, Any]:
        """The normalized mapping (`parse_conditions` reads it back)."""
        return {
            "rate": self.rate,
            "pick": self.pick,
            "apply": [{**e.condition.record(), "rate": e.rate} for e in self.apply],
        }


def _seeded(c: Condition, seed: int) -> Condition:
    """Randomness a condition needs (corrupt bytes) comes from the episode seed."""
    if getattr(c, "seed", 0) is None:
        return dataclasses.replace(c, seed=seed)  # type: ignore[type-var]
    return c


def _entry(raw: Any, path: tuple) -> Entry:
    """`disk_full`, `{memory_low: 64m}`, `{disk_low: {free: 1m, rate: 0.3}}` or
    `{kind: disk_low, free: 1m, rate: 0.3}`."""
    if isinstance(raw, str):
        kind, options = raw, {}
    elif isinstance(raw, Mapping) and "kind" in raw:
        kind, options = raw["kind"], {k: v for k, v in raw.items() if k != "kind"}
    elif isinstance(raw, Mapping) and len(raw) == 1:
        [(kind, options)] = raw.items()
        path = (*path, kind)
    else:
        raise ConfigError(
            [ConfigProblem(path, "a condition is a kind name, {KIND: options} or {kind: ...}")]
        )
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ConfigError(
            [ConfigProblem(path, f"unknown condition {kind!r} (known: {', '.join(KINDS)})")]
        )
    if options is None:
        options = {}
    elif not isinstance(options, Mapping):
        if cls.shorthand is None:
            raise ConfigError([ConfigProblem(path, f"{kind} takes a mapping of options")])
        many = isinstance(cls.__dataclass_fields__[cls.shorthand].default, tuple)
        options = {cls.shorthand: [options] if many and isinstance(options, str) else options}
    options = dict(options)
    rate = options.pop("rate", 1.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
        raise ConfigError([ConfigProblem((*path, "rate"), "must be a number >= 0")])
    return Entry(parse(cls, options, path), float(rate))


def parse_conditions(
    data: Any, path: tuple = ("conditions",), where: Where | None = None
) -> ConditionsSpec | None:
    """A job's `conditions:` (a list, or {rate, pick, apply}); every problem located. With
    the sandbox's `where`, conditions that could not start with its mounts are refused."""
    if data is None:
        return None
    listed = isinstance(data, list)
    if listed:
        data = {"apply": data}
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem(path, "a list of conditions or {rate, pick, apply}")])
    problems: list[ConfigProblem] = []
    for key in set(data) - {"rate", "pick", "apply"}:
        problems.append(ConfigProblem((*path, key), "unknown key"))
    rate, pick, raw = data.get("rate", 1.0), data.get("pick", "all"), data.get("apply")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        problems.append(ConfigProblem((*path, "rate"), "must be a number from 0 to 1"))
    if pick not in PICKS:
        problems.append(ConfigProblem((*path, "pick"), f"must be one of {', '.join(PICKS)}"))
    apath = path if listed else (*path, "apply")
    if not isinstance(raw, list) or not raw:
        problems.append(ConfigProblem(apath, "a list of at least one condition"))
        raw = []
    entries, places = [], []  # the conditions that parsed, and their places in the list
    for i, item in enumerate(raw):
        try:
            entries.append(_entry(item, (*apath, i)))
            places.append(i)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if pick == "one" and entries and not any(e.rate > 0 for e in entries):
        problems.append(ConfigProblem(apath, "pick: one needs a condition with a rate above 0"))
    if pick == "all":
        seen: dict[str, int] = {}
        for i, e in zip(places, entries, strict=True):
            group = e.condition.group or e.condition.kind
            if group in seen:
                problems.append(
                    ConfigProblem(
                        (*apath, i),
                        f"{e.condition.kind} conflicts with condition {seen[group]} "
                        "(use `pick: one` to draw one of them)",
                    )
                )
            seen.setdefault(group, i)
    if where is not None:
        conditions = [e.condition for e in entries]
        for k, why in mount_clashes(conditions, where, pairs=pick == "all"):
            problems.append(ConfigProblem((*apath, places[k]), why))
    if problems:
        raise ConfigError(problems)
    return ConditionsSpec(tuple(entries), float(rate), pick)


REFUSED = "docker refuses two mounts on one path (`Duplicate mount point`)"


def mount_clashes(
    conditions: Sequence[Condition], where: Where, pairs: bool = True
) -> list[tuple[int, str]]:
    """(index, why) of each condition whose `start` would put a tmpfs where the kind mounts
    (`where.mounted`) or, with `pairs`, where an earlier condition binds a host directory
    (or the other way round). The engine refuses such a container, so every attempt of
    the episode would fail alike: the job is refused when it loads, and the reset raises
    a SandboxConfigError."""
    mounts = [_mounts(c, where) for c in conditions]
    out = []
    for i, (c, (tmpfs, binds)) in enumerate(zip(conditions, mounts, strict=True)):
        kind = sorted(tmpfs & set(where.mounted))  # a bind of the kind's own directory merges
        if kind:
            out.append(
                (
                    i,
                    f"{c.kind} puts a tmpfs on {kind[0]}, where the sandbox mounts "
                    f"{where.mounted[kind[0]]}: {REFUSED}; give {c.kind} another `path`",
                )
            )
            continue
        for j in range(i) if pairs else ():
            theirs_tmpfs, theirs_binds = mounts[j]
            both = sorted((tmpfs & theirs_binds) | (binds & theirs_tmpfs))
            if both:
                disk = c.kind if tmpfs & theirs_binds else conditions[j].kind
                out.append(
                    (
                        i,
                        f"{c.kind} conflicts with {conditions[j].kind}: both mount {both[0]}, "
                        f"and {REFUSED}; use `pick: one` to draw one of them, or give {disk} "
                        "another `path`",
                    )
                )
                break
    return out


def _mounts(c: Condition, where: Where) -> tuple[set[str], set[str]]:
    """(tmpfs paths, host directories' bind targets) that a condition's `start` adds."""
    kw: dict[str, Any] = {}
    c.start(kw, where)
    binds = {v["bind"] for v in (kw.get("volumes") or {}).values()}
    return set(kw.get("tmpfs") or {}), binds


class Plan:
    """The conditions of one episode, applied to one sandbox."""

    def __init__(self, conditions: Sequence[Condition], where: Where):
        self.conditions = tuple(conditions)
        self.where = where

    def run_kwargs(self, base: dict[str, Any]) -> dict[str, Any] | None:
        """Start options changed by the conditions; None when unchanged (a warm container
        will do)."""
        if not any(c.restarts for c in self.conditions):
            return None
        clash = mount_clashes(self.conditions, self.where)
        if clash:  # the job was checked against an older version, or built in code
            raise SandboxConfigError(clash[0][1])
        kw = copy.deepcopy(base)
        for c in self.conditions:
            c.start(kw, self.where)
        return kw

    def after(self, run: Run) -> Session:
        """Set the stage (after the task's set-up) and say how the agent's processes run."""
        session = Session()
        for c in sorted(self.conditions, key=lambda c: c.order):
            c.after(run, session, self.where)
        return session

    def text(self) -> str:
        """`Condition: ...` lines for the initial state (empty without conditions)."""
        return "\n".join(f"Condition: {c.text(self.where)}" for c in self.conditions)

    def records(self) -> list[dict[str, Any]]:
        """The trajectory's `conditions`: `{"kind": ..., ...}` per condition."""
        return [{k: v for k, v in c.record().items() if v is not None} for c in self.conditions]


def reset_sandbox(
    sandbox,
    task: TaskSpec,
    conditions: Sequence[Condition] = (),
    episode_id: str | None = None,
    stop: threading.Event | None = None,
):
    """`sandbox.reset(task)`, handing the episode's conditions and id to kinds that take
    them (`accepts_conditions = True`; other kinds cannot be given conditions), and the
    collector's stop event to kinds whose reset may wait (`accepts_stop = True`: a device
    another episode holds)."""
    kw: dict[str, Any] = {"stop": stop} if getattr(sandbox, "accepts_stop", False) else {}
    if getattr(sandbox, "accepts_conditions", False):
        return sandbox.reset(task, conditions=tuple(conditions), episode_id=episode_id, **kw)
    if conditions:
        raise SandboxError(f"sandbox kind {sandbox.kind!r} takes no conditions")
    return sandbox.reset(task, **kw)


def demo_job() -> dict[str, Any]:
    """A job for `worldtrace demo`: four terminal episodes of one task, drawn (seed 347)
    under a full disk, 64 MiB of memory, no git and python3, and nothing."""
    return {
        "name": "demo-conditions",
        "sandbox": {"kind": "terminal"},
        "seed": 347,
        "episodes": 4,
        "conditions": {
            "rate": 0.75,
            "pick": "one",
            "apply": ["disk_full", {"memory_low": "64m"}, {"missing_commands": ["git", "python3"]}],
        },
        "tasks": [
            {
                "id": "check-machine",
                "instruction": "Check the machine: disk space, a write, memory, tools.",
                "actions": [
                    "df -h . | tail -n 1\n",
                    "echo notes > notes.txt; echo rc=$?\n",
                    "python3 -c 'x = bytearray(128 << 20); print(len(x))'; echo rc=$?\n",
                    "git --version\n",
                ],
            }
        ],
    }
