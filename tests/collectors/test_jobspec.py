"""Job files are validated completely at submit: every bad file is refused naming file,
line and key (issue: collection core, "Found" items)."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.jobspec import JobSpec, parse_every
from worldtrace.schemas.parsing import ConfigError

GOOD = """\
name: good
sandbox:
  kind: terminal
  docker:
    memory: 256m
tasks:
  - id: a
    actions: ["ls\\n", {keystrokes: C-c, duration: 0.2}]
"""


def _errors(tmp_path, text: str) -> str:
    f = tmp_path / "job.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    return str(exc.value)


@pytest.mark.parametrize(
    ("line", "value", "expected"),
    [
        (
            2,
            "sandbox:\n  kind: nonexistent",
            "job.yaml:3: sandbox.kind: unknown sandbox kind 'nonexistent'",
        ),
        (4, "    bogus: 1", "job.yaml:5: sandbox.docker.bogus: unknown key"),
        (4, "    step_timeout: -5", "sandbox.docker.step_timeout: Input should be greater than 0"),
        # found 12-04: `.nan` was told `less than or equal to 3600`; `.inf` overflows waits
        (4, "    step_timeout: .nan", "sandbox.docker.step_timeout: Input should be a finite"),
        (4, "    cpus: .inf", "sandbox.docker.cpus: Input should be a finite number"),
        (
            4,
            "    pids_limit: -1",
            "sandbox.docker.pids_limit: Input should be greater than or equal to 16",
        ),
        (4, '    memory: "0"', "sandbox.docker.memory: memory '0' is below the floor of 16m"),
        (4, "    cpus: 0", "sandbox.docker.cpus: Input should be greater than 0"),
        (0, "max_turns: -1", "job.yaml:1: max_turns: Input should be greater than or equal to 1"),
        (0, "episodes: 0", "episodes: Input should be greater than or equal to 1"),
        # a quoted or boolean count is a mistake, not a number (`true` ran 1 episode)
        (0, 'episodes: "3"', "job.yaml:1: episodes: Input should be a valid integer"),
        (0, "episodes: true", "job.yaml:1: episodes: Input should be a valid integer"),
        (0, "retries: yes", "job.yaml:1: retries: Input should be a valid integer"),
    ],
)
def test_bad_values_are_refused_naming_line_and_key(tmp_path, line, value, expected):
    lines = GOOD.splitlines()
    if line == 2:
        lines[1:3] = value.splitlines()
    elif line == 4:
        lines[4] = value
    else:
        lines.insert(0, value)
    assert expected in _errors(tmp_path, "\n".join(lines) + "\n")


def test_action_fields_are_checked_against_the_kind(tmp_path, repo):
    text = f"""\
name: swe
sandbox: {{kind: swe, repo: {repo}}}
tasks:
  - id: t
    actions:
      - {{tool: read, args: {{path: pkg/calc.py}}}}
      - {{tool: read, arguments: {{file: pkg/calc.py}}}}
      - {{tool: nope, arguments: {{}}}}
      - "ls\\n"
  - id: t
    actions: [{{tool: bash, arguments: {{command: ls}}}}]
