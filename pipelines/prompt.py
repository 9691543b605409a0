"""The world-model system prompt: the report's five parts, composed for every record.

task description + action space + initial state + demonstrations + simulation
instruction (DESIGN.md "Training shards"). The action space is rendered readably from
its JSON-Schema tool list; a record without a simulation instruction gets its domain's
(worldtrace's own texts in `prompts/<domain>.md`, overridable by a user's file), followed,
when the agent also talks to its user (`text` actions beside tool calls: an imported
customer-service chat), by the instruction for those turns (`prompts/text.md`); the
trajectory's sampled `conditions`, when it has any, are stated before the instruction.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldtrace.schemas import fields as F
from worldtrace.schemas.text import read_utf8

PROMPTS_DIR = Path(__file__).with_name("prompts")
CONDITIONS = "conditions"
"""Nullable JSON list on the trajectory record: the conditions an episode was run under."""
HEADERS = {
    "action_space": "# Action space",
    "initial_state": "# Initial state",
    "demonstrations": "# Demonstrations",
    CONDITIONS: "# Conditions",
    "simulation_instruction": "# Simulation instruction",
}
CONDITIONS_INTRO = (
    "The environment runs under these conditions; every observation must agree with them:"
)
TRIM_MARK = "\n[system prompt truncated]"
TEXT_TURNS = "text"
"""Key (and file `prompts/text.md`) of the instruction for turns in which the agent talks to
its user: every domain's instruction says each user message is an action on the
environment, which such a turn is not. Overridable like a domain's."""
TEXT_KIND = "text"
"""`action.kind` of a message the agent says to its user (importers' `message_action`)."""


# -- simulation instructions -----------------------------------------------------------
def builtin_instructions() -> dict[str, str]:
    """worldtrace's simulation instruction per domain (package data)."""
    return {d: (PROMPTS_DIR / f"{d}.md").read_text().strip() for d in F.DOMAINS}


@functools.lru_cache(maxsize=1)
def builtin_text_turns() -> str:
    """worldtrace's instruction for turns in which the agent talks to its user."""
    return (PROMPTS_DIR / f"{TEXT_TURNS}.md").read_text().strip()


WHAT = "simulation_instructions"
"""How a file of simulation instructions is named in an error."""


def load_instructions(path: str | None) -> dict[str, str]:
    """The built-in instructions, overridden per domain by `path`: a YAML or JSON file
    mapping domain -> text, or a directory of `<domain>.md` files; the key `text`
    (`text.md`) replaces the instruction for turns in which the agent talks to its user."""
    texts = builtin_instructions()
    if not path:
        return texts
    p = Path(path)
    if p.is_dir():
        files = {f.stem: (f, read_utf8(f, WHAT)) for f in sorted(p.glob("*.md"))}
        if not files:
            raise ValueError(f"{p}: simulation_instructions: no <domain>.md files in the directory")
        for f, text in files.values():
            refuse_secrets(f, text, "simulation instructions")
        user = {stem: text for stem, (_, text) in files.items()}
    elif p.is_file():
        import yaml

        source = read_utf8(p, WHAT)
        refuse_secrets(p, source, "simulation instructions")
        try:
            user = yaml.safe_load(source)  # YAML is a superset of JSON
        except yaml.YAMLError as exc:
            from worldtrace.schemas.config import yaml_problem

            why = yaml_problem(exc)
            raise ValueError(f"{p}: simulation_instructions: not YAML or JSON ({why})") from None
        if not isinstance(user, dict):
            raise ValueError(f"{p}: simulation_instructions: expected a mapping domain -> text")
    else:
        raise FileNotFoundError(f"simulation_instructions: {p} is neither a file nor a directory")
    for domain, text in user.items():
        if domain not in F.DOMAINS and domain != TEXT_TURNS:
            raise ValueError(
                f"{p}: simulation_instructions.{domain}: unknown domain (one of "
                f"{', '.join(F.DOMAINS)}; or {TEXT_TURNS}: the turns where the agent talks to its user)"
            )
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{p}: simulation_instructions.{domain}: expected non-empty text")
        if p.is_file():  # a value YAML decoded (`\u0067hp_...`) is not the file's text
            refuse_secrets(p, text, "simulation instructions", f"simulation_instructions.{domain}")
        texts[domain] = text.strip()
    return texts


