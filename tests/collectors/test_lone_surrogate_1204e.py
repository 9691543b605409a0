"""Found (12-04 web hunt, and again through a job file): a string holding a lone UTF-16
surrogate (half an emoji: a JSON `\\ud83d` escape) in what an episode records ended the
whole `collect` run with a traceback. The journal took it (JSON escapes it), the
trajectory's content hash could not (no UTF-8 for it); the attempt's error handler then
finished the recorder again, which reopened the journal for writing from its start:
`journal has no header`, the episode's record lost and the run crashed.

Three owners: a job file holding one is refused, naming the field; the recorder stores
what it is handed as UTF-8 can (U+FFFD, as a terminal draws it), whichever sandbox or
policy it came from; and a journal is never reopened from its start."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.collectors.recorder import Recorder, journal_to_trajectory
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.schemas import Agent, Outcome, Source, Store

from ..worldtrace.test_query import run_cli

HALF = "\ud83d"  # the first half of 😀


@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=10), repo=str(repo)))
    yield s
    s.close()


def recorder(sandbox, tmp_path) -> Recorder:
    return Recorder(
        sandbox, tmp_path / "journals", source=Source(episode_id="half", attempt=1),
        agent=Agent(name="t"), task_id="t", instruction="echo half an emoji",
    )  # fmt: skip


def test_a_lone_surrogate_in_a_turn_is_recorded_as_utf8_can(swe, tmp_path):
    rec = recorder(swe, tmp_path)
    rec.header(swe.reset(TaskSpec("t")))
    rec.step(tool("bash", command=f"echo '{HALF}'"), reasoning=f"say {HALF}")
    t = rec.finish(Outcome(status="success"))
    [turn] = t.turns
    assert json.loads(turn.action.arguments_json)["command"] == "echo '\ufffd'"
    assert turn.reasoning == "say \ufffd"
    assert t.trajectory_id  # the content hash took it


def test_finishing_twice_keeps_the_journal(swe, tmp_path):
    """The error handler finishes a recorder whose own finish failed: the journal it
    wrote stays, and the last end is the one that counts."""
    rec = recorder(swe, tmp_path)
    rec.header(swe.reset(TaskSpec("t")))
    rec.step(tool("bash", command="echo one"))
    rec.finish(Outcome(status="success"))
    t = rec.finish(Outcome(status="error", error="ValueError: ours"))
    assert [x.observation.text for x in t.turns] == ["one\n"]
    assert t.outcome.status == "error" and journal_to_trajectory(rec.path).turns


def test_a_job_file_holding_one_is_refused_naming_the_field(tmp_path, repo):
    job = tmp_path / "half.json"
    job.write_text(json.dumps({
        "name": "half", "sandbox": {"kind": "swe", "repo": str(repo)},
        "tasks": [{"id": "t", "instruction": "x",
                   "actions": [{"tool": "bash", "arguments": {"command": f"echo {HALF}"}}]}],
    }))  # fmt: skip
    r = run_cli(Store.at(tmp_path / "store"), "collect", "--create", str(job))
    assert r.exit_code == 1, r.output  # a job file's error, as every other
    assert "tasks[0].actions[0].arguments.command: a lone surrogate" in r.output, r.output
    assert "Traceback" not in r.output
