"""Found (12-04, MCP hunt): the CLI set the root logger to ERROR (Beam's import-time
warnings are noise) and so hid every warning of ours: an explorer that set a tool aside
said nothing to the user who ran `worldtrace collect`."""

from __future__ import annotations

import os
import subprocess
import sys

from ..conftest import VENV_BIN
from ..sandboxes.test_mcp_hunt_1204d import SERVER


def test_our_warnings_reach_the_user_of_the_cli(tmp_path):
    server = tmp_path / "hunt.py"
    server.write_text(SERVER)
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: warned\n"
        f"sandbox: {{kind: mcp, command: [{sys.executable}, {server}]}}\n"
        "policy: {kind: explorer, steps: 2, exclude: [stuck, huge]}\n"
        "retries: 0\n"
        "tasks:\n  - id: t\n    instruction: Greet someone.\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    cmd = [str(VENV_BIN / "worldtrace"), "--store", str(tmp_path / "s"), "--create", "collect", str(job)]  # fmt: skip
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if "greet" in ln]
    assert line.startswith("warning: explorer: tool greet set aside: its input schema has a pattern"), line  # fmt: skip
    # Beam's import-time noise stays out
    assert "apitools" not in r.stderr and "WARNING:" not in r.stderr, r.stderr
