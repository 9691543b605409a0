"""Two data-hygiene gaps found by the 2026-12-03 security review (REPORT S6 and T2).

S6: `export --simulation-instructions FILE` put the file's text into every sample
unredacted: a `ghp_` token reached the token shards and export exited 0. A user's file
(simulation instructions, a Jinja template) holding a secret is now refused when it is
loaded: one line naming the file, the line and the kind, exit 1, nothing written.

T2: the bundled generator's records (`collectors/synthetic.py`) said `source.kind =
collector`, passed `validate` and `process`, and were exported as real. They now say
`source.kind = synthetic` (older files: `environment.backend = synthetic`), and export
counts their samples in the manifest (`counts.synthetic_samples`) and warns on stderr.
Real parts: Parquet stores, the real CLI in process (CliRunner), the Qwen tokenizer.
"""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.collectors.synthetic import SyntheticConfig, build, generate, make_trajectory
from worldtrace.pipelines.export import is_synthetic
from worldtrace.schemas import ShardWriter, Store

from worldtrace.cli import cli

from .conftest import decided_store

TOKEN = "ghp_Sim8Wm3Nc5Rt7Yv2Bx4Kd6Hf9Jp1Ls0Ga7Ee3"


def run(s: Store, *args: str):
    return CliRunner().invoke(cli, ["--store", str(s.root), *args], obj={})


def export(s: Store, *args: str):
    return run(s, "export", "--progress-every", "0", *args)


def refusal(r) -> str:
    """The one error line of a refused export (exit 1, as other bad input)."""
    assert r.exit_code == 1, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("Error:")]
    return line


@pytest.fixture
def small(tmp_path) -> Store:
    """8 generated trajectories, processed (every turn decided: keep 1)."""
    return decided_store(tmp_path, 1.0)


# -- S6: user text export adds to every sample -------------------------------------------
def test_simulation_instructions_holding_a_secret_are_refused(small, tmp_path):
    sim = tmp_path / "siminst.yaml"
    sim.write_text(
        "swe: You simulate a repo.\n"
        f'terminal: "You simulate a Linux terminal. The deploy host uses token {TOKEN}."\n'
    )
    out = tmp_path / "out"
    r = export(small, "--simulation-instructions", str(sim), "-o", str(out))
    line = refusal(r)
    assert str(sim) in line and "line 2: github_token" in line
    assert TOKEN not in r.output  # never the secret itself
    assert not out.exists()  # refused before anything is written
    # the same file without the token exports, and its text is in the samples
    sim.write_text("terminal: You simulate a Linux terminal, carefully.\n")
    r = export(small, "--simulation-instructions", str(sim), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["counts"]["samples"] > 0


def test_a_directory_of_instructions_names_the_file_that_holds_the_secret(small, tmp_path):
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "swe.md").write_text("You simulate a repo.\n")
    (sim / "terminal.md").write_text(
        "You simulate a terminal.\n\nThe database is postgres://app:SimPw12345678@db/prod\n"
    )
    r = export(small, "--simulation-instructions", str(sim), "-o", str(tmp_path / "out"))
    line = refusal(r)
    assert f"{sim / 'terminal.md'}: line 3: url_password" in line
    assert "SimPw12345678" not in r.output


def test_a_secret_only_yaml_decoding_shows_is_refused_by_its_key(small, tmp_path):
    sim = tmp_path / "sim.yaml"  # `\u0067` is `g`: the file's text holds no `ghp_`
    sim.write_text('terminal: "Token: \\u0067hp_Sim8Wm3Nc5Rt7Yv2Bx4Kd6Hf9Jp1Ls0Ga7Ee3"\n')
    r = export(small, "--simulation-instructions", str(sim), "-o", str(tmp_path / "out"))
    line = refusal(r)
    assert str(sim) in line and "simulation_instructions.terminal: github_token" in line


def test_a_jinja_template_holding_a_secret_is_refused(small, tmp_path):
    tpl = tmp_path / "chat.j2"
    tpl.write_text(
        "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}\n"
        f"Authorization: Bearer {TOKEN}\n"
    )
    out = tmp_path / "out"
    r = export(small, "--template", str(tpl), "-o", str(out))
    line = refusal(r)
    assert str(tpl) in line and "line 4: github_token" in line
    assert not out.exists()


