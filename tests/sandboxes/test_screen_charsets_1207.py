"""Line drawing (found in a collection hunt, 12-07): a TUI's boxes were recorded as the
letters `lqqk` / `x`. ncurses draws them under TERM=xterm with DEC's special graphics set
(`ESC ( 0`, terminfo's `smacs`), which xterm shows as `┌──┐` in UTF-8 too; pyte ignores
the designation in UTF-8. Our emulator now obeys it as xterm does, and keeps xterm's G1
(ASCII), so a stray SO in binary output does not turn every letter into a glyph."""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.screen import Terminal

PROMPT = "user@sandbox:~$ "


@pytest.mark.docker
def test_a_box_drawn_with_the_terminals_own_line_drawing_reads_as_a_box(term):
    """terminfo's `smacs`/`rmacs` for the sandbox's TERM, as ncurses' `box()` sends them."""
    cmd = "tput smacs; printf 'lqqk\\nx  x\\nmqqj\\n'; tput rmacs; echo lqqk\n"
    o = term.step(keystrokes(cmd, duration=10))
    assert o.text == f"{cmd}┌──┐\n│  │\n└──┘\nlqqk\n{PROMPT}", o.text


def test_designations_and_shifts_as_xterm_reads_them():
    t = Terminal(40, 6)
    t.feed(b"\x1b)0\x0elqk\x0f ok \xe2\x94\x8c\r\n")  # G1 designated, shifted in and out
    t.feed(b"\x0eplain\x0f\r\n")  # G1 is line drawing now: as xterm shows it
    t.feed(b"\x1bc")  # RIS: G1 back to ASCII
    t.feed(b"caf\xc3\xa9 \x0eabc\x0f\r\n")  # a stray SO changes no letter
    assert t.observation() == "café abc\n"
    t = Terminal(40, 6)
    t.feed(b"\x1b)0\x0elqk\x0f ok \xe2\x94\x8c\r\n\x0eplain\x0f")
    assert t.observation() == "┌─┐ ok ┌\n⎻┌▒␋┼"
