"""Terminal queries answered as xterm answers them (found 12-06, z).

Found: the docker terminal answered no query a program sends its terminal. `printf
'\\033[6n'` then `read -d R` (what `resize` and prompt scripts do) got nothing and waited
out its timeout; so did Primary Device Attributes (`ESC[c`, which fish waits for) and
DSR 5. Busybox's line editor asks the cursor position after every prompt: unanswered, it
wrapped a long command line where it thought the margin was (after `echo -n nonl` four
columns late). DEC's `ESC[?6n`, `ESC[?5n` (pyte: TypeError) and `ESC[6n` in origin mode
without margins (pyte: AssertionError) crashed the step; `ESC[=5u` (fish's kitty
keyboard flags) drew `5u`. Now the screen answers as xterm does when it is a VT100 (what
`TERM=xterm` describes) on the pty's input: never in the agent's keys, shown only where
the pty echoes it (as on any terminal).
"""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.screen import Terminal
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox

ASK = r"""import os, select, sys, termios, tty
fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
def ask(query, end):
    os.write(1, query)
    got = b""
    while not got.endswith(end) and select.select([fd], [], [], 5)[0]:
        got += os.read(fd, 1)
    return got
try:
    got = [
        ask(b"\033[c", b"c"), ask(b"\033[5n", b"n"), ask(b"\033[>c", b"c"),
        ask(b"\033[10;1H" + b"x" * 80 + b"\033[6n", b"R"), ask(b"\033[?6n", b"R"),
        ask(b"\033[?6h\033[3;4H\033[6n\033[?6l", b"R"),
        ask(b"\033[?1049h\033[7;9H\033[6n", b"R") + ask(b"\033[?1049l\033[6n", b"R"),
    ]
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, old)
print("\033[H\033[2J" + " ".join(g.decode().replace("\033", "E") for g in got))
"""


def terminal(image: str = "worldtrace/debian:latest") -> TerminalSandbox:
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(image=image, step_timeout=20)))
    try:
        s.reset(TaskSpec("t"))
    except BaseException:
        s.close()
        raise
    return s


def answers(data: bytes, columns: int = 80, lines: int = 24) -> tuple[bytes, str]:
    t = Terminal(columns, lines)
    t.feed(data)
    return t.answers(), t.observation()


@pytest.mark.parametrize(
    ("data", "answer"),
    [
        (b"\x1b[6n", b"\x1b[1;1R"),
        (b"ab\r\n\tc\x1b[6n", b"\x1b[2;10R"),  # 1-based
        (b"x" * 80 + b"\x1b[6n", b"\x1b[1;80R"),  # at the margin, not wrapped yet
        (b"x" * 85 + b"\x1b[6n", b"\x1b[2;6R"),  # soft-wrapped
        (b"\r\n" * 40 + b"ab\x1b[6n", b"\x1b[24;3R"),  # scrolled
        (b"\x1b[5;10r\x1b[?6h\x1b[2;3H\x1b[6n", b"\x1b[2;3R"),  # origin mode: from the margin
        (b"\x1b[5;10r\x1b[2;3H\x1b[6n", b"\x1b[2;3R"),
        (b"\x1b[?6h\x1b[4;5H\x1b[6n", b"\x1b[4;5R"),  # origin mode, no margins
        (b"\x1b[3;3H\x1b[?1049h\x1b[7;8H\x1b[6n\x1b[?1049l\x1b[6n", b"\x1b[7;8R\x1b[3;3R"),
        (b"\x1b[?6n", b"\x1b[?1;1R"),  # DECXCPR, VT100 level: no page
        (b"\x1b[5n", b"\x1b[0n"),
        (b"\x1b[?5n", b"\x1b[?0n"),
        (b"\x1b[c\x1b[0c", b"\x1b[?1;2c" * 2),
        (b"\x1bZ", b"\x1b[?1;2c"),  # DECID
        (b"\x1b[>c\x1b[>0c", b"\x1b[>0;0;0c" * 2),
    ],
)
def test_queries_are_answered_as_xterm_as_a_vt100(data, answer):
    assert answers(data)[0] == answer


