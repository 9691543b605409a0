"""Export defects found by the 2026-12-04 (f) hunt, each reproduced as a user meets it.

1. `worldtrace process --set seed=7` seeds the keep draw the `turns` table shows as
   `in_loss`; `worldtrace export` drew at seed 0 all the same, so the turns it trained
   were not those the table (and `counts.by_category` next to it) said. The export now
   takes the processing run's seed unless `--seed` is given.
2. The processing run's manifest beside the input was read only after the whole export
   was built, as it was: a JSON list ended in a traceback, a cut file in a JSON error
   naming no file (`Error: Expecting value: line 1 column 1 (char 0)`), and a `policy`
   of another shape was recorded. It is now read first and a bad one named, field
   included, before anything is read or written.
3. A Jinja template saved as Latin-1 (`[été {{ m.role }}]`) was read with its bytes
   replaced: every sample of the export held `[�t� assistant]`, exit 0. It is refused,
   naming the file, the line and the byte.
4. The default chatml template with a tokenizer that has no `<|im_start|>`/`<|im_end|>`
   token (any but Qwen's) wrote each marker as six plain-text tokens, the same as an
   observation holding that text, without a word: the model could not tell a turn's
   boundary from content, and learned an end-of-turn that is no stop token. Export now
   says so on stderr, naming the tokenizer and the markers.
5. `--seed 99999999999999999999999` (past 64 bits) was exported and verified, but the
   store's `exports` view took its manifest for a damaged one: `worldtrace stats` said
   `exports: none`. `--seq-len 2147483648` read and tokenized the whole corpus, then
   ended in pyarrow's `Error: Negative offsets in list array`. Both are usage errors
   naming the option, before anything is read.

Real parts: the synthetic generator, a Beam processing run, the real Qwen tokenizer,
DuckDB over the processed tables, the `worldtrace` command in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.pipelines.export import ExportConfig, export
from worldtrace.pipelines.mask import keep_turn
from worldtrace.pipelines.process import ProcessConfig, run
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import ShardWriter, Store

from .conftest import decided_store

TOKENIZER = str(default_tokenizer())
WORLDTRACE = str(Path(sys.executable).with_name("worldtrace"))
PROCESS_SEED = 7


def wt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORLDTRACE_TOKENIZER": TOKENIZER}
    return subprocess.run([WORLDTRACE, *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Store:
    """120 synthetic trajectories processed with `seed=7`: their boilerplate turns keep
    0.1 of their tokens, so which of them are in the loss is the seeded draw."""
    store = Store.at(tmp_path_factory.mktemp("seeded") / "store")
    with ShardWriter(store.raw / "s") as w:
        w.write(generate(SyntheticConfig(n=120, seed=11)))
    run(
        ProcessConfig(
            inputs=[str(store.raw)], output=str(store.processed), workers=1, seed=PROCESS_SEED
        )
    )
    return store


def in_loss(store: Store) -> set[tuple[str, int]]:
    """(trajectory, turn) of every turn the `turns` table says is in the loss."""
    r = wt("--store", str(store.root), "query", "--format", "json",
           "SELECT trajectory_id, turn_index FROM turns WHERE in_loss")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {(x["trajectory_id"], x["turn_index"]) for x in json.loads(r.stdout)}


@pytest.fixture(scope="module")
def seeded_in_loss(seeded) -> set[tuple[str, int]]:
    """`in_loss(seeded)`, queried once: the tests only read the store."""
    return in_loss(seeded)


def trained(out: Path) -> set[tuple[str, int]]:
    """(trajectory, turn) of every turn sample of a `--sample-mode turn` export: one per
    turn with a target, `<trajectory>:t<turn>`."""
    ids = [
        i for f in sorted(out.glob("*.parquet")) for i in pq.read_table(f)["sample_id"].to_pylist()
    ]
    return {(i.split(":t")[0], int(i.split(":t")[1])) for i in ids}


def partial_turns(store: Store) -> list[tuple[str, int, float]]:
    files = str(store.processed / "trajectories" / "*.parquet")
    return duckdb.sql(
        f"SELECT trajectory_id, u.t.index, u.t.keep FROM (SELECT trajectory_id, "
        f"unnest(turns) AS t FROM read_parquet('{files}')) AS u "
        "WHERE u.t.keep > 0 AND u.t.keep < 1"
    ).fetchall()


def test_export_trains_the_turns_the_turns_table_says_are_in_loss(seeded, seeded_in_loss, tmp_path):
    partial = partial_turns(seeded)
    # the draw matters here: seed 0 and the processing seed disagree on these turns
    assert len(partial) > 20
    assert any(keep_turn(t, i, 0, k) != keep_turn(t, i, PROCESS_SEED, k) for t, i, k in partial)
    table = seeded_in_loss
    out = tmp_path / "turns"
    r = wt("--store", str(seeded.root), "export", "--sample-mode", "turn", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert trained(out) == table
    m = json.loads((out / "manifest.json").read_text())
    assert m["seed"] == m["config"]["seed"] == PROCESS_SEED
    # and the trajectory export's per-category counts are the table's
    whole = tmp_path / "whole"
    assert wt("--store", str(seeded.root), "export", "-o", str(whole)).returncode == 0
    counts = json.loads((whole / "manifest.json").read_text())["counts"]
    assert counts["turns_without_target"]["turns"] == 0
    assert sum(c["turns_in_loss"] for c in counts["by_category"].values()) == len(table)


def test_a_seed_given_is_the_seed_used(seeded, seeded_in_loss, tmp_path):
    out = tmp_path / "s0"
    r = wt("--store", str(seeded.root), "export", "--sample-mode", "turn", "--seed", "0",
           "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "manifest.json").read_text())["seed"] == 0
    partial = {(t, i): k for t, i, k in partial_turns(seeded)}
    table = seeded_in_loss
    drawn = {x for x, k in partial.items() if keep_turn(*x, 0, k)}
    expected = {x for x in table if x not in partial} | drawn
    assert trained(out) == expected != table


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # the command reads it as every reading command does (`freshness.last_run`, 1206)
        ("[1, 2]", "the last run's manifest is a JSON list, not an object"),
        ('{"run_id": "x", "policy": 5}', "the last run's manifest has no config"),
        ('{"config": {"seed": "7"}}', "the last run's manifest has no accounting.in"),
        ('{"run_id": "cut sh', "the last run's manifest does not read ("),
    ],
)  # fmt: skip
def test_a_damaged_processing_manifest_is_named_before_anything_is_written(tmp_path, text, said):
    store = decided_store(tmp_path, keep=1.0)
    manifest = store.processed / "manifest.json"
    manifest.write_text(text)
    out = tmp_path / "out"
    for seed in ([], ["--seed", "3"]):  # the CLI's default seed reads it, and so does export
        r = wt("--store", str(store.root), "export", *seed, "-o", str(out))
        assert r.returncode == 1
        [line] = r.stderr.strip().splitlines()  # one line, naming the file (and field)
        assert line.startswith(f"error: {manifest}: {said}"), line
        assert line.endswith("; `worldtrace process --rebuild` makes the processed data again from raw/"), line  # fmt: skip
        assert "Traceback" not in r.stderr
        assert not out.exists() and not list(tmp_path.glob(".staging-*"))
    with pytest.raises(OSError, match=f"^{manifest}: "):  # from Python too, nothing written
        export(
            ExportConfig(
                input=str(store.table("trajectories")), output=str(out), tokenizer=TOKENIZER
            )
        )
    assert not out.exists()


def test_a_processing_manifest_of_the_right_shape_is_recorded(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    policy = {"name": "agentworld-v1", "keep": {"echo": 0.05}}
    (store.processed / "manifest.json").write_text(
        json.dumps({"policy": policy, "config": {"seed": 4}})
    )
    m = export(ExportConfig(input=str(store.table("trajectories")), output=str(tmp_path / "o"),
                            tokenizer=TOKENIZER))  # fmt: skip
    assert m["mask_policy"] == policy and m["seed"] == 0  # Python: the seed it was given


def test_a_template_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    template = tmp_path / "latin1.j2"
    text = "{% for m in messages %}[\u00e9t\u00e9 {{ m.role }}]\n{{ m.content }}\n{% endfor %}"
    template.write_bytes(("{# chat #}\n" + text).encode("latin-1"))
    out = tmp_path / "out"
    r = wt("--store", str(store.root), "export", "--template", str(template), "-o", str(out))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (
        f"Error: template {template}: line 2: byte 0xe9 at column 25 is not UTF-8: the file is "
        "in another encoding (Latin-1 or cp1252?); convert it: iconv -f cp1252 -t utf-8 "
        f"{template} > {template}.utf8"
    )
    assert not out.exists()
    # the same text saved as UTF-8 is exported, and its accents are in every sample
    template.write_text(text, encoding="utf-8")
    r = wt("--store", str(store.root), "export", "--template", str(template), "-o", str(out))
    assert r.returncode == 0, r.stderr
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(TOKENIZER)
    rows = [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    texts = [tok.decode(r["input_ids"], skip_special_tokens=False) for r in rows]
    assert rows and all("[\u00e9t\u00e9 assistant]" in t and "\ufffd" not in t for t in texts)


def tokenizer_without(d: Path, *tokens: str) -> str:
    """Qwen's tokenizer.json without the added tokens `tokens`."""
    spec = json.loads(Path(TOKENIZER).read_text())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in tokens]
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.json").write_text(json.dumps(spec))
    return str(d / "tokenizer.json")


