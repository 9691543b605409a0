"""Export defects a user found on 2026-12-05 (f), each reproduced as the user met it.

1. Turn samples took quadratic time and memory even with `--max-len`: every target turn's
   whole history was rendered and tokenized (all of a batch's prefixes at once) before
   history was dropped to fit, so a 1,000-turn trajectory took 1.2 GB and 14-20 s, 2,000
   turns 4.2 GB, 6,000 turns more than five minutes. With a built-in template and a
   tokenizer whose tokens never cross a turn's start, every turn is now encoded once and
   a sample's length is a sum; only what a sample keeps is put together. Other templates
   and tokenizers encode each turn sample whole, a slice of the batch at a time.
2. Export memory grew with the largest text: a 30 MB observation took 4.4 GB (6.9 GB with
   `--seq-len 8192`), since the whole rendered text went to the tokenizer in one call
   (its per-token structures are a hundred bytes and more a token) before the length
   limit cut it, and a batch of 256 big records was one call. Long texts are now encoded
   in pieces cut where the tokenizer's tokens provably end (only the first `max_len + 1`
   tokens held under a limit, and the count), at most about a megabyte of text a call.

The tokenizer is the real one export uses, wrapped to count the characters it is given
(`Counting`): the character counts, not time, show what scaled. Real parts otherwise:
Parquet shards read by `inputs.iter_batches`, the `worldtrace` command in a subprocess.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.inputs import iter_batches
from worldtrace.pipelines.prompt import SystemPrompt
from worldtrace.pipelines.render import CHATML, PLAIN, load_template
from worldtrace.pipelines.samples import SampleBuilder, SampleConfig
from worldtrace.pipelines.tokens import (
    BATCH_CHARS,
    CUTTABLE_SPLITS,
    Encoder,
    load_tokenizer,
)
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.records import Action, Observation, System, Trajectory, Turn

from .test_export_hunt_1204f import TOKENIZER, wt

JINJA_CHATML = (
    "{%- for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] "
    "+ '<|im_end|>' + '\\n' }}{%- endfor %}"
)
"""The chatml template as a Jinja file: the same text, rendered by the general path."""
JINJA_PLAIN = (
    "{%- for m in messages %}{{ {'system': '### System\\n', 'user': '### Action\\n', "
    "'assistant': '### Observation\\n'}[m['role']] + m['content'] + '\\n\\n' }}{%- endfor %}"
)


SHORT = System(simulation_instruction="Predict the output.")
"""A system prompt no limit below trims."""


class Counting:
    """The real tokenizer, counting the characters each call gives it."""

    def __init__(self, tok):
        self._tok = tok
        self.chars = 0
        self.largest = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def _count(self, texts: list[str]) -> None:
        n = sum(map(len, texts))
        self.chars += n
        self.largest = max(self.largest, n)

    def encode_batch_fast(self, texts, **kw):
        self._count(texts)
        return self._tok.encode_batch_fast(texts, **kw)

    def encode_batch(self, texts, **kw):
        self._count(texts)
        return self._tok.encode_batch(texts, **kw)

    def encode(self, text, **kw):
        self._count([text])
        return self._tok.encode(text, **kw)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TOKENIZER)


@pytest.fixture(scope="module")
def encoder(tok):
    """The `Encoder` a `SampleBuilder` makes of `tok`, built once with its plain copy (the
    tokenizer without its added tokens, for special-looking content: a second and more
    to build). The builders of the tests that compare samples share it: each would build
    the same one from the same tokenizer (`build`)."""
    e = Encoder(tok)
    e.plain(["<|im_end|>"])  # builds the plain copy
    return e


@pytest.fixture(scope="module")
def byte_len(encoder):
    """The tokenizer's byte-length table, read once (`Encoder`'s `byte_len`)."""
    return encoder.byte_len


def echo_turns(n: int, decided: bool = True) -> list[Turn]:
    """The user's trajectory: `echo i` answered `i ok beta` (`decided`: as processed)."""
    turns = [Turn(i, Action("keystrokes", f"echo {i}\n"), Observation(f"{i} ok beta\n"))
             for i in range(n)]  # fmt: skip
    for t in turns if decided else ():
        t.category, t.keep = "mixed", 1.0
    return turns


