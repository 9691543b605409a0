"""Reading foreign files safely: one bad record (or file) becomes a located problem.

The stdlib decoder is kept (orjson decodes these records only ~25% faster, a few percent
of an import); what it lacks is added here: NaN/Infinity are refused (they are not JSON
and would poison arguments and observations downstream), and a record nested deeper than
`validate.JSON_DEPTH` is reported with its line and column: the limit `validate` and
`process` hold records to, the same from any stack (Python's parser took what the stack
left room for: 600 levels from one caller, not from another). So is a number too large
for a float (`1e400` would be Infinity). Files are read as bytes and decoded strictly:
bytes that are not UTF-8 (a Latin-1 file) are a located problem, never replaced in
silence; a leading UTF-8 byte order mark is passed over; a UTF-16 or compressed file is
one problem saying what it is. The byte and JSON rules and their messages are the store's
readers' (`schemas/text.py`).
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.schemas import text as T
from worldtrace.schemas.text import TEXT_LINE_END as LINE_END
from worldtrace.schemas.text import BadText
from worldtrace.schemas.validate import TooDeep, finite_json_float, parse_json

from .common import ImportProblem, deep_field

_NUMBERS = re.compile(r'"(?:[^"\\]|\\.)*"|NaN|-?Infinity|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?')
"""The strings (passed over) and the non-finite constants and numbers of JSON text."""


def _not_a_number(text: str) -> tuple[str, int, int] | None:
    """(what, line, column) of the first value that is no JSON number: NaN, Infinity, or
    a number too large for a float; None if there is none."""
    for m in _NUMBERS.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            continue
        if tok[-1].isalpha():  # NaN, Infinity
            return f"{tok} is not valid JSON", *T._position(text, m.start())
        if not tok.lstrip("-").isdigit() and abs(float(tok)) == _INF:
            shown = tok if len(tok) <= 24 else f"{tok[:20]}..."
            sign = "-" if tok[0] == "-" else ""
            what = f"{shown} is too large for a number: it would be {sign}Infinity, not JSON"
            return what, *T._position(text, m.start())
    return None


def _refuse(constant: str) -> Any:
    raise ValueError(constant)


_INF = float("inf")


def loads(text: str, unit: str = "line") -> Any:
    """`validate.parse_json` (the one depth limit) that refuses NaN/Infinity and numbers
    too large for a float, and reports depth; errors are BadText (`unit`: what the text
    is, `line` or `file`, for the message).
    Counts the texts that hold a surrogate escape (`surrogate_escapes`)."""
    global _escaped
    if "\\ud" in text or "\\uD" in text:
        _escaped += 1
    try:
        return parse_json(text, parse_constant=_refuse, parse_float=finite_json_float)
    except json.JSONDecodeError as exc:
        raise T.undecodable(text, exc, unit, prefix="") from None
    except TooDeep:
        # naming the field that holds the nesting, as `common.json_in` names one
        raise T.too_deep(text, deep_field) from None
    except ValueError as exc:  # a refused constant, or e.g. an integer of 5,000 digits
        what, line, col = _not_a_number(text) or (str(exc), 1, 1)
        raise BadText(f"{what} (column {col})", line, col) from None


_escaped = 0


def surrogate_escapes() -> int:
    """Texts `loads` has seen holding a `\\uD800`-`\\uDFFF` escape (in this process): a
    value parsed since this changed may hold a lone surrogate, which UTF-8 cannot store,
    and is mended before it is (`worldtrace.collectors.importers.convert`); the others,
    nearly all, are not walked for one."""
    return _escaped


def _problem(path: Path, where: str, kind: str, message: str) -> ImportProblem:
    return ImportProblem(str(path), where, kind, message)


_HEAD = 10
"""The first bytes of a file that tell what it is (`_unreadable_start`)."""


def _unreadable_start(path: Path, head: bytes) -> ImportProblem | None:
    """The file-level problem of a file that is not UTF-8 text at all, told by its first
    bytes: compressed, or UTF-16/32 (a byte order mark)."""
    if (why := T.compressed(head, path)) is not None:
        return _problem(path, "", "compressed", why)
    if (why := T.wide(head, path)) is not None:
        return _problem(path, "", "invalid_utf8", why)
    return None


def _decoded(path: Path, data: bytes, n: int) -> str | ImportProblem:
    """`data` (line `n` of the file, or all of it) as text, or where it is not UTF-8."""
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        bad = T.not_utf8(data, exc, path)
        return _problem(path, f"line {n + bad.line - 1}", "invalid_utf8", bad.message)


LOOKS_LIKE_JSONL, NOT_ONE_DOCUMENT = "the file looks like JSONL", ", not one JSON document"
"""How `read_json`'s problem for a JSONL file read as one document begins and ends."""


