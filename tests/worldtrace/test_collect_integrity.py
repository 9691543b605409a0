"""`collect` and `worker` refuse what would leak or waste data: a quick run's --repo
overlapping the store, a resume from a changed job file, a heartbeat slower than the
lease (review of collect: items 1, 2, 5, 6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from worldtrace.cli import cli

NO_SERVER = {
    "name": "fp", "retries": 0,
    "sandbox": {"kind": "mcp", "command": ["mcp-server-doesnotexist", "{workdir}"]},
    "tasks": [{"id": "t", "actions": [{"tool": "read", "arguments": {"path": "x"}}]}],
}  # fmt: skip
"""A job whose every attempt fails at once (no docker, no server)."""


def run(store: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), *args])


def test_a_quick_run_refuses_a_repo_overlapping_the_store(tmp_path):
    """Found: `collect --store S --sandbox swe --repo S` copied the store into the
    sandbox; a job file with the same repo was refused."""
    store = tmp_path / "S"
    (store / "sub").mkdir(parents=True)
    call = ("--tool", 'bash:{"command": "ls"}')
    for repo, root in ((store, store), (store / "sub", store), (store, store / "sub")):
        r = run(root, "collect", "--sandbox", "swe", "--repo", str(repo), *call)
        assert r.exit_code == 1, r.output
        assert (
            f"Error: --repo: {repo} overlaps the store {root}: refused" in r.output
        )  # the option given
    assert not (store / "raw").exists() and not (store / "sub" / "raw").exists()


def test_a_resume_from_a_changed_job_file_is_refused(tmp_path, wt_env):
    """Found: `collect JOB --resume ID` ran another image, other actions, more episodes
    under the job id of the first file."""
    store = Path(wt_env["WORLDTRACE_STORE"])
    f = tmp_path / "fp.yaml"
    f.write_text(json.dumps(NO_SERVER))
    r = run(store, "collect", str(f))
    assert r.exit_code == 3, r.output
    job = re.search(r"job (fp-[0-9a-f]{8})", r.output).group(1)
    f.write_text(json.dumps({**NO_SERVER, "episodes": 3}))
    r = run(store, "collect", str(f), "--resume", job)
    assert r.exit_code == 1, r.output
    assert r.output.strip() == (
        f"Error: job {job} ran from another version of {f} (changed: episodes): "
        "--resume needs the job file the job ran from"
    )
    f.write_text(f"# the same job\n{json.dumps(dict(reversed(NO_SERVER.items())))}\n")
    r = run(store, "collect", str(f), "--resume", job)
    assert r.exit_code == 3 and "nothing left to run" in r.output, r.output  # done already


def test_a_job_collected_before_fingerprints_still_resumes(tmp_path, wt_env):
    store = Path(wt_env["WORLDTRACE_STORE"])
    f = tmp_path / "fp.yaml"
    f.write_text(json.dumps(NO_SERVER))
    job = re.search(r"job (fp-[0-9a-f]{8})", run(store, "collect", str(f)).output).group(1)
    (store / "raw" / "collect" / job / ".spec.json").unlink()
    f.write_text(json.dumps({**NO_SERVER, "episodes": 2}))
    r = run(store, "collect", str(f), "--resume", job)
    assert r.exit_code == 3 and "t-e1 attempt 1: error" in r.output, r.output


def test_a_heartbeat_at_or_over_the_lease_is_a_usage_error(store):
    """Found: `worker --heartbeat 30 --lease 4` ran; other workers then took its attempts."""
    r = run(store.root, "worker", "--heartbeat", "30", "--lease", "4")
    assert r.exit_code == 2
    assert "--heartbeat 30 must be shorter than --lease 4" in r.output
    r = run(store.root, "worker", "--heartbeat", "4", "--lease", "4")
    assert r.exit_code == 2 and "--heartbeat 4 must be shorter than --lease 4" in r.output
    r = run(store.root, "worker", "--heartbeat", "3", "--lease", "4")
    assert r.exit_code == 0, r.output
    assert "warning: --heartbeat 3 is over half of --lease 4" in r.output
    r = run(store.root, "worker", "--lease", "4")
    assert r.exit_code == 0 and "warning" not in r.output, r.output


def test_a_dry_run_shows_the_schedules_overlap(tmp_path, store):
    f = tmp_path / "s.yaml"
    f.write_text(
        'name: s\nschedule: {cron: "0 2 * * *", overlap: queue}\ntasks: [{id: a, actions: [ls]}]\n'
    )
    r = run(store.root, "jobs", "submit", "--dry-run", str(f))
    assert r.exit_code == 0, r.output
    assert "schedule: cron 0 2 * * *, missed: one, overlap: queue" in r.output
