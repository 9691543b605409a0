"""Agent policies: who chooses the next action.

`act(history)` returns the next Action or None to end the episode. A policy that has
reasoning to record calls `history.note_reasoning(text)`: it goes to the turn's raw
`reasoning` field, never into the action.

Policies are registered by kind, like sandboxes: `BUILTIN_POLICIES` plus the entry-point
group `worldtrace.policies`. Each has a `config_class` (parsed from the job file's
`policy:` mapping) and `build(config, ctx)`. The kind `explorer` is the sandbox kind's
own explorer (its class attribute `explorer = "module:Class"`), so every environment
can be collected without a model.
"""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol

from pydantic import Field
from worldtrace.sandboxes.base import TaskSpec, ToolSpec
from worldtrace.schemas import Action, Observation, Trajectory, Turn
from worldtrace.schemas.actions import declared_tools, json_type
from worldtrace.schemas.parsing import configclass
from worldtrace.schemas.plugins import entries, load_ref
from worldtrace.schemas.redact_rules import PLACEHOLDER_MARK

from .actions import keystrokes, tool, tool_call

POLICY_ENTRY_POINT_GROUP = "worldtrace.policies"


def _redactor(policy: object):
    """The redactor of a policy's own words (`redact.redactor`), loaded when a policy
    first speaks: the rules module loads pyarrow, which the job commands need not."""
    from worldtrace.schemas.redact import redactor

    return redactor(policy)


class PolicyConfigError(RuntimeError):
    """The policy's configuration cannot work with what it talks to (a chat endpoint that
    is no chat-completions server, or refuses the key): every attempt would fail alike,
    so the attempt fails and is not retried (`episode.retriable`)."""


BUILTIN_POLICIES = {
    "scripted": "worldtrace.collectors.policies:ScriptedPolicy",
    "replay": "worldtrace.collectors.policies:ReplayPolicy",
    "openai": "worldtrace.collectors.policies:OpenAIChatPolicy",
}
EXPLORER = "explorer"


@dataclass
class History:
    task: str
    initial: Observation
    action_space: list[dict[str, Any]]
    turns: list[Turn] = field(default_factory=list)
    pending_reasoning: str | None = None

    def note_reasoning(self, text: str | None) -> None:
        self.pending_reasoning = text or None

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec.from_dict(t) for t in self.action_space if isinstance(t, dict)]


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may know when it is built for one episode."""

    actions: tuple[Action, ...] = ()
    """The task's scripted actions (job file)."""
    replay: str | None = None
    """The task's trajectory id (prefix) to replay."""
    raw_dir: Path | None = None
    seed: int = 0
    """Seed of this episode (job seed, task and episode index)."""
    action_kinds: tuple[str, ...] = ("tool_call",)
    """What the sandbox takes: keystrokes (terminal) or tool calls."""


class Policy(Protocol):
    name: str

    def act(self, history: History) -> Action | None: ...


@configclass
class NoConfig:
    """This policy takes no settings."""


class ScriptedPolicy:
    """Plays a fixed list of actions (from a task file), then stops."""

    kind: ClassVar[str] = "scripted"
    config_class: ClassVar[type] = NoConfig
    name = "scripted"

    def __init__(self, actions: list[Action]):
        self.actions = list(actions)

    @classmethod
    def build(cls, config: NoConfig, ctx: PolicyContext) -> ScriptedPolicy:
        return cls(list(ctx.actions))

    def act(self, history: History) -> Action | None:
        n = len(history.turns)
        return self.actions[n] if n < len(self.actions) else None


class ReplayPolicy(ScriptedPolicy):
    """Re-runs the actions of a recorded trajectory against a fresh sandbox."""

    kind: ClassVar[str] = "replay"
    name = "replay"

    def __init__(self, trajectory: Trajectory):
        super().__init__([t.action for t in trajectory.turns])
        self.source_id = trajectory.trajectory_id
        self.recorded = trajectory

    @classmethod
    def build(cls, config: NoConfig, ctx: PolicyContext) -> ReplayPolicy:
        try:
            return cls(find_replay(ctx.raw_dir, ctx.replay or ""))
        except ValueError as exc:
            raise ValueError(f"replay {exc}") from None


