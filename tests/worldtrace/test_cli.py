from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from worldtrace.pipelines.export import FORMATS, ExportConfig
from worldtrace.schemas import ShardWriter

from worldtrace.cli import cli
from worldtrace.options import ConfigCommand, options_from

from ..conftest import VENV_BIN


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
    assert r.returncode == 1  # the tokenizer the variable names is a problem (hunt 1206)
    assert "[MISS] chromium" in r.stdout and "apt-get install chromium" in r.stdout
    assert "[FAIL] tokenizer" in r.stdout and "--tokenizer PATH" in r.stdout
    assert "[ok  ] redaction screen" in r.stdout
    assert "[ok  ] compression statistics  C loop over zlib" in r.stdout


def test_doctor_says_a_store_that_does_not_exist(tmp_path, wt_env):
    """Found: `--store nope doctor` printed '[ok] store shards every shard under nope
    reads': a mistyped store looked healthy."""
    nope = tmp_path / "nope"
    r = wt(wt_env, "--store", str(nope), "doctor")
    assert "[MISS] store" in r.stdout and f"{nope} does not exist" in r.stdout, r.stdout
    assert "--create" in r.stdout and "store shards" not in r.stdout and not nope.exists()
    assert "[ok  ] store shards" in wt(wt_env, "doctor").stdout  # the store that exists


def test_doctor_finds_the_mcp_servers_where_the_sandbox_does(wt_env):
    """The venv's `worldtrace` run without activating the venv: the MCP sandbox finds
    mcp-server-git beside its Python, and doctor called it MISS (`pip install ...`)."""
    r = subprocess.run(
        [str(VENV_BIN / "worldtrace"), "doctor"],
        capture_output=True, text=True, env=dict(wt_env, PATH="/usr/bin:/bin"),
    )  # fmt: skip
    for server in ("mcp-server-git", "mcp-server-time"):
        assert f"[ok  ] mcp: {server}" in r.stdout, r.stdout


def test_doctor_names_rules_the_redaction_screen_cannot_read(tmp_path, wt_env):
    rules = tmp_path / "redact.yaml"
    rules.write_text("patterns:\n  - {kind: pin, regex: 'pin-[[:digit:]]{4}'}\n")
    r = wt(dict(wt_env, WORLDTRACE_REDACT_CONFIG=str(rules)), "doctor")
    line = next(x for x in r.stdout.splitlines() if "redaction screen" in x)
    assert "MISS" in line and "POSIX class" in line and "redacted whole" in line
    rules.write_text("patterns:\n  - {kind: pair, regex: '(pin)-\\1-[0-9]{4}'}\n")
    r = wt(dict(wt_env, WORLDTRACE_REDACT_CONFIG=str(rules)), "doctor")
    line = next(x for x in r.stdout.splitlines() if "redaction screen" in x)
    assert "[ok  ]" in line and "ASCII text only" in line and "backreference" in line


def test_a_bad_redaction_rules_file_is_one_line_naming_it(tmp_path, wt_env):
    """Found: a rules file with an unknown key (or a pasted code fence) ended `redact
    --config` with a traceback, and through $WORLDTRACE_REDACT_CONFIG `collect` and
    `process` with 56 and 196 lines of it, raised where a collector or a pipeline
    worker first read the rules."""
    bad = tmp_path / "rules.yaml"
    bad.write_text("patternz: []\n")
    fence = tmp_path / "fence.yaml"
    fence.write_text("```yaml\npatterns: []\n")
    r = wt(wt_env, "redact", "--check", "--config", str(bad))
    assert (r.returncode, r.stderr) == (1, f"Error: {bad}:1: patternz: unknown key\n")
    for rules, said in ((bad, "patternz: unknown key"), (fence, "invalid YAML")):
        env = dict(wt_env, WORLDTRACE_REDACT_CONFIG=str(rules))
        for args in (("process",), ("collect", "--sandbox", "docker", "--keys", "ls\n")):
            r = wt(env, *args)
            assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
            assert r.stderr.startswith(f"Error: $WORLDTRACE_REDACT_CONFIG: {rules}:1: ")
            assert said in r.stderr and len(r.stderr.splitlines()) == 1
    r = wt(dict(wt_env, WORLDTRACE_REDACT_CONFIG=str(bad)), "doctor")  # says it, runs on
    assert "[FAIL] redaction rules" in r.stdout and "patternz: unknown key" in r.stdout
    assert "[ok  ] docker" in r.stdout


