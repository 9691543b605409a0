"""A task without an instruction (12-04b): a job whose policy is a model (`openai`)
loaded a task with no `instruction`, an empty one or blanks only, and the model was then
asked to do nothing. Such a task is refused when the job file is read, naming the file,
line, task and field; a policy that is given its actions (scripted, replay) or explores
(explorer) needs none, and its tasks load without one as before."""

from __future__ import annotations

import subprocess

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.schemas.parsing import ConfigError

OPENAI = 'policy: {kind: openai, base_url: "http://127.0.0.1:9/v1", model: m}\n'
TASKS = """\
tasks:
  - id: none
  - id: empty
    instruction: ""
  - id: blank
    instruction: "  \\n\\t"
  - id: fine
    instruction: List the files.
"""


def refusal(path) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        JobSpec.load(path)
    return str(exc.value).splitlines()


def test_a_model_policy_needs_every_task_s_instruction(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(f"name: ask\n{OPENAI}{TASKS}")
    why = "policy openai needs the task's instruction (what its model is asked to do)"
    assert refusal(f) == [
        f"{f}:4: tasks[0].instruction: {why}; task 'none' has none",
        f"{f}:6: tasks[1].instruction: {why}; task 'empty' has none",
        f"{f}:8: tasks[2].instruction: {why}; task 'blank' has none",
    ]
    f.write_text(f"name: ask\n{OPENAI}tasks: [{{id: fine, instruction: List the files.}}]\n")
    assert JobSpec.load(f).tasks[0].instruction == "List the files."


def test_an_instruction_that_is_no_string_is_refused(tmp_path):
    """`instruction: false` (or 0, or []) was taken as no instruction, without a word."""
    f = tmp_path / "job.yaml"
    for value in ("false", "0", "[]", "5"):
        f.write_text(f"name: x\ntasks:\n  - id: t\n    instruction: {value}\n    actions: [ls]\n")
        assert refusal(f) == [f"{f}:4: tasks[0].instruction: must be a string"], value


def test_given_or_explored_actions_need_no_instruction():
    scripted = JobSpec.from_dict({"name": "s", "tasks": [{"id": "t", "actions": ["ls\n"]}]})
    assert scripted.tasks[0].instruction == ""
    blank = JobSpec.from_dict(
        {"name": "s", "tasks": [{"id": "t", "instruction": " ", "actions": ["ls\n"]}]}
    )
    assert blank.tasks[0].instruction == " "  # recorded as written
    replay = JobSpec.from_dict(
        {"name": "r", "policy": "replay", "tasks": [{"id": "t", "replay": "ab"}]}
    )
    assert replay.tasks[0].instruction == ""  # the recording's instruction is used
    explorer = JobSpec.from_dict(
        {"name": "e", "sandbox": {"kind": "mcp", "command": ["mcp-server-everything", "stdio"]},
         "policy": "explorer", "tasks": [{"id": "t"}]}
    )  # fmt: skip
    assert explorer.tasks[0].instruction == ""


def test_submit_and_collect_refuse_it_naming_the_line(tmp_path, wt_env):
    f = tmp_path / "ask.yaml"
    f.write_text(f"name: ask\n{OPENAI}tasks:\n  - {{id: q, instruction: ' '}}\n")
    line = (
        f"{f}:4: tasks[0].instruction: policy openai needs the task's instruction (what its "
        "model is asked to do); task 'q' has none"
    )
    for command in (["jobs", "submit", "--dry-run"], ["collect"]):
        r = subprocess.run(
            ["worldtrace", *command, str(f)], capture_output=True, text=True, env=wt_env
        )
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert r.stderr.strip() == line, command
