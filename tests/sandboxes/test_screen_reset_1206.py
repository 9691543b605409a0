"""A full reset (RIS, `ESC c`) in the terminal emulator (found in a hunt, 12-06).

Found: `reset` after a full-screen program left the alternate screen on (one killed in
it, `timeout -s KILL 1 less f`, or a bare `printf '\\033[?1049h'`) did not bring the main
screen back in our emulator: pyte's `reset` knows no alternate screen. Every later step
was read as the alternate screen is, with no scrolled-off lines kept: `seq 40` read lines
18-40 without the echo of its command, the next step began with lines 20-40 of the one
before, and a 300,000-character line came out as 1,760 characters, none flagged. xterm,
VTE and WezTerm go back to the main screen on RIS, which `reset` sends first
(terminfo's `rs1`), and xterm's RIS also homes the saved cursor and resets every mode,
margin and character set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.screen import Terminal
from worldtrace.schemas import read_records

PROMPT = "user@sandbox:~$ "
SEQ = "\n".join(str(i) for i in range(1, 41))


def lines(data: str) -> bytes:
    return data.replace("\n", "\r\n").encode()


@pytest.mark.docker
def test_reset_leaves_the_alternate_screen_in_a_collected_episode(docker_engine, wt_env):
    """The report's run, as a user runs it: `worldtrace collect` of a quick terminal
    episode, each observation read back from the store."""
    keys = ["printf '\\\\033[?1049h'; reset\\n", "seq 40\\n", "echo hello\\n"]
    args = ["worldtrace", "collect", "--sandbox", "docker", "--duration", "3"]
    for k in keys:
        args += ["--keys", k]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    observations = [turn.observation for turn in t.turns]
    assert [o.truncated for o in observations] == [False] * 3
    assert observations[1].text == f"seq 40\n{SEQ}\n{PROMPT}", observations[1].text
    assert observations[2].text == f"echo hello\nhello\n{PROMPT}", observations[2].text


@pytest.mark.docker
def test_reset_after_a_program_killed_on_the_alternate_screen(term):
    """The realistic trigger: a full-screen program killed before it could leave its
    screen (`timeout -s KILL`), then `reset`; a long line afterwards is whole again."""
    killed = "timeout -s KILL 1 sh -c \"printf '\\033[?1049h\\033[Hfull screen'; sleep 5\"\n"
    o = term.step(keystrokes(killed, duration=10))
    assert json.loads(o.state_json)["prompt_returned"], o.state_json
    o = term.step(keystrokes("reset\n", duration=10))
    assert json.loads(o.state_json)["prompt_returned"], o.state_json
    long = "python3 -c 'print(\"x\" * 30000)'\n"
    o = term.step(keystrokes(long, duration=10))
    assert (o.text, o.truncated) == (f"{long}{'x' * 30000}\n{PROMPT}", False), o.text[-200:]
    o = term.step(keystrokes("seq 40\n", duration=10))
    assert o.text == f"seq 40\n{SEQ}\n{PROMPT}", o.text


def test_a_full_reset_restores_what_xterm_restores():
    """After RIS: the main screen (scrolled-off lines kept again), the saved cursor at
    home, insert mode off, autowrap on, no margins, no origin mode, the G0 character set;
    and an alternate screen entered after it restores the screen the reset left."""
    t = Terminal(80, 24)
    t.feed(b"\x1b[5;10H\x1b7")  # DECSC at row 5, column 10
    t.feed(b"\x1b[?1049h\x1b[4h\x1b[?7l\x1b[3;10r\x1b[?6h\x1b(0")  # IRM, no DECAWM, ...
    t.feed(b"\x1bc")
    t.feed(b"\x1b[7;7H\x1b8ab\rX")  # DECRC: home; no insert mode: X overwrites a
    assert (t.screen.cursor.y, t.screen.cursor.x, t.screen.margins) == (0, 1, None)
    assert t.observation() == "Xb"
    t.feed(b"\r\n" + b"q" * 100)  # autowrap on, and `q` is no line-drawing character
    assert t.observation() == "Xb\n" + "q" * 100
    t.feed(lines(f"\n{PROMPT}"))
    t.mark()
    t.feed(lines(f"seq 40\n{SEQ}\n{PROMPT}"))  # scrolls: every line kept
    assert t.observation() == f"seq 40\n{SEQ}\n{PROMPT}"
    t.mark()
    t.feed(lines("less f\n") + b"\x1b[?1049h\x1b[Hpage\x1b[?1049l" + lines(f"\n{PROMPT}"))
    assert t.observation() == f"less f\n\n{PROMPT}"  # the main screen came back


def test_a_step_that_began_in_a_full_screen_program_and_reset_reads_what_follows():
    """A step begun on the alternate screen (a program still running there) in which the
    program dies and the shell's `reset` runs: the cleared main screen, as it now stands,
    and the next step all its own lines."""
    t = Terminal(80, 24)
    t.feed(lines(f"{PROMPT}top\n") + b"\x1b[?1049h\x1b[Hframe 1")
    t.mark()
    t.feed(b"\x1b[Hframe 2" + lines(f"\n{PROMPT}reset\n") + b"\x1bc" + PROMPT.encode())
    assert t.observation() == PROMPT
    t.mark()
    t.feed(lines(f"seq 40\n{SEQ}\n{PROMPT}"))
    assert t.observation() == f"seq 40\n{SEQ}\n{PROMPT}"
