"""What of the host a sandbox shows its agent (found 2026-12-06, left by earlier notes):
`cat /etc/resolv.conf` in a terminal or SWE episode printed the collecting machine's
nameservers (docker copies the host's file into every container, `network_mode: none`
too), the host's infrastructure in the recorded observations and per-machine noise in
text that should depend on the episode alone. Real containers on the real engine."""

from __future__ import annotations

from pathlib import Path

from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import TaskSpec
from worldtrace.sandboxes.docker import NAMESERVER, DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox


def host_nameservers() -> list[str]:
    text = Path("/etc/resolv.conf").read_text() if Path("/etc/resolv.conf").exists() else ""
    return [line.split()[1] for line in text.splitlines() if line.startswith("nameserver ")]


def test_a_sandbox_names_no_nameserver_of_the_host(docker_engine, repo):
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=10, warm=0), repo=str(repo)))
    s.reset(TaskSpec("resolv"))
    try:
        o = s.step(tool("bash", command="cat /etc/resolv.conf"))
        # the loopback address glibc takes when the file names none: nothing answers there
        # (no network), as nothing answered before, and the same text on every machine
        assert o.text == f"nameserver {NAMESERVER}\n"
        assert not any(ns in o.text for ns in host_nameservers() if ns != NAMESERVER)
        o = s.step(tool("bash", command="getent hosts example.com; echo status $?"))
        assert o.text == "status 2\n"  # not found, at once: nothing resolves in a sandbox
    finally:
        s.close()