def test_demo_end_to_end(tmp_path, wt_env, docker_engine, official_loader):
    """The README's `make demo` on its every section: real environments only, then
    validate, process, export, stats and report; a rerun replaces what it wrote. Run as
    `make demo` runs it (no --store: ./worldtrace-demo), then the commands the demo, its
    report and the README suggest next, as printed."""
    env = {k: v for k, v in wt_env.items() if k != "WORLDTRACE_STORE"}
    run = lambda args: subprocess.run(  # noqa: E731
        args, capture_output=True, text=True, env=env, cwd=tmp_path
    )
    r = run(["worldtrace", "demo", "--episodes", "1"])
    store = tmp_path / "worldtrace-demo"
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for step in ("1. collect", "2. validate", "3. process", "4. export", "5. stats", "6. report"):
        assert step in r.stdout
    assert "0 problem(s)" in r.stdout and "cannot start" not in r.stdout
    # trajectories dropped and turns removed said apart (hunt 12-06t: one list, no unit,
    # "filters: gui_env_failure 2, gui_no_change 14" above "filtered 2")
    filters = re.search(r"filters: (.*)\n", r.stdout)[1]
    dropped = re.search(r"trajectories ([^;]*)", filters)
    filtered = int(re.search(r"\+ filtered (\d+) \+", r.stdout)[1])
    counted = sum(int(n) for n in re.findall(r" (\d+)", dropped[1])) if dropped else 0
    assert counted == filtered, (filters, filtered)
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
    test_part = json.loads((store / "export" / "parquet" / "manifest.json").read_text())["parts"][
        "test"
    ]
    held = test_part["counts"]["trajectories"]  # said as it is (hunt 1206: "held out" of 0)
    assert held and f"(test/ held out: {held} trajectories)" in r.stdout
    # docs/android.md's export without the simulator's trajectories, as written there
    no_sim = (
        "json_extract_string(environment.config, '$.model') IS DISTINCT FROM 'WorldTrace Simulator'"
    )
    ex = run(["worldtrace", "--store", str(store), "export", "-o", "nosim", "--where", no_sim])
    android = con.execute("SELECT count(*) FROM trajectories WHERE domain = 'android'").fetchone()
    assert ex.returncode == 0 and f"--where left out {android[0]} trajectory" in ex.stdout, (
        ex.stderr
    )
    exported = {
        d
        for f in (tmp_path / "nosim").glob("*.parquet")
        for d in pq.read_table(f).column("domain").to_pylist()
    }
    assert android[0] and exported == {"terminal", "swe", "mcp", "search", "web"}
    # the eval set: read by the official loader, no dedup cluster on both sides
    awb = store / "export" / "agentworldbench"
    items, errors = official_loader(awb / "test")
    assert errors == [] and items
    clusters = dict(con.execute("SELECT trajectory_id, cluster_id FROM clusters").fetchall())
    train = {
        json.loads(x)["id"]
        for f in (awb / "train").glob("*.jsonl")
        for x in f.read_text().splitlines()
    }
    side = {
        s: {clusters[i.rsplit("/", 1)[0]] for i in ids}
        for s, ids in (("test", [i for i, _, _ in items]), ("train", train))
    }
    assert side["test"] and side["train"] and not side["test"] & side["train"]
    # found: the training shards were exported without the split, the eval set in them

    def shard_ids(part: str) -> set[str]:
        files = (store / "export" / "parquet" / part).glob("*.parquet")
        return {i for f in files for i in pq.read_table(f).column("trajectory_id").to_pylist()}

    held_out = {i.rsplit("/", 1)[0] for i, _, _ in items}
    assert shard_ids("train") and not shard_ids("train") & held_out
    assert held_out <= shard_ids("test")
    first = sorted(p.name for p in (store / "raw" / "collect").iterdir())
    # job ids carry the demo's prefix once (found: demo-demo-mcp-git)
    assert "demo-mcp-git" in first and not [p for p in first if p.startswith("demo-demo-")]
    # found: the report's `explain` commands had no --store, and so failed
    reported = re.findall(r"<code class=cmd>(.*?)</code>", (store / "report.html").read_text())
    assert reported and all(f"--store {store}" in c for c in reported), reported[:3]
    said = [x.strip() for x in r.stdout.split("try:", 1)[1].splitlines()]
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    after = readme.split("After `make demo`", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    suggested = [*said, *after.splitlines(), html.unescape(reported[0])]
    commands = [c for c in suggested if c.startswith("worldtrace ")]
    assert len(commands) >= 5, suggested
    for command in commands:
        done = run(shlex.split(command))
        assert done.returncode == 0 and done.stdout.strip(), (command, done.stderr)
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


@pytest.mark.parametrize("given", ["", ",", " , "])
def test_demo_sections_naming_none_is_a_usage_error(tmp_path, wt_env, given):
    """Hunt 1206: `--sections ''` collected nothing, then failed at `process` (no input),
    leaving its store behind."""
    store = tmp_path / "d2"
    r = subprocess.run(
        ["worldtrace", "--store", str(store), "--create", "demo", "--sections", given],
        capture_output=True, text=True, env=wt_env, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "--sections: names no section (known: " in r.stderr, r.stderr
    assert not store.exists()


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
    # a quick run describes docker episodes only; the other kinds need a job file
    assert choices("collect", "sandbox") == ("docker", "terminal", "swe")
    assert {"terminal", "swe"} <= set(kinds())
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


# -- global options and the store -----------------------------------------------------------
def test_every_command_accepts_the_global_options_after_it():
    for path, cmd in _commands(cli):
        params = cmd._params if isinstance(cmd, ConfigCommand) else cmd.params
        names = {getattr(p, "name", None) for p in params}  # generated options: not built yet
        assert {"store", "create"} <= names, path


def test_global_options_before_and_after_the_command_are_the_same(tmp_path, wt_env, corpus):
    store = tmp_path / "elsewhere"
    with ShardWriter(store / "raw" / "s") as w:
        w.write(corpus[:5])
    runner = CliRunner(env={"WORLDTRACE_STORE": str(tmp_path / "not-this-one")})
    outputs = []
    for args in (
        [
            "query",
            "SELECT domain, count(*) AS n FROM raw_trajectories GROUP BY ALL",
            "--format",
            "csv",
        ],
        ["jobs", "list"],
        ["stats"],
    ):
        before = runner.invoke(cli, ["--store", str(store), *args], obj={})
        after = runner.invoke(cli, [*args, "--store", str(store)], obj={})
        assert before.exit_code == after.exit_code == 0, before.output + after.output
        assert before.stdout == after.stdout
        outputs.append(after.stdout)
    assert sum(int(line.split(",")[1]) for line in outputs[0].splitlines()[1:]) == 5
    assert outputs[1] == "no jobs\n" and "trajectories by domain and source" in outputs[2]
    r = runner.invoke(cli, ["--store", str(store), "stats", "--store", str(tmp_path / "o")], obj={})
    assert r.exit_code == 2 and "given twice with different values" in r.stderr


READING = [
    ["stats"],
    ["query", "SELECT 1"],
    ["explain", "abc"],
    ["report", "-o", "r.html"],
    ["jobs", "list"],
    ["jobs", "show", "x"],
    ["process"],
    ["export", "--format", "agentworldbench"],
    ["gc"],
]
WRITING = [
    ["import", "{records}"],
    ["process", "--input", "{records}"],
    ["collect", "--sandbox", "docker", "--keys", "ls\\n"],
    ["jobs", "submit", "{job}"],
    ["worker"],
    ["demo", "--episodes", "1"],
    ["scheduler", "--once"],
    # found: with a job store named apart, the store was neither checked nor made
    ["jobs", "submit", "{job}", "--jobs", "{jobs_db}"],
    ["worker", "--jobs", "{jobs_db}"],
    ["scheduler", "--once", "--jobs", "{jobs_db}"],
]


@pytest.fixture
def inputs(tmp_path):
    records = tmp_path / "terminal_test.jsonl"  # AgentWorldBench records
    rec = {"task": "t/terminal", "system_str": "s", "prompt": ["ls"], "response": ["a b"]}
    records.write_text("".join(json.dumps({**rec, "id": str(i)}) + "\n" for i in range(3)))
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: j\nsandbox: {kind: terminal}\n"
        "tasks: [{id: t, instruction: x, actions: [{keystrokes: 'ls\\n'}]}]\n"
    )
    return {"records": str(records), "job": str(job), "jobs_db": str(tmp_path / "jobs.db")}


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_a_missing_store_is_an_error_for_reading_commands(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)  # nothing is written, but if it were, not into the repo
    missing = tmp_path / "typo"
    for create in ([], ["--create"]):  # --create never makes a store for a reading command
        r = CliRunner().invoke(cli, ["--store", str(missing), *create, *args], obj={})
        assert r.exit_code == 1, r.output
        named = f"`cli {' '.join(args[:2] if args[0] == 'jobs' else args[:1])}`"
        named += " without --input" if args[0] == "process" else ""
        works = f"{named} works on a store that exists"
        if create:  # given and not taken: said so
            works = f"--create does not apply to {named}: it works on a store that exists"
        makers = "`collect`, `import`, `worker`, `jobs submit`, `scheduler`"
        made = (
            f"`cli process --input PATH --create` makes one from PATH, as {makers} and "
            "`demo` do with --create"
            if args[0] == "process"
            else f"{makers}, `process --input PATH` and `demo` make a new one with --create"
        )
        assert r.stderr.strip().splitlines() == [
            f"Error: store {missing} does not exist: check --store; {works} ({made})"
        ]
        assert not missing.exists()


@pytest.mark.parametrize("sub", [["list"], ["show", "x"], ["cancel", "x"], ["retry", "x"]])
def test_a_reading_jobs_command_makes_no_job_store_at_a_mistyped_path(tmp_path, sub):
    """Found: `jobs list --jobs /typo/x.db` made the directory and an empty job store
    there, then said `no jobs`: the reason reading commands refuse a missing store."""
    (tmp_path / "s").mkdir()
    missing = tmp_path / "typo" / "x.db"
    for url in (str(missing), f"sqlite:///{missing}"):
        r = CliRunner().invoke(
            cli, ["--store", str(tmp_path / "s"), "jobs", *sub, "--jobs", url], obj={}
        )
        assert r.exit_code == 1, r.output
        assert r.stderr.strip() == f"Error: no job store at {missing}: check --jobs " + (
            "(`jobs submit` and `worker` make one)"
        )
        assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("args", WRITING, ids=lambda a: " ".join(a[:2]))
def test_writing_commands_make_a_store_only_with_create(tmp_path, inputs, args):
    missing = tmp_path / "new"
    args = [a.format(**inputs) for a in args]
    r = CliRunner().invoke(cli, [*args, "--store", str(missing)], obj={})
    assert r.exit_code == 1, r.output
    assert r.stderr.strip() == f"Error: store {missing} does not exist: pass --create to make it"
    assert not missing.exists()


def test_create_makes_the_store(tmp_path, wt_env, inputs):
    new = tmp_path / "new"
    r = wt(wt_env, "import", inputs["records"], "--store", str(new), "--create")
    assert r.returncode == 0, r.stderr
    assert len(list((new / "raw" / "import").rglob("*.parquet"))) == 1
    r = wt(wt_env, "--store", str(tmp_path / "q"), "--create", "worker")
    assert r.returncode == 0 and "0 episode attempt(s) run" in r.stdout
    assert (tmp_path / "q" / "jobs.db").exists()


def test_root_help_has_an_example(wt_env):
    out = wt(wt_env, "--help", check=True).stdout
    assert "Example:" in out and "worldtrace stats --store" in out and "--create" in out


def test_root_create_help_names_every_command_that_makes_a_store():
    """`--create` is accepted by every command; the help names those it makes a store
    for (WRITING, above, checks that they do)."""
    r = CliRunner().invoke(cli, ["--help"], obj={}, terminal_width=200)
    line = " ".join(r.output.split("--create", 1)[1].split("-h, --help")[0].split())
    for args in WRITING:
        name = " ".join(args[:2]) if args[0] in ("jobs", "process") else args[0]
        assert name in line, (name, line)


def test_readme_lists_every_command():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listing = readme.split("## CLI", 1)[1].split("```", 2)[1]
    named = {w.strip("[]|;,") for line in listing.splitlines() for w in line.split()}
    assert set(cli.commands) - named == set()


# -- process settings (--set, --config) -------------------------------------------------------
@pytest.fixture
def raw_store(tmp_path, corpus):
    """A store holding raw shards only (nothing processed yet)."""
    root = tmp_path / "rs"
    with ShardWriter(root / "raw" / "s") as w:
        w.write(corpus[:6])
    return root


BAD_SETTINGS = [
    ("dedup.threshold=abc", "dedup.threshold=abc: expected a number"),
    ("dedup.threshold=7", "dedup.threshold=7: expected a number in (0, 1]"),
    ("filters.min_turns=-5", "filters.min_turns=-5: expected an integer >= 0 (0 disables)"),
    ("dedup.num_perm=0", "dedup.num_perm=0: expected a positive integer"),
    ("dedup.treshold=0.7", "dedup.treshold=0.7: unknown setting (known: dedup.exact, "),
    # found: keep ratios and thresholds took any number (a NaN keep reached the turns
    # table and a manifest that is not JSON, and stopped `export --keep-mode prefix`), and
    # an unknown keep ratio said `KeepRatios.__init__() got an unexpected keyword ...`
    (
        "policy_settings.keep.other=nan",
        "policy_settings.keep.other=nan: expected a number in [0, 1]",
    ),
    (
        "policy_settings.keep.action=2",
        "policy_settings.keep.action=2: expected a number in [0, 1]",
    ),
    (
        "policy_settings.echo_ol=-5",
        "policy_settings.echo_ol=-5: expected a number in [0, 1]",
    ),
    (
        "policy_settings.expansion_r=inf",
        "policy_settings.expansion_r=inf: expected a finite number >= 0",
    ),
    (
        "policy_settings.keep.bogus=1",
        "policy_settings.keep.bogus=1: unknown setting keep.bogus for agentworld-v1 (known: ",
    ),
]


@pytest.mark.parametrize("override, message", BAD_SETTINGS, ids=[b[0] for b in BAD_SETTINGS])
def test_process_names_a_setting_its_field_does_not_take(raw_store, override, message):
    """Found: `--set dedup.threshold=abc` ended in an 80-frame Beam/numpy traceback and
    `dedup.threshold=7` or `filters.min_turns=-5` ran as if they meant something."""
    args = ["--store", str(raw_store), "process", "--rebuild", "--set", override]
    r = CliRunner().invoke(cli, args, obj={})
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1].startswith(f"Error: Invalid value for --set: {message}")
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)
    assert not (raw_store / "processed" / "manifest.json").exists()


