"""AgentWorldBench-style JSONL: {id, task, system_str, prompt: [actions], response: [observations], turn_idx}.

Turn i = (prompt[i], response[i]); system_str -> task_description; domain <- the last
path part of `task` (e.g. "agentworld/terminal"); origin_id <- `id`; `turn_idx` (the
1-based turn to predict; a list of indices is kept too) -> metadata. Prompts and responses are strings; a null response is an answer
nobody knows: no turn (`unpaired_call`), never an empty output. Any other type refuses
the record (`invalid`, naming the field), as do an `id`, `task`, `system_str` or
`turn_idx` of the wrong type.

A line worldtrace exported (`export --format agentworldbench`: its `worldtrace` key) is
read back into the record it came from: since 12-06 the key holds each turn's action kind,
the record's system prompt parts, task instruction and conditions (`_as_recorded`,
`pipelines.writers.awb_provenance`), taken as they are; since 12-07 also each turn's other
fields (`turns`: the action's name and arguments, the observation's flags and state, the
perturbation), the outcome and a collector's record as one (`source_kind`), each checked
against its declaration (`_turn_fields`, `_outcome`). An older export's line held only
the trajectory and `synthetic`, and is parsed back (`_ours`): `system_str` is the system prompt
export composed (`pipelines/prompt.py`: the task description, then each other part under
its header), split back into its parts, the simulation instruction worldtrace added
(told by the sha256 of each domain's instruction in the export's manifest.json beside
the file) left out, so that an export of the record composes the same prompt again, not
the instruction twice; `task.instruction` <- the task description; a prompt that is a tool
call as worldtrace renders one (`name(<sorted JSON arguments>)`) is that call again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import Action, Observation, Outcome, Turn
from worldtrace.schemas import fields as F
from worldtrace.schemas.actions import rendered_arguments, tool_call
from worldtrace.schemas.spec import fields_of
from worldtrace.schemas.validate import json_problem, parse_json

from .common import MissingField, build, expected, file_cached, record_id, warning

NAME = "agentworldbench"


def detect_record(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and "prompt" in d
        and "response" in d
        and ("system_str" in d or "task" in d)
    )


def near_miss(d: Any) -> tuple[str, str] | None:
    """None: detection already takes any record with the keys (`to_trajectory` then
    names a field of the wrong type)."""
    return None


RECORD = "an object with `prompt` and `response` lists"
"""What a record is, for the problem of a value that is no object (`--format agentworldbench`)."""


def to_trajectory(
    d: dict[str, Any], origin: str, domain: str | None = None, path: Path | None = None
):
    if not isinstance(d, dict):
        raise expected("record", RECORD, d)
    for key in ("prompt", "response"):
        if key not in d:
            raise MissingField(f"no `{key}` list")
        if not isinstance(d[key], list):
            raise expected(key, "a list", d[key])
    prompts, responses = d["prompt"], d["response"]
    if len(prompts) != len(responses):
        raise MissingField(f"{len(prompts)} prompts but {len(responses)} responses")
    for key in ("task", "system_str"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise expected(key, "a string", d[key])
    idx = d.get("turn_idx")  # AgentWorldBench's: the 1-based turn to predict
    number = type(idx) is int and 1 <= idx <= len(prompts)
    if idx is not None and not number and not _ints(idx):
        raise expected("turn_idx", "a turn number (1-based) or a list of turn indices", idx)
    task = d.get("task") or ""
    dom = domain or task.rstrip("/").rsplit("/", 1)[-1]
    if dom not in F.DOMAINS:
        raise MissingField(
            f"task {task!r}: last path part is not a domain ({', '.join(F.DOMAINS)})"
        )
    ours = d.get(F.AWB_PROVENANCE)  # worldtrace's own export, imported again
    if ours is not None and not (
        isinstance(ours, dict) and isinstance(ours.get("synthetic", False), bool)
    ):
        raise expected(F.AWB_PROVENANCE, 'an object {"trajectory_id", "synthetic": bool}', ours)
    mine = _as_recorded(ours, len(prompts)) if ours is not None else None
    kind = "keystrokes" if dom == "terminal" else "text"
    pairs, perturbations = [], []
    for i, (a, o) in enumerate(zip(prompts, responses, strict=True)):
        if not isinstance(a, str):
            raise expected(f"prompt[{i}]", "a string", a)
        if o is None:
            yield warning(
                "unpaired_call",
                f"response[{i}]: null, the answer to prompt[{i}] is unknown; no turn",
            )
        elif not isinstance(o, str):
            raise expected(f"response[{i}]", "a string", o)
        elif mine is not None and mine["turns"] is not None:
            pairs.append(_turn(mine["kinds"][i], a, o, mine["turns"][i]))
            perturbations.append(mine["turns"][i].get("perturbation"))
        elif mine is not None:
            pairs.append((_action(mine["kinds"][i], a), Observation(o), None))
        else:
            action = (_rendered_call(a) if ours is not None else None) or Action(kind, a)
            pairs.append((action, Observation(o), None))
    synthetic = bool(ours and ours.get("synthetic"))
    if synthetic:
        yield warning(
            "synthetic_source",
            "exported from a generated (synthetic) trajectory: imported as synthetic",
        )
    meta = {"task": task, "turn_idx": d.get("turn_idx")}
    if ours and ours.get("trajectory_id") is not None:
        meta["exported_from"] = ours["trajectory_id"]
    system = d.get("system_str") or None
    if mine is not None:  # what the record held, as export wrote it (`awb_provenance`)
        parts = {**mine["system"], "instruction": mine["instruction"]}
        parts["conditions"] = mine["conditions"]
    elif ours is not None and system:  # an export of before 12-06: `system_str` parsed back
        parts = _ours(system, dom, pairs, path)
    else:
        parts = None
    t = build(
        NAME,
        record_id(d, "id") or origin,
        dom,
        pairs,
        task_description=parts.get("task_description") if parts else system,
        instruction=parts.get("instruction") if parts else None,
        metadata=meta,
        outcome=mine["outcome"] if mine is not None else None,
        source_kind=F.SYNTHETIC if synthetic else (mine or {}).get("source_kind") or "import",
    )
    for turn, perturbation in zip(t.turns, perturbations, strict=False):
        turn.perturbation = perturbation
    if parts:
        t.system.action_space = parts.get("action_space")
        t.system.initial_state = parts.get("initial_state")
        t.system.demonstrations = parts.get("demonstrations")
        t.system.simulation_instruction = parts.get("simulation_instruction")
        t.conditions = parts.get("conditions")
    yield t


def _as_recorded(ours: dict[str, Any], turns: int) -> dict[str, Any] | None:
    """What an exported line's `worldtrace` key holds of its record
    (`pipelines.writers.awb_provenance`): each turn's action kind, the system prompt's
    parts, the task instruction and the conditions; since 12-07 each turn's other fields,
    the outcome and the source kind (None each in a line written before); None for a line
    of an export before 12-06, which held only the trajectory and `synthetic`. A value of
    another shape is refused, naming it."""
    if "system" not in ours and "kinds" not in ours:
        return None
    key = F.AWB_PROVENANCE
    kinds, system = ours.get("kinds"), ours.get("system")
    if not isinstance(kinds, list) or len(kinds) != turns:
        raise expected(f"{key}.kinds", f"a list of {turns} action kinds, one a prompt", kinds)
    for i, k in enumerate(kinds):
        if k not in F.ACTION_KINDS:
            raise expected(f"{key}.kinds[{i}]", f"an action kind ({', '.join(F.ACTION_KINDS)})", k)
    if not isinstance(system, dict):
        raise expected(f"{key}.system", "an object of the system prompt's parts", system)
    for name, value in system.items():
        if name not in F.SYSTEM_FIELDS:
            raise expected(f"{key}.system", f"parts of {', '.join(F.SYSTEM_FIELDS)}", name)
        if not isinstance(value, str):
            raise expected(f"{key}.system.{name}", "a string", value)
    for name in ("instruction", "conditions"):
        if ours.get(name) is not None and not isinstance(ours[name], str):
            raise expected(f"{key}.{name}", "a string", ours[name])
    source = ours.get("source_kind")
    if source is not None and source not in SOURCE_KINDS:
        raise expected(f"{key}.source_kind", f"a source kind ({', '.join(SOURCE_KINDS)})", source)
    return {"kinds": kinds, "system": system, "instruction": ours.get("instruction"),
            "conditions": ours.get("conditions"), "turns": _turn_fields(ours, turns),
            "outcome": _outcome(ours), "source_kind": source}  # fmt: skip


SOURCE_KINDS = ("collector", "import")
"""The `worldtrace.source_kind` a line may give (a generated record's says `synthetic`)."""
CARRIED = {
    **{f.name: (Action, f) for f in fields_of(Action) if f.name not in ("kind", "text")},
    **{f.name: (Observation, f) for f in fields_of(Observation) if f.name != "text"},
    "perturbation": (Turn, next(f for f in fields_of(Turn) if f.name == "perturbation")),
}
"""The fields a `worldtrace.turns` entry may hold (`pipelines.writers.awb_turn`), by
name: the record class that declares each, and its declaration."""


def _turn_fields(ours: dict[str, Any], turns: int) -> list[dict[str, Any]] | None:
    """Each turn's fields beyond the texts and kind (`worldtrace.turns`, since 12-07),
    each checked against its declaration; None for a line written before."""
    entries = ours.get("turns")
    if entries is None:
        return None
    at = f"{F.AWB_PROVENANCE}.turns"
    if not isinstance(entries, list) or len(entries) != turns:
        raise expected(at, f"a list of {turns} objects, one a prompt", entries)
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise expected(f"{at}[{i}]", "an object of the turn's fields", entry)
        for name, value in entry.items():
            if name not in CARRIED:
                raise expected(f"{at}[{i}]", f"fields of {', '.join(CARRIED)}", name)
            _check(f"{at}[{i}].{name}", CARRIED[name][1], value)
    return entries


def _outcome(ours: dict[str, Any]) -> Outcome | None:
    """The record's outcome (`worldtrace.outcome`, its fields not their default), checked
    against the declaration; None when the line has none (the default outcome)."""
    value = ours.get("outcome")
    if value is None:
        return None
    at = f"{F.AWB_PROVENANCE}.outcome"
    if not isinstance(value, dict):
        raise expected(at, "an object of the outcome's fields", value)
    declared = {f.name: f for f in fields_of(Outcome)}
    for name, v in value.items():
        if name not in declared:
            raise expected(at, f"fields of {', '.join(declared)}", name)
        _check(f"{at}.{name}", declared[name], v)
    return Outcome(**value)


TYPES = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}
"""The JSON values a field of each kind takes (a bool is no number)."""


