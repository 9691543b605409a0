"""`worldtrace collect` tells the truth about how a run ended: the reason of every failed
attempt, exit status 3 when an episode failed for good, and after an interrupt or a
SIGKILL a resume command that works (`--resume JOB_ID`). Real CLI, real containers."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from worldtrace.schemas import read_records

from ..conftest import remove_containers, wait_until

EXIT_EPISODES_FAILED = 3


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def job_file(tmp_path: Path, job: dict) -> Path:
    f = tmp_path / f"{job['name']}.yaml"
    f.write_text(json.dumps(job))
    return f


def published(raw: Path) -> dict[tuple[str, int], object]:
    return {(t.source.episode_id, t.source.attempt): t for t in read_records(raw)}


SETUP_FAILS = "SandboxError: task setup failed (7): exit 7"
"""Ours to report: the task could not be set up (a shell that exits is the agent's
own step, recorded: `test_runtime_defects`)."""


@pytest.mark.docker
def test_failed_attempts_print_their_reason_and_a_failed_episode_exits_3(
    docker_engine, wt_env, tmp_path
):
    """Found: `bad-e0 attempt 1: error (1 turns)` with the reason only in the store, and
    exit 0 although bad-e0 failed for good (only "every attempt failed" exited 1)."""
    f = job_file(tmp_path, {
        "name": "mixed", "sandbox": "terminal", "retries": 1,
        "tasks": [{"id": "ok", "actions": ["echo hi\n"]},
                  {"id": "bad", "setup": ["exit 7"], "actions": ["echo never\n"]}],
    })  # fmt: skip
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for attempt in (1, 2):
        [line] = [ln for ln in lines if f" bad-e0 attempt {attempt}: error (" in ln]
        assert f"turns): {SETUP_FAILS}" in line, line
    assert any(" ok-e0 attempt 1: success (1 turns)  [" in ln for ln in lines), r.stdout
    assert "2 failed attempts" in lines[-1]
    assert "1 episode(s) failed for good (every attempt failed" in r.stderr
    assert r.stderr.rstrip().endswith(": bad-e0"), r.stderr
    got = published(Path(wt_env["WORLDTRACE_STORE"]) / "raw")
    assert got[("bad-e0", 2)].outcome.error == SETUP_FAILS  # what was printed is what is kept


NO_SERVER = {
    "name": "nomcp", "retries": 0,
    "sandbox": {"kind": "mcp", "command": ["mcp-server-doesnotexist", "{workdir}"]},
    "tasks": [{"id": "t", "actions": [{"tool": "read", "arguments": {"path": "x"}}]}],
}  # fmt: skip
"""A job whose MCP server command does not exist: every attempt fails at its start."""


def test_collect_of_a_scheduled_job_file_says_it_runs_it_once_now(wt_env, tmp_path):
    """Found (review, 12-04): `collect` of a job file with `schedule: {every: 1h}` ran
    it once and said nothing of the schedule, which only `jobs submit` registers: a
    user expecting hourly runs got one, in silence."""
    f = job_file(tmp_path, {**NO_SERVER, "name": "hourly", "schedule": {"every": "1h"}})
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr  # it ran, once
    assert r.stderr.splitlines()[0] == (
        f"note: {f} has a schedule; collect runs the job once, now "
        f"(`worldtrace jobs submit {f}` registers it for `worldtrace scheduler`)"
    ), r.stderr
    # found (12-04 evening): a refused --resume said first that the job runs now
    r = wt(wt_env, "collect", str(f), "--resume", "no-such-job")
    assert r.returncode == 1 and "has a schedule" not in r.stderr, r.stderr
    assert "no-such-job" in r.stderr


def test_a_missing_mcp_server_is_named_on_the_attempt_line_and_exits_3(wt_env, tmp_path):
    f = job_file(tmp_path, NO_SERVER)
    r = wt(wt_env, "collect", str(f))
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if " t-e0 attempt 1: " in ln]
    assert (
        "error (0 turns): SandboxConfigError: MCP server command 'mcp-server-doesnotexist' " in line
    )
    assert "1 episode(s) failed for good" in r.stderr and "t-e0" in r.stderr


def test_a_failed_attempt_on_a_terminal_lists_its_reason(wt_env, tmp_path):
    """On a terminal the attempts are listed after the progress bar: with the reason too."""
    from ..collectors.test_live_views import Terminal

    f = job_file(tmp_path, NO_SERVER)
    term = Terminal(["worldtrace", "collect", str(f)], wt_env)
    assert term.wait() == EXIT_EPISODES_FAILED, term.text
    text = " ".join(term.text.split())  # the terminal may wrap the long line
    assert "t-e0 attempt 1: error (0 turns): SandboxConfigError: MCP server command" in text, text


def slow_job(step_s: float, sleep: int | str = 600) -> dict:
    """Two episodes: `a-e0`, a step in flight for `step_s` seconds (or until its
    `sleep` ends: seconds, or a variable the sandbox takes from the collector's
    environment) and one after it, then `b-e0`."""
    sandbox: dict = {"kind": "terminal"}
    if isinstance(sleep, str):
        sandbox["docker"] = {"env": [sleep]}
        sleep = f"${sleep}"
    return {
        "name": "slow",
        "sandbox": sandbox,
        "tasks": [
            # a step left after the one in flight: a stop in the last ends the episode
            {
                "id": "a",
                "actions": [{"keystrokes": f"sleep {sleep}\n", "duration": step_s}, "echo a\n"],
            },
            {"id": "b", "actions": ["echo b\n"]},
        ],
    }


def started(proc: subprocess.Popen, raw: Path, episode: str) -> str:
    """The job id `collect` printed first, once `episode` has journaled its start."""
    first = proc.stdout.readline()
    m = re.match(
        r"job (slow-[0-9a-f]{8}): 2 episode\(s\); if it stops, finish it with: (.*)$", first
    )
    assert m, first
    job = m.group(1)
    journal = raw / "collect" / job / ".journals" / f"{episode}-a1.journal.jsonl"
    wait_until(lambda: journal.exists() and '"header"' in journal.read_text(), timeout=60,
               what=f"{episode}'s start")  # fmt: skip
    return job


@pytest.mark.docker
def test_a_killed_collect_is_resumed_with_the_command_it_printed(docker_engine, wt_env, tmp_path):
    """Found: after `kill -9` the journal stayed forever, gc said `collect` of its job
    would publish it (a new `collect` makes a new job id: never), and there was no way to
    resume. Now: the start line prints the resume command; while the run lives a resume
    is refused and gc says the journal is in progress; after the kill gc names the
    resume, and the resume publishes the journal (incomplete, with the reason) and runs
    the episode that never started."""
    # killed long before the step ends; the resume's step ends at once: a resume needs
    # the job file the job ran from, so the nap comes from the environment (the job
    # keeps the variable's name, not its value)
    f = job_file(tmp_path, slow_job(step_s=60, sleep="WT_NAP"))
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    proc = subprocess.Popen(
        ["worldtrace", "collect", str(f)],
        env={**wt_env, "WT_NAP": "600"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        job = started(proc, raw, "a-e0")
        resume = ["collect", str(f), "--resume", job]
        busy = wt({**wt_env, "WT_NAP": "0"}, *resume)
        assert busy.returncode == 1
        assert f"job {job} is being run by another process" in busy.stderr, busy.stderr
        journal = raw / "collect" / job / ".journals" / "a-e0-a1.journal.jsonl"
        dry = wt(wt_env, "gc", "--dry-run", "--no-containers")
        [line] = [ln for ln in dry.stdout.splitlines() if str(journal) in ln]
        assert line.startswith("kept") and "an attempt in progress" in line, line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert journal.exists() and not list((raw / "collect" / job).glob("*.parquet"))

    dry = wt(wt_env, "gc", "--dry-run", "--no-containers")
    [line] = [ln for ln in dry.stdout.splitlines() if str(journal) in ln]
    assert f"`worldtrace collect JOB_FILE --resume {job}` publishes it as it stands" in line
    # found: `stats` and `doctor` said nothing of it (only gc did); doctor names it
    doc = wt(wt_env, "doctor", "--store-only").stdout
    [line] = [ln for ln in doc.splitlines() if str(journal) in ln]
    assert "stopped attempt" in line and "stopped before publishing it" in line, doc
    assert f"--resume {job}" in doc

    r = wt({**wt_env, "WT_NAP": "0"}, *resume)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"job {job}: 2 episode(s)")
    assert (
        " a-e0 attempt 1: incomplete (0 turns): collector stopped before the episode ended  "
        "[published from the journal a stopped run left]"
    ) in r.stdout
    # found: the cut-short attempt counted as the episode's, so a resume never ran it
    assert " a-e0 attempt 2: success (2 turns)" in r.stdout
    # and the progress counted it `ok`
    assert "ok 1  failed 0  cut short 1  running" in r.stdout, r.stdout
    assert " b-e0 attempt 1: success (1 turns)" in r.stdout
    assert "3 trajectories (0 failed attempts, 1 incomplete)" in r.stdout
    got = published(raw)
    assert sorted(got) == [("a-e0", 1), ("a-e0", 2), ("b-e0", 1)]
    assert {t.source.job_id for t in got.values()} == {job}
    assert not list((raw / "collect" / job / ".journals").iterdir())
    # nothing is left: nothing runs, nothing is published twice
    again = wt({**wt_env, "WT_NAP": "0"}, *resume)
    assert again.returncode == 0 and "nothing left to run" in again.stdout, again.stdout
    # the killed run could not remove its containers (`gc` would: their owner is gone;
    # here only ours go, other tests' may be running)
    remove_containers(docker_engine, {"label": f"worldtrace.owner.pid={proc.pid}"})


@pytest.mark.docker
def test_ctrl_c_prints_a_resume_command_that_finishes_the_job(docker_engine, wt_env, tmp_path):
    """Found: `[interrupted: run the job id again to finish]`, but `collect JOB_ID` is no
    file and the job file again makes a new job id."""
    f = job_file(tmp_path, slow_job(step_s=3))
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    proc = subprocess.Popen(
        ["worldtrace", "collect", str(f)], env=wt_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    job = started(proc, raw, "a-e0")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    command = f"worldtrace collect {f} --resume {job}"
    assert (
        f"interrupted (Ctrl-C): a-e0 attempt 1 was published as it stood (incomplete; a resume runs "
        f"that episode again); 1 episode(s) not run; finish the job with: {command}"
    ) in err, err
    assert published(raw).keys() == {("a-e0", 1)}

    r = subprocess.run(shlex.split(command), capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    got = published(raw)
    assert sorted(got) == [("a-e0", 1), ("a-e0", 2), ("b-e0", 1)]
    assert got[("a-e0", 1)].outcome.status == "incomplete"
    assert got[("a-e0", 2)].outcome.status == "success"
    assert got[("b-e0", 1)].outcome.status == "success"
    assert "2 trajectories (0 failed attempts)" in r.stdout  # a-e0 again, then b-e0


def test_resume_refuses_a_job_it_cannot_finish(store, wt_env, tmp_path):
    """Each refusal is one line naming why (exit 1), or a usage error (exit 2)."""
    env = {**wt_env, "WORLDTRACE_STORE": str(store.root)}
    f = job_file(tmp_path, slow_job(step_s=1))
    r = wt(env, "collect", str(f), "--resume", "slow-0123abcd")
    assert r.returncode == 1 and "no job slow-0123abcd in " in r.stderr, r.stderr
    (store.raw / "collect" / "other-0123abcd").mkdir(parents=True)
    r = wt(env, "collect", str(f), "--resume", "other-0123abcd")
    assert r.returncode == 1
    assert f"job other-0123abcd is not a run of {f} (its name is slow" in r.stderr, r.stderr
    (store.raw / "collect" / "slow-0123abcd").mkdir()
    (store.raw / "collect" / "slow-0123abcd" / "x-e0-a1.parquet").write_bytes(b"")
    r = wt(env, "collect", str(f), "--resume", "slow-0123abcd")
    assert r.returncode == 1 and "has episodes" in r.stderr and "(x-e0)" in r.stderr
    sub = wt(env, "jobs", "submit", str(f))
    assert sub.returncode == 0, sub.stderr
    queued = re.search(r"slow-[0-9a-f]{8}", sub.stdout).group(0)
    r = wt(env, "collect", str(f), "--resume", queued)
    assert r.returncode == 1 and f"job {queued} is a queued job" in r.stderr, r.stderr
    r = wt(env, "collect", "--sandbox", "docker", "--keys", "ls\\n", "--resume", "slow-0123abcd")
    assert r.returncode == 2 and "--resume JOB_ID finishes a job of a JOB_FILE" in r.stderr


@pytest.mark.docker
def test_a_quick_run_that_fails_says_why_and_offers_no_resume(docker_engine, wt_env, tmp_path):
    """A quick --sandbox run has no job file to resume from: its start line offers none."""
    # a sandbox that cannot start (no engine answers at DOCKER_HOST) is ours to fail and
    # retry; an image this machine lacks is refused before anything runs (1207b), and
    # the agent's `kill 1` is no failure: the init ignores it (test_container_faults_1204)
    env = {**wt_env, "DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}"}
    r = wt(env, "collect", "--sandbox", "docker", "--keys", "ls\\n")
    assert r.returncode == EXIT_EPISODES_FAILED, r.stdout + r.stderr
    first, *rest = r.stdout.splitlines()
    assert re.fullmatch(r"job quick-terminal-[0-9a-f]{8}: 1 episode\(s\)", first), first
    gone = "SandboxError: cannot create the sandbox: no docker engine answers"
    assert sum(f"): {gone}" in ln for ln in rest) == 2, r.stdout  # retries: 1
    assert "1 episode(s) failed for good" in r.stderr and "quick-e0" in r.stderr
