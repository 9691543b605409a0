"""Running commands in sandbox containers: capped output, input on stdin, set-up.

Nothing of ours runs beside the agent's processes: an exec is the command's own shell,
started by the engine, leading a session of its own (`ps` inside shows `sh -c COMMAND`
with parent 0 and nothing above it, as a real machine shows its shells, never a wrapper
of ours). Its first act reports its pid, the id of that session and process group, on
stderr (`SESSION`), and then becomes the command. Neither a hang nor a flood holds the
collector: a command still running at its step timeout, or whose output passes the cap,
is killed with its process group from outside, by a second exec (`KILL_GROUP`), there and
then: nothing of it runs on into the next step. A command the cap cut while it ran has
exit code None (we stopped it; the command did not fail); one that had ended by itself,
its last output just past the cap, keeps its own exit code; one cut at its timeout exits
137 and is reported `timed_out`. The engine starts every process in `/`, which always exists;
a command's working directory is entered by a shell inside (`cd`), so a directory the
agent deleted is the shell's matter, not a runc `chdir` failure. When the engine cannot
start a process at all (its exec never got a pid: `OCI runtime exec failed: ...`), that is
our failure and raises SandboxError: it is never returned as a command's output.

A container that stops under a command (killed or removed from outside, its init
OOM-killed) is our infrastructure failing too, never the command's answer: SandboxError
with the container's state (`the container stopped under the command: exited (exit code
137, OOM killed: False)`). Its commands die by SIGKILL (exit 137), as a command the agent
kills, the kernel OOM-kills in a still-running container, or its step timeout cuts off does, and
the engine records the container's end a moment after the exec's: so only an exec that
ended by a signal (or with no status), or an engine error, costs a look at the container:
a probe exec (`_alive`) answers at once while it runs, else its state is awaited.
A container restarted under a command (`docker restart`) killed it the same way and then
runs on without the episode's processes and tmpfs: its start time, against the one the
pool recorded, is looked at then too, and a restart raises SandboxError (`the container
was restarted under the episode (...)`); so does any later look at its state. A restart
between two steps is seen by the next exec: each says when PID 1 started (`SESSION`,
`check_init`).

A container frozen under a command (`docker pause`, a frozen cgroup) answers nothing and
runs no kill: no answer is our infrastructure failing too, never a timeout of the
command. Only a command still running at its step timeout costs more than its own exec
(an `exec_inspect`, the kill), and only one still running past it (by `WATCH` seconds) a
look at the container (`not_running`), again every `WATCH` seconds while it runs on; one
found not running then (paused, stopped, restarting, gone) ends the step with
SandboxError (`the container is paused (docker pause or a frozen cgroup)`), and so does
one found so when a command comes back timed out.

Files go in through the container's own processes (`cat` and `tar` reading stdin), not
the engine's archive API: that API writes beneath tmpfs mounts (where nothing inside sees
it) and answers a read-only mount with an HTTP 500, while a process in the container gets
the environment's real answer (`Read-only file system`, `No space left on device`,
`Permission denied`).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import mmap
import os
import re
import secrets
import shlex
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .base import SandboxConfigError, SandboxError

INPUT_OUTPUT_CAP = 1 << 16
"""Bytes of output kept from a command fed on stdin (it writes files; it says little)."""

ARG_BYTES = 128 << 10
"""The longest argument a command line holds (Linux's MAX_ARG_STRLEN, NUL included): a
shell command at least this long cannot be `sh -c`'s argument (`shell_argv`)."""
ARG_CHUNK = 30_000
"""Characters of a long command per argument (at most 4 bytes each: under `ARG_BYTES`)."""
LONGEST_COMMAND = 1 << 20
"""Bytes of the longest shell command (a `bash` tool call, a task's set-up command): its
arguments together, with the environment, must fit Linux's ARG_MAX (2 MiB under
docker's default 8 MiB stack)."""
JOINED = 'wt_c=; for wt_p do wt_c=$wt_c$wt_p; done; unset wt_p; set --; eval "unset wt_c; $wt_c"'
"""Run the command whose pieces are the arguments: joined, then `eval`ed by the same
shell, with no argument and no variable of ours left (`$0` is `sh`, `$#` 0, as under
`sh -c`)."""


def command_bytes(command: str) -> int:
    """Bytes of `command` on a command line (`LONGEST_COMMAND`, `ARG_BYTES`)."""
    return len(command.encode("utf-8", errors="surrogatepass"))


def shell_argv(command: str) -> list[str]:
    """The exec that runs `command` as `sh -c` runs it. One of 128 KiB or more cannot be
    one argument (the engine answered `exec /usr/bin/sh: argument list too long`, which
    was recorded as the command's output): it goes in pieces the shell joins and `eval`s
    (`JOINED`), so only the shell's own error messages differ (`eval:` before them)."""
    if command_bytes(command) < ARG_BYTES:
        return ["sh", "-c", command]
    pieces = [command[i : i + ARG_CHUNK] for i in range(0, len(command), ARG_CHUNK)]
    return ["sh", "-c", JOINED, "sh", *pieces]


def human(n: int) -> str:
    """1048576 -> `1 MiB` (what the initial state and errors say)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


ENTER = 'cd -- "$1" || exit; shift; exec "$@"'
"""Enter directory `$1`, then become the command: a directory that cannot be entered fails
the command (our set-up commands: a missing directory is our mistake)."""
ENTER_OR_ROOT = 'cd -- "$1" 2>/dev/null || cd /; shift; exec "$@"'
"""Enter directory `$1`, or `/` when it is gone (the agent deleted it): the command still
runs, as in a shell whose directory was removed under it."""


SESSION = (
    'command -v "$1" >/dev/null || exit 127; '
    "read -r s 2>/dev/null </proc/1/stat; s=${s##*) }; i=0; "
    "while [ $i -lt 19 ]; do s=${s#* }; i=$((i + 1)); done; "
    'echo "$$ ${s%% *}" >&2; exec "$@"'
)
"""Say the exec's pid on stderr (its first line), then become the command. Docker starts
every exec as a session leader, so that pid is also the id of the process group of the
command and its children: what is killed at the step timeout or when the output passes
the cap. No pid line means the command could not start (its program is gone): our
failure. After the pid, the start time of the container's PID 1 (field 22 of
`/proc/1/stat`, read with shell builtins only: no process more): a container restarted
between two steps has a new one (`INIT_START`). The shell that runs this `exec`s the
command (it keeps the pid): nothing of it is left for the agent's `ps` to show."""

