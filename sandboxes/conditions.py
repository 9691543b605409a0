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

import base64
import contextlib
import copy
import dataclasses
import json
import math
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from worldtrace.schemas.parsing import ConfigError, ConfigProblem, parse

from .base import SandboxConfigError, SandboxError, TaskSpec
from .condition_kinds import (
    KINDS,
    Condition,
    DiskLow,
    Run,
    Session,
    Where,
    image_of,
    path_within,
)
from .docker import memory_bytes, update_limits
from .execs import human, ran_and_failed
from .owners import owner_labels

__all__ = [
    "KINDS",
    "Condition",
    "ConditionsSpec",
    "Drawn",
    "Entry",
    "Plan",
    "Session",
    "Where",
    "demo_job",
    "memory_clashes",
    "mount_clashes",
    "parse_conditions",
    "reset_sandbox",
    "rooted",
]
PICKS = ("all", "one")


@dataclass(frozen=True)
class Entry:
    """One listed condition and its own rate."""

    condition: Condition
    rate: float = 1.0
    """`pick: all`: the chance it applies to an episode under conditions; `pick: one`:
    its weight in the draw."""


class Drawn(tuple):
    """An episode's draw from a job's `conditions:`, none maybe: the job's own, so a
    replay runs under it, not under the recording's (`policies.replay_task`). Until 12-06
    a draw of none counted as no conditions block, and such an episode of a replay job
    with `rate: 0.5` ran under the recording's conditions instead of plain."""

    __slots__ = ()


@dataclass(frozen=True)
class ConditionsSpec:
    """A job's conditions and how episodes draw them."""

    apply: tuple[Entry, ...]
    rate: float = 1.0
    """Share of episodes under conditions (the others run plain)."""
    pick: Literal["all", "one"] = "all"
    """`all`: each listed condition (by its own rate); `one`: one of them, by weight."""

    def sample(self, seed: int) -> Drawn:
        """The conditions of the episode with this seed (the same on every machine)."""
        rng = random.Random(f"worldtrace.conditions:{seed}")
        under = rng.random() < self.rate
        if self.pick == "one":
            chosen = rng.choices(self.apply, [e.rate for e in self.apply])
        else:
            draws = [rng.random() for _ in self.apply]  # always drawn: stable streams
            chosen = [e for e, d in zip(self.apply, draws, strict=True) if d < e.rate]
        if not under:
            return Drawn()
        return Drawn(_seeded(e.condition, seed) for e in chosen)

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


def _entry(raw: Any, path: tuple, where: Where | None = None) -> Entry:
    """`disk_full`, `{memory_low: 64m}`, `{disk_low: {free: 1m, rate: 0.3}}` or
    `{kind: disk_low, free: 1m, rate: 0.3}`; with the sandbox's `where`, options it
    cannot honour are refused at their key (`Condition.refused`)."""
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
    if (  # .nan or .inf: a weight no draw can use (`pick: one`), a chance never met
        isinstance(rate, bool)
        or not isinstance(rate, (int, float))
        or not math.isfinite(rate)
        or rate < 0
    ):
        raise ConfigError([ConfigProblem((*path, "rate"), "must be a finite number >= 0")])
    condition = parse(cls, options, path)
    refused = condition.refused(where) if where is not None else []
    if refused:
        raise ConfigError([ConfigProblem((*path, *key), why) for key, why in refused])
    return Entry(condition, float(rate))


