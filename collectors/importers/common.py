"""Shared pieces of the importers: results, domain guessing, building records."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from worldtrace.sandboxes.base import ToolSpec
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
from worldtrace.schemas import fields as F
from worldtrace.schemas.actions import arguments_of
from worldtrace.schemas.redact import redactor
from worldtrace.schemas.validate import (
    TooDeep,
    finite_json_float,
    no_json_constant,
    parse_json,
    too_deep,
)

from ..actions import tool

SUFFIXES = (".traj.json", ".trajectory.json", ".traj", ".jsonl", ".json")


@dataclass(frozen=True)
class ImportProblem:
    """A record (or line) that could not be imported, or a warning about one that was."""

    path: str
    where: str
    """`line N`, `record N`, or "" for the whole file."""
    kind: str
    """Errors: invalid_json, invalid_utf8, compressed, empty_file, unreadable,
    unrecognized, missing_field, empty, invalid, too_deep, options_differ,
    read_by_process. Warnings: record_changed, labels_changed, unknown_version,
    unpaired_call, unpaired_result, repeated_call_id, non_text_part, truncated_observation,
    message_not_imported, subagent_not_imported, not_run, harness_failure, missing_event,
    lone_surrogate, unknown_status."""
    message: str
    fatal: bool = True

    def __post_init__(self) -> None:
        # security: a message may quote what it could not import (an exception's text)
        object.__setattr__(self, "message", redactor().text(self.message)[0])
        object.__setattr__(self, "path", path_text(self.path))  # named as origin_path is

    def at(self, path: str, where: str) -> ImportProblem:
        """This problem located in `path` at `where` (parsers of one record know neither)."""
        return dataclasses.replace(self, path=self.path or path, where=self.where or where)

    def __str__(self) -> str:
        loc = f"{self.path}:{self.where}" if self.where else self.path
        return f"{loc}: {self.kind}: {self.message}"


class MissingField(ValueError):
    """Raised by a parser when a record lacks a field it cannot do without."""


class InvalidField(ValueError):
    """Raised by a parser when a field holds what the format does not allow (a number
    where arguments go, a string where a list goes); the message starts with the field's
    path in the record, e.g. `messages[2].tool_calls[0].function.arguments: ...`. The
    record is not imported (error kind `invalid`): nothing is coerced into a shape it
    did not have."""


def shown(value: Any, limit: int = 60) -> str:
    """A value as the JSON it was written as, for a problem: secrets replaced as in the
    shards (the problem goes to stderr and logs), cut to about `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # circular or too deep: the type will do
        text = type(value).__name__
    text = redactor().text(text[: 4 * limit])[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_text(value: Any) -> str:
    """A value cut out of JSON text the source wrote (a tool's answer inside a message) as
    JSON text again, as near as it was written: its keys in their order, its characters
    as they are (never `\\u00fc`)."""
    return json.dumps(value, ensure_ascii=False)


def expected(field: str, what: str, value: Any) -> InvalidField:
    """`field: expected WHAT, got <the value as written>`."""
    return InvalidField(f"{field}: expected {what}, got {shown(value)}")


def null_or_missing(holder: dict[str, Any], key: str, at: str, name: str | None = None) -> str:
    """An answer that is not there as the file has it: `at.key: null` when it wrote null,
    `at: no `key`` when it left the key out (a problem never says null of a missing key).
    `name`: the key as the file names it, when `holder` is a message made of another shape
    (an OpenAI `tool` message of a Responses API item's `output`)."""
    name = name or key
    return f"{at}.{name}: null" if key in holder else f"{at}: no `{name}`"


def record_id(rec: dict[str, Any], key: str) -> str | None:
    """An id field as written (a string, or a number's JSON); anything else is the record's
    error (InvalidField): its Python rendering (`['x']`) would name the record."""
    value = rec.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)
    raise expected(key, "a string or a number", value)


FIELD_PARTS = 8
"""The most keys and indices a too-deep problem names of the way down to the nesting."""

Place = list[str | int]
"""A place in a record: its keys and list indices from the top."""


def deep_field(path: Place) -> str:
    """The field that holds deep nesting, named as problems name fields
    (`messages[1].tool_calls[0].function.arguments.x`): `path` down to its last key
    (below it the indices are the nesting itself), at most FIELD_PARTS parts."""
    keys = [k for k, part in enumerate(path) if isinstance(part, str)]
    named = path[: keys[-1] + 1] if keys else []
    name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in named[:FIELD_PARTS])
    return name.removeprefix(".") + ("..." if len(named) > FIELD_PARTS else "")


def deepest_field(value: Any) -> tuple[str, int]:
    """(`deep_field`, depth) of the deepest nesting of a parsed record (dataclasses read
    as objects), level by level: no recursion, the walk a too-deep value needs."""
    depth, path, level = 0, [], [([], value)]
    while opened := [(p, items) for p, x in level if (items := _items(x)) is not None]:
        depth, path = depth + 1, opened[0][0]
        level = [([*p, k], v) for p, items in opened for k, v in items]
    return deep_field(path), depth


def _items(x: Any) -> list[tuple[str | int, Any]] | None:
    """The (key or index, value) pairs of an object, list or dataclass; None for a leaf."""
    if isinstance(x, dict):
        return [(str(k), v) for k, v in x.items()]
    if isinstance(x, list | tuple):
        return list(enumerate(x))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f.name, getattr(x, f.name)) for f in dataclasses.fields(x)]
    return None


def too_deep_to_convert(record: Any) -> str:
    """The problem of a record whose conversion ran out of stack: the field nested
    deepest and how deep (`deepest_field`)."""
    field, depth = deepest_field(record)
    return f"{field or 'the record'}: nested {depth} levels deep, too deep to convert"


def json_in(text: str, field: str, **options: Any) -> Any:
    """JSON text a record holds in `field` (tools, a tool's schema, a step's state, a call)
    read as `validate` and `process` would read it: under the one depth limit
    (`validate.parse_json`), from any stack. Deeper is the record's error naming the field
    and the depth (InvalidField, never a JSONDecodeError: not "not JSON", and no fallback
    that keeps it as text); else what `json.loads(text, **options)` returns or raises."""
    try:
        return parse_json(text, **options)
    except TooDeep as exc:
        raise InvalidField(f"{field}: {exc}") from None


def tool_list(tools: Any, field: str = "tools") -> list[Any] | None:
    """Declared tools: a list, or a JSON string holding one (as datasets store them);
    none or a blank string: None. Anything else is the record's error (InvalidField):
    dropping it would leave the action space silently empty."""
    if tools is None or (isinstance(tools, str) and not tools.strip()):
        return None
    if isinstance(tools, str):
        try:
            parsed = json_in(tools, field)
        except json.JSONDecodeError:
            parsed = None
        tools = parsed if isinstance(parsed, list) else tools
    if not isinstance(tools, list):
        raise expected(field, "a list (or a JSON string holding one)", tools)
    return tools


def warning(kind: str, message: str) -> ImportProblem:
    """A warning from a record parser; the import loop fills in the file and line."""
    return ImportProblem("", "", kind, message, fatal=False)


def file_warning(path: Path, where: str, kind: str, message: str) -> ImportProblem:
    """A warning located in `path` at `where` (parsers that read a file whole)."""
    return ImportProblem(str(path), where, kind, message, fatal=False)


@dataclass(frozen=True)
class Document:
    """The registry's entry (`FILE_FORMATS`) for a session format that is also written as
    one JSON document (Gemini CLI before v0.40, the TypeScript codex-cli): detected and
    read on the parsed file, as the whole-file formats are, with the domain asked for."""

    NAME: str
    detect: Callable[[Path, Any], bool]
    parse: Callable[..., Iterator[Any]]


_T = TypeVar("_T")


def file_cached(check: Callable[[Path], _T]) -> Callable[[Path], _T | bool]:
    """`check(path)` remembered while the file is unchanged (path, mtime, size): a sniff
    or a test that every file of a directory asks of the same file, or what a file beside
    every record says (an export's manifest). False for a file that cannot be read."""

    @functools.lru_cache(maxsize=1024)
    def cached(path: str, mtime_ns: int, size: int) -> _T:
        return check(Path(path))

    @functools.wraps(check)
    def call(path: Path) -> _T | bool:
        try:
            st = path.stat()
        except OSError:
            return False
        return cached(str(path), st.st_mtime_ns, st.st_size)

    return call


@functools.lru_cache(maxsize=64)
def _numbered(directory: str, stamp: int, pattern: re.Pattern[str]) -> tuple[tuple[int, str], ...]:
    try:
        names = os.listdir(directory)
    except OSError:
        return ()
    return tuple(sorted((int(m[1]), n) for n in names if (m := pattern.fullmatch(n))))


def numbered_files(
    directory: Path, pattern: re.Pattern[str], fresh: bool = False
) -> Iterator[tuple[int, Path]]:
    """(number, file) of the files in `directory` whose names `pattern` matches whole, its
    first group the number, in number order (10 after 9; then by name). The listing is
    kept while the directory is unchanged, as every file of a session asks for it
    (`fresh`: listed again)."""
    try:
        stamp = directory.stat().st_mtime_ns
    except OSError:
        return
    listed = _numbered.__wrapped__ if fresh else _numbered
    for n, name in listed(str(directory), stamp, pattern):
        yield n, directory / name


def first_line(text: str, limit: int = 100) -> str:
    """The first line of a harness's answer, for a warning (cut past `limit`)."""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def line_list(ns: list[int]) -> str:
    """`line 4`, `lines 4-9`, `lines 4, 7, 12 and 3 more`."""
    ns = sorted(ns)
    if len(ns) == 1:
        return f"line {ns[0]}"
    if ns[-1] - ns[0] == len(ns) - 1:
        return f"lines {ns[0]}-{ns[-1]}"
    head = ", ".join(map(str, ns[:5]))
    return f"lines {head}" + (f" and {len(ns) - 5} more" if len(ns) > 5 else "")


def path_text(path: str | os.PathLike[str]) -> str:
    """`path` as text UTF-8 can hold (a shard's `source.origin_path`, a problem): itself,
    unless it holds bytes that are not UTF-8 (Python keeps each as a lone surrogate, which
    UTF-8 cannot store): then each such byte is written `\\xNN` and each backslash
    `\\\\`. The same bytes give the same text every run (a re-import finds its records),
    and no two such paths give one text."""
    text = os.fspath(path)
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        raw = os.fsencode(text).replace(b"\\", b"\\\\")
        return raw.decode("utf-8", "backslashreplace")
    return text


_ANONYMOUS = re.compile(r"(pipe|socket|anon_inode):\[\d+\]")
"""What `/proc/PID/fd/N` names for an fd with no path: a pipe, a socket."""


def anonymous(path: Path) -> str | None:
    """`stdin` or `pipe` when `path` is an anonymous pipe or socket (`/dev/stdin` fed by
    `cat x |`, a process substitution `<(...)`), else None. Such a path resolves to
    `/proc/PID/fd/pipe:[N]`, another one each run: as a record's origin path it made
    every piped re-import new (and its name `63` the task id of a whole-file format)."""
    real = Path(path).resolve()
    if not _ANONYMOUS.fullmatch(real.name):
        return None
    try:
        here, stdin = os.stat(path), os.fstat(0)
    except OSError:
        return "pipe"
    return "stdin" if (here.st_dev, here.st_ino) == (stdin.st_dev, stdin.st_ino) else "pipe"


def origin_path_of(path: Path) -> str:
    """A file's `source.origin_path`: its resolved path, the same every run (a re-import
    finds its records); for an anonymous pipe `<stdin>` or `<pipe>` (`anonymous`)."""
    kind = anonymous(path)
    return f"<{kind}>" if kind else path_text(Path(path).resolve())


def origin_stem(path: Path) -> str:
    """The file's name without its suffix: the origin id of a record without its own
    (`stdin` or `pipe` for an anonymous pipe: its name is a number that means nothing)."""
    if kind := anonymous(path):
        return kind
    name = path_text(path.name)
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path_text(path.stem)


TERMINAL_TOOLS = {
    "bash",
    "shell",
    "terminal",
    "execute_bash",
    "execute_command",
    "run_command",
    "run_shell_command",
    "keystrokes",
    "tmux",
    "send_keys",
    "command",
}
SWE_TOOLS = {
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "edit",
    "read",
    "write",
    "open",
    "find_file",
    "search_file",
    "search_dir",
    "create",
    "view",
    "apply_patch",
    "read_file",
    "write_file",
    "edit_file",
}
WEB_PREFIXES = ("browser_", "page_", "web_")
WEB_TOOLS = {"click", "navigate", "goto", "type", "scroll", "go_back", "fill"}
SEARCH_TOOLS = {"search", "web_search", "google_search", "bing_search", "fetch", "visit"}
ANDROID_PREFIXES = ("android_", "adb_", "mobile_")


MCP_PREFIX = "mcp__"
"""How Claude Code and Codex name an MCP server's tool: `mcp__<server>__<tool>`."""


def guess_domain(tool_names: Iterable[str | None], default: str = "mcp") -> str:
    """The recipe's domain from the tools an agent called (importers' best effort); an
    MCP tool counts by its own name (`mcp__<server>__` left out)."""
    names = {_own_name(n).lower() for n in tool_names if n}
    if not names:
        return default
    if any(n.startswith(ANDROID_PREFIXES) for n in names):
        return "android"
    if any(n.startswith(WEB_PREFIXES) for n in names) or names & WEB_TOOLS:
        return "web"
    if names & SWE_TOOLS:
        return "swe"
    if names <= TERMINAL_TOOLS:
        return "terminal"
    if names & SEARCH_TOOLS:
        return "search"
    return default


def _own_name(name: str) -> str:
    return name.split("__", 2)[-1] if name.startswith(MCP_PREFIX) else name


ARGUMENTS = "a JSON object or a string holding one"


def tool_action(name: str, arguments: Any, field: str = "arguments") -> Action:
    """A tool call as the world model sees it: `name(<canonical JSON arguments>)`.

    Arguments are an object, or a string as the model wrote it (OpenAI's shape): a string
    that is not JSON is kept as `{"_raw": text}`, one holding JSON other than an object
    as `{"_value": ...}` (the model's output, faithfully); empty or missing is `{}`.
    Anything else (a number, a boolean, a list) is the file's error, not the model's:
    InvalidField naming `field`, never wrapped. So are arguments nested deeper than
    `validate.JSON_DEPTH`, which `validate` and `process` would refuse."""
    if isinstance(arguments, str):
        try:  # `NaN`, `Infinity`, `1e400` are not JSON: the model's text, kept as written
            parsed = (
                json_in(
                    arguments, field, parse_constant=no_json_constant, parse_float=finite_json_float
                )
                if arguments.strip()
                else {}
            )
        except InvalidField:  # nested too deep
            raise
        except ValueError:  # JSONDecodeError too
            parsed = {"_raw": arguments}
        if not isinstance(parsed, dict):
            parsed = {"_value": parsed}
    elif arguments is None:
        parsed = {}
    elif isinstance(arguments, dict):
        parsed = arguments
    else:
        raise expected(field, ARGUMENTS, arguments)
    try:
        action = tool(name, **parsed)
    except ValueError:  # a NaN or an infinity the file's own JSON reader took
        raise expected(field, "JSON (no NaN or infinity)", arguments) from None
    if (deep := too_deep(action.arguments_json or "", parsed)) is not None:
        raise InvalidField(f"{field}: {deep}")  # an object the file's reader took, or `_value`
    return action


def shell_or_tool(name: str, args: Any, place: str, shells: Iterable[str]) -> Action:
    """A harness's tool call `name(args)` as an action: one of its shell tools (`shells`)
    with a `command` string is a `command` (the tool's options, a description or a
    timeout, are not the command); any other call a tool call (`tool_action`, `place`
    naming the arguments in its error)."""
    action = tool_action(name, args, place)
    command = arguments_of(action).get("command") if name in shells else None
    return Action("command", command, name=name) if isinstance(command, str) else action


AGENT, USER, SYSTEM = "agent", "user", "system"
"""Who wrote a message, for `conversation` (anything else, e.g. a tool result, ends what
the agent said; None: a message `conversation` passes over)."""


@dataclass
class Said:
    """An agent message without tool calls and the user messages that answer it (their
    indices in the record)."""

    at: int
    replies: list[int] = field(default_factory=list)

    def turn(
        self,
        read: Callable[[int], tuple[Any, str]],
        turn: int,
        parts: NonText,
        reasoning: str | None = None,
    ) -> tuple[Action, Observation, str | None]:
        """This exchange as turn `turn`: what the agent said is its action, the replies
        joined with "\n" its observation. `read(n)`: item n's content and where it is."""
        content, where = read(self.at)
        text = parts.text(content, f"turn {turn} action ({where})")
        reply = "\n".join(
            parts.text(c, f"turn {turn} observation ({w})") for c, w in map(read, self.replies)
        )
        return message_action(text), Observation(reply), reasoning


def conversation(
    items: list[Any], role: Callable[[dict[str, Any]], str | None], says: Callable[[Any], bool]
) -> tuple[list[Said], Said | None, list[tuple[int, str]]]:
    """What the agent said to its user and the replies (each a turn, `message_action`),
    the agent's last word if nothing answered it, and what is neither, as (index, what):
    a user message that answers no agent message (the first one is the task), a system
    message after the first, an agent message no user answered that is not the last.
    `role(item)` is AGENT, USER, SYSTEM or another word; `says(item)`: an agent message
    that speaks to the user (text, no tool call)."""
    said: list[Said] = []
    open_: Said | None = None
    unsaid: list[tuple[int, str]] = []
    users = systems = 0
    for n, m in enumerate(items):
        if not isinstance(m, dict) or (who := role(m)) is None:
            continue
        if who == AGENT:
            if open_ is not None and not open_.replies:
                unsaid.append((open_.at, "an agent message no user answered"))
            open_ = Said(n) if says(m) else None
            said += [open_] if open_ else []
        elif who == USER:
            users += 1
            if open_ is not None:
                open_.replies.append(n)
            elif users > 1:
                unsaid.append((n, "a user message that answers no agent message"))
        elif who == SYSTEM:
            systems += 1
            if systems > 1:
                unsaid.append((n, "a system message after the first"))
        else:  # a tool result ends what the agent said
            if open_ is not None and not open_.replies:
                unsaid.append((open_.at, "an agent message no user answered"))
            open_ = None
    last = said[-1] if said and not said[-1].replies and open_ is said[-1] else None
    return [x for x in said if x.replies], last, unsaid


def iso_timestamp(value: Any, field: str) -> datetime | None:
    """An ISO 8601 timestamp (none: None); one without a zone is UTC, as the store reads
    it. Anything else is the file's error (InvalidField naming `field`)."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        at = None
    if at is None:
        raise expected(field, "an ISO 8601 timestamp", value)
    at = at if at.tzinfo else at.replace(tzinfo=timezone.utc)
    try:  # 9999-12-31T23:59-14:00 is year 10000 in UTC, which the store and readers cannot hold
        at.astimezone(timezone.utc)
    except OverflowError:
        raise expected(field, "a timestamp between years 1 and 9999 in UTC", value) from None
    return at


def message_action(text: str) -> Action:
    """What the agent said to its user, as an action (`text`): the user's reply, which the
    environment's user (a person or a benchmark's user simulator) wrote, is its
    observation."""
    return Action("text", text)


TIMED_OUT = "[timed out]"


def timed_out(output: str, state_json: str | None = None, truncated: bool = False) -> Observation:
    """A command its harness killed at a timeout, kept as worldtrace's own sandboxes keep
    one: what the environment printed before it (if anything), then `[timed out]` on a
    line of its own; an error with no exit code; `{"timed_out": true}` added to the
    step's state (a JSON object, else none). The harness's notice itself is not kept: it is not the
    environment's answer."""
    try:
        state = parse_json(state_json) if state_json else {}
    except json.JSONDecodeError:
        state = {}
    state = {**(state if isinstance(state, dict) else {}), "timed_out": True}
    return Observation(
        output + ("\n" if output and not output.endswith("\n") else "") + TIMED_OUT,
        is_error=True,
        truncated=truncated,
        state_json=json.dumps(state, sort_keys=True),
    )


INTERRUPTED = "[interrupted]"


def interrupted(output: str, truncated: bool = False) -> Observation:
    """A command the user interrupted while it ran (Ctrl-C, Esc, a cancel): its output so
    far, then `[interrupted]` on a line of its own; an error with no exit code, state
    `{"interrupted": true}` (as `timed_out`). The harness's notice is not kept."""
    sep = "\n" if output and not output.endswith("\n") else ""
    return Observation(
        output + sep + INTERRUPTED,
        is_error=True,
        truncated=truncated,
        state_json=json.dumps({"interrupted": True}),
    )


def kept_ends(head: str, tail: str) -> str:
    """What a harness showed of an output it cut in the middle (its head and its tail),
    without its notice: the two parts on their own lines (`observation.truncated` says
    something is missing between them)."""
    return f"{head}\n{tail}"


def content_text(content: Any, field: str = "content") -> tuple[str, Counter[str]]:
    """(text, the parts left out by kind) of message content (at `field` in the record).
    A string is the text, a number its JSON (as written); a list of content parts (OpenAI,
    Anthropic, ATIF) gives its text parts (a string, a part with `text`, or with `content`,
    read the same way) joined with "\n", as before; a part with no text (an image,
    `image_url`, `input_audio`, a file) adds no text and no separator: it is counted by
    its `type` for a `non_text_part` warning. One object is read as one part; an object
    with neither `text` nor `content` is its JSON (a tool's structured answer). Anything
    else (a boolean, a `text` that is no string, a number or list among the parts) is the
    file's error, InvalidField naming the field: Python's rendering of it would pose as
    what the environment printed."""
    if content is None:
        return "", Counter()
    if isinstance(content, str):
        return content, Counter()
    if isinstance(content, int | float) and not isinstance(content, bool):
        return json.dumps(content), Counter()
    if isinstance(content, dict):
        if "text" not in content and "content" not in content:
            return json.dumps(content, sort_keys=True, ensure_ascii=False), Counter()
        return _part_text(content, field)
    if not isinstance(content, list):
        raise expected(field, "a string or a list of content parts", content)
    texts: list[str] = []
    left: Counter[str] = Counter()
    for k, p in enumerate(content):
        if isinstance(p, str):
            texts.append(p)
        elif not isinstance(p, dict):
            raise expected(f"{field}[{k}]", "a string or a content part object", p)
        elif "content" in p or "text" in p:
            text, inner = _part_text(p, f"{field}[{k}]")
            texts.append(text)
            left += inner
        else:
            kind = p.get("type")
            left[kind if isinstance(kind, str) and kind else "dict"] += 1
    return "\n".join(texts), left


def _part_text(p: dict[str, Any], field: str) -> tuple[str, Counter[str]]:
    """A content part's text: its `text`, a string; else its `content`, read as content."""
    text = p.get("text")
    if text is None and "content" in p:
        return content_text(p["content"], f"{field}.content")
    if not isinstance(text, str):
        raise expected(f"{field}.text", "a string", text)
    return text, Counter()


_PLACE_FIELD = re.compile(r"\(([^()]*)\)\Z")
"""The field in a `NonText.text` place: `turn 3 observation (messages[7].content)`."""


class NonText:
    """The content parts of one record that hold no text (images, audio, files): an
    importer reads message content through `text(content, place)` and yields
    `warnings()`, one `non_text_part` warning per place, e.g. `turn 3 observation
    (messages[7].content): 1 image part not imported`. Nothing stands in for a part
    in the text."""

    def __init__(self) -> None:
        self.left: list[tuple[str, Counter[str]]] = []

    def text(self, content: Any, place: str) -> str:
        """The text of `content`; its field (for InvalidField) is the place's `(...)`."""
        at = _PLACE_FIELD.search(place)
        text, left = content_text(content, at[1] if at else "content")
        if left:
            self.left.append((place, left))
        return text

    def warnings(self) -> list[ImportProblem]:
        return [
            warning("non_text_part", f"{place}: {part_counts(left)} not imported")
            for place, left in self.left
        ]


def part_counts(left: Counter[str]) -> str:
    """Content parts left out, by kind: `1 image part, 2 input_audio parts`."""
    return ", ".join(f"{n} {kind} part{'s' if n > 1 else ''}" for kind, n in left.items())


def textless(content: Any, field: str) -> Counter[str] | None:
    """The parts of `content` (at `field`) when they hold no text at all, only images,
    audio or files (by kind); None when it has text, or nothing else. Such an answer is
    no empty output: what it said in text is unknown, as a null answer's is (`no_text`)."""
    text, left = content_text(content, field)
    return left if left and not text else None


def no_text(found: Iterable[tuple[str, Counter[str]]], call: str = "it") -> str:
    """Why a call answered only with parts that hold no text (`textless`: a screenshot, a
    `Read` of a PNG, view_image) makes no turn, every importer's `unpaired_call`, as for a
    null answer: worldtrace records are text, and `""` would teach that the tool printed
    nothing. `found`: each field of the answer and its parts; `call`: the call as the
    importer names it. The caller adds `; no turn`."""
    said = "; ".join(f"{at}: {part_counts(left)} and no text" for at, left in found)
    return f"{said}: what {call} answered in text is unknown (non-text parts are not kept)"


def join_reasoning(*parts: str | None) -> str | None:
    text = "\n\n".join(p.strip() for p in parts if p and p.strip())
    return text or None


_FENCE_RE = re.compile(r"^```(\S*)\s*\n|^```\s*$", re.M)
"""A fence as SWE-agent's ThoughtActionParser finds one (0.x sweagent/agent/parsing.py, 1.x
sweagent/tools/parsing.py): at the start of a line only; group 1 is None for a bare ```
that ends the text or its line without a newline (it only closes)."""


def split_command(message: str) -> tuple[str | None, str]:
    """(command, prose around it) of an agent message, read as SWE-agent's
    ThoughtActionParser reads it: a fence with a tag opens a block, a bare one closes
    the innermost open block (or opens one), and the command is the last block not
    nested in another, whole (``` inside a line of the command is the command's)."""
    stack: list[re.Match[str]] = []
    last = None
    for fence in _FENCE_RE.finditer(message):
        if stack and not fence.group(1):
            start = stack.pop()
            last = (start, fence) if not stack else last
        elif fence.group(1) is not None:
            stack.append(fence)
    if last is None:
        return None, message
    start, end = last
    prose = (message[: start.start()] + message[end.end() :]).strip()
    return message[start.end() : end.start()].rstrip("\n"), prose


TOOL_OBJECTS = ("input_schema", "inputSchema", "parameters", "output_schema", "outputSchema",
                "annotations")  # fmt: skip
"""A declared tool's fields that hold an object (JSON Schema or MCP annotations)."""


def tool_spec(tool: Any, field: str = "tools", i: int = 0) -> Any:
    """A declared tool (`field[i]`) as a ToolSpec dict {name, description, input_schema}
    (from the OpenAI, MCP or our shape); anything without a name is kept as it is. A
    schema may be a JSON string holding the object (as datasets store them); any other
    value is the record's error (InvalidField naming the key), not an empty schema."""
    if isinstance(tool, Mapping):
        nested = isinstance(tool.get("function"), Mapping)
        fn = tool["function"] if nested else tool
        if isinstance(fn.get("name"), str) and fn["name"]:
            at = f"{field}[{i}].function" if nested else f"{field}[{i}]"
            if fn.get("description") is not None and not isinstance(fn["description"], str):
                raise expected(f"{at}.description", "a string", fn["description"])
            parsed = {k: _json_object(fn[k], at, k) for k in TOOL_OBJECTS
                      if k in fn and not isinstance(fn[k], Mapping | None)}  # fmt: skip
            return ToolSpec.from_dict({**fn, **parsed} if parsed else fn).to_dict()
    return tool


def _json_object(value: Any, at: str, key: str) -> Mapping[str, Any]:
    """A tool's field that is no object: the object a JSON string holds, else the
    record's error naming `at.key`."""
    try:
        parsed = json_in(value, f"{at}.{key}") if isinstance(value, str) else None
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, Mapping):
        raise expected(f"{at}.{key}", "an object (or a JSON string holding one)", value)
    return parsed


def build(
    fmt: str,
    origin_id: str,
    domain: str,
    pairs: list[tuple[Action, Observation, str | None]],
    *,
    task_description: str | None = None,
    instruction: str | None = None,
    action_space: list[Any] | None = None,
    initial_state: str | None = None,
    demonstrations: list[Any] | None = None,
    agent: dict[str, str | None] | None = None,
    outcome: Outcome | None = None,
    metadata: dict[str, Any] | None = None,
    task_id: str | None = None,
    tools_field: str = "tools",
    source_kind: str = "import",
) -> Trajectory:
    """A record of one imported trajectory, without its id: the import loop stamps it
    after provenance and observation caps are applied. `tools_field`: where the format
    declares `action_space` (named in a bad tool's error); `source_kind`: `synthetic` for
    generated records coming back (worldtrace's own export of one)."""
    if domain not in F.DOMAINS:
        raise MissingField(f"unknown domain {domain!r}")
    turns = [Turn(i, a, o, reasoning=r) for i, (a, o, r) in enumerate(pairs)]
    return Trajectory(
        domain=domain,
        turns=turns,
        source=Source(kind=source_kind, name=fmt, origin_format=fmt, origin_id=origin_id),
        environment=Environment(backend=fmt),
        task=Task(task_id=task_id or origin_id, instruction=instruction),
        agent=Agent(**(agent or {})),
        system=System(
            task_description=task_description,
            action_space=json.dumps(
                [tool_spec(t, tools_field, i) for i, t in enumerate(action_space)],
                sort_keys=True,
                ensure_ascii=False,
            )
            if action_space
            else None,
            initial_state=initial_state,
            demonstrations=json.dumps(demonstrations, ensure_ascii=False)
            if demonstrations
            else None,
        ),
        outcome=outcome or Outcome(),
        metadata={
            k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
            for k, v in (metadata or {}).items()
            if v is not None
        },
    )