def _check(at: str, f: Any, value: Any) -> None:
    """`value` is what field `f` declares (null where it may be; a JSON field's text a
    JSON value of its type; an enum one of its values), else refused naming `at`."""
    what = f"{'an' if f.kind[0] in 'aeiou' else 'a'} {f.kind}"
    if value is None:
        if not f.optional:
            raise expected(at, f"{what}, not null", value)
        return
    kinds = TYPES.get(f.kind, (object,))
    if not isinstance(value, kinds) or (f.kind != "bool" and isinstance(value, bool)):
        raise expected(at, what, value)
    if f.spec.enum and value not in f.spec.enum:
        raise expected(at, f"one of {', '.join(f.spec.enum)}", value)
    if f.spec.json is not None and (why := json_problem(value, f.spec.json)) is not None:
        raise expected(
            at, f"JSON text of {'an object' if f.spec.json is dict else 'a list'} ({why})", value
        )


def _turn(kind: str, prompt: str, response: str, entry: dict[str, Any]) -> tuple:
    """The turn a line's prompt and response are, with its carried fields (`entry`): the
    arguments, when not carried, those the text gives back (`_arguments`)."""
    action = {n: entry[n] for n in CARRIED if CARRIED[n][0] is Action and n in entry}
    if "arguments_json" not in action:
        action["arguments_json"] = _arguments(kind, prompt, action.get("name"))
    seen = {n: entry[n] for n in CARRIED if CARRIED[n][0] is Observation and n in entry}
    return Action(kind, prompt, **action), Observation(response, **seen), None


