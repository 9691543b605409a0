"""Hunt 1206q: YAML 1.1's implicit types in a job file.

Found: PyYAML's SafeLoader resolves YAML 1.1 scalars, and `tool_call` caught only the
ValueError of a NaN around `json.dumps(..., sort_keys=True)`. So, in a tool call's
`arguments` (examples/mcp-git.yaml with `{repo_path: ., start_timestamp: 2024-01-01}`),
`worldtrace collect` and `jobs submit --dry-run` printed a 22-frame traceback ending in
`TypeError: Object of type date is not JSON serializable` (a `!!binary` value: bytes;
`{a: 1, on: 2}`: `'<' not supported between instances of 'bool' and 'str'`), and some
values went to the tool as what the user did not write: `{yes: 1, no: 2}` as
`{"true": 1, "false": 2}`, `time: 9:30` (base 60) as 570.

Now the project's loader reads scalars as YAML 1.2's core schema does (`yes`, `on`,
`2024-01-01`, `9:30`, `1_000` are text; booleans are true/false; `00123` is 123), and a
tool call refuses any value JSON cannot hold in one line naming the field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas.parsing import ConfigError, safe_load

from tests.conftest import VENV_BIN

PROJECT = Path(__file__).resolve().parents[2]
GIT_JOB = (PROJECT / "examples" / "mcp-git.yaml").read_text()
GIT_LOG = "{tool: git_log, arguments: {repo_path: ., max_count: 5}}"
assert GIT_LOG in GIT_JOB


def git_job(tmp_path: Path, arguments: str) -> tuple[Path, int]:
    """examples/mcp-git.yaml with its git_log action's arguments replaced: the file, and
    the line of that action (tasks[0].actions[4])."""
    f = tmp_path / "job.yaml"
    f.write_text(GIT_JOB.replace(GIT_LOG, f"{{tool: git_log, arguments: {arguments}}}"))
    line = 1 + next(i for i, ln in enumerate(f.read_text().splitlines()) if "git_log" in ln)
    return f, line


def wt(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "worldtrace"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


REFUSED = [
    (
        "{repo_path: ., start_timestamp: !!timestamp 2024-01-01}",
        "arguments.start_timestamp is a date (YAML's !!timestamp), which JSON has no value "
        "for: write it as a string",
    ),
    (
        "{text: !!binary aGVsbG8=}",
        "arguments.text is binary data (YAML's !!binary), which JSON has no value for: "
        "write it as a string",
    ),
    (
        "{a: 1, 1: 2}",
        "arguments: the key 1 is a number, but a JSON object's keys are strings: quote it ('1')",
    ),
    (
        "{repo_path: ., paths: !!set {a, b}}",
        "arguments.paths is a set (YAML's !!set), which JSON has no value for: write it as a list",
    ),
    (
        "{repo_path: ., filter: {a: [x, {true: 1}]}}",
        "arguments.filter.a[1]: the key true is a boolean, but a JSON object's keys are "
        "strings: quote it ('true')",
    ),
    (  # was "its arguments hold NaN or an infinity" (json.dumps: "Circular reference")
        "&x {repo_path: ., again: [*x]}",
        "arguments.again[0] is the mapping that holds it (an alias inside its own anchor), "
        "which JSON cannot hold",
    ),
    (
        "{repo_path: ., max_count: .nan}",
        "arguments.max_count is nan: JSON has no value for NaN or an infinity",
    ),
]


@pytest.mark.parametrize(("arguments", "problem"), REFUSED, ids=[a for a, _ in REFUSED])
def test_a_value_json_cannot_hold_is_one_line_naming_the_field(tmp_path, arguments, problem):
    """`collect` and `jobs submit --dry-run`: exit 1, one line, file:line and the field
    (before: a traceback for all but the NaN, which did not say where)."""
    f, line = git_job(tmp_path, arguments)
    expected = f"{f}:{line}: tasks[0].actions[4]: tool call git_log: {problem}"
    store = tmp_path / "store"
    for args in (
        ("--store", str(store), "--create", "collect", str(f)),
        ("--store", str(store), "--create", "jobs", "submit", "--dry-run", str(f)),
    ):
        r = wt(*args)
        assert (r.returncode, r.stdout, r.stderr.strip()) == (1, "", expected), (args, r.stderr)


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        # YAML 1.1 read the date as a date (a traceback), `9:30` as 570, `yes`/`no` and
        # `on`/`off` as booleans (keys sent as "true"/"false", or a traceback beside text
        # keys), `1_000` as 1000, `=` as a tag no safe loader builds (a traceback)
        ("{repo_path: ., start_timestamp: 2024-01-01}", {"repo_path": ".", "start_timestamp": "2024-01-01"}),
        # (and what YAML 1.2 and 1.1 read alike stays so)
        (
            "{yes: 1, no: 2, n: 5, f: 0.5, t: true, F: FALSE, z: null, s: text}",
            {"yes": 1, "no": 2, "n": 5, "f": 0.5, "t": True, "F": False, "z": None, "s": "text"},
        ),
        ("{a: 1, on: 2, off: Off}", {"a": 1, "on": 2, "off": "Off"}),
        ("{time: 9:30, at: 2024-01-01 10:00:00}", {"time": "9:30", "at": "2024-01-01 10:00:00"}),
        ("{count: 1_000, flag: yes, mode: =}", {"count": "1_000", "flag": "yes", "mode": "="}),
    ],
)  # fmt: skip
def test_yaml_1_1_only_types_reach_the_tool_as_written(tmp_path, arguments, sent):
    f, _ = git_job(tmp_path, arguments)
    r = wt("--store", str(tmp_path / "store"), "--create", "jobs", "submit", "--dry-run", str(f))
    assert r.returncode == 0 and "mcp-git: 1 episode(s)" in r.stdout, r.stdout + r.stderr
    action = JobSpec.load(f).tasks[0].actions[4]
    assert json.loads(action.arguments_json) == sent
    assert action.text == f"git_log({json.dumps(sent, sort_keys=True, ensure_ascii=False)})"


ECHO = """
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("echo")