def parse_conditions(
    data: Any, path: tuple = ("conditions",), where: Where | None = None
) -> ConditionsSpec | None:
    """A job's `conditions:` (a list, or {rate, pick, apply}); every problem located. With
    the sandbox's `where`, conditions that could not start with its mounts are refused,
    and disk space its memory could not hold (`memory_clashes`)."""
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
            entries.append(_entry(item, (*apath, i), where))
            places.append(i)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if pick == "one" and entries and not any(e.rate > 0 for e in entries):
        problems.append(ConfigProblem(apath, "pick: one needs a condition with a rate above 0"))
    if pick == "one" and not math.isfinite(sum(e.rate for e in entries)):
        problems.append(
            ConfigProblem(apath, "the rates of `pick: one` are weights: their total must be finite")
        )
    excluded = set()  # conditions refused as excluding another: their mounts are moot
    if pick == "all":
        seen: dict[str, int] = {}
        for i, e in zip(places, entries, strict=True):
            group = e.condition.group or e.condition.kind
            if group in seen:
                excluded.add(i)
                problems.append(
                    ConfigProblem(
                        (*apath, i),
                        f"{e.condition.kind} conflicts with condition {seen[group]} "
                        "(use `pick: one` to draw one of them)",
                    )
                )
            seen.setdefault(group, i)
    conditions = [e.condition for e in entries]
    clashes = memory_clashes(conditions, where, pairs=pick == "all")
    if where is not None:
        clashes += mount_clashes(conditions, where, pairs=pick == "all")
    for k, why in sorted(clashes):
        if places[k] not in excluded:
            problems.append(ConfigProblem((*apath, places[k]), why))
    if problems:
        raise ConfigError(problems)
    return ConditionsSpec(tuple(entries), float(rate), pick)


REFUSED = "docker refuses two mounts on one path (`Duplicate mount point`)"
PICK_ONE = "use `pick: one` to draw one of them"


@dataclass(frozen=True)
class _Mount:
    """A mount a condition's `start` adds (the read-only root is one on `/`)."""

    path: str
    ro: bool
    what: str
    shared: bool = False
    """The read-only root's /tmp: a disk kind's tmpfs there merges with it."""


def mount_clashes(
    conditions: Sequence[Condition], where: Where, pairs: bool = True
) -> list[tuple[int, str]]:
    """(index, why) of each condition that could not be set up: a mount on or inside one
    the kind makes (`where.mounted`, read-only), a write of its set-up (`writes`: the
    commands missing_commands removes, the directory permission hands over) where a
    read-only mount holds it, and, with `pairs` (`pick: all`, where conditions meet), a
    mount on or inside another condition's (docker refuses two mounts on one path, and
    cannot make a mount point in a read-only one). Every attempt of such an episode
    would fail alike: the job is refused when it loads, and the reset raises a
    SandboxConfigError. Each problem is reported at the later of the two conditions."""
    mounts = [_mounts(c, where) for c in conditions]
    out: dict[int, str] = {}
    for i, c in enumerate(conditions):
        why = _on_kind(c, mounts[i], where)
        for j in range(i) if pairs and why is None else ():
            why = _between(conditions[j], mounts[j], c, mounts[i])
            if why:
                break
        if why:
            out.setdefault(i, why)
    for i, c in enumerate(conditions):
        for path, does in c.writes(where):
            held = _holder(path, mounts, where, None if pairs else i)
            if held is None:
                continue
            j, m = held
            if j is None:
                why = f"{c.kind} {does}, where the sandbox mounts {where.mounted[m.path]}"
                out.setdefault(i, why)
            else:
                later, other = (i, j) if i >= j else (j, i)
                out.setdefault(
                    later,
                    f"{conditions[later].kind} conflicts with {conditions[other].kind}: "
                    f"{c.kind} {does}, which {conditions[j].kind} makes read-only "
                    f"({m.what} on {m.path}); {PICK_ONE}",
                )
            break
    return sorted(out.items())


def memory_clashes(
    conditions: Sequence[Condition], where: Where | None, pairs: bool = True
) -> list[tuple[int, str]]:
    """(index, why) of each disk condition whose free space the memory limit cannot hold.
    Its tmpfs's files are memory charged to the container, so the agent's write past the
    limit was killed (exit 137, or its shell with it) before `No space left on device`,
    while the initial state said the space was free. The limit is the sandbox's
    (`where.memory`), and with `pairs` (`pick: all`) a `memory_low` beside it. Every
    episode would record a disk that is not as said: the job is refused when it loads,
    the reset raises."""
    memory = where.memory if where is not None else None
    limits = [(memory, "the job's memory limit", "or raise `docker.memory`")] if memory else []
    if pairs:
        limits += [
            (memory_bytes(c.limit), "memory_low", "or draw one of them (`pick: one`)")
            for c in conditions
            if c.kind == "memory_low"
        ]
    if not limits:
        return []
    limit, who, or_else = min(limits, key=lambda x: x[0])
    out = []
    for i, c in enumerate(conditions):
        free = c.free_bytes() if isinstance(c, DiskLow) else 0
        if free >= limit:
            why = (
                f"{c.kind} asks for {human(free)} free in a tmpfs, whose files count as the "
                f"container's memory: under {who} ({human(limit)}) a write is killed before "
                f"`No space left on device`; ask for less free space {or_else}"
            )
            out.append((i, why))
    return out