BAD_OPTIONS = [
    (["--polcy=agentworld-v1+info"], "No such option '--polcy'. Did you mean '--policy'?"),
    (["--rebuid"], "No such option '--rebuid'. Did you mean '--rebuild'?"),
    (["--runner", "bogus"], "Invalid value for --runner: Unexpected pipeline runner: bogus."),
    (["--frobnicate=3"], "no such option: --frobnicate (neither a process option nor one of"),
]


@pytest.mark.parametrize("args, message", BAD_OPTIONS, ids=[b[0][0] for b in BAD_OPTIONS])
def test_process_refuses_an_option_the_run_would_drop(raw_store, args, message):
    """Found: `process --rebuild --polcy=...` ran with the default policy and exit 0, and
    `--rebuid` or `--runner bogus` passed in silence: every unknown option went to Beam,
    which drops what it does not define. A near miss of a process option, an unknown
    runner, and on the local runner any option Beam does not define either, is a usage
    error before anything runs; Beam's own options still pass (other tests run them)."""
    r = CliRunner().invoke(cli, ["--store", str(raw_store), "process", *args], obj={})
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1].startswith(f"Error: {message}"), r.stderr
    assert not (raw_store / "processed").exists()


def test_process_names_the_config_file_of_a_bad_setting(raw_store, tmp_path):
    f = tmp_path / "settings.yaml"
    f.write_text("dedup:\n  threshold: 7\n")
    r = CliRunner().invoke(cli, ["--store", str(raw_store), "process", "--config", str(f)], obj={})
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1] == (
        f"Error: Invalid value for --config: {f}: dedup.threshold=7: expected a number in (0, 1]"
    )