def read_json(path: Path) -> Any | ImportProblem:
    """The parsed file, or the problem that stops it (unreadable, not UTF-8, empty,
    invalid). A leading UTF-8 byte order mark is passed over."""
    return read_document(path)[0]


def read_document(path: Path) -> tuple[Any | ImportProblem, bytes | None]:
    """`read_json`, and the bytes it read (None: unreadable): a pipe (`/dev/stdin`) is
    read once, and a file that turns out to be JSONL is read by line from them
    (`jsonl_text_lines`)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _problem(path, "", "unreadable", exc.strerror or str(exc)), None
    return _parsed(path, data), data


def _parsed(path: Path, data: bytes) -> Any | ImportProblem:
    if (problem := _unreadable_start(path, data[:_HEAD])) is not None:
        return problem
    text = _decoded(path, data.removeprefix(codecs.BOM_UTF8), 1)
    if isinstance(text, ImportProblem):
        return text
    if not text.strip():  # the whole file, not a line of it (a 0-byte file has none)
        return _problem(path, "", "empty_file", "the file holds no record")
    try:
        return loads(text, "file")
    except BadText as exc:
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
        return isinstance(parse_json(first), dict | list)
    except ValueError:  # TooDeep too
        return False


TRUNCATED_FILE = "(the file may be truncated)"
"""How `loads` (`text.undecodable`) ends the problem of a file whose text ran out."""
_WS = re.compile(r"[ \t\n\r]*")
"""JSON's whitespace."""


def cut_array(raw: bytes) -> tuple[list[Any], int, int] | None:
    """A top-level JSON array cut short (a results file whose writer stopped): its
    complete values, each read as `loads` reads a file, and the line and column where the
    first one that is not starts; None when the text is no array or no value is whole.
    Only for a file `loads` found cut (`TRUNCATED_FILE`): its text is UTF-8."""
    text = raw.removeprefix(codecs.BOM_UTF8).decode()
    pos = _WS.match(text).end()
    if not text.startswith("[", pos):
        return None
    decoder, values = json.JSONDecoder(), []
    pos = _WS.match(text, pos + 1).end()
    while True:
        try:
            _, end = decoder.raw_decode(text, pos)
            values.append(loads(text[pos:end], "file"))  # NaN, depth: as the whole file's
        except (ValueError, RecursionError):  # BadText too: the cut, or a value not read
            break
        pos = _WS.match(text, end).end()
        if not text.startswith(",", pos):
            break  # `]` would have ended a whole array: what is here is the cut
        pos = _WS.match(text, pos + 1).end()
    if not values:
        return None
    return values, *T._position(text, pos)


SNIFF_BYTES = 64 << 20
"""Files up to this size are parsed whole to tell a JSON document from JSONL records."""
FIRST_LINE_BYTES = 1 << 20
"""The most of a file's first line `document_lines` reads: a pretty-printed document's
first line is short, a longer one is a record of its own."""


def document_lines(path: Path) -> int | None:
    """The lines of `path` when it is one JSON document over several lines (pretty-
    printed): its first non-blank line is no JSON value and its whole text is one; None
    for anything else. Only a regular file of up to SNIFF_BYTES is looked at: a pipe is
    read once, by the import."""
    try:
        if not path.is_file() or path.stat().st_size > SNIFF_BYTES:
            return None
        with open(path, "rb") as fh:
            first = b""
            while not first.strip():
                first = fh.readline(FIRST_LINE_BYTES)
                if not first or len(first) >= FIRST_LINE_BYTES:
                    return None
        if parses(first.decode("utf-8-sig", errors="replace")):
            return None
        text = path.read_bytes().decode("utf-8-sig")
        parse_json(text)
    except (OSError, ValueError):  # unreadable, not UTF-8, not one JSON document (TooDeep)
        return None
    return len(LINE_END.split(text.rstrip("\r\n")))


def parses(line: str) -> bool:
    try:
        parse_json(line)
    except ValueError:  # TooDeep too
        return False
    return True


def jsonl_text_lines(
    path: Path, data: bytes | None = None
) -> Iterator[tuple[int, str | ImportProblem]]:
    """(line number, text) of each non-blank line, streamed; a line that is not UTF-8 as
    its problem; a read error part way, a file without any line, or one that is not text
    (`_unreadable_start`) ends it with a problem instead. Lines end at `\\n`, `\\r\\n` or
    a bare `\\r` (LINE_END). `data`: the file's bytes, read already (`read_document`)."""
    seen = False
    try:
        with open(path, "rb") if data is None else io.BytesIO(data) as fh:
            for n, raw in enumerate(T.byte_lines(fh), 1):
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
                    yield parse_json(line)
                except ValueError:  # TooDeep too: no record of any format
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
    except BadText as exc:
        return _problem(path, f"line {n}", "invalid_json", exc.message)
