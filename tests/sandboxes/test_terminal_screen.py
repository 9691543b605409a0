"""The terminal observed through an emulator: the screen a person saw, nothing lost."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.screen import Terminal
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

PROMPT = b"user@sandbox:~$ "


def steps(*chunks: bytes) -> list[str]:
    """Feed each chunk as one step of a fresh 80x24 screen; the observation of each."""
    t = Terminal(80, 24)
    out = []
    for chunk in chunks:
        t.mark()
        t.feed(chunk)
        out.append(t.observation())
    return out


def test_step_reads_from_the_keys_to_the_cursor():
    first, ls = steps(PROMPT, b"ls\r\na  b\r\n" + PROMPT)
    assert first == "user@sandbox:~$ "
    assert ls == "ls\na  b\nuser@sandbox:~$ "  # the echo, the output, the next prompt


def test_soft_wraps_are_joined_and_hard_lines_are_not():
    [_, o] = steps(PROMPT, b"x" * 63 + b" ; echo rc\r\nrc\r\n" + PROMPT)
    assert o.splitlines()[0] == "x" * 63 + " ; echo rc"  # the blank at the margin stays
    [o] = steps(b"y" * 80 + b"\r\nz\r\n" + PROMPT)
    assert o.splitlines()[:2] == ["y" * 80, "z"]  # a line of exactly 80 ends there


def test_clear_and_full_screen_programs_show_the_screen():
    _, clear = steps(PROMPT, b"clear\r\n\x1b[H\x1b[2J\x1b[3J" + PROMPT)
    assert clear == "user@sandbox:~$ "
    _, less, quit_ = steps(
        PROMPT,
        b"less f\r\n\x1b[?1049h\x1b[H\x1b[2Jcontent of f\r\n~\r\n(END)",
        b"\r\x1b[K\x1b[?1049l" + PROMPT,
    )
    assert less == "content of f\n~\n(END)"
    assert quit_ == "user@sandbox:~$ "  # the screen less covered is back; the prompt is new


def test_scrolled_off_output_is_kept():
    body = b"".join(b"%d\r\n" % i for i in range(1, 201))
    [_, o] = steps(PROMPT, b"seq 200\r\n" + body + PROMPT)
    assert o.splitlines() == ["seq 200", *map(str, range(1, 201)), "user@sandbox:~$ "]


@pytest.mark.docker
def test_progress_bar_reads_as_its_last_state(term):
    cmd = "for i in 1 2 3; do printf '\\rprogress %d' $i; sleep 0.1; done; echo\n"
    o = term.step(keystrokes(cmd))
    assert o.text.splitlines()[1:] == ["progress 3", "user@sandbox:~$ "]
    assert "progress 1" not in o.text
    raw = json.loads(o.state_json)["raw"]  # the byte stream is kept beside the screen
    assert "\rprogress 1\rprogress 2\rprogress 3" in raw


@pytest.mark.docker
def test_clear_colour_and_long_output_in_a_real_shell(term):
    o = term.step(keystrokes("printf '\\033[1;31mred\\033[0m plain\\n'\n"))
    assert o.text.splitlines()[1:] == ["red plain", "user@sandbox:~$ "]
    o = term.step(keystrokes("clear\n"))
    assert o.text == "user@sandbox:~$ "
    o = term.step(keystrokes("seq 1 500\n"))
    assert o.text.splitlines() == ["seq 1 500", *map(str, range(1, 501)), "user@sandbox:~$ "]
    o = term.step(keystrokes(f"echo {'z' * 150}\n"))
    assert o.text.splitlines()[1] == "z" * 150  # wrapped at 80 columns on screen, one line here
    assert term.describe()["initial_state"].splitlines()[3] == "Terminal: xterm, 80x24"


@pytest.mark.docker
def test_first_turn_answers_its_own_keys_in_busybox(docker_engine):
    """The pty has its size before the shell starts: sized under a shell at its prompt,
    busybox's line editor redrew the prompt, and that late prompt ended the first step
    before its keys were echoed (1 episode in 10): every turn then answered the one before."""
    s = TerminalSandbox(
        TerminalConfig(docker=DockerConfig(image="worldtrace/busybox:latest", step_timeout=20))
    )
    try:
        for i in range(30):
            s.reset(TaskSpec("t"))
            o = s.step(keystrokes(f"echo first{i}; stty size\n", duration=5))
            assert o.text == f"echo first{i}; stty size\nfirst{i}\n24 80\nuser@sandbox:~$ ", i
    finally:
        s.close()
