"""Reading foreign files safely: one bad record (or file) becomes a located problem.

The stdlib decoder is kept (orjson decodes these records only ~25% faster, a few percent
of an import); what it lacks is added here: NaN/Infinity are refused (they are not JSON
and would poison arguments and observations downstream), and a record nested deeper than
the interpreter can follow is reported with its line and column instead of unwinding the
whole run with a RecursionError. So is a number too large for a float (`1e400` would be
Infinity). Files are read as bytes and decoded strictly: bytes that are not UTF-8 (a
Latin-1 file) are a located problem, never replaced in silence; a leading UTF-8 byte order
mark is passed over; a UTF-16 or compressed file is one problem saying what it is.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .common import ImportProblem

_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]|NaN|-?Infinity|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?'
)
_CUT_TOKEN = re.compile(
    r"""\\ | \\?u[0-9a-fA-F]{0,4}(?:\\(?:u[0-9a-fA-F]{0,3})?)?  # an escape in a string
    | n(?:ul?)? | t(?:ru?)? | f(?:a(?:ls?)?)?                    # null, true, false
    | - | \. | [eE][+-]?                                          # a number""",
    re.X,
)
"""What is left where the decoder stopped when a line is cut inside its last token."""


class BadJSON(ValueError):
    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


LINE_END = re.compile(r"\r\n?|\n")
"""Where a line ends: `\\n`, `\\r\\n` or a bare `\\r` (old Mac files). A raw `\\r` is never
inside a JSON value (strings escape it), so it can only end a line (or be garbage)."""
_LINE_END_BYTES = re.compile(LINE_END.pattern.encode())


def _position(text: str, pos: int) -> tuple[int, int]:
    """(line, column), 1-based, of `text[pos]`, lines ending as LINE_END says."""
    ends = list(LINE_END.finditer(text, 0, pos))
    return len(ends) + 1, pos - (ends[-1].end() if ends else 0) + 1


def _locate(text: str, want_constant: bool) -> tuple[str, int, int] | None:
    """(what, line, column) of the first value that is no JSON number (NaN, Infinity, a
    number too large for a float; None if there is none), or of the deepest nesting."""
    depth = deepest = where = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok[0] in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, m.start()
        elif tok[0] in "]}":
            depth -= 1
        elif tok[0] == '"' or not want_constant:
            continue
        elif tok[-1].isalpha():  # NaN, Infinity
            return f"{tok} is not valid JSON", *_position(text, m.start())
        elif not tok.lstrip("-").isdigit() and abs(float(tok)) == _INF:
            shown = tok if len(tok) <= 24 else f"{tok[:20]}..."
            sign = "-" if tok[0] == "-" else ""
            what = f"{shown} is too large for a number: it would be {sign}Infinity, not JSON"
            return what, *_position(text, m.start())
    if want_constant:
        return None
    return f"nested {deepest} levels deep, deeper than can be parsed", *_position(text, where)


def _refuse(constant: str) -> Any:
    raise ValueError(constant)


_INF = float("inf")


def _finite(number: str) -> float:
    """A JSON number as a float, refused when too large for one (`1e400` would be inf)."""
    f = float(number)
    if f == _INF or f == -_INF:
        raise ValueError(number)
    return f


def _undecodable(text: str, exc: json.JSONDecodeError, unit: str) -> BadJSON:
    """The decoder's complaint, located. json's messages that end in "at" expect a
    position after them (`Invalid control character at`); ours follows as `at column N`.
    Text that stops before its value is complete (a string still open, a list or an
    object unclosed) is called what it most likely is: cut short."""
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
        return BadJSON(f"{what} at column {col} (the {unit} may be truncated)", line, col)
    if msg.startswith("invalid control character"):
        msg = f"invalid control character {text[exc.pos]!r}"
    line, col = _position(text, exc.pos)  # json's own lineno counts `\n` alone
    return BadJSON(f"{msg} at column {col}", line, col)


