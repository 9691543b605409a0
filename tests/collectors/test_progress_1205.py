"""`collect`'s progress after Ctrl-C: an attempt our stop cut short ended no episode
(2026-12-05).

Found: after a SIGINT during the first of three episodes the line of the cut attempt
read `[1/3, ok 0  failed 0  cut short 1 ...]`: the episode counted as ended, though the
stop ended nothing (a resume runs it again: `collectors.jobs._over`)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from ..conftest import wait_until


@pytest.mark.docker
def test_an_attempt_cut_short_by_ctrl_c_ends_no_episode_in_the_count(
    docker_engine, wt_env, tmp_path
):
    f = tmp_path / "three.yaml"
    f.write_text(json.dumps({
        "name": "three", "sandbox": {"kind": "terminal"},
        "tasks": [{"id": "a", "actions": [{"keystrokes": "sleep 600\n", "duration": 3}, "echo a\n"]},
                  {"id": "b", "actions": ["echo b\n"]}, {"id": "c", "actions": ["echo c\n"]}],
    }))  # fmt: skip
    proc = subprocess.Popen(["worldtrace", "collect", str(f)], env=wt_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    first = proc.stdout.readline()
    job = re.match(r"job (three-[0-9a-f]{8}): 3 episode\(s\);", first).group(1)
    journal = (
        Path(wt_env["WORLDTRACE_STORE"]) / "raw/collect" / job / ".journals/a-e0-a1.journal.jsonl"
    )
    wait_until(lambda: journal.exists() and '"header"' in journal.read_text(), timeout=60,
               what="a-e0's start")  # fmt: skip
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    [line] = [ln for ln in out.splitlines() if " a-e0 attempt 1: " in ln]
    assert "collector stopped before the episode ended  [0/3, ok 0  failed 0  cut short 1" in line
    assert "was published as it stood (incomplete; a resume runs that episode again); " \
        "2 episode(s) not run" in err, err  # fmt: skip