def test_changed_settings_say_both_ways_out(raw_store, corpus):
    """After `process --set ...`, a plain `process` refuses (earlier output used the old
    settings): the message names the --set flags that repeat them, and --rebuild."""
    runner = CliRunner()
    base = ["--store", str(raw_store), "process", "--json"]
    first = runner.invoke(cli, [*base, "--set", "filters.min_turns=3"], obj={})
    assert first.exit_code == 0, first.output
    with ShardWriter(raw_store / "raw" / "later") as w:  # new data to add
        w.write(corpus[6:8])
    r = runner.invoke(cli, base, obj={})
    assert r.exit_code == 1
    [line] = r.stderr.splitlines()
    assert "settings changed since the last run (filters)" in line
    assert "worldtrace process --set filters.min_turns=3" in line and "--rebuild" in line
    again = runner.invoke(cli, [*base, "--set", "filters.min_turns=3"], obj={})
    assert again.exit_code == 0, again.output


def test_a_policy_setting_given_at_its_default_is_no_change(raw_store, corpus):
    """Found: `--set policy_settings.keep.echo=0.05` (the default) after a run without it
    was refused as `settings changed (policy_settings)`, where `dedup.threshold=0.8`
    (also the default) was accepted. The policy the settings make is compared; a value
    that differs is still a change."""
    runner = CliRunner()
    base = ["--store", str(raw_store), "process", "--json"]
    assert runner.invoke(cli, base, obj={}).exit_code == 0
    with ShardWriter(raw_store / "raw" / "later") as w:
        w.write(corpus[6:8])
    same = runner.invoke(cli, [*base, "--set", "policy_settings.keep.echo=0.05"], obj={})
    assert same.exit_code == 0, same.output
    with ShardWriter(raw_store / "raw" / "more") as w:
        w.write(corpus[8:10])
    other = runner.invoke(cli, [*base, "--set", "policy_settings.keep.echo=0.5"], obj={})
    assert other.exit_code == 1 and "settings changed since the last run (policy_settings)" in (
        other.stderr
    )