def loads(text: str, unit: str = "line") -> Any:
    """json.loads that refuses NaN/Infinity and numbers too large for a float, and reports
    depth; errors are BadJSON (`unit`: what the text is, `line` or `file`, for the message).
    Counts the texts that hold a surrogate escape (`surrogate_escapes`)."""
    global _escaped
    if "\\ud" in text or "\\uD" in text:
        _escaped += 1
    try:
        return json.loads(text, parse_constant=_refuse, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise _undecodable(text, exc, unit) from None
    except RecursionError:
        found = _locate(text, want_constant=False)
    except ValueError as exc:  # a refused constant, or e.g. an integer of 5,000 digits
        found = _locate(text, want_constant=True) or (str(exc), 1, 1)
    assert found is not None
    what, line, col = found
    raise BadJSON(f"{what} (column {col})", line, col)


_escaped = 0


def surrogate_escapes() -> int:
    """Texts `loads` has seen holding a `\\uD800`-`\\uDFFF` escape (in this process): a
    value parsed since this changed may hold a lone surrogate, which UTF-8 cannot store,
    and is mended before it is (`worldtrace.collectors.importers.convert`); the others,
    nearly all, are not walked for one."""
    return _escaped


def _problem(path: Path, where: str, kind: str, message: str) -> ImportProblem:
    return ImportProblem(str(path), where, kind, message)


_MAGIC = {
    b"\x1f\x8b": ("gzip", "gunzip -k"),
    b"BZh": ("bzip2", "bunzip2 -k"),
    b"\xfd7zXZ\x00": ("xz", "unxz -k"),
    b"\x28\xb5\x2f\xfd": ("zstd", "unzstd"),
    b"PK\x03\x04": ("zip", "unzip"),
}
_HEAD = max(map(len, _MAGIC))
"""The first bytes of a file that tell what it is (`_unreadable_start`)."""


def _unreadable_start(path: Path, head: bytes) -> ImportProblem | None:
    """The file-level problem of a file that is not UTF-8 text at all, told by its first
    bytes: compressed, or UTF-16/32 (a byte order mark; PowerShell 5's `>` writes UTF-16)."""
    for magic, (name, tool) in _MAGIC.items():
        if head.startswith(magic):
            why = f"the file is {name}-compressed: decompress it first ({tool} {path})"
            return _problem(path, "", "compressed", why)
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):  # fmt: skip
        if head.startswith(bom):
            why = (
                f"the file is {name} (it starts with a {name} byte order mark; PowerShell 5 "
                f"writes it), not UTF-8: convert it: iconv -f {name.lower()} -t utf-8 "
                f"{path} > {path}.utf8"
            )
            return _problem(path, "", "invalid_utf8", why)
    return None


def _decoded(path: Path, data: bytes, n: int) -> str | ImportProblem:
    """`data` (line `n` of the file, or all of it) as text, or where it is not UTF-8."""
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        ends = list(_LINE_END_BYTES.finditer(data, 0, exc.start))
        at = ends[-1].end() if ends else 0
        line = n + len(ends)
        col = len(data[at : exc.start].decode()) + 1
        if exc.reason == "unexpected end of data":  # the last bytes, a character cut short
            why = f"a character cut short at column {col} (the file may be truncated)"
            return _problem(path, f"line {line}", "invalid_utf8", why)
        why = (
            f"byte 0x{data[exc.start]:02x} at column {col} is not UTF-8: the file is in "
            f"another encoding (Latin-1 or cp1252?); convert it: iconv -f cp1252 -t utf-8 "
            f"{path} > {path}.utf8"
        )
        return _problem(path, f"line {line}", "invalid_utf8", why)


LOOKS_LIKE_JSONL, NOT_ONE_DOCUMENT = "the file looks like JSONL", ", not one JSON document"
"""How `read_json`'s problem for a JSONL file read as one document begins and ends."""


