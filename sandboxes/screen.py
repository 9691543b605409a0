"""The terminal as a person sees it: a pyte screen that keeps what scrolls away.

Stripping ANSI codes and `\\r` from the byte stream turns progress bars and redraws into
junk (`progress 1progress 2progress 3`); a terminal emulator shows what a person saw
(`progress 3`). The observation of a step is the stretch of screen the step wrote, as it
reads once the step ends:

- from the cursor where the keys were typed (the rest of that line: the echo of the
  keys; the whole line if the step redrew its start) to the cursor where the step ended
  (the next prompt), or the last line written below it;
- lines that scrolled off the top on the way included (nothing is lost to the screen's
  height), long lines that wrapped at the margin joined back into one;
- when the step redrew the screen above its start (`clear`, `C-l`, a full-screen
  program), the whole screen as it now stands, after the step's lines that scrolled off;
- text only (colours dropped); trailing blanks dropped, except on the cursor's line up to
  the cursor (a prompt ends in a space).

The alternate screen of full-screen programs (less, vim) is emulated: leaving one
restores the screen it covered, as xterm does, and so does a full reset (RIS, which
`reset` sends) after a program killed on it. Characters pyte's `draw` would stop at,
dropping the rest of the line (`cat` of a binary file, `❤️`, Devanagari), are shown as
xterm shows them: a control (C0, or C1 decoded from UTF-8) as nothing, a zero-width
character joined to the one before it.

Queries a program sends the terminal (cursor position, device status and attributes) are
answered as xterm answers them when it is a VT100 (`decTerminalID: 100`, what `TERM=xterm`
describes): `Terminal.answers` gives the bytes for the pty's input. Without them `resize`,
busybox's line editor, prompt_toolkit and fish waited for an answer that never came.
"""

from __future__ import annotations

import copy
import functools
import re
import unicodedata
from typing import Any

Row = tuple[tuple[str, ...], bool, bool]
ALT_SCREEN = frozenset({47, 1047, 1049})
"""Private modes switching to the alternate screen (pyte keeps one screen only)."""
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]+")
"""Controls, which `draw` never shows: pyte's stream hands it the C0 controls it does
not interpret (all but BEL, BS, HT, LF, VT, FF, CR, SO, SI, ESC; NUL and DEL it drops),
and xterm ignores those."""
C1 = re.compile("[\x80-\x9f]+")
"""C1 controls: decoded from UTF-8, xterm neither shows nor obeys them (its ctlseqs: a
C1 control cannot be obtained from decoding UTF-8), nor do urxvt, tmux or st."""
DA1 = "\x1b[?1;2c"
"""Primary device attributes, xterm's as a VT100: one with advanced video, nothing more.
xterm's default (a VT420) would claim 132 columns, selective erase, a locator and more,
which pyte does not emulate; tmux answers the same for its emulator."""
DA2 = "\x1b[>0;0;0c"
"""Secondary device attributes in xterm's form for a VT100, with no version: programs
(vim, emacs) turn on newer xterm features by it (DCS requests, which pyte would show as
text). XTVERSION (`CSI > q`) is not answered for the same reason, as VTE does not."""
STRINGS = "P_^X"
"""What follows ESC to open a control string (DCS, APC, PM, SOS), which runs to ST (`ESC
\\`): a request (XTGETTCAP `ESC P + q`), tmux's passthrough, sixel and kitty images
(`ESC _ G`). xterm shows none of it and answers none it does not know; pyte drew the body
as text (`ESC P + q 436f ESC \\` showed `+q436f`). Any ESC ends one, as in xterm's
parser (tmux's doubled ESC then starts the sequence it wraps)."""
STRING_ABORTS = "\x18\x1a"
"""CAN and SUB: a control string ends there, its body dropped, as xterm does."""
PREFIXES = "<=>"
"""Characters that begin a CSI's parameters and change what it means (`CSI > c` asks
for DA2, `CSI = c` for DA3, `CSI < u` pops kitty keyboard flags): pyte passes over `>`
and ends the sequence at `<` or `=`, drawing the rest (`ESC[=5u` showed `5u`)."""