@app.tool()
def echo(when: str = "", time: str = "", yes: int = 0, no: int = 0) -> str:
    return json.dumps({"when": when, "time": time, "yes": yes, "no": no}, sort_keys=True)


app.run("stdio")
"""


def test_the_tool_receives_the_text_as_written(tmp_path):
    """A real collect against a real MCP server: before, the job was a traceback (the
    date); without it, the server got `time` 570 and `true`/`false` for `yes`/`no`."""
    server = tmp_path / "echo.py"
    server.write_text(ECHO)
    job = tmp_path / "echo.yaml"
    job.write_text(
        "name: echo\n"
        f"sandbox: {{kind: mcp, command: [{sys.executable}, {server}]}}\n"
        "policy: scripted\nretries: 0\ntasks:\n  - id: t\n    actions:\n"
        "      - {tool: echo, arguments: {when: 2024-01-01, time: 9:30, yes: 1, no: 2}}\n"
    )
    store = tmp_path / "store"
    r = wt("--store", str(store), "--create", "collect", str(job), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = wt(
        "--store", str(store), "query", "--format", "json",
        "SELECT action_text, observation_text FROM raw_turns",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    [turn] = json.loads(r.stdout)
    said = {"no": 2, "time": "9:30", "when": "2024-01-01", "yes": 1}
    assert turn["action_text"] == f"echo({json.dumps(said)})"
    assert json.loads(turn["observation_text"]) == said


def test_the_loader_reads_yaml_1_2_core_scalars_and_leaves_pyyaml_alone():
    doc = (
        "a: [yes, No, on, OFF, y, n, true, True, TRUE, false, tRue]\n"
        "b: [00123, 0o17, 0x1F, +7, 1e-3, .5, 1., .inf, -.Inf, 1_000, 9:30, 2024-01-01]\n"
        "c: [~, null, NULL, nUll, =, '', <<]\n"
    )
    data = safe_load(doc)
    assert data["a"] == ["yes", "No", "on", "OFF", "y", "n", True, True, True, False, "tRue"]
    b = data["b"]
    assert b[:10] == [123, 15, 31, 7, 0.001, 0.5, 1.0, float("inf"), float("-inf"), "1_000"]
    assert b[10:] == ["9:30", "2024-01-01"]
    assert data["c"] == [None, None, None, "nUll", "=", "", "<<"]
    # a `<<` merge is still one, and `yes`/`true` are two keys, not a duplicate
    assert safe_load("d: &d {x: 1}\ne: {<<: *d, y: 2}\nf: {yes: 1, true: 2}")["e"] == {
        "x": 1,
        "y": 2,
    }
    # PyYAML's own SafeLoader is unchanged for the rest of the process
    assert yaml.safe_load("a: [yes, 2024-01-01, 00123]") == {
        "a": [True, __import__("datetime").date(2024, 1, 1), 83]
    }


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("!!bool maybe", "!!bool 'maybe' is no boolean (true or false)"),  # was a KeyError
        ("!!bool yes", "!!bool 'yes' is no boolean (true or false)"),
        ("!!int abc", "!!int 'abc' is no integer (digits, 0o octal, 0x hex)"),  # ValueError
        ("!!float abc", "!!float 'abc' is no number"),  # was a ValueError
        ("9" * 5000, "an integer of 5000 digits, more than Python reads: quote it"),
    ],
)
def test_an_explicit_tag_not_of_its_kind_is_one_line_at_its_line(tmp_path, value, problem):
    f = tmp_path / "job.yaml"
    f.write_text(f"name: j\nsandbox: {{kind: terminal}}\nseed: {value}\n")
    with pytest.raises(ConfigError) as info:
        JobSpec.load(f)
    assert info.value.render() == f"{f}:3: <top>: invalid YAML: {problem}"
    r = wt("--store", str(tmp_path / "store"), "--create", "jobs", "submit", "--dry-run", str(f))
    assert (r.returncode, r.stderr.strip()) == (1, f"{f}:3: <top>: invalid YAML: {problem}")


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("name: !!binary aGk=\nsandbox: {kind: mcp, command: [mcp-server-git]}\n", "1: name"),
        (
            "name: j\nsandbox: {kind: mcp, command: [mcp-server-git], set_env: {A: !!binary aGk=}}\n",
            "2: sandbox.set_env.A",
        ),
    ],
)
def test_a_binary_value_in_a_setting_is_refused_not_decoded(tmp_path, body, where):
    """Before: pydantic's Python rules took the bytes as text, `hi`, in silence."""
    f = tmp_path / "job.yaml"
    f.write_text(body + "policy: scripted\ntasks:\n  - {id: a, actions: [{tool: x}]}\n")
    r = wt("--store", str(tmp_path / "store"), "--create", "jobs", "submit", "--dry-run", str(f))
    problem = "binary data (YAML's !!binary), which JSON has no value for: write it as a string"
    assert (r.returncode, r.stderr.strip()) == (1, f"{f}:{where}: {problem}"), r.stdout