def test_chatml_markers_that_are_no_tokens_of_the_tokenizer_are_said(tmp_path):
    store = decided_store(tmp_path, keep=1.0)
    foreign = tokenizer_without(tmp_path / "tok", "<|im_start|>", "<|im_end|>")
    out = tmp_path / "out"
    r = wt("--store", str(store.root), "export", "--tokenizer", foreign, "-o", str(out))
    assert r.returncode == 0, r.stderr  # said, not refused
    said = [x for x in r.stderr.splitlines() if "template" in x]
    assert said == [
        f"warning: {foreign}: the chatml template's <|im_start|> (6 tokens), <|im_end|> "
        "(6 tokens) are no tokens of this tokenizer: each is written as plain text, as an "
        "observation holding that text is, so a turn's boundary cannot be told from content "
        "and its end-of-turn is no single token; export with this tokenizer's own chat "
        "markers (--template FILE.j2 --template-eot TEXT) or --template plain"
    ]
    # what it warns of: the rows hold the markers' text, never the token Qwen has for it
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(foreign)
    im_end = Tokenizer.from_file(TOKENIZER).token_to_id("<|im_end|>")
    row = pq.read_table(sorted(out.glob("*.parquet"))[0]).to_pylist()[0]["input_ids"]
    assert im_end not in row and tok.decode(row).count("<|im_end|>") >= 3
    # Qwen's own tokenizer, and the plain template, which writes no such marker: no word
    for args in ([], ["--tokenizer", foreign, "--template", "plain"]):
        r = wt("--store", str(store.root), "export", *args, "-o", str(out))
        assert r.returncode == 0 and "template" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--seed", str(2**64)], f"Error: --seed {2**64} is not an integer of 64 bits"),
        (["--split", "test=0.5", "--split-seed", str(-(2**63) - 1)],
         f"Error: --split-seed {-(2**63) - 1} is not an integer of 64 bits"),
        (["--seq-len", str(2**31)], f"Error: --seq-len {2**31} is more tokens than a row holds: at most {2**31 - 2}"),
    ],
)  # fmt: skip
def test_settings_the_output_cannot_hold_are_usage_errors(tmp_path, args, said):
    store = decided_store(tmp_path, keep=1.0)
    out = tmp_path / "out"
    r = wt("--store", str(store.root), "export", *args, "-o", str(out))
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()


def test_the_largest_seed_is_exported_and_listed(tmp_path):
    store = decided_store(tmp_path, keep=0.5)
    seed = str(2**63 - 1)
    r = wt("--store", str(store.root), "export", "--seed", seed, "--keep-mode", "token")
    assert r.returncode == 0, r.stderr
    r = wt(
        "--store", str(store.root), "query", "--format", "json", "SELECT name, seed FROM exports"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"name": "parquet", "seed": 2**63 - 1}]
