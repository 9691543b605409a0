"""A job file's sandbox, policy and conditions blocks took loose types a Python cast
would (closing note of 2026-12-05, left item): `warm: true` ran as one warm container,
`pids_limit: "64"` as 64, `read_only: "no"` as... a read-only root? (pydantic's lax bool
reads "no" as False, "yes"/"on" as True), where the job's own counts (`episodes: "3"`)
were refused. Every block is now read with JSON's types, strictly: a job file says what
it means or is refused, naming the line and the key. Real CLI, real files."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig
from worldtrace.schemas.parsing import ConfigError, parse

TASKS = "tasks: [{id: t, instruction: x, actions: ['echo hi\\n']}]\n"


def submit(env: dict, tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    f = tmp_path / "job.yaml"
    f.write_text(text)
    return subprocess.run(
        ["worldtrace", "jobs", "submit", "--dry-run", str(f)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("block", "key", "message"),
    [
        ("sandbox: {kind: terminal, docker: {warm: true}}", "sandbox.docker.warm", "Input should be a valid integer"),
        ('sandbox: {kind: terminal, docker: {pids_limit: "64"}}', "sandbox.docker.pids_limit", "Input should be a valid integer"),
        ("sandbox: {kind: terminal, docker: {read_only: 'no'}}", "sandbox.docker.read_only", "Input should be a valid boolean"),
        ('sandbox: {kind: terminal, docker: {cpus: "1.5"}}', "sandbox.docker.cpus", "Input should be a valid number"),
        ("sandbox: {kind: terminal, docker: {output_cap: 4096.0}}", "sandbox.docker.output_cap", "Input should be a valid integer"),
        ("sandbox: terminal\nconditions: [{pids_low: '24'}]", "conditions[0].pids_low.limit", "Input should be a valid integer"),
    ],
)  # fmt: skip
def test_a_loose_type_in_a_block_is_refused_with_its_line_and_key(
    tmp_path, wt_env, block, key, message
):
    r = submit(wt_env, tmp_path, f"name: loose\n{block}\n{TASKS}")
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = 3 if key.startswith("conditions") else 2
    assert r.stderr.endswith(f"job.yaml:{line}: {key}: {message}\n"), r.stderr


def test_the_types_a_job_file_means_are_taken():
    """An integer is a float (`cpus: 2`), a list a tuple, a string a command line."""
    c = parse(DockerConfig, {"cpus": 2, "warm": 0, "read_only": True, "env": ["HOME"]})
    assert (c.cpus, c.warm, c.read_only, c.env) == (2.0, 0, True, ("HOME",))
    t = parse(TerminalConfig, {"shell": ["/bin/sh", "-i"]})
    assert t.shell == ("/bin/sh", "-i")
    assert parse(TerminalConfig, {"shell": "/bin/sh -i"}).shell == ("/bin/sh", "-i")


def test_a_value_json_has_no_type_for_is_judged_by_its_field():
    """A YAML date is no JSON value: read by pydantic's own rules, still no string."""
    with pytest.raises(ConfigError, match="image: Input should be a valid string"):
        parse(DockerConfig, {"image": datetime.date(2026, 12, 6)})
    with pytest.raises(ConfigError, match="warm: Input should be a valid integer"):
        parse(DockerConfig, {"warm": True})