_arguments = rendered_arguments
"""The arguments an action's text gives back, as export left them out."""


def _action(kind: str, text: str) -> Action:
    """The action of `kind` the prompt `text` renders: a tool call (or a GUI action
    rendered as one) with its name and arguments again; else the text."""
    call = _rendered_call(text) if kind in ("tool_call", "gui") else None
    if call is None:
        return Action(kind, text)
    return call if kind == "tool_call" else dataclasses.replace(call, kind=kind)


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(i) is int for i in value)


def parse_record(
    d: Any, origin: str, domain: str | None = None, path: Path | None = None
) -> Iterator[Any]:
    """`path`: the file the line is in (the manifest of worldtrace's export beside it
    tells the instruction export added, `_ours`)."""
    yield from to_trajectory(d, origin, domain, path)


# -- worldtrace's own export, read back ----------------------------------------------------

HEADERS = (
    ("action_space", "# Action space"),
    ("initial_state", "# Initial state"),
    ("demonstrations", "# Demonstrations"),
    ("conditions", "# Conditions"),
    ("simulation_instruction", "# Simulation instruction"),
)
"""The parts export writes after the task description, in order, under these headers
(`pipelines.prompt.HEADERS`, which this package may not import: a test holds them equal)."""
CONDITIONS_INTRO = (
    "The environment runs under these conditions; every observation must agree with them:"
)
"""The line before the conditions (`pipelines.prompt.CONDITIONS_INTRO`)."""
TEXT_KIND = "text"