MERGED = SESSION.replace('exec "$@"', 'exec "$@" 2>&1')
"""`SESSION` with the command's errors sent where its output goes, after the session line
(which stays on stderr): one pipe keeps the order the command wrote in, as a terminal or
`sh -c '...' 2>&1` shows it. Docker reads a command's stdout and stderr on two pipes and
keeps no order between them: `echo out; echo err >&2` came back either way round."""

INIT_START = "WorldtraceInitStart"
"""Where a container's `attrs` keep the start time of its PID 1 its first exec said: a
later exec saying another is one in a container restarted since (with no command in
flight, nothing else tells), which `check_init` then asks docker about."""


def _wrapped(
    cmd: list[str], workdir: str | None, fallback: bool, merged: bool = False
) -> list[str]:
    """`cmd` entering `workdir` and saying its session first (`SESSION`; `MERGED`: its
    errors on its output): each shell of ours `exec`s the next, so only the command's own
    process is left. No `timeout` runs beside it (the agent's `ps` would show it): the
    step timeout is kept from outside (`_Watch`)."""
    if workdir:
        cmd = ["sh", "-c", ENTER_OR_ROOT if fallback else ENTER, "sh", workdir, *cmd]
    return ["sh", "-c", MERGED if merged else SESSION, "sh", *cmd]


def _session_line(head: bytes) -> tuple[int, bytes, bytes] | None:
    """(process group, PID 1's start time, what follows) of stderr that begins with the
    session line (`SESSION`), or None while that line is incomplete. A first line that is
    no pid (the engine's own error) is not ours: group 0, and all of it follows."""
    line, nl, rest = head.partition(b"\n")
    if not nl:
        return None
    pid, _, init = line.partition(b" ")
    return (int(pid), init, rest) if pid.isdigit() else (0, b"", head)


def _exit_code(
    container, exec_id: str, cmd: list[str], output: bytes, wait: float = 5.0, probe: bool = False
) -> int:
    """The exit code of a finished exec (the engine may lag the end of the stream briefly).

    An exec that never got a process (pid 0) and failed is the engine's failure to start
    it (runc: `OCI runtime exec failed: ...`, an unknown user, a missing `sh`):
    SandboxError with the engine's message, which `output` holds, or with the container's
    state when it stopped (`cannot exec in a stopped state`); a `probe` just raises."""
    api = container.client.api
    deadline = time.monotonic() + wait
    while True:
        info = api.exec_inspect(exec_id)
        done = not info.get("Running") and info.get("ExitCode") is not None
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.01)  # polling the engine's state: there is no event to wait on
    code = info["ExitCode"] if info.get("ExitCode") is not None else -1
    if done and code != 0 and info.get("Pid", -1) == 0:  # an engine without pids: no verdict
        if probe:
            raise SandboxError(f"the probe did not start (exit {code})")
        _cannot_start(container, cmd, code, output)
    return code


def own_socket(hijacked) -> tuple[socket.socket, bytes]:
    """A descriptor of our own for the socket an exec hijacked (`exec_start(socket=True)`),
    and the stream's bytes the HTTP client had read already, to be read first.

    The client read the response's headers through a buffer, which may hold the stream's
    first bytes too when the engine sent them at once; docker's client reads the socket
    past that buffer, and they were lost (docker/docker-py#3332, #425): `nothing came, not
    even the line every command of ours prints first`, 35 of 1,500 `ls` execs six at a
    time on two busy cores, taken for months for the engine's loss (the `docker` CLI,
    which keeps its buffer, lost none of 1,500). They are taken out of the buffer here,
    without waiting for more.

    docker's client keeps that socket in a reference cycle with its HTTP response (the
    response, its reader, the socket's file object), and when the cycle collector
    finalizes the response first, the response closes its connection and the socket with
    it: found in CI as a terminal step's `file descriptor cannot be a negative integer`
    (1 exec in 400 in a loop). The client's objects are closed here, at once; the
    duplicate is closed by its holder alone (closing one descriptor ends no stream)."""
    raw = hijacked._sock
    buffered = getattr(getattr(hijacked._response.raw, "_fp", None), "fp", None)
    ahead = b""
    if buffered is not None:
        timeout = raw.gettimeout()
        # one peek: all the buffer holds, or (empty) one read of what the socket has, never
        # waited for; not a loop, which a flood (`yes`) would feed past every output cap
        raw.setblocking(False)
        try:
            ahead = buffered.peek()
            ahead = buffered.read(len(ahead)) if ahead else b""
        except BlockingIOError:
            ahead = b""
        finally:
            raw.settimeout(timeout)
    own = raw.dup()
    hijacked._response.close()
    return own, ahead


STDERR = 2
"""The stream number of an exec's errors in docker's frames (1 is its output)."""
FRAME_HEADER = struct.Struct(">BxxxL")
"""docker's header of a frame of a multiplexed (no tty) stream: its stream, its size."""


def frames(raw: socket.socket, ahead: bytes = b"") -> Iterator[tuple[int, bytes]]:
    """(stream, bytes) of an exec's multiplexed stream on `raw`, `ahead` (`own_socket`)
    first, to the stream's end: a frame the end cut short comes as it stands. Ours, not
    docker's `frames_iter`, which reads the socket only (a `poll` on it waits for bytes
    that are already in `ahead`)."""
    buf, ended = bytearray(ahead), False

    def fill(n: int) -> None:
        nonlocal ended
        while len(buf) < n and not ended:
            chunk = raw.recv(max(n - len(buf), 1 << 16))
            ended = not chunk
            buf.extend(chunk)

    while True:
        fill(FRAME_HEADER.size)
        if len(buf) < FRAME_HEADER.size:
            return
        stream, size = FRAME_HEADER.unpack_from(buf)
        end = FRAME_HEADER.size + size
        fill(end)
        data = bytes(buf[FRAME_HEADER.size : end])
        del buf[:end]
        yield stream, data


