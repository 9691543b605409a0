"""Found (hunt 1205c): the SWE `bash` tool recorded a command's output and errors in
whatever order docker delivered them. Docker reads an exec's stdout and stderr on two
pipes and keeps no order between them: eight runs of `echo out; echo err >&2` came back
`err\\nout` three times, and a shell's `Killed` came after the `echo rc=$?` that followed
it. The truth is the shell's own order, what `sh -c '...' 2>&1` prints: the command now
writes both to one pipe after the session line. Real containers."""

from __future__ import annotations

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job
from worldtrace.schemas import read_records

pytestmark = pytest.mark.docker

INTERLEAVED = "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo o$i; echo e$i >&2; done"
EXPECTED = "".join(f"o{i}\ne{i}\n" for i in range(1, 41))


def bash(command: str) -> dict:
    return {"tool": "bash", "arguments": {"command": command}}


def run(store, tmp_path, actions: list[dict]) -> list[str]:
    repo = tmp_path / "r"
    repo.mkdir(exist_ok=True)
    (repo / "a.txt").write_text("a\n")
    job = {
        "name": "order",
        "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"warm": 0}},
        "retries": 0,
        "tasks": [{"id": "t", "actions": actions}],
    }
    run_job(JobSpec.from_dict(job), store.raw)
    [t] = read_records(store.raw)
    assert t.outcome.status == "success", t.outcome
    return [turn.observation.text for turn in t.turns]


def test_bash_output_and_errors_in_the_order_written(docker_engine, store, tmp_path):
    """Before: 40 alternating lines of stdout and stderr came back regrouped by stream
    in some runs and mixed in others; each of three runs must be the shell's order."""
    texts = run(store, tmp_path, [bash(INTERLEAVED)] * 3)
    assert texts == [EXPECTED] * 3


def test_errors_only_and_exit_code_still_kept(docker_engine, store, tmp_path):
    """What goes to stderr alone is still the observation (nothing of the session line
    shows), and the exit code is the command's."""
    texts = run(store, tmp_path, [bash("ls /nonexistent; echo rc=$?"), bash("cat a.txt >&2")])
    assert texts[0].startswith("ls: ") and "No such file or directory" in texts[0]
    assert texts[0].endswith("\nrc=2\n")
    assert texts[1] == "a\n"