@pytest.mark.parametrize(
    "data",
    [
        b"\x1b[=c",  # DA3: a VT400's
        b"\x1b[>0q",  # XTVERSION: not claimed (see screen.DA2)
        b"\x1b[?6c",  # the Linux console's cursor shape
        b"\x1b[1c\x1b[>1c",
        b"\x1b[?15n\x1b[?25n",  # VT220 statuses
        b"\x1b[>4;2m\x1b[>5n\x1b[?u\x1b[?2004$p",  # modifyOtherKeys, kitty and DECRQM
        b"\x1b]0;title [=c\x07",
    ],
)
def test_other_sequences_get_no_answer(data):
    assert answers(b"a" + data + b"b") == (b"", "ab")


def test_a_query_split_between_reads_is_answered_once_whole():
    t = Terminal()
    for part in (b"\x1b", b"[", b">", b"c\x1b[", b"=", b"5u\x1b[<", b"u\x1b[6", b"n"):
        t.feed(part)
    assert (t.answers(), t.answers(), t.observation()) == (b"\x1b[>0;0;0c\x1b[1;1R", b"", "")


def test_kitty_keyboard_flags_draw_nothing():
    """Found: `ESC[=5u` (fish 4 sets kitty keyboard flags) drew `5u`, `ESC[<u` a `u`."""
    t = Terminal()
    t.feed(b"a\x1b[=5ub\x1b[<uc\x1b[>1ud")
    assert t.observation() == "abcd"


@pytest.mark.docker
def test_bash_reads_the_cursor_position(docker_engine):
    """The report's case: `read` with the query as its prompt (printed once echo is off)
    got nothing and waited out `-t 5`. Now it gets the position at once."""
    s = terminal()
    try:
        keys = "printf '\\033[5;7H'; IFS= read -rs -d R -t 5 -p $'\\033[6n' pos; echo \"<${pos#*[}>\"\n"
        o = s.step(keystrokes(keys, duration=10))
        state = json.loads(o.state_json)
        assert "<5;7>" in o.text and state["prompt_returned"], o.text
        assert state["waited_s"] < 3, state
        assert "5;7R" not in state["raw"] and "^[[" not in o.text, o.text  # not echoed
    finally:
        s.close()


@pytest.mark.docker
def test_a_program_in_raw_mode_gets_xterm_answers(docker_engine):
    """Device attributes, status, DA2, positions at the margin, DECXCPR, in origin mode
    and on the alternate screen, from python3 on the pty, each asked in turn: none came
    (and `ESC[?6n`, `ESC[6n` in origin mode crashed the step). No answer is echoed, and
    none is in the agent's keys of the next step."""
    s = terminal()
    try:
        o = s.step(keystrokes(f"cat > ask.py << 'EOF'\n{ASK}EOF\n", duration=10))
        assert json.loads(o.state_json)["prompt_returned"], o.text
        o = s.step(keystrokes("python3 ask.py\n", duration=20))
        state = json.loads(o.state_json)
        want = "E[?1;2c E[0n E[>0;0;0c E[10;80R E[?10;80R E[3;4R E[7;9RE[1;1R"
        assert want in o.text and state["prompt_returned"], o.text
        assert state["waited_s"] < 5, state  # not one 5 s wait
        assert "\x1b[?1;2c" not in state["raw"], state["raw"]  # on the input, not echoed
        o = s.step(keystrokes("echo next\n", duration=10))
        assert o.text.startswith("echo next\nnext\n"), o.text
    finally:
        s.close()


@pytest.mark.docker
def test_busybox_line_editor_knows_where_its_prompt_starts(docker_engine):
    """Busybox asks the cursor position after each prompt (`ESC[6n`): unanswered, after
    `echo -n nonl` it took its prompt to start at column 1, and broke a long command line
    four columns after the terminal had wrapped it (`echo a*59` on the first line). With
    the answer it breaks it at the margin (its `\\r\\n` there, as on xterm)."""
    s = terminal("worldtrace/busybox:latest")
    try:
        s.step(keystrokes("echo -n nonl\n", duration=5))
        o = s.step(keystrokes(f"echo {'a' * 70}\n", duration=5))
        want = f"echo {'a' * 55}\n{'a' * 15}\n{'a' * 70}\nuser@sandbox:~$ "
        assert o.text == want, o.text
        state = json.loads(o.state_json)
        assert "R" not in state["raw"], state["raw"]  # the answer is not echoed
    finally:
        s.close()