def exec_output(container, exec_id: str) -> bytes:
    """The whole output (both streams) of a short exec of ours, read as every exec's is
    (`own_socket`: `exec_start`'s own answer lost it as docker's streams did)."""
    raw, ahead = own_socket(container.client.api.exec_start(exec_id, socket=True))
    try:
        return b"".join(data for _, data in frames(raw, ahead))
    finally:
        raw.close()


def exec_capture(
    container,
    cmd: list[str],
    timeout: float,
    cap: int,
    workdir: str | None = None,
    env: dict | None = None,
    user: str | None = None,
    fallback: bool = False,
    checked: bool = False,
) -> tuple[int | None, str, bool, bool]:
    """Run a one-shot command: (exit code, output, truncated, timed_out). Output and
    errors come on one pipe, in the order the command wrote them (`MERGED`); at `cap`
    bytes the command is killed (code None if it still ran, as `exec_streams`)."""
    code, out, _, truncated, timed_out = exec_streams(
        container, cmd, timeout, cap, workdir, env, user, fallback, separate=False, checked=checked
    )
    return code, text_of(out, truncated), truncated, timed_out


def text_of(out: bytes, cut: bool) -> str:
    """A command's output as text (bytes that are not UTF-8 as U+FFFD); output `cut` at
    a cap drops the character the cut split, as `swe.capped` does, where U+FFFD would
    stand for bytes the command never wrote wrong (`print('é' * 3000)` ended `éé\ufffd`)."""
    if not cut:
        return out.decode("utf-8", errors="replace")
    return codecs.getincrementaldecoder("utf-8")("replace").decode(out, final=False)


def _create(
    container, cmd: list[str], workdir, user, fallback: bool = False, merged=False, **opts
) -> dict:
    """A docker exec of `cmd`, started in `/` and entering `workdir` itself (or `/` when it
    is gone, with `fallback`), saying its process group first (`SESSION`; `merged`: its
    errors on its output, `MERGED`)."""
    return container.client.api.exec_create(
        container.id,
        _wrapped(cmd, workdir, fallback, merged),
        stdout=True,
        stderr=True,
        workdir="/",
        user=user or "",
        **opts,
    )


STOP_WAIT = 5.0
"""Seconds the engine may take to record the end of a container that refused a probe."""
DRAIN_WAIT = 5.0
"""Seconds a command past its cap is read on (its output dropped): for its session line,
and to the end of its stream while its group is killed (`_kill_beside`)."""
WATCH = 2.0
"""Seconds past its step timeout a command may run before its container's state is looked
at (and again every `WATCH` seconds after): the kill at the timeout ends it by then,
unless the container is frozen (no exec runs in it)."""
FROZEN = "the container is paused (docker pause or a frozen cgroup)"


def state_problem(state: dict) -> str | None:
    """Why a container in docker's `State` does not run normally (paused, stopped,
    restarting, dead), or None when it runs: `the container is paused (docker pause or a
    frozen cgroup)`, `the container exited (exit code 137, OOM killed: False)`."""
    if state.get("Paused"):
        return FROZEN
    if state.get("Running") and not state.get("Restarting"):
        return None
    status = state.get("Status") or "stopped"
    return (
        f"the container {status if status == 'exited' else 'is ' + status} "
        f"(exit code {state.get('ExitCode')}, OOM killed: {state.get('OOMKilled')})"
    )


RESTARTED = "the container was restarted under the episode"


def restarted(container, state: dict) -> str | None:
    """`the container was restarted under the episode (...)` when docker started it again
    since the pool started it (`docker restart`, a restart policy: `StartedAt` moved), or
    None. Its processes and tmpfs are gone and it runs on: what it answers now would pass
    for the episode's environment. The first start is the one `ContainerPool` recorded in
    `container.attrs`; a container without that record is never called restarted."""
    first = (container.attrs.get("State") or {}).get("StartedAt") or ""
    now = state.get("StartedAt") or ""
    if first.startswith("0001-") or not first or not now or now == first:
        return None
    return f"{RESTARTED} (started at {first}, again at {now})"


RESTART_WAIT = 1.0
"""Seconds a container found exited is watched for starting again: `docker restart` stops
it first, and the reason then is the restart, not the stop (costs only a failing step)."""


def raise_if_restarting(container, state: dict) -> None:
    """Raise SandboxError naming the restart when the container in `state` was restarted,
    or, found exited, starts again within `RESTART_WAIT` seconds; else return."""
    deadline = time.monotonic() + RESTART_WAIT
    while True:
        again = restarted(container, state)
        if again:
            raise SandboxError(again)
        if state.get("Status") != "exited" or time.monotonic() > deadline:
            return
        time.sleep(0.02)  # polling the engine's state: there is no event to wait on
        try:
            state = container.client.api.inspect_container(container.id)["State"]
        except Exception:  # gone meanwhile: no restart to name
            return


def check_init(container, start: bytes) -> None:
    """Raise SandboxError (`restarted`) when the container's PID 1 started at another
    time than at its first exec (`SESSION`, `INIT_START`): docker restarted it between
    two steps. A start time that cannot be read (another `/proc`) is not checked; a
    different one in a container docker does not call restarted (the pool started it
    again and recorded that start) becomes the new reference."""
    if not start.isdigit():
        return
    seen = container.attrs.setdefault(INIT_START, start)
    if seen == start:
        return
    try:
        state = container.client.api.inspect_container(container.id)["State"]
    except Exception as exc:  # docker.errors.NotFound and engine errors alike
        raise SandboxError(f"the container is gone ({exc})") from exc
    raise_if_restarting(container, state)
    container.attrs[INIT_START] = start


def not_running(container) -> str | None:
    """Why the container does not run normally now (`state_problem`, `restarted`, or `the
    container is gone (...)`), or None: one look at docker's state, for a step that got no
    answer (the terminal's prompt did not come, a command timed out), never for every step."""
    try:
        state = container.client.api.inspect_container(container.id)["State"]
    except Exception as exc:  # docker.errors.NotFound and engine errors alike
        return f"the container is gone ({exc})"
    return state_problem(state) or restarted(container, state)


