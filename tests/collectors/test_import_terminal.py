"""`import` on a terminal: the progress bar does not take the worker processes away."""

from __future__ import annotations

import os
import subprocess

from worldtrace.collectors.importers import BATCH_LINES

from tests.collectors.test_import_workers import corpus


def test_a_terminal_import_still_converts_in_worker_processes(tmp_path, wt_env):
    """Found by the fault review: on a terminal `import` always converted in its own
    process: the progress bar's refresh thread was running when the pool was to fork, and
    a fork beside another thread is refused (`importers._pool`). Here stderr (where the
    bar draws) is a real pseudo-terminal."""
    src = corpus(tmp_path / "runs.jsonl", n=2 * BATCH_LINES)
    main, tty = os.openpty()
    try:
        r = subprocess.run(
            ["worldtrace", "import", "--workers", "2", str(src)],
            stdout=subprocess.PIPE, stderr=tty, text=True, env=wt_env, timeout=300,
        )  # fmt: skip
    finally:
        os.close(tty)
        os.close(main)
    assert r.returncode == 0
    assert "converted by 2 worker processes" in " ".join(r.stdout.split())
