"""A terminal in a process that holds more than 1,024 descriptors (found 2026-12-06 in CI:
a test worker process that had run ~2,000 tests held sockets past 1023, and every later
terminal reset failed with `ValueError: filedescriptor out of range in select()`; a
worker that runs many jobs, each pool with its docker client's connections, gets there
too). The terminal waits on its socket by poll now. A real shell in a real container;
the descriptors are real ones (/dev/null opened ~1,100 times)."""

from __future__ import annotations

import os
import resource
import select
import socket
import subprocess
import sys

import pytest
from worldtrace.collectors.actions import keystrokes
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.terminal import TerminalConfig, TerminalSandbox, ready

MANY = 1100


NEEDED = 2048
"""Descriptors the cases need open at once (fd 1500; 1,100 more than a process holds)."""


@pytest.fixture
def room():
    """The process may open `NEEDED` descriptors: its limit raised for the test (set-up
    runs as root, which may raise the hard one too), then put back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new_hard = hard if hard == resource.RLIM_INFINITY else max(hard, NEEDED)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, NEEDED), new_hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def many_descriptors(room):
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(MANY)]
    try:
        yield
    finally:
        for fd in fds:
            os.close(fd)


def test_the_terminal_s_wait_works_past_descriptor_1023(room):
    """The shell's socket at a descriptor past select's reach (a real socket pair, one
    end moved to 1500): select raises, the terminal's wait answers."""
    a, b = socket.socketpair()
    high = socket.socket(fileno=os.dup2(a.fileno(), 1500))
    try:
        with pytest.raises(ValueError, match="filedescriptor out of range"):
            select.select([high], [], [], 0)
        assert ready(high, 0, write=True) == (False, True)
        b.send(b"x")
        assert ready(high, 5) == (True, False)
        b.close()
        assert high.recv(1) == b"x" and ready(high, 5)[0] and high.recv(1) == b""  # hangup
    finally:
        for sock in (a, b, high):
            sock.close()


def test_a_terminal_works_in_a_process_holding_many_descriptors(docker_engine, many_descriptors):
    """End to end, with 1,100 descriptors open (the shell's socket lands past 1023 unless
    a lower one was freed meanwhile: the case above pins it)."""
    s = TerminalSandbox(TerminalConfig(docker=DockerConfig(step_timeout=20, warm=0)))
    try:
        s.reset(TaskSpec("t"))
        o = s.step(keystrokes("echo $((6*7))\n"))
        assert "42" in o.text.splitlines(), o.text
    finally:
        s.close()


POOLS = """
import os
from worldtrace.sandboxes.docker import DockerConfig, shared_pool

def sockets():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # the listing's own descriptor, gone when read
            pass
    return n

pools = [shared_pool(DockerConfig(step_timeout=300 + i, warm=0)) for i in range(8)]
first = sockets()
pools += [shared_pool(DockerConfig(step_timeout=400 + i, warm=0)) for i in range(8)]
print(len({id(p) for p in pools}), len({id(p.client) for p in pools}), sockets() - first)
"""


def test_pools_of_many_configurations_share_one_client(docker_engine):
    """Why a process got there: each pool (one per configuration) made its own docker
    client and kept its connections for the life of the process, ~5 sockets a pool at
    once and ~20 once used; 8 configurations more held ~40 more. Now one client serves
    them. In a fresh interpreter: no other test's threads open sockets meanwhile."""
    r = subprocess.run([sys.executable, "-c", POOLS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pools, clients, more = map(int, r.stdout.split())
    assert (pools, clients) == (16, 1) and more <= 2, r.stdout