@functools.cache
def _zero_width() -> re.Pattern:
    """Runs of the characters wcwidth gives no cell: pyte's `draw` stops at those that
    are no combining mark (ZWJ, variation selectors, spacing marks, Hangul jamo). A class
    with astral ranges is tried range by range (20x slower on text holding none), so a
    class of the BMP ones and of any astral character looks ahead first."""
    import wcwidth

    def ranges(pairs) -> str:
        return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in pairs)

    table = wcwidth.ZERO_WIDTH[wcwidth.list_versions()[-1]]
    bmp = ranges((a, min(b, 0xFFFF)) for a, b in table if a <= 0xFFFF)
    astral = ranges((max(a, 0x10000), b) for a, b in table if b > 0xFFFF)
    return re.compile(f"(?=[{bmp}\U00010000-\U0010ffff])(?:[{bmp}]|[{astral}])+")


@functools.cache
def _screen_class():
    """pyte.Screen that records scrolled-off lines, soft wraps and the alternate screen."""
    from collections import defaultdict

    import pyte
    from pyte import modes as mo
    from pyte.screens import StaticDefaultDict

    class Screen(pyte.Screen):
        def __init__(self, columns: int, lines: int):
            self.gone: list[Row] = []
            """Lines that scrolled off the top since `Terminal.mark`."""
            self.scrolls = 0
            """Lines ever scrolled off the top: screen row y is absolute line scrolls + y."""
            self.cleared = False
            """The whole display was erased since `Terminal.mark`."""
            self._drawing = False
            self._chars: tuple[Any, dict[str, Any]] = (None, {})
            """Cells drawn with the current attributes, by character (shared: immutable)."""
            self._main = None
            self.left_alternate = lambda: None
            """Called when a program leaves the alternate screen (the main one is back)."""
            self.answers: list[str] = []
            """What the terminal answered to queries, for the program's input."""
            self.prefix = ""
            """The `PREFIXES` character of the CSI being dispatched (set by the stream)."""
            super().__init__(columns, lines)

        def write_process_input(self, data: str) -> None:
            self.answers.append(data)

        def report_device_attributes(self, mode: int = 0, private: bool = False, **_) -> None:
            """DA1 (`CSI c`) and DA2 (`CSI > c`); `CSI ? c` (the Linux console's cursor
            shape) and DA3 (`CSI = c`, a VT400's) ask nothing of a VT100."""
            if mode == 0 and not private:
                answer = {"": DA1, ">": DA2}.get(self.prefix)
                if answer:
                    self.write_process_input(answer)

        def report_device_status(self, mode: int = 0, private: bool = False, **_) -> None:
            """Status (`CSI 5 n`) and cursor position (`CSI 6 n`), also as DEC's private
            `CSI ? 6 n` (pyte's raised TypeError at the `private` argument). The column of a
            cursor past the margin (a line drawn to its end, not yet wrapped) is the last one,
            as xterm's; rows count from the top margin in origin mode, from the screen's top
            without margins (pyte's failed an assertion)."""
            if self.prefix:  # `CSI > Ps n` resets xterm's key modifiers: no query
                return
            lead = "?" if private else ""
            if mode == 5:
                self.write_process_input(f"\x1b[{lead}0n")
            elif mode == 6:
                y, x = self.cursor.y + 1, min(self.cursor.x, self.columns - 1) + 1
                if mo.DECOM in self.mode and self.margins is not None:
                    y -= self.margins.top
                self.write_process_input(f"\x1b[{lead}{y};{x}R")

        def reset(self) -> None:
            """RIS (`ESC c`, which `reset` sends first) as xterm does it: back on the main
            screen (a program killed on the alternate one left it there), cleared, modes,
            margins and character sets as at start (pyte's part), the saved cursor at home.
            The lines the step printed that scrolled off stay in its observation, as
            after `clear`."""
            if self._main is not None:
                self.buffer, self.cursor, _ = self._main
                self._main = None
                self.left_alternate()
            super().reset()
            self.g1_charset = self.g0_charset  # xterm's G1 is ASCII too (pyte's: line
            # drawing, which a stray SO in binary output would turn every letter into)
            self.savepoints = []  # pyte keeps them; xterm saves the home cursor instead
            self.save_cursor()
            self.cleared = True

        def draw(self, data: str) -> None:
            self._drawing = True
            try:
                text = data.translate(self.g1_charset if self.charset else self.g0_charset)
                if not (text.isascii() and text.isprintable()):
                    text = CONTROLS.sub("", text)
                plain = text.isascii() and text.isprintable() and mo.IRM not in self.mode
                if plain and mo.DECAWM in self.mode:
                    self._draw_ascii(text)
                else:
                    self._draw_text(text)
            finally:
                self._drawing = False

        def _draw_text(self, text: str) -> None:
            """pyte's `draw` between runs of zero-width characters, which join the
            character before them: pyte's own would stop at most of them."""
            start = 0
            for m in _zero_width().finditer(text):
                super().draw(text[start : m.start()])
                self._join(m.group())
                start = m.end()
            super().draw(text[start:])

        def _join(self, marks: str) -> None:
            """Zero-width characters onto the cell before the cursor, as pyte joins a
            combining mark (a ZWJ sequence, `❤️`, `नमः` read as they were printed)."""
            x, y = self.cursor.x, self.cursor.y
            if x:
                line, x = self.buffer[y], x - 1
            elif y and getattr(self.buffer[y], "wrapped", False):
                line, x = self.buffer[y - 1], self.columns - 1
            else:  # a line's first character (a BOM): nothing to join, and it shows
                return  # nothing (pyte would put it after the blanks of the line above)
            last = line[x]
            line[x] = last._replace(data=unicodedata.normalize("NFC", last.data + marks))

        def _draw_ascii(self, text: str) -> None:
            """pyte's `draw` for printable ASCII, one cell object per distinct character
            instead of one per character: 5x faster on floods (measured), same cells."""
            attrs, i = self.cursor.attrs, 0
            if self._chars[0] != attrs:
                self._chars = (attrs, {})
            chars = self._chars[1]
            while i < len(text):
                if self.cursor.x >= self.columns:
                    self.carriage_return()
                    self.linefeed()
                line, x = self.buffer[self.cursor.y], self.cursor.x
                chunk = text[i : i + self.columns - x]
                for ch in chunk:
                    line[x] = chars.get(ch) or chars.setdefault(ch, attrs._replace(data=ch))
                    x += 1
                self.cursor.x, i = x, i + len(chunk)
            self.dirty.add(self.cursor.y)

        def linefeed(self) -> None:
            wrapped = self._drawing  # inside draw, a line feed means text reached the margin
            super().linefeed()
            self.buffer[self.cursor.y].wrapped = wrapped

        def index(self) -> None:
            top, bottom = self.margins or (0, self.lines - 1)
            if self.cursor.y == bottom and top == 0 and self._main is None:
                line = self.buffer[0]
                self.gone.append(row(line, self.columns))
                self.scrolls += 1
            super().index()

        def erase_in_display(self, how: int = 0, *args, **kwargs) -> None:
            super().erase_in_display(how, *args, **kwargs)
            if how in (2, 3):
                self.cleared = True
                for line in self.buffer.values():
                    line.wrapped = False

        def set_mode(self, *modes: int, **kwargs) -> None:
            if kwargs.get("private") and ALT_SCREEN & set(modes) and self._main is None:
                self._main = (self.buffer, copy.copy(self.cursor), self.cleared)
                self.buffer = defaultdict(lambda: StaticDefaultDict(self.default_char))
                self.cleared = True
            super().set_mode(
                *(m for m in modes if not kwargs.get("private") or m not in ALT_SCREEN), **kwargs
            )

        def reset_mode(self, *modes: int, **kwargs) -> None:
            if kwargs.get("private") and ALT_SCREEN & set(modes) and self._main is not None:
                self.buffer, self.cursor, self.cleared = self._main
                self._main = None
                self.left_alternate()
            super().reset_mode(
                *(m for m in modes if not kwargs.get("private") or m not in ALT_SCREEN), **kwargs
            )

    return Screen