def check_running(container, what: str) -> None:
    """Raise SandboxError (`what: the container is paused ...`) when the container does
    not run normally: `what` got no answer because of the infrastructure, not the
    environment."""
    trouble = not_running(container)
    if trouble:
        raise SandboxError(f"{what}: {trouble}")


def _stopped(container, wait: float = 0.0) -> str | None:
    """How the container stopped (`exited (exit code 137, OOM killed: False)`, `is gone
    (...)`), or None when it still runs after `wait` seconds; SandboxError when it runs
    again after a restart (`restarted`: its stop may have come and gone between looks)."""
    api = container.client.api
    deadline = time.monotonic() + wait
    while True:
        try:
            state = api.inspect_container(container.id)["State"]
        except Exception as exc:  # docker.errors.NotFound and engine errors alike
            return f"is gone ({exc})"
        raise_if_restarting(container, state)
        if not state.get("Running") or state.get("Paused") or state.get("Restarting"):
            return (
                f"{state.get('Status', 'stopped')} (exit code {state.get('ExitCode')}, "
                f"OOM killed: {state.get('OOMKilled')})"
            )
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)  # polling the engine's state: there is no event to wait on


def _no_session_line(
    container, cmd: list[str], code: int, output: bytes, checked: bool = False
) -> None:
    """A command that ended `code` without its session line. The wrapper's own `exit 127`
    (`SESSION`: the command's program is gone) is our failure (`_cannot_start`). Otherwise
    the wrapper ran (the exec got a process, `_exit_code`) and the line was lost on its
    way. With output, the status and the output are the command's (`grep -c` printing
    `0`, exit 1, was failed as `docker could not start the command`). With nothing on
    either stream the whole stream was lost, the status intact: until 12-07 docker's
    client dropped a stream's first bytes now and then (`own_socket`), 2 of 1,500 `ls -A /`
    execs under load, read before that as an empty answer of the environment (an SWE
    step's `ls -A` recorded as printing nothing). What the command printed cannot be
    known: our failure, unless the caller is `checked` (it reads no output, or checks it).
    What the line would have told, a restart under the episode, is looked for all the
    same."""
    if code == 127:
        _cannot_start(container, cmd, code, output)
    check_running(container, "the command's session line was lost")
    if not output and not checked:
        raise SandboxError(
            f"the output of {shlex.join(cmd)[:200]!r} was lost (exit {code}): nothing came, "
            "not even the line every command of ours prints first"
        )


PROGRAM_MISSING = re.compile(
    rb'exec: "[^"]*": (?:executable file not found|stat [^\n]*: no such file or directory)'
)
"""runc's words for a program the container's file system lacks (`exec: "sh":
executable file not found in $PATH`, a path: `exec: "/bin/sh": stat /bin/sh: no such
file or directory`): it looked there, so the container runs (a dying one's `no such file`
names its /proc entries, not the program)."""


def _cannot_start(container, cmd: list[str], code: int, output: bytes) -> None:
    """Raise SandboxError: docker could not start `cmd` (its reason in `output`), or the
    container stopped under it (the runtime refuses execs of a dying container). A
    program the runtime found missing needs no probe: the probe runs `sh`, which may be
    the missing program, and a failed probe waited `STOP_WAIT` for a stop that never
    came (5 s a step once the agent removed `sh`)."""
    if not PROGRAM_MISSING.search(output) and not _alive(container):
        how = _stopped(container, STOP_WAIT)
        if how:
            raise SandboxError(f"the container stopped under the command: {how}")
    said = output.decode("utf-8", errors="replace").strip()[-500:]
    raise SandboxError(
        f"docker could not start the command {cmd[0]!r} (exit {code})"
        + (f": {said}" if said else "")
    )


def _alive(container) -> bool:
    """Whether the container still starts processes: a probe (`sh -c :` as root). The
    kernel ends a container's init before its other processes, so once an exec died with
    it, the runtime refuses the probe even while the engine still says `running`."""
    import docker.errors

    api = container.client.api
    try:
        ex = api.exec_create(container.id, ["sh", "-c", ":"], user="0", workdir="/")
        api.exec_start(ex["Id"])
        return _exit_code(container, ex["Id"], ["sh"], b"", probe=True) == 0
    except (docker.errors.APIError, SandboxError):
        return False


def _check_stopped(container, code: int | None) -> None:
    """Raise SandboxError when the container stopped (or was restarted) under a command
    that ended with `code`: looked at only for a kill (above 128) or no status (negative).
    A probe the container runs then and one look at its start time clear it (the
    command's own death is the answer): a restarted container runs probes too."""
    if code is None or 0 <= code <= 128:
        return
    if _alive(container) and _stopped(container) is None:  # raises on a restart
        return
    how = _stopped(container, STOP_WAIT)
    if how:
        raise SandboxError(f"the container stopped under the command: {how}")


@contextlib.contextmanager
def _engine(container):
    """An engine error while running a command (`409 ... is not running`, a runtime
    that lost the task): when the container stopped, SandboxError with its state."""
    import docker.errors

    try:
        yield
    except docker.errors.APIError as exc:
        if not_running(container) == FROZEN:  # `409 ... is paused, unpause the container`
            raise SandboxError(f"{FROZEN}; docker: {exc}") from exc
        how = _stopped(container, STOP_WAIT)
        if how:
            raise SandboxError(f"the container stopped: {how}; docker: {exc}") from exc
        raise


