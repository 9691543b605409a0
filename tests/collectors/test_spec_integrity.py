"""A job file means what it says, once: duplicate YAML keys, a cron that never matches and
a job too big to list are refused at parse time with file, line and key; a resume needs
the spec the job ran (review of collect: items 2, 3, 4, 7)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from worldtrace.collectors.jobs import job_dir, run_job
from worldtrace.collectors.jobspec import JobSpec, ScheduleSpec
from worldtrace.collectors.jobstore import open_job_store
from worldtrace.collectors.scheduler import Scheduler, latest_due, next_after, register
from worldtrace.schemas.parsing import ConfigError, load_yaml

PROJECT = Path(__file__).resolve().parents[2]


def _errors(tmp_path: Path, text: str) -> str:
    f = tmp_path / "job.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(f)
    return str(exc.value)


# -- duplicate keys --------------------------------------------------------------------
def test_a_duplicate_top_level_key_is_refused_with_both_lines(tmp_path):
    """Found: `name: z` then `name: y` ran as job y."""
    text = "name: z\nname: y\nsandbox: {kind: terminal}\ntasks: [{id: a, actions: [ls]}]\n"
    assert _errors(tmp_path, text) == (
        f"{tmp_path / 'job.yaml'}:2: <top>: duplicate key 'name' (first at line 1)"
    )


def test_a_second_tasks_block_is_refused_not_dropped(tmp_path):
    """Found: two `tasks:` blocks ran the second only."""
    text = (
        "name: z\nsandbox: {kind: terminal}\n"
        "tasks:\n  - {id: a, actions: [ls]}\n"
        "tasks:\n  - {id: b, actions: [ls]}\n"
    )
    assert "job.yaml:5: <top>: duplicate key 'tasks' (first at line 3)" in _errors(tmp_path, text)


def test_a_duplicate_key_deep_down_names_its_mapping(tmp_path):
    text = (
        "name: z\nsandbox: {kind: terminal, kind: swe}\n"
        "tasks:\n  - id: a\n    actions: [ls]\n    actions: [pwd]\n"
    )
    assert "job.yaml:2: sandbox: duplicate key 'kind' (first at line 2)" in _errors(tmp_path, text)
    text = "name: z\ntasks:\n  - id: a\n    actions: [ls]\n    actions: [pwd]\n"
    assert "job.yaml:5: tasks[0]: duplicate key 'actions' (first at line 4)" in _errors(
        tmp_path, text
    )


def test_a_merge_key_may_still_be_overridden():
    """`<<: *base` then a key of base is YAML's way to override, not a duplicate."""
    from worldtrace.schemas.parsing import DuplicateKeyError, safe_load

    data = safe_load("base: &b {id: a, n: 1}\nuse:\n  <<: *b\n  n: 2\n")
    assert data["use"] == {"id": "a", "n": 2}
    with pytest.raises(DuplicateKeyError):
        safe_load("use:\n  <<: {n: 1}\n  n: 2\n  n: 3\n")


def test_every_example_still_loads():
    files = sorted((PROJECT / "examples").rglob("*.yaml"))
    assert len(files) > 30
    for f in files:
        load_yaml(f)


# -- a cron that never matches -----------------------------------------------------------
def test_a_cron_that_never_matches_is_refused_at_parse(tmp_path):
    """Found: `0 0 31 2 *` passed `jobs submit --dry-run`, then `jobs submit` crashed with
    croniter's CroniterBadDateError."""
    text = (
        "name: z\nsandbox: {kind: terminal}\n"
        'schedule: {cron: "0 0 31 2 *"}\ntasks: [{id: a, actions: [ls]}]\n'
    )
    assert _errors(tmp_path, text) == (
        f"{tmp_path / 'job.yaml'}:3: schedule.cron: '0 0 31 2 *' never matches"
    )
    ok = text.replace("0 0 31 2 *", "0 0 29 2 *")  # leap days match
    (tmp_path / "ok.yaml").write_text(ok)
    assert JobSpec.load(tmp_path / "ok.yaml").options.schedule.cron == "0 0 29 2 *"


def test_a_stored_cron_that_never_matches_does_not_crash_the_scheduler(store):
    """A schedule stored before the parse-time check: never due, no traceback."""
    from worldtrace.collectors.scheduler import NEVER

    spec = JobSpec.from_dict({"name": "feb", "tasks": [{"id": "t", "actions": ["ls\n"]}]})
    never = ScheduleSpec(cron="0 0 31 2 *")  # built directly: no validation
    spec = dataclasses.replace(spec, options=dataclasses.replace(spec.options, schedule=never))
    now = datetime(2026, 5, 1, tzinfo=timezone.utc)
    assert next_after(never, now) == NEVER
    assert latest_due(never, now, now) == now
    js = open_job_store(store.root / "jobs.db")

    class Clock:
        def now(self):
            return now

    assert register(js, spec, Clock()) == NEVER
    assert Scheduler(js, clock=Clock()).tick() == []


# -- tasks x episodes --------------------------------------------------------------------
def test_the_episodes_of_a_job_are_capped_in_total(tmp_path):
    """Found: 1000 tasks x 100000 episodes was accepted (only episodes <= 100000 was)."""
    tasks = "".join(f"  - {{id: t{i}, actions: [ls]}}\n" for i in range(3))
    text = f"name: z\nsandbox: {{kind: terminal}}\nepisodes: 40000\ntasks:\n{tasks}"
    assert _errors(tmp_path, text) == (
        f"{tmp_path / 'job.yaml'}:3: episodes: 3 tasks x 40000 episodes = 120000 episodes: "
        "at most 100000 a job (split it into several jobs)"
    )
    (tmp_path / "ok.yaml").write_text(text.replace("40000", "33333"))
    assert len(JobSpec.load(tmp_path / "ok.yaml").expand()) == 99999


