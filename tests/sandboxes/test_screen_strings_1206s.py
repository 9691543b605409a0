"""Control strings (DCS, APC, PM, SOS) a program writes are no text (left by the 12-06
notes, reproduced). pyte passes over `ESC P`, `ESC _`, `ESC ^` and `ESC X` and drew the
string's body: XTGETTCAP's request showed `+q436f`, a kitty image probe `Gi=31;...`,
tmux's passthrough `tmux;` and the `]0;x` of the sequence it wraps, a sixel image its
palette. xterm shows none of it; an ESC ends the string (tmux doubles the ESCs it wraps,
so the wrapped sequence runs), CAN or SUB drop it. Real pyte, and a real shell in a real
container."""

from __future__ import annotations

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.screen import Terminal

from .test_terminal_queries_1206z import terminal


def shown(*chunks: bytes) -> str:
    t = Terminal(80, 10)
    for chunk in chunks:
        t.feed(chunk)
    return t.observation()


@pytest.mark.parametrize(
    "string",
    [
        b"\x1bP+q436f\x1b\\",  # XTGETTCAP, what vim and neovim ask a newer xterm
        b"\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\",  # kitty graphics' support probe
        b"\x1bPq#0;2;0;0;0#0!10~-\x1b\\",  # a sixel image
        b"\x1b^private message\x1b\\",  # PM
        b"\x1bXstart of string\x1b\\",  # SOS
    ],
    ids=["xtgettcap", "kitty-apc", "sixel", "pm", "sos"],
)
def test_a_control_string_shows_nothing(string):
    assert shown(b"before " + string + b"after\r\nnext") == "before after\nnext"


def test_a_string_split_across_reads_is_still_one():
    assert shown(b"a\x1bPq#0;2", b";0;0;0#0!10~", b"-\x1b", b"\\b") == "ab"


def test_tmux_passthrough_runs_the_sequence_it_wraps():
    """`ESC P tmux; ESC ESC [1m ESC \\`: the doubled ESC ends the string and starts the
    wrapped sequence (bold: no text), as in xterm's parser."""
    assert shown(b"a\x1bPtmux;\x1b\x1b[1m\x1b\\b\x1b\x1b]0;title\x07c") == "abc"


def test_can_and_sub_end_a_string_and_drop_it():
    assert shown(b"a\x1bPq#0;2\x18b\x1b_Gx\x1ac") == "abc"


def test_a_shell_printing_a_control_string_shows_only_its_text(docker_engine):
    s = terminal()
    try:
        o = s.step(keystrokes("printf 'x\\033P+q436f\\033\\\\y\\033_Gi=1;AAAA\\033\\\\z\\n'\n"))
        assert o.text.splitlines()[1] == "xyz", o.text
    finally:
        s.close()