KILL_GROUP = """G="$1"
alive() {
  for f in /proc/[0-9]*/stat; do
    read -r line < "$f" 2>/dev/null || continue
    rest=${line##*) }
    set -- $rest
    if [ "$3" = "$G" ] && [ "$1" != Z ]; then return 0; fi
  done
  return 1
}
alive || exit 0
echo killed
kill -s KILL -- "-$G" 2>/dev/null || kill -s KILL "-$G" 2>/dev/null
i=0
while alive && [ "$i" -lt 100 ]; do
  sleep 0.01
  i=$((i + 1))
done"""
"""Kill process group `$1`, saying `killed` when a process of it still ran (not a zombie:
`/proc/PID/stat` has the state, then the process group, after the name), then wait, at most
~1 s, until only zombies are left of it: a SIGKILL is delivered, not waited for, and the
next step must not see the command still running. The look, not `kill`'s status, says
`killed`: dash wants `--` before a negative pid, busybox refuses it and kills the group all
the same, and a zombie not yet reaped takes a signal as if it ran."""


def _kill_group(container, group: int) -> bool:
    """Kill the process group `group` in the container (as root): whether a process of it
    was left to kill (gone already is fine)."""
    api = container.client.api
    cmd = ["sh", "-c", KILL_GROUP, "sh", str(group)]
    return b"killed" in exec_output(
        container, api.exec_create(container.id, cmd, user="0", workdir="/")["Id"]
    )


def _kill_beside(container, group: int) -> Callable[[], bool]:
    """Kill process group `group` in a thread of its own while the caller reads on: a wait
    for whether a process of the group still ran (False: the command had ended by itself).
    The read must go on to the stream's end. The engine handles a finished exec only once
    its output is read, and every later exec in the container waits behind it (the kill
    too: unread, both hung for good); and a stream closed before its end makes the engine
    kill the exec's process and record exit 126, even for one that had ended: a command
    just past the cap came back 126, or None by the race of a look, not its own status."""
    done: list[bool] = []

    def kill() -> None:
        with contextlib.suppress(Exception):  # a stopped container: its exit code says so
            done.append(_kill_group(container, group))

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()

    def wait() -> bool:
        thread.join(DRAIN_WAIT)
        return bool(done and done[0])

    return wait


def exec_streams(
    container,
    cmd: list[str],
    timeout: float,
    cap: int,
    workdir: str | None = None,
    env: dict | None = None,
    user: str | None = None,
    fallback: bool = False,
    separate: bool = True,
    checked: bool = False,
) -> tuple[int | None, bytes, bytes, bool, bool]:
    """Run a one-shot command: (exit code, stdout, stderr, truncated, timed_out).

    A stream lost whole is our failure (`_no_session_line`), unless the caller
    is `checked`: it reads no output, or checks it itself (an end mark, a retried probe).

    With `separate` the command's errors are kept apart from its output (so a reason is
    never read out of a file's content); else both are in the first. Output is kept until
    either passes `cap` bytes (`truncated`): a command still running then is killed with
    its process group, and its code is None (it did not end by itself); one that had
    ended keeps its own (`_kill_beside`: found so by the kill). One still running
    `timeout` seconds after it began is killed with its process group too (`_Watch`):
    exit 137, `timed_out`.
    """
    with _engine(container):
        return _streams(
            container, cmd, timeout, cap, workdir, env, user, fallback, separate, checked
        )


class _Watch:
    """Keeps a command's step timeout from outside, and looks at the container when the
    command does not end.

    `timeout` seconds after the command began (its session line came: `started`), a
    command still running is killed with its process group (`KILL_GROUP`, a second exec:
    `killed`). One that ended by itself is left alone, and so is what it left holding its
    output (a background job: the engine ends such a stream by itself). Past the timeout
    by `WATCH` seconds, then every `WATCH` seconds, a command still unanswered costs a
    look at the container: found not running (frozen, stopped), `close` is called, so the
    read waiting on the command's stream ends, and `why` says so. A command that ends in
    time costs a thread that waits on an event: no look, no exec."""

    def __init__(self, container, exec_id: str, close: Callable[[], object], timeout: float):
        self.container, self.exec_id, self.close = container, exec_id, close
        self.timeout = timeout
        self.why: str | None = None
        self.group: int | None = None
        self.killed = False
        self._since = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def started(self, group: int) -> None:
        """The command's session line came: its process group, and the start of its time
        (a command is never cut before `timeout`)."""
        self.group, self._since = group, time.monotonic()

    def _run(self) -> None:
        while (left := self._since + self.timeout - time.monotonic()) > 0:
            if self._stop.wait(left):
                return
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                if not self.killed and self.group:
                    self.killed = self._kill(self.group)
            if self._stop.wait(WATCH):
                return
            with self._lock:
                if self._stop.is_set():
                    return
                why = not_running(self.container)
                if why:
                    self.why = why
                    with contextlib.suppress(Exception):  # closed already is fine
                        self.close()
                    return

    def _kill(self, group: int) -> bool:
        try:
            if not self.container.client.api.exec_inspect(self.exec_id).get("Running"):
                return False
            return _kill_group(self.container, group)
        except Exception:  # a frozen or stopped container runs no exec: the look says why
            return False

    def stop(self) -> bool:
        """Stop watching: whether the watch closed the stream (`why` says why)."""
        with self._lock:
            self._stop.set()
        return self.why is not None

    def no_answer(self, started: float) -> SandboxError:
        """The step's error when the watch closed the stream (`why`)."""
        waited = time.monotonic() - started
        return SandboxError(
            f"the command got no answer in {waited:.0f}s (step timeout {self.timeout:g}s): "
            f"{self.why}"
        )


def _begun(container, watch: _Watch, head: bytes) -> tuple[int, bytes] | None:
    """(process group, what follows) once stderr's first bytes `head` hold the session
    line (`_session_line`), else None: the command's step timeout runs from here, and a
    container restarted since the last exec is a reset sandbox (`check_init`)."""
    got = _session_line(head)
    if got is None:
        return None
    group, init, rest = got
    if group:
        watch.started(group)
        check_init(container, init)
    return group, rest


