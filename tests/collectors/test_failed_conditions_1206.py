"""Failed attempts keep their conditions (found 12-06): an attempt whose condition could
not be set up (SandboxConfigError: `permission: nosuchuser`, `corrupt_file` of a file
the set-up does not make) was recorded with `conditions` null and an empty
`environment`, so `worldtrace query` could not group failures by condition. Real
containers, the real CLI."""

from __future__ import annotations

import json
import subprocess

import pytest
from worldtrace.collectors.jobs import JobSpec, run_job

pytestmark = pytest.mark.docker


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


JOB = """name: {name}
sandbox: {{kind: terminal}}
retries: 0
conditions: [{condition}]
tasks:
  - id: t
    instruction: Look.
    actions: ["id\\n"]
"""


def test_failed_attempts_are_recorded_with_their_conditions(docker_engine, wt_env, tmp_path):
    """Two attempts failed at condition set-up and one that succeeded, collected with
    `worldtrace collect`: each failure holds the condition it drew and the sandbox's
    environment, in the form the success has, and a query groups them by condition."""
    jobs = {
        "user-ok": "{permission: nobody}",
        "user-bad": "{permission: nosuchuser}",
        "corrupt-bad": "{corrupt_file: {path: missing.json, bytes: 4}}",
    }
    for name, condition in jobs.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(JOB.format(name=name, condition=condition))
        r = wt(wt_env, "collect", str(path))
        assert r.returncode == (0 if name.endswith("ok") else 3), r.stderr
    sql = (
        "select job_id, status, outcome.error as error, conditions, environment"
        " from raw_trajectories"
    )
    r = wt(wt_env, "query", "--format", "json", sql)
    assert r.returncode == 0, r.stderr
    rows = {row["job_id"].rsplit("-", 1)[0]: row for row in map(_row, json.loads(r.stdout))}
    assert {k: v["status"] for k, v in rows.items()} == {
        "corrupt-bad": "error",
        "user-bad": "error",
        "user-ok": "success",
    }
    assert rows["user-bad"]["error"].startswith("SandboxConfigError: condition permission")
    assert rows["user-bad"]["conditions"] == [{"kind": "permission", "user": "nosuchuser"}]
    assert rows["user-ok"]["conditions"] == [{"kind": "permission", "user": "nobody"}]
    [corrupt] = rows["corrupt-bad"]["conditions"]
    assert corrupt["kind"] == "corrupt_file" and corrupt["path"] == "missing.json", corrupt
    ok = rows["user-ok"]["environment"]
    assert ok["backend"] == "docker" and ok["image"] == "worldtrace/debian:latest", ok
    assert rows["user-bad"]["environment"] == rows["corrupt-bad"]["environment"] == ok
    r = wt(
        wt_env,
        "query",
        "--format",
        "csv",
        "select json_extract_string(conditions, '$[0].kind') as kind, status, count(*) as n"
        " from raw_trajectories group by all order by all",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        "kind,status,n",
        "corrupt_file,error,1",
        "permission,error,1",
        "permission,success,1",
    ]


def _row(row: dict) -> dict:
    """A query row with its JSON columns read."""
    return {
        **row,
        "conditions": json.loads(row["conditions"]) if row["conditions"] else None,
        "environment": {
            **row["environment"],
            "config": json.loads(row["environment"]["config"] or "{}"),
        },
    }


def test_a_failed_swe_attempt_keeps_its_conditions_as_applied(docker_engine, store, repo):
    """The SWE kind alike, and the conditions as the sandbox records them: a disk kind's
    default path spelled out (the repository), a limit over the job's cut to it (pids)."""
    job = {
        "name": "swe-bad",
        "sandbox": {"kind": "swe", "repo": str(repo)},
        "retries": 0,
        "conditions": [{"permission": "nosuchuser"}, {"disk_low": "1m"}, {"pids_low": 4096}],
        "tasks": [
            {
                "id": "t",
                "instruction": "i",
                "actions": [{"tool": "bash", "arguments": {"command": "id"}}],
            }
        ],
    }
    result = run_job(JobSpec.from_dict(job), store.raw)
    [t] = result.trajectories
    assert t.outcome.status == "error" and "nosuchuser" in t.outcome.error, t.outcome
    assert json.loads(t.conditions) == [
        {"kind": "permission", "user": "nosuchuser"},
        {"free": "1m", "kind": "disk_low", "path": "/repo", "size": "16m"},
        {"kind": "pids_low", "limit": 128},
    ], t.conditions
    assert t.environment.backend == "docker", t.environment
    assert json.loads(t.environment.config)["repo"] == "/repo", t.environment.config