# -- quick collect runs ---------------------------------------------------------------------
def test_collect_help_offers_only_the_quick_kinds():
    out = CliRunner().invoke(cli, ["collect", "--help"], obj={}, terminal_width=200).output
    assert "--sandbox [docker|terminal|swe]" in out
    assert "mcp, web and android need a JOB_FILE" in out


@pytest.mark.parametrize("kind", ["mcp", "web", "android"])
def test_collect_kinds_without_a_quick_run_point_to_a_job_file(store, kind):
    """Found: `collect --sandbox mcp` said `sandbox.docker: unknown key` (a key the user
    never wrote) and `policy scripted needs the task's actions`."""
    r = CliRunner().invoke(cli, ["--store", str(store.root), "collect", "--sandbox", kind], obj={})
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--sandbox': {kind} episodes need a job file: worldtrace "
        f"collect JOB.yaml (see examples/{kind}-*.yaml, docs/collect.md); a quick --sandbox "
        "run is docker, terminal, swe only"
    )
    assert list((Path(__file__).parents[2] / "examples").glob(f"{kind}-*.yaml"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sandbox", "docker", "--tool", 'bash:{"command": "ls"}'], "--tool is for the swe"),
        (["--sandbox", "docker"], "give the keystrokes to send: --keys TEXT"),
        (["--sandbox", "swe", "--tool", "bash"], "--sandbox swe needs --repo DIR"),
        (["--sandbox", "terminal", "--repo", "{repo}", "--keys", "ls"], "--repo is for the swe"),
    ],
)
def test_quick_collect_options_that_do_not_fit_are_usage_errors(store, repo, args, message):
    """Found: --tool without --repo was dropped without a word (then `policy scripted
    needs the task's actions`); `--sandbox swe` without --repo was a TypeError traceback."""
    args = [str(repo) if a == "{repo}" else a for a in args]
    r = CliRunner().invoke(cli, ["--store", str(store.root), "collect", *args], obj={})
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines()[-1].startswith(f"Error: {message}"), r.stderr


