"""Hunt 1206: a quick `collect --sandbox` run's mistakes were said in the keys of a job
file the user never wrote (`tasks[0].actions[0].tool: unknown tool`); and an empty
`--image` (or `image: ""` in a job file) was taken, every attempt then failing at the
engine with `NullResource: Resource ID was not provided`. Real CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CALC = str(Path(__file__).resolve().parents[2] / "examples" / "data" / "calc")


def collect(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", "collect", *args], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        (['bash:{"command": "ls"}', 'nosuch:{"a": 1}'], "Error: --tool 2: unknown tool 'nosuch' (tools: read, edit, bash)"),
        (['bash:{"cmd": 1}'], "Error: --tool 1 arguments: bash: 'command' is a required property"),
    ],
)  # fmt: skip
def test_a_quick_run_s_tool_mistake_is_said_by_its_option(wt_env, tools, said):
    args = [a for t in tools for a in ("--tool", t)]
    r = collect(wt_env, "--sandbox", "swe", "--repo", CALC, *args)
    assert r.returncode == 1 and r.stderr.startswith(said), r.stderr
    assert "tasks[0]" not in r.stderr


@pytest.mark.parametrize("image", ["", " ", "debian latest"])
def test_an_image_that_names_none_is_refused_before_any_attempt(tmp_path, wt_env, image):
    r = collect(wt_env, "--sandbox", "docker", "--image", image, "--keys", "ls\\n")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        r.stderr.strip()
        == f"Error: --image: {image!r} is no image name (e.g. worldtrace/debian:latest)"
    )
    assert "attempt" not in r.stdout
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\nsandbox: {{kind: terminal, docker: {{image: {image!r}}}}}\n"
                   "tasks: [{id: t, instruction: x, actions: ['ls\\n']}]\n")  # fmt: skip
    r = collect(wt_env, str(job))
    assert r.returncode == 1 and "job.yaml:2: sandbox.docker.image: " in r.stderr, r.stderr
