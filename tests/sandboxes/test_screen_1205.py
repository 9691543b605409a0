"""Characters the terminal shows no glyph for, read as xterm shows them (2026-12-05).

Found: a terminal observation lost the rest of a line after a control character
(`printf 'before\\001after'` read `before`, `café \\u0085next` read `café `; `cat` of a
binary file was cut the same way): pyte's `Screen.draw` stops at the first character
wcwidth gives a negative width, and at a zero-width one that is no combining mark (a
ZWJ, the variation selector of `❤️`, a Devanagari spacing mark)."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from worldtrace.sandboxes.screen import Terminal
from worldtrace.schemas import read_records

PROMPT = b"user@sandbox:~$ "

C0_DRAWN = [c for c in range(0x20) if chr(c) not in "\x00\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x1b"]
"""The C0 controls pyte's stream hands to `draw` (it interprets or drops the others)."""


def shown(data: bytes) -> str:
    """The line `data` leaves on a fresh screen, as a step reads it."""
    t = Terminal(80, 24)
    t.feed(PROMPT)
    t.mark()
    t.feed(data + b"\r\n" + PROMPT)
    return t.observation().splitlines()[0]


@pytest.mark.docker
def test_a_control_character_keeps_the_rest_of_its_line_in_a_collected_episode(
    docker_engine, wt_env, tmp_path
):
    """The tester's job, run as a user runs it: `worldtrace collect` in a real terminal
    sandbox; each observation read back from the store."""
    c0 = "".join(f"\\{c:03o}{chr(ord('a') + i % 26)}" for i, c in enumerate(C0_DRAWN))
    actions = [
        "printf 'before\\001after\\n'\n",
        "printf 'caf\\303\\251 \\302\\205next\\n'\n",
        f"printf '<{c0}>\\n'\n",  # every C0 control pyte draws, each between two letters
        "printf 'csi\\302\\2332Jkept osc\\302\\235 too\\n'\n",  # C1 CSI and OSC: no effect
        "printf 'ok \\342\\235\\244\\357\\270\\217 done\\n'\n",  # ❤️: a variation selector
        "printf '\\340\\244\\250\\340\\244\\256\\340\\244\\203 ok\\n'\n",  # नमः: a spacing mark
        "printf 'x\\342\\200\\213y\\n'\n",  # a zero-width space
    ]
    f = tmp_path / "ctl-min.yaml"
    f.write_text(json.dumps({
        "name": "ctl-min", "sandbox": {"kind": "terminal"},
        "tasks": [{"id": "c", "instruction": "x", "actions": actions}],
    }))  # fmt: skip
    r = subprocess.run(["worldtrace", "collect", str(f)], capture_output=True, text=True,
                       env=wt_env)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [t] = read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    out = [turn.observation.text.splitlines()[1] for turn in t.turns]
    letters = "".join(chr(ord("a") + i % 26) for i in range(len(C0_DRAWN)))
    assert out == [
        "beforeafter",
        "café next",
        f"<{letters}>",
        "csi2Jkept osc too",
        "ok \u2764\ufe0f done",
        "\u0928\u092e\u0903 ok",
        "x\u200by",
    ]


def test_every_control_pyte_draws_is_shown_as_nothing():
    for c in C0_DRAWN:
        assert shown(b"a" + bytes([c]) + b"b") == "ab", hex(c)
    for c in range(0x80, 0xA0):  # C1, as UTF-8 (a lone byte is no UTF-8: U+FFFD)
        assert shown(b"a" + chr(c).encode() + b"b") == "ab", hex(c)


def test_a_c1_control_from_utf8_is_not_obeyed():
    """U+009B is no CSI and U+009D no OSC: pyte cleared the screen for `\\u009b2J` and
    swallowed the text after `\\u009d` waiting for the string's end."""
    assert shown("one\u009b2Jtwo".encode()) == "one2Jtwo"
    assert shown("one\u009d0;title\u0007two".encode()) == "one0;titletwo"
    assert shown("stop\u009cst".encode()) == "stopst"


def test_zero_width_characters_join_the_character_before_them():
    assert shown("ok \u2764\ufe0f done".encode()) == "ok \u2764\ufe0f done"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert shown(f"[{family}]".encode()) == f"[{family}]"
    assert shown("\u0928\u092e\u0903 ok".encode()) == "\u0928\u092e\u0903 ok"
    assert shown("\u1112\u1161\u11ab ok".encode()) == "\u1112\u1161\u11ab ok"  # 한 as jamo
    assert shown("e\u0301t".encode()) == "\u00e9t"  # a combining mark, as before
    assert shown("a\u200bb\ufeffc".encode()) == "a\u200bb\ufeffc"
    t = Terminal(80, 24)
    t.feed("a\r\n\ufeffb \u0301".encode())  # at a line's start: nothing to join
    assert t.observation() == "a\nb \u0301"


def test_the_line_runs_on_at_the_margin_and_in_insert_mode():
    """The other way into `draw`: a control at the wrap, and insert mode (IRM), which the
    ASCII fast path leaves to pyte."""
    wrapped = shown(b"x" * 79 + b"\x01yz\x02")
    assert wrapped == "x" * 79 + "yz"
    t = Terminal(80, 24)
    t.feed("abc\r\x1b[4hX\x01Y\u2764\ufe0fZ".encode())
    assert t.observation() == "XY\u2764\ufe0fZabc"


def test_a_binary_flood_costs_no_more_than_one_without_controls():
    """`cat` of a binary file: the controls dropped and the zero-width characters joined
    cost little beside pyte's drawing of the rest (best of 5, same run: a ratio). The two
    are timed in turn, so a load on the machine falls on both (CI, 12-07: 1.05 s against
    2 x 0.48 s when all of one ran before the other)."""
    binary = bytes(random.Random(7).randrange(256) for _ in range(300_000))
    plain = binary.translate(None, bytes(C0_DRAWN))  # what pyte's own draw drew in full

    def took(data: bytes) -> float:
        t = Terminal(80, 24)
        start = time.perf_counter()
        t.feed(data + b"\x07\x18\x1bcend")  # BEL ends an OSC, CAN a CSI, ESC c resets
        elapsed = time.perf_counter() - start
        assert t.observation().splitlines()[-1] == "end"
        return elapsed

    turns = [(took(binary), took(plain)) for _ in range(5)]
    assert min(b for b, _ in turns) < 2 * min(p for _, p in turns)
