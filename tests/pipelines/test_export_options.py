"""Which `worldtrace export` options apply to which format. Found: `--format
agentworldbench` took `--keep-mode token`, `--tokenizer /nonexistent.json`, `--template
plain`, `--seq-len 4096`, `--sample-mode turn`... and wrote the same JSONL as without them,
its manifest recording the settings as if they had taken effect. A token option typed
with a format that does not read it is now a usage error (exit 2, one line); a default
(or $WORLDTRACE_TOKENIZER) is not, and every option still works where it applies."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from worldtrace.pipelines.export import ExportConfig
from worldtrace.pipelines.tokens import default_tokenizer
from worldtrace.schemas import Store
from worldtrace.schemas.hashing import sha256_file

from worldtrace.cli import cli

from .conftest import decided_store

TOKENIZER = str(default_tokenizer())
AWB = ["--format", "agentworldbench"]
TOKEN_FORMATS = ("parquet", "megatron")

TOKEN_OPTIONS = {  # option as typed -> (field, arguments)
    "--tokenizer": ("tokenizer", ["--tokenizer", TOKENIZER]),
    "--keep-mode": ("keep_mode", ["--keep-mode", "token"]),
    "--eot-target": ("eot_target", ["--eot-target"]),
    "--no-eot-target": ("eot_target", ["--no-eot-target"]),
    "--template": ("template", ["--template", "plain"]),
    "--template-eot": ("template_eot", ["--template-eot", "<|im_end|>"]),
    "--sample-mode": ("sample_mode", ["--sample-mode", "turn"]),
    "--sample-turns": ("sample_turns", ["--sample-turns", "one"]),
    "--max-len": ("max_len", ["--max-len", "2048"]),
    "--overflow": ("overflow", ["--overflow", "truncate"]),
    "--seq-len": ("seq_len", ["--seq-len", "4096"]),
    "--pack-window": ("pack_window", ["--pack-window", "8"]),
}


@pytest.fixture
def small(tmp_path) -> Store:
    """A processed store of 8 synthetic trajectories whose turns the loss keeps half of,
    so the keep draw (and its seed) decides which turns are targets."""
    return decided_store(tmp_path, 0.5)


def export(s: Store, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["--store", str(s.root), "export", *args], obj={}, env=env)


def error_line(r) -> str:
    assert r.exit_code == 2, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("Error:")]
    return line


def test_every_token_setting_has_a_case():
    from worldtrace.pipelines import export as pipeline

    assert {field for field, _ in TOKEN_OPTIONS.values()} == set(pipeline.TOKEN_SETTINGS)
    assert pipeline.TOKEN_FORMATS == TOKEN_FORMATS


@pytest.mark.parametrize("option", TOKEN_OPTIONS)
def test_a_token_option_with_agentworldbench_is_a_usage_error(small, tmp_path, option):
    out = tmp_path / "awb"
    r = export(small, *AWB, *TOKEN_OPTIONS[option][1], "-o", str(out))
    assert error_line(r) == (
        f"Error: {option} applies only to --format parquet and megatron, not agentworldbench "
        "(text eval sets, no tokens)"
    )
    assert not out.exists()


def test_a_token_option_at_its_default_is_refused_too(small, tmp_path):
    """Typed is typed: `--keep-mode turn` is the default and the draw AgentWorldBench makes,
    but the user asked for a mask mode an eval set has none of."""
    r = export(
        small, *AWB, "--keep-mode", "turn", "--pack-window", "4096", "-o", str(tmp_path / "a")
    )
    assert "--keep-mode, --pack-window apply only to --format parquet and megatron" in error_line(r)


def test_every_option_typed_is_named_in_one_line(small, tmp_path):
    args = [a for _, argv in TOKEN_OPTIONS.values() for a in argv if a != "--eot-target"]
    line = error_line(export(small, *AWB, *args, "-o", str(tmp_path / "a")))
    named = line.removeprefix("Error: ").split(" apply only")[0].split(", ")
    assert named == [o for o in TOKEN_OPTIONS if o != "--eot-target"]


def test_the_refusal_comes_before_the_store_is_looked_at(tmp_path):
    r = export(Store.at(tmp_path / "none"), *AWB, "--seq-len", "4096")
    assert "--seq-len applies only to" in error_line(r)


def test_defaults_and_the_tokenizer_variable_are_not_refused(small, tmp_path):
    """Only the command line counts: $WORLDTRACE_TOKENIZER serves every command that
    tokenizes, so a shell that sets it can still export an eval set."""
    out = tmp_path / "awb"
    r = export(small, *AWB, "-o", str(out), env={"WORLDTRACE_TOKENIZER": "/nonexistent.json"})
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["tokenizer"] is None and m["keep_mode"] == "turn"


def test_the_options_of_every_format_still_apply_to_agentworldbench(small, tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "terminal.md").write_text("Predict the screen.\n")
    runs = {}
    for seed in ("0", "1"):
        out = tmp_path / f"awb{seed}"
        args = ["--seed", seed, "--split", "test=0.3", "--split-seed", "2", "--where",
                "domain IS NOT NULL", "--simulation-instructions", str(tmp_path / "sim"),
                "--input", str(small.table("trajectories")), "--progress-every", "0", "--json"]  # fmt: skip
        r = export(small, *AWB, *args, "-o", str(out))
        assert r.exit_code == 0, r.output
        m = json.loads(r.stdout)
        assert m["config"]["seed"] == int(seed) and m["split"]["seed"] == 2
        assert m["where"]["condition"] == "domain IS NOT NULL"
        assert m["simulation_instructions"]["source"] == str(tmp_path / "sim")
        runs[seed] = sorted(
            json.loads(x)["id"] for f in out.glob("*/*.jsonl") for x in f.read_text().splitlines()
        )
    assert runs["0"] and runs["0"] != runs["1"]  # the seed moves the keep draw's target turns


@pytest.mark.parametrize("fmt", TOKEN_FORMATS)
def test_token_formats_take_every_token_option(small, tmp_path, fmt):
    args = ["--tokenizer", TOKENIZER, "--keep-mode", "prefix", "--no-eot-target", "--template",
            "plain", "--sample-mode", "turn", "--sample-turns", "one",
            "--max-len", "2048", "--overflow", "truncate", "--seq-len", "4096",
            "--pack-window", "8", "--seed", "3"]  # fmt: skip
    out = tmp_path / fmt
    r = export(small, "--format", fmt, *args, "-o", str(out))
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["tokenizer"]["sha256"] == sha256_file(TOKENIZER)
    assert (m["keep_mode"], m["template"]["name"], m["template"]["eot_target"]) == (
        "prefix",
        "plain",
        False,
    )
    # doc_start_id (12-06): the id every sample starts with, plain's `###` (14374)
    assert m["sampling"] == {"mode": "turn", "turns": "one", "max_len": 2048,
                             "overflow": "truncate", "seq_len": 4096, "pack_window": 8,
                             "doc_start_id": 14374}  # fmt: skip
    assert m["counts"]["samples"] > m["counts"]["rows"] > 0  # packed


def test_from_python_a_changed_token_setting_is_refused():
    """A dataclass cannot tell a default given on purpose, so Python refuses changed
    values; `tokenizer` passes (callers hand one to every format)."""
    awb = {"format": "agentworldbench", "tokenizer": TOKENIZER}
    ExportConfig(**awb).check()
    ExportConfig(**awb, keep_mode="turn", seed=4, split="test=0.1").check()
    with pytest.raises(ValueError) as err:
        ExportConfig(**awb, keep_mode="token", seq_len=4096).check()
    assert str(err.value) == (
        "keep_mode, seq_len apply only to format parquet and megatron, not agentworldbench "
        "(text eval sets, no tokens)"
    )
    for fmt in TOKEN_FORMATS:
        ExportConfig(format=fmt, keep_mode="token", seq_len=4096).check()


def test_help_says_which_options_apply_to_which_format():
    r = CliRunner().invoke(cli, ["export", "--help"], obj={})
    assert r.exit_code == 0, r.output
    about = " ".join(r.output.split("Options:")[0].split())
    said = "Token options, for parquet and megatron only (refused with agentworldbench):"
    m = re.search(re.escape(said) + r"(.*?)Every other option applies to every format\.", about)
    assert m, about
    assert set(m.group(1).split()) == {o for o in TOKEN_OPTIONS if o != "--no-eot-target"}
    assert max(len(x) for x in r.output.splitlines()) <= 80  # an 80-column terminal


# -- an option nothing reads with the others as given ---------------------------------------
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--pack-window", "8"], "--pack-window needs --seq-len (packing)"),
        (["--pack-window", "4096"], "--pack-window needs --seq-len (packing)"),  # the default
        (["--overflow", "truncate"], "--overflow needs --max-len or --seq-len (a length limit)"),
        (["--template-eot", "</s>"], "--template-eot needs a Jinja template file"),
        (["--template", "plain", "--template-eot", "</s>"], "--template-eot needs a Jinja"),
    ],
)
def test_an_option_nothing_reads_is_refused(small, tmp_path, args, said):
    """Found: `--pack-window` without `--seq-len`, `--overflow` without a length limit and
    `--template-eot` with a built-in template did nothing, and the manifest recorded them
    as if they had acted."""
    out = tmp_path / "o"
    r = export(small, "--tokenizer", TOKENIZER, *args, "-o", str(out))
    assert r.exit_code == 2 and said in error_line(r) and "nothing reads it" in error_line(r)
    assert not out.exists()


def test_options_that_something_reads_are_taken(small, tmp_path, monkeypatch):
    eot = tmp_path / "t.jinja"
    eot.write_text(  # it writes the end-of-turn text it is given (else refused)
        "{% for m in messages %}{{ m.role }}: {{ m.content }}"
        "{% if m.role == 'assistant' %}</s>{% endif %}\n{% endfor %}"
    )
    for n, args in enumerate(
        (
            ["--seq-len", "4096", "--pack-window", "8"],
            ["--max-len", "2048", "--overflow", "truncate"],
            ["--seq-len", "4096", "--overflow", "truncate"],
            ["--template", str(eot), "--template-eot", "</s>"],
        )
    ):
        r = export(small, "--tokenizer", TOKENIZER, *args, "-o", str(tmp_path / str(n)))
        assert r.exit_code == 0, r.output


def test_from_python_a_setting_nothing_reads_is_refused():
    with pytest.raises(ValueError, match=r"^pack_window 8 needs seq_len \(packing\)"):
        ExportConfig(pack_window=8).check()
    with pytest.raises(ValueError, match=r"^overflow 'truncate' needs max_len or seq_len"):
        ExportConfig(overflow="truncate").check()
    with pytest.raises(ValueError, match=r"^template_eot '</s>' needs a Jinja template file"):
        ExportConfig(template="chatml", template_eot="</s>").check()
    ExportConfig(seq_len=4096, pack_window=8, overflow="truncate").check()


def test_verify_takes_no_other_option(small, tmp_path):
    """Found: `export --verify DIR --format megatron -o X --json` verified DIR and ignored
    the rest in silence."""
    out = tmp_path / "e"
    assert export(small, "--tokenizer", TOKENIZER, "-o", str(out)).exit_code == 0
    r = export(small, "--verify", str(out))
    assert r.exit_code == 0 and r.stdout == f"{out}: verified\n"  # a result: on stdout
    r = export(small, "--verify", str(out), "--format", "megatron", "--json", "-o", "x")
    assert r.exit_code == 2
    assert "--verify checks an export and takes no other option; given: " in error_line(r)
    assert all(o in error_line(r) for o in ("--format", "--json", "--output"))


def test_an_agentworldbench_manifest_names_no_template_nor_sampling(small, tmp_path):
    """Found: its manifest (and the `exports` view) named the default chatml template and
    sampling settings, which AgentWorldBench files never used."""
    assert export(small, *AWB).exit_code == 0
    m = json.loads((small.export / "agentworldbench" / "manifest.json").read_text())
    assert (m["template"], m["sampling"], m["tokenizer"]) == (None, None, None)
    assert m["keep_mode"] == "turn"  # the draw it does use
    r = CliRunner().invoke(
        cli, ["--store", str(small.root), "query", "--format", "json",
              "SELECT format, template FROM exports"], obj={},
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"format": "agentworldbench", "template": None}]