# -- the spec a job ran ------------------------------------------------------------------
NO_SERVER = {
    "name": "fp", "retries": 0,
    "sandbox": {"kind": "mcp", "command": ["mcp-server-doesnotexist", "{workdir}"]},
    "tasks": [{"id": "t", "actions": [{"tool": "read", "arguments": {"path": "x"}}]}],
}  # fmt: skip
"""A job whose every attempt fails at once (no docker, no server): a run in a second."""


def test_a_run_records_its_spec_and_a_changed_one_is_named(store):
    from worldtrace.collectors.jobs import SPEC_FILE, spec_changes

    spec = JobSpec.from_dict(NO_SERVER)
    run_job(spec, store.raw, job_id="fp-00000000")
    out = job_dir(store.raw, "fp-00000000")
    text = (out / SPEC_FILE).read_text()
    doc = json.loads(text)
    assert len(doc["sha256"]) == 64 and {"tasks", "sandbox.command"} <= doc["parts"].keys()
    # found: the record kept the spec as written, secrets of its actions and settings too
    assert "mcp-server-doesnotexist" not in text and '"path"' not in text
    assert spec_changes(out, JobSpec.from_dict(dict(reversed(NO_SERVER.items())))) is None
    more = JobSpec.from_dict({**NO_SERVER, "retries": 3, "priority": 5})  # how a run goes
    assert spec_changes(out, more) is None
    changed = JobSpec.from_dict({**NO_SERVER, "episodes": 3, "sandbox": {
        **NO_SERVER["sandbox"], "call_timeout": 7}})  # fmt: skip
    assert spec_changes(out, changed) == ["episodes", "sandbox.call_timeout"]
    run_job(changed, store.raw, job_id="fp-00000000")  # the API keeps the first record
    assert json.loads((out / SPEC_FILE).read_text()) == doc


def test_an_alias_that_closes_a_cycle_is_an_error_not_a_recursion(tmp_path):
    """Found while here: `a: &x [*x]` made the line map recurse until RecursionError."""
    errors = _errors(tmp_path, "a: &x [*x]\n")
    assert "job.yaml:1: a: unknown key" in errors


def test_an_env_file_or_variable_missing_here_is_refused_when_the_job_loads(tmp_path, monkeypatch):
    """Found: `docker.env_file` naming no file (or a relative one, read from the worker's
    directory) and a `docker.env` name unset on this host were accepted by `jobs submit`
    and `--dry-run`; every attempt then failed at its start with a raw FileNotFoundError,
    or started without the variable."""
    monkeypatch.delenv("WT_TEST_UNSET_VAR", raising=False)
    job = tmp_path / "e.yaml"
    job.write_text(
        "name: e\nsandbox:\n  kind: terminal\n  docker:\n"
        f"    env_file: {tmp_path / 'none.env'}\n    env: [WT_TEST_UNSET_VAR]\n"
        "tasks: [{id: t, actions: ['ls\\n']}]\n"
    )
    monkeypatch.setenv("WT_TEST_UNSET_VAR", "x")
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(job).check_store(tmp_path / "store")
    [line] = exc.value.render().splitlines()
    assert line == (
        f"{job}:5: sandbox.docker.env_file: docker.env_file {tmp_path / 'none.env'}: cannot "
        "read it: No such file or directory"
    )
    (tmp_path / "none.env").write_text("export A=1\nB='two words'\n")
    monkeypatch.delenv("WT_TEST_UNSET_VAR")
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(job).check_store(tmp_path / "store")
    assert exc.value.render().endswith(
        "sandbox.docker.env: docker.env names variables not set on this host: WT_TEST_UNSET_VAR"
    )
    monkeypatch.setenv("WT_TEST_UNSET_VAR", "x")
    JobSpec.load(job).check_store(tmp_path / "store")  # all there: the job loads


def test_a_tool_call_with_nan_is_refused_where_it_is_written(tmp_path):
    """Found: `{tool: echo, arguments: {x: .nan}}` was recorded as `{"x": NaN}`, which is
    not JSON (the server received `null`); `validate` passed such a record."""
    from worldtrace.schemas import Action, Observation, Trajectory, Turn, validate_dict

    f = tmp_path / "job.yaml"
    f.write_text(
        "name: nan\nsandbox: {kind: mcp, command: [mcp-server-time]}\n"
        "tasks:\n  - id: t\n    actions:\n      - {tool: get_current_time, arguments: {x: .nan}}\n"
    )
    with pytest.raises(ConfigError) as refused:
        JobSpec.load(f)
    assert "tasks[0].actions[0]" in str(refused.value) and "NaN" in str(refused.value)
    turn = Turn(
        0, Action("tool_call", "f()", name="f", arguments_json='{"x": NaN}'), Observation("o")
    )
    problems = validate_dict(Trajectory("mcp", turns=[turn]).with_id().to_dict())
    assert [(p.field, p.message) for p in problems] == [
        ("turns[0].action.arguments_json", "invalid JSON: NaN is not JSON")
    ]