def replay_task(
    recorded: Trajectory, task: TaskSpec, conditions: tuple, kind: type | None = None
) -> tuple[TaskSpec, tuple]:
    """The task and conditions a replay runs under: the recording's instruction, set-up
    (`environment.config.setup`, kept since 12-03), the kind's task keys (`replay_params`)
    and conditions, where the job gives none of its own: a job with a `conditions:` block
    gives its own (its draw, `conditions.Drawn`), and an episode that drew none runs plain
    (until 12-06 under the recording's). Without them the actions ran in
    another environment (`cd /root/demo` before the `mkdir` of a set-up; an Android
    replay on the home screen instead of the task's app) and the replay recorded another
    episode. A sandbox kind (`kind`) may say itself what of the recording a replay runs
    with: its classmethod `replay_params`, of `replay_params`' arguments, in place of
    that one (MCP, which has no task keys: the recording's fault draw, `mcp.FaultDraw`)."""
    import dataclasses

    from worldtrace.sandboxes.conditions import Drawn, parse_conditions

    env = recorded.environment
    try:
        config = json.loads(env.config) if env is not None and env.config else {}
    except ValueError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    setup = task.setup or tuple(config.get("setup") or ())
    instruction = task.instruction or (recorded.task.instruction if recorded.task else "") or ""
    params = (getattr(kind, "replay_params", None) or replay_params)(recorded, config, task.params)
    if not isinstance(conditions, Drawn) and recorded.conditions:  # a draw of none is plain
        spec = parse_conditions(json.loads(recorded.conditions))
        conditions = spec.sample(0) if spec is not None else ()
    replaced = dataclasses.replace(task, instruction=instruction, setup=setup, params=params)
    return replaced, conditions


def replay_params(recorded: Trajectory, config: dict[str, Any], params: Any) -> Any:
    """The kind's task keys (the fields of its `task_class`: Android's app, activity and
    clear_data, a web task's url) a replay runs with: the job task's when it gives any,
    else the recording's, as its record holds them: `environment.config.<key>` (Android,
    since 12-06), else the environment's field of that name (a web episode's start page,
    `environment.url`). A record that holds not all of them (an Android one collected
    before 12-06) is refused (SandboxConfigError: every attempt would fail alike) rather
    than replayed elsewhere than it ran: the job's task restates them."""
    import dataclasses

    from worldtrace.sandboxes.base import SandboxConfigError
    from worldtrace.schemas.parsing import ConfigError, parse

    if not dataclasses.is_dataclass(params) or params != type(params)():
        return params  # the kind has no task keys, or the job's task gives its own
    env, found, missing = recorded.environment, {}, []
    for f in dataclasses.fields(params):
        if f.name in config:
            found[f.name] = config[f.name]
        elif getattr(env, f.name, None) is not None:
            found[f.name] = getattr(env, f.name)
        else:
            missing.append(f.name)
    tid = recorded.trajectory_id
    if missing:
        raise SandboxConfigError(
            f"replay of {tid}: its record does not say the task's {', '.join(missing)} (it was "
            f"collected before they were recorded): restate them in this task, as the "
            f"recording's job had them{_first_screen(recorded)}"
        )
    try:
        return parse(type(params), found)
    except ConfigError as exc:
        raise SandboxConfigError(
            f"replay of {tid}: its recorded task keys do not check: {exc}"
        ) from None


def _first_screen(recorded: Trajectory) -> str:
    """` (its first screen: [app/activity] ...)`: the recorded initial state's screen
    header (an Android one), which names the app the recording started in."""
    text = recorded.system.initial_state if recorded.system else None
    header = next((x for x in (text or "").splitlines() if SCREEN_HEADER.match(x)), None)
    return f" (its first screen: {header[:200]})" if header else ""


SCREEN_HEADER = re.compile(r"\[[A-Za-z][\w.]*/[\w.$]+\]")
"""An Android observation's first line: `[com.example.notes/.MainActivity] keyboard: ...`."""


