from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal

import click
from click.testing import CliRunner
from worldtrace.pipelines.export import FORMATS, ExportConfig
from worldtrace.schemas import ShardWriter

from worldtrace.cli import cli
from worldtrace.options import ConfigCommand, options_from


def wt(env, *args, check=False):
    return subprocess.run(
        ["worldtrace", *args], capture_output=True, text=True, env=env, check=check
    )


def test_help_lists_every_command(wt_env):
    out = wt(wt_env, "--help", check=True).stdout
    for cmd in ("validate", "import", "collect", "jobs", "worker", "process", "export",
                "query", "stats", "explain", "report", "doctor", "demo", "version"):  # fmt: skip
        assert f"  {cmd}" in out


def test_version(wt_env):
    assert "worldtrace.trajectory/1" in wt(wt_env, "version", check=True).stdout


def test_validate_good_and_bad(tmp_path, wt_env, corpus):
    with ShardWriter(tmp_path / "good") as w:
        w.write(corpus[:5])
    r = wt(wt_env, "validate", str(tmp_path / "good"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 record(s), 0 problem(s)" in r.stderr

    d = json.loads(corpus[0].to_json())
    d["domain"] = "chess"
    d["turns"][1]["index"] = 9
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(d) + "\n" + "{oops\n" + corpus[1].to_json() + "\n")
    r = wt(wt_env, "validate", str(bad))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{bad}:line 1") and "domain: unknown domain 'chess'" in lines[0]
    assert "turns[1].index" in lines[1]
    assert lines[2].startswith(f"{bad}:line 2") and "invalid JSON" in lines[2]


def test_doctor_reports_and_suggests(wt_env):
    env = dict(wt_env, PATH="/nonexistent", WORLDTRACE_TOKENIZER="/nonexistent/tokenizer.json")
    r = wt(dict(env, PATH=wt_env["PATH"].split(":")[0]), "doctor")
    assert r.returncode == 0
    assert "[MISS] chromium" in r.stdout and "apt-get install chromium" in r.stdout
    assert "[MISS] tokenizer" in r.stdout and "--tokenizer PATH" in r.stdout


def test_demo_end_to_end(tmp_path, wt_env, docker_engine):
    """The README's `make demo` on its every section: real environments only, then
    validate, process, export, stats and report; a rerun replaces what it wrote."""
    store = tmp_path / "demo"
    r = wt(wt_env, "--store", str(store), "demo", "--episodes", "1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for step in ("1. collect", "2. validate", "3. process", "4. export", "5. stats", "6. report"):
        assert step in r.stdout
    assert "0 problem(s)" in r.stdout and "cannot start" not in r.stdout
    from worldtrace.schemas import Store
    from worldtrace.schemas.views import connect

    con = connect(Store.at(store))
    domains = {d for (d,) in con.execute("SELECT DISTINCT domain FROM raw_trajectories").fetchall()}
    assert domains == {"terminal", "swe", "mcp", "search", "web", "android"}
    kinds = {
        k for (k,) in con.execute("SELECT DISTINCT source_kind FROM raw_trajectories").fetchall()
    }
    assert kinds == {"collector"}  # nothing synthetic
    assert (store / "report.html").exists()
    assert (store / "export" / "parquet" / "manifest.json").exists()
    first = sorted(p.name for p in (store / "raw" / "collect").iterdir())
    again = wt(wt_env, "--store", str(store), "demo", "--sections", "docker", "--episodes", "1")
    assert again.returncode == 0, again.stdout[-2000:]
    assert sorted(p.name for p in (store / "raw" / "collect").iterdir()) == [
        "demo-swe",
        "demo-terminal",
    ]
    assert len(first) > 2  # the rerun replaced what the first run wrote


def test_demo_writes_its_own_store_by_default(tmp_path, wt_env):
    env = {k: v for k, v in wt_env.items() if k != "WORLDTRACE_STORE"}
    r = subprocess.run(
        ["worldtrace", "demo", "--sections", "nope"], capture_output=True, text=True,
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "unknown section(s) nope" in r.stderr
    from worldtrace.demo import DEMO_STORE

    assert DEMO_STORE == "worldtrace-demo"


def test_import_worldtrace_loads_no_heavy_backend():
    code = (
        "import sys, worldtrace, worldtrace.cli, worldtrace.schemas, worldtrace.sandboxes.base, worldtrace.collectors.importers;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'apache_beam', 'docker', 'playwright', 'tokenizers', 'adbutils', 'uiautomator2', 'datasketch'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def test_every_command_has_help_and_every_option_help_text():
    runner = CliRunner()
    seen = set()
    for path, cmd in _commands(cli):
        r = runner.invoke(cli, [*path, "--help"], obj={})
        assert r.exit_code == 0, (path, r.output)
        assert f"Usage: cli {' '.join(path)}" in r.output
        seen.add(" ".join(path))
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert p.help, f"{' '.join(path)} {p.opts[0]} has no help"
                assert p.opts[0] in r.output
    assert {"import", "jobs submit", "export", "process", "collect", "version"} <= seen


def test_choices_come_from_registries():
    from worldtrace.collectors.importers import FORMATS as IMPORT_FORMATS
    from worldtrace.pipelines.mask import KEEP_MODES, POLICIES
    from worldtrace.sandboxes.base import kinds
    from worldtrace.schemas.fields import DOMAINS

    def choices(command: str, option: str) -> tuple:
        return tuple(next(p for p in cli.commands[command].params if p.name == option).type.choices)

    assert choices("import", "fmt") == ("auto", *IMPORT_FORMATS)
    assert choices("import", "domain") == DOMAINS
    assert choices("collect", "sandbox") == ("docker", *kinds())
    assert choices("process", "policy") == tuple(POLICIES)
    assert choices("export", "format") == FORMATS
    assert choices("export", "keep_mode") == KEEP_MODES


@dataclass
class WiderExport(ExportConfig):
    """ExportConfig plus two fields, as a later edit of ExportConfig would add them."""

    shuffle: bool = False
    """Shuffle samples across shards."""
    budget: Literal["small", "large"] = "small"
    """Size class of the run."""


def test_a_new_config_field_is_an_option_with_its_docstring():
    @click.command(cls=ConfigCommand)
    @options_from(
        WiderExport,
        exclude=("input", "output", "tokenizer", "shard_rows"),
        choices={"format": "worldtrace.pipelines.export:FORMATS"},
    )
    def cmd(**options):
        click.echo(repr(WiderExport(**options)))

    runner = CliRunner()
    help_text = " ".join(runner.invoke(cmd, ["--help"], terminal_width=200).output.split())
    assert (
        "--shuffle / --no-shuffle Shuffle samples across shards. [default: no-shuffle]" in help_text
    )
    assert "--budget [small|large] Size class of the run. [default: small]" in help_text
    # inherited fields keep their docstrings, and field names in them read as options
    assert (
        "--max-len INTEGER Longest sample in tokens (0 = no limit; defaults to --seq-len"
        in help_text
    )

    out = runner.invoke(cmd, ["--shuffle", "--budget", "large", "--seq-len", "8"]).output
    assert "shuffle=True" in out and "budget='large'" in out and "seq_len=8" in out
    assert "format='parquet'" in out and "eot_target=True" in out  # dataclass defaults
    for bad in (["--budget", "huge"], ["--format", "csv"]):
        r = runner.invoke(cmd, bad)
        assert r.exit_code == 2 and bad[1] in r.output


def test_listing_commands_loads_no_config_module():
    code = (
        "import sys; from click.testing import CliRunner; from worldtrace.cli import cli;"
        "r = CliRunner().invoke(cli, ['--help']);"
        "print(r.exit_code, sorted(m for m in ('pyarrow', 'numpy', 'apache_beam') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "0 []"
