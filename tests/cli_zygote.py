"""Runs of the `worldtrace` console script forked from a process that has loaded it.

A run of the console script spent most of its CPU loading modules (pyarrow, DuckDB,
docker, Beam: ~0.3 s for `query`, ~0.9 s for `process`), and the suite runs it ~1,300
times. Here a server per pytest worker (`serve`) loads what the console script loads,
once, and forks a child for each run, which then does what the console script does,
`sys.exit(main())`, with the run's arguments, environment, working directory, umask,
stdin, stdout and stderr. The child's exit status, signals, fds, atexit handlers and
interpreter shutdown are a real process's; only the loading is shared, and it is the
console script's own: `entry` takes the stop signals, and `cli.pyarrow_without_pandas`
is in place before Beam loads, as the command group sets it before a command loads Beam.
What loading cached from the environment is read again in the child (`tempfile`'s
directory, which Beam asks for; the time zone).

conftest.py routes `subprocess.run` here (`routed`) when it is asked for a plain run of
the venv's console script: output captured or dropped, stdin inherited, devnull or
`input=`, nothing the interpreter reads as it starts (`PYTHON*`, `LC_*`, `LANG`) set
otherwise. Anything else, `Popen` (signals, a run watched while it runs) and the tests
about loading itself (`-X importtime`) start the console script as a user does.

No library forks a loaded interpreter on request with fds passed in (`multiprocessing`'s
fork server runs a function, not a `sys.exit(main())` with its own stdio), hence this
file. The server runs as a script: `python tests/cli_zygote.py SOCKET`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CONSOLE_SCRIPT = str(Path(sys.executable).with_name("worldtrace"))
PRELOAD = (
    "pyarrow.parquet", "pyarrow.compute", "duckdb", "docker", "pyte", "yaml",
    "worldtrace.schemas.redact", "worldtrace.collectors.jobs", "worldtrace.collectors.importers",
    "worldtrace.pipelines.export", "worldtrace.pipelines.process",
)  # fmt: skip
"""Loaded by the server after `worldtrace.cli`, in this order: what the commands load."""
_LOADED_ENV = dict(os.environ)
"""The server's environment: this process's as it loaded this module, before any test
changed it (a run's own environment replaces it in the child)."""


def serve(path: str) -> None:
    """Load, then answer each request on the unix socket `path` with a forked run."""
    import gc
    import importlib

    import worldtrace.entry  # noqa: F401  (takes the stop signals as the console script does)
    from worldtrace import cli

    cli.pyarrow_without_pandas()  # as the group does before a command loads Beam
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the children touch no page of what is loaded to count references
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    sel.register(sys.stdin, selectors.EVENT_READ, "parent")  # EOF: the pytest worker ended
    while True:
        for key, _ in sel.select():
            if key.data == "parent":
                if not sys.stdin.buffer.read1(1):  # its socket and log go with it
                    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                    os._exit(0)
            elif key.data is None:
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ, "request")
            elif key.data == "request":
                conn = key.fileobj
                sel.unregister(conn)
                pid = _fork_run(conn, sel, listener)
                if pid:
                    sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
            else:  # a child ended: its status to the client that asked
                pid, conn = key.data
                sel.unregister(key.fileobj)
                os.close(key.fileobj)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                with contextlib.suppress(OSError):  # the client gave up (its timeout)
                    conn.sendall(json.dumps({"code": code}).encode() + b"\n")
                conn.close()


def _fork_run(conn: socket.socket, sel, listener) -> int:
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)  # the fds come with the first bytes
    while not msg.endswith(b"\n"):  # a stream: a long environment may come in pieces
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("the request ended before its newline")
        msg += more
    request = json.loads(msg)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        return pid
    # the child: the console script's process from here on
    sel.close()
    listener.close()
    conn.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # Beam's loading asked for it: $TMPDIR is read again
    time.tzset()  # $TZ, as at a start
    os.umask(request["umask"])
    sys.argv = [CONSOLE_SCRIPT, *request["args"]]
    from worldtrace.entry import main

    sys.exit(main())


class _Server:
    """This process's server: started on the first run, ended with the process (it reads
    EOF on its stdin when the pytest worker is gone)."""

    lock = threading.Lock()
    proc: subprocess.Popen | None = None
    path = ""

    @classmethod
    def address(cls) -> str:
        with cls.lock:
            if cls.proc is None or cls.proc.poll() is not None:
                folder = tempfile.mkdtemp(prefix="wt-zygote-")
                cls.path = os.path.join(folder, "sock")
                log = os.path.join(folder, "server.log")
                with open(log, "wb") as errors:
                    cls.proc = subprocess.Popen(
                        [sys.executable, __file__, cls.path],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                        env=_LOADED_ENV, cwd=Path(__file__).parent.parent,
                    )  # fmt: skip
                if cls.proc.stdout.readline() != b"ready\n":
                    said = Path(log).read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"the console script's fork server did not start:\n{said}")
            return cls.path


def routed(real_run):
    """`subprocess.run` that forks the console script from the server when what it is
    asked is a plain run of it (`_forkable`), and is `real_run` for anything else."""

    @functools.wraps(real_run)
    def run(args, **kw):
        if not _forkable(args, kw):
            return real_run(args, **kw)
        return _run(args, **kw)

    return run