def raw_trajectory_ids(raw_dir: str | Path | None) -> dict[str, Path]:
    """Each trajectory id of the raw shards under `raw_dir` and a shard holding it (only
    the id column is read; an unreadable shard is skipped: its readers name it)."""
    from worldtrace.schemas.store import read_parquet, shard_files

    ids: dict[str, Path] = {}
    for f in shard_files(raw_dir) if raw_dir else []:
        try:
            column = read_parquet(f, ["trajectory_id"]).column(0)
        except Exception:  # pyarrow raises several types for a torn or foreign file
            continue
        for tid in column.to_pylist():
            if tid:
                ids.setdefault(tid, f)
    return ids


def find_replay(
    raw_dir: str | Path | None, prefix: str, ids: dict[str, Path] | None = None
) -> Trajectory:
    """The raw trajectory whose id starts with `prefix`. Ids are content hashes, so copies
    of one id (a replay that came out identical, two identical failed attempts) are one
    trajectory; no match or several distinct ids is a ValueError saying which."""
    from worldtrace.schemas import read_records

    ids = raw_trajectory_ids(raw_dir) if ids is None else ids
    found = sorted(t for t in ids if prefix and t.startswith(prefix))
    if not found:
        raise ValueError(f"{prefix!r} matches no raw trajectory")
    if len(found) > 1:
        raise ValueError(f"{prefix!r} matches {len(found)} raw trajectories: give more of the id")
    return next(t for t in read_records(ids[found[0]]) if t.trajectory_id == found[0])


def replay_mismatch(
    trajectory: Trajectory,
    kind: str,
    domain: str,
    action_kinds: tuple[str, ...],
    tools: set[str] | None,
) -> str | None:
    """Why sandbox kind `kind` (recording `domain`) cannot replay `trajectory`, or None:
    the same domain, only the action kinds the kind takes and, when its tools are known
    before it starts, only those tools, but for a call of a tool the recording's own
    action space lacked too: the agent's unknown tool, whose answer (the server's error)
    the replay records again (such a recording could never be replayed, 12-06). An
    action holding a redacted secret is refused: the replay typed `<secret:env_value>`
    into the page and recorded it as success (12-06)."""
    tid = trajectory.trajectory_id
    recorded = declared_tools(trajectory.system.action_space if trajectory.system else None)
    if trajectory.domain != domain:
        return (
            f"{tid} was recorded in domain {trajectory.domain}; this job (sandbox kind "
            f"{kind}) records {domain}: replay it with the kind that recorded it"
        )
    for turn in trajectory.turns:
        a = turn.action
        if PLACEHOLDER_MARK in a.text or PLACEHOLDER_MARK in (a.arguments_json or ""):
            return (
                f"{tid} turn {turn.index}: its action holds a redacted secret "
                f"({PLACEHOLDER_MARK}...>), which a replay would send as it is written, "
                "not the value: record the episode again instead"
            )
        if a.kind not in action_kinds:
            return (
                f"{tid} has {a.kind} actions; sandbox kind {kind} takes "
                f"{' or '.join(action_kinds)} actions"
            )
        if (
            a.kind == "tool_call"
            and tools is not None
            and a.name not in tools
            and (recorded is None or a.name in recorded)
        ):
            return (
                f"{tid} calls tool {a.name!r}, which sandbox kind {kind} does not have "
                f"(tools: {', '.join(sorted(tools))})"
            )
    return None


ARGS_SAID = 200
"""Characters of a tool call's bad arguments quoted in the attempt's reason."""


def _no_constant(name: str) -> Any:
    """Python's JSON reader takes NaN and Infinity; JSON, and so a tool call, has none."""
    raise ValueError(f"{name} is no JSON value")


_BLOCK_RE = re.compile(r"```(?:bash|sh|shell|console)?\n(.*?)```", re.S)


