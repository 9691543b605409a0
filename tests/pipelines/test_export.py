from __future__ import annotations

import json
import re
import shutil
import struct

import numpy as np
import pyarrow.parquet as pq
import pytest
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import keep_turn
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.prompt import SystemPrompt
from worldtrace.pipelines.render import CHATML, load_template
from worldtrace.pipelines.samples import best_fit
from worldtrace.pipelines.tokens import default_tokenizer, load_tokenizer
from worldtrace.pipelines.writers import verify
from worldtrace.schemas import ShardWriter, read_records

TOKENIZER = str(default_tokenizer())


def do_export(store, out, **kw):
    cfg = ExportConfig(
        input=str(store.table("trajectories")), output=str(out), tokenizer=TOKENIZER, **kw
    )
    return export(cfg)


@pytest.fixture(scope="module")
def tok():
    """The export's tokenizer, loaded once for the checks that read it."""
    return load_tokenizer(TOKENIZER)


@pytest.fixture(scope="module")
def default_export(processed, tmp_path_factory):
    """(directory, manifest) of `processed` exported with the defaults, once: the tests
    that only read a default export share it (one that changes it works on a copy)."""
    out = tmp_path_factory.mktemp("default") / "e"
    return out, do_export(processed, out)


def rows(out):
    return [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def by_id(store):
    return {t.trajectory_id: t for t in read_records(store.table("trajectories"))}


def test_decode_reproduces_rendered_text_and_mask_only_in_kept_observations(
    processed, default_export, tok
):
    out, m = default_export
    trajs = by_id(processed)
    assert m["counts"]["samples"] == len(trajs)
    for r in rows(out)[:150]:
        t = trajs[r["trajectory_id"]]
        d = t.to_dict()
        rendered = CHATML.render(SystemPrompt().text(d), d["turns"])
        assert tok.decode(r["input_ids"], skip_special_tokens=False) == rendered.text
        enc = tok.encode(rendered.text, add_special_tokens=False)
        allowed = []
        for sp in rendered.spans:
            if keep_turn(t.trajectory_id, sp.turn, 0, t.turns[sp.turn].keep):
                allowed.append((sp.start, sp.eot_end))
        for i, flag in enumerate(r["loss_mask"]):
            if flag:
                s, e = enc.offsets[i]
                assert any(a <= s and e <= b for a, b in allowed), (i, s, e)
        assert len(r["loss_mask"]) == len(r["input_ids"]) == r["num_tokens"]
        assert sum(r["loss_mask"]) == r["num_loss_tokens"]


def test_only_observation_tokens_without_eot(processed, tmp_path, tok):
    out = tmp_path / "e"
    do_export(processed, out, eot_target=False)
    im_end = tok.token_to_id("<|im_end|>")
    for r in rows(out)[:50]:
        assert not any(
            f and i == im_end for i, f in zip(r["input_ids"], r["loss_mask"], strict=True)
        )


def test_keep_ratios_hold_by_category(processed, tmp_path):
    m = do_export(processed, tmp_path / "tok", keep_mode="token")
    cats = m["counts"]["by_category"]
    keep = m["mask_policy"]["keep"]
    checked = 0
    for cat, c in cats.items():
        if c["obs_tokens"] > 2000:
            assert c["loss_tokens"] / c["obs_tokens"] == pytest.approx(keep[cat], abs=0.03), cat
            checked += 1
    assert checked >= 3
    m = do_export(processed, tmp_path / "turn", keep_mode="turn")
    for cat, c in m["counts"]["by_category"].items():
        if c["turns"] > 300:
            assert c["turns_in_loss"] / c["turns"] == pytest.approx(keep[cat], abs=0.06), cat


def test_prefix_mode_keeps_a_prefix(processed, tmp_path):
    m = do_export(processed, tmp_path / "p", keep_mode="prefix", eot_target=False)
    for cat, c in m["counts"]["by_category"].items():
        if c["obs_tokens"] > 2000:
            assert c["loss_tokens"] / c["obs_tokens"] >= m["mask_policy"]["keep"][cat] - 0.01


def test_byte_identical_across_runs(processed, tmp_path):
    a = do_export(processed, tmp_path / "a", seed=3)
    b = do_export(processed, tmp_path / "b", seed=3)
    assert a == b
    for s in a["shards"]:
        assert (tmp_path / "a" / s["path"]).read_bytes() == (
            tmp_path / "b" / s["path"]
        ).read_bytes()
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (
        tmp_path / "b" / "manifest.json"
    ).read_bytes()
    c = do_export(processed, tmp_path / "c", seed=4)
    assert c["shards"][0]["sha256"] != a["shards"][0]["sha256"]


def test_manifest_contents(default_export):
    _, m = default_export
    assert m["tokenizer"]["vocab_size"] == 151669 and len(m["tokenizer"]["sha256"]) == 64
    assert m["template"]["name"] == "chatml"
    assert m["mask_policy"]["name"] == "agentworld-v1" and "thresholds" in m["mask_policy"]
    assert "shifts labels" in m["label_shift"]
    assert set(m["counts"]["by_domain"]) == {"mcp", "swe", "terminal", "web"}


def test_verify_catches_a_flipped_byte(default_export, tmp_path):
    out = tmp_path / "e"
    shutil.copytree(default_export[0], out)  # a copy of the default export: its byte flipped
    assert verify(out) == []
    shard = next(out.glob("*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    problems = verify(out)
    assert problems and "sha256" in problems[0] and shard.name in problems[0]


def test_verify_of_a_directory_that_is_no_export_says_so(processed):
    """Found: `export --verify` of processed/ (a manifest of another kind) ended in a
    KeyError traceback."""
    [problem] = verify(processed.processed)
    assert "not an export's manifest" in problem and "manifest.json" in problem


def read_mmidx(prefix):
    """An independent reader, from the format description (magic, version, dtype,
    counts, sizes int32, pointers int64, document indices int64)."""
    with open(f"{prefix}.idx", "rb") as fh:
        idx = fh.read()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    version, code, n, ndoc = struct.unpack_from("<QBQQ", idx, 9)
    assert version == 1
    dtype = {1: np.uint8, 4: np.int32, 8: np.uint16, 5: np.int64}[code]
    off = 9 + 8 + 1 + 8 + 8
    sizes = np.frombuffer(idx, np.int32, n, off)
    pointers = np.frombuffer(idx, np.int64, n, off + 4 * n)
    docs = np.frombuffer(idx, np.int64, ndoc, off + 12 * n)
    data = np.memmap(f"{prefix}.bin", dtype=dtype, mode="r")
    item = np.dtype(dtype).itemsize
    seqs = [np.array(data[p // item : p // item + s]) for s, p in zip(sizes, pointers, strict=True)]
    return seqs, docs


def test_megatron_reads_back_independently(processed, default_export, tmp_path, tok):
    pq_out, _ = default_export  # the Parquet export of the same data and settings
    m = do_export(processed, tmp_path / "mg", format="megatron")
    ids, docs = read_mmidx(tmp_path / "mg" / "train_text_document")
    masks, mdocs = read_mmidx(tmp_path / "mg" / "train_loss_mask")
    expected = rows(pq_out)
    assert len(ids) == len(masks) == len(expected) == m["counts"]["rows"]
    assert list(docs) == list(range(len(ids) + 1)) and list(mdocs) == list(docs)
    eod = tok.token_to_id("<|endoftext|>")
    for a, mk, r in zip(ids, masks, expected, strict=True):  # each row, then the EOD
        assert a[:-1].tolist() == r["input_ids"] and mk[:-1].tolist() == r["loss_mask"]
        assert a[-1] == eod and mk[-1] == 0
    assert verify(tmp_path / "mg") == []


def test_turn_expansion_one_target_per_sample(processed, tmp_path, tok):
    do_export(processed, tmp_path / "t", sample_mode="turn")
    im_start = tok.token_to_id("<|im_start|>")
    rs = rows(tmp_path / "t")
    trajs = by_id(processed)
    # one sample per turn in the loss (a turn without a target makes none: see
    # test_export_turn_targets.py)
    assert len(rs) == sum(
        keep_turn(t.trajectory_id, u.index, 0, 1.0 if u.keep is None else u.keep)
        for t in trajs.values()
        for u in t.turns
    )
    for r in rs[:100]:
        ids, mask = r["input_ids"], r["loss_mask"]
        assert any(mask)
        last_assistant = max(i for i, x in enumerate(ids) if x == im_start)
        assert all(i > last_assistant for i, f in enumerate(mask) if f)  # only the final turn
    one = do_export(processed, tmp_path / "one", sample_mode="turn", sample_turns="one", seed=1)
    assert one["counts"]["samples"] == sum(
        any(
            keep_turn(t.trajectory_id, u.index, 1, 1.0 if u.keep is None else u.keep)
            for u in t.turns
        )
        for t in trajs.values()
    )


def test_split_at_turn_boundaries_and_truncate(processed, tmp_path, tok):
    m = do_export(processed, tmp_path / "s", max_len=256, overflow="split")
    rs = rows(tmp_path / "s")
    assert all(r["num_tokens"] <= 256 for r in rs)
    parts = [r for r in rs if "/p" in r["sample_id"]]
    assert parts, "some trajectories are longer than 256 tokens"
    im_start = tok.token_to_id("<|im_start|>")
    im_end = tok.token_to_id("<|im_end|>")
    for r in parts[:50]:
        text = tok.decode(r["input_ids"], skip_special_tokens=False)
        if r["num_tokens"] < 256:  # a whole group of turns: starts and ends on message boundaries
            assert r["input_ids"][0] == im_start and r["input_ids"][-2] == im_end
            assert text.endswith("<|im_end|>\n")
    assert m["counts"]["samples"] == len(rs)
    m = do_export(processed, tmp_path / "tr", max_len=320, overflow="truncate")
    rs = rows(tmp_path / "tr")
    assert max(r["num_tokens"] for r in rs) == 320
    # a sample whose truncation left no target token is left out, and counted
    left_out = m["counts"]["turns_without_target"]["samples"]
    assert left_out and len(rs) + left_out == len(by_id(processed))
    assert all(r["num_loss_tokens"] > 0 for r in rs)
    # 64 tokens hold only the system prompt: no sample has a target, so nothing is written
    with pytest.raises(ValueError, match="no target token"):
        do_export(processed, tmp_path / "t64", max_len=64, overflow="truncate")
    assert not (tmp_path / "t64").exists()


def test_packing_best_fit_with_boundaries(processed, tmp_path):
    m = do_export(processed, tmp_path / "pk", seq_len=2048)
    rs = rows(tmp_path / "pk")
    assert all(len(r["input_ids"]) == 2048 == len(r["loss_mask"]) for r in rs)
    assert sum(len(r["sample_ids"]) for r in rs) == m["counts"]["samples"]
    assert sum(r["num_tokens"] for r in rs) == m["counts"]["tokens"]
    for r in rs:
        assert r["doc_boundaries"][0] == 0 and r["doc_boundaries"] == sorted(r["doc_boundaries"])
        assert not any(r["loss_mask"][r["num_tokens"] :])  # padding is never a target
    assert verify(tmp_path / "pk") == []
    assert best_fit([(5, "a"), (4, "b"), (3, "c"), (3, "d"), (1, "e")], 8) == [[0, 2], [1, 3, 4]]


def test_jinja_template_spans(tmp_path, processed):
    tpl_file = tmp_path / "t.j2"
    tpl_file.write_text(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}"
    )
    tpl = load_template(str(tpl_file), eot="</assistant>")
    t = next(iter(by_id(processed).values())).to_dict()
    r = tpl.render("SYS", t["turns"])
    for sp, turn in zip(r.spans, t["turns"], strict=True):
        assert r.text[sp.start : sp.end] == turn["observation"]["text"]
        assert r.text[sp.eot_start : sp.eot_end] == "</assistant>"
    m = do_export(processed, tmp_path / "j", template=str(tpl_file), template_eot="</assistant>")
    assert m["template"]["name"] == "t" and m["counts"]["loss_tokens"] > 0


def test_a_template_jinja_cannot_render_is_named(tmp_path, processed):
    """Found: a template that leaves out the user messages ended the export with an
    IndexError traceback."""
    no_user = tmp_path / "no_user.j2"
    no_user.write_text(
        "{% for m in messages if m.role != 'user' %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    )
    with pytest.raises(ValueError, match=r"trajectory \w+: template 'no_user' dropped the action"):
        do_export(processed, tmp_path / "a", template=str(no_user), template_eot="")


def test_a_template_that_writes_an_observation_twice_is_refused(tmp_path, processed):
    """Found (12-04): `{{ m.content }} / {{ m.content }}` was exported, the second copy the
    target and the first in its context: the model is handed the answer it learns."""
    twice = tmp_path / "twice.j2"
    twice.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }} / {{ m.content }}\n"
                     "{% endfor %}")  # fmt: skip
    says = r"trajectory \w+: template 'twice' writes the observation \(assistant message\) of turn 0 twice"
    with pytest.raises(ValueError, match=says):
        do_export(processed, tmp_path / "t", template=str(twice), template_eot="")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("{% for m in messages %", r"template \S+bad.j2: line 1: unexpected 'end of template'"),
        (
            "{% for m in messages %}{{ m.bogus.x }}{% endfor %}",
            r"template bad: UndefinedError: 'dict object' has no attribute 'bogus'",
        ),
    ],
)
def test_a_template_jinja_cannot_read_or_run_is_one_line(tmp_path, processed, source, says):
    """Found: a Jinja template with a syntax error, or one naming a field the messages
    do not have, ended `export` with Jinja's traceback (~40 lines). Now one line naming
    the template and what Jinja said (a syntax error before anything is read), and
    nothing is written."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    bad = tmp_path / "bad.j2"
    bad.write_text(source)
    out = tmp_path / "e"
    r = CliRunner().invoke(cli, ["--store", str(processed.root), "export", "--tokenizer",
                                 TOKENIZER, "--template", str(bad), "-o", str(out)], obj={})  # fmt: skip
    assert r.exit_code == 1, r.output
    assert re.search(says, r.output) and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not out.exists()


def test_a_where_with_a_comment_is_the_condition_query_runs(tmp_path, processed):
    """Found: `--where "domain = 'terminal' -- the terminal ones"` was refused (the
    comment swallowed what closed the condition), though query runs it."""
    from worldtrace.schemas.views import connect

    where = "domain = 'terminal' -- the terminal ones"
    sql = f"SELECT count(*) FROM trajectories WHERE {where}\n"
    [(want,)] = connect(processed).execute(sql).fetchall()
    total = len(by_id(processed))
    m = do_export(processed, tmp_path / "e", where=where)
    assert 0 < want < total and m["where"]["left_out"] == total - want


def test_a_where_that_leaves_out_everything_says_so(tmp_path, processed):
    """Found: `export --where false` said the shards hold no trajectory, blaming the
    data; the condition left them all out."""
    total = len(by_id(processed))
    with pytest.raises(ValueError, match=rf"--where left out all {total} trajectories") as err:
        do_export(processed, tmp_path / "e", where="domain = 'no such domain'")
    assert "hold none" not in str(err.value) and not (tmp_path / "e").exists()


def test_private_use_characters_render_with_a_jinja_template(tmp_path, processed):
    """Found: a text holding U+E000..U+E005 (icon fonts put them in web and Android
    observations) stopped the whole export with a Jinja template: the renderer marked
    content with those characters. It now marks with private-use characters the record
    and the template do not use."""
    ok = tmp_path / "t.j2"
    ok.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}")
    tpl = load_template(str(ok))
    records = list(by_id(processed).values())[:3]
    icons = "".join(chr(c) for c in range(0xE000, 0xE008))
    records[1].turns[0].observation.text += f" {icons}"
    records[1].turns[0].action.text += "\ue005"
    t = records[1].to_dict()
    r = tpl.render("SYS \ue004", t["turns"])
    for sp, turn in zip(r.spans, t["turns"], strict=True):
        assert r.text[sp.start : sp.end] == turn["observation"]["text"]
    assert r.text.count(icons) == 1 and "<user>" + t["turns"][0]["action"]["text"] in r.text
    assert "SYS \ue004" in r.text
    with ShardWriter(tmp_path / "in") as w:
        w.write(records)
    m = export(ExportConfig(input=str(tmp_path / "in"), output=str(tmp_path / "b"),
                            tokenizer=str(default_tokenizer()), template=str(ok)))  # fmt: skip
    assert m["counts"]["samples"] == 3


def test_parquet_export_loads_with_hf_datasets(default_export, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    out, m = default_export
    files = sorted(str(p) for p in out.glob("*.parquet"))
    ds = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert ds.num_rows == m["counts"]["rows"]
    row = ds[0]
    assert len(row["input_ids"]) == len(row["loss_mask"]) == row["num_tokens"]
    assert sum(sum(r) for r in ds["loss_mask"]) == m["counts"]["loss_tokens"]


def test_long_system_prompt_is_trimmed_so_parts_carry_observations(tmp_path, tok):
    from worldtrace.collectors.synthetic import build

    demos = json.dumps(["DEMO " + "step and answer " * 400])
    t = build(
        "terminal",
        [(f"cat part{i}.txt\n", f"content of part {i}: " + "alpha beta " * 40) for i in range(8)],
        task_description="Read every part.",
        demonstrations=demos,
    )
    with ShardWriter(tmp_path / "raw") as w:
        w.write(t)
    run(ProcessConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "p"), workers=1))
    cfg = ExportConfig(
        input=str(tmp_path / "p" / "trajectories"),
        output=str(tmp_path / "e"),
        tokenizer=TOKENIZER,
        max_len=512,
    )
    m = export(cfg)
    parts = rows(tmp_path / "e")
    assert m["counts"]["system_trimmed"] >= 1 and len(parts) > 1
    assert all(r["num_tokens"] <= 512 and r["num_loss_tokens"] > 0 for r in parts)
    text = tok.decode(parts[0]["input_ids"], skip_special_tokens=False)
    assert "Read every part." in text and "DEMO" not in text  # demonstrations went first
    # Found: the command said nothing of it (13,279 tokens of a SWE prompt became 3,664
    # with only the manifest knowing), and an AgentWorldBench export (text, no token ids)
    # ended with `0 tokens, 0 loss tokens`
    from click.testing import CliRunner

    from worldtrace.cli import cli

    (tmp_path / "store").mkdir()
    base = ["--store", str(tmp_path / "store"), "export",
            "--input", str(tmp_path / "p" / "trajectories")]  # fmt: skip
    r = CliRunner().invoke(
        cli,
        [*base, "--tokenizer", TOKENIZER, "--max-len", "512", "-o", str(tmp_path / "c")],
        obj={},
    )
    assert r.exit_code == 0, r.output
    said = f"trimmed the system prompt of {m['counts']['system_trimmed']} trajectory(ies)"
    assert said in r.output and "half of 512 tokens" in r.output
    r = CliRunner().invoke(cli, [*base, "--format", "agentworldbench", "-o", str(tmp_path / "a")],
                           obj={})  # fmt: skip
    assert r.exit_code == 0 and "tokens" not in r.output and " rows) from 1 " in r.output, r.output


def pinned_records():
    """Records built field by field (fixed ids, keep ratios and categories), so the pinned
    hashes below depend only on export code and the tokenizer, not on the generator or
    the processing pipeline."""
    from worldtrace.schemas.records import Action, Observation, System, Trajectory, Turn

    def turns(pairs):
        return [
            Turn(i, Action("text", a), Observation(o), category=c, keep=k)
            for i, (a, o, c, k) in enumerate(pairs)
        ]

    long = [
        (f"cat part{i}.txt", f"part {i}: " + "alpha beta " * 12, "mixed", 0.5) for i in range(6)
    ]
    return [
        Trajectory(
            "terminal",
            turns=turns(
                [
                    ("ls", "a.txt b.txt", "informative", 1.0),
                    ("cat a.txt", "hello world", "mixed", 0.5),
                    ("rm b.txt", "", "boilerplate", 0.0),
                ]
            ),
            system=System(
                task_description="Tidy the folder.", demonstrations="ls\n-> a.txt b.txt\n" * 8
            ),
            trajectory_id="pin-a",
        ),
        Trajectory(
            "web",
            turns=turns(
                [("open /", "<h1>Home</h1>", "informative", None), ("click #x", "404", None, 1.0)]
            ),
            trajectory_id="pin-b",
        ),
        Trajectory(
            "swe", turns=turns(long), system=System(task_description="Read."), trajectory_id="pin-c"
        ),
    ]


# Megatron and AgentWorldBench shards hold only token ids, masks and JSON, so their bytes are
# the same on every machine; Parquet shards also record the pyarrow version
# (created_by), so they are not pinned.
PINNED = {
    "megatron-split-token": {
        "train_loss_mask.bin": "05943b3f6ddcc116a8110ecd3751e91ddc8019ae7989e46dc368f9dc17f009bc",
        "train_loss_mask.idx": "cf81e7182337bb7a50fe099afe8716a6e36cb6271e70ac0afb56e14635dcc12b",
        "train_text_document.bin": "e2ea76ca9e673a341aa7c1e1b79fc9ff84228b724ac0881c10f2b76d75691ae3",
        "train_text_document.idx": "f7c1ae3ad69a2351a08623feffe97afff2817f62b1d2307c63c3aa4c1c2c1280",
    },
    "megatron-turn-packed": {
        "train_loss_mask.bin": "5dc6d7e636efd31d105866572d65093aafef5260b5f19c2d80d635ec48be8617",
        "train_loss_mask.idx": "91b27fe2674bca65ffc232abd72ae1b47bb93fd2629e07252a19d5d2b6615e9a",
        "train_text_document.bin": "df95a342ae85ea8c823a179139620af797ca033212fdc0bda96368115e81983f",
        "train_text_document.idx": "4ecfde6d499dd37ffe2b504a882f365184f07e68e61ce335381c22afc3a065a0",
    },
    "agentworldbench": {  # 12-04: each line's `worldtrace` provenance key; 12-07: its turns, outcome, source kind
        "swe_test.jsonl": "4067eb98f22dd00f6d9dda613985b0e7f8292fb6a32f3bbedffae2acfd6aaa0f",
        "terminal_test.jsonl": "94ea36c67859e61bf54aecd6b78cb93934a1e6ca921eb67762b7551a29bd7ddc",
        "web_test.jsonl": "324ce4d6985dd99d0a2506767c1c9cffcb1341698538aa60296cb8af49b5a18d",
    },
}


def test_pinned_shard_hashes(tmp_path):
    with ShardWriter(tmp_path / "in") as w:
        w.write(pinned_records())
    runs = {
        "megatron-split-token": {"format": "megatron", "keep_mode": "token", "max_len": 60},
        "megatron-turn-packed": {"format": "megatron", "sample_mode": "turn", "seq_len": 1024},
        "agentworldbench": {"format": "agentworldbench", "seed": 5},
    }
    got, counts = {}, {}
    for name, kw in runs.items():
        cfg = ExportConfig(
            input=str(tmp_path / "in"), output=str(tmp_path / name), tokenizer=TOKENIZER, **kw
        )
        m = export(cfg)
        counts[name] = m["counts"]
        got[name] = {s["path"]: s["sha256"] for s in m["shards"]}
    # the runs reach the paths they are meant to pin: split parts, a trimmed system
    # prompt, partial keeps, packing several samples per row
    split = counts["megatron-split-token"]
    assert split["samples"] > 3 and split["system_trimmed"] >= 1
    # pin-a's third part holds only its keep-0 turn: no target, so it is left out, counted
    assert split["turns_without_target"]["samples"] == 1
    assert 0 < split["loss_tokens"] < sum(c["obs_tokens"] for c in split["by_category"].values())
    packed = counts["megatron-turn-packed"]
    # a turn sample per target turn: 7 of the 11 turns (pin-a's keep-0 turn and three
    # keep-0.5 turns the draw leaves out make none, and are counted)
    assert packed["samples"] == 7 and packed["rows"] < packed["samples"]
    assert packed["turns_without_target"]["turns"] == 4
    assert counts["agentworldbench"]["rows"] == 8  # one line per kept turn
    assert got == PINNED, "export output changed; update PINNED only for an intended change"


def test_default_tokenizer_lookup_is_light():
    """`worldtrace doctor` finds the tokenizer to report what is missing: the lookup must
    not need numpy (not a core dependency), pyarrow or tokenizers."""
    import subprocess
    import sys

    code = (
        "import sys; from worldtrace.pipelines.tokens import default_tokenizer; default_tokenizer();"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pyarrow', 'tokenizers'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def reference_pack(rows: list[dict], seq_len: int, window: int) -> list[list[str]]:
    """In-memory reference of windowed packing: the samples in export order, cut into
    windows of `window`; each window packed best-fit decreasing by brute force (longest
    first, ties by id; each into the fullest row it fits, ties by the older row)."""
    packed = []
    for w in range(0, len(rows), window):
        chunk = sorted(rows[w : w + window], key=lambda r: (-r["num_tokens"], r["sample_id"]))
        bins: list[list] = []  # [free tokens, sample ids]
        for r in chunk:
            fits = [b for b in bins if b[0] >= r["num_tokens"]]
            if fits:
                best = min(fits, key=lambda b: (b[0], bins.index(b)))
                best[0] -= r["num_tokens"]
                best[1].append(r["sample_id"])
            else:
                bins.append([seq_len - r["num_tokens"], [r["sample_id"]]])
        packed.extend(sorted(b[1]) for b in bins)
    return packed


def test_windowed_packing_matches_an_in_memory_reference(processed, tmp_path):
    m = do_export(processed, tmp_path / "flat", max_len=1024)
    flat = rows(tmp_path / "flat")
    by_id = {r["sample_id"]: r for r in flat}
    window = 64
    assert m["counts"]["samples"] > 4 * window  # the corpus is larger than the buffer
    for w, out in ((window, "small"), (10**6, "whole")):
        do_export(processed, tmp_path / out, seq_len=1024, pack_window=w)
        packed = rows(tmp_path / out)
        assert [r["sample_ids"] for r in packed] == reference_pack(flat, 1024, w)
        for r in packed:  # the row is its samples, in order, then padding
            ids = [t for s in r["sample_ids"] for t in by_id[s]["input_ids"]]
            mask = [t for s in r["sample_ids"] for t in by_id[s]["loss_mask"]]
            assert r["input_ids"][: len(ids)] == ids and r["loss_mask"][: len(mask)] == mask
            starts = np.cumsum([0] + [by_id[s]["num_tokens"] for s in r["sample_ids"]])[:-1]
            assert r["doc_boundaries"] == starts.tolist()
            # found: a row of 1 swe and 5 terminal samples said `domain: swe` (its first)
            domains = {by_id[s]["domain"] for s in r["sample_ids"]}
            assert r["domain"] == (domains.pop() if len(domains) == 1 else "mixed")
            assert r["trajectory_id"] == by_id[r["sample_ids"][0]]["trajectory_id"]
        assert {r["domain"] for r in packed} >= {"mixed"}
    # a window as large as the corpus is whole-corpus best fit, and it packs tighter
    assert len(rows(tmp_path / "whole")) <= len(rows(tmp_path / "small"))
    assert [r["sample_ids"] for r in rows(tmp_path / "whole")] != [
        r["sample_ids"] for r in rows(tmp_path / "small")
    ]


def test_export_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas on the first `pa.array` or timestamp conversion (0.6 s, a
    fifth of a small export): export builds its columns from buffers and reads no
    timestamp column."""
    import subprocess
    import sys

    with ShardWriter(tmp_path / "in") as w:
        w.write(pinned_records())
    code = (
        "import sys; from worldtrace.pipelines.export import ExportConfig, export;"
        f"export(ExportConfig(input={str(tmp_path / 'in')!r}, output={str(tmp_path / 'o')!r},"
        f" tokenizer={TOKENIZER!r}, seq_len=1024));"
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert verify(tmp_path / "o") == []


def cli_export(store, out, *args):
    """`worldtrace --store STORE export -o OUT ARGS` as a user runs it: (exit code, output,
    manifest)."""
    from click.testing import CliRunner

    from worldtrace.cli import cli

    r = CliRunner().invoke(
        cli, ["--store", str(store.root), "export", "-o", str(out), *args], obj={}
    )
    assert r.exit_code == 0, r.output
    return r.output, json.loads((out / "manifest.json").read_text())


def test_truncation_is_counted_in_the_manifest_and_the_summary(processed, tmp_path):
    """Found by an audit: `--seq-len 8192` cut most of the demo's web tokens (808,175 ->
    326,401) and neither the summary line nor the manifest said so."""
    out, m = cli_export(processed, tmp_path / "full")
    assert "truncated" not in out and m["counts"]["truncated"]["samples"] == 0
    full = rows(tmp_path / "full")
    # truncate at 320 tokens: what is cut from the samples kept follows from their
    # untruncated lengths alone (a sample whose truncation left no target is not kept: it
    # is counted in turns_without_target, not here)
    out, m = cli_export(processed, tmp_path / "t", "--max-len", "320", "--overflow", "truncate")
    t = m["counts"]["truncated"]
    kept = {r["sample_id"] for r in rows(tmp_path / "t")}
    assert len(full) - len(kept) == m["counts"]["turns_without_target"]["samples"] > 0
    expect = {}
    for r in full:
        d = expect.setdefault(r["domain"], {"samples": 0, "tokens": 0})
        if r["num_tokens"] > 320 and r["sample_id"] in kept:
            d["samples"] += 1
            d["tokens"] += r["num_tokens"] - 320
    assert {
        d: {k: v[k] for k in ("samples", "tokens")} for d, v in t["by_domain"].items()
    } == expect
    assert t["samples"] == sum(v["samples"] for v in expect.values()) > 0
    assert t["tokens"] == sum(v["tokens"] for v in expect.values())
    assert 0 < t["turns"] == sum(v["turns"] for v in t["by_domain"].values())
    assert f"truncated {t['samples']} sample(s) at 320 tokens, cutting {t['tokens']} tokens" in out
    # packing (the audit's case), split: the top manifest adds up its parts'
    args = ("--seq-len", "128", "--split", "test=0.2")
    out, m = cli_export(processed, tmp_path / "p", *args)
    parts = [json.loads((tmp_path / "p" / n / "manifest.json").read_text()) for n in m["parts"]]
    t = m["counts"]["truncated"]
    assert t["samples"] == sum(p["counts"]["truncated"]["samples"] for p in parts) > 0
    assert t["tokens"] == sum(p["counts"]["truncated"]["tokens"] for p in parts) > 0
    for d, v in t["by_domain"].items():
        assert v["tokens"] == sum(p["counts"]["truncated"]["by_domain"][d]["tokens"] for p in parts)
    assert f"truncated {t['samples']} sample(s) at 128 tokens, cutting {t['tokens']}" in out


def test_parquet_row_groups_are_as_documented(default_export):
    """docs/export.md said row groups of 256 rows while manifests record `shard_rows: 4096`:
    the files hold 256-row groups, and the docs say what `shard_rows` is."""
    from pathlib import Path

    out, m = default_export
    [shard] = sorted(out.glob("*.parquet"))
    meta = pq.ParquetFile(shard).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert m["counts"]["rows"] > 256 and sizes == [256] * (len(sizes) - 1) + [sizes[-1]]
    assert m["config"]["shard_rows"] == 4096
    docs = " ".join((Path(__file__).parents[2] / "docs" / "export.md").read_text().split())
    assert "row groups of 256 rows" in docs
    assert "`config.shard_rows` (4096) is not read" in docs


def test_where_exports_what_the_same_condition_counts_in_query(tmp_path, processed):
    """Found: an export took every trajectory of its input; leaving out simulator data,
    a domain or failed episodes meant processing another store. `--where` takes a DuckDB
    condition on the `trajectories` view's columns: the export holds exactly what
    `worldtrace query` counts with it, and the manifest says what it left out."""
    from worldtrace.schemas.views import connect

    where = "domain = 'terminal' AND num_turns >= 3 AND source.kind IS NOT NULL"
    con = connect(processed)
    want = {
        x
        for (x,) in con.execute(f"SELECT trajectory_id FROM trajectories WHERE {where}").fetchall()
    }
    total = con.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    assert 0 < len(want) < total
    seen = []
    cfg = ExportConfig(input=str(processed.table("trajectories")), output=str(tmp_path / "e"),
                       tokenizer=TOKENIZER, where=where, split="test=0.3")  # fmt: skip
    m = export(cfg, batch=16, progress=lambda n, _: seen.append(n))
    got = {r["trajectory_id"] for p in ("train", "test") for r in rows(tmp_path / "e" / p)}
    assert got == want
    assert m["where"] == {"condition": where, "left_out": total - len(want)}
    assert sum(x["counts"]["trajectories"] for x in m["parts"].values()) == len(want)
    assert seen[-1] == total  # the progress counts what the condition left out as read
    part = json.loads((tmp_path / "e" / "test" / "manifest.json").read_text())
    assert part["where"] == m["where"] and part["config"]["where"] == where
    assert verify(tmp_path / "e" / "test") == []
    # found: the top manifest of a split export had no config (so no `config.where`),
    # tokenizer, template, keep mode or seed, and the `exports` view, which reads it,
    # showed them NULL
    assert m["config"] == part["config"]
    assert all(m[k] == part[k] for k in ("tokenizer", "template", "keep_mode", "seed"))
    from worldtrace.schemas.views import _exports_table

    [row] = _exports_table(tmp_path).to_pylist()
    assert row["name"] == "e" and row["tokenizer"] == part["tokenizer"]["name"]
    assert row["template"] == "chatml" and row["keep_mode"] == cfg.keep_mode


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("no_such_column = 1", "no_such_column"),
        ("domain = 'terminal'; SELECT 1", "syntax error"),
        ("true), false); COPY (SELECT 1) TO 'x.csv' --", "syntax error"),
        ("false), true) --", "syntax error"),  # found: accepted, and took everything
        ("read_text('/etc/hostname') IS NOT NULL", "/etc/hostname"),
        ("", "the condition is empty"),
        # found 12-04: random() took another sample on every run of the same export
        ("random() < 0.5", "random() gives another answer on every run"),
        ("hash(uuid()) % 2 = 0 AND domain IS NOT NULL", "uuid() gives another answer"),
    ],
)
def test_a_where_that_cannot_run_is_refused_before_anything_is_written(
    tmp_path, processed, where, says
):
    out = tmp_path / "e"
    with pytest.raises(ValueError, match="where") as err:
        do_export(processed, out, where=where)
    assert says in str(err.value)
    assert not out.exists()