def _rendered_call(text: str) -> Action | None:
    """The tool call `text` is when it is one exactly as worldtrace renders a call
    (`name(<sorted JSON arguments>)`, `schemas.actions.tool_call`); else None."""
    name, paren, rest = text.partition("(")
    if not paren or not name or name != name.strip() or any(c.isspace() for c in name):
        return None
    if not (rest.startswith("{") and rest.endswith("})")):
        return None
    try:
        args = parse_json(rest[:-1])
        action = tool_call(name, args) if isinstance(args, dict) else None
    except ValueError:  # not JSON, too deep, a NaN
        return None
    return action if action is not None and action.text == text else None


def _ours(
    system: str, domain: str, pairs: list[Any], path: Path | None
) -> dict[str, str | None] | None:
    """The system prompt parts of an exported line's `system_str`, as the record held
    them: each part export wrote under its header (`HEADERS`) in its field; a part that
    no value of its field shows so (an action space not written as tools, demonstrations
    no JSON list) stays in the task description with what precedes it, as it was shown,
    so that the export composes the same text again. The simulation instruction is the
    record's own only where it is not the one worldtrace added (`_own_instruction`).
    None when the text has no part but the task description."""
    found: dict[str, str] = {}
    rest = system
    for name, header in reversed(HEADERS):
        mark = f"\n\n{header}\n"
        at = rest.rfind(mark)
        if at > 0:
            found[name], rest = rest[at + len(mark) :], rest[:at]
        elif rest.startswith(header + "\n"):
            found[name], rest = rest[len(header) + 1 :], ""
            break
    if not found:
        return None
    values: dict[str, str | None] = {"instruction": rest or None}  # the task, as the record had it
    shown = [rest] if rest else []  # the task description, and the parts held in it
    for name, header in HEADERS[:-1]:
        if name not in found:
            continue
        value = _field(name, found[name])
        shown.append(f"{header}\n{found[name]}")
        if value is None:  # it and the parts before it: in the task description, as shown
            values, rest = {"instruction": values["instruction"]}, "\n\n".join(shown)
        else:
            values[name] = value
    values["task_description"] = rest or None
    if "simulation_instruction" in found:
        kinds = {a.kind for a, _, _ in pairs}
        talks = TEXT_KIND in kinds and bool(kinds - {TEXT_KIND})
        exported = _instructions(path.parent / "manifest.json") if path is not None else None
        values["simulation_instruction"] = _own_instruction(
            found["simulation_instruction"], talks, exported.of(domain) if exported else None
        )
    return values


