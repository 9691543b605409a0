"""SWE-agent `.traj`: {environment, trajectory[{action, observation, response, thought, state}], history, info}.

action <- `action` (the executed command, trailing newline dropped); observation <-
`observation`; reasoning <- `thought` (else `response`); state_json <- the state after
the action: 1.x's step `state` (read after it ran), 0.x's next step's (0.x read it
before asking the model; after its last step it is unknown);
task <- first non-demo user message of `history`; demonstrations <- demo messages;
outcome <- info.exit_status; model <- `replay_config` (1.x); info.model_stats -> metadata;
domain swe. A step SWE-agent appends when it ends the run itself (`exit_cost`,
`exit_context`...: "Exited (autosubmitted)") is no turn: no command ran; its action ->
metadata `exit_action`. 1.x marks every step it did not run with an
`execution_time` of 0 (`_not_run`): its `exit` and autosubmission end the run the same
way (`exit_action` "exit" / "autosubmission"); a requeried action (format error, blocked
command, bash syntax error; empty observation) is no turn, reported `not_run`.
0.x appended a notice to the output when its own link to the container failed
("COMMAND FAILED TO EXECUTE. RESTARTING PROCESS." and the like, `harness_failure`): the
environment's answer is unknown, so that step is no turn, reported `harness_failure`.
A step and a history message are objects, `action` and `observation` strings (SWE-agent
writes nothing else): anything else is `invalid`, naming it, never its text.

The system message documents the agent's commands (`open`, `goto`, `edit`...), which a
world model must simulate: they become the action space, one ToolSpec dict
`{name, description, input_schema}` per documented command (the detailed
`name:/docstring:/signature:/arguments:` layout, or one `signature - docstring` line per
command), plus `bash` when the prompt allows other shell commands. A prompt whose
commands cannot be parsed is kept whole as one `{"name": "commands", ...}` entry, unless
the history's `tool_calls` name the tools (1.x with function calling: the API gave them,
unrecorded): then those, with the argument names they were called with. The whole
system text also goes to metadata `agent_system_prompt`. A null one is unknown, not the
empty prompt: reported (`message_not_imported`), neither metadata nor action space.

A `.traj` with only `history` (no `trajectory` list) is imported from it: each
assistant message's `action` (else its command as SWE-agent's ThoughtActionParser reads
it, `common.split_command`: the last fenced block, fences only at line starts) paired
with the next user message, whose trailing `(Open file: F)\n(Current directory: D)\nbash-$`
prompt becomes state_json {open_file, working_dir} (the state after the action, as on
the `trajectory` path); an action nothing answered is reported, not a turn.

SWE-agent's own text is not the environment's answer (`harness_observation`). A step's
`observation` is the raw output, except when a command timed out: 1.x writes its
`command_cancelled_timeout_template` instead ("The command '...' was cancelled because
it took more than N seconds. ..."), 0.x appends a line "EXECUTION TIMED OUT" (0.7:
"... BECAUSE THE COMMAND WAS RUNNING FOR MORE THAN N SECONDS." / "... BECAUSE NO OUTPUT
WAS PRODUCED ...", or "... AND INTERRUPT FAILED. RESTARTING PROCESS.") to the output read
so far: a timeout, kept as the output so far + `[timed out]`, an error, no exit code,
`timed_out: true` added to the state. The `history` messages are rendered with
SWE-agent's templates, so from `history` alone also: the no-output template ("Your
command ran successfully and did not produce any output.") is the empty output, and
1.x's truncation template ("Observation: ...<response clipped><NOTE>Observations should
not exceeded N characters. M characters were elided. ...</NOTE>") the text shown with
`observation.truncated` (unless it held the whole output, as 1.0's did). Only these
exact templates, whole (a timeout notice: the whole end of the output, on its own
line), are removed; text like them that a program printed stays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome
from worldtrace.schemas.validate import parse_json

from .common import (
    ImportProblem,
    MissingField,
    NonText,
    build,
    expected,
    json_in,
    no_text,
    null_or_missing,
    origin_stem,
    split_command,
    textless,
    timed_out,
    warning,
)

NAME = "swe-agent"
SHELL_SPEC = {
    "name": "bash",
    "description": "Any other non-interactive bash command (the prompt allows typical bash"
    " commands besides the ones documented).",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object"}
_HEADER = re.compile(r"^([A-Za-z_][\w-]*):[ \t]*$")
_FIELD = re.compile(r"^\s+(docstring|signature|arguments):[ \t]?(.*)$")
_ARG = re.compile(r"^\s+-\s+(\w+)\s+\((\w+)\)\s+\[(required|optional)\]:\s*(.*)$")
_LINE_DOC = re.compile(r"^([A-Za-z_][\w-]*)\b(.*?)\s+-\s+(\S.*)$")
_PROMPT = re.compile(r"(?:^|\n)\(Open file: (.*)\)\n\(Current directory: (.*)\)\n\S*\$\s*\Z")


def detect(path: Path, head: Any) -> bool:
    if not isinstance(head, dict):
        return False
    if isinstance(head.get("trajectory"), list):
        return True
    history = head.get("history")
    return isinstance(history, list) and (
        path.name.endswith(".traj")
        or any(
            isinstance(h, dict) and h.get("role") == "assistant" and "action" in h for h in history
        )
    )


def _state(raw: Any, field: str) -> str | None:
    """A step's `state` (at `field`) as the observation's state JSON."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):
        return json.dumps(raw, sort_keys=True)
    try:
        parsed = json_in(raw, field)
    except (TypeError, json.JSONDecodeError):
        return json.dumps({"raw": str(raw)})
    return json.dumps(parsed if isinstance(parsed, dict) else {"value": parsed}, sort_keys=True)


