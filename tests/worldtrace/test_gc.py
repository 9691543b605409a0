"""`worldtrace gc` on real files left as stopped writers leave them, a file a live process
holds open, real journals from the Recorder, and a container whose owner was SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from worldtrace.collectors.recorder import Recorder
from worldtrace.schemas import Agent, Observation, Outcome, ShardWriter, Source, Store

from ..conftest import remove_containers

HOUR = 3600


def wt(env, *args):
    return subprocess.run(["worldtrace", *args], capture_output=True, text=True, env=env)


def aged(path: Path, seconds: float) -> Path:
    """Set the modification time of path and everything under it `seconds` back."""
    t = time.time() - seconds
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.utime(p, (t, t))
    return path


def journal(directory: Path, episode: str, finished: bool):
    """A real episode journal (the Recorder's), finished or cut off mid-episode."""
    rec = Recorder(
        None,
        directory,
        source=Source(kind="collector", name="terminal", job_id="job1", episode_id=episode),
        agent=Agent(name="scripted"),
        task_id="t",
        instruction="look around",
        domain="terminal",
    )
    rec.header(Observation("user@sandbox:~$ "), describe=False)
    return rec.finish(Outcome(status="success")) if finished else rec.path


@pytest.fixture
def littered(tmp_path, corpus):
    """A store with one leftover of every kind, each aged 2 hours unless said otherwise."""
    s = Store.at(tmp_path / "store")
    with ShardWriter(s.raw / "s") as w:
        w.write(corpus[:3])
    found = {
        "temp": s.raw / "s" / ".tmp-0a1b2c3d4e5f-00000.parquet",
        "fresh temp": s.raw / "s" / ".tmp-fedcba987654-00000.parquet",
        "held temp": s.raw / "s" / ".tmp-111111111111-00000.parquet",
        "run": s.processed / ".run-20260101T000000-abc123",
        "staging": s.export / ".staging-parquet-1234abcd",
        "old": s.processed / ".old-turns-5678ef90",
        "only copy": s.processed / ".old-clusters-0badc0de",
    }
    for name in ("temp", "fresh temp", "held temp"):
        found[name].write_bytes(b"PAR1" + b"\0" * 4096)
    for name in ("run", "staging", "old", "only copy"):
        (found[name] / "part").mkdir(parents=True)
        (found[name] / "part" / "x.parquet").write_bytes(b"\0" * 10_000)
    (s.processed / "turns").mkdir()  # the swapped-in table: its .old copy is garbage
    job = s.raw / "collect" / "job1"
    published = journal(job / ".journals" / "worker-0", "ep1", finished=True)
    with ShardWriter(job, prefix="job") as w:
        w.write(published)  # the worker published it, then died before unlinking the journal
    found["published journal"] = job / ".journals" / "worker-0" / "ep1-a1.journal.jsonl"
    found["cut journal"] = journal(job / ".journals" / "worker-0", "ep2", finished=False)
    (s.export / "parquet").mkdir(parents=True)
    (s.export / "parquet" / "manifest.json").write_text("{}")
    found["export"] = s.export / "parquet"
    for name, p in found.items():
        aged(p, 40 * 86400 if name == "export" else 2 * HOUR)
    aged(found["fresh temp"], 60)
    return s, found


def test_gc_removes_only_what_no_live_writer_owns(littered, wt_env):
    s, found = littered
    with open(found["held temp"], "rb") as fh:  # then only the child holds it open
        holder = subprocess.Popen(["sleep", "120"], stdin=fh)
    try:
        dry = wt(wt_env, "gc", "--store", str(s.root), "--dry-run", "--no-containers")
        assert dry.returncode == 0, dry.stderr
        assert all(p.exists() for p in found.values())  # a dry run removes nothing
        lines = dry.stdout.splitlines()
        listed = {name for name, p in found.items() for ln in lines if f"  {p}  (" in ln}
        removable = {"temp", "run", "staging", "old", "published journal"}
        kept_too = {"only copy", "cut journal", "fresh temp", "held temp"}  # listed, kept
        assert listed == removable | kept_too, dry.stdout
        for name in removable:
            line = next(ln for ln in lines if f"  {found[name]}  (" in ln)
            assert line.startswith("would remove") and "untouched for 2h" in line, line
        kept = {ln.split("  (")[0].split()[-1]: ln for ln in lines if ln.startswith("kept")}
        assert "the only copy of clusters" in kept[str(found["only copy"])]
        assert "untouched for 1m (< --min-age 1h)" in kept[str(found["fresh temp"])]
        assert "kept: open in a running process" in kept[str(found["held temp"])]
        assert "publishes it or drops it, as its attempt ended" in kept[str(found["cut journal"])]
        assert "10.0 kB" in next(ln for ln in lines if str(found["run"]) in ln)
        assert "gc: 5 item(s)" in dry.stderr and "would be removed (dry run)" in dry.stderr

        r = wt(wt_env, "gc", "--store", str(s.root), "--no-containers")
        assert r.returncode == 0, r.stderr
        assert sum(ln.startswith("removed") for ln in r.stdout.splitlines()) == 5
        gone = {name for name, p in found.items() if not p.exists()}
        assert gone == removable
        # the data stays readable: the published trajectory and the raw shards
        assert len(list((s.raw / "collect" / "job1").glob("*.parquet"))) == 1
        again = wt(wt_env, "gc", "--store", str(s.root), "--no-containers")
        assert "gc: removed 0 item(s)" in again.stderr

        old = wt(wt_env, "gc", "--store", str(s.root), "--no-containers",
                 "--exports-older-than", "30d")  # fmt: skip
        assert "removed  " in old.stdout and str(found["export"]) in old.stdout
        assert "export written 40d ago" in old.stdout and not found["export"].exists()
    finally:
        holder.kill()
        holder.wait()
    assert found["held temp"].exists()  # open in a live process all along


def test_gc_refuses_a_bad_age_and_a_missing_store(tmp_path, wt_env):
    r = wt(wt_env, "gc", "--store", str(tmp_path), "--exports-older-than", "soon")
    assert r.returncode == 2 and "not an interval: 'soon'" in r.stderr
    # found: an age of 0 (`--min-age 0s`: whatever its age) was `not an interval`
    r = wt(wt_env, "gc", "--store", str(tmp_path), "--dry-run", "--no-containers",
           "--min-age", "0s", "--exports-older-than", "0d")  # fmt: skip
    assert r.returncode == 0 and "gc: 0 item(s)" in r.stderr, r.stderr
    r = wt(wt_env, "gc", "--store", str(tmp_path / "missing"))
    assert r.returncode == 1 and f"store {tmp_path / 'missing'} does not exist" in r.stderr


OWNER = """
import sys
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
pool = ContainerPool(DockerConfig(warm=0))
c = pool.acquire()
print(c.name, flush=True)
sys.stdin.read()
"""


@pytest.mark.docker
def test_gc_removes_the_container_of_a_killed_collector(docker_engine, tmp_path, wt_env):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    label = {"label": f"worldtrace.owner.pid={owner.pid}"}
    try:
        name = owner.stdout.readline().strip()
        assert name, "the owner process started no container"
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        dry = wt(wt_env, "gc", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert any(name in ln and ln.startswith("would remove") for ln in dry.stdout.splitlines())
        assert docker_engine.containers.list(all=True, filters=label)
        r = wt(wt_env, "gc")
        assert any(name in ln and ln.startswith("removed") for ln in r.stdout.splitlines())
        assert not docker_engine.containers.list(all=True, filters=label)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        remove_containers(docker_engine, label)


def test_a_removal_that_fails_is_reported_and_exits_1(tmp_path, wt_env):
    s = Store.at(tmp_path / "store")
    stuck = s.raw / "s"
    stuck.mkdir(parents=True)
    temp = stuck / ".tmp-0a1b2c3d4e5f-00000.parquet"
    temp.write_bytes(b"x" * 100)
    aged(temp, 2 * HOUR)
    # root ignores permissions, so the directory is made immutable instead
    lock = ["chattr", "+i", str(stuck)] if os.geteuid() == 0 else ["chmod", "500", str(stuck)]
    r = subprocess.run(lock, capture_output=True, text=True)
    assert r.returncode == 0, f"cannot make a directory unwritable here: {r.stderr}"
    try:
        r = wt(wt_env, "gc", "--store", str(s.root), "--no-containers")
    finally:
        unlock = ["chattr", "-i"] if os.geteuid() == 0 else ["chmod", "700"]
        subprocess.run([*unlock, str(stuck)], check=True)
    assert r.returncode == 1
    [line] = r.stdout.splitlines()
    assert line.startswith("failed") and str(temp) in line and "not permitted" in line.lower()
    assert "1 item(s) could not be removed" in r.stderr and temp.exists()


def test_gc_removes_the_mcp_folder_of_a_stopped_sandbox_only(tmp_path, wt_env):
    """Found: a killed collector's MCP episode folder (a copy of its workdir) stayed in
    the temp directory and `gc` did not know it. A folder whose lock a process holds is
    a live sandbox's: kept."""
    from worldtrace.schemas.tempfiles import try_lock

    env = {**wt_env, "TMPDIR": str(tmp_path / "tmp")}
    root = tmp_path / "tmp" / f"worldtrace-mcp-{os.getuid()}"
    for n in ("0", "1"):
        (root / n / "work").mkdir(parents=True)
        (root / n / "work" / "f.txt").write_text("copied workdir")
    held = try_lock(root / "1.lock")  # a live sandbox holds slot 1
    try:
        dry = wt(env, "gc", "--dry-run")
        assert "would remove" in dry.stdout and f"{root / '0'}  (MCP episode folder" in dry.stdout
        assert str(root / "1") not in dry.stdout and (root / "0").exists()
        r = wt(env, "gc")
        assert r.returncode == 0, r.stderr
        assert not (root / "0").exists() and (root / "1" / "work" / "f.txt").exists()
        (root / "2").mkdir()  # --no-containers leaves the sandboxes' leftovers alone
        assert str(root / "2") not in wt(env, "gc", "--no-containers").stdout
        assert (root / "2").exists()
    finally:
        held.close()