def _on_kind(c: Condition, mine: list[_Mount], where: Where) -> str | None:
    """A condition's mount on or inside the read-only one the kind makes (swe `mount:
    true`); a bind of the kind's own directory merges with it."""
    for m in mine:
        for at, what in where.mounted.items():
            if m.path == at and m.what == "a read-only bind":
                continue
            if m.path == at:
                return (
                    f"{c.kind} puts a tmpfs on {at}, where the sandbox mounts {what}: "
                    f"{REFUSED}; give {c.kind} another `path`"
                    if m.what == "a tmpfs"
                    else f"{c.kind} puts {m.what} on {at}, where the sandbox mounts {what}: "
                    f"{REFUSED}"
                )
            if m.path != "/" and path_within(m.path, at):
                return (
                    f"{c.kind} puts {m.what} on {m.path}, inside {at}, where the sandbox "
                    f"mounts {what}: docker cannot make a mount point in a read-only mount"
                )
    return None


def _between(a: Condition, theirs: list[_Mount], b: Condition, mine: list[_Mount]) -> str | None:
    """Why `b`'s mounts cannot go with the earlier `a`'s: on one path, or one inside
    the other (a mount point in a read-only mount; a tmpfs hides the image's content
    below it)."""
    for m in mine:
        for t in theirs:
            if m.shared or t.shared:
                continue
            if m.path == t.path:
                disk = [x for x, y in ((b, m), (a, t)) if y.what == "a tmpfs"]
                hint = f", or give {disk[0].kind} another `path`" if disk else ""
                return (
                    f"{b.kind} conflicts with {a.kind}: both mount {m.path}, and {REFUSED}; "
                    f"{PICK_ONE}{hint}"
                )
            if m.path == "/" or t.path == "/":
                continue  # the read-only root: docker mounts first, then makes it read-only
            if path_within(m.path, t.path) or path_within(t.path, m.path):
                inner, outer = (m, t) if path_within(m.path, t.path) else (t, m)
                why = (
                    "docker cannot make a mount point in a read-only mount"
                    if outer.ro
                    else "a tmpfs hides what the image holds below it"
                )
                return (
                    f"{b.kind} conflicts with {a.kind}: {inner.what} on {inner.path} would lie "
                    f"inside {outer.what} on {outer.path} ({why}); {PICK_ONE}"
                )
    return None


def _holder(
    path: str, mounts: list[list[_Mount]], where: Where, only: int | None
) -> tuple[int | None, _Mount] | None:
    """(condition index, or None for the kind; mount) of the read-only mount that holds
    `path`, the deepest of those that cover it; None when that one is writable. `only`:
    that condition's mounts alone (`pick: one`: the others never meet it)."""
    found: list[tuple[int | None, _Mount]] = [
        (None, _Mount(at, True, "the repository")) for at in where.mounted
    ]
    for j, ms in enumerate(mounts):
        if only is None or j == only:
            found += [(j, m) for m in ms]
    covering = [(j, m) for j, m in found if path_within(path, m.path)]
    if not covering:
        return None
    j, m = max(covering, key=lambda x: len(x[1].path.rstrip("/")))
    return (j, m) if m.ro else None


