"""A secret a shell's line editor drew as edits (readline's wrap past the margin, a
corrected key, a cursor moved back) reaches no shard: `line_edits` replays the edits,
`Redactor.spans` reads what they show, the batch screen flags such rows.

Found (2026-12-02): a token typed with a correction, `ghp_...X<BS>...`, reached the raw
stream kept in `state_json` as `ghp_...X\\b\\e[K...`, in pieces no rule matched; a
typed line past the terminal's width is cut by `' \\r'` the same way."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.filters import FilterConfig
from worldtrace.pipelines.units import filter_records, read_valid
from worldtrace.schemas import Action, Observation, ShardWriter, Trajectory, Turn
from worldtrace.schemas.arrow import to_batch, to_table
from worldtrace.schemas.line_edits import edited, may_be_edited
from worldtrace.schemas.redact import Redactor, redact_trajectory, redactor
from worldtrace.schemas.redact_rules import example_secrets

from .test_redact_leaks import GHP, terminal_state

# what bash 5's readline wrote for keys typed one at a time in a 40-column terminal
# (a pty, TERM=xterm): past the margin, and with X, Backspace, 9 at the end
WRAPPED = "echo " + GHP[:20] + " \r" + GHP[20:] + "\r\n\x1b[?2004l\r" + GHP + "\r\n"
CORRECTED = (
    "export K=" + GHP[:25] + " \r" + GHP[25:-1] + "X\x08\x1b[K" + GHP[-1]
    + "\x1b[A\r\x1b[C\x1b[C\x1b[C\r\n\r\x1b[C\x1b[C\r\n\x1b[?2004l\r"
)  # fmt: skip


def pieces(value: str, out: str, size: int = 8) -> list[str]:
    """The pieces of `value` of `size` letters and digits that `out` still holds."""
    return [p for i in range(len(value) - size + 1) if (p := value[i : i + size]) in out]


@pytest.mark.parametrize("form", ["raw", "json"])
def test_the_edits_replay_to_what_the_terminal_shows(form):
    def shown(text: str) -> str:
        if form == "raw":
            return edited(text).text
        return json.loads(edited(json.dumps({"raw": text, "n": 1})).text)["raw"]

    # a line with edits is replayed; one without stands as it is (the other views read it)
    assert shown(WRAPPED) == f"echo {GHP}\n\x1b[?2004l\r{GHP}\r\n"
    assert shown(CORRECTED) == f"export K={GHP}\n\n\x1b[?2004l\r"
    assert shown("sk-abc\x08\x08Zbc\x08\x08") == "sk-aZbc"  # back two, one typed, redrawn
    assert shown("abde\x1b[2D\x1b[1@c") == "abcde"  # insert mode: a blank, then the key
    assert shown("abXcd\x1b[3D\x1b[1P") == "abcd"  # a character deleted
    assert shown("junk\x08\x08\x1b[2K\rnew") == "new"  # the line erased, drawn again
    assert shown("abcdefgh \rijkl\x1b[A\x1b[2DXY") == "abXYefghijkl"  # up to the row above
    assert shown("abcdefgh \rijkl\x1b[A\x1b[9CZ") == "abcdefgZijkl"  # right: to the margin
    assert shown("10% \r20% \r30%") == "10%20%30%"  # read as wraps: every piece kept
    assert shown("50%\r60%") == "50%\r60%"  # a carriage return alone: no edit, as it stands
    assert shown("echo abX\x7fcd\x7f\x7f") == "echo ab"  # typed keys: Backspace erases
    # a JSON string ending in an escaped backslash ends there, as any other
    doc = json.dumps({"raw": "abc\x08\x08\x08Zq C:\\", "n": 1})
    assert edited(doc).text == json.dumps({"raw": "Zq C:\\", "n": 1})


def test_the_map_covers_the_raw_text_from_first_to_last_character():
    view = edited(CORRECTED)
    start = view.text.index(GHP)
    a, b = view.raw_span(start, start + len(GHP))
    assert CORRECTED[a:b] == GHP[:25] + " \r" + GHP[25:-1] + "X\x08\x1b[K" + GHP[-1]


def test_a_text_without_edits_is_not_replayed():
    for text in ("plain", "a\r\nb\r\n", "\x1b[01;31m\x1b[Kred\x1b[m\x1b[K", "50%\r60%"):
        assert not may_be_edited(text) and not may_be_edited(json.dumps(text))
    # JSON's escaped backslash before a b is a regex's word boundary, not a backspace
    code = json.dumps({"raw": "grep -E '\\bword\\b' f"})
    assert edited(code).text == code
    for text in (WRAPPED, CORRECTED, "a\x08b", "x\x1b[3Dy", json.dumps("a\x08b"), "a\x7f"):
        assert may_be_edited(text)


@pytest.mark.parametrize("text", [WRAPPED, CORRECTED], ids=["wrapped", "corrected"])
def test_a_token_drawn_as_edits_is_redacted_in_raw_and_json_text(text):
    red = Redactor()
    for form in (text, terminal_state(text.encode())):
        out = red.text(form)[0]
        assert "<secret:github_token>" in out and not pieces(GHP[4:], out), out
        assert red.text(out) == (out, 0)  # redacted twice: the same
    state = json.loads(red.text(terminal_state(CORRECTED.encode()))[0])
    assert state["raw"].startswith("export K=<secret:github_token>\x1b[A\r")
    assert state["prompt_returned"] is True  # the document around the stream as it was


def test_a_token_in_typed_keys_with_a_correction_is_redacted():
    """The action of the same step: the keys as the agent sent them, Backspace as DEL."""
    keys = f"echo {GHP[:20]}X\x7f{GHP[20:]} > /dev/null\n"
    for form in (keys, json.dumps({"keystrokes": keys})):
        out, n = Redactor().text(form)
        assert n == 1 and not pieces(GHP[4:], out), out


def test_a_handed_over_value_typed_past_the_margin_is_redacted():
    red = Redactor(literals=["plaintokenvalue9876"])
    for text in ("X=plaintoken \rvalue9876\r\n", "X=plaintxx\x08\x08okenv \ralue9876"):
        for form in (text, terminal_state(text.encode())):
            out, n = red.text(form)
            assert n == 1 and "X=<secret:env_value>" in out and "9876" not in out, out


def test_edits_without_a_secret_change_nothing():
    red = Redactor()
    texts = [
        "10% \r20% \r30%\r\n",
        "grep -E '\\bword\\b'\r\n",
        "ab\x08\x08cd\x1b[K\r\n",
        "a long typed command line that goes past the margin \rand on\r\n",
    ]
    for text in texts:
        for form in (text, terminal_state(text.encode())):
            assert red.text(form) == (form, 0)


def draw(text: str, rng: random.Random) -> str:
    """`text` as readline may draw it: typed without one key that is then put in (the
    cursor moved back: within its line, readline's cursor never leaves it), or with 1-3
    wraps and corrected keys between its characters."""
    if rng.random() < 0.3 and "\n" not in text:
        k = rng.randrange(1, len(text))
        rest = text[k + 1 :]
        back = f"\x1b[{len(rest)}D" if rest else ""
        return text[:k] + rest + back + "\x1b[1@" + text[k] + rest + back
    for k in sorted(rng.sample(range(1, len(text)), min(3, len(text) - 1)), reverse=True):
        if rng.random() < 0.5:
            text = text[:k] + " \r" + text[k:]
        else:
            erase = "\x1b[K" if rng.random() < 0.5 else ""
            text = text[:k] + rng.choice("xyz#") + "\x08" + erase + text[k:]
    return text


def test_the_screen_flags_every_secret_the_full_path_finds_through_edits():
    """Secrets of every kind drawn with random edits, raw and in JSON, among neighbours
    with edits and none: every row whose strings the full path redacts is flagged, and
    the full path leaves no piece of 8."""
    rng = random.Random(11)
    red = Redactor()
    texts, values = [], []
    for _ in range(300):
        value, line = rng.choice(list(example_secrets(rng.randrange(50)).values()))
        text = draw(line, rng)
        if rng.random() < 0.5:
            text = terminal_state(f"$ x\r\n{text}\r\n".encode())
        texts.append(text)
        values.append(value)
    noise = [draw("ls -l /usr/share/doc\r\n", rng) for _ in range(300)]
    column = [t for pair in zip(texts, noise, strict=True) for t in pair]
    batch = pa.RecordBatch.from_pylist(
        [{"s": t, "l": [n, t]} for t, n in zip(column, reversed(column), strict=True)]
    )
    flags = red.screen.rows(batch).tolist()
    assert [t for t, f in zip(column, flags, strict=True) if red.text(t)[1] and not f] == []
    assert all(red.screen.text(t) for t in column if red.text(t)[1])
    # a record's strings are first searched joined: that search finds what each alone does
    for t, n in zip(column, reversed(column), strict=True):
        assert red.value({"s": t, "l": [n]})[0] == {"s": red.text(t)[0], "l": [red.text(n)[0]]}
    missed = []
    for text, value in zip(texts, values, strict=True):
        out = red.text(text)[0]
        if [p for p in pieces(value, out) if p.isalnum()]:
            missed.append((text, out))
    assert missed == []


# -- a secret cut by a step boundary ------------------------------------------------------
def steps(*parts: str, raw: bool = True) -> list[Turn]:
    """Keystroke steps typing `parts` one after the other, as the terminal kind records
    them: the keys as text and as arguments, the screen, the raw stream."""
    turns = []
    for i, part in enumerate(parts):
        args = json.dumps({"duration": 0.3, "keystrokes": part})
        echo = part.replace("\n", "\r\n")
        state = terminal_state(echo.encode()) if raw else None
        action = Action(kind="keystrokes", text=part, arguments_json=args)
        turns.append(Turn(i, action, Observation(part.rstrip("\n"), state_json=state)))
    return turns


def test_a_token_typed_over_several_steps_is_redacted_in_every_piece():
    """Found: keys typed in three steps (`echo ghp_AbCd...`, `...`, `...\\n`) left the
    token's pieces in each step's keys, arguments, screen and raw stream (a real terminal
    sandbox, `tests/sandboxes/test_redact_sandboxes.py`)."""
    parts = ("echo " + GHP[:14], GHP[14:30], GHP[30:] + " > /dev/null\n")
    t = Trajectory(domain="terminal", turns=steps(*parts)).with_id()
    out = redact_trajectory(t)
    text = json.dumps(dataclasses.asdict(out))
    assert not pieces(GHP[4:], text, 6), text
    first, second, last = out.turns
    assert first.action.text == "echo <secret:github_token>" == first.observation.text
    assert second.action.text == "<secret:github_token>"
    assert json.loads(last.action.arguments_json)["keystrokes"] == (
        "<secret:github_token> > /dev/null\n"
    )
    assert json.loads(last.observation.state_json)["raw"].startswith("<secret:github_token> >")
    assert json.loads(last.observation.state_json)["waited_s"] == 1.0  # the rest as it was
    assert out.redactions == 12 and out.trajectory_id != t.trajectory_id  # 3 steps x 4 texts
    assert redact_trajectory(out) == out  # twice: the same


def test_only_what_crosses_a_boundary_is_added_and_other_steps_are_left():
    red = Redactor()
    record = to_batch(
        [Trajectory(domain="terminal", turns=steps("ls\n", "echo " + GHP + "\n", "pwd\n"))]
    ).to_pylist()[0]
    out = red.record(record)
    assert out["redactions"] == 4  # the whole token in one step: one placeholder a text
    assert [t["action"]["text"] for t in out["turns"]] == [
        "ls\n", "echo <secret:github_token>\n", "pwd\n"
    ]  # fmt: skip
    calls = Trajectory(domain="mcp", turns=steps("ghp_" + GHP[4:20], GHP[20:]))
    calls.turns[:] = [
        dataclasses.replace(x, action=dataclasses.replace(x.action, kind="tool_call"))
        for x in calls.turns
    ]
    assert red.across_steps(calls.turns) == (calls.turns, 0)  # tool calls are not one stream


def test_process_redacts_a_token_cut_by_a_step_boundary(tmp_path):
    """Raw data recorded before: the batch screen reads a column's strings back to back,
    so consecutive steps' pieces are read joined and the row is flagged; pass 1 redacts
    it as redacting every record whole does."""
    parts = ("echo " + GHP[:14], GHP[14:30], GHP[30:] + "\n")
    leaky = Trajectory(domain="terminal", turns=steps(*parts)).with_id()
    clean = Trajectory(domain="terminal", turns=steps("ls\n", "pwd\n")).with_id()
    raw = tmp_path / "raw.parquet"
    pq.write_table(to_table([clean, leaky]), raw)
    assert redactor().screen.rows(pq.read_table(raw).to_batches()[0]).tolist() == [False, True]
    items = read_valid(str(raw), 0, Counter(), [])
    screened = filter_records(items, FilterConfig(), Counter(), [])
    whole = filter_records([(u, d, True) for u, d, _ in items], FilterConfig(), Counter(), [])
    assert screened == whole
    assert not pieces(GHP[4:], repr(screened), 6) and screened[1][1]["redactions"] == 12


def test_redact_check_reports_every_piece_of_a_token_cut_by_a_step_boundary(tmp_path):
    from worldtrace.leaks import Checker

    parts = ("echo " + GHP[:14], GHP[14:] + "\n")
    with ShardWriter(tmp_path / "raw") as w:  # written directly: no boundary redacted it
        w.write([Trajectory(domain="terminal", turns=steps(*parts)).with_id()])
    found = {(f.field, f.kind) for f in Checker(Redactor()).check(w.paths[0])}
    assert found == {
        (f"turns[{i}].{where}", "github_token")
        for i in (0, 1)
        for where in (
            "action.text", "action.arguments_json.keystrokes",
            "observation.text", "observation.state_json.raw",
        )
    }  # fmt: skip


def test_a_record_whose_stream_ends_with_the_cursor_moved_back_is_redacted():
    """A record's strings are first searched joined (`value_counts`): a stream in JSON
    whose last line leaves the cursor back over the token must read there as it reads
    alone (the document's closing quote is no text drawn at that cursor)."""
    raw = "$ export K=" + GHP[:20] + "X\x08" + GHP[20:] + "\x1b[D\x1b[D\x1b[D"
    turn = Turn(
        0,
        Action(kind="keystrokes", text="x"),
        Observation("ok", state_json=terminal_state(raw.encode())),
    )
    t = Trajectory(domain="terminal", turns=[turn]).with_id()
    out = redact_trajectory(t)
    assert out.redactions == 1 and not pieces(GHP[4:], out.turns[0].observation.state_json), out
