"""Found (a collection hunt, 12-07): a job file without `name:` takes its name from the
file's; `my job (1).yaml` was refused as `my job (1).yaml:1: name: 'my job (1)' must be
...`, naming a key and a line the file does not have. The error now says the file's name
stood in for a missing `name:` and how to fix it; a named job in that file is taken."""

from __future__ import annotations

import subprocess

JOB = """sandbox: {kind: terminal, docker: {image: worldtrace/busybox:latest}}
tasks:
  - id: a
    instruction: x
    actions: ["echo hi\\n"]
"""


def test_a_file_name_that_cannot_name_the_job_is_said_as_such(tmp_path, wt_env):
    f = tmp_path / "my job (1).yaml"
    f.write_text(JOB)
    args = ["worldtrace", "jobs", "submit", "--create", str(f)]
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 1
    assert "no `name:`, and the file's name 'my job (1)' cannot stand in for one" in r.stderr
    assert "give the job a `name:`" in r.stderr and "name: 'my job (1)' must" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    f.write_text("name: my-job\n" + JOB)
    r = subprocess.run(args, capture_output=True, text=True, env=wt_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "my-job" in r.stdout