def _mounts(c: Condition, where: Where) -> list[_Mount]:
    """The mounts a condition's `start` adds: tmpfs, binds (`volumes`), the read-only
    copies of `read_only` (`mounts`), and the read-only root."""
    kw: dict[str, Any] = {}
    c.start(kw, where)
    root = bool(kw.get("read_only"))
    out = [_Mount("/", True, "the read-only root")] if root else []
    out += [_Mount(p, False, "a tmpfs", root and p == "/tmp") for p in kw.get("tmpfs") or {}]
    out += [
        _Mount(v["bind"], v.get("mode") == "ro", "a read-only bind")
        for v in (kw.get("volumes") or {}).values()
    ]
    out += [
        _Mount(m["Target"], bool(m.get("ReadOnly")), "a read-only copy")
        for m in kw.get("mounts") or []
    ]
    return out


def rooted(where: Where, kw: Mapping[str, Any]) -> Where:
    """`where` under the start options `kw` of the sandbox's own containers: its memory
    limit (`Where.memory`), and with a read-only root (`docker.read_only: true`) what its
    tmpfs keep writable (`Where.writable`: `missing_commands` and `corrupt_file` elsewhere
    are refused). Until 12-06 the load check knew only the `read_only` condition's root,
    and such a job failed at reset."""
    memory = memory_bytes(kw["mem_limit"]) if kw.get("mem_limit") else None
    writable = tuple(kw.get("tmpfs") or ()) if kw.get("read_only") else None
    return dataclasses.replace(where, memory=memory, writable=writable)


FILE_MOUNT = {
    "a tmpfs": "docker mounts a tmpfs only on a directory: give a directory's path (or one "
    "the image lacks)",
    "a read-only copy": "docker copies only a directory into a read-only mount: give a "
    "directory's path",
}
"""Why a condition's mount cannot go on a file of the image, by the mount's kind."""


MEMORY_REFUSED = "unable to set memory limit"
"""runc's words (in the engine's answer to a container update) for a memory limit below
what the container holds and the kernel cannot reclaim: `unable to set memory limit to
33554432 (current usage: 60768256, peak usage: 61218816)`."""


