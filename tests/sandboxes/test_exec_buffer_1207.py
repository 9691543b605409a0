"""Found (CI 12-07, `test_a_stopped_worker_is_replaced`): an exec's output came back
empty now and then (`the engine lost the output of 'ls -A /' (exit 0): nothing came`), an
attempt failed and was retried for it, and a worker test counted one attempt too many.
Not the engine: docker's client reads an exec's stream from the socket past the buffer
its HTTP client read the response's headers through, and the stream's first bytes were
in that buffer whenever the engine sent them with the headers (docker/docker-py#3332):
35 of 1,500 `ls` execs six at a time on two busy cores, none through the `docker` CLI.

A socket proxy in front of the engine makes that case certain: it hands the engine's
answer on in one write once the engine is quiet, as a proxy or a slow network does
(`DOCKER_HOST` pointing at a docker socket proxy). Through it every exec of ours lost
its whole output before the fix (`exec_capture`, `exec_input`, the kill's verdict, a
terminal's first prompt). Real parts: the engine behind the proxy, docker's client, the
`worldtrace collect` a user runs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
import threading
from pathlib import Path

import docker
import pytest
from worldtrace.sandboxes.docker import ContainerPool, DockerConfig
from worldtrace.sandboxes.execs import (
    _kill_group,
    exec_capture,
    exec_input,
    exec_streams,
    frames,
    own_socket,
)
from worldtrace.schemas import read_records

from ..conftest import start_collect

pytestmark = pytest.mark.docker

ENGINE = "/var/run/docker.sock"
QUIET = 0.05
"""Seconds the engine must be quiet before the proxy hands on what it sent."""
UPGRADE_QUIET = 0.5
"""The same for an exec's answer (`101 UPGRADED`): long enough for the command's first
bytes to come (they come within milliseconds), so they are handed on with the headers."""


class CoalescingProxy:
    """A unix socket in front of the engine's: requests go on at once, answers come back
    in one write once the engine has been quiet `QUIET` s (`UPGRADE_QUIET` after an
    exec's headers), or 1 MiB is held."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.path)
        self.server.listen(64)
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed: the test is over
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(ENGINE)
            self.open += [client, engine]
            threading.Thread(target=self._up, args=(client, engine), daemon=True).start()
            threading.Thread(target=self._down, args=(engine, client), daemon=True).start()

    @staticmethod
    def _up(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)  # a command's stdin closed

    @staticmethod
    def _down(src: socket.socket, dst: socket.socket) -> None:
        held = bytearray()
        with contextlib.suppress(OSError):
            while True:
                src.settimeout(UPGRADE_QUIET if held.startswith(b"HTTP/1.1 101") else QUIET)
                try:
                    data = src.recv(1 << 16)
                except TimeoutError:
                    data = None
                if data:
                    held += data
                if held and (data is None or len(held) > 1 << 20 or not data):
                    dst.sendall(held)
                    held.clear()
                if data == b"":
                    dst.shutdown(socket.SHUT_WR)
                    return

    def close(self) -> None:
        self.server.close()
        for s in self.open:
            with contextlib.suppress(OSError):
                s.close()


@pytest.fixture
def proxy(tmp_path):
    p = CoalescingProxy(tmp_path / "docker.sock")
    yield p
    p.close()


@pytest.fixture(params=["worldtrace/debian:latest", "worldtrace/busybox:latest"])
def proxied(request, docker_engine, proxy):
    """A sandbox container, driven through the proxy."""
    pool = ContainerPool(DockerConfig(image=request.param, warm=0))
    client = docker.DockerClient(base_url=f"unix://{proxy.path}")
    try:
        yield client.containers.get(pool.acquire().id)
    finally:
        client.close()
        pool.close()


def test_a_short_command_keeps_its_output(proxied):
    code, out, truncated, timed_out = exec_capture(proxied, ["ls", "-A", "/"], 30, 1 << 16)
    assert (code, truncated, timed_out) == (0, False, False)
    assert {"bin", "etc", "proc"} <= set(out.split())


def test_output_and_errors_stay_apart(proxied):
    code, out, err, _, _ = exec_streams(
        proxied, ["sh", "-c", "echo out; echo err >&2; exit 3"], 30, 1 << 16
    )
    assert (code, out, err) == (3, b"out\n", b"err\n")


def test_a_command_fed_on_stdin_keeps_its_output(proxied):
    command = ["sh", "-c", "echo early; wc -c"]
    code, out, timed_out = exec_input(proxied, command, b"x" * 10, 30)
    assert (code, out.split(), timed_out) == (0, ["early", "10"], False)


def test_the_kill_at_a_timeout_is_seen(proxied):
    """The kill's `killed` was lost too: a command cut at its timeout was not `timed_out`."""
    code, _, truncated, timed_out = exec_capture(proxied, ["sleep", "30"], 1, 1 << 16)
    assert (code, truncated, timed_out) == (137, False, True)


def test_the_kill_says_whether_it_killed(proxied):
    api = proxied.client.api
    ex = api.exec_create(proxied.id, ["sh", "-c", "echo $$ > /tmp/g; exec sleep 1000"])
    api.exec_start(ex["Id"], detach=True)
    group = int(exec_capture(proxied, ["sh", "-c", "while ! cat /tmp/g; do :; done"], 10, 99)[1])
    assert _kill_group(proxied, group) is True


def test_a_terminal_and_an_swe_job_collect_through_a_socket_proxy(tmp_path, wt_env, proxy, repo):
    """`DOCKER_HOST` naming a proxy: every observation as the engine answered it."""
    env = {**wt_env, "DOCKER_HOST": f"unix://{proxy.path}"}
    for job in (
        {
            "name": "term",
            "sandbox": {"kind": "terminal", "docker": {"step_timeout": 10}},
            "tasks": [{"id": "t", "actions": ["echo one-$((40+2))\n", "ls -A /\n"]}],
        },
        {
            "name": "swe",
            "sandbox": {"kind": "swe", "repo": str(repo), "docker": {"warm": 0}},
            "tasks": [
                {
                    "id": "s",
                    "actions": [
                        {"tool": "bash", "arguments": {"command": "echo two-$((40+2))"}},
                        {"tool": "bash", "arguments": {"command": "ls -A /"}},
                    ],
                }
            ],
        },
    ):
        (tmp_path / job["name"]).mkdir()
        p = start_collect(tmp_path / job["name"], job, env)
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, (out, err)
    trajs = {t.domain: t for t in read_records(Path(wt_env["WORLDTRACE_STORE"]) / "raw")}
    assert sorted(trajs) == ["swe", "terminal"], json.dumps(sorted(trajs))
    for domain, first in (("terminal", "one-42"), ("swe", "two-42")):
        t = trajs[domain]
        assert t.outcome.status == "success", t.outcome
        observations = [turn.observation.text for turn in t.turns]
        assert first in observations[0], observations
        assert "proc" in observations[1] and "etc" in observations[1], observations
    # the shell's first prompt came with the engine's answer: it was lost, the reset waited
    # out its step timeout, and the episode's initial state had no `Prompt:` line
    initial = trajs["terminal"].system.initial_state
    assert re.search(r"^Prompt: \S", initial, re.M), initial


def test_what_is_read_ahead_is_what_the_client_had_buffered(proxied):
    """The bytes taken before any cap applies are the HTTP client's buffer at most: a
    loop draining the socket while it had bytes took a flood whole, past every cap."""
    api = proxied.client.api
    ex = api.exec_create(proxied.id, ["head", "-c", "20000000", "/dev/zero"])
    raw, ahead = own_socket(api.exec_start(ex["Id"], socket=True))
    try:
        assert 0 < len(ahead) <= io.DEFAULT_BUFFER_SIZE
        assert sum(len(data) for _, data in frames(raw, ahead)) == 20_000_000
    finally:
        raw.close()
