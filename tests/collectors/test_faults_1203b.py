"""Faults a review injected (1203b): a damaged collect journal, and `import` killed under
its worker processes. Real CLI processes, real containers, real signals by pid."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from worldtrace.schemas import read_records

from ..conftest import remove_containers, wait_until


def wt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


# -- F2: a collect journal damaged after a crash --------------------------------------

NAPPING = {
    "name": "jr",
    "sandbox": {"kind": "terminal", "docker": {"env": ["WT_NAP"]}},
    "tasks": [
        {
            "id": "t",
            "actions": [
                "echo one\n",
                "echo two\n",
                {"keystrokes": "sleep $WT_NAP\n", "duration": 60},
            ],
        }
    ],
}
"""One episode, `t-e0`: two quick turns, then a step that naps `$WT_NAP` seconds (600
while the run is killed, 0 for the resume: the job file stays the same)."""

DAMAGE = {
    # a line in the middle that does not parse: the turns after it are real
    "middle": lambda text: (
        text.splitlines(keepends=True)[0] + "{torn\n" + "".join(text.splitlines(keepends=True)[1:])
    ),
    "empty": lambda text: "",  # a power loss before the writes reached the disk
    "no-kind": lambda text: '{"episode_id": "t-e0"}\n',
    "torn-last": lambda text: text + '{"kind": "turn", "ind',  # the write a crash cut
}


def killed_mid_episode(docker_engine, env: dict[str, str], job: Path) -> tuple[str, Path]:
    """Run the job, SIGKILL it once its journal holds two turns: (job id, journal)."""
    raw = Path(env["WORLDTRACE_STORE"]) / "raw"
    proc = subprocess.Popen(
        ["worldtrace", "collect", str(job)],
        env={**env, "WT_NAP": "600"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        m = re.match(r"job (jr-[0-9a-f]{8}): ", first)
        assert m, first
        journal = raw / "collect" / m.group(1) / ".journals" / "t-e0-a1.journal.jsonl"

        def two_turns() -> bool:
            return journal.exists() and journal.read_text().count('"kind": "turn"') == 2

        wait_until(two_turns, timeout=90, what="two journaled turns")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    # the killed run could not remove its own
    remove_containers(docker_engine, {"label": f"worldtrace.owner.pid={proc.pid}"})
    return m.group(1), journal


@pytest.mark.docker
def test_a_damaged_journal_is_set_aside_with_a_warning_and_its_episode_rerun(
    docker_engine, wt_env, tmp_path
):
    """Found: one line that did not parse anywhere in a journal ended its reading
    (`break`, meant for the torn last line of a crash): the resume published `incomplete
    (0 turns)` and deleted the journal, its fsynced turns gone without a word. An
    unreadable journal was renamed `.bad` silently and the episode rerun under the same
    attempt number (`t-e0-a1.parquet` beside `t-e0-a1.journal.jsonl.bad`); an empty one
    was deleted, although docs/collect.md says such a journal is never deleted. Only a
    torn last line is left out.

    Every damage of `DAMAGE` in one store, each its own killed run (a job id of its own)
    resumed on its own: one `doctor` then lists every set-aside journal (it checks the
    whole machine, seconds a run)."""
    job = tmp_path / "jr.yaml"
    job.write_text(json.dumps(NAPPING))
    set_aside: dict[str, tuple[str, Path, str]] = {}
    for damage in sorted(DAMAGE):
        job_id, journal = killed_mid_episode(docker_engine, wt_env, job)
        damaged = DAMAGE[damage](journal.read_text())
        journal.write_text(damaged)

        r = wt({**wt_env, "WT_NAP": "0"}, "collect", str(job), "--resume", job_id)
        assert r.returncode == 0, (damage, r.stdout + r.stderr)
        assert "Traceback" not in r.stderr, (damage, r.stderr)
        out = journal.parent.parent
        got = {(t.source.episode_id, t.source.attempt): t for t in read_records(out)}
        aside = journal.with_name(journal.name + ".bad")
        if damage == "torn-last":  # the crash's own: published as it stood, without it
            assert "warning" not in r.stderr, (damage, r.stderr)
            assert not aside.exists() and not journal.exists(), damage
            t1 = got[("t-e0", 1)]
            assert [len(t1.turns), t1.outcome.status] == [2, "incomplete"], damage
            assert " t-e0 attempt 1: incomplete (2 turns)" in r.stdout, (damage, r.stdout)
            assert got[("t-e0", 2)].outcome.status == "success", damage
            continue
        # kept, as it was, and said: file, (line) and why, where it went, what runs next
        assert not journal.exists() and aside.read_text() == damaged, damage
        [line] = [ln for ln in r.stderr.splitlines() if str(journal) in ln]
        assert line.startswith(f"warning: {journal}: journal "), (damage, line)
        assert f"set aside as {aside.name}" in line, (damage, line)
        assert "t-e0 runs again as attempt 2" in line, (damage, line)
        why = {
            "middle": "journal line 2 is unreadable (not JSON: ",
            "empty": "journal is empty: no header",
            "no-kind": "journal line 1 has no kind",
        }[damage]
        assert why in line, (damage, line)
        # the rerun takes a new number: nothing published under the set-aside attempt's
        assert sorted(got) == [("t-e0", 2)], (damage, sorted(got))
        assert not (out / "t-e0-a1.parquet").exists(), damage
        t2 = got[("t-e0", 2)]
        assert len(t2.turns) == 3 and t2.outcome.status == "success", damage
        set_aside[damage] = (job_id, aside, damaged)
    assert sorted(set_aside) == ["empty", "middle", "no-kind"]
    doc = wt(wt_env, "doctor", "--store-only")
    for damage, (_, aside, _) in set_aside.items():  # listed, for a person to look at
        assert str(aside) in doc.stdout + doc.stderr, (damage, doc.stdout + doc.stderr)
    for damage, (job_id, aside, damaged) in set_aside.items():
        # a second resume has nothing left to do, and leaves the set-aside journal alone
        again = wt({**wt_env, "WT_NAP": "0"}, "collect", str(job), "--resume", job_id)
        assert again.returncode == 0, (damage, again.stdout + again.stderr)
        assert "nothing left to run" in again.stdout, (damage, again.stdout)
        assert aside.read_text() == damaged and "warning" not in again.stderr, damage


# -- F4: `import` killed under its worker processes -----------------------------------

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "config",
    "server",
    "client",
    "cache",
    "index",
    "table",
    "record",
    "buffer",
]


def openai_records(path: Path, n: int, seed: int) -> Path:
    """`n` OpenAI chat records with tool calls (JSONL), distinct per `seed`."""
    import random

    rng = random.Random(seed)
    tool = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    with open(path, "w") as f:
        for i in range(n):
            msgs = [{"role": "user", "content": f"task {seed}-{i}: inspect files"}]
            for t in range(rng.randint(2, 5)):
                cid = f"c{i}-{t}"
                cmd = "ls /" + " ".join(rng.choice(WORDS) for _ in range(3))
                fn = {"name": "bash", "arguments": json.dumps({"command": cmd})}
                msgs.append({"role": "assistant", "content": None,
                             "tool_calls": [{"id": cid, "type": "function", "function": fn}]})  # fmt: skip
                out = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))
                msgs.append({"role": "tool", "tool_call_id": cid, "content": f"{out} {seed}-{i}-{t}"})  # fmt: skip
            f.write(json.dumps({"id": f"r{seed}-{i}", "messages": msgs, "tools": [tool]}) + "\n")
    return path


def start_import(env: dict[str, str], inputs: Path, **popen) -> subprocess.Popen:
    """`import --workers 2` with a progress line per batch of records (stderr)."""
    return subprocess.Popen(
        ["worldtrace", "import", "--workers", "2", "--progress-every", "0", str(inputs)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,
    )  # fmt: skip


def converting(proc: subprocess.Popen) -> list[psutil.Process]:
    """The import's two worker processes, once records went through them (its first
    progress line)."""
    line = proc.stderr.readline()
    assert " import: " in line, line
    workers = psutil.Process(proc.pid).children()
    assert len(workers) == 2, workers
    return workers


def gone(procs: list[psutil.Process]) -> bool:
    def ended(p: psutil.Process) -> bool:
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return all(ended(p) for p in procs)


BIG_RECORDS = 6000
"""Records of `big_input`: what importing it again adds."""


@pytest.fixture(scope="module")
def big_input(tmp_path_factory) -> Path:
    """About 10 MB of records in 2 files: an import of seconds on 2 workers after its
    first progress line (1,024 records), where it is killed; written once: the imports
    only read them."""
    d = tmp_path_factory.mktemp("big") / "in"
    d.mkdir()
    for k in range(2):
        openai_records(d / f"f{k}.jsonl", BIG_RECORDS // 2, seed=k)
    return d


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_import_killed_by_pid_leaves_no_worker_behind(wt_env, big_input, sig):
    """Found: `kill PID` or `kill -9 PID` of `import` (what `timeout`, a supervisor or
    systemd without control-group kill do) left its forked converter processes
    re-parented to init, blocked on their pipe forever (~90 MB each, the input open).
    Now they end with it; nothing half-written is visible, and importing again adds
    everything."""
    store = Path(wt_env["WORLDTRACE_STORE"])
    proc = start_import(wt_env, big_input)
    workers: list[psutil.Process] = []
    try:
        workers = converting(proc)
        os.kill(proc.pid, sig)  # the command alone, not its process group
        proc.communicate(timeout=60)
        wait_until(lambda: gone(workers), timeout=20, what="the import's workers to end")
    finally:
        for w in workers:  # started by the import this test ran: never left behind
            if not gone([w]):
                w.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    visible = [p for p in (store / "raw").rglob("*.parquet") if not p.name.startswith(".")]
    assert proc.returncode == -sig  # SIGTERM keeps its default (`commands/data.py`)
    assert not visible  # no shard was due yet: none is half there
    if sig == signal.SIGKILL:
        return
    again = wt(wt_env, "import", str(big_input))
    assert again.returncode == 0, again.stderr
    assert sum(1 for _ in read_records(store / "raw")) == BIG_RECORDS
