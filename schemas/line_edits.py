"""A terminal's raw stream as its lines end up shown, each character traced to the raw
text it came from: what redaction reads where a shell's line editor cut a value.

Readline draws a typed line as edits, not as the text: past the right margin it writes
a space and `\\r` to wrap (`...QRST \\rUVWX...`), a corrected key is the key, a
backspace, an erase and the new key (`X\\b\\e[K9`), a cursor moved back rewrites the
rest of the line. A token typed that way is in no piece of the raw stream a rule
matches. `edited` replays those edits on a model of the line (cursor, rows of a wrapped
line) and returns the text as shown with, for every character, where in the raw text it
was written; a secret found there is replaced in the raw text from the first of its
characters to the last, the edits between included (`redact.Redactor.spans`).

The raw stream is read as it stands (`\\x08`, `\\r`, ESC) or as JSON text (`\\b`,
`\\r`, `\\u001b`: a stream kept in `state_json`). Hand-written: terminal emulators
(pyte, the screen's) render cells but keep no trace from a cell to the byte that drew
it. The model knows no screen width, only the wraps readline marks; a redraw it does not
follow (a full-screen program) leaves that text as the other views read it.
"""

from __future__ import annotations

import bisect
import re

_TOKEN = re.compile(
    r"(?P<esc>(?:\x1b|\\u001[bB])"
    r"(?:\[(?P<p>[0-?]*)[ -/]*(?P<f>[@-~])"  # CSI: cursor moves, erases, colours, modes
    r"|\][^\x07\x1b\n]{0,512}?(?:\x07|\\u0007|\x1b\\|\\u001[bB]\\\\)"  # OSC ... BEL, ST
    r"|[()*+][A-Za-z0-9]|[=>78DEHMNOZc]))"  # character sets, two-character ones
    r"|(?P<bs>\x08|\\b|\\u0008)"
    r"|(?P<rubout>\x7f|\\u007[fF])"
    r"|(?P<cr>\r|\\r)"
    r"|(?P<lf>\n|\\n)"
    r"|(?P<lit>\\u[0-9a-fA-F]{4}|\\.)"  # another JSON escape: one character shown
    r"|(?P<quote>\")"
    r"|(?P<run>[^\x1b\x08\x7f\r\n\\\"]+|\\)"
)
TRIGGER = re.compile(
    r"[\x08\x7f]|[ ](?:\r|\\r)|\\(?:b|u0008|u007[fF]|u001[bB]\[[0-9;]*[@ABCDGP])"
    r"|\x1b\[[0-9;]*[@ABCDGP]"
)
"""What a text holds if a line editor drew in it, or keys typed into one hold: a
backspace, a rubout (the Backspace key as typed, DEL), readline's wrap (a space and
`\\r`), a CSI moving the cursor or inserting or deleting characters. Without one, the
text is shown as it stands with its escape sequences taken out (`\\r` alone goes back
over a progress bar, erasing to the end of the line is then a no-op)."""
_EDITS = frozenset("@ABCDGKP")
"""CSI finals the model follows: insert, up, down, right, left, column, erase, delete."""
_SHOWN = frozenset({"run", "lit"})


def may_be_edited(text: str) -> bool:
    """Whether `text` holds an edit (`TRIGGER`): `edited` may read it otherwise than with
    its escape sequences merely taken out."""
    return TRIGGER.search(text) is not None


class _Line:
    """One line being drawn: its cells (shown text, raw start, raw end), the cursor and
    where each row of a wrapped line starts."""

    __slots__ = ("cells", "cursor", "row", "rows")

    def __init__(self) -> None:
        self.cells: list[tuple[str, int, int]] = []
        self.cursor = 0
        self.rows = [0]
        self.row = 0

    def put(self, text: str, start: int, end: int) -> None:
        """Draw one cell at the cursor. A cell drawn over keeps where its first drawing
        began: readline redraws the rest of a line after a key put in, and the first
        drawing (the token without that key) is part of what a secret there spans."""
        c = self.cursor
        if c < len(self.cells):
            self.cells[c] = (text, min(start, self.cells[c][1]), end)
        else:
            self.cells.append((text, start, end))
        self.cursor = c + 1

    def run(self, text: str, start: int) -> None:
        c, cells = self.cursor, self.cells
        if c == len(cells):  # the common case: text appended
            cells.extend((ch, start + i, start + i + 1) for i, ch in enumerate(text))
            self.cursor = len(cells)
            return
        for i, ch in enumerate(text):
            self.put(ch, start + i, start + i + 1)

    def wrap(self) -> None:
        """Readline's wrap: the space just written opened the next row, `\\r` went to
        its start; the next character overwrites the space."""
        self.rows.append(len(self.cells) - 1)
        self.row = len(self.rows) - 1
        self.cursor = self.rows[-1]

    def _margin(self) -> int:
        """The last cell the cursor can reach on its row: a wrapped row ends where the
        next begins (its width), the last row at the line's end."""
        rows = self.rows
        return rows[self.row + 1] - 1 if self.row + 1 < len(rows) else len(self.cells)

    def csi(self, params: str, final: str, at: int) -> None:
        n = int(params) if params.isdigit() else (0 if final == "K" else 1)
        start = self.rows[self.row]
        if final == "D":
            self.cursor = max(start, self.cursor - n)
        elif final == "C":
            self.cursor = min(self._margin(), self.cursor + n)
        elif final == "G":
            self.cursor = min(self._margin(), start + max(n, 1) - 1)
        elif final == "K":
            if n == 0:
                del self.cells[self.cursor :]
            elif n == 2:
                del self.cells[start:]
                self.cursor = min(self.cursor, len(self.cells))
        elif final == "P":
            del self.cells[self.cursor : self.cursor + n]
        elif final == "@":
            self.cells[self.cursor : self.cursor] = [(" ", at, at)] * n
        elif final in "AB":
            column = self.cursor - start
            self.row = max(0, min(len(self.rows) - 1, self.row + (n if final == "B" else -n)))
            self.cursor = min(self._margin(), self.rows[self.row] + column)


