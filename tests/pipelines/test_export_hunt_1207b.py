"""Export defects found by the 2026-12-07 (b) hunt, each reproduced as a user meets it.

1. With a Jinja template, a turn was taken to start where its action's text begins, after
   the user header the template writes first (`<|im_start|>user\\n`). `--overflow split`
   charges each turn the tokens from its start to the next turn's, so every turn was
   charged the next turn's header and the first part (the head) turn 0's: a part was
   counted one header longer than it is and closed a turn early. The chatml template as
   a Jinja file split a 30-turn trajectory under `--max-len 85` into other, emptier parts
   than the built-in chatml (3 turns in 67 tokens where it put 4 in 85). A turn now
   starts where the template's rendering of the turns before it ends.
2. `--split test=0.1,valid=0.2` recorded valid's range as `[0.1, 0.30000000000000004]`
   in every manifest and `--json` (float sums), and `a=0.3,b=0.6,c=0.1` (a sum of 1) was
   taken, leaving train the draws from 0.9999999999999999. The ranges are the decimal sums
   of the fractions as given (`[0.1, 0.3]`), and they still meet end to start.

Real parts: `worldtrace process` on a JSONL file, the `worldtrace` command in a
subprocess, the real Qwen tokenizer, the export's Parquet shards read back.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import parse_split, split_ranges
from worldtrace.pipelines.inputs import iter_batches
from worldtrace.pipelines.prompt import SystemPrompt
from worldtrace.pipelines.render import CHATML, load_template
from worldtrace.pipelines.tokens import load_tokenizer
from worldtrace.schemas import Store
from worldtrace.schemas.records import Trajectory

from .test_export_hunt_1204f import TOKENIZER, wt
from .test_export_hunt_1205f import JINJA_CHATML, JINJA_PLAIN, SHORT, echo_turns

LLAMA3 = (
    "{{ '<|begin_of_text|>' }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] "
    "+ '<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}{% endfor %}"
)
"""Llama 3's chat format (its template without `trim` and the generation prompt, which
export does not take): a text before the first message, headers before each."""
BETWEEN = "{% for m in messages %}{% if not loop.first %}\n{% endif %}<{{ m.role }}>{{ m.content }}{% endfor %}"
"""A separator written before every message but the first: it belongs to the next turn."""
TEMPLATES = {"chatml": JINJA_CHATML, "plain": JINJA_PLAIN, "llama3": LLAMA3, "between": BETWEEN}
TURNS = 30


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TOKENIZER)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """A 30-turn `echo i` trajectory with a short system prompt, as `process` leaves it."""
    root = tmp_path_factory.mktemp("echo")
    src = root / "echo.jsonl"
    t = Trajectory("terminal", turns=echo_turns(TURNS, decided=False), system=SHORT)
    src.write_text(t.with_id().to_json() + "\n")
    r = wt("--store", str(root / "store"), "--create", "process", "--input", str(src),
           "--workers", "1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return Store.at(root / "store")


@pytest.fixture(scope="module")
def record(store) -> tuple[str, list[dict]]:
    """The processed record's system prompt (as export writes it) and turns."""
    [[rec]] = list(iter_batches(str(store.table("trajectories"))))
    return SystemPrompt().text(rec), rec["turns"]


def template(tmp_path: Path, name: str):
    f = tmp_path / f"{name}.j2"
    f.write_text(TEMPLATES[name])
    return f


def export_rows(store: Store, out: Path, *args: str) -> list[dict]:
    r = wt("--store", str(store.root), "export", "-o", str(out), *args)
    assert r.returncode == 0, r.stderr
    assert wt("export", "--verify", str(out)).returncode == 0
    return [row for f in sorted(out.glob("*.parquet")) for row in pq.read_table(f).to_pylist()]


# -- 1. where a Jinja template's turns start ----------------------------------------------
@pytest.mark.parametrize("system", ["Predict the output.", ""])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_jinja_turn_starts_where_the_template_renders_the_turns_before_it(
    tmp_path, record, name, system
):
    """Turn n starts at the end of the text the template writes for the turns before it:
    `render(system, turns[:n])` is the rendering's first `turn_start` characters."""
    _, turns = record
    tpl = load_template(str(template(tmp_path, name)))
    rendered = tpl.render(system, turns)
    starts = []
    for n in range(len(turns)):
        before = tpl.render(system, turns[:n]).text
        assert rendered.text.startswith(before)
        starts.append(len(before))
    assert [sp.turn_start for sp in rendered.spans] == starts
    if name == "chatml":  # the built-in's turns start there too
        assert starts == [sp.turn_start for sp in CHATML.render(system, turns).spans]