def read_json(path: Path) -> Any | ImportProblem:
    """The parsed file, or the problem that stops it (unreadable, not UTF-8, empty,
    invalid). A leading UTF-8 byte order mark is passed over."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _problem(path, "", "unreadable", exc.strerror or str(exc))
    if (problem := _unreadable_start(path, data[:_HEAD])) is not None:
        return problem
    text = _decoded(path, data.removeprefix(codecs.BOM_UTF8), 1)
    if isinstance(text, ImportProblem):
        return text
    if not text.strip():  # the whole file, not a line of it (a 0-byte file has none)
        return _problem(path, "", "empty_file", "the file holds no record")
    try:
        return loads(text, "file")
    except BadJSON as exc:
        if exc.message.startswith("extra data") and _jsonl(text, exc.line):
            why = (
                f"{LOOKS_LIKE_JSONL} (a JSON value on each line: line {exc.line} starts "
                f"another){NOT_ONE_DOCUMENT}"
            )
            return _problem(path, "", "invalid_json", why)
        return _problem(path, f"line {exc.line}", "invalid_json", exc.message)


def _jsonl(text: str, extra: int) -> bool:
    """Whether `text`, one JSON value followed by more from line `extra` on, is JSONL: its
    first non-blank line is an object or list on its own (not the start of a document
    that goes on over several lines) and line `extra` starts another."""
    lines = LINE_END.split(text)
    first = next((ln for ln in lines if ln.strip()), "")
    if extra > len(lines) or not lines[extra - 1].lstrip().startswith(("{", "[")):
        return False
    try:
        return isinstance(json.loads(first), dict | list)
    except (ValueError, RecursionError):
        return False


def _byte_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file as bytes, streamed, each ending as LINE_END says (a
    `\\r\\n` split across reads is one end). Latin-1 gives every byte back as it was, and
    a UTF-8 character never holds a `\\r` or `\\n` byte: the lines are cut where the file's
    line ends are, and decoded strictly afterwards (`_decoded`)."""
    for line in io.TextIOWrapper(fh, encoding="latin-1", newline=""):
        yield line.encode("latin-1")


def jsonl_text_lines(path: Path) -> Iterator[tuple[int, str | ImportProblem]]:
    """(line number, text) of each non-blank line, streamed; a line that is not UTF-8 as
    its problem; a read error part way, a file without any line, or one that is not text
    (`_unreadable_start`) ends it with a problem instead. Lines end at `\\n`, `\\r\\n` or
    a bare `\\r` (LINE_END)."""
    seen = False
    try:
        with open(path, "rb") as fh:
            for n, raw in enumerate(_byte_lines(fh), 1):
                if n == 1:
                    if (problem := _unreadable_start(path, raw[:_HEAD])) is not None:
                        yield 0, problem
                        return
                    raw = raw.removeprefix(codecs.BOM_UTF8)
                if raw.strip():
                    seen = True
                    yield n, _decoded(path, raw, n)
    except OSError as exc:  # unreadable, or a read error part way
        yield 0, _problem(path, "", "unreadable", exc.strerror or str(exc))
        return
    if not seen:  # the whole file, not a line of it (a 0-byte file has none)
        yield 0, _problem(path, "", "empty_file", "the file holds no record")


def json_head(path: str | Path, lines: int) -> Iterator[Any]:
    """The values of the first `lines` lines of a file that parse as JSON (blank and
    broken lines passed over, a UTF-8 byte order mark too; an unreadable file gives none):
    what a session format's `sniff` looks at."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            for _, line in zip(range(lines), fh, strict=False):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except (ValueError, RecursionError):
                    continue
    except OSError:
        return


def jsonl_values(path: Path) -> Iterator[tuple[int, Any | ImportProblem]]:
    """(line number, value) of each non-blank line of a JSONL file read whole (a session),
    a line that is not JSON, or a problem reading the file, as its problem."""
    for n, line in jsonl_text_lines(path):
        yield n, line if isinstance(line, ImportProblem) else parse_line(path, n, line)


def parse_line(path: Path, n: int, line: str) -> Any | ImportProblem:
    """Line `n` of a JSONL file parsed, or its problem."""
    try:
        return loads(line)
    except BadJSON as exc:
        return _problem(path, f"line {n}", "invalid_json", exc.message)
