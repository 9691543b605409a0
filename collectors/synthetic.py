"""A deterministic generator of realistic-looking trajectories for every domain.

Used by tests and benchmarks when no live environment is wanted (never by the demo nor
`collect`: training data comes from real environments), and for measuring dedup quality: `near_duplicate_corpus` plants groups of known near-duplicates
(edits, reorderings, changed numbers) among unrelated trajectories.

Generated records say so: `source.kind = "synthetic"` and `environment.backend =
"synthetic"`. `process` keeps them (benchmarks and tests run on them); `export` counts
them in its manifest (`counts.synthetic_samples`) and warns.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

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

from .actions import tool

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "config",
    "server",
    "client",
    "request",
    "response",
    "cache",
    "index",
    "table",
    "record",
    "buffer",
    "stream",
    "worker",
    "queue",
    "socket",
    "module",
    "package",
    "function",
    "class",
    "method",
    "value",
    "error",
    "warning",
    "status",
    "result",
    "output",
    "input",
    "parser",
    "token",
    "schema",
    "shard",
    "vector",
    "matrix",
    "kernel",
    "thread",
    "process",
    "signal",
    "memory",
    "disk",
    "network",
    "file",
    "folder",
    "path",
    "branch",
    "commit",
]
FILES = [
    "main.py",
    "utils.py",
    "README.md",
    "setup.cfg",
    "app/server.py",
    "lib/core.py",
    "tests/test_core.py",
]
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _file_body(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        name = rng.choice(WORDS)
        out.append(
            f"def {name}_{i}(x):\n    return x * {rng.randint(1, 99)}  # {_sentence(rng, 4)}"
        )
    return "\n".join(out)


def _terminal(rng: random.Random) -> tuple[System, list[tuple[Action, Observation]]]:
    cwd = f"/home/user/{rng.choice(WORDS)}"
    prompt = f"user@sandbox:{cwd}$ "
    pairs: list[tuple[Action, Observation]] = []
    for _ in range(rng.randint(3, 9)):
        k = rng.random()
        if k < 0.3:
            f = rng.choice(FILES)
            a, o = f"cat {f}\n", _file_body(rng, rng.randint(2, 12))
        elif k < 0.55:
            a = "ls -la\n"
            o = "\n".join(
                f"-rw-r--r-- 1 user user {rng.randint(10, 99999):>6} Jan {rng.randint(1, 28):>2} 10:{rng.randint(10, 59)} {f}"
                for f in rng.sample(FILES, rng.randint(2, len(FILES)))
            )
        elif k < 0.7:
            a, o = f"cd {rng.choice(WORDS)}\n", ""
        elif k < 0.85:
            word = rng.choice(WORDS)
            a, o = f"echo {word}\n", word
        else:
            a = f"python3 -c 'print({rng.randint(1, 999)} * {rng.randint(1, 999)})'\n"
            o = str(rng.randint(1, 999999))
        pairs.append((Action("keystrokes", a), Observation(o + ("\n" if o else "") + prompt)))
    system = System(
        task_description=f"Inspect the {rng.choice(WORDS)} project and report its {rng.choice(WORDS)}.",
        action_space=json.dumps(
            [{"name": "keystrokes", "description": "Keys sent to the terminal"}]
        ),
        initial_state=f"Debian GNU/Linux 12; tools: bash python3 git; cwd {cwd}\n{prompt}",
    )
    return system, pairs


def _swe(rng: random.Random) -> tuple[System, list[tuple[Action, Observation]]]:
    pairs = []
    for _ in range(rng.randint(3, 8)):
        k = rng.random()
        f = rng.choice(FILES)
        if k < 0.4:
            body = _file_body(rng, rng.randint(3, 15)).splitlines()
            o = "\n".join(f"{i + 1:>4}\t{line}" for i, line in enumerate(body))
            pairs.append((tool("read", path=f), Observation(o)))
        elif k < 0.7:
            old, new = rng.choice(WORDS), rng.choice(WORDS)
            o = f"--- a/{f}\n+++ b/{f}\n@@ -1,3 +1,3 @@\n-    {old} = 1\n+    {new} = 1\n"
            pairs.append((tool("edit", path=f, old=old, new=new), Observation(o)))
        else:
            n = rng.randint(1, 40)
            o = f"{n} passed, {rng.randint(0, 3)} failed in {rng.random() * 9:.2f}s"
            pairs.append((tool("bash", command="pytest -q"), Observation(o, exit_code=0)))
    space = [{"name": n} for n in ("read", "edit", "bash")]
    system = System(
        task_description=f"Fix the bug in the {rng.choice(WORDS)} module: {_sentence(rng, 8)}.",
        action_space=json.dumps(space),
        initial_state="repository at /repo, branch main",
    )
    return system, pairs


def _mcp(rng: random.Random) -> tuple[System, list[tuple[Action, Observation]]]:
    pairs = []
    for _ in range(rng.randint(2, 7)):
        if rng.random() < 0.5:
            entity = rng.choice(WORDS).title()
            a = tool(
                "create_entities", entities=[{"name": entity, "entityType": rng.choice(WORDS)}]
            )
            o = json.dumps([{"name": entity, "observations": [_sentence(rng, 6)]}])
        else:
            a = tool("get_current_time", timezone=rng.choice(["UTC", "Europe/Paris", "Asia/Tokyo"]))
            o = json.dumps(
                {"datetime": (EPOCH + timedelta(minutes=rng.randint(0, 10**6))).isoformat()}
            )
        pairs.append((a, Observation(o)))
    space = [{"name": "create_entities"}, {"name": "get_current_time"}]
    return System(task_description=_sentence(rng, 10), action_space=json.dumps(space)), pairs


def _web(rng: random.Random) -> tuple[System, list[tuple[Action, Observation]]]:
    pairs = []
    url = f"http://127.0.0.1:8000/{rng.choice(WORDS)}"
    for i in range(rng.randint(2, 6)):
        link = rng.choice(WORDS)
        tree = "\n".join(
            f"[{j}] {rng.choice(['link', 'button', 'heading', 'text'])} '{_sentence(rng, 3)}'"
            for j in range(rng.randint(3, 12))
        )
        state = json.dumps({"url": f"{url}/{link}", "title": link.title()})
        pairs.append((Action("gui", f"click [{i}] '{link}'"), Observation(tree, state_json=state)))
    return System(task_description=_sentence(rng, 9), initial_state=f"url: {url}"), pairs


GENERATORS = {"terminal": _terminal, "swe": _swe, "mcp": _mcp, "web": _web}


@dataclass
class SyntheticConfig:
    """Shape of a generated corpus."""

    n: int = 100
    """Number of trajectories."""
    seed: int = 0
    """Everything generated is a function of this seed."""
    domains: tuple[str, ...] = tuple(GENERATORS)
    """Domains drawn uniformly."""


def make_trajectory(rng: random.Random, domain: str, i: int) -> Trajectory:
    system, pairs = GENERATORS[domain](rng)
    start = EPOCH + timedelta(seconds=i * 60)
    turns = [
        Turn(
            k, a, o, started_at=start + timedelta(seconds=k), duration_ms=float(rng.randint(5, 900))
        )
        for k, (a, o) in enumerate(pairs)
    ]
    return Trajectory(
        domain=domain,
        turns=turns,
        source=Source(kind="synthetic", name="synthetic", episode_id=f"ep-{i:06d}", attempt=1),
        environment=Environment(backend="synthetic"),
        task=Task(task_id=f"task-{i % 97}", instruction=system.task_description),
        agent=Agent(name="synthetic", policy="scripted"),
        system=system,
        outcome=Outcome(status="success", reward=1.0),
        started_at=start,
        ended_at=start + timedelta(seconds=len(turns)),
    ).with_id()


def generate(config: SyntheticConfig) -> list[Trajectory]:
    rng = random.Random(config.seed)
    return [make_trajectory(rng, rng.choice(config.domains), i) for i in range(config.n)]


def _perturb(rng: random.Random, t: Trajectory, i: int) -> Trajectory:
    """A near-duplicate: a changed number, an edited word, or two turns swapped."""
    d = t.to_dict()
    turns = d["turns"]
    k = rng.random()
    if k < 0.34:
        j = rng.randrange(len(turns))
        turns[j]["observation"]["text"] += f" {rng.randint(0, 9999)}"
    elif k < 0.67:
        j = rng.randrange(len(turns))
        words = turns[j]["observation"]["text"].split(" ")
        words[rng.randrange(len(words))] = rng.choice(WORDS)
        turns[j]["observation"]["text"] = " ".join(words)
    elif len(turns) > 1:
        a, b = rng.sample(range(len(turns)), 2)
        turns[a], turns[b] = turns[b], turns[a]
        for n, turn in enumerate(turns):
            turn["index"] = n
    d["source"]["episode_id"] = f"dup-{i:06d}"
    return Trajectory.from_dict(d).with_id()


def near_duplicate_corpus(
    n_unique: int, n_groups: int, group_size: int, seed: int = 0, exact_copies: int = 0
) -> tuple[list[Trajectory], list[set[str]]]:
    """A corpus with planted near-duplicate groups; returns (trajectories, true groups of ids)."""
    rng = random.Random(seed)
    domains = tuple(GENERATORS)
    base = [make_trajectory(rng, rng.choice(domains), i) for i in range(n_unique)]
    out = list(base)
    groups: list[set[str]] = []
    for g in range(n_groups):
        seed_t = base[g]
        # Long trajectories make the planted edits "near": one turn out of many changes.
        while len(seed_t.turns) < 5:
            seed_t = make_trajectory(rng, seed_t.domain, n_unique + g)
            out[g] = seed_t
        members = {seed_t.trajectory_id}
        for m in range(group_size - 1):
            dup = _perturb(rng, seed_t, g * group_size + m)
            out.append(dup)
            members.add(dup.trajectory_id)
        groups.append(members)
    for c in range(exact_copies):
        d = out[c].to_dict()
        d["source"]["episode_id"] = f"copy-{c}"
        out.append(Trajectory.from_dict(d))
    rng.shuffle(out)
    for i, t in enumerate(out):  # collected in list order, as a collector's stream
        _collected_at(t, EPOCH + timedelta(seconds=i * 60))
    return out, groups


def _collected_at(t: Trajectory, start: datetime) -> None:
    """Move a trajectory's timestamps so that it starts at `start` (its id stays: ids
    hash content, not times)."""
    shift = start - t.started_at
    t.started_at, t.ended_at = start, t.ended_at and t.ended_at + shift
    for turn in t.turns:
        if turn.started_at is not None:
            turn.started_at += shift


def build(
    domain: str,
    pairs: list[tuple[str | Action, str | Observation]],
    *,
    action_space: list[str] | None = None,
    episode: str = "ep",
    **system: str,
) -> Trajectory:
    """A trajectory from (action, observation) pairs; strings become text actions/observations.

    For tests and examples: `build("swe", [(tool("read", path="a"), "1\\tx")], action_space=["read"])`.
    """
    turns = []
    for i, (a, o) in enumerate(pairs):
        a = (
            a
            if isinstance(a, Action)
            else Action("keystrokes" if domain == "terminal" else "text", a)
        )
        o = o if isinstance(o, Observation) else Observation(o)
        turns.append(Turn(i, a, o))
    space = json.dumps([{"name": n} for n in action_space]) if action_space is not None else None
    return Trajectory(
        domain=domain,
        turns=turns,
        source=Source(kind="synthetic", name="synthetic", episode_id=episode),
        system=System(action_space=space, **system),
    ).with_id()
