"""CLI defects a new user's docs review found (1203b), each reproduced as the user ran it:
the installed `worldtrace` on real stores (and real containers for `collect`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from worldtrace.pipelines.filters import FilterConfig

from worldtrace.cli import cli

from ..conftest import VENV_BIN, wait_until

WT = str(VENV_BIN / "worldtrace")


def run(env: dict, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([WT, *args], capture_output=True, text=True, env=env, **kw)


def error_line(r: subprocess.CompletedProcess) -> str:
    [line] = [x for x in r.stderr.splitlines() if x.startswith("Error:")]
    return line


def _records(n: int = 3) -> str:
    """OpenAI chat logs with two tool turns each, one per line."""
    lines = []
    for i in range(n):
        messages = [{"role": "user", "content": f"list files {i}"}]
        for step, (cmd, out) in enumerate(
            ((f"ls d{i}", f"f{i}.txt"), (f"cat f{i}.txt", f"hi {i}"))
        ):
            call = {"id": f"c{i}{step}", "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}  # fmt: skip
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": out},
            ]
        lines.append(json.dumps({"id": f"t{i}", "messages": messages}))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A store imported, processed and exported (Parquet) by the CLI."""
    top = tmp_path_factory.mktemp("review-b")
    (top / "oa.jsonl").write_text(_records())
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    root = top / "store"
    for args in (("--create", "import", str(top / "oa.jsonl")), ("process",), ("export",)):
        r = run(env, "--store", str(root), *args)
        assert r.returncode == 0, r.stderr
    assert any((root / "export" / "parquet").glob("*.parquet"))
    return root


# -- A4: validate over an export ---------------------------------------------------------------
@pytest.mark.parametrize("under", ["export/parquet", "export"])
def test_validate_of_an_export_passes_it_over_and_succeeds(exported, wt_env, under):
    """Found: `validate STORE/export/parquet` said it passed over the export's files,
    then `no Parquet or JSONL files found`, exit 1, while `validate STORE` passing over
    the same files exits 0. Passing over a store's own files is not a failure."""
    r = run(wt_env, "validate", str(exported / under))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("passed over 2 file(s) of the store that hold no trajectories")
    assert lines[1:] == ["0 file(s), 0 record(s), 0 problem(s)"]
    assert "no Parquet or JSONL files found" not in r.stderr
    r = run(wt_env, "validate", "-q", str(exported / under))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_validate_of_a_directory_with_nothing_at_all_still_fails(wt_env, tmp_path):
    (tmp_path / "empty").mkdir()
    r = run(wt_env, "validate", str(tmp_path / "empty"))
    assert r.returncode == 1
    assert r.stderr == f"no Parquet or JSONL files found under {tmp_path / 'empty'}\n"


# -- A9: every --help ends with its example ----------------------------------------------------
def _commands(cmd: click.Command, path: tuple[str, ...] = ()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))


def _ends_with_example(text: str) -> bool:
    """The last block is `Example:` and its (indented) command lines, nothing after."""
    lines = text.rstrip("\n").splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == "Example:"]
    if not heads:
        return False
    head = lines[heads[-1]]
    indent = len(head) - len(head.lstrip())
    tail = [line for line in lines[heads[-1] + 1 :] if line.strip()]
    return bool(tail) and all(len(x) - len(x.lstrip()) > indent for x in tail)


PATHS = [path for path, _ in _commands(cli)]


@pytest.mark.parametrize(
    "path",
    PATHS,
    ids=[" ".join(p) or "worldtrace" for p in PATHS],
)
def test_every_help_ends_with_its_example(path):
    """Found: `query --help` and `demo --help` had a paragraph after the example, and
    `jobs cancel` an exit-status block in its epilog; docs/cli.md says every help ends with
    its `Example:`. Walks click's command tree, every group and subcommand."""
    r = CliRunner().invoke(cli, [*path, "--help"], obj={}, terminal_width=100)
    assert r.exit_code == 0, r.output
    assert _ends_with_example(r.output), r.output[-600:]


def test_what_moved_out_of_the_epilogs_is_still_said():
    demo = CliRunner().invoke(cli, ["demo", "--help"], obj={}, terminal_width=200).output
    assert "Without --store the demo writes into ./worldtrace-demo" in demo
    cancel = CliRunner().invoke(cli, ["jobs", "cancel", "--help"], obj={}, terminal_width=200)
    assert "Exit status: 0 when the job is cancelled now or was already" in cancel.output
    assert cancel.output.index("Exit status") < cancel.output.index("Options:")