def write(root: Path, records: list[Trajectory]) -> Path:
    """Records as a processed trajectories table (their turns decided)."""
    d = root / "processed" / "trajectories"
    with ShardWriter(d) as w:
        w.write(records)
    return d


def build(
    inp: Path, tokenizer, template, encoder: Encoder | None = None, **cfg
) -> tuple[SampleBuilder, list]:
    """The samples of the records in `inp`; with `encoder` (one of `tokenizer`, as the
    builder makes), the builder encodes with that one."""
    builder = SampleBuilder(SampleConfig(**cfg), template, tokenizer, SystemPrompt())
    if encoder is not None:
        assert encoder.tok is tokenizer and encoder.cuttable == builder.encoder.cuttable
        builder.encoder = encoder
    out = [
        (s.sample_id, s.input_ids.tolist(), s.loss_mask.tolist())
        for s in builder.samples(iter_batches(str(inp)))
    ]
    return builder, out


def jinja(tmp_path: Path, source: str, eot: str) -> Any:
    f = tmp_path / f"t{abs(hash(source))}.j2"
    f.write_text(source)
    return load_template(str(f), eot)


# -- 1. turn samples ---------------------------------------------------------------------
def test_turn_samples_encode_each_turn_once(tmp_path, tok):
    """The user's repro, smaller: turn samples of a long trajectory under --max-len gave
    the tokenizer every turn's whole history (300 turns: 150 times the trajectory)."""
    inp = write(tmp_path, [Trajectory("terminal", turns=echo_turns(300)).with_id()])
    counting = Counting(tok)
    _, samples = build(inp, counting, CHATML, sample_mode="turn", max_len=256)
    assert len(samples) == 300 and all(len(ids) <= 256 for _, ids, _ in samples)
    [rec] = next(iter_batches(str(inp)))
    whole = len(CHATML.render(SystemPrompt().text(rec), rec["turns"]).text)
    assert counting.chars <= 1.2 * whole, (counting.chars, whole)


def records_of_every_kind() -> list[Trajectory]:
    """Turn samples that fit, that drop history, whose system prompt is trimmed, whose
    target alone is truncated, turns out of the loss, special-looking content."""
    rng = random.Random(5)
    words = ["ls", "cat a.txt", "é", "日本", "😀", "<|im_end|>", "<|endoftext|>", "\n", "  ", "x"]
    out = []
    for n in range(12):
        turns = [
            Turn(i, Action("keystrokes", " ".join(rng.choices(words, k=rng.randrange(1, 6)))),
                 Observation(" ".join(rng.choices(words, k=rng.randrange(0, 60)))),
                 category="mixed", keep=rng.choice([0.0, 0.5, 1.0]))
            for i in range(rng.randrange(1, 40))
        ]  # fmt: skip
        if n % 4 == 0:  # a target too long for any limit below
            turns[-1].observation = Observation("line of output\n" * 400)
            turns[-1].keep = 1.0
        system = System(
            task_description="Count the files. " * (150 if n % 3 == 0 else 2),
            demonstrations=json.dumps(["$ ls\na.txt"] * (20 if n % 2 else 0)),
        )
        out.append(Trajectory("terminal", turns=turns, system=system).with_id())
    return out


@pytest.mark.parametrize(
    ("template", "source", "eot"), [(CHATML, JINJA_CHATML, "<|im_end|>"), (PLAIN, JINJA_PLAIN, "")]
)
@pytest.mark.parametrize(
    "cfg",
    [
        {"max_len": 160},
        {"max_len": 400, "keep_mode": "token"},
        {"seq_len": 1024, "keep_mode": "prefix", "eot_target": False},
        {"max_len": 256, "sample_turns": "one", "seed": 3},
        {},
    ],
)
def test_turn_samples_are_those_of_every_prefix_encoded_whole(
    tmp_path, tok, encoder, template, source, eot, cfg
):
    """Put together from turns encoded once, the samples and every count are those of
    each turn's whole history encoded and cut as before (the same template as a Jinja
    file takes that path)."""
    inp = write(tmp_path, records_of_every_kind())
    cfg = {"sample_mode": "turn", **cfg}
    fast, got = build(inp, tok, template, encoder, **cfg)
    general, want = build(inp, tok, jinja(tmp_path, source, eot), encoder, **cfg)
    assert fast.by_turn and not general.by_turn
    assert got == want
    assert fast.stats["train"].as_dict() == general.stats["train"].as_dict()
    counts = fast.stats["train"].as_dict()
    if cfg.get("max_len") == 160:  # every case above was met
        assert counts["system_trimmed"] and counts["truncated"]["samples"]
        assert counts["turns_without_target"]["turns"]


