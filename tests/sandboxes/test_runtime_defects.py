"""Terminal and SWE sandboxes at their edges: conditions that would loosen a job's
limits, output past the cap, prompts the shell changed, a shell that exits, env files."""

from __future__ import annotations

import json

import pytest
from worldtrace.collectors.actions import keystrokes, tool
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.sandboxes.base import SandboxError, TaskSpec
from worldtrace.sandboxes.conditions import parse_conditions
from worldtrace.sandboxes.docker import DockerConfig, EnvError
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
from worldtrace.schemas.parsing import parse

CAP = 65536


# -- a condition only tightens the job's limits ------------------------------------------
@pytest.mark.docker
def test_conditions_never_loosen_the_jobs_limits(docker_engine):
    """memory_low 100g under a job's 256m keeps 256m (and says so); likewise pids, cpus."""
    conditions = parse_conditions(
        [{"memory_low": "100g"}, {"pids_low": 1000}, {"cpu_slow": 1.0}]
    ).sample(0)
    d = DockerConfig(memory="256m", pids_limit=64, cpus=0.5, step_timeout=20)
    s = TerminalSandbox(TerminalConfig(docker=d))
    s.reset(TaskSpec("c"), conditions=conditions)
    try:
        hc = docker_engine.api.inspect_container(s.container.id)["HostConfig"]
        assert (hc["Memory"], hc["MemorySwap"]) == (256 << 20, 256 << 20)
        assert (hc["PidsLimit"], hc["NanoCpus"]) == (64, 5 * 10**8)
        info = s.describe()
        assert info["conditions"] == [
            {"kind": "memory_low", "limit": "256m"},
            {"kind": "pids_low", "limit": 64},
            {"kind": "cpu_slow", "cpus": 0.5},
        ]
        assert "Condition: memory is limited to 256 MiB" in info["initial_state"]
    finally:
        s.close()


# -- SWE bash past the output cap ---------------------------------------------------------
@pytest.fixture
def swe(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20, output_cap=CAP), repo=str(repo)))
    s.reset(TaskSpec("cap"))
    yield s
    s.close()


@pytest.mark.docker
@pytest.mark.parametrize(
    "command", ["yes", "head -c 50000000 /dev/zero | tr '\\0' a", "yes & yes & wait"]
)
def test_bash_past_the_cap_stops_the_command_and_invents_no_status(swe, command):
    o = swe.step(tool("bash", command=command))
    assert o.truncated and (o.exit_code, o.is_error) == (None, False)
    assert len(o.text) == CAP
    o = swe.step(tool("bash", command="ps -eo args | grep -c -e '^yes' -e '^head' -e '^tr'"))
    assert o.text == "0\n"  # nothing of it runs on into the next step


@pytest.mark.docker
def test_bash_that_ends_on_its_own_keeps_its_status(swe):
    o = swe.step(tool("bash", command="head -c 1000 /dev/zero | tr '\\0' a; echo no >&2; exit 3"))
    assert (o.exit_code, o.is_error, o.truncated) == (3, True, False)
    a = "a" * 1000  # the engine keeps no order between the two streams
    assert o.text in (a + "no\n", "no\n" + a)  # and the session line is not in them


# -- the terminal: prompts whatever PS1 says, a shell that exits -----------------------------
@pytest.mark.docker
@pytest.mark.parametrize(
    ("keys", "prompt"),
    [("PS1='$ '\n", "$ "), ('PS1="(v) $PS1"\n', "(v) user@sandbox:~$ "), ("PS1='> '\n", "> ")],
)
def test_a_changed_prompt_still_ends_the_step(term, keys, prompt):
    o = term.step(keystrokes(keys, duration=10))
    assert o.text.endswith("\n" + prompt)
    o = term.step(keystrokes("sleep 1; echo done\n", duration=10))
    state = json.loads(o.state_json)
    assert o.text == f"sleep 1; echo done\ndone\n{prompt}"
    assert state["prompt_returned"] and 1 <= state["waited_s"] < 3  # the time waited
    assert "6973" not in state["raw"]  # the mark is ours, not the terminal's
    o = term.step(keystrokes("env | grep -c PROMPT_COMMAND\n", duration=10))
    assert o.text.splitlines()[1] == "0"  # no child of the shell sees it