_KEYWORDS = {"capture_output", "stdout", "stderr", "stdin", "input", "text", "universal_newlines",
             "encoding", "errors", "env", "cwd", "timeout", "check"}  # fmt: skip
_STARTUP_ENV = ("PYTHON", "LC_", "LANG")
"""Variables read by the interpreter as it starts (the server has started): a run whose
environment sets one otherwise than this process is started as a user does."""


def _forkable(args, kw) -> bool:
    if not isinstance(args, (list, tuple)) or not args or set(kw) - _KEYWORDS:
        return False
    env = kw.get("env")
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(str(args[0]), path=path)
    if found is None or os.path.realpath(found) != _SCRIPT_PATH:
        return False
    if _startup(env if env is not None else os.environ) != _LOADED_STARTUP:
        return False
    if kw.get("stdin") not in (None, subprocess.DEVNULL):
        return False
    if kw.get("capture_output"):
        return kw.get("stdout") is None and kw.get("stderr") is None
    return kw.get("stdout") in _OUT and kw.get("stderr") in (*_OUT, subprocess.STDOUT)


def _startup(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_ENV)}


_LOADED_STARTUP = _startup(_LOADED_ENV)
_SCRIPT_PATH = os.path.realpath(CONSOLE_SCRIPT)


_OUT = (subprocess.PIPE, subprocess.DEVNULL)


def _run(args, *, capture_output=False, stdout=None, stderr=None, stdin=None, input=None,
         text=False, universal_newlines=None, encoding=None, errors=None, env=None, cwd=None,
         timeout=None, check=False):  # fmt: skip
    """`subprocess.run` of the console script as `_forkable` allows it, forked."""
    if capture_output:
        stdout = stderr = subprocess.PIPE
    ends: list[int] = []  # ours to close once sent
    reads: dict[int, list[bytes]] = {}

    def out(how, same=None):
        if how == subprocess.PIPE:
            r, w = os.pipe()
            reads[r] = []
            ends.append(w)
            return w, r
        if how == subprocess.STDOUT:
            return same, None
        fd = os.open(os.devnull, os.O_WRONLY)
        ends.append(fd)
        return fd, None

    feed = None
    if input is not None:
        in_fd, feed = os.pipe()
        ends.append(in_fd)
    elif stdin == subprocess.DEVNULL:
        in_fd = os.open(os.devnull, os.O_RDONLY)
        ends.append(in_fd)
    else:
        in_fd = 0  # as a child inherits it
    out_w, out_r = out(stdout)
    err_w, err_r = out(stderr, out_w)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_Server.address())
        request = {
            "args": [str(a) for a in args[1:]], "env": dict(env if env is not None else os.environ),
            "cwd": os.path.abspath(cwd if cwd is not None else "."), "umask": _umask(),
        }  # fmt: skip
        message = json.dumps(request).encode() + b"\n"
        sent = socket.send_fds(conn, [message], [in_fd, out_w, err_w])
        conn.sendall(message[sent:])
    finally:
        for fd in ends:
            os.close(fd)
    reader = conn.makefile("rb")
    pid = json.loads(reader.readline())["pid"]
    if feed is not None:
        data = (
            input.encode(encoding or locale.getpreferredencoding(False))
            if isinstance(input, str)
            else input
        )
        threading.Thread(target=_feed, args=(feed, data), daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        """Seconds to the deadline; past it the run is killed, as `subprocess.run` does."""
        if deadline is None:
            return None
        if (seconds := deadline - time.monotonic()) > 0:
            return seconds
        os.kill(pid, signal.SIGKILL)  # the run we asked for, by its pid
        for fd in open_reads:
            os.close(fd)
        conn.close()
        raise subprocess.TimeoutExpired(list(args), timeout)

    open_reads = set(reads)
    with selectors.DefaultSelector() as sel:
        for fd in reads:
            sel.register(fd, selectors.EVENT_READ)
        while open_reads:
            for key, _ in sel.select(left()):
                data = os.read(key.fd, 1 << 16)
                if data:
                    reads[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    open_reads.discard(key.fd)
    conn.settimeout(left())  # its output closed: its end, which may come later
    try:
        code = json.loads(reader.readline())["code"]
    except TimeoutError:
        left()  # past the deadline now: killed, TimeoutExpired
        raise
    reader.close()
    conn.close()
    as_text = text or universal_newlines or encoding or errors

    def got(fd):
        if fd is None:
            return None
        raw = b"".join(reads[fd])
        return _text(raw, encoding, errors) if as_text else raw

    done = subprocess.CompletedProcess(args, code, got(out_r), got(err_r))
    if check:
        done.check_returncode()
    return done


def _feed(fd: int, data: bytes) -> None:
    """`input=` written and its pipe closed; a command that did not read it all is no
    error, as with subprocess."""
    with contextlib.suppress(BrokenPipeError), open(fd, "wb") as pipe:
        pipe.write(data)


def _text(raw: bytes, encoding: str | None, errors: str | None) -> str:
    """As `text=True` decodes: the locale's encoding unless given, newlines translated."""
    data = raw.decode(encoding or locale.getpreferredencoding(False), errors or "strict")
    return data.replace("\r\n", "\n").replace("\r", "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


if __name__ == "__main__":
    sys.path[0] = str(Path(CONSOLE_SCRIPT).parent)  # the console script's, not tests/
    serve(sys.argv[1])