def _streams(container, cmd, timeout, cap, workdir, env, user, fallback, separate, checked):
    api = container.client.api
    ex = _create(container, cmd, workdir, user, fallback, not separate, environment=env)
    started = time.monotonic()
    raw, ahead = own_socket(api.exec_start(ex["Id"], socket=True))
    raw.settimeout(None)  # a hang is the watch's to end (the kill, or a look at the container)
    watch = _Watch(container, ex["Id"], lambda: raw.shutdown(socket.SHUT_RDWR), timeout)
    out, err, head = bytearray(), bytearray(), bytearray()
    group: int | None = None
    truncated, late = False, 0.0
    stopped: Callable[[], bool] | None = None  # past the cap: the kill of its group
    try:
        for stream, chunk in frames(raw, ahead):
            if stream == STDERR and group is None and len(head) < 48:  # the session line first
                head += chunk
                got = _begun(container, watch, bytes(head))
                if got is None:
                    continue
                group, chunk = got
            if not truncated:
                into = err if separate and stream == STDERR else out
                if len(into) + len(chunk) <= cap:
                    into += chunk
                    continue
                into += chunk[: cap - len(into)]
                truncated, late = True, time.monotonic() + DRAIN_WAIT
            # past the cap the output is dropped, and read on to the stream's end while
            # the group is killed (`_kill_beside`); the engine keeps no order between the
            # streams, so the session line (stderr) may still be to come: without it the
            # command's group cannot be killed
            if stopped is None and group:
                stopped = _kill_beside(container, group)
            if time.monotonic() > late:
                break
    except Exception:  # the read the watch cut short (the socket shut under it)
        if watch.why is None:
            raise
    finally:
        watch.stop()  # first: the watch shuts no descriptor once closed (nor one reused)
        raw.close()
    if watch.why:
        raise watch.no_answer(started)
    if group is None:  # the stream ended inside the session line: it is output after all
        (err if separate else out)[0:0] = head
    code: int | None
    if truncated and (
        stopped() if stopped else not group and api.exec_inspect(ex["Id"]).get("Running", True)
    ):
        code = None  # we stopped it: no status of its own
    else:
        code = _exit_code(container, ex["Id"], cmd, bytes(out + err))
        _check_stopped(container, code)  # first: a stop lost the session line too
        if not group and (code or not checked):
            _no_session_line(container, cmd, code, bytes(out + err), checked)
    timed_out = watch.killed and code == 137
    if timed_out:  # no answer in time: the environment's, unless the container froze
        check_running(container, f"the command timed out after {timeout:g}s")
    return code, bytes(out), bytes(err), truncated, timed_out


def exec_input(
    container,
    cmd: list[str],
    data: bytes,
    timeout: float,
    workdir: str | None = None,
    user: str | None = None,
) -> tuple[int, str, bool]:
    """Run a command with `data` on its stdin: (exit code, output, timed_out). Output and
    errors come on one pipe, in order (`MERGED`); `INPUT_OUTPUT_CAP` bytes are kept."""
    with _engine(container):
        return _input(container, cmd, data, timeout, workdir, user)


def _send(raw: socket.socket, data: bytes) -> None:
    """Write `data` to the command's stdin, then close it (a thread of its own: a command
    that writes before it reads, or never reads, holds no read of its output)."""
    try:
        raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the command ended without reading everything: its output says why


def _input(container, cmd, data, timeout, workdir, user):
    api = container.client.api
    ex = _create(container, cmd, workdir, user, merged=True, stdin=True)
    started = time.monotonic()
    raw, ahead = own_socket(api.exec_start(ex["Id"], socket=True))
    raw.settimeout(None)  # a hang is the watch's to end (the kill, or a look at the container)
    watch = _Watch(container, ex["Id"], lambda: raw.shutdown(socket.SHUT_RDWR), timeout)
    sender = threading.Thread(target=_send, args=(raw, data), daemon=True)
    sender.start()
    out, size, head = [], 0, bytearray()
    group: int | None = None
    try:
        for stream, chunk in frames(raw, ahead):
            if stream == STDERR and group is None and len(head) < 48:  # the session line first
                head += chunk
                got = _begun(container, watch, bytes(head))
                if got is None:
                    continue
                group, chunk = got
            if size < INPUT_OUTPUT_CAP:
                out.append(chunk[: INPUT_OUTPUT_CAP - size])
                size += len(chunk)
    except Exception:  # the read the watch cut short (the socket shut under it)
        if watch.why is None:
            raise
    finally:
        watch.stop()
        with contextlib.suppress(OSError):  # ends a send still blocked (never read)
            raw.shutdown(socket.SHUT_RDWR)
        raw.close()
    if watch.why:
        raise watch.no_answer(started)
    if group is None:  # the stream ended inside the session line: it is output after all
        out.insert(0, bytes(head))
    raw = b"".join(out)
    code = _exit_code(container, ex["Id"], cmd, raw)
    _check_stopped(container, code)  # first: a stop lost the session line too
    if code and not group:  # its callers read the status: the output only says why
        _no_session_line(container, cmd, code, raw, checked=True)
    timed_out = watch.killed and code == 137
    if timed_out:  # no answer in time: the environment's, unless the container froze
        check_running(container, f"the command timed out after {timeout:g}s")
    return code, text_of(raw, size > INPUT_OUTPUT_CAP), timed_out


def reason(errors: str, code: int | None = None) -> str:
    """The system's reason in a failed command's error message (`sh: 1: cannot create /x:
    Read-only file system` -> `Read-only file system`); a command that said nothing is
    described by its exit status. Give it what the command wrote to stderr only."""
    line = errors.strip().splitlines()[-1].strip() if errors.strip() else ""
    if line:
        return line.rsplit(": ", 1)[-1]
    if code is not None and code > 128:
        return f"killed by signal {code - 128}"
    return f"exit status {code}" if code is not None else "no reason given"


def write_file(
    container, path: str, data: bytes, timeout: float, user: str | None = None
) -> tuple[str | None, bool]:
    """Write a file as the container's processes would: (None, or the system's reason;
    whether the write timed out)."""
    code, out, timed_out = exec_input(
        container, ["sh", "-c", 'cat > "$1"', "sh", path], data, timeout, user=user
    )
    return (None if code == 0 else reason(out, code)), timed_out


@dataclass(frozen=True)
class Room:
    """The tmpfs a tree is copied into (`copy_tree`): what it holds and the job's settings
    that say so, which a tree too large for it names (the job's mistake, not retried)."""

    size: int
    """Bytes of the tmpfs."""
    setting: str
    """The setting that sizes it, with its value: `docker.tmpfs_size (16m)`."""
    memory: int | None = None
    """Bytes of the container's memory (`docker.memory`), which a tmpfs's files count
    against: a copy over it is killed (`Killed`), whatever the tmpfs's size."""