@pytest.fixture(scope="module")
def one_trajectory(tmp_path_factory):
    """A processed store of one trajectory (processed once: the exports only read it)."""
    from worldtrace.collectors.synthetic import build

    root = tmp_path_factory.mktemp("one")
    t = build("terminal", [(f"cat part{i}.txt\n", f"part {i}: " + "alpha " * 20) for i in range(3)])
    with ShardWriter(root / "raw") as w:
        w.write(t)
    run(ProcessConfig(inputs=[str(root / "raw")], output=str(root / "p"), workers=1))
    return root / "p" / "trajectories"


@pytest.mark.parametrize("fmt", ["parquet", "megatron", "agentworldbench"])
def test_a_split_with_an_empty_part_verifies(one_trajectory, tmp_path, fmt):
    """Found: `export --verify` of a Parquet split export whose one part is empty (one
    trajectory: its cluster goes to one side) ended in pyarrow's `Must pass at least one
    table`; Megatron and AgentWorldBench ones verified."""
    cfg = ExportConfig(input=str(one_trajectory), output=str(tmp_path / "e"),
                       tokenizer=TOKENIZER, format=fmt, split="test=0.5")  # fmt: skip
    m = export(cfg)
    sizes = sorted(p["counts"]["trajectories"] for p in m["parts"].values())
    assert sizes == [0, 1]
    assert verify(tmp_path / "e") == []