def _field(name: str, text: str) -> str | None:
    """A part's text as its field holds it, so that export shows the same text; None
    when no value of the field is shown so."""
    if not text or (text != text.strip() and name != "initial_state"):
        return None
    if name == "initial_state":
        return text
    if name == "demonstrations":
        try:
            value = parse_json(text)
        except ValueError:
            return None
        return text if isinstance(value, list) else None
    if name == "conditions":
        body = text.removeprefix(CONDITIONS_INTRO + "\n")
        if body == text or not body.startswith("- "):
            return None
        items = body[2:].split("\n- ")
        return json.dumps(items, ensure_ascii=False) if all(items) else None
    # the action space: `## name` and what follows, per tool
    if not text.startswith("## "):
        return None
    tools = []
    for block in text[3:].split("\n\n## "):
        tool_name, _, description = block.partition("\n")
        if not tool_name or tool_name != tool_name.strip() or description != description.strip():
            return None
        tools.append({"name": tool_name, "description": description} if description else {"name": tool_name})  # fmt: skip
    return json.dumps(tools, ensure_ascii=False, sort_keys=True)


def _own_instruction(
    text: str, talks: bool, exported: tuple[str | None, str | None] | None
) -> str | None:
    """The record's own simulation instruction in the one export wrote (`text`): None when
    it is worldtrace's instruction for the domain (and, when the agent talks to its user,
    the one for those turns after it: `pipelines.prompt.SystemPrompt.simulation`), told by
    the sha256 of each in the export's manifest (`exported`); what follows worldtrace's
    when it is followed by the record's own. Without the manifest, the text itself."""
    if exported is None:
        return text
    mine, turns = exported
    if not talks:
        return None if _sha(text) == mine else text
    for at in _breaks(text):
        if _sha(text[:at]) != mine:
            continue
        rest = text[at + 2 :]
        if _sha(rest) == turns:
            return None
        for cut in _breaks(rest):
            if _sha(rest[:cut]) == turns:
                return rest[cut + 2 :] or None
    return text


def _breaks(text: str) -> Iterator[int]:
    """Each place of a blank line ("\\n\\n") in `text`, where export joins parts."""
    at = text.find("\n\n")
    while at >= 0:
        yield at
        at = text.find("\n\n", at + 1)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


MANIFEST_BYTES = 1 << 20


@file_cached  # read once while the file is unchanged: every line of the export asks
def _instructions(manifest: Path) -> _Exported | None:
    """The sha256 of the instructions an AgentWorldBench export added, from its manifest;
    None (False: no such file) when it is not an AgentWorldBench export's."""
    try:
        if manifest.stat().st_size > MANIFEST_BYTES:
            return None
        data = parse_json(manifest.read_bytes().decode())
    except (OSError, ValueError):  # not UTF-8, not JSON: not ours
        return None
    described = data.get("simulation_instructions") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != NAME or not isinstance(described, dict):
        return None
    by_domain = described.get("sha256")
    turns = described.get("text_turns_sha256")
    if not isinstance(by_domain, dict):
        return None
    return _Exported(by_domain, turns if isinstance(turns, str) else None)


class _Exported:
    """The sha256 of the instructions an export added, by domain."""

    def __init__(self, by_domain: dict[str, Any], turns: str | None):
        self.by_domain, self.turns = by_domain, turns

    def of(self, domain: str) -> tuple[str | None, str | None]:
        mine = self.by_domain.get(domain)
        return (mine if isinstance(mine, str) else None, self.turns)