SHORT_SYMLINK = 128
"""Bytes of a symbolic link's target (its NUL included) a tmpfs keeps in the inode; a
longer one takes a page (Linux's SHORT_SYMLINK_LEN)."""
NO_SPACE = ("No space left on device", "Wrote only")
"""What tar says when the file system fills under it (`Wrote only 7168 of 10240 bytes`:
a short write, which GNU tar reports without the system's reason)."""


def tmpfs_bytes(members: list[tarfile.TarInfo]) -> int:
    """Bytes the archive's members take on a tmpfs: each file in whole pages, a long
    symbolic link a page; directories, hard links and empty files none (as `df` says)."""
    page = mmap.PAGESIZE
    files = sum(-(-m.size // page) * page for m in members if m.isreg())
    links = sum(page for m in members if m.issym() and len(m.linkname.encode()) >= SHORT_SYMLINK)
    return files + links


def no_room(
    host_dir: str, target: str, members: list[tarfile.TarInfo], room: Room, said: str = ""
) -> str | None:
    """Why the tree of archive `members` cannot be copied into `room` (the job's mistake:
    what to change, to at least how much), or None. `said`: tar's words when the tmpfs
    filled though the tree fits (its inodes ran out: `inodes_low`); a memory too small is
    said only from the numbers (tar is `Killed`, as by any other kill)."""
    need = tmpfs_bytes(members)
    at_least = f"{-(-need // (1 << 20)) + 1}m"  # whole MiB, and room for what tar adds
    takes = f"cannot copy {host_dir} into the container: its files take {human(need)} on a tmpfs"
    if need > room.size:
        return (
            f"{takes} (each in whole pages), more than the {human(room.size)} of the tmpfs at "
            f"{target}: raise {room.setting} to at least {at_least}"
        )
    if room.memory is not None and need >= room.memory:
        return (
            f"{takes}, which count against the container's memory, docker.memory "
            f"({human(room.memory)}): raise it well above {human(need)}"
        )
    if said:
        return (
            f"cannot copy {host_dir} into the container: the tmpfs at {target}, sized by "
            f"{room.setting}, ran out of space or inodes for its {len(members)} files and "
            f"directories ({human(need)}): {said}"
        )
    return None


def copy_tree(
    container,
    host_dir: str,
    target: str,
    timeout: float,
    user: str | None = None,
    room: Room | None = None,
) -> None:
    """Copy a host directory into the container at `target` (through `tar` in it), owned
    by the agent's `user` (docker's `user[:group]`; root when None): the host's numeric
    owners mean nothing there, and git refused a tree a host user owned (`detected
    dubious ownership`). Root extracts a tree its own; another user extracts it itself
    (its files then its own, as its own `tar` makes them), into `target` made by root
    and open to it (`target` itself stays root's).

    Into a tmpfs (`room`), a tree too large for it is refused before it is sent, and tar
    running out of space there is said so (`no_room`), as SandboxConfigError: the job's
    sizes, not the environment. Until 12-06 it was tar's `Wrote only 7168 of 10240
    bytes`, retried."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if is_root(user):
            tar.add(host_dir, arcname=".", filter=_as_root)
        else:  # not `.`: it is root's, whose mode and times another user cannot set
            for name in sorted(os.listdir(host_dir)):
                tar.add(os.path.join(host_dir, name), arcname=name, filter=_as_root)
        members = tar.getmembers()
    problem = no_room(host_dir, target, members, room) if room else None
    if problem:
        raise SandboxConfigError(problem)
    script = 'mkdir -p "$1" && tar -x -f - -C "$1"'
    if not is_root(user):
        made = 'mkdir -p "$1" && chmod 777 "$1"'
        code, out, _ = exec_input(
            container, ["sh", "-c", made, "sh", target], b"", timeout, user="0"
        )
        if code != 0:
            raise SandboxError(f"cannot make {target} in the container: {out.strip()[-300:]}")
        script = 'tar -x -f - -C "$1"'
    code, out, _ = exec_input(
        container,
        ["sh", "-c", script, "sh", target],
        buf.getvalue(),
        timeout,
        user="0" if is_root(user) else user,
    )
    if code == 0:
        return
    full = [line.strip() for line in out.splitlines() if any(x in line for x in NO_SPACE)]
    if room and full:  # tar's first word of it: the lines after repeat it for other files
        raise SandboxConfigError(
            no_room(host_dir, target, members, room, full[0][:300]) or full[0][:300]
        )
    raise SandboxError(f"cannot copy {host_dir} into the container: {out.strip()[-300:]}")


def is_root(user: str | None) -> bool:
    """Whether docker's `user[:group]` (None or "": the image's default) names root."""
    return not user or user.partition(":")[0] in ("0", "root")


def _as_root(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """An archive member owned by root, by number and name (a name would map to the
    container's user of that name); extracted by another user, it is that user's."""
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


TRUSTED = "safe.directory"
"""The git setting that makes git work in a repository another user owns."""


def trust_repository(container, path: str, timeout: float) -> dict[str, str]:
    """Tell git in the container that the repository at `path` is safe although another
    user owns it (a bind mount keeps the host's owner; git answered `fatal: detected
    dubious ownership`, and `git diff` its usage). The container's system gitconfig says
    so, where no `env` of the agent shows anything of ours. A read-only root cannot take
    it: the variables that say the same to git are returned, for the agent's commands.
    An image without git needs nothing."""
    script = f'command -v git >/dev/null 2>&1 || exit 0; git config --system --add {TRUSTED} "$1"'
    cmd = ["sh", "-c", script, "sh", path]
    code, _, _, _ = exec_capture(container, cmd, timeout, 4096, user="0", checked=True)
    if code == 0:
        return {}
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": TRUSTED, "GIT_CONFIG_VALUE_0": path}


class RootRunner:
    """Runs shell commands as root, with root's usual capabilities (the container runs
    as root: `docker.ROOT`), in `container` (conditions set the stage with it):
    `run(command)` is its output; a failure raises, as it is our set-up failing, not the
    agent's action. `container` is there for what no process inside may do (a condition
    remounting a tmpfs: `docker.remount_tmpfs`)."""

    def __init__(self, container, timeout: float, workdir: str | None = None):
        self.container, self.timeout, self.workdir = container, timeout, workdir

    def __call__(self, command: str) -> str:
        """The command's output. It runs in a subshell followed by an end mark: an exec's
        output could be lost (`_no_session_line`), and a condition reads what its check
        printed (`missing_commands`' `left echo echo`: lost, the condition was taken to
        hold while `echo` still ran). Output without its mark is
        our failure (SandboxError: the attempt fails and is retried), never read as
        empty; the command is not run again, as it may not be safe to (a byte flipped)."""
        mark = f"worldtrace-end-{secrets.token_hex(6)}"
        script = f"(\n{command}\n)\nrc=$?\nprintf '\\n%s\\n' {mark}\nexit $rc"
        code, out, truncated, timed_out = exec_capture(
            self.container,
            ["sh", "-c", script],
            self.timeout,
            1 << 16,
            self.workdir,
            user="0",
            checked=True,  # its end mark
        )
        ended = f"\n{mark}\n"
        if out.endswith(ended):
            out = out[: -len(ended)]
        elif not (truncated or timed_out):
            check_running(self.container, "a condition set-up's output was lost")
            raise SandboxError(
                f"condition set-up: the output of {command[:200]!r} came without its end "
                f"mark (exit {code}): its check cannot be read"
            )
        if code != 0:
            raise setup_failed(
                "condition set-up", command[:200], code, out[-300:], timed_out, self.timeout
            )
        return out


def root_runner(container, timeout: float, workdir: str | None = None) -> RootRunner:
    """A `RootRunner` for `container`."""
    return RootRunner(container, timeout, workdir)


def ran_and_failed(exc: BaseException) -> bool:
    """Whether `exc` is a set-up command's failure (`setup_failed`) that ran to its end
    and said no (not killed: at its deadline, or 137, a kill such as the OOM killer's):
    the same command fails alike on the next attempt."""
    code, timed_out = getattr(exc, "setup_exit", (None, True))
    return not timed_out and code not in (None, 137)


SAID = 300
"""Characters of a failed set-up command's last line of output its reason keeps."""


def said_last(out: str, where: str = "it printed") -> str:
    """What a failed command printed, for a one-line reason: output of one line as it is;
    of more, its last line, where a command ends with its error (`ls: cannot access ...`,
    a traceback's `ModuleNotFoundError: ...`), at most `SAID` characters of it, and how
    many lines it ended (`where` they were). The first line alone, all an attempt's
    reason kept (`failure_reason`), was `Traceback (most recent call last):` or the
    command's own `echo` of what it was about to do."""
    lines = [line.rstrip() for line in out.splitlines() if line.strip()]
    if len(lines) < 2:
        return out
    last = lines[-1] if len(lines[-1]) <= SAID else lines[-1][: SAID - 1] + "…"
    return f"{last} (the last of {len(lines)} lines {where})"


def setup_failed(
    what: str,
    command: str,
    code: int | None,
    out: str,
    timed_out: bool,
    timeout: float,
    where: str = "it printed",
) -> SandboxError:
    """A set-up command's failure, a command killed at its deadline told from one that
    failed (its exit 137 alone reads as an OOM kill or a crash), with what it printed
    (`said_last`: its last line; `where` it printed it); `setup_exit` (code, timed_out)
    on it for `ran_and_failed` (a SandboxError still: its class name is what an attempt's
    reason says)."""
    how = (
        f"ran past step_timeout ({timeout:g}s) and was killed" if timed_out else f"failed ({code})"
    )
    said = f": {said_last(out, where)}" if out.strip() else ""
    exc = SandboxError(f"{what} {how}: {command}{said}")
    exc.setup_exit = (code, timed_out)
    return exc


def run_setup(
    container,
    commands,
    timeout: float,
    cap: int,
    workdir: str,
    env: dict | None = None,
    user: str | None = None,
) -> None:
    """A task's set-up commands, run as the agent's `user` (each within `timeout`, the
    step timeout: `docker.ContainerPool.user`; None: the container's, root); the first
    failure is an environment error, said with its errors (stderr) when it wrote any,
    else with its output: a program's buffered stdout comes after its traceback on one
    pipe (`print('installing deps')` then a failed import ended with `installing deps`).
    A command runs as `sh -c` runs it, one of 128 KiB or more too (`shell_argv`: it was
    the engine's `argument list too long`); one over `LONGEST_COMMAND` is the job's
    mistake, said before any runs (SandboxConfigError: no attempt can run it)."""
    for i, cmd in enumerate(commands):
        size = command_bytes(cmd)
        if size > LONGEST_COMMAND:
            raise SandboxConfigError(
                f"task setup: command {i + 1} ({shown_command(cmd)}) is {human(size)}: at most "
                f"{human(LONGEST_COMMAND)} (put long content in a file the image or the "
                "repository holds, and run that)"
            )
    for cmd in commands:
        code, out, err, cut, timed_out = exec_streams(  # checked: the status tells
            container, shell_argv(cmd), timeout, cap, workdir, env or None, user, checked=True
        )
        if code != 0:
            said, where = (err, "it wrote to stderr") if err.strip() else (out, "it printed")
            text = text_of(said, cut)[-500:]  # characters: a byte cut may split one
            raise setup_failed(
                "task setup", shown_command(cmd), code, text, timed_out, timeout, where
            )


COMMAND_SHOWN = 300
"""Characters of a set-up command an error message shows (a long one is cut)."""


def shown_command(cmd: str) -> str:
    """`cmd` as an error message shows it: at most `COMMAND_SHOWN` characters (a 140 KB
    heredoc was the whole reason)."""
    if len(cmd) <= COMMAND_SHOWN:
        return cmd
    return f"{cmd[: COMMAND_SHOWN - 1]}… ({len(cmd)} characters)"