@pytest.mark.parametrize("template", ["chatml", "jinja"])
def test_turn_samples_without_a_limit_are_encoded_a_slice_at_a_time(tmp_path, tok, template):
    """Without --max-len a turn sample holds its whole history (the output is quadratic),
    but the encoder was given all of a batch's prefixes before the first sample came out:
    300 turns, 150 times the trajectory. Now at most two slices of `job_chars`."""
    inp = write(tmp_path, [Trajectory("terminal", turns=echo_turns(300)).with_id()])
    tpl = CHATML if template == "chatml" else jinja(tmp_path, JINJA_CHATML, "<|im_end|>")
    counting = Counting(tok)
    builder = SampleBuilder(
        SampleConfig(sample_mode="turn"), tpl, counting, SystemPrompt(), job_chars=50_000
    )
    samples = builder.samples(iter_batches(str(inp)))
    first = next(samples)
    [rec] = next(iter_batches(str(inp)))
    whole = len(tpl.render(SystemPrompt().text(rec), rec["turns"]).text)
    assert counting.chars <= 2 * 50_000 + whole, counting.chars
    assert first.sample_id.endswith(":t0") and len(list(samples)) == 299


def test_the_users_long_trajectory_exports_as_before(tmp_path):
    """`process --input L.jsonl`, then a turn export under --max-len: the rows are those
    of the general path (the chatml text as a Jinja template), and it verifies."""
    src = tmp_path / "L.jsonl"
    # 150 turns (the user's had 1,000): some 3,000 tokens, most samples (from about the
    # 13th) drop history to fit 512; the general path's cost grows with their square
    t = Trajectory("terminal", turns=echo_turns(150, decided=False))
    src.write_text(t.with_id().to_json() + "\n")
    store = str(tmp_path / "lt")
    r = wt("--store", store, "--create", "process", "--input", str(src), "--workers", "1")
    assert r.returncode == 0, r.stderr
    (tmp_path / "chatml.j2").write_text(JINJA_CHATML)
    rows = {}
    for name, extra in (
        ("fast", []),
        ("general", ["--template", str(tmp_path / "chatml.j2"), "--template-eot", "<|im_end|>"]),
    ):
        out = tmp_path / name
        r = wt("--store", store, "export", "--sample-mode", "turn", "--max-len", "512",
               "-o", str(out), *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "exported 150 samples" in r.stdout
        assert wt("export", "--verify", str(out)).returncode == 0
        rows[name] = [pq.read_table(f).to_pylist() for f in sorted(out.glob("*.parquet"))]
    assert rows["fast"] == rows["general"]


# -- 2. big texts ------------------------------------------------------------------------
def big_output(n_chars: int, seed: int = 0) -> str:
    """Terminal output: lines of words, numbers and punctuation."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "1234", "x=5;", "foo/bar.txt", "ERROR:", "  ", "\t", "é", "😀"]
    lines, size = [], 0
    while size < n_chars:
        line = " ".join(rng.choices(words, k=rng.randrange(3, 15)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


@pytest.fixture(scope="module")
def big_record(tmp_path_factory, tok) -> tuple[Path, list[int], int]:
    """A 2 MB observation's trajectory, written once (the builders only read it), and
    the encodings every limit's samples are checked against, each of its text encoded
    whole: the ids of the sample of the big turn (alone, or first), and the token count
    of the whole trajectory."""
    obs = big_output(2_000_000)  # twice `BATCH_CHARS`: more than one call's worth
    turns = [
        Turn(0, Action("keystrokes", "cat big.log\n"), Observation(obs), category="mixed", keep=1.0),
        Turn(1, Action("keystrokes", "ls\n"), Observation("big.log\n"), category="mixed", keep=1.0),
    ]  # fmt: skip
    inp = write(
        tmp_path_factory.mktemp("big"),
        [Trajectory("terminal", turns=turns, system=SHORT).with_id()],
    )
    [rec] = next(iter_batches(str(inp)))
    system = SystemPrompt().text(rec)
    first = rec["turns"][:1]
    text = CHATML.render(system, first).text  # the sample of the big turn (alone, or first)
    want = tok.encode(text, add_special_tokens=False).ids
    whole = tok.encode(CHATML.render(system, rec["turns"]).text, add_special_tokens=False)
    return inp, want, len(whole.ids)


@pytest.mark.parametrize(
    "cfg",
    [
        {"max_len": 512, "overflow": "truncate"},
        {"seq_len": 2048},
        {"sample_mode": "turn", "max_len": 512},
    ],
)
def test_a_big_observation_is_encoded_a_piece_at_a_time(big_record, tok, cfg):
    """A 3 MB observation went to the tokenizer whole (its structures for every token
    held at once), though the limit keeps 512 tokens. Now no call gets more than
    `BATCH_CHARS`, and the sample is the whole text's first tokens (here 2 MB: what is
    more than `BATCH_CHARS` is so for any size)."""
    inp, want, whole = big_record
    counting = Counting(tok)
    builder, samples = build(inp, counting, CHATML, **cfg)
    assert counting.largest <= BATCH_CHARS, counting.largest
    limit = cfg.get("max_len") or cfg["seq_len"]
    assert samples[0][1] == want[:limit]
    truncated = builder.stats["train"].as_dict()["truncated"]
    if cfg.get("sample_mode") != "turn":  # the trajectory's tokens past the limit
        cut = whole - limit if "overflow" in cfg else len(want) - limit
        assert truncated["tokens"] == cut
    else:
        assert truncated["tokens"] == len(want) - limit


def test_a_batch_of_big_records_is_encoded_a_slice_at_a_time(tmp_path, tok):
    """40 records of 60,000 characters, one batch: one tokenizer call of 2.4 M
    characters. Now at most `BATCH_CHARS` a call, and the samples are unchanged (here 25
    records, 1.5 M characters: more than `BATCH_CHARS` as well)."""
    records = [
        Trajectory("terminal", turns=[
            Turn(0, Action("keystrokes", f"cat f{i}\n"), Observation(big_output(60_000, i)),
                 category="mixed", keep=1.0)
        ], system=SHORT).with_id()
        for i in range(25)
    ]  # fmt: skip
    inp = write(tmp_path, records)
    counting = Counting(tok)
    _, samples = build(inp, counting, CHATML, seq_len=8192)
    assert counting.largest <= BATCH_CHARS, counting.largest
    [batch] = iter_batches(str(inp))
    for rec, (_, ids, _) in zip(batch, samples, strict=True):
        text = CHATML.render(SystemPrompt().text(rec), rec["turns"]).text
        assert ids == tok.encode(text, add_special_tokens=False).ids[:8192]


def llama3_like(tok):
    """Qwen's vocabulary behind Llama 3's pre-tokenizer regex."""
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = CUTTABLE_SPLITS[1]
    return Tokenizer.from_str(json.dumps(spec))


def test_pieces_encode_as_the_whole_text(tok, encoder):
    """Cut into pieces of a few characters (thousands of cuts, beside newlines, CRLF,
    non-ASCII letters, emoji, combining marks, special-looking content), every text's
    ids, offsets, turn marks and count are those of the text encoded whole."""
    bits = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<think>", "\n", "\n\n", "\r\n",
            " ", "  ", "\t", "a", "word", "'s", "'ll", "é", "e\u0301", "日本", "😀", "x y",
            "<", "123456", "}", "{", "#", "\u00a0", "\u2028", "ﬁ", "Ǆ", "\x0b", "A", "z ",
            # what may follow a newline at a cut: letters of other scripts, combining marks
            # and Hangul jamo (NFC composes them with what is before), other spaces
            "\u0301", "\u1100", "\u1161", "한", "Ж", "ا", "。", "１", "\u3000", "\u1680",
            "\x85", "\u200b", "\x1c", "\ufeff"]  # fmt: skip
    rng = random.Random(1)

    def content(n: int) -> str:
        return "".join(rng.choice(bits) for _ in range(rng.randrange(0, n)))

    # Qwen's texts encoded whole by the module's encoder (each text is shorter than its
    # `chunk`: one piece), the other tokenizer's by one that never cuts
    for t in (tok, llama3_like(tok)):
        whole = encoder if t is tok else Encoder(t, chunk=10**9)
        pieces = Encoder(t, whole.byte_len, chunk=3, batch=40)
        assert pieces.cuttable
        cuts = 0
        for i in range(1500):
            turns = [
                {"index": j, "action": {"text": content(12)}, "observation": {"text": content(30)}}
                for j in range(rng.randrange(1, 4))
            ]
            r = (CHATML, PLAIN)[i % 2].render(content(10), turns)
            text = r.text if i % 3 else str(r.text)  # a plain str: special tokens read
            marks = [sp.turn_start for sp in r.spans]
            assert whole.cuts(text) == [(0, len(text))]  # encoded whole
            keep = rng.choice([None, 0, 1, 7, 10**6])
            [w] = whole([text], marks=[marks])
            [p] = pieces([text], keep, [marks])
            cuts += len(pieces.cuts(text)) - 1
            n = len(w) if keep is None else keep
            assert (len(p), p.marks) == (len(w), w.marks), text
            assert p.ids.tolist() == w.ids[:n].tolist(), text
            assert p.offsets.tolist() == w.offsets[:n].tolist(), text
        assert cuts > 10_000


def gpt2_split(spec: dict) -> None:
    """GPT-2's pre-tokenizer: a newline before a word is a pre-token of its own."""
    spec["pre_tokenizer"] = {
        "type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True
    }  # fmt: skip


