"""Five export defects found by the 2026-12-04 review (its scripts: /tmp/review_export/).

1. Packed rows were padded with `<|endoftext|>` or else id 0, not the end-of-document
   token the manifest names (`eod: "</s>"`, padding `!`); a tokenizer with no EOD packed
   with whatever id 0 is. Padding is now the manifest's `eod_id`; packing without one
   is refused.
2. A `--template-eot` the Jinja template never writes was recorded in the manifest as the
   trained end-of-turn; it is now refused, naming the option and the template.
3. `counts.truncated.turns` missed a cut inside an observation's last character (a
   three-token emoji): the cut was rounded up to the end of the whole character.
4. `counts.by_category` left out end-of-turn targets: a kept turn with an empty
   observation was not "in loss", and the categories' loss tokens fell short of the total.
5. `export --verify` did not recount a Megatron loss-mask sidecar (a flipped byte, an EOD
   made a target), nor the manifest's `samples`/`loss_tokens`, nor packed padding.

Real parts: records written as Parquet, the real Qwen tokenizer (and copies of its
tokenizer.json with the end-of-document token renamed or removed), the CLI in process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.megatron import read_index
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.schemas import ShardWriter
from worldtrace.schemas.hashing import sha256_file
from worldtrace.schemas.records import Action, Observation, Trajectory, Turn

from worldtrace.cli import cli

TOKENIZER = str(default_tokenizer())
EMOJI_END = "build finished, all tests pass: the end 🎉"
"""An observation whose last character is three Qwen tokens ('ĠðŁ', 'İ', 'ī')."""


def turn(i: int, obs: str, category: str = "expansion", keep: float = 1.0) -> Turn:
    return Turn(i, Action("text", f"run step {i}"), Observation(obs), category=category, keep=keep)


def write(d: Path, records: list[Trajectory]) -> Path:
    with ShardWriter(d) as w:
        w.write(records)
    return d


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Twelve trajectories over two domains, one with a kept empty observation."""
    records = [
        Trajectory(
            "terminal" if k % 2 else "swe",
            turns=[
                turn(0, f"listing {k}: a.txt b.txt\n" * (k + 1), "expansion"),
                turn(1, "", "transform"),  # kept: its only target is the end-of-turn
                turn(2, f"exit {k}", "retrieval", keep=0.0),
                turn(3, f"done with {k} " * (3 * k + 2), "echo"),
            ],
            trajectory_id=f"r-{k:02d}",
        )
        for k in range(12)
    ]
    return write(tmp_path_factory.mktemp("r1204") / "in", records)


def run(inp: Path, out: Path, **kw) -> dict:
    kw.setdefault("tokenizer", TOKENIZER)
    return export(ExportConfig(input=str(inp), output=str(out), **kw))


def rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def sequences(prefix: Path) -> list[np.ndarray]:
    sizes, pointers, _, dtype = read_index(f"{prefix}.idx")
    data = np.fromfile(f"{prefix}.bin", dtype=dtype)
    item = np.dtype(dtype).itemsize
    return [data[p // item : p // item + s] for s, p in zip(sizes, pointers, strict=True)]


def cli_export(store: Path, *args: str):
    """The CLI, given a store (it reads --input, but a store must exist)."""
    (store / "processed").mkdir(parents=True, exist_ok=True)
    return CliRunner().invoke(
        cli, ["--store", str(store), "export", "--progress-every", "0", *args], obj={}
    )


def tokenizer_copy(d: Path, eod: str | None) -> str:
    """Qwen's tokenizer.json with `<|endoftext|>` renamed to `eod` (None: removed)."""
    spec = json.loads(Path(TOKENIZER).read_text())
    added = []
    for t in spec["added_tokens"]:
        if t["content"] == "<|endoftext|>":
            if eod is None:
                continue
            t = {**t, "content": eod}
        added.append(t)
    spec["added_tokens"] = added
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.json").write_text(json.dumps(spec))
    return str(d / "tokenizer.json")


# -- 1: padding is the manifest's end-of-document token ------------------------------------
def test_packed_rows_are_padded_with_the_eod_the_manifest_names(corpus, tmp_path):
    tok = tokenizer_copy(tmp_path / "llamalike", "</s>")
    pq_m = run(corpus, tmp_path / "pq", tokenizer=tok, seq_len=512)
    mg_m = run(corpus, tmp_path / "mg", tokenizer=tok, seq_len=512, format="megatron")
    eod = pq_m["tokenizer"]["eod_id"]
    assert pq_m["tokenizer"]["eod"] == "</s>" and eod == load_tokenizer(tok).token_to_id("</s>")
    packed = rows(tmp_path / "pq")
    pads = [i for r in packed for i in r["input_ids"][r["num_tokens"] :]]
    assert pads and set(pads) == {eod}  # was {0}: '!'
    assert not any(m for r in packed for m in r["loss_mask"][r["num_tokens"] :])
    # a Megatron row is the Parquet row, padding included, then its one EOD
    docs = sequences(tmp_path / "mg" / "train_text_document")
    assert mg_m["counts"]["rows"] == len(docs) == len(packed)
    for doc, r in zip(docs, packed, strict=True):
        assert doc.tolist() == [*r["input_ids"], eod]


def test_a_tokenizer_without_eod_is_refused_for_packing(corpus, tmp_path):
    tok = tokenizer_copy(tmp_path / "noeod", None)
    with pytest.raises(ValueError, match=r"no end-of-document token.*seq.len"):
        run(corpus, tmp_path / "packed", tokenizer=tok, seq_len=512)
    assert not (tmp_path / "packed").exists()
    r = cli_export(tmp_path / "store", "--input", str(corpus), "--tokenizer", tok, "--seq-len", "512",
                   "-o", str(tmp_path / "cli"))  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "no end-of-document token" in r.output and "--seq-len" in r.output
    assert not (tmp_path / "cli").exists()
    with pytest.raises(ValueError, match=r"no end-of-document token.*Megatron"):
        run(corpus, tmp_path / "mg", tokenizer=tok, format="megatron")
    # unpacked Parquet pads nothing: allowed, and the manifest says there is no EOD
    m = run(corpus, tmp_path / "plain", tokenizer=tok)
    assert m["tokenizer"]["eod"] is None and m["counts"]["samples"] > 0


# -- 2: an end-of-turn text the template never writes ---------------------------------------
JINJA = (
    '{% for m in messages %}[{{ m.role | upper }}]{{ m.content }}{% if m.role == "assistant" %}'
    "</obs>{% endif %}\n{% endfor %}"
)


def test_a_template_eot_the_template_never_writes_is_refused(corpus, tmp_path):
    tpl = tmp_path / "custom.j2"
    tpl.write_text(JINJA)
    m = run(corpus, tmp_path / "ok", template=str(tpl), template_eot="</obs>")
    assert m["template"]["eot"] == "</obs>"
    with pytest.raises(ValueError, match=r"template_eot.*custom\.j2|custom\.j2.*template_eot"):
        run(corpus, tmp_path / "bad", template=str(tpl), template_eot="<|eot_id|>")
    assert not (tmp_path / "bad").exists()
    r = cli_export(tmp_path / "store", "--input", str(corpus), "--template", str(tpl), "--template-eot",
                   "<|eot_id|>", "-o", str(tmp_path / "cli"))  # fmt: skip
    assert r.exit_code == 1, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert "--template-eot" in line and "custom.j2" in line and "<|eot_id|>" in line
    assert not (tmp_path / "cli").exists()


# -- 3: a cut inside an observation's last character ---------------------------------------
def test_a_cut_inside_the_last_character_counts_the_turn(tmp_path):
    inp = write(tmp_path / "in", [Trajectory("mcp", turns=[turn(0, EMOJI_END)], trajectory_id="e")])
    run(inp, tmp_path / "full")
    [full] = rows(tmp_path / "full")
    n = full["num_tokens"]
    # the sample ends: ' 🎉' (3 tokens), <|im_end|>, '\n'; every one but '\n' a target
    assert full["loss_mask"][-5:] == [1, 1, 1, 1, 0]
    for cut, lost_loss, turns in ((1, 0, 0), (2, 1, 1), (3, 2, 1)):
        out = tmp_path / f"cut{cut}"
        m = run(inp, out, max_len=n - cut, overflow="truncate")
        assert m["counts"]["loss_tokens"] == full["num_loss_tokens"] - lost_loss
        t = m["counts"]["truncated"]
        assert (t["samples"], t["tokens"], t["turns"]) == (1, cut, turns), cut


# -- 4: per-category counts add up to the totals -------------------------------------------
@pytest.mark.parametrize(
    "kw", [{}, {"sample_mode": "turn"}, {"eot_target": False}, {"max_len": 400}]
)
def test_by_category_adds_up_to_the_totals(corpus, tmp_path, kw):
    c = run(corpus, tmp_path / "o", **kw)["counts"]
    cats = c["by_category"]
    assert sum(v["loss_tokens"] + v["eot_tokens"] for v in cats.values()) == c["loss_tokens"]
    assert all(v["loss_tokens"] <= v["obs_tokens"] for v in cats.values())  # the keep ratio
    empty = cats["transform"]  # the kept empty observations: their target is the <|im_end|>
    assert empty["obs_tokens"] == empty["loss_tokens"] == 0
    if kw.get("eot_target") is False:
        assert empty["turns_in_loss"] == empty["eot_tokens"] == 0
        assert not any(v["eot_tokens"] for v in cats.values())
    elif "max_len" not in kw:
        assert empty["turns_in_loss"] == empty["eot_tokens"] == empty["turns"] == 12
    assert cats.get("retrieval", {"turns_in_loss": 0})["turns_in_loss"] == 0  # keep 0


# -- 5: --verify recounts from the files ---------------------------------------------------
def rehash(d: Path) -> None:
    """What a careful tamperer does: the manifest's sizes and hashes match the files."""
    m = json.loads((d / "manifest.json").read_text())
    for s in m["shards"]:
        p = d / s["path"]
        s["bytes"], s["sha256"] = p.stat().st_size, sha256_file(str(p))
    (d / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def edit_counts(d: Path, **delta: int) -> None:
    m = json.loads((d / "manifest.json").read_text())
    for k, v in delta.items():
        m["counts"][k] += v
    (d / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def edit_rows(d: Path, fn) -> None:
    [f] = sorted(d.glob("*.parquet"))
    t = pq.read_table(f)
    rs = t.to_pylist()
    fn(rs)
    pq.write_table(pa.Table.from_pylist(rs, schema=t.schema), f)
    rehash(d)


def edit_bin(path: Path, fn) -> None:
    b = bytearray(path.read_bytes())
    fn(b)
    path.write_bytes(bytes(b))
    rehash(path.parent)


def verified(d: Path) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["export", "--verify", str(d)], obj={})
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def exports(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify")
    for name, kw in {
        "pq": {},
        "pq-packed": {"seq_len": 512},
        "mg": {"format": "megatron"},
        "mg-packed": {"format": "megatron", "seq_len": 512},
        "awb": {"format": "agentworldbench"},
        "split": {"split": "test=0.3"},
        "mg-split": {"format": "megatron", "split": "test=0.3"},
    }.items():
        run(corpus, out / name, **kw)
    return out


def tampered(exports: Path, tmp_path: Path, name: str, copy: str = "") -> Path:
    d = tmp_path / (copy or name)
    shutil.copytree(exports / name, d)
    return d


def test_clean_exports_verify(exports):
    for d in sorted(exports.iterdir()):
        assert verified(d) == (0, f"{d}: verified\n"), d


@pytest.mark.parametrize(
    ("name", "key"),
    [(n, k) for n in ("pq", "pq-packed", "mg", "mg-packed") for k in ("samples", "loss_tokens")]
    + [("awb", "samples")],
)
def test_edited_manifest_counts_are_found(exports, tmp_path, name, key):
    d = tampered(exports, tmp_path, name)
    edit_counts(d, **{key: 1})
    code, out = verified(d)
    assert code == 1 and key.replace("_", " ") in out, out


def test_a_flipped_megatron_mask_byte_is_found(exports, tmp_path):
    d = tampered(exports, tmp_path, "mg")
    edit_bin(d / "train_loss_mask.bin", lambda b: b.__setitem__(0, 1))  # a system token
    code, out = verified(d)
    assert code == 1 and "loss tokens" in out, out


@pytest.mark.parametrize("name", ["mg", "mg-packed"])
def test_an_eod_made_a_target_is_found(exports, tmp_path, name):
    """The sidecar's last byte (the last EOD) set to 1 and one real target set to 0: the
    sum stays, so only the EOD check can see it."""
    d = tampered(exports, tmp_path, name)

    def swap(b: bytearray) -> None:
        b[-1] = 1
        b[b.index(1)] = 0

    edit_bin(d / "train_loss_mask.bin", swap)
    code, out = verified(d)
    assert code == 1 and "end-of-document" in out, out


def test_packed_padding_is_checked(exports, tmp_path):
    d = tampered(exports, tmp_path, "pq-packed")

    def pad_zero(rs):
        r = next(r for r in rs if r["num_tokens"] < len(r["input_ids"]))
        r["input_ids"][-1] = 0

    edit_rows(d, pad_zero)
    code, out = verified(d)
    assert code == 1 and "padding" in out, out

    d = tampered(exports, tmp_path, "pq-packed", "again")  # padding made a target, counts kept true

    def pad_target(rs):
        r = next(r for r in rs if r["num_tokens"] < len(r["input_ids"]))
        r["loss_mask"][-1] = 1
        r["num_loss_tokens"] += 1

    edit_rows(d, pad_target)
    edit_counts(d, loss_tokens=1)
    code, out = verified(d)
    assert code == 1 and "padding" in out, out


def test_a_row_whose_mask_disagrees_with_its_count_is_found(exports, tmp_path):
    """Two rows' masks changed so the totals still match: the row counts do not."""
    d = tampered(exports, tmp_path, "pq")

    def move(rs):
        rs[0]["loss_mask"][0] = 1
        rs[1]["loss_mask"][rs[1]["loss_mask"].index(1)] = 0

    edit_rows(d, move)
    code, out = verified(d)
    assert code == 1 and "num_loss_tokens" in out, out


def test_a_split_exports_top_counts_are_checked(exports, tmp_path):
    d = tampered(exports, tmp_path, "split")
    edit_counts(d, samples=1)
    code, out = verified(d)
    assert code == 1 and "samples" in out, out
