"""Parsing a job file's mapping into a `JobSpec`, collecting every problem with its key.

Kept apart from `jobspec.py` (the spec's shape) because the checks are most of the code:
known keys, the kind's and the policy's config classes, task payloads, and each scripted
action against the kind's action kinds and static tool schemas.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from worldtrace.sandboxes.base import action_kinds, load, static_action_space
from worldtrace.sandboxes.conditions import parse_conditions, rooted
from worldtrace.schemas.parsing import ConfigError, ConfigProblem, parse
from worldtrace.schemas.text import LONE_SURROGATE, lone_surrogates, surrogate_problem

from .actions import arguments_of, from_spec
from .jobspec import MAX_EPISODES, NAME_RE, TASK_KEYS, JobOptions, JobSpec, Part, TaskEntry
from .policies import EXPLORER, load_policy

GIVEN_ACTIONS = ("scripted", "replay", EXPLORER)
"""Policies that play given actions or explore the environment: a task's instruction is
only recorded (a replay's is the recording's), so it may be left out. Any other policy
chooses its actions for the instruction (`openai` asks its model to do it): without one
it would be asked to do nothing."""


class _Problems:
    def __init__(self) -> None:
        self.items: list[ConfigProblem] = []

    def add(self, path: tuple, message: str) -> None:
        self.items.append(ConfigProblem(path, message))

    def absorb(self, exc: ConfigError) -> None:
        self.items.extend(exc.problems)

    def attempt(self, fn, *args):
        try:
            return fn(*args)
        except ConfigError as exc:
            self.absorb(exc)
        except (KeyError, ValueError) as exc:
            self.add(args[-1] if args and isinstance(args[-1], tuple) else (), _msg(exc))
        return None


def _msg(exc: Exception) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _mended(value: Any, memo: dict[int, Any]) -> Any:
    """`value` with U+FFFD for each lone surrogate, keys too (a copy; a YAML alias stays
    one object). The job is refused for them anyway; the copy lets every other problem
    be said with them, rather than one per attempt at the file. Read as it was, a path
    holding one raised from `os.stat`, and a name or an id from the checks on it."""
    if isinstance(value, str):
        return value if value.isascii() else LONE_SURROGATE.sub("\ufffd", value)
    if not isinstance(value, Mapping | list) or id(value) in memo:
        return memo.get(id(value), value)
    out: Any = {} if isinstance(value, Mapping) else []
    memo[id(value)] = out
    if isinstance(value, Mapping):
        out.update((_mended(k, memo), _mended(v, memo)) for k, v in value.items())
    else:
        out.extend(_mended(v, memo) for v in value)
    return out


def _said_once(problems: list[ConfigProblem], halves: list) -> list[ConfigProblem]:
    """The problems less those about a string already said to hold a lone surrogate
    (the first `len(halves)`): its U+FFFD copy is no valid id either. One word a field."""
    said = {tuple(_mended(k, {}) for k in path) for path, _, key in halves if not key}
    n = len(halves)
    return problems[:n] + [x for x in problems[n:] if tuple(x.path) not in said]


def _part(value: Any, path: tuple, what: str) -> tuple[str, dict[str, Any]]:
    """`kind` and the rest of a `{kind: NAME, ...}` mapping (or a bare NAME)."""
    if isinstance(value, str):
        return value, {}
    if not isinstance(value, Mapping) or not isinstance(value.get("kind"), str):
        raise ConfigError(
            [ConfigProblem(path, f"{what} must be a kind name or {{kind: NAME, ...}}")]
        )
    rest = {k: v for k, v in value.items() if k != "kind"}
    return value["kind"], rest


def parse_job(data: Any, default_name: str) -> JobSpec:
    """`data` (a job file's mapping) as a JobSpec; raises ConfigError with every problem."""
    p = _Problems()
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem((), "a job file is a mapping of settings")])
    # a lone surrogate (a JSON `\ud83d`: half an emoji) has no UTF-8: no record of what
    # it names (an action, an instruction) could be stored; a key is said at its mapping
    halves = list(lone_surrogates(data))
    for path, text, key in halves:
        p.add(path[:-1] if key else path, surrogate_problem(text))
    if halves:  # the rest is checked on a copy that holds U+FFFD instead (`_mended`)
        data = _mended(data, {})
    top = {k: v for k, v in data.items() if k not in ("sandbox", "policy", "tasks", "conditions")}
    if "name" not in top and not NAME_RE.match(default_name):
        # the file's name stands in for the job's: say so, not a `name:` it does not hold
        p.add((), f"no `name:`, and the file's name {default_name!r} cannot stand in for one "
              "(1-100 ASCII letters, digits, '.', '_' or '-', the first a letter or digit: "
              "it names files): give the job a `name:`")  # fmt: skip
        default_name = "job"
    top.setdefault("name", default_name)
    options = p.attempt(parse, JobOptions, top, ())

    sandbox_cls = sandbox = None
    kind_rest = p.attempt(_part, data.get("sandbox", "terminal"), ("sandbox",), "sandbox")
    if kind_rest:
        kind, rest = kind_rest
        try:
            sandbox_cls = load(kind)
        except KeyError as exc:
            p.add(("sandbox", "kind"), _msg(exc))
        else:
            config = p.attempt(parse, sandbox_cls.config_class, rest, ("sandbox",))
            if config is not None:
                sandbox = Part(kind, config)

    policy = None
    pk = p.attempt(_part, data.get("policy", "scripted"), ("policy",), "policy")
    if pk and sandbox_cls is not None:
        kind, rest = pk
        try:
            policy_cls = load_policy(kind, sandbox_cls)
        except KeyError as exc:
            p.add(
                ("policy", "kind") if isinstance(data.get("policy"), Mapping) else ("policy",),
                _msg(exc),
            )
        else:
            config = p.attempt(parse, policy_cls.config_class, rest, ("policy",))
            if config is not None:
                policy = Part(kind, config)

    tasks = _parse_tasks(data.get("tasks"), sandbox_cls, sandbox, policy, p)
    n_tasks = len(data["tasks"]) if isinstance(data.get("tasks"), list) else 0
    if options is not None and n_tasks * options.episodes > MAX_EPISODES:
        p.add(
            ("episodes",) if "episodes" in data else ("tasks",),
            f"{n_tasks} tasks x {options.episodes} episodes = "
            f"{n_tasks * options.episodes} episodes: at most {MAX_EPISODES} a job "
            "(split it into several jobs)",
        )
    where = getattr(sandbox_cls, "where", None)  # the kind's mounts, which conditions meet
    where = where(sandbox.config) if where is not None and sandbox is not None else None
    docker = getattr(getattr(sandbox, "config", None), "docker", None)
    if where is not None and docker is not None:  # its memory, read-only root, what stays writable
        copied = () if where.workdir in where.mounted else (where.workdir,)
        # not run_kwargs: it reads the host's environment, which a job's load may not have
        # (`docker.env` is checked where the job runs: a worker host's, at its start)
        kw = {
            "read_only": docker.read_only,
            "tmpfs": docker.tmpfs(copied),
            "mem_limit": docker.memory,
        }
        where = rooted(where, kw)
    check = functools.partial(parse_conditions, where=where)
    conditions = p.attempt(check, data.get("conditions"), ("conditions",))
    if conditions and sandbox_cls and not getattr(sandbox_cls, "accepts_conditions", False):
        p.add(("conditions",), f"sandbox kind {sandbox_cls.kind} takes no conditions")
    if p.items:
        raise ConfigError(_said_once(p.items, halves))
    assert options is not None and sandbox is not None and policy is not None
    return JobSpec(options, sandbox, policy, tuple(tasks), conditions)