"""
    err = _errors(tmp_path, text)
    assert "job.yaml:6: tasks[0].actions[0]: unknown action field(s) args" in err
    assert (
        "job.yaml:7: tasks[0].actions[1].arguments: read: 'path' is a required property; Additional properties are not allowed ('file' was unexpected)"
        in err
    )
    assert "tasks[0].actions[2].tool: unknown tool 'nope'" in err
    assert "tasks[0].actions[3]: sandbox kind swe takes tool_call actions, not keystrokes" in err
    assert "tasks[1].id: duplicate task id 't'" in err


@pytest.mark.parametrize("path", ["/var/run", "/", "/proc", "/var/run/../run"])
def test_system_paths_are_refused_as_repositories(tmp_path, path):
    err = _errors(
        tmp_path,
        f"name: x\nsandbox: {{kind: swe, repo: {path}}}\ntasks: [{{id: t, actions: [{{tool: bash, arguments: {{command: ls}}}}]}}]\n",
    )
    assert "sandbox.repo:" in err and "refused for sandboxes" in err


def test_a_repository_inside_the_store_is_refused(store, repo):
    spec = JobSpec.from_dict(
        {"name": "x", "sandbox": {"kind": "swe", "repo": str(repo)},
         "tasks": [{"id": "t", "actions": [{"tool": "bash", "arguments": {"command": "ls"}}]}]}
    )  # fmt: skip
    spec.check_store(store.root)  # elsewhere: fine
    with pytest.raises(ConfigError, match="overlaps the store"):
        spec.check_store(repo.parent)


def test_policy_settings_and_schedule_are_validated(tmp_path):
    err = _errors(
        tmp_path,
        "name: x\npolicy: {kind: openai, model: m, temperature: 9}\nschedule: {every: 0m}\n"
        "tasks: [{id: t}]\n",
    )
    assert "policy.base_url: missing required key" in err
    assert "policy.temperature: Input should be less than or equal to 2" in err
    assert "schedule.every: not an interval: '0m'" in err
    assert "schedule: a schedule needs exactly one of cron or every" in _errors(
        tmp_path, "name: x\nschedule: {}\ntasks: [{id: t, actions: ['ls\\n']}]\n"
    )
    assert parse_every("15m").total_seconds() == 900


def test_yaml_syntax_error_names_the_line(tmp_path):
    err = _errors(tmp_path, "name: x\nfoo: bar: baz\n")
    assert "job.yaml:2: <top>: invalid YAML: mapping values are not allowed here" in err


def test_round_trip_through_the_job_store_form(tmp_path, repo):
    f = tmp_path / "job.yaml"
    f.write_text(GOOD)
    spec = JobSpec.load(f)
    again = JobSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec
    assert [e.episode_id for e in spec.expand()] == ["a-e0"]
    assert spec.sandbox.config.docker.memory == "256m"
    assert spec.expand()[0].seed == JobSpec.from_dict(json.loads(spec.to_json())).expand()[0].seed


def test_tool_constructor_takes_an_argument_called_name():
    a = tool("create_entity", name="Alice", kind="person")
    assert a.name == "create_entity"
    assert json.loads(a.arguments_json) == {"kind": "person", "name": "Alice"}


def test_every_example_job_file_is_valid(monkeypatch):
    """examples/ is documentation users copy: every file must parse as it stands."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # relative repository paths are relative to the project
    files = sorted((root / "examples").glob("*.yaml"))
    assert len(files) > 30
    kinds = {JobSpec.load(f).sandbox.kind for f in files}
    assert kinds == {"terminal", "swe", "mcp", "web", "android"}


# -- policy: replay is resolved against the store at submit ---------------------------
def _replay_job(tmp_path, kind: str, prefixes: list[str]) -> JobSpec:
    sandbox = {"terminal": "{kind: terminal}", "swe": f"{{kind: swe, repo: {tmp_path}/repo}}"}[kind]
    tasks = "".join(f"  - id: r{i}\n    replay: {p!r}\n" for i, p in enumerate(prefixes))
    f = tmp_path / "job.yaml"
    f.write_text(f"name: r\nsandbox: {sandbox}\npolicy: replay\ntasks:\n{tasks}")
    return JobSpec.load(f)


def _publish(store, records) -> None:
    from worldtrace.schemas.store import ShardWriter

    with ShardWriter(store.raw / "import" / "synthetic") as w:
        w.write(records)


