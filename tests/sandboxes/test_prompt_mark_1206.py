"""Bash's prompt mark is a secret of its session (found in a hunt, 12-06).

Found: the mark that bash's `PROMPT_COMMAND` prints before each prompt was one constant
sequence (`ESC ]6973;wt-prompt BEL`, readable in `echo "$PROMPT_COMMAND"`), accepted from
any output: a command that printed it with our PS1's look (`printf`, a file's content)
ended its step at once, `prompt_returned: true`, and the next action's keys were typed
into the command still running (`echo NEXT` read `LATE` first). The mark now carries a
random token drawn for each shell, which no other process is given and no record holds
(shown as `wt-prompt` where the agent prints the shell's variable). Real containers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.schemas import read_records

from .test_terminal_hunt_1204 import sandbox

pytestmark = pytest.mark.docker

PROMPT = "user@sandbox:~$ "
OLD_MARK = "\\033]6973;wt-prompt\\007"
"""The constant mark, as printf writes it."""
MARK = "printf '\\033]6973;wt-prompt\\007'"
SHOWN = f"{{ export -n PROMPT_COMMAND; case $- in *v*) {MARK};; esac; {MARK}; }} 2>/dev/null"
"""`PROMPT_COMMAND` as records show it: its token is the session's secret."""
TOKEN = re.compile(r"[0-9a-f]{16}")


def waits_for_the_real_prompt(s, keys: str) -> str:
    """The step ends at the shell's own prompt, after `LATE`, not at the mark `keys` print
    first; the next step reads only its own answer."""
    o = s.step(keystrokes(keys, duration=10))
    state = json.loads(o.state_json)
    assert state["prompt_returned"] and o.text.endswith(f"LATE\n{PROMPT}"), (o.text, state)
    assert state["waited_s"] >= 1, state
    o = s.step(keystrokes("echo NEXT\n", duration=10))
    assert o.text == f"echo NEXT\nNEXT\n{PROMPT}", o.text
    return o.text


def test_the_printed_mark_ends_no_step_in_a_collected_episode(docker_engine, wt_env):
    """The report's run, as a user runs it: step 0 returned after 8 ms and step 1 read
    `echo NEXT\\nLATE\\nuser@sandbox:~$ echo NEXT\\nNEXT...`."""
    forged = f"printf '{OLD_MARK}{PROMPT}'; sleep 2; echo LATE\\n"
    args = ["worldtrace", "collect", "--sandbox", "docker", "--duration", "5"]
    r = subprocess.run(
        [*args, "--keys", forged, "--keys", "echo NEXT\\n"], capture_output=True, text=True,
        env=wt_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    first, second = (turn.observation for turn in t.turns)
    state = json.loads(first.state_json)
    assert state["prompt_returned"] and state["waited_s"] >= 2, state
    assert first.text.endswith(f"{PROMPT}LATE\n{PROMPT}"), first.text
    assert second.text == f"echo NEXT\nNEXT\n{PROMPT}", second.text


def test_a_mark_from_a_file_or_a_program_ends_no_step(term):
    """A file holding the old mark with our PS1, a program printing a mark with a token of
    its own, and the shell's environment as a program reads it (`/proc/$$/environ`: the
    token as text, no mark) all leave the step to the shell's own prompt."""
    term.step(keystrokes(f"printf '{OLD_MARK}{PROMPT}' > saved\n", duration=10))
    waits_for_the_real_prompt(term, "cat saved; sleep 1; echo LATE\n")
    forge = "import os; print(end='\\x1b]6973;' + os.urandom(8).hex() + '\\x07$ ')"
    waits_for_the_real_prompt(term, f'python3 -c "{forge}"; sleep 1; echo LATE\n')
    environ = "tr '\\0' '\\n' < /proc/$$/environ | grep ^PROMPT_COMMAND; sleep 1; echo LATE\n"
    o = term.step(keystrokes(environ, duration=10))
    assert o.text == f"{environ}PROMPT_COMMAND={SHOWN}\nLATE\n{PROMPT}", o.text
    o = term.step(keystrokes("env | grep -c PROMPT_COMMAND\n", duration=10))  # a child's
    assert o.text == f"env | grep -c PROMPT_COMMAND\n0\n{PROMPT}", o.text


def test_the_mark_is_drawn_for_each_shell_and_never_recorded(term):
    """Two sessions, two tokens (their checksums differ); the agent that prints the
    shell's variable reads it with `wt-prompt` for the token, in the observation and in
    `raw` alike, and the mark itself is in neither."""
    sums = []
    for s in (term, sandbox()):
        try:
            o = s.step(keystrokes('echo "$PROMPT_COMMAND" | cksum\n', duration=10))
            sums.append(o.text.splitlines()[1])
            for keys, shown in (
                ('echo "$PROMPT_COMMAND"\n', SHOWN),
                ("declare -p PROMPT_COMMAND\n", SHOWN.replace("\\", "\\\\").replace("$", "\\$")),
            ):
                o = s.step(keystrokes(keys, duration=10))
                raw = json.loads(o.state_json)["raw"]
                assert shown in o.text and shown in raw, (o.text, raw)
                assert not TOKEN.search(o.text) and not TOKEN.search(raw), raw
                assert "\x1b]6973" not in raw, raw
            assert not TOKEN.search(s.describe()["initial_state"])
        finally:
            if s is not term:
                s.close()
    assert sums[0] != sums[1], sums


def test_raw_leaves_the_mark_out_and_shows_the_token_as_wt_prompt_at_any_chunk_cut():
    """The mark (and the token an agent prints) cut between two reads of the stream: the
    mark was left out of `raw` only when one read held it whole."""
    from worldtrace.sandboxes.terminal import _Kept, prompt_mark

    token = "0123456789abcdef"
    mark, shown = prompt_mark(token), b"user@sandbox:~$ "
    streams = {  # what the shell sent: what `raw` keeps
        b"out" + mark + shown + b"echo " + token.encode() + b" ok\x1b": (
            b"out" + shown + b"echo wt-prompt ok\x1b"
        ),
        b"printf " + token.encode(): b"printf wt-prompt",
    }
    for stream, want in streams.items():
        for cut in range(len(stream) + 1):
            for cap in (len(want), 10):
                kept = _Kept(token, cap)
                kept.add(stream[:cut])
                kept.add(stream[cut:])
                assert kept.done() == (want[:cap], len(want)), (stream, cut)