def test_where_sees_the_corpus_count_fields_query_sees(tmp_path):
    """Found: under a policy that reads corpus counts, `--where` read each turn's stored
    fields (surprisal null, the decision for a rare template) where `query` reads them
    under the current template counts: `list_contains([t.category for t in turns],
    'common')` counted 173 in query and exported none, and a null-surprisal condition
    counted 0 and exported all. The export takes what query counts."""
    from worldtrace.collectors.synthetic import SyntheticConfig, generate
    from worldtrace.schemas import Store
    from worldtrace.schemas.views import connect

    store = Store.at(tmp_path / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(generate(SyntheticConfig(n=200, seed=5)))
    run(ProcessConfig(inputs=[str(store.raw)], output=str(store.processed), workers=1,
                      policy="agentworld-v1+info"))  # fmt: skip
    con = connect(store)
    total = con.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    for where in (
        "list_contains([t.category for t in turns], 'common')",
        "list_min([t.stats.corpus_surprisal for t in turns]) IS NOT NULL",
        "len(list_filter(turns, lambda t: starts_with(t.rule, 'common:'))) >= 2",
    ):
        sql = f"SELECT trajectory_id FROM trajectories WHERE {where}"
        want = {x for (x,) in con.execute(sql).fetchall()}
        assert 0 < len(want) < total or where.startswith("list_min"), where
        out = tmp_path / f"e{len(want)}"
        m = do_export(store, out, where=where)
        assert m["where"]["left_out"] == total - len(want), where
        got = {r["trajectory_id"] for r in rows(out)}  # less those left with no target
        assert (
            got <= want and len(got) >= len(want) - m["counts"]["turns_without_target"]["samples"]
        ), where