def _parse_tasks(raw: Any, sandbox_cls, sandbox: Part | None, policy: Part | None, p: _Problems):
    if not isinstance(raw, list) or not raw:
        p.add(("tasks",), "a job needs a list of at least one task")
        return []
    kinds = action_kinds(sandbox_cls) if sandbox_cls else ()
    space = static_action_space(sandbox_cls, sandbox.config) if sandbox else None
    tools = {t.name: t for t in space or []} if space is not None else None
    task_class = getattr(sandbox_cls, "task_class", None)
    seen: set[str] = set()
    out = []
    for i, t in enumerate(raw):
        path = ("tasks", i)
        if not isinstance(t, Mapping):
            p.add(path, "a task is a mapping with at least an id")
            continue
        tid = t.get("id")
        if not isinstance(tid, str) or not NAME_RE.match(tid):
            p.add((*path, "id"), "missing or invalid task id (letters, digits, '.', '_', '-')")
            continue
        if tid in seen:
            p.add((*path, "id"), f"duplicate task id {tid!r}")
        seen.add(tid)
        extra = {k: v for k, v in t.items() if k not in TASK_KEYS}
        params = None
        if task_class is not None:
            params = p.attempt(parse, task_class, extra, path)
        else:
            for k in extra:
                p.add((*path, k), "unknown key")
        given = t.get("instruction")  # None: left out, or `instruction:` left empty
        instruction = given if isinstance(given, str) else ""
        missing = given is None or (isinstance(given, str) and not given.strip())
        setup = t.get("setup") or []
        if given is not None and not isinstance(given, str):  # `false` was taken as none
            p.add((*path, "instruction"), "must be a string")
        if not isinstance(setup, list) or not all(isinstance(c, str) for c in setup):
            p.add((*path, "setup"), "must be a list of shell command strings")
            setup = []
        actions = []
        specs = t.get("actions") or []
        if not isinstance(specs, list):
            p.add((*path, "actions"), "must be a list")
            specs = []
        for j, spec in enumerate(specs):
            apath = (*path, "actions", j)
            try:
                action = from_spec(spec)
            except ValueError as exc:
                p.add(apath, str(exc))
                continue
            if kinds and action.kind not in kinds:
                p.add(apath, f"sandbox kind {sandbox_cls.kind} takes {' or '.join(kinds)} actions, not {action.kind}")  # fmt: skip
                continue
            if action.kind == "tool_call" and tools is not None:
                if action.name not in tools:
                    p.add(
                        (*apath, "tool"),
                        f"unknown tool {action.name!r} (tools: {', '.join(tools)})",
                    )
                    continue
                problem = tools[action.name].check(arguments_of(action))
                if problem:
                    p.add((*apath, "arguments"), problem)
                    continue
            actions.append(action)
        replay = t.get("replay")
        if policy is not None:
            if policy.kind == "scripted" and not specs:
                p.add((*path, "actions"), "policy scripted needs the task's actions")
            if policy.kind == "replay" and _a_number(replay):
                p.add((*path, "replay"), _number_said(replay))
            elif policy.kind == "replay" and not isinstance(replay, str):
                p.add((*path, "replay"), "policy replay needs a trajectory id (prefix)")
            if policy.kind not in GIVEN_ACTIONS and specs:
                p.add((*path, "actions"), f"policy {policy.kind} chooses its own actions")
            if policy.kind not in GIVEN_ACTIONS and missing:
                p.add(
                    (*path, "instruction"),
                    f"policy {policy.kind} needs the task's instruction (what its model is "
                    f"asked to do); task {tid!r} has none",
                )
        out.append(TaskEntry(tid, instruction, tuple(setup), tuple(actions), replay, params))
    return out


def _a_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_said(value: Any) -> str:
    """A prefix YAML read as a number (digits only, about 2 % of 8-character ones: `00123`
    as 123, its leading zeros gone; digits around one `e`: `1e5` as 100000.0): its
    characters are not known again, so the fix is to quote it."""
    return (
        f"YAML read the trajectory id prefix as the number {value!r}, not text: quote it "
        f"as written, replay: '00123', not replay: 00123"
    )