@functools.cache
def _stream_class():
    """pyte.ByteStream that drops the C1 controls it decodes from UTF-8 (`C1`): pyte
    would obey U+009B as CSI and U+009D as OSC and swallow the text after them. It also
    obeys the character set designations (`ESC ( 0`, SI/SO) in UTF-8, as xterm does: pyte
    ignores them there, and ncurses draws its boxes (`box()`, dialog, mc) with DEC's line
    drawing set under TERM=xterm, so the screen read `lqqk` where a person sees `┌──┐`."""
    import pyte

    class ByteStream(pyte.ByteStream):
        escape = {**pyte.ByteStream.escape, "Z": "report_device_attributes"}
        """DECID (`ESC Z`), which xterm answers as DA1."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.decode_utf8 = True
            """Whether `feed` decodes UTF-8 (`ESC % G`, the default) or Latin-1 (`ESC % @`),
            which pyte keeps in `use_utf8`; that is False for its parser, which then obeys
            `ESC (`/`ESC )` and SI/SO (they touch nothing but the character sets)."""
            self.use_utf8 = False

        def select_other_charset(self, code: str) -> None:
            if code == "@":
                self.decode_utf8 = False
                self.utf8_decoder.reset()
            elif code in "G8":
                self.decode_utf8 = True

        def _initialize_parser(self) -> None:
            self._esc, self._csi, self._string = False, None, False  # see `_send_to_parser`
            super()._initialize_parser()

        def _send_to_parser(self, char: str) -> bool | None:
            """pyte's parser, told the `PREFIXES` character of a CSI (`Screen.prefix`, for
            the query it dispatches), which `<` and `=` do not reach; the body of a control
            string (`STRINGS`) it never sees."""
            if self._string:
                if char in STRING_ABORTS:
                    self._string = False
                    return True
                if char != "\x1b":
                    return None  # swallowed, one character at a time (no plain-text run)
                self._string = False  # ESC ends it (`ESC \\`, ST) and starts a sequence
            elif self._esc and char in STRINGS:
                self._parser.send(char)  # pyte's no-op for an unknown escape: ground
                self._esc, self._string = False, True
                return None
            elif self._esc and char == "\x1b":  # ESC ESC: the second starts anew, as in
                self._initialize_parser()  # xterm (pyte took it for the first's final)
            if self._csi is not None:
                if char in PREFIXES:
                    if not self._csi:
                        self._csi = self.listener.prefix = char
                    if char != ">":
                        return None
            elif char == "[" and self._esc:
                self._csi = ""
            self._esc = char == "\x1b"
            try:  # pyte's own, inlined: one call per character of every sequence
                ground = self._parser.send(char)
            except Exception:
                self._initialize_parser()  # usable after the error, as pyte's
                raise
            if ground:  # the sequence ended
                if self._csi:
                    self.listener.prefix = ""
                self._csi, self._esc = None, False
            return ground

        def feed(self, data: bytes) -> None:
            if self.decode_utf8:
                text = self.utf8_decoder.decode(data)
                pyte.Stream.feed(self, text if text.isascii() else C1.sub("", text))
            else:
                pyte.Stream.feed(self, data.decode("latin-1"))

    return ByteStream


def cells(line, columns: int) -> tuple[str, ...]:
    """The text of each column of a screen line ("" for the second half of a wide char)."""
    out = [line.default.data] * columns
    for x, char in line.items():
        if x < columns:
            out[x] = char.data
    return tuple(out)


def row(line, columns: int) -> Row:
    """A screen line as (cells, continues the line above, its last column was written):
    a soft wrap joins two rows only when the upper one was written to the margin."""
    return cells(line, columns), getattr(line, "wrapped", False), (columns - 1) in line


class Terminal:
    """A screen fed with a shell's bytes: `mark` starts a step, `observation` reads it."""

    def __init__(self, columns: int = 80, lines: int = 24):
        self.screen = _screen_class()(columns, lines)
        self.screen.left_alternate = self._left_alternate
        self.stream = _stream_class()(self.screen)
        self.mark()

    def feed(self, data: bytes) -> None:
        self.stream.feed(data)

    def answers(self) -> bytes:
        """The terminal's answers to the queries fed since the last call, in order: bytes
        for the program's input, as a terminal writes them to the pty."""
        s = self.screen
        if not s.answers:
            return b""
        data = "".join(s.answers).encode()
        s.answers.clear()
        return data

    def _row(self, a: int) -> Row:
        """Cells and soft-wrap flag of absolute line `a` (scrolled off or on screen)."""
        s = self.screen
        if a < s.scrolls:
            return s.gone[a - self._base]
        return row(s.buffer[a - s.scrolls], s.columns)

    def mark(self) -> None:
        """Start a step here: remember the cursor and the screen above it."""
        s = self.screen
        s.gone.clear()
        s.cleared = False
        self._base, self._y0, self._x0 = s.scrolls, s.cursor.y, s.cursor.x
        self._above = [self._row(self._base + y)[0] for y in range(self._y0)]
        self._prefix = self._row(self._base + self._y0)[0][: self._x0]
        self._alternate = s._main is not None

    def _left_alternate(self) -> None:
        if self._alternate:  # the step began in a full-screen program: it continues from
            self.mark()  # where the main screen's cursor was when the program started

    def _redrawn(self) -> bool:
        s = self.screen
        if s.cleared:
            return True
        start = self._base + self._y0
        return any(
            self._row(a)[0] != self._above[a - self._base]
            for a in range(max(s.scrolls, self._base), start)
        )

    def observation(self) -> str:
        """What the step printed or changed, as the screen shows it (see the module doc)."""
        s = self.screen
        start = self._base + self._y0
        cursor = s.scrolls + s.cursor.y
        written = [y for y in range(s.lines) if any(c.data.strip() for c in s.buffer[y].values())]
        last = max([s.cursor.y, *written])  # the last row with text, or the cursor's
        if self._redrawn():
            first = [self._row(a) for a in range(start, s.scrolls)]
            rows = first + [self._row(s.scrolls + y) for y in range(last + 1)]
            return self._join(rows, len(first) + s.cursor.y, 0)
        end = max(start, s.scrolls + last)
        rows = [self._row(a) for a in range(start, end + 1)]
        skip = self._x0 if rows[0][0][: self._x0] == self._prefix else 0
        return self._join(rows, cursor - start, skip)

    def _join(self, rows: list[Row], at: int, skip: int) -> str:
        """Rows as text: wrapped rows joined, trailing blanks dropped except up to the cursor
        (row `at`), the first `skip` columns of the first row left out."""
        joined = [i > 0 and wrapped and rows[i - 1][2] for i, (_, wrapped, _) in enumerate(rows)]
        lines: list[list[str]] = []
        for i, (line, _, _) in enumerate(rows):
            cols = line[skip:] if i == 0 else line
            text = "".join(cols)
            if i + 1 == len(rows) or not joined[i + 1]:  # a row wrapped at the margin keeps
                text = text.rstrip()  # its last blank: it is inside the line
            if i == at:  # the cursor's line keeps its blanks up to the cursor; one moved
                # left of where the step began (C-a, Home) keeps none: a negative slice
                # kept all but the last blanks of the row (46 spaces for a C-a)
                upto = "".join(cols[: max(self.screen.cursor.x - (skip if i == 0 else 0), 0)])
                text = upto if len(upto) > len(text) else text
            if joined[i]:
                lines[-1].append(text)
            else:
                lines.append([text])
        return "\n".join("".join(parts) for parts in lines)

    def cursor_text(self) -> str:
        """The logical line the cursor is on, up to the cursor (wrapped rows joined)."""
        s = self.screen
        y = s.cursor.y
        parts = ["".join(cells(s.buffer[y], s.columns)[: s.cursor.x])]
        while (
            y > 0 and getattr(s.buffer[y], "wrapped", False) and (s.columns - 1) in s.buffer[y - 1]
        ):
            y -= 1
            parts.insert(0, "".join(cells(s.buffer[y], s.columns)))
        return "".join(parts)