class Edited:
    """A text as shown (`text`) and the map from its spans to the raw text's (`raw_span`).

    A cell is (shown text, raw start, raw end): one character of a line that was edited,
    a whole run of one that was not (its text the raw text's, character for character)."""

    __slots__ = ("_cells", "_starts", "text")

    def __init__(self, cells: list[tuple[str, int, int]]):
        self.text = "".join(c[0] for c in cells)
        self._cells = cells
        starts, n = [], 0
        for c in cells:
            starts.append(n)
            n += len(c[0])
        self._starts = starts

    def raw_span(self, start: int, end: int) -> tuple[int, int]:
        """The raw text's span from the first character that drew `text[start:end]` to
        the last (a cell drawn over counts from where it was first drawn)."""
        lo = bisect.bisect_right(self._starts, start) - 1
        hi = bisect.bisect_left(self._starts, end)
        cells = self._cells[lo:hi]
        first, last = cells[0], cells[-1]
        if len(first[0]) == first[2] - first[1]:  # a run: the character itself
            first = (first[0], first[1] + start - self._starts[lo], first[2])
        if len(last[0]) == last[2] - last[1]:
            last = (last[0], last[1], last[2] - (self._starts[hi - 1] + len(last[0]) - end))
        ends = [first, *cells[1:-1], last] if len(cells) > 1 else [(*first[:2], last[2])]
        return min(c[1] for c in ends), max(c[2] for c in ends)


_LINE_ENDS = re.compile(r'\n|\\n|(?<!\\)"')
"""Where a line ends: a newline, raw or in JSON, or a quote (`edited`)."""


def edited(text: str) -> Edited:
    """`text` as a terminal shows it once the line editor's edits are applied: the lines
    `TRIGGER` finds an edit in are replayed, the rest stands as it is (the other views
    read it; ~1 ms for 15 KB of `ls` with one corrected key).

    A quote ends a line too: in JSON text (a `state_json`) what follows a stream's closing
    quote is the document's, not drawn at the stream's cursor, and a text read alone must
    read as it does among a record's strings joined (`Redactor.value_counts`). In a raw
    stream a quote is only a character, and a line cut there loses nothing a rule needs."""
    hits = [m.start() for m in TRIGGER.finditer(text)]
    if not hits:
        return Edited([(text, 0, len(text))] if text else [])
    cuts = [m.end() for m in _LINE_ENDS.finditer(text)]  # where each line after the first starts
    out: list[tuple[str, int, int]] = []
    pos = 0
    for line in sorted({bisect.bisect_right(cuts, h) for h in hits}):
        a = cuts[line - 1] if line else 0
        b = cuts[line] if line < len(cuts) else len(text)
        if a > pos:
            out.append((text[pos:a], pos, a))
        out += _replay(list(_TOKEN.finditer(text, a, b)))
        pos = b
    if pos < len(text):
        out.append((text[pos:], pos, len(text)))
    return Edited(out)


def _replay(tokens: list[re.Match]) -> list[tuple[str, int, int]]:
    """The cells of a line's tokens as its edits leave it. A line end among them (a quote
    after an escaped backslash, which `_LINE_ENDS` does not cut at) ends the line there."""
    kinds = ["lf" if m.lastgroup == "quote" else m.lastgroup for m in tokens] + [None]
    out: list[tuple[str, int, int]] = []
    line = _Line()
    for k, m in enumerate(tokens):
        kind, a = kinds[k], m.start()
        if kind == "run":
            line.run(m.group(), a)
        elif kind == "lit":
            line.put(m.group(), a, m.end())
        elif kind == "lf":
            out += [*line.cells, (m.group(), a, m.end())]
            line = _Line()
        elif kind == "bs":
            line.cursor = max(line.rows[line.row], line.cursor - 1)
        elif kind == "rubout" and line.cursor > line.rows[line.row]:  # typed: erases
            line.cursor -= 1
            del line.cells[line.cursor]
        elif kind == "cr" and kinds[k + 1] != "lf":
            wrap = (  # readline's: a space written at the line's end, `\r`, more text
                kinds[k + 1] in _SHOWN
                and k > 0
                and kinds[k - 1] == "run"
                and tokens[k - 1].group().endswith(" ")
                and line.cursor == len(line.cells)
            )
            if wrap:
                line.wrap()
            else:
                line.cursor = line.rows[line.row]
        elif kind == "esc" and m.group("f") in _EDITS and m.group("p") is not None:
            line.csi(m.group("p"), m.group("f"), a)
    return out + line.cells