def test_jinja_chatml_splits_into_the_parts_of_the_builtin_chatml(tmp_path, store, record, tok):
    """The user's export: a limit that four turns fill exactly. The built-in chatml puts
    four turns in each part; the same template as a Jinja file put three (its parts were
    charged a header more than they hold). Now the same rows, token for token."""
    system, turns = record
    limit = len(tok.encode(CHATML.render(system, turns[:4]).text, add_special_tokens=False))
    opts = ("--max-len", str(limit))
    builtin = export_rows(store, tmp_path / "builtin", *opts)
    general = export_rows(store, tmp_path / "jinja", "--template",
                          str(template(tmp_path, "chatml")), "--template-eot", "<|im_end|>",
                          *opts)  # fmt: skip
    # the first part holds four turns in exactly `limit` tokens (later turns, `echo 10`
    # on, take a token more: three fit)
    im_start = tok.token_to_id("<|im_start|>")
    held = [(r["input_ids"].count(im_start) - 1) // 2 for r in builtin]
    assert held[0] == 4 and builtin[0]["num_tokens"] == limit and sum(held) == TURNS
    assert [(r["input_ids"].count(im_start) - 1) // 2 for r in general] == held
    assert [r["sample_id"] for r in general] == [r["sample_id"] for r in builtin]
    assert [r["input_ids"] for r in general] == [r["input_ids"] for r in builtin]
    assert [r["loss_mask"] for r in general] == [r["loss_mask"] for r in builtin]


@pytest.mark.parametrize("name", ["chatml", "plain", "between", "llama3"])
def test_split_parts_are_the_fullest_the_template_allows(tmp_path, store, record, tok, name):
    """Each part is the template's rendering of the turns it holds, and holds as many
    turns as fit: the next turn would take it over the limit (the turns' tokens taken
    from the template's own renderings of them)."""
    system, turns = record
    tpl = load_template(str(template(tmp_path, name)))

    def count(group: list[dict]) -> int:
        return len(tok.encode(tpl.render(system, group).text, add_special_tokens=False))

    limit = count(turns[:5]) + 1  # one token short of a sixth turn: the turns are alike
    groups, group = [], []
    for t in turns:  # what fits, the turns rendered and counted part by part
        if group and count([*group, t]) > limit:
            groups.append(group)
            group = []
        group.append(t)
    groups.append(group)
    assert len(groups) > 2
    eot = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>"}.get(name, "")
    rows = export_rows(store, tmp_path / name, "--max-len", str(limit), "--template",
                       str(template(tmp_path, name)), *(["--template-eot", eot] if eot else []))  # fmt: skip
    assert [r["sample_id"].rsplit("/", 1)[1] for r in rows] == [f"p{k}" for k in range(len(groups))]
    for row, g in zip(rows, groups, strict=True):
        want = tok.encode(tpl.render(system, g).text, add_special_tokens=False).ids
        assert row["input_ids"] == want and row["num_tokens"] <= limit


# -- 2. split ranges ----------------------------------------------------------------------
def test_split_ranges_are_the_fractions_as_given(tmp_path, store):
    """`--json` and every manifest: the ranges as the fractions add up in decimals."""
    out = tmp_path / "split"
    r = wt("--store", str(store.root), "export", "--format", "agentworldbench",
           "--split", "test=0.1,valid=0.2,dev=0.4", "--json", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    want = {"test": [0.0, 0.1], "valid": [0.1, 0.3], "dev": [0.3, 0.7]}
    assert json.loads(r.stdout)["split"]["ranges"] == want
    for m in [out / "manifest.json", *sorted(out.glob("*/manifest.json"))]:
        text = m.read_text()
        assert json.loads(text)["split"]["ranges"] == want
        assert "0.30000000000000004" not in text and "0.7000000000000001" not in text
    assert "0.30000000000000004" not in r.stdout


@pytest.mark.parametrize(
    "spec",
    ["a=0.3,b=0.6,c=0.1", "a=0.7,b=0.2,c=0.1", "a=0.1,b=0.2,c=0.7"],
)
def test_fractions_that_add_up_to_one_are_refused(store, spec):
    """Each adds up to 1 (no train part); in floats the first two came to
    0.9999999999999999 and were taken (the third, 1.0 in floats too, was refused)."""
    r = wt("--store", str(store.root), "export", "--format", "agentworldbench", "--split", spec)
    assert r.returncode == 2, r.stdout
    assert "the fractions sum to 1.0, leaving no train part" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "spec",
    ["test=0.1,valid=0.2", "a=0.3,b=0.6,c=0.09", "test=0.02,valid=0.01", "x=1e-3,y=0.7,z=0.2"],
)
def test_the_ranges_partition_the_draw_at_their_boundaries(spec):
    """The parts' ranges meet end to start from 0, train takes the rest up to 1, and a
    draw at, just below or just above a boundary is in exactly one part (the one whose
    range starts there)."""
    from worldtrace.pipelines.export import part_at  # the part a draw is in

    ranges = split_ranges(parse_split(spec))
    bounds = [0.0, *(hi for _, hi in ranges.values())]
    assert [lo for lo, _ in ranges.values()] == bounds[:-1] and bounds[-1] < 1
    names = [*ranges, "train"]
    for k, b in enumerate(bounds):
        assert part_at(b, ranges) == names[k] == part_at(math.nextafter(b, 1), ranges)
        if b:
            assert part_at(math.nextafter(b, 0), ranges) == names[k - 1]
    assert part_at(1 - 2**-64, ranges) == "train"
    # the boundary as the user wrote it: a draw of 0.3 is not in [0.1, 0.3)
    if spec == "test=0.1,valid=0.2":
        assert part_at(0.3, ranges) == "train" and part_at(0.1, ranges) == "valid"