@configclass
class OpenAIConfig:
    """An OpenAI-compatible chat-completions endpoint."""

    base_url: str
    """e.g. http://127.0.0.1:8000/v1"""
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the key (never the key itself)."""
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    max_tokens: Annotated[int, Field(ge=1)] = 1024
    timeout: Annotated[float, Field(gt=0)] = 60.0
    """Seconds per request."""


NOT_A_CHAT_SERVER = (401, 403, 404, 405, 501)
"""HTTP statuses no retry mends: the key refused, or no chat completions at that URL (a
wrong port or path; Python's own http.server answers a POST with 501). Others (429,
500, 502, 503, a request too long) may pass on the next attempt."""
ANSWER_READ = 64 << 10
"""Bytes of an error answer read; what is said of it is cut to `ANSWER_SAID` characters."""
ANSWER_SAID = 300


def _answer_text(data: bytes) -> str:
    """An error answer as a line of text: an HTML page's text without its tags, spaces
    folded (the attempt's error showed `b'<!DOCTYPE HTML>\\n<html lang="en">...'`)."""
    text = data.decode("utf-8", "replace")
    if re.match(r"\s*<(?:!doctype|html|head|body)\b", text, re.I):
        from worldtrace.sandboxes.mcp_search import page_text

        text = page_text(text)[1]  # its text, as the search sandbox reads a page
    text = " ".join(text.split())
    return text if len(text) <= ANSWER_SAID else text[: ANSWER_SAID - 3] + "..."


@dataclass
class OpenAIChatPolicy:
    """An OpenAI-compatible chat-completions endpoint chooses the actions.

    Tool mode (the sandbox declares tools): the model's tool_calls are the actions, each
    a turn, in the order the reply gives them (the model is asked again once all have
    run; until 2026-12-06 every call after a reply's first was dropped unsaid), and the
    history sends them back as one assistant message with its calls.
    Terminal mode: the last ```bash block of the reply is typed, followed by Enter.
    A reply with neither ends the episode.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 60.0
    terminal: bool = False
    name: str = "openai-chat"
    kind: ClassVar[str] = "openai"
    config_class: ClassVar[type] = OpenAIConfig
    _queued: list[tuple[str, dict[str, Any]]] = field(default_factory=list, repr=False)
    """The last reply's tool calls not yet run."""
    _replies: list[int] = field(default_factory=list, repr=False)
    """How many tool calls each reply made, in order (the history's grouping)."""

    @classmethod
    def build(cls, config: OpenAIConfig, ctx: PolicyContext) -> OpenAIChatPolicy:
        return cls(
            base_url=config.base_url,
            model=config.model,
            api_key_env=config.api_key_env,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout,
            terminal="keystrokes" in ctx.action_kinds,
        )

    def _messages(self, h: History) -> list[dict[str, Any]]:
        system = f"{h.task}\n\nInitial state:\n{h.initial.text}"
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": h.task},
        ]
        sizes, i = iter(self._replies), 0
        while i < len(h.turns):
            t = h.turns[i]
            if self.terminal or t.action.kind != "tool_call":
                msgs.append({"role": "assistant", "content": f"```bash\n{t.action.text}```"})
                msgs.append({"role": "user", "content": t.observation.text})
                i += 1
                continue
            # one reply's calls (all tool calls: `act` made them), sent back as it gave them
            calls = [(f"call_{j}", x) for j, x in enumerate(h.turns[i : i + next(sizes, 1)], i)]
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": x.action.name,
                                "arguments": x.action.arguments_json or "{}",
                            },
                        }
                        for cid, x in calls
                    ],
                }
            )
            for cid, x in calls:
                msgs.append({"role": "tool", "tool_call_id": cid, "content": x.observation.text})
            i += len(calls)
        return msgs

    def _tools(self, h: History) -> list[dict[str, Any]] | None:
        """Native tool calling: each tool's JSON Schema as the function's parameters."""
        if self.terminal:
            return None
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.input_schema),
                },
            }
            for t in h.tools()
        ]

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The endpoint's reply message to `body`; every failure names the URL."""
        url = self.base_url.rstrip("/") + "/chat/completions"
        key = os.environ.get(self.api_key_env)
        headers = {"Content-Type": "application/json"}
        if key:  # a local server wants none; an empty `Bearer ` is no key either
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = resp.read()
        except urllib.error.HTTPError as exc:
            # a gateway may echo the key it refused: the reason is redacted with the key as
            # a literal before it becomes the attempt's error (printed, kept in jobs.db)
            said = _redactor(self).text(_answer_text(exc.read(ANSWER_READ)))[0]
            why = f"chat completions at {url}: HTTP {exc.code} ({exc.reason}): {said}"
            if exc.code in (401, 403) and not key:
                why += f"; {self.api_key_env} (the policy's api_key_env) is not set on this host"
            if exc.code in NOT_A_CHAT_SERVER:
                raise PolicyConfigError(why) from None
            raise RuntimeError(why) from None  # a busy or failing server: retried
        except (urllib.error.URLError, OSError) as exc:  # down, or gone silent: retried
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(cause, TimeoutError):
                why = f"no answer within {self.timeout:g} s (the policy's timeout)"
            elif isinstance(exc, urllib.error.URLError):  # urlopen's: the connection
                why = f"cannot connect: {cause}"
            else:
                why = f"the connection failed: {cause}"
            raise RuntimeError(f"chat completions at {url}: {why}") from None
        try:
            message = json.loads(data)["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError
        except (ValueError, LookupError, TypeError):
            said = _redactor(self).text(_answer_text(data[:ANSWER_READ]))[0]
            raise RuntimeError(
                f"chat completions at {url}: the answer is no chat completion "
                f"(no choices[0].message): {said}"
            ) from None
        return message

    def act(self, history: History) -> Action | None:
        if self._queued:  # the last reply's next call: its reasoning went with the first
            history.note_reasoning(None)
            return tool_call(*self._queued.pop(0))
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(history),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        tools = self._tools(history)
        if tools:
            body["tools"] = tools
        msg = self.complete(body)
        content = msg.get("content") or ""
        calls = msg.get("tool_calls") or []
        if calls:
            if not isinstance(calls, list):
                calls = [calls]
            # every call read first: one the model got wrong fails the attempt before any runs
            self._queued = [self._call_of(c) for c in calls]
            self._replies.append(len(self._queued))
            history.note_reasoning(
                "\n\n".join(x for x in (msg.get("reasoning_content"), content) if x)
            )
            return tool_call(*self._queued.pop(0))
        blocks = _BLOCK_RE.findall(content)
        if not blocks:
            return None
        prose = _BLOCK_RE.sub("", content).strip()
        history.note_reasoning("\n\n".join(x for x in (msg.get("reasoning_content"), prose) if x))
        cmd = blocks[-1].rstrip("\n")
        return keystrokes(cmd + "\n") if self.terminal else tool("bash", command=cmd)

    def _call_of(self, call: Any) -> tuple[str, dict[str, Any]]:
        """(tool name, arguments) of the model's tool call. Arguments that are no JSON
        object are the model's mistake, not the environment's answer: the attempt fails
        saying the policy, the tool and the text (a retry may draw a better reply)."""
        fn = call.get("function") if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise RuntimeError(f"{self._who()}: a tool call without a function name: {call!r:.300}")
        text = fn.get("arguments")
        if isinstance(text, dict):  # some servers send the object itself
            return name, text
        if text is None or (isinstance(text, str) and not text.strip()):
            return name, {}
        if not isinstance(text, str):
            text = json.dumps(text)
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError as exc:
            what = f"not JSON: {exc}"
        else:
            if isinstance(value, dict):
                return name, value
            what = f"a JSON {json_type(value)}"
        said = _redactor(self).text(text[:ARGS_SAID])[0]
        quoted = repr(said) + (
            f"... ({len(text)} characters; {what})" if len(text) > ARGS_SAID else f" ({what})"
        )
        raise RuntimeError(
            f"{self._who()}: the model called {name} with arguments that are not a JSON "
            f"object: {quoted}"
        )

    def _who(self) -> str:
        return f"policy {self.kind} (model {self.model})"


# -- the registry -----------------------------------------------------------------
@functools.cache
def policy_registry() -> dict[str, str]:
    """Policy kind -> "module:Class" (entry points add kinds, never replace a builtin)."""
    return entries(POLICY_ENTRY_POINT_GROUP, BUILTIN_POLICIES)


def policy_kinds() -> list[str]:
    return sorted([*policy_registry(), EXPLORER])


def load_policy(kind: str, sandbox_cls: type | None = None) -> type:
    """The policy class of a kind; `explorer` is the sandbox kind's own explorer."""
    if kind == EXPLORER:
        ref = getattr(sandbox_cls, "explorer", None)
        if not ref:
            name = getattr(sandbox_cls, "kind", "this sandbox")
            raise KeyError(f"sandbox kind {name!r} has no explorer policy")
        return load_ref(ref)
    known = policy_registry()
    if kind not in known:
        raise KeyError(f"unknown policy {kind!r} (known: {', '.join(policy_kinds())})")
    return load_ref(known[kind])
