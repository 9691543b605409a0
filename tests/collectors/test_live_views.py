"""Live views on a real terminal (a pty): `collect`'s progress bar and `jobs list --watch`."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import threading

import pytest
from worldtrace.collectors.jobspec import JobSpec
from worldtrace.collectors.jobstore import open_job_store

from ..conftest import wait_until
from .test_queue import slow_job


class Terminal:
    """A command attached to a pseudo-terminal; `text` is everything it printed so far."""

    def __init__(self, args: list[str], env: dict[str, str]):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env={**env, "COLUMNS": "160"}
        )
        os.close(slave)
        self.master, self.chunks = master, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: the other side closed
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def wait(self, timeout: float = 60) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # ours: a failed test leaves no command running
            self.proc.wait()
            raise
        self.reader.join(timeout=5)
        os.close(self.master)
        return rc


@pytest.mark.docker
def test_collect_shows_a_progress_bar_on_a_terminal(docker_engine, wt_env, tmp_path, repo):
    f = tmp_path / "job.yaml"
    f.write_text(json.dumps(slow_job(repo, command="true")))
    term = Terminal(["worldtrace", "collect", str(f)], wt_env)
    assert term.wait() == 0, term.text
    out = term.text
    assert "1/1" in out and "ok 1  failed 0  running 0" in out and "turns/s" in out
    assert "1 trajectories (0 failed attempts) ->" in out


def test_jobs_list_watch_refreshes_until_ctrl_c(store, wt_env):
    term = Terminal(["worldtrace", "jobs", "list", "--watch", "--interval", "0.2"], wt_env)
    wait_until(lambda: "no jobs" in term.text, what="the first frame")
    spec = {"name": "watched", "tasks": [{"id": "t", "actions": ["ls\n"]}]}
    job_id = open_job_store(store.jobs_db).submit(JobSpec.from_dict(spec))
    wait_until(lambda: job_id in term.text, what="a refreshed frame with the new job")
    term.proc.send_signal(signal.SIGINT)
    assert term.wait() == 0


def test_jobs_list_watch_off_a_terminal_prints_whole_tables(store, wt_env, tmp_path):
    """Found: `jobs list --watch > watch.log` squeezed the live view to 80 columns: ids
    cut (`sched-term-f3f`), status and count columns empty."""
    js = open_job_store(store.jobs_db)
    name = "a-job-name-long-enough-that-eighty-columns-cannot-hold-its-row"
    job_id = js.submit(
        JobSpec.from_dict({"name": name, "tasks": [{"id": "t", "actions": ["ls\n"]}]})
    )
    log = tmp_path / "watch.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["worldtrace", "jobs", "list", "--watch", "--interval", "0.2"],
                                env=wt_env, stdout=out, stderr=subprocess.PIPE, text=True)  # fmt: skip
        wait_until(lambda: log.read_text().count("UTC") >= 2, what="two refreshes")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    frames = log.read_text().split("-- ")[1:]
    # found (CI): Ctrl-C between a frame's time line and its tables left the line alone;
    # each frame is written whole, the last included
    assert len(frames) >= 2
    for frame in frames:
        row = next((line for line in frame.splitlines() if job_id in line), None)
        assert row is not None, frame
        assert "queued" in row and name in row, frame