class Plan:
    """The conditions of one episode, applied to one sandbox."""

    def __init__(self, conditions: Sequence[Condition], where: Where):
        self.conditions = tuple(c.at(where) for c in conditions)
        """As applied: defaults spelled out (the disk kinds' path), then what the set-up
        chose (corrupt_file's offset)."""
        self.where = where

    def run_kwargs(self, base: dict[str, Any]) -> dict[str, Any] | None:
        """Start options changed by the conditions; None when unchanged (a warm container
        will do). `base`, the sandbox's own, says whether its root is read-only (`rooted`)."""
        self.where = rooted(self.where, base)
        clash = mount_clashes(self.conditions, self.where)
        clash += [(0, why) for c in self.conditions for _, why in c.refused(self.where)]
        clash += memory_clashes(self.conditions, self.where)
        if clash:  # the job was checked against an older version, or built in code
            raise SandboxConfigError(clash[0][1])
        if not any(c.restarts for c in self.conditions):
            return None
        kw = copy.deepcopy(base)
        for c in self.conditions:
            c.start(kw, self.where)
        return kw

    def acquire(self, pool, kw: dict[str, Any] | None, episode_id: str | None = None):
        """`pool.acquire(kw, episode_id)`: the episode's container, started with the start
        options `kw` (`run_kwargs`, as the kind adjusts them). A start that fails where a
        condition mounts on a file of the image (`disk_full: {path: /etc/passwd}`,
        `read_only: [/etc/passwd]`) is the job's mistake, which only the image tells: a
        SandboxConfigError naming the path and the image, not retried. Until 12-06 it was
        the engine's raw 400 or 500 (`not a directory`), retried. The image is looked at
        only when a start fails: a started one needs no look."""
        try:
            return pool.acquire(kw, episode_id)
        except SandboxError:
            why = None
            if kw is not None:
                with contextlib.suppress(Exception):  # no look: the start's own error stands
                    why = self._on_a_file(pool.client, pool.config.image)
            if why is None:
                raise
        raise SandboxConfigError(why)

    def _on_a_file(self, client, image: str) -> str | None:
        """Why a condition's tmpfs or read-only copy cannot be mounted: its path is a file
        in `image` (or lies below one), as a container created from it, never started,
        says (the engine's stat of a path; a path the image lacks docker makes)."""
        mounts = [
            (c, m)
            for c in self.conditions
            for m in _mounts(c, self.where)
            if m.what in FILE_MOUNT and m.path != "/"
        ]
        if not mounts:
            return None
        made = client.api.create_container(image, ["true"], labels=owner_labels())
        try:
            for c, m in mounts:
                found = _stat(client, made["Id"], m.path)
                if found in ("file", "below a file"):
                    what = "a file" if found == "file" else "below a file"
                    return (
                        f"condition {c.kind}: {m.path} is {what} in the image {image}, and "
                        f"{FILE_MOUNT[m.what]}"
                    )
        finally:
            client.api.remove_container(made["Id"], force=True)
        return None

    def after(self, run: Run) -> Session:
        """Set the stage (after the task's set-up) and say how the agent's processes run.
        A set-up command that ran and failed fails alike on every attempt (the image or
        the task's set-up is not what the condition needs): a SandboxConfigError."""
        session = Session()
        applied = list(self.conditions)
        for i in sorted(range(len(applied)), key=lambda i: applied[i].order):
            c = applied[i]
            try:
                done = c.after(run, session, self.where)
            except SandboxConfigError:
                raise
            except SandboxError as exc:
                if not ran_and_failed(exc):
                    raise  # timed out, killed, the container gone: another attempt may do
                raise SandboxConfigError(
                    f"condition {c.kind} cannot be set up in the image {image_of(run)} "
                    f"after the task's set-up: {exc}"
                ) from None
            if done is not None:
                applied[i] = done
        self.conditions = tuple(applied)
        return session

    def confine(self, container) -> None:
        """Set the limits that hold for the agent's processes only (`Condition.confine`),
        the last of a reset: our execs before (probe, set-up, the shell's start) ran
        under the job's own limits."""
        resources: dict[str, Any] = {}
        for c in self.conditions:
            c.confine(resources)
        if not resources:
            return
        try:
            update_limits(container, resources)
        except SandboxError as exc:
            if "Memory" not in resources or MEMORY_REFUSED not in str(exc):
                raise
            raise SandboxConfigError(  # what the set-up left: alike on every attempt
                f"condition memory_low: the container holds more memory after the task's "
                f"set-up than the limit (files in a tmpfs count, /dev/shm's too): {exc}"
            ) from None

    def text(self) -> str:
        """`Condition: ...` lines for the initial state (empty without conditions); the
        paths a disk condition sizes are its to say (`Where.full`)."""
        disks = [c for c in self.conditions if c.group == "disk"]
        full = tuple(getattr(c, "path", None) or self.where.workdir for c in disks)
        where = dataclasses.replace(self.where, full=full)
        return "\n".join(f"Condition: {c.text(where)}" for c in self.conditions)

    def records(self) -> list[dict[str, Any]]:
        """The trajectory's `conditions`: `{"kind": ..., ...}` per condition."""
        return [{k: v for k, v in c.record().items() if v is not None} for c in self.conditions]


def _stat(client, container: str, path: str) -> str:
    """What the image of the created `container` holds at `path`: `directory`, `file` (or
    a link to one), `below a file`, or `absent` (the engine's archive stat, a HEAD
    request; a link is followed by a trailing `/`)."""
    url = client.api._url("/containers/{0}/archive", container)
    r = client.api.head(url, params={"path": path})
    if r.status_code == 404:
        return "absent"
    if r.status_code >= 400:  # a path through a file: `not a directory`
        return "below a file"
    mode = json.loads(base64.b64decode(r.headers["X-Docker-Container-Path-Stat"]))["mode"]
    if mode & GO_DIR:
        return "directory"
    if not mode & GO_SYMLINK:
        return "file"
    r = client.api.head(url, params={"path": path.rstrip("/") + "/"})  # the link's target
    return {200: "directory", 404: "absent"}.get(r.status_code, "file")


GO_DIR, GO_SYMLINK = 1 << 31, 1 << 27
"""The engine's path stat gives a Go `os.FileMode`: its directory and symlink bits."""


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