# -- C16: a blank job id --------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory) -> Path:
    """A store holding two jobs submitted by the CLI (queued); each test works on a copy."""
    top = tmp_path_factory.mktemp("two-jobs")
    f = top / "job.yaml"
    f.write_text("name: j\nsandbox: {kind: terminal}\ntasks: [{id: t, actions: ['ls\\n']}]\n")
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    env["WORLDTRACE_STORE"] = str(top / "store")
    (top / "store").mkdir()
    for _ in range(2):
        assert run(env, "jobs", "submit", str(f)).returncode == 0
    return top / "store"


@pytest.mark.parametrize("command", ["show", "cancel", "retry"])
@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_job_id_is_a_usage_error(wt_env, two_jobs, command, blank):
    """Found: `jobs cancel ''` answered `'' matches 2 jobs: ...` (exit 1): a blank id is a
    prefix of every id. As `explain ''`: a usage error naming the argument."""
    shutil.copytree(two_jobs, wt_env["WORLDTRACE_STORE"], dirs_exist_ok=True)
    r = run(wt_env, "jobs", command, blank)
    assert r.returncode == 2, r.stdout + r.stderr
    line = error_line(r)
    assert "JOB_ID" in line and "blank" in line, line
    assert "matches" not in r.stderr + r.stdout
    listed = run(wt_env, "jobs", "list", "--json")
    assert {j["status"] for j in json.loads(listed.stdout)["jobs"]} == {"queued"}


# -- C18: nothing to import --------------------------------------------------------------------
def test_import_with_nothing_to_import_prints_only_why(wt_env, tmp_path):
    """Found: `import emptydir` printed `import: 0 file(s) -> STORE/raw/import` and an
    empty table before the error: as if it had written somewhere."""
    empty = tmp_path / "emptydir"
    empty.mkdir()
    r = run(wt_env, "import", str(empty))
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.splitlines() == [
        f"import: no file to import: {empty} holds no .json, .jsonl, .ndjson or .traj file"
    ]
    assert not (Path(wt_env["WORLDTRACE_STORE"]) / "raw").exists()


# -- C25: redact's one mode --------------------------------------------------------------------
def test_redact_shows_check_as_required(wt_env):
    """Found: `redact` without `--check` is a usage error, yet the help showed `--check`
    as an optional flag. It is the command's one mode: the usage line and the option say
    it is required, and its absence says where redaction happens."""
    r = run(wt_env, "redact", "--help")
    assert r.stdout.startswith("Usage: worldtrace redact --check [OPTIONS] [PATHS]...")
    check = r.stdout[r.stdout.index("  --check") : r.stdout.index("  --tokenizer")]
    assert "[required]" in check, check
    r = run(wt_env, "redact")
    assert r.returncode == 2
    line = error_line(r)
    assert line.startswith("Error: Missing option '--check'. Redaction itself runs at "), line
    r = run(wt_env, "redact", "--check")
    assert r.returncode == 0 and "secret(s) found" in r.stderr, r.stderr


# -- D32: an option of a jobs subcommand given before it ---------------------------------------
def test_an_option_before_the_jobs_subcommand_names_the_order_that_works(wt_env, tmp_path):
    """Found: `jobs --jobs URL list` said `No such option '--jobs'` and nothing more,
    though docs/collect.md warns of exactly this order."""
    db = str(tmp_path / "j.db")
    r = run(wt_env, "jobs", "--jobs", db, "list")
    assert r.returncode == 2
    assert error_line(r) == (
        "Error: No such option '--jobs' for `jobs` itself: it is an option of the "
        f"subcommand, given after it: `jobs list --jobs {db}`."
    )
    r = run(wt_env, "jobs", "--json", "show", "j-1")
    assert "`jobs show --json j-1`" in error_line(r)
    r = run(wt_env, "jobs", "--watch", "show", "j-1")  # not an option of `show` either
    assert error_line(r) == "Error: No such option '--watch'."
    assert run(wt_env, "jobs", "list", "--jobs", db).returncode == 1  # the order that works


# -- collect (real containers) ----------------------------------------------------------------
def _job(tmp_path: Path, job: dict) -> Path:
    f = tmp_path / f"{job['name']}.yaml"
    f.write_text(json.dumps(job))
    return f


