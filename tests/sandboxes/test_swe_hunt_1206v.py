"""SWE defects found in a hunt (12-06, v), against real containers.

- A unix socket nested inside a `mount: true` repository (two levels down) let the
  sandbox connect to the host service listening on it: only the repository's top level
  was looked at. Now a socket anywhere below it refuses the repository, at load and when
  an episode binds it (`swe.socket_below`).
- A `bash` command over 128 KiB recorded the engine's `exec /usr/bin/sh: argument list
  too long` as the command's output: a command line holds at most 128 KiB per argument
  (MAX_ARG_STRLEN). Such a command now runs as a shell runs it (`swe.shell_argv`).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from worldtrace.collectors.actions import tool
from worldtrace.sandboxes.base import SandboxConfigError, TaskSpec
from worldtrace.sandboxes.docker import DockerConfig
from worldtrace.sandboxes.swe import SWEConfig, SWESandbox
from worldtrace.schemas.parsing import ConfigError, parse

pytestmark = pytest.mark.docker

GREETING = b"HELLO-FROM-HOST-SERVICE\n"


@pytest.fixture
def short_repo():
    """A repository in a short path (a unix socket's path holds at most 107 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="wt-v-", dir="/tmp"))
    (root / "pkg").mkdir()
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def serve(path: Path) -> socket.socket:
    """A host service on a unix socket at `path` that greets whoever connects."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    path.chmod(0o777)
    srv.listen(4)

    def greet() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed by the test
                return
            with conn:
                conn.sendall(GREETING)

    threading.Thread(target=greet, daemon=True).start()
    return srv


def test_a_socket_deep_in_a_mounted_repository_is_refused_at_load(short_repo):
    """Found: `deep/er/s` passed the check that a top-level socket fails."""
    (short_repo / "deep" / "er").mkdir(parents=True)
    sock = short_repo / "deep" / "er" / "s"
    srv = serve(sock)
    try:
        with pytest.raises(ConfigError) as got:
            parse(SWEConfig, {"repo": str(short_repo), "mount": True})
        assert str(sock) in str(got.value), got.value
    finally:
        srv.close()


def test_a_socket_made_after_load_is_refused_when_the_episode_binds_it(docker_engine, short_repo):
    """A socket made after the job was loaded (a queued job) is refused when the episode
    would bind the repository: before, the agent read the host service's greeting."""
    s = SWESandbox(
        SWEConfig(docker=DockerConfig(step_timeout=10), repo=str(short_repo), mount=True)
    )
    (short_repo / "deep" / "er").mkdir(parents=True)
    sock = short_repo / "deep" / "er" / "s"
    srv = serve(sock)
    try:
        with pytest.raises(SandboxConfigError) as got:
            s.reset(TaskSpec("t"))
            probe = "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('deep/er/s'); print(s.recv(99))\""
            said = s.step(tool("bash", command=probe)).text
            pytest.fail(f"the episode started; the agent read {said!r}")
        assert str(sock) in str(got.value), got.value
    finally:
        srv.close()
        s.close()


def test_a_command_over_128_kib_runs_as_a_shell_runs_it(docker_engine, repo, monkeypatch):
    """Found: a 160 KB heredoc answered `exec /usr/bin/sh: argument list too long`,
    exit 1, as if the command had said it."""
    monkeypatch.setenv("c", "C")  # the job's variables, whatever their names (review)
    monkeypatch.setenv("p", "P")
    s = SWESandbox(SWEConfig(docker=DockerConfig(step_timeout=20, env=("c", "p")), repo=str(repo)))
    try:
        s.reset(TaskSpec("t"))
        body = "".join(f"line {i:06} {'x' * 87}\n" for i in range(1600))  # 160,000 bytes
        shown = 'wc -c big.txt; echo $0 $# "$c|$p"'
        o = s.step(tool("bash", command=f"cat > big.txt << 'EOF'\n{body}EOF\n{shown}"))
        assert (o.text, o.exit_code) == ("160000 big.txt\nsh 0 C|P\n", 0), o.text[:300]
        o = s.step(tool("bash", command="tail -n 1 big.txt"))
        assert o.text == f"line 001599 {'x' * 87}\n"
        # the shell's own answers, which `eval` (that joins the pieces) prefixes
        short = s.step(tool("bash", command="nosuchcommand"))
        long = s.step(tool("bash", command="nosuchcommand" + " " * 140_000))
        assert (short.text, short.exit_code) == ("sh: 1: nosuchcommand: not found\n", 127)
        assert (long.text, long.exit_code) == ("sh: 1: eval: nosuchcommand: not found\n", 127)
        over = s.step(tool("bash", command="#" * (2 << 20)))  # the tool's own limit
        assert over.is_error and over.text.startswith("error: the command is 2 MiB"), over.text
    finally:
        s.close()