def refuse_secrets(path: Path, text: str, what: str, where: str | None = None) -> None:
    """Raise ValueError naming `path`, the line (or `where`, a key) and the kind of every
    secret the redaction rules find in `text` (`Redactor.spans`, as `worldtrace redact
    --check` reads a file): export writes such user text (simulation instructions, a Jinja
    template) into every sample, past every boundary that redacts records, so a file
    holding a secret is refused when it is loaded, once, rather than redacted."""
    from worldtrace.schemas.redact import redactor

    spans = redactor().spans(text)
    if not spans:
        return
    if where is None:
        lines = [text.count("\n", 0, start) + 1 for start, _, _ in spans]
        found = [f"line {n}: {kind}" for n, (_, _, kind) in zip(lines, spans, strict=True)]
    else:
        found = [f"{where}: {kind}" for _, _, kind in spans]
    raise ValueError(
        f"{path}: {found[0]}"
        + (f" (and {len(found) - 1} more: {'; '.join(found[1:])})" if len(found) > 1 else "")
        + f": a secret in the {what}, which export writes into every sample; take it out "
        "(`worldtrace redact --check FILE` lists what the rules find)"
    )


# -- action space ----------------------------------------------------------------------
def action_space_text(raw: Any) -> str:
    """A JSON tool list (`[{name, description, input_schema}]`, or the older
    `{name, description, parameters}` / OpenAI `{"function": ...}` shapes) as readable
    text; anything else as it is."""
    if not raw:
        return ""
    if isinstance(raw, str):
        return _action_space_json(raw)
    return _action_space(raw)


@functools.lru_cache(maxsize=4096)
def _action_space_json(raw: str) -> str:
    """Cached: most records of a corpus share a handful of action spaces."""
    try:
        space = json.loads(raw)
    except json.JSONDecodeError:
        return raw.strip()
    return _action_space(space)


def _action_space(space: Any) -> str:
    if isinstance(space, dict):
        space = [space]
    if not isinstance(space, list):
        return json.dumps(space, ensure_ascii=False, indent=2)
    return "\n\n".join(_tool_text(t) for t in space)


def _tool_text(tool: Any) -> str:
    if not isinstance(tool, Mapping):
        return f"## {tool}" if isinstance(tool, str) else json.dumps(tool, ensure_ascii=False)
    fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    lines = [f"## {fn.get('name') or '(unnamed)'}"]
    if fn.get("description"):
        lines.append(str(fn["description"]).strip())
    schema = fn.get("input_schema") or fn.get("inputSchema") or fn.get("parameters")
    if schema is None:
        return "\n".join(lines)
    args = list(_arguments(schema))
    lines.append("Arguments:" if args else "Arguments: none")
    lines.extend(args)
    lines.extend(_alternatives(schema))
    return "\n".join(lines)


def _arguments(schema: Any) -> Iterable[str]:
    """One line per argument: `- name (type, required): description [details]`."""
    if isinstance(schema, list):  # [{name, type, description}] or [name, ...]
        for p in schema:
            if isinstance(p, Mapping):
                yield _argument(str(p.get("name", "?")), p, bool(p.get("required")))
            else:
                yield f"- {p}"
        return
    if not isinstance(schema, Mapping):
        yield f"- {schema}"
        return
    if any(k in schema for k in ("properties", "type", "$schema", "anyOf", "oneOf")):
        props = schema.get("properties") or {}
    else:  # an older {name: spec} mapping
        props = schema
    required = set(schema.get("required") or ())
    for name, spec in props.items():
        spec = spec if isinstance(spec, Mapping) else {"description": str(spec)}
        yield _argument(name, spec, name in required)


def _alternatives(schema: Any) -> Iterable[str]:
    """The schema's `anyOf` / `oneOf` of required sets (a node, or x and y) as one line:
    no argument is required alone, so the argument lines cannot say it."""
    if not isinstance(schema, Mapping):
        return
    for key, how in (("anyOf", "Required: "), ("oneOf", "Required: exactly one of ")):
        options = schema.get(key)
        if not isinstance(options, list):
            continue
        sets = [o.get("required") for o in options if isinstance(o, Mapping)]
        if not sets or not all(isinstance(r, list) and r for r in sets):
            continue  # alternatives of other shapes: their types are the arguments'
        yield how + ", or ".join(" and ".join(map(str, r)) for r in sets) + "."