@pytest.mark.docker
def test_a_resumed_collect_counts_the_jobs_attempts_in_one_scope(docker_engine, wt_env, tmp_path):
    """Found: after Ctrl-C and `--resume` the progress said `[2/3, ok 1 failed 0 ...]`:
    2/3 counted the episodes of the job, `ok 1` the attempts of this run only. The counts
    are the job's: the attempts an earlier run published count too (and the first line
    says so); only the rate and the ETA are this run's."""
    step = {"keystrokes": "sleep $WT_NAP\n", "duration": 3}
    f = _job(tmp_path, {
        "name": "three", "sandbox": {"kind": "terminal", "docker": {"env": ["WT_NAP"]}},
        "tasks": [{"id": "a", "actions": ["echo a\n"]}, {"id": "b", "actions": [step, "echo b\n"]},
                  {"id": "c", "actions": ["echo c\n"]}],
    })  # fmt: skip
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    proc = subprocess.Popen(
        [WT, "collect", str(f)], env={**wt_env, "WT_NAP": "600"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    job = re.match(r"job (three-[0-9a-f]{8}): 3 episode\(s\);", proc.stdout.readline()).group(1)
    journal = raw / "collect" / job / ".journals" / "b-e0-a1.journal.jsonl"
    wait_until(lambda: journal.exists() and '"header"' in journal.read_text(), timeout=60,
               what="b-e0's start")  # fmt: skip
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "b-e0 attempt 1: incomplete (1 turns): collector stopped" in out, out

    r = run({**wt_env, "WT_NAP": "0"}, "collect", str(f), "--resume", job)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(
        f"job {job}: 3 episode(s), resumed: the counts include the 2 attempt(s) earlier "
        "runs published; if it stops"
    ), lines[0]
    counts = [re.search(r"\[(\d+/\d+, ok \d+  failed \d+(  cut short \d+)?)", x).group(1)
              for x in lines if " attempt " in x]  # fmt: skip
    # a-e0 (ok) and b-e0's cut attempt came before; b-e0 again, then c-e0, in this run
    assert counts == ["2/3, ok 2  failed 0  cut short 1", "3/3, ok 3  failed 0  cut short 1"]


@pytest.mark.docker
def test_an_episode_stopped_at_max_turns_says_so(docker_engine, wt_env, tmp_path):
    """Found: explorer episodes, which end at max_turns, printed `incomplete (N turns)` and
    the summary `(0 failed attempts, 3 incomplete)`: a first-time user reads a problem.
    The lines say why; the record stays `incomplete` without an error."""
    f = _job(tmp_path, {
        "name": "capped", "sandbox": {"kind": "terminal"}, "max_turns": 2,
        "tasks": [{"id": "t", "actions": ["echo 1\n", "echo 2\n", "echo 3\n"]}],
    })  # fmt: skip
    r = run(wt_env, "collect", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    [line] = [x for x in r.stdout.splitlines() if " t-e0 attempt 1: " in x]
    assert "t-e0 attempt 1: incomplete (2 turns): stopped at max_turns  [1/1" in line, line
    assert "1 trajectories (0 failed attempts, 1 incomplete: stopped at max_turns) -> " in r.stdout
    q = run(wt_env, "query", "SELECT status, outcome.error AS error FROM raw_trajectories",
            "--format", "json")  # fmt: skip
    assert json.loads(q.stdout) == [{"status": "incomplete", "error": None}]


@pytest.mark.docker
def test_collect_says_when_processing_will_filter_what_it_recorded(docker_engine, wt_env):
    """Found: the docs' quick runs recorded one turn each, `collect` said `success (1
    turns)`, and `process` then filtered every one (`min_turns`) without a word before."""
    least = FilterConfig.min_turns
    one = run(wt_env, "collect", "--sandbox", "docker", "--keys", "echo hi\\n")
    assert one.returncode == 0, one.stderr
    [note] = [x for x in one.stderr.splitlines() if x.startswith("note: ")]
    assert note == (
        f"note: 1 trajectory(ies) with fewer than {least} turns, which `worldtrace process` "
        "filters by default (filters.min_turns): quick-e0 attempt 1 (1 turns); record more "
        "steps, or process with --set filters.min_turns=1"
    )
    keys = [a for i in range(least) for a in ("--keys", f"echo {i}\\n")]
    enough = run(wt_env, "collect", "--sandbox", "docker", *keys)
    assert enough.returncode == 0, enough.stderr
    assert "note: " not in enough.stderr