def test_replay_prefixes_must_name_one_raw_trajectory(tmp_path, store, corpus):
    from collections import Counter

    _publish(store, [*corpus, corpus[1]])  # a copy of one id counts once
    ids = [t.trajectory_id for t in corpus]
    first, n = Counter(i[0] for i in ids).most_common(1)[0]  # 40 ids: some share a digit
    terminal = corpus[1]
    assert terminal.domain == "terminal" and n > 1
    spec = _replay_job(tmp_path, "terminal", ["ffffffff", first, terminal.trajectory_id[:8]])
    with pytest.raises(ConfigError) as exc:
        spec.check_store(store.root)
    assert str(exc.value).splitlines() == [
        f"{tmp_path}/job.yaml:6: tasks[0].replay: 'ffffffff' matches no raw trajectory",
        f"{tmp_path}/job.yaml:8: tasks[1].replay: {first!r} matches {n} raw trajectories: "
        "give more of the id",
    ]
    _replay_job(tmp_path, "terminal", [terminal.trajectory_id[:8]]).check_store(store.root)
    with pytest.raises(ConfigError, match="'ab' matches no raw trajectory"):
        _replay_job(tmp_path, "terminal", ["ab"]).check_store(tmp_path / "no-store-yet")


def test_a_trajectory_the_sandbox_kind_cannot_replay_is_refused(tmp_path, store, corpus, repo):
    import dataclasses

    mcp = next(t for t in corpus if t.domain == "mcp")
    swe = next(t for t in corpus if t.domain == "swe")
    term = next(t for t in corpus if t.domain == "terminal")
    bad = dataclasses.replace(swe.turns[0].action, name="git_status")
    calls_git = [dataclasses.replace(swe.turns[0], action=bad), *swe.turns[1:]]
    # recorded where the tool existed (its action space lists it): refused
    space = json.dumps([*json.loads(swe.system.action_space or "[]"), {"name": "git_status"}])
    swe_other = dataclasses.replace(
        swe, system=dataclasses.replace(swe.system, action_space=space), turns=calls_git
    ).with_id()
    # the agent's own unknown tool (its recording's action space lacks it too): the
    # sandbox's error answer is what the replay records again (12-06q)
    swe_unknown = dataclasses.replace(swe, turns=calls_git).with_id()
    typed = dataclasses.replace(
        term, turns=[dataclasses.replace(term.turns[0], action=tool("bash", command="ls"))]
    ).with_id()
    _publish(store, [mcp, swe, swe_other, swe_unknown, term, typed])

    def refusal(kind: str, t) -> str:
        with pytest.raises(ConfigError) as exc:
            _replay_job(tmp_path, kind, [t.trajectory_id[:10]]).check_store(store.root)
        return str(exc.value)

    assert refusal("terminal", mcp) == (
        f"{tmp_path}/job.yaml:6: tasks[0].replay: {mcp.trajectory_id} was recorded in domain "
        "mcp; this job (sandbox kind terminal) records terminal: replay it with the kind "
        "that recorded it"
    )
    assert refusal("terminal", typed).endswith(
        f"tasks[0].replay: {typed.trajectory_id} has tool_call actions; sandbox kind "
        "terminal takes keystrokes actions"
    )
    assert refusal("swe", swe_other).endswith(
        f"tasks[0].replay: {swe_other.trajectory_id} calls tool 'git_status', which sandbox "
        "kind swe does not have (tools: bash, edit, read)"
    )
    _replay_job(tmp_path, "swe", [swe.trajectory_id[:10]]).check_store(store.root)
    _replay_job(tmp_path, "terminal", [term.trajectory_id[:10]]).check_store(store.root)
    _replay_job(tmp_path, "swe", [swe_unknown.trajectory_id[:10]]).check_store(store.root)


def test_submit_refuses_an_unknown_replay_naming_its_line(tmp_path, wt_env):
    import subprocess

    f = tmp_path / "replay.yaml"
    f.write_text("name: r\npolicy: replay\ntasks:\n  - {id: r1, replay: ffffff}\n")
    r = subprocess.run(
        ["worldtrace", "jobs", "submit", "--dry-run", str(f)],
        capture_output=True, text=True, env=wt_env,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout
    assert r.stderr.strip() == f"{f}:4: tasks[0].replay: 'ffffff' matches no raw trajectory"