@pytest.mark.docker
def test_waited_s_is_the_time_waited(term):
    o = term.step(keystrokes("sleep 1\n", duration=10))  # the prompt is back after 1 s
    state = json.loads(o.state_json)
    assert state["prompt_returned"] and 1 <= state["waited_s"] < 3
    o = term.step(keystrokes("sleep 30\n", duration=1.5))  # still running: all of it
    state = json.loads(o.state_json)
    assert not state["prompt_returned"] and 1.5 <= state["waited_s"] < 2.5


@pytest.mark.docker
def test_a_shell_that_exits_ends_the_episode_with_its_last_words(docker_engine, store):
    spec = JobSpec.from_dict(
        {
            "name": "exit",
            "sandbox": {"kind": "terminal", "docker": {"warm": 0}},
            "retries": 1,
            "tasks": [
                {"id": "ex", "actions": ["echo one\n", "exit\n", "echo two\n"]},
                {"id": "exec", "actions": [{"keystrokes": "exec sleep 1\n", "duration": 5}, "ls\n"]},
            ],
        }
    )  # fmt: skip
    result = run_job(spec, store.raw)
    ex, ex2 = sorted(result.trajectories, key=lambda t: t.task.task_id)
    assert result.failed_attempts == 0
    assert (ex.outcome.status, ex.outcome.error) == ("success", "the shell exited (status 0)")
    assert [t.observation.text for t in ex.turns] == [
        "echo one\none\nuser@sandbox:~$ ",
        "exit\nexit\n",
    ]
    assert json.loads(ex.turns[1].observation.state_json)["shell_exited"] == ex.outcome.error
    assert (ex2.outcome.status, len(ex2.turns)) == ("success", 1)
    assert ex2.outcome.error == "the shell exited (status 0)"


@pytest.mark.docker
def test_a_container_killed_under_the_shell_is_an_infrastructure_failure(docker_engine, term):
    term.step(keystrokes("echo before\n"))
    docker_engine.api.kill(term.container.id)
    with pytest.raises(SandboxError, match="the terminal closed: the container"):
        term.step(keystrokes("echo after\n", duration=5))
    assert term.ended is None


# -- docker.env and docker.env_file ----------------------------------------------------------
def test_env_file_reads_export_and_quotes_and_names_the_host_values(tmp_path, monkeypatch):
    monkeypatch.setenv("FROM_HOST", "host-value-123")
    f = tmp_path / "secrets.env"
    f.write_text(
        "# a comment\n\nFILE_SECRET=filesecretvalue-998877\n"
        'export QUOTED="quoted secret value 123"\n'
        "SINGLE='a b'\nRAW=x=y #not a comment\nFROM_HOST\n"
    )
    env = DockerConfig(env=("FROM_HOST",), env_file=str(f)).resolved_env()
    assert env == {
        "FROM_HOST": "host-value-123",
        "FILE_SECRET": "filesecretvalue-998877",
        "QUOTED": "quoted secret value 123",
        "SINGLE": "a b",
        "RAW": "x=y #not a comment",  # docker's rule: the value as written
    }


def test_env_problems_are_one_line_naming_the_file_or_the_names(tmp_path, monkeypatch):
    monkeypatch.delenv("WT_SURELY_UNSET", raising=False)
    missing = str(tmp_path / "nope.env")
    assert DockerConfig(env_file=missing).env_problems() == [
        f"docker.env_file {missing}: cannot read it: No such file or directory"
    ]
    with pytest.raises(EnvError, match=r"docker\.env names variables not set on this host: WT_SU"):
        DockerConfig(env=("WT_SURELY_UNSET",)).run_kwargs()
    garbage = tmp_path / "garbage.env"
    garbage.write_text("OK=1\nghp_notAVariableLine\ns3cr3t value\n")
    [problem] = DockerConfig(env_file=str(garbage)).env_problems()
    assert problem == (
        f"docker.env_file {garbage}:2: a bare name, and this host has no such variable "
        "(write KEY=VALUE)"
    )  # the line may be a pasted secret: never echoed
    garbage.write_text("OK=1\ns3cr3t value\n")
    [problem] = DockerConfig(env_file=str(garbage)).env_problems()
    assert problem == f"docker.env_file {garbage}:2: not KEY=VALUE (a variable name first)"


def test_a_relative_env_file_is_kept_absolute_for_workers_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = parse(DockerConfig, {"env_file": "secrets.env"})
    assert cfg.env_file == str(tmp_path / "secrets.env")
