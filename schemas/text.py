"""Reading text strictly: bytes that are not UTF-8 and JSON that cannot be parsed become
messages that say where (the line, the column), never replaced text or a traceback.

The store's readers (`store.scan_file`: `validate`, `process --input`), the YAML
loader (`parsing.load_yaml`, `config.load`) and the importers
(`collectors/importers/reading.py`, which add their own refusals of NaN and Infinity)
read through here, with the same messages: a byte
that is not UTF-8 is named with its column and the file is never decoded with
replacement characters (`insp\\ufffdct` would go into training data); a line nested
deeper than the interpreter can follow is named with its depth, and the lines after it
are still read; a line cut short says so, at the column where it ends.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

LINE_END = re.compile(rb"\r\n?|\n")
"""Where a line ends: `\\n`, `\\r\\n` or a bare `\\r` (what text mode's universal newlines
take). A raw `\\r` is never inside a JSON value (strings escape it): it can only end a
line (an old Mac file) or be garbage."""
TEXT_LINE_END = re.compile(LINE_END.pattern.decode())
"""LINE_END, in decoded text."""
_LINE = re.compile(rb"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+")

_MAGIC = (
    (rb"\x1f\x8b", "gzip", ".gz", "gunzip -k", "gzip -dc"),
    # bzip2's block magic too: `BZh` may be text
    (rb"BZh[1-9]1AY&SY", "bzip2", ".bz2", "bunzip2 -k", "bzip2 -dc"),
    (rb"\xfd7zXZ\x00", "xz", ".xz", "unxz -k", "xz -dc"),
    (rb"\x28\xb5\x2f\xfd", "zstd", ".zst", "unzstd", "zstd -dc"),
    (rb"PK\x03\x04", "zip", ".zip", "unzip", None),
)
"""(magic, format, suffix, the tool that decompresses a file of that suffix beside it,
the one that writes any file's content to stdout); unzip takes any name."""
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _quoted(path: object) -> str:
    """`path` as a shell word: a command we advise runs as printed, whatever the name."""
    return shlex.quote(str(path))


def compressed(data: bytes, path: object) -> str | None:
    """Why a file starting with `data` (its first bytes, or all) is compressed, or None,
    with a command that decompresses it whatever its name: `gunzip -k x.jsonl.gz` (it
    writes x.jsonl beside it), else to a name of its own that keeps the file's suffixes
    (`gzip -dc x.jsonl > x.decompressed.jsonl`: `gunzip -k x.jsonl` refuses a name
    without `.gz`, `unknown suffix -- ignored`)."""
    head = data[:10]
    for magic, name, suffix, beside, to_stdout in _MAGIC:
        if re.match(magic, head):
            text = str(path)
            if to_stdout is None or text.endswith(suffix):
                how = f"{beside} {_quoted(text)}"
            else:
                how = f"{to_stdout} {_quoted(text)} > {_quoted(decompressed_name(text))}"
            return f"the file is {name}-compressed: decompress it first ({how})"
    return None


def decompressed_name(path: str) -> str:
    """Where to write the decompressed content of `path`, a compressed file whose name
    has no compression suffix: beside it, `.decompressed` before its suffixes
    (`x.traj.json` -> `x.decompressed.traj.json`), so `import` still reads it as the
    format its name says."""
    head, sep, name = path.rpartition("/")
    stem, dot, suffixes = name[1:].partition(".")  # a leading dot is part of the name
    stem = name[:1] + stem
    return f"{head}{sep}{stem}.decompressed{dot}{suffixes}"


def wide(data: bytes, path: object) -> str | None:
    """Why a file starting with `data` is UTF-16 or UTF-32 (by its byte order mark), or
    None."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return (
                f"the file is {name} (it starts with a {name} byte order mark; PowerShell 5 "
                f"writes it), not UTF-8: convert it: iconv -f {name.lower()} -t utf-8 "
                f"{_quoted(path)} > {_quoted(f'{path}.utf8')}"
            )
    return None


def not_text(data: bytes, path: object) -> str | None:
    """Why a file starting with `data` (its first bytes, or all) is no UTF-8 text at all
    (compressed, or UTF-16/32 by its byte order mark), or None."""
    return compressed(data, path) or wide(data, path)


def byte_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file, each with its end (LINE_END). Read as the file object
    cuts them (at `\\n`, in C); only a line holding a `\\r` other than the one of its
    `\\r\\n` (an old Mac file) is cut again."""
    for raw in fh:
        cr = raw.find(b"\r")
        if cr < 0 or (cr == len(raw) - 2 and raw[-1] == 10):
            yield raw
        else:
            yield from _LINE.findall(raw)


class BadText(ValueError):
    """Text that could not be read: `message`, at `line` (1-based, within what was
    read) and `column` (1-based, in characters)."""

    def __init__(self, message: str, line: int = 1, column: int = 1):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def utf8(data: bytes, path: object, unit: str = "file") -> str:
    """`data` decoded strictly, or `not_utf8`'s BadText."""
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise not_utf8(data, exc, path, unit) from None


def read_utf8(path: str | os.PathLike, what: str) -> str:
    """The text of the file `path`, decoded strictly: a byte that is not UTF-8 is a
    ValueError naming `what` (`template`), the file, the line and the column. For files
    whose text goes into every sample (a template, simulation instructions): decoded with
    replacement, each sample held U+FFFD."""
    data = Path(path).read_bytes()
    try:
        return utf8(data, path)
    except BadText as exc:
        raise ValueError(f"{what} {path}: line {exc.line}: {exc.message}") from None


def not_utf8(data: bytes, exc: UnicodeDecodeError, path: object, unit: str = "file") -> BadText:
    """Where `data` (of file `path`) is not UTF-8: the first such byte, its line within
    `data` and its column, and what to do. `unit`: what a character cut short at the end
    of `data` suggests was truncated (`line` or `file`)."""
    ends = list(LINE_END.finditer(data, 0, exc.start))
    at = ends[-1].end() if ends else 0
    col = len(data[at : exc.start].decode()) + 1
    if exc.reason == "unexpected end of data":  # the last bytes: a character cut short
        why = f"a character cut short at column {col} (the {unit} may be truncated)"
    else:
        why = (
            f"byte 0x{data[exc.start]:02x} at column {col} is not UTF-8: the file is in "
            "another encoding (Latin-1 or cp1252?); convert it: iconv -f cp1252 -t utf-8 "
            f"{_quoted(path)} > {_quoted(f'{path}.utf8')}"
        )
    return BadText(why, len(ends) + 1, col)


_SYNTAX = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{\]},:]')
"""The strings, brackets and separators of JSON text: how deep a place is, and where
(`deepest`, `place`), read without parsing."""
_CUT_TOKEN = re.compile(
    r"""\\ | \\?u[0-9a-fA-F]{0,4}(?:\\(?:u[0-9a-fA-F]{0,3})?)?  # an escape in a string
    | n(?:ul?)? | t(?:ru?)? | f(?:a(?:ls?)?)?                    # null, true, false
    | - | \. | [eE][+-]?                                          # a number""",
    re.X,
)
"""What is left where the decoder stopped when a line is cut inside its last token."""