def _argument(name: str, spec: Mapping[str, Any], required: bool) -> str:
    kind = _type(spec)
    head = f"- {name} ({kind}{', required' if required else ''})"
    extra = []
    if "enum" in spec:
        extra.append("one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"]))
    if "const" in spec:
        extra.append(f"always {json.dumps(spec['const'], ensure_ascii=False)}")
    bounds = _bounds(spec)
    if bounds:
        extra.append(bounds)
    if "default" in spec:
        extra.append(f"default {json.dumps(spec['default'], ensure_ascii=False)}")
    desc = str(spec.get("description") or "").strip()
    tail = "; ".join([desc, *extra] if desc else extra)
    return f"{head}: {tail}" if tail else head


BOUNDS = (
    ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", ""),
    ("minLength", "maxLength", None, None, " characters"),
    ("minItems", "maxItems", None, None, " items"),
)
"""JSON Schema's limits: inclusive low and high, exclusive low and high, and the unit."""


def _bounds(spec: Mapping[str, Any]) -> str:
    """A number's range (`0 to 30`, `at least 1`, `over 0 and at most 1`), a text's or a
    list's length (`1 to 64 characters`)."""

    def num(key: str | None) -> str | None:
        v = spec.get(key) if key else None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        return json.dumps(v) if ok else None

    said = []
    for low, high, over, under, unit in BOUNDS:
        lo, hi = num(low), num(high)
        if lo is not None and hi is not None:
            said.append(f"{lo} to {hi}{unit}")
            continue
        sides = [f"at least {lo}"] if lo is not None else []
        sides += [f"over {num(over)}"] if lo is None and num(over) is not None else []
        sides += [f"at most {hi}"] if hi is not None else []
        sides += [f"under {num(under)}"] if hi is None and num(under) is not None else []
        if sides:
            said.append(" and ".join(sides) + unit)
    return "; ".join(said)


def _type(spec: Mapping[str, Any]) -> str:
    t = spec.get("type")
    if isinstance(t, list):
        return " | ".join(map(str, t))
    if t == "array" and isinstance(spec.get("items"), Mapping):
        return f"array of {_type(spec['items'])}"
    if t:
        return str(t)
    for key in ("anyOf", "oneOf"):
        if isinstance(spec.get(key), list):
            return " | ".join(_type(s) for s in spec[key] if isinstance(s, Mapping))
    values = spec["enum"] if isinstance(spec.get("enum"), list) else None
    if "const" in spec:
        values = [spec["const"]]
    if values:  # an enum without a type: the type of its values
        return " | ".join(dict.fromkeys(_json_type(v) for v in values))
    return "any"


def _json_type(value: Any) -> str:
    """JSON Schema's name for the type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# -- conditions ------------------------------------------------------------------------
def conditions_text(raw: Any) -> str:
    """The record's conditions (a JSON list, or an Arrow list) as a bullet list."""
    if raw is None or raw == "":
        return ""
    items = raw
    if isinstance(raw, str):
        try:
            items = json.loads(raw)
        except json.JSONDecodeError:
            items = [raw]
    if isinstance(items, Mapping) or not isinstance(items, list):
        items = [items]
    lines = [f"- {_condition(c)}" for c in items if c not in (None, "", {})]
    return "\n".join([CONDITIONS_INTRO, *lines]) if lines else ""


def _condition(c: Any) -> str:
    if isinstance(c, Mapping):
        text = c.get("text") or c.get("description")
        if isinstance(text, str) and text:
            return text
        return ", ".join(f"{k}: {_scalar(v)}" for k, v in c.items())
    return _scalar(c)


def _scalar(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)