def lstrip(spec: dict) -> None:
    """`<|im_start|>` taking the whitespace before it (a newline at a cut)."""
    spec["added_tokens"][1]["lstrip"] = True


def newline_token(spec: dict) -> None:
    """An added token holding a newline: it may span a cut."""
    top = max(t["id"] for t in spec["added_tokens"])
    spec["added_tokens"].append({**spec["added_tokens"][0], "id": top + 1, "content": "e\nl"})


@pytest.mark.parametrize("change", [gpt2_split, lstrip, newline_token])
def test_a_tokenizer_not_known_to_cut_there_encodes_texts_whole(tok, change):
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    change(spec)
    t = Tokenizer.from_str(json.dumps(spec))
    text = "word word\nline\n" * 10_000
    enc = Encoder(t, chunk=100)
    assert not enc.cuttable and enc.cuts(text) == [(0, len(text))]
    [e] = enc([text], 5)
    assert len(e) == len(t.encode(text, add_special_tokens=False).ids) and len(e.ids) == 5


@pytest.mark.parametrize("first", ["日本語のログ", "журнал", "ошибка: 3"])
def test_lines_that_start_with_other_scripts_are_cut_too(tok, byte_len, first):
    """Hunt 1205g: a text whose lines start with a non-ASCII letter (a Chinese or Russian
    log) had no cut (a printable ASCII character after a newline, or an ASCII letter and a
    space) and went to the tokenizer whole: 6.45 GB for 10 MB of Chinese at `--seq-len
    8192`, 0.48 GB for ASCII output of that size. Any character that is not a space after
    a newline is a cut: no pre-token of `CUTTABLE_SPLITS` holds a newline and what follows
    it, and NFC composes nothing with a newline."""
    rng = random.Random(3)
    text = "\n".join(first + str(rng.randrange(10**6)) for _ in range(3000))
    pieces = Encoder(tok, byte_len, chunk=1000)
    whole = Encoder(tok, byte_len, chunk=10**9)
    assert len(pieces.cuts(text)) > 20
    [p], [w] = pieces([text]), whole([text])
    assert p.ids.tolist() == w.ids.tolist() and p.offsets.tolist() == w.offsets.tolist()