def _position(text: str, pos: int) -> tuple[int, int]:
    """(line, column), 1-based, of `text[pos]`, lines ending as LINE_END says (json's own
    line number counts `\\n` alone)."""
    ends = list(TEXT_LINE_END.finditer(text, 0, pos))
    return len(ends) + 1, pos - (ends[-1].end() if ends else 0) + 1


def deepest(text: str) -> tuple[int, int]:
    """How deep the brackets of JSON `text` go, and where (the index of the deepest
    opening bracket)."""
    depth = most = where = 0
    for m in _SYNTAX.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > most:
                most, where = depth, m.start()
        elif c in "]}":
            depth -= 1
    return most, where


def place(text: str, pos: int) -> list[str | int]:
    """The keys and indices down to the value that starts at `pos` in JSON `text`, read
    from its syntax alone (the text need not parse; no recursion)."""
    stack: list[list] = []  # [bracket, key or index, whether a key comes next]
    for m in _SYNTAX.finditer(text, 0, pos):
        tok = m.group()
        if tok in "[{":
            stack.append([tok, 0 if tok == "[" else "", tok == "{"])
        elif not stack:
            continue
        elif tok in "]}":
            stack.pop()
        elif tok == ",":
            top = stack[-1]
            top[1], top[2] = (top[1] + 1, False) if top[0] == "[" else ("", True)
        elif tok == ":":
            stack[-1][2] = False
        elif stack[-1][2]:  # an object's key, as written
            stack[-1][1] = tok[1:-1]
    return [key for _, key, _ in stack]


