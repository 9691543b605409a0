"""`collect` stopped by SIGTERM (found by the 12-06 hunt, s): it exited 130, Ctrl-C's
status, and said `interrupted: ...` naming no signal, where `process`, `export` and
`query` exit 143 and say `interrupted (SIGTERM): ...`; a supervisor could not tell its
own SIGTERM from a user's Ctrl-C. Real docker, real signals."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from .test_collect_outcomes import job_file, published, slow_job, started


@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["TERM"])  # Ctrl-C: test_collect_outcomes
def test_a_stopped_collect_exits_with_its_signal_s_status_and_names_it(
    docker_engine, wt_env, tmp_path, sig
):
    f = job_file(tmp_path, slow_job(step_s=3))
    raw = Path(wt_env["WORLDTRACE_STORE"]) / "raw"
    proc = subprocess.Popen(
        ["worldtrace", "collect", str(f)], env=wt_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    job = started(proc, raw, "a-e0")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[sig]
    command = f"worldtrace collect {f} --resume {job}"
    assert (
        f"interrupted ({name}): a-e0 attempt 1 was published as it stood (incomplete; a resume "
        f"runs that episode again); 1 episode(s) not run; finish the job with: {command}"
    ) in err, err
    assert published(raw).keys() == {("a-e0", 1)}