# -- T2: generated records are not environment answers ----------------------------------
def test_the_generator_says_its_records_are_synthetic_and_validate_takes_them(tmp_path):
    t = make_trajectory(random.Random(0), "terminal", 0)
    assert t.source.kind == "synthetic" and t.environment.backend == "synthetic"
    f = tmp_path / "synth.jsonl"
    f.write_text(json.dumps(t.to_dict(), default=str) + "\n")
    s = Store.at(tmp_path / "store")
    s.root.mkdir()
    r = run(s, "validate", str(f))
    assert r.exit_code == 0, r.output


def test_hand_built_records_are_synthetic_too():
    """Found (12-03 night): `build`, the generator's helper for hand-written turns, still
    said `source.kind = collector`: export counted none of its samples as generated."""
    t = build("terminal", [("ls\n", "a.txt\n$ ")])
    assert t.source.kind == "synthetic"
    assert is_synthetic(t.to_dict())


def _mixed_store(root) -> tuple[Store, set[str]]:
    """Processed records: 4 that look collected in a real environment, 2 generated ones
    of an older file (kind collector, backend synthetic), 2 of the synthetic kind."""
    s = Store.at(root / "store")
    records = generate(SyntheticConfig(n=8, seed=5))
    for i, t in enumerate(records):
        if i < 4:
            t.source.kind, t.source.name, t.environment.backend = "collector", "terminal", "docker"
        elif i < 6:
            t.source.kind = "collector"
        for turn in t.turns:
            turn.category, turn.keep = "mixed", 1.0
    with ShardWriter(s.table("trajectories")) as w:
        w.write(records)
    return s, {t.trajectory_id for t in records[4:]}


def _samples_from(out, synthetic: set[str]) -> tuple[int, int]:
    ids = [
        tid
        for f in sorted(out.rglob("*.parquet"))
        for tid in pq.read_table(f, columns=["trajectory_id"]).column(0).to_pylist()
    ]
    return sum(t in synthetic for t in ids), len(ids)


def test_export_counts_and_warns_of_samples_from_synthetic_records(tmp_path):
    s, synthetic = _mixed_store(tmp_path)
    out = tmp_path / "out"
    r = export(s, "--sample-mode", "turn", "-o", str(out))
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    n, total = _samples_from(out, synthetic)
    assert 0 < n < total == m["counts"]["samples"]
    assert m["counts"]["synthetic_samples"] == n
    assert m["counts"]["synthetic_trajectories"] == 4
    (warning,) = [x for x in r.stderr.splitlines() if "synthetic" in x]
    assert warning.startswith(
        f"warning: {n} of {total} samples come from synthetic records (source kind synthetic): "
        "generated test data, not environment answers"
    )
    assert "synthetic" not in r.stdout


def test_a_split_and_an_agentworldbench_export_count_them_too(tmp_path):
    s, synthetic = _mixed_store(tmp_path)
    out = tmp_path / "split"
    r = export(s, "--split", "test=0.3", "-o", str(out))
    assert r.exit_code == 0, r.output
    top = json.loads((out / "manifest.json").read_text())
    parts = {p: json.loads((out / p / "manifest.json").read_text()) for p in top["parts"]}
    assert top["counts"]["synthetic_samples"] == _samples_from(out, synthetic)[0] > 0
    assert top["counts"]["synthetic_samples"] == sum(
        m["counts"]["synthetic_samples"] for m in parts.values()
    )
    assert top["counts"]["synthetic_trajectories"] == 4
    awb = tmp_path / "awb"
    r = export(s, "--format", "agentworldbench", "-o", str(awb))
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for f in awb.glob("*.jsonl") for x in f.read_text().splitlines()]
    n = sum(x["id"].split("/")[0] in synthetic for x in lines)
    m = json.loads((awb / "manifest.json").read_text())
    assert 0 < n < len(lines) and m["counts"]["synthetic_samples"] == n
    assert f"{n} of {len(lines)} samples come from synthetic records" in r.stderr


def test_the_documented_where_leaves_them_out_and_nothing_is_said(tmp_path):
    s, synthetic = _mixed_store(tmp_path)
    out = tmp_path / "out"
    where = "source.kind <> 'synthetic' AND environment.backend IS DISTINCT FROM 'synthetic'"
    r = export(s, "--where", where, "-o", str(out))  # as docs/export.md gives it
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["where"]["left_out"] == len(synthetic) == 4
    assert m["counts"]["synthetic_samples"] == m["counts"]["synthetic_trajectories"] == 0
    assert m["counts"]["samples"] > 0 and "synthetic" not in r.output


def test_process_keeps_generated_records_and_stats_shows_their_kind(processed):
    r = run(processed, "stats", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["sections"]["sources"]
    assert rows and {x["source_kind"] for x in rows} == {"synthetic"}
    assert sum(x["processed"] for x in rows) > 0