# -- composition -----------------------------------------------------------------------
@dataclass(frozen=True)
class SystemPrompt:
    """Composes the system prompt of a record; `instructions` fill an empty simulation
    instruction by domain (and `TEXT_TURNS`, when given, replaces `prompts/text.md`)."""

    instructions: Mapping[str, str] = field(default_factory=builtin_instructions)

    def instruction(self, rec: Mapping[str, Any]) -> str:
        """worldtrace's simulation instruction for a record: its domain's, and when the
        agent also talks to its user (`talks_to_user`), the instruction for those turns
        after it, which says the domain's rules do not apply to them (a tau-bench chat
        imported as `mcp` was told every message is a tool call answered by a server)."""
        text = self.instructions.get(rec.get(F.DOMAIN), "")
        if not talks_to_user(rec):
            return text
        extra = self.instructions.get(TEXT_TURNS) or builtin_text_turns()
        return f"{text}\n\n{extra}" if text else extra

    def simulation(self, rec: Mapping[str, Any], own: str | None) -> str:
        """The simulation instruction of a record: its own (`system.simulation_instruction`)
        in place of worldtrace's; when the agent talks to its user, after worldtrace's,
        since a record's own is then the simulated user's script (tau-bench's
        `info.task.instruction`), which says nothing of how the tools answer."""
        if not own:
            return self.instruction(rec)
        return f"{self.instruction(rec)}\n\n{own}" if talks_to_user(rec) else own

    @classmethod
    def from_file(cls, path: str | None) -> SystemPrompt:
        return cls(load_instructions(path))

    def parts(self, rec: Mapping[str, Any], drop: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(part name, text) in prompt order, empty parts left out."""
        system = rec.get(F.SYSTEM) or {}
        values = {
            "task_description": (system.get("task_description") or "").strip(),
            "action_space": action_space_text(system.get("action_space")),
            "initial_state": system.get("initial_state") or "",
            "demonstrations": system.get("demonstrations") or "",
            CONDITIONS: conditions_text(rec.get(CONDITIONS)),
            "simulation_instruction": self.simulation(rec, system.get("simulation_instruction")),
        }
        skip = set(drop)
        return [(k, v) for k, v in values.items() if v and k not in skip]

    def text(self, rec: Mapping[str, Any], drop: Iterable[str] = ()) -> str:
        return join(self.parts(rec, drop))

    def describe(self, source: str | None) -> dict[str, Any]:
        """For the manifest: where the instructions came from and the sha256 of each
        domain's, and of the instruction for turns in which the agent talks to its user."""
        text_turns = self.instructions.get(TEXT_TURNS) or builtin_text_turns()
        return {
            "source": source or "builtin",
            "sha256": {
                d: hashlib.sha256(t.encode()).hexdigest()
                for d, t in sorted(self.instructions.items())
                if d != TEXT_TURNS
            },
            "text_turns_sha256": hashlib.sha256(text_turns.encode()).hexdigest(),
        }


def talks_to_user(rec: Mapping[str, Any]) -> bool:
    """Whether the agent both acts on the environment and talks to its user: a `text`
    action beside an action of another kind (a tool call, a command). Only then is `text`
    known to be a message to the user: it is also the kind of an action whose kind an
    import does not know (AgentWorldBench's JSONL makes every non-terminal action `text`)
    and the schema's default. A record read without `action.kind` has no kind known."""
    kinds = {(t.get("action") or {}).get("kind") for t in rec.get(F.TURNS) or ()}
    return TEXT_KIND in kinds and bool(kinds - {TEXT_KIND, None})


def join(parts: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"{HEADERS[k]}\n{v}" if k in HEADERS else v for k, v in parts)


def trimmed(parts: list[tuple[str, str]], keep_chars: int) -> str:
    """The prompt cut to about `keep_chars` characters, marked; the simulation instruction
    is kept whole when it fits, since it says what to predict."""
    last = parts[-1] if parts and parts[-1][0] == "simulation_instruction" else None
    tail = join([last]) if last else ""
    if last and len(tail) + len(TRIM_MARK) + 2 < keep_chars:
        head = join(parts[:-1])
        cut = max(0, keep_chars - len(tail) - len(TRIM_MARK) - 2)
        return head[:cut] + TRIM_MARK + "\n\n" + tail
    return join(parts)[: max(0, keep_chars - len(TRIM_MARK))] + TRIM_MARK