def _commands_section(system: str) -> str:
    start = system.find("COMMANDS:")
    if start < 0:
        return ""
    body = system[start + len("COMMANDS:") :]
    end = re.search(r"\n[A-Z][A-Z ]+:\n", body)  # the next section (RESPONSE FORMAT:)
    return body[: end.start()] if end else body


def _detailed(section: str) -> list[dict[str, Any]]:
    """`name:` blocks with indented docstring/signature/arguments (SWE-agent's detailed docs)."""
    specs: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    key = None
    for line in section.splitlines():
        header, fld, arg = _HEADER.match(line), _FIELD.match(line), _ARG.match(line)
        if header and not line.startswith(" "):
            cur = {"name": header.group(1), "docstring": [], "signature": [], "args": []}
            specs.append(cur)
            key = None
        elif cur is None:
            continue
        elif fld:
            key = fld.group(1)
            if key != "arguments" and fld.group(2):
                cur[key].append(fld.group(2))
        elif arg and key == "arguments":
            cur["args"].append(arg.groups())
        elif key in ("docstring", "signature") and line.strip():
            cur[key].append(line.strip() if key == "docstring" else line)
        elif not line.strip():
            key = None if key == "docstring" else key
    out = []
    for s in specs:
        if not (s["docstring"] or s["signature"]):
            continue
        props, required = {}, []
        for name, typ, need, desc in s["args"]:
            props[name] = {"description": desc, **({"type": typ} if typ in JSON_TYPES else {})}
            if need == "required":
                required.append(name)
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        doc, sig = " ".join(s["docstring"]), "\n".join(s["signature"])
        out.append(
            {
                "name": s["name"],
                "description": f"{doc}\nsignature: {sig}" if sig else doc,
                "input_schema": schema,
            }
        )
    return out


def _one_line(section: str) -> list[dict[str, Any]]:
    """`signature - docstring` lines (SWE-agent's bash-style command docs)."""
    out = []
    for line in section.splitlines():
        m = _LINE_DOC.match(line.strip())
        if m:
            sig = (m.group(1) + m.group(2)).strip()
            out.append(
                {
                    "name": m.group(1),
                    "description": f"{m.group(3)}\nsignature: {sig}",
                    "input_schema": {"type": "object", "properties": {}},
                }
            )
    return out