def test_process_says_why_a_file_was_rejected_and_counts_this_run_apart(tmp_path, wt_env):
    """A Parquet file of other columns given to `process` printed only `in 1 / rejected 1`
    (the reason was in the rejects table, unsaid), and a second such file read `in 2`: the
    store's total under the run's title."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in ("notatraj", "garbage"):
        pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / f"{name}.parquet")
    first = wt(wt_env, "process", "--input", str(tmp_path / "notatraj.parquet"))
    assert first.returncode == 0, first.stderr
    why = "validate: <schema>: not a trajectory shard: missing column(s) domain, turns"
    assert f"rejected: {tmp_path / 'notatraj.parquet'}: {why}" in first.stderr
    second = wt(wt_env, "process", "--input", str(tmp_path / "garbage.parquet"))
    rows = {ln.split()[1]: ln.split()[3:-1] for ln in second.stdout.splitlines() if "│ " in ln}
    assert rows["in"] == ["1", "│", "2"] and rows["rejected"] == ["1", "│", "2"]
    assert f"rejected: {tmp_path / 'garbage.parquet'}: {why}" in second.stderr
    again = wt(wt_env, "process", "--input", str(tmp_path / "garbage.parquet"))
    assert "no new input: every file was processed before" in again.stderr


def test_process_says_a_filtered_record_was_filtered_and_counts_every_row_left_unshown(
    tmp_path, corpus
):
    """Found: a record a filter dropped was printed `rejected: ...: filter: min_turns`
    while the table above said `rejected 0, filtered 1`; and the `N more` line counted
    only validation rejects, so six filtered records showed five lines and no `more`."""
    from worldtrace.collectors.synthetic import build

    short = [build("terminal", [(f"echo {i}\n", f"{i}")]) for i in range(6)]
    with ShardWriter(tmp_path / "s" / "raw" / "a") as w:
        w.write([*corpus[:2], *short])
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "process"], obj={})
    assert r.exit_code == 0, r.output
    said = [ln for ln in r.stderr.splitlines() if ": filter: min_turns" in ln]
    assert len(said) == 5 and all(ln.startswith("filtered: ") for ln in said), r.stderr
    assert "rejected: " not in r.stderr
    assert "1 more (rejected, filtered or turns removed): worldtrace query" in r.stderr


def test_validate_of_a_store_checks_its_trajectories_not_its_other_files(tmp_path, corpus):
    """Found: `validate STORE` reported 39 problems in a valid store: its manifests
    (`run_id: unknown field`), the processed turns, clusters and rejects tables (`not a
    trajectory shard`) and an export's files. A walk passes over the store's own files
    that hold no trajectories and says how many; one named is checked as before."""
    from worldtrace.pipelines.export import ExportConfig, export
    from worldtrace.pipelines.process import ProcessConfig, run

    store = tmp_path / "s"
    with ShardWriter(store / "raw" / "a") as w:
        w.write(corpus[:6])
    run(ProcessConfig(inputs=[str(store / "raw")], output=str(store / "processed"), workers=1))
    export(ExportConfig(input=str(store / "processed" / "trajectories"),
                        output=str(store / "export" / "awb"), format="agentworldbench"))  # fmt: skip
    for target in (store, store / "processed"):
        r = CliRunner().invoke(cli, ["validate", str(target)], obj={})
        assert r.exit_code == 0, r.output
        assert "0 problem(s)" in r.stderr and "passed over" in r.stderr
    kept = sum(pq.read_metadata(f).num_rows for f in (store / "processed").rglob("*.parquet")
               if f.parent.name == "trajectories")  # fmt: skip
    r = CliRunner().invoke(cli, ["validate", str(store)], obj={})
    assert f", {6 + kept} record(s), 0 problem(s)" in r.stderr, r.stderr  # raw + processed
    named = store / "processed" / "manifest.json"
    r = CliRunner().invoke(cli, ["validate", str(named)], obj={})
    assert r.exit_code == 1 and "unknown field" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-observation-chars", "-5"], "--max-observation-chars: expected an integer >= 0"),
        (["--workers", "-2"], "--workers: expected 0 (auto) to "),
    ],
)
def test_import_refuses_a_negative_cap_or_worker_count(tmp_path, inputs, args, message):
    """Found: `import --max-observation-chars -5` imported with no cap and `--workers -2`
    as auto, in silence. A usage error before anything is made or read."""
    new = tmp_path / "new"
    r = CliRunner().invoke(
        cli, ["--store", str(new), "--create", "import", *args, inputs["records"]], obj={}
    )
    assert r.exit_code == 2 and f"Invalid value for {message}" in r.stderr, r.output
    assert not new.exists()
