"""Running commands in sandbox containers: capped output, input on stdin, set-up.

Every command runs under `timeout -s KILL` inside the container, so neither a hang nor a
flood can hold the collector. Files go in through the container's own processes (`cat`
and `tar` reading stdin), not the engine's archive API: that API writes beneath tmpfs
mounts (where nothing inside sees it) and answers a read-only mount with an HTTP 500,
while a process in the container gets the environment's real answer (`Read-only file
system`, `No space left on device`, `Permission denied`).
"""

from __future__ import annotations

import io
import socket
import tarfile
import time
from collections.abc import Callable

from .base import SandboxError

INPUT_OUTPUT_CAP = 1 << 16
"""Bytes of output kept from a command fed on stdin (it writes files; it says little)."""


def _wrapped(cmd: list[str], timeout: float) -> list[str]:
    return ["timeout", "-s", "KILL", str(max(int(timeout), 1)), *cmd]


def _exit_code(api, exec_id: str, wait: float = 5.0) -> int:
    """The exit code of a finished exec (the engine may lag the end of the stream briefly)."""
    deadline = time.monotonic() + wait
    while True:
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return info["ExitCode"]
        if time.monotonic() > deadline:
            return info["ExitCode"] if info.get("ExitCode") is not None else -1
        time.sleep(0.01)  # polling the engine's state: there is no event to wait on


def exec_capture(
    container,
    cmd: list[str],
    timeout: float,
    cap: int,
    workdir: str | None = None,
    env: dict | None = None,
    user: str | None = None,
) -> tuple[int, str, bool, bool]:
    """Run a one-shot command: (exit code, output, truncated, timed_out)."""
    code, out, truncated, timed_out = exec_output(container, cmd, timeout, cap, workdir, env, user)
    return code, out.decode("utf-8", errors="replace"), truncated, timed_out


def _create(container, cmd: list[str], timeout: float, workdir, user, **opts) -> dict:
    """A docker exec of `cmd` bounded by `timeout` inside the container, output and
    errors on one stream."""
    return container.client.api.exec_create(
        container.id,
        _wrapped(cmd, timeout),
        stdout=True,
        stderr=True,
        workdir=workdir,
        user=user or "",
        **opts,
    )


def exec_output(
    container,
    cmd: list[str],
    timeout: float,
    cap: int,
    workdir: str | None = None,
    env: dict | None = None,
    user: str | None = None,
) -> tuple[int, bytes, bool, bool]:
    """Run a one-shot command: (exit code, output bytes, truncated, timed_out).

    Reading stops at `cap` bytes; the in-container timeout bounds what still runs.
    """
    api = container.client.api
    ex = _create(container, cmd, timeout, workdir, user, environment=env)
    started = time.monotonic()
    stream = api.exec_start(ex["Id"], stream=True, demux=False)
    chunks, size, truncated = [], 0, False
    for chunk in stream:
        if size + len(chunk) > cap:
            chunks.append(chunk[: cap - size])
            truncated = True
            break
        chunks.append(chunk)
        size += len(chunk)
    stream.close()
    if truncated:
        code = api.exec_inspect(ex["Id"]).get("ExitCode")  # may still run: do not wait
        code = -1 if code is None else code
    else:
        code = _exit_code(api, ex["Id"])
    timed_out = code == 137 and time.monotonic() - started >= timeout
    return code, b"".join(chunks), truncated, timed_out


def exec_input(
    container,
    cmd: list[str],
    data: bytes,
    timeout: float,
    workdir: str | None = None,
    user: str | None = None,
) -> tuple[int, str]:
    """Run a command with `data` on its stdin: (exit code, output)."""
    from docker.utils.socket import frames_iter

    api = container.client.api
    ex = _create(container, cmd, timeout, workdir, user, stdin=True)
    sock = api.exec_start(ex["Id"], socket=True)
    raw = sock._sock
    raw.settimeout(timeout + 10)
    try:
        try:
            raw.sendall(data)
            raw.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command ended without reading everything: its output says why
        out, size = [], 0
        for _, chunk in frames_iter(sock, tty=False):
            if size < INPUT_OUTPUT_CAP:
                out.append(chunk[: INPUT_OUTPUT_CAP - size])
                size += len(chunk)
    except TimeoutError as exc:
        raise SandboxError(f"command did not end within {timeout + 10:g}s: {cmd[0]}") from exc
    finally:
        sock.close()
    return _exit_code(api, ex["Id"]), b"".join(out).decode("utf-8", errors="replace")


def reason(output: str) -> str:
    """The system's reason in a failed command's message (`sh: 1: cannot create /x: Read-only
    file system` -> `Read-only file system`)."""
    line = output.strip().splitlines()[-1] if output.strip() else ""
    return line.rsplit(": ", 1)[-1] if line else "failed"


def write_file(
    container, path: str, data: bytes, timeout: float, user: str | None = None
) -> str | None:
    """Write a file as the container's processes would; None, or the system's reason."""
    code, out = exec_input(
        container, ["sh", "-c", 'cat > "$1"', "sh", path], data, timeout, user=user
    )
    return None if code == 0 else reason(out)


def copy_tree(container, host_dir: str, target: str, timeout: float) -> None:
    """Copy a host directory into the container at `target` (through `tar` in it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(host_dir, arcname=".")
    code, out = exec_input(
        container,
        ["sh", "-c", 'mkdir -p "$1" && tar -x -f - -C "$1"', "sh", target],
        buf.getvalue(),
        timeout,
        user="0",
    )
    if code != 0:
        raise SandboxError(f"cannot copy {host_dir} into the container: {out.strip()[-300:]}")


def root_runner(container, timeout: float, workdir: str | None = None) -> Callable[[str], str]:
    """A function running shell commands as root (conditions set the stage with it); a
    failure raises: it is our set-up failing, not the agent's action."""

    def run(command: str) -> str:
        code, out, _, _ = exec_capture(
            container, ["sh", "-c", command], timeout, 1 << 16, workdir, user="0"
        )
        if code != 0:
            raise SandboxError(f"condition set-up failed ({code}): {command[:200]}: {out[-300:]}")
        return out

    return run


def run_setup(container, commands, timeout: float, cap: int, workdir: str) -> None:
    """A task's set-up commands; the first failure is an environment error."""
    for cmd in commands:
        code, out, _, _ = exec_capture(container, ["sh", "-c", cmd], timeout, cap, workdir)
        if code != 0:
            raise SandboxError(f"task setup failed ({code}): {cmd}: {out[-500:]}")