def too_deep(text: str, name: Callable[[list[str | int]], str] | None = None) -> BadText:
    """The problem of JSON `text` nested deeper than the decoder can follow: how deep,
    at its deepest opening bracket; `name`: how the field holding it is named (from its
    `place`), said first."""
    depth, pos = deepest(text)
    line, col = _position(text, pos)
    why = f"nested {depth} levels deep, deeper than can be parsed (column {col})"
    field = name(place(text, pos)) if name else ""
    return BadText(f"{field}: {why}" if field else why, line, col)


def undecodable(
    text: str, exc: json.JSONDecodeError, unit: str = "line", prefix: str = "invalid JSON: "
) -> BadText:
    """The decoder's complaint, located in `text` (a line may keep its line end), after
    `prefix` (an importer's problem says `invalid_json` already). json's messages that end
    in "at" expect a position after them; ours follows as `at column N`. Text that stops
    before its value is complete (a string still open, a list or an object unclosed, a
    token cut) is called what it most likely is: cut short."""
    msg = exc.msg.removesuffix(" at")
    msg = msg[:1].lower() + msg[1:]
    end = len(text.rstrip())
    if (
        exc.pos >= end
        or msg.startswith("unterminated string")
        or _CUT_TOKEN.fullmatch(text, exc.pos, end)
    ):
        # the decoder ran out of text, or stopped in the token the text ends with: in a
        # string when it is still open, ends in an escape, or the character the decoder
        # stopped at is the line break after it (a control character there)
        in_string = msg.startswith(("unterminated", "invalid control", "invalid \\"))
        what = "unterminated string" if in_string else "unexpected end"
        line, col = _position(text, end)
        return BadText(f"{prefix}{what} at column {col} (the {unit} may be truncated)", line, col)
    if msg.startswith("invalid control character"):
        msg = f"invalid control character {text[exc.pos]!r}"
    line, col = _position(text, exc.pos)
    return BadText(f"{prefix}{msg} at column {col}", line, col)


def loads(text: str, unit: str = "line") -> object:
    """json.loads, each failure a located BadText (`unit`: `line` or `file`, for the
    message): invalid JSON, or nested too deep (a RecursionError would otherwise unwind
    whatever reads the file)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise undecodable(text, exc, unit) from None
    except RecursionError:
        raise too_deep(text) from None
    except ValueError as exc:  # an integer of 5,000 digits
        raise BadText(f"invalid JSON: {exc}") from None


def json_excerpt(value: object, limit: int = 60) -> str:
    """A value as JSON cut to `limit` characters, for a problem about a file's field (an
    int of more digits than Python converts is named by its type)."""
    try:
        text = json.dumps(value)
    except ValueError:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""Half a UTF-16 pair (a JSON `\\ud800` escape, an emoji cut in two): no UTF-8 encoding
exists for it, so neither Parquet nor the content hash can take a string holding one."""


def storable(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`): for messages,
    which must print and store whatever they quote."""
    if text.isascii() or not LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode()


def lone_surrogates(
    value: Any, path: tuple = (), seen: set[int] | None = None
) -> Iterator[tuple[tuple, str, bool]]:
    """(path, string, whether it is a key) of each string of `value` (nested mappings and
    lists; keys at their own path) that holds a lone surrogate; a key's value before the
    key. Each container is walked once: a YAML alias may repeat one or close a cycle."""
    if isinstance(value, str):
        if not value.isascii() and LONE_SURROGATE.search(value):
            yield path, value, False
        return
    if not isinstance(value, Mapping | list):
        return
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for k, v in items:
        yield from lone_surrogates(v, (*path, k), seen)
        if isinstance(k, str) and not k.isascii() and LONE_SURROGATE.search(k):
            yield (*path, k), k, True


def surrogate_problem(text: str) -> str | None:
    """Why `text` cannot be stored as UTF-8 (its first lone surrogate, where), or None.
    `isascii` is O(1) in CPython, and only a string of 2 or 4 bytes a character can hold
    a surrogate; the search is C."""
    if text.isascii() or (m := LONE_SURROGATE.search(text)) is None:
        return None
    more = len(LONE_SURROGATE.findall(text, m.end()))
    tail = f" (and {more} more)" if more else ""
    return (
        f"a lone surrogate ({storable(m.group())}) at character {m.start()}{tail}: not "
        "storable as UTF-8 (half a UTF-16 pair, e.g. an emoji cut in two: write the whole "
        "pair, or U+FFFD)"
    )
