"""Collect: recorder and terminal steps against a bare `docker exec` loop; warm-pool reset."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from .common import Context, Row, fmt, measure


def collect(work: str) -> dict:
    import docker
    from worldtrace.collectors.actions import keystrokes, tool
    from worldtrace.collectors.recorder import Recorder
    from worldtrace.sandboxes.base import TaskSpec
    from worldtrace.sandboxes.docker import IDLE_COMMAND, DockerConfig
    from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
    from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox
    from worldtrace.schemas import Agent, Source

    steps = 40
    repo = Path(work) / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "a.txt").write_text("x\n")
    cfg = DockerConfig(warm=2)
    sb = SWESandbox(SWEConfig(docker=cfg, repo=str(repo)))
    sb.reset(TaskSpec("bench"))
    rec = Recorder(
        sb,
        Path(work) / "journals",
        source=Source(episode_id="b"),
        agent=Agent(name="bench"),
        task_id="b",
        instruction="",
    )
    rec.header(sb.reset(TaskSpec("bench")))
    start = time.perf_counter()
    for i in range(steps):
        rec.step(tool("bash", command=f"echo {i}"))
    ours = steps / (time.perf_counter() - start)
    container = sb.container
    start = time.perf_counter()
    for i in range(steps):
        container.exec_run(["sh", "-c", f"echo {i}"])
    bare = steps / (time.perf_counter() - start)
    sb.close()

    term = TerminalSandbox(TerminalConfig(docker=cfg))
    warm = []
    for _ in range(5):
        time.sleep(
            1.0
        )  # let the pool refill: this measures a warm reset, not a race with refilling
        t = time.perf_counter()
        term.reset(TaskSpec("bench"))
        warm.append((time.perf_counter() - t) * 1000)
    start = time.perf_counter()
    for i in range(steps):
        term.step(keystrokes(f"echo {i}\n"))
    pty = steps / (time.perf_counter() - start)
    term.close()

    client = docker.from_env()
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        c = client.containers.run(
            cfg.image, IDLE_COMMAND, labels={"worldtrace.sandbox": "1"}, **cfg.run_kwargs()
        )
        ex = client.api.exec_create(c.id, ["/bin/bash", "--norc", "-i"], stdin=True, tty=True)
        client.api.exec_start(ex["Id"], socket=True, tty=True)._sock.recv(100)
        cold.append((time.perf_counter() - t) * 1000)
        c.remove(force=True)
    return {
        "steps": steps,
        "ours_steps_s": ours,
        "bare_steps_s": bare,
        "pty_steps_s": pty,
        "warm_reset_ms": statistics.median(warm),
        "cold_reset_ms": statistics.median(cold),
    }


TASKS = {"collect": collect}


def run(ctx: Context) -> list[Row]:
    try:
        c = measure("bench_collect", "collect", str(ctx.work))
    except RuntimeError as exc:
        return [("collect", "-", "-", "-", f"docker unavailable: {str(exc)[-200:]}")]
    return [
        ("collect: recorder steps/s vs bare docker exec loop", f"{fmt(c['ours_steps_s'])} steps/s", f"{fmt(c['bare_steps_s'])} steps/s",
         f"{c['ours_steps_s'] / c['bare_steps_s']:.3f}", f"{c['steps']} one-shot bash steps (SWE tool) with journaling"),
        ("collect: terminal pty steps/s vs bare docker exec loop", f"{fmt(c['pty_steps_s'])} steps/s", f"{fmt(c['bare_steps_s'])} steps/s",
         f"{c['pty_steps_s'] / c['bare_steps_s']:.3f}", "persistent shell: one keystroke round trip per step"),
        ("collect: episode reset (warm pool) vs cold container start", f"{fmt(c['warm_reset_ms'])} ms", f"{fmt(c['cold_reset_ms'])} ms",
         f"{c['cold_reset_ms'] / c['warm_reset_ms']:.3f}", "median of 5; both open the terminal shell"),
    ]  # fmt: skip