def called_tools(history: list[Any]) -> list[dict[str, Any]]:
    """ToolSpec dicts of the functions the history's `tool_calls` name (1.x with function
    calling: the API gave the model its tools, the .traj keeps no schema), in the order
    first called, each with the argument names it was called with (untyped: only the
    calls are known)."""
    args: dict[str, dict[str, None]] = {}
    for h in history:
        calls = h.get("tool_calls") if isinstance(h, dict) and not h.get("is_demo") else None
        for c in calls if isinstance(calls, list) else []:
            fn = c.get("function") if isinstance(c, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name:
                continue
            try:
                given = parse_json(fn.get("arguments") or "{}")
            except (TypeError, ValueError):  # TooDeep too: names only
                given = {}
            args.setdefault(name, {}).update(
                dict.fromkeys(given if isinstance(given, dict) else ())
            )
    return [
        {
            "name": name,
            "description": "",
            "input_schema": {"type": "object", "properties": {k: {} for k in keys}},
        }
        for name, keys in args.items()
    ]


def action_space(system: str | None, history: list[Any] = ()) -> list[dict[str, Any]] | None:
    """ToolSpec dicts of the commands the system prompt documents (see the module doc);
    where it documents none, the tools the history called (`called_tools`)."""
    if not system or not system.strip():
        return called_tools(history) or None
    section = _commands_section(system)
    specs = _detailed(section) or _one_line(section)
    if not specs and (called := called_tools(history)):
        return called
    if not specs:
        return [
            {
                "name": "commands",
                "description": system,
                "input_schema": {"type": "object", "properties": {}},
            }
        ]
    if "bash command" in system and not any(s["name"] == "bash" for s in specs):
        specs.append(SHELL_SPEC)
    return specs


NO_OUTPUT = "Your command ran successfully and did not produce any output."
"""`next_step_no_output_template` (config/default.yaml, 0.x and 1.x): the history message
for an empty output (never a step's `observation`)."""
_TRUNCATED = re.compile(
    r"Observation: (?P<text>.*)<response clipped><NOTE>Observations should not exceeded"
    r" (?P<cap>\d+) characters\. (?P<elided>\d+) characters were elided\. Please try a"
    r" different command that produces less output or use head/tail/grep/redirect the"
    r" output to a file\. Do not use interactive pagers\.</NOTE>",
    re.S,
)
"""1.x `next_step_truncated_observation_template` (sweagent/agent/agents.py TemplateConfig),
a history message: `{{observation[:max_observation_length]}}` (1.0: the whole
`{{observation}}`) before the note."""
_TIMEOUT_1X = re.compile(
    r"The command '.*' was cancelled because it took more than [\d.]+ seconds\. Please try"
    r" a different command that completes more quickly\.(?: Note: A common source of this"
    r" error is if the command is interactive or requires user input \(it is impossible to"
    r" receive user input in the current environment, so the command will never"
    r" complete\)\.)?",
    re.S,
)
"""1.x `command_cancelled_timeout_template` (1.0 without the `Note:`): a step's whole
observation when its command timed out (no output is kept)."""
_TIMEOUT_0X = re.compile(
    r"(?P<out>.*)\nEXECUTION TIMED OUT(?: BECAUSE THE COMMAND WAS RUNNING FOR MORE THAN"
    r" [\d.]+ SECONDS\.| BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN [\d.]+ SECONDS\.\n"
    r"PLEASE REFINE YOUR RUNNING COMMAND SO IT WILL PRODUCE OUTPUT IN THE SPECIFIED TIME"
    r" FRAME\.| AND INTERRUPT FAILED\. RESTARTING PROCESS\.)?",
    re.S,
)
"""0.x (sweagent/environment/swe_env.py `SWEEnv.step`): the notice appended to the output
read so far (and, 0.7, what interrupting printed)."""


_FAILED_0X = re.compile(
    r"(?P<out>.*)\n(?P<notice>COMMAND FAILED TO EXECUTE\. RESTARTING PROCESS\.|BROKEN PIPE"
    r" ERROR\. RESTARTING PROCESS\.|EXECUTION FAILED OR COMMAND MALFORMED|COMMAND PRODUCED TOO"
    r" MANY NON-UNICODE CHARACTERS\. PLEASE TRY ANOTHER COMMAND\.\nIF YOU WANT TO VIEW BINARY"
    r" FILES, PLEASE USE `xxd` OR `hexdump` INSTEAD\.\n)",
    re.S,
)
"""0.x (`SWEEnv.step`): the notice appended to the output read so far when SWE-agent's
own link to the container failed (a runtime error, a broken pipe, any other exception
while reading, output it could not decode; the first two reset the container and end
the run). The environment's answer to that command is unknown: no turn."""


def harness_failure(text: str) -> str | None:
    """The notice of a 0.x harness failure that ends a step's observation, else None."""
    m = _FAILED_0X.fullmatch(text)
    return m["notice"].splitlines()[0] if m else None


def harness_observation(text: str, state: str | None, history: bool = False) -> Observation:
    """The observation of a step whose recorded output is `text` (a step's `observation`;
    with `history`, a history message without its trailing prompt): SWE-agent's exact
    templates (module doc) read for what they stand for, anything else kept as it is."""
    if history and text == NO_OUTPUT:
        return Observation("", state_json=state)
    cut = _TRUNCATED.fullmatch(text) if history else None
    if cut:
        shown, cap, elided = cut["text"], int(cut["cap"]), int(cut["elided"])
        whole = len(shown) == cap + elided  # 1.0 showed the whole output before its note
        return Observation(shown, truncated=not whole, state_json=state)
    if _TIMEOUT_1X.fullmatch(text):
        return timed_out("", state)
    killed = _TIMEOUT_0X.fullmatch(text)
    if killed:
        return timed_out(killed["out"], state)
    return Observation(text, state_json=state)


EXIT_ACTIONS = frozenset(
    {"exit_cost", "exit_context", "exit_api", "exit_format", "exit_error", "exit_forfeit"}
)
"""Steps SWE-agent appends when it ends a run itself (a limit hit, autosubmission): no
command ran; the answer ("Exited (autosubmitted)") is the framework's, not the
environment's."""


def _not_run(step: dict[str, Any]) -> bool:
    """Whether SWE-agent 1.x never sent the step's action to the environment: such steps
    keep `StepOutput`'s default `execution_time` of 0.0, which `handle_action` replaces
    with the measured time of every action it runs (0.x steps have no such field). They
    are requeries (`handle_error_with_retry`: a format error, a blocked command, a bash
    syntax error; empty observation), `exit` ("Exited") and an autosubmission after an
    error (action "", "Exited (autosubmitted)")."""
    t = step.get("execution_time")
    return type(t) in (int, float) and t == 0


def _state_after(steps: list[Any]) -> bool:
    """Whether a step's `state` is the state after its action: 1.x sets `step.state =
    tools.get_state(env)` once the action ran (agents.py `handle_action`; its steps have
    an `execution_time`, the state is an object). 0.x read the state command before it
    asked the model (`run`: `state = env.communicate(state_command)`, then `forward`; a
    JSON string, no `execution_time`): the state after step N's action is step N+1's."""
    return any(
        isinstance(s, dict) and ("execution_time" in s or isinstance(s.get("state"), dict))
        for s in steps
    )


def _from_steps(
    steps: list[Any], ended: list[str], problems: list[ImportProblem]
) -> list[tuple[Action, Observation, str | None]]:
    """The turns of `trajectory`; the exit steps (EXIT_ACTIONS, 1.x's `exit` and
    autosubmission) go to `ended`, the actions 1.x did not run to `problems`. Each
    turn's state is the state after its action (`_state_after`; after 0.x's last step:
    unknown, none)."""
    pairs = []
    after = _state_after(steps)
    for n, s in enumerate(steps):
        if not isinstance(s, dict):
            raise expected(f"trajectory[{n}]", "an object", s)
        if "action" not in s:
            raise MissingField(f"trajectory[{n}] has no `action`")
        cmd = _text(s, "action", f"trajectory[{n}]").rstrip("\n")
        if cmd.strip() in EXIT_ACTIONS:
            ended.append(cmd.strip())
            continue
        if _not_run(s):
            if cmd.strip() == "exit" or (n == len(steps) - 1 and not cmd.strip()):
                ended.append(cmd.strip() or "autosubmission")
            else:
                problems.append(
                    warning(
                        "not_run",
                        f"trajectory[{n}]: SWE-agent did not run {cmd!r} (a requery: format"
                        " error, blocked command or bash syntax error): no turn",
                    )
                )
            continue
        if s.get("observation") is None:  # what it printed is unknown: never ""
            problems.append(
                warning(
                    "unpaired_call",
                    f"{null_or_missing(s, 'observation', f'trajectory[{n}]')}, the answer to"
                    f" {cmd!r} is unknown; no turn",
                )
            )
            continue
        text = _text(s, "observation", f"trajectory[{n}]")  # SWE-agent writes text only
        failed = harness_failure(text)
        if failed:
            problems.append(
                warning(
                    "harness_failure",
                    f"trajectory[{n}]: SWE-agent failed to run {cmd!r} ({failed}): no turn",
                )
            )
            continue
        nxt = s if after else (steps[n + 1] if n + 1 < len(steps) else None)
        state = nxt.get("state") if isinstance(nxt, dict) else None
        obs = harness_observation(text, _state(state, f"trajectory[{n if after else n + 1}].state"))
        pairs.append((_command(cmd), obs, s.get("thought") or s.get("response")))
    return pairs


def _text(holder: dict[str, Any], key: str, at: str) -> str:
    """`holder[key]`, a string; anything else is the file's error, never its Python
    rendering as a command. A null too: SWE-agent writes "" for no action (a requery), so
    a null one is not ""; taken as "", its turn was dropped by `process` as
    `empty_action` with the observation it answered, and the import said nothing."""
    value = holder.get(key)
    if not isinstance(value, str):
        raise expected(f"{at}.{key}", "a string", value)
    return value


def _command(cmd: str) -> Action:
    return Action("command", cmd, name=cmd.split(maxsplit=1)[0] if cmd.strip() else None)


def _from_history(history: list[Any], parts: NonText) -> Iterator[Any]:
    """(action, observation, reasoning) from the message history, then any warnings."""
    msgs = [
        (n, h)
        for n, h in enumerate(history)
        if isinstance(h, dict) and not h.get("is_demo") and h.get("role") != "system"
    ]
    turn = 0
    for i, (n, m) in enumerate(msgs):
        if m.get("role") != "assistant":
            continue
        content = parts.text(m.get("content"), f"turn {turn} action (history[{n}].content)")
        if "action" in m:
            cmd, prose = _text(m, "action", f"history[{n}]"), m.get("thought")
        else:
            cmd, prose = split_command(content)
        if cmd is None:
            continue  # no command: a format error the agent was told about
        k, nxt = msgs[i + 1] if i + 1 < len(msgs) else (None, None)
        if nxt is None or nxt.get("role") == "assistant":
            yield warning("unpaired_call", f"history: no observation after {cmd.strip()!r}")
            continue
        if nxt.get("content") is None:  # what it printed is unknown: never ""
            said = null_or_missing(nxt, "content", f"history[{k}]")
            yield warning("unpaired_call", f"{said}, the answer to {cmd.strip()!r} is unknown; no turn")  # fmt: skip
            continue
        if (bare := textless(nxt.get("content"), f"history[{k}].content")) is not None:
            said = no_text([(f"history[{k}].content", bare)], repr(cmd.strip()))
            yield warning("unpaired_call", f"{said}; no turn")  # images only: never ""
            continue
        text = parts.text(nxt.get("content"), f"turn {turn} observation (history[{k}].content)")
        state = None
        turn += 1
        prompt = _PROMPT.search(text)
        if prompt:
            text = text[: prompt.start()]
            state = json.dumps(
                {"open_file": prompt.group(1), "working_dir": prompt.group(2)}, sort_keys=True
            )
        obs = harness_observation(text, state, history=True)
        yield _command(cmd.rstrip("\n")), obs, prose or None


def to_trajectory(d: dict[str, Any], origin: str) -> Iterator[Any]:
    if not isinstance(d, dict):  # `--format swe-agent` on a list, a number...
        raise expected("record", "an object with a `trajectory` or `history` list", d)
    for key in ("trajectory", "history"):
        if d.get(key) is not None and not isinstance(d[key], list):
            raise expected(key, "a list", d[key])
    history = d.get("history") or []
    for n, h in enumerate(history):  # passed over, it could take the prompt or task with it
        if not isinstance(h, dict):
            raise expected(f"history[{n}]", "an object", h)
    numbered = list(enumerate(history))
    history = [h for _, h in numbered]
    steps = d.get("trajectory")
    parts = NonText()
    ended: list[str] = []
    if isinstance(steps, list) and (steps or not history):
        not_run: list[ImportProblem] = []
        pairs = _from_steps(steps, ended, not_run)
        yield from not_run
    elif history:
        pairs = []
        for item in _from_history(d["history"], parts):
            if isinstance(item, ImportProblem):
                yield item
            else:
                pairs.append(item)
    else:
        raise MissingField("neither a `trajectory` nor a `history` list")
    demos = [
        parts.text(h.get("content"), f"demonstration (history[{n}].content)")
        for n, h in numbered
        if h.get("is_demo")
    ]
    users = [(n, h) for n, h in numbered if h.get("role") == "user" and not h.get("is_demo")]
    system = None
    for n, h in numbered:
        if h.get("role") != "system":
            continue
        if h.get("content") is None:  # unknown, as a null answer is: never the empty prompt
            yield warning(
                "message_not_imported",
                f"{null_or_missing(h, 'content', f'history[{n}]')}, the system prompt is"
                " unknown (no agent_system_prompt, no action space read from it); not imported",
            )
        else:
            system = parts.text(h.get("content"), f"system prompt (history[{n}].content)")
        break
    task = (
        parts.text(users[0][1].get("content"), f"task (history[{users[0][0]}].content)")
        if users
        else None
    )
    yield from parts.warnings()
    info = d.get("info") or {}
    status = info.get("exit_status")
    if status is not None and not isinstance(status, str):
        raise expected("info.exit_status", "a string", status)
    outcome = Outcome(
        status="success" if status == "submitted" else ("unknown" if status is None else "failure"),
        error=None if status in (None, "submitted") else status,
    )
    yield build(
        NAME,
        origin,
        "swe",
        pairs,
        task_description=task,
        instruction=task,
        action_space=action_space(system, history),
        demonstrations=demos or None,
        agent={"name": "swe-agent", "model": _model(d.get("replay_config"))},
        outcome=outcome,
        metadata={
            "environment": d.get("environment"),
            "exit_status": status,
            "exit_action": ended[-1] if ended else None,
            "submission": info.get("submission"),
            "agent_system_prompt": system,
            "model_stats": info.get("model_stats") or None,
        },
    )


def _model(config: Any) -> str | None:
    """The model's name from `replay_config`, where SWE-agent 1.x keeps it (the run's
    `RunSingleConfig` as JSON text, `agent.model.name`; `info.model_stats` holds only
    costs and counts); None when the file has none (0.x) or it is not there as written."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    for key in ("agent", "model", "name"):
        config = config.get(key) if isinstance(config, dict) else None
    return config if isinstance(config, str) and config else None


def parse(path: Path, data: Any) -> Iterator[Any]:
    yield from to_trajectory(data, origin_stem(path))
