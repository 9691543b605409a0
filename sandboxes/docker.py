"""Docker containers for sandboxes: no network, limits, a warm pool.

Every container runs with network_mode="none", memory/cpu/pids limits and our labels
(including its owner: `owners.py`); a pool keeps `warm` containers started ahead so
`reset` does not pay a cold start, and sweeps the containers of dead collectors when it
starts. A container serves one episode and is then removed: state never leaks between
episodes. Commands inside containers are run by `execs.py`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import threading
import uuid
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from worldtrace.schemas.parsing import configclass

from .base import SandboxConfigError, SandboxError
from .execs import check_running, exec_capture, not_running
from .owners import (
    EPISODE_LABEL,
    LABEL,
    POOL_LABEL,
    container_name,
    not_found_or_busy,
    our_volumes,
    owner_labels,
    remove_container,
    set_owner,
    sweep_orphans,
)

__all__ = [
    "LABEL",
    "ContainerPool",
    "DockerConfig",
    "ImageMissing",
    "client",
    "set_owner",
    "shared_pool",
    "sweep_orphans",
]

log = logging.getLogger(__name__)

IDLE_COMMAND = [
    "sh",
    "-c",
    "trap '' HUP INT QUIT TERM; exec 3<&0;"
    " while :; do (trap - HUP TERM; while read -r _ <&3; do :; done) & wait $! && exit; done",
]
"""The container's PID 1: it catches no signal, so the kernel drops every signal sent to
it from inside (`kill 1`, `pkill -x sh`), as for a real init, and the agent cannot stop
its sandbox (shells catch SIGINT while they `wait`: the usual ones are ignored). From
outside only SIGKILL stops it: `STOP_SIGNAL`, and our removals force.

It idles in `wait` (which reaps the orphans the kernel hands it, as an init must) for a
child that blocks in the shell builtin `read` on the container's stdin, held open and
never written (`stdin_open`, `DockerConfig.run_kwargs`). No program of the image runs:
until 12-06 the child was `sleep 3600`, and once `sleep` was gone (`missing_commands`,
or killed by the agent) PID 1 forked without end at 100% CPU; that `sleep` also kept
PID 1's ignored TERM, so `pkill sleep` left it running. The child takes TERM and HUP (a
killed one is started again: one fork); a `read` that meets the end of its input (no
engine does that) ends PID 1, so the container stops rather than spins."""
STOP_SIGNAL = "SIGKILL"
"""What `docker stop` sends: PID 1 has no TERM handler, and a TERM would only cost the
10 s grace period before the engine's SIGKILL."""


MEMORY_RE = re.compile(r"^(\d+)([bkmg]?)$", re.I)
MEMORY_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
MIN_MEMORY = 16 << 20
"""The floor of a container's memory limit: a job may raise limits, never remove them."""
CLOSE_WAIT = 30.0
"""Seconds `ContainerPool.close` waits for removals and starts still in flight."""
HOSTNAME = "sandbox"
"""Every sandbox container's hostname (the prompt says `user@sandbox`): docker's default,
the random container id, would be per-episode noise in the recorded text."""
NAMESERVER = "127.0.0.1"
"""The one nameserver of every sandbox's /etc/resolv.conf: docker copies the host's
nameservers into a container's, `network_mode: none` too, so `cat /etc/resolv.conf` in
an episode recorded the collecting machine's infrastructure (and text that changed with
the machine). The loopback address is what glibc takes when the file names none; with no
network nothing answers there, as nothing answered before."""
NO_LOGS = {"type": "none", "config": {}}
"""The log driver of sandbox containers: nothing PID 1 prints is kept. With docker's
default (json-file, unbounded) `yes > /proc/1/fd/1` grew a file in /var/lib/docker by
50 MB/s, under `read_only: true` too and after the collector died (a background writer
runs until the container is removed); nothing of ours reads a sandbox's logs (commands
answer through their execs)."""
ROOT = "0"
"""The user every sandbox container is created as: its PID 1 is our idle loop
(`IDLE_COMMAND`), never a program of the image, and the agent's processes run as the
sandbox's user, named on each exec (`ContainerPool.user`). Docker gives a container
created as another user no capabilities, and its execs as uid 0 none either (`CapEff`
0): until 12-06, under `docker.user: nobody` or an image whose USER is not root, every
condition's set-up as root failed (a disk kind's remount: `nsenter: can't open
'/proc/1/ns/mnt': Permission denied`; `chown: ... Operation not permitted`), and so did
the kill of a command at its step timeout, which ran on to its end. The capabilities
dropped (`run_kwargs`) and no-new-privileges hold for every process either way; an exec
as another user gets none (`docker exec -u nobody` as `docker run --user nobody`: the
same ids, groups, `$HOME` and environment)."""
FORBIDDEN_HOST_PATHS = ("/", "/var/run", "/run", "/proc", "/sys", "/dev", "/etc", "/boot")
"""Host paths (and the docker socket under them) no sandbox may see, mounted or copied."""


def memory_bytes(value: str) -> int:
    """Bytes of a docker memory string such as `512m` (ValueError when not one)."""
    m = MEMORY_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"not a memory size: {value!r} (write e.g. 512m or 2g)")
    return int(m.group(1)) * MEMORY_UNITS[m.group(2).lower()]


def _floor(name: str, why: str = ""):
    """A validator refusing a size below MIN_MEMORY, naming the field (`tmpfs_size: '0'`
    was `memory '0' is below the floor`)."""

    def check(value: str) -> str:
        if memory_bytes(value) < MIN_MEMORY:
            raise ValueError(f"{name} {value!r} is below the floor of {MIN_MEMORY >> 20}m{why}")
        return value

    return check


_memory_floor = _floor("memory", " (limits cannot be removed)")


ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(value: str) -> str:
    if not ENV_NAME_RE.fullmatch(value):
        raise ValueError(f"not an environment variable name: {value!r}")
    return value


def _host_file(value: str) -> str:
    """A host path kept absolute (a relative one starts where `worldtrace` runs, as the
    job's other host paths), so a worker anywhere reads the same file."""
    return os.path.abspath(os.path.expanduser(value))


class ImageMissing(SandboxConfigError):
    """The job's image is not on this machine, or is no name the engine takes. We do not
    pull images (the engine here reaches no registry: docker's client, asked to start a
    container from an image the engine lacks, tries and gets a 500), so no retry brings
    it: the attempt is not retried (until 12-07 every episode spent its `retries` on it),
    and a job's load refuses it before anything runs (`DockerConfig.image_problems`)."""


NAME_LISTED = "name one `docker images` lists"
IMAGE_MENDS = (
    "build it (infra/images/build.sh builds worldtrace/debian and worldtrace/busybox), "
    "pull it where a registry answers (docker pull {image}), or " + NAME_LISTED
)
"""How to mend an image the engine lacks, said with its name."""


def _image_missing(image: str, exc: BaseException) -> ImageMissing | None:
    """What the engine's answer `exc` to a look at `image` means, if the job is to blame:
    no such image (404), or a name it refuses (400: `invalid reference format`). None for
    any other failure (an engine that does not answer, a 500): not the job's, retried."""
    import docker.errors

    if isinstance(exc, docker.errors.ImageNotFound):
        mend = IMAGE_MENDS.format(image=image)
        why = f"is not on this machine (worldtrace does not pull images): {mend}"
    elif isinstance(exc, docker.errors.APIError) and exc.status_code == 400:
        why = f"is no name the engine takes ({exc.explanation}): {NAME_LISTED}"
    else:
        return None
    return ImageMissing(f"image {image!r} {why}")


class EnvError(SandboxConfigError, ValueError):
    """The environment a job hands its sandboxes cannot be made: an env file that cannot
    be read or holds a line that is no variable, or a named variable unset on this host.
    One line naming the file (or the names), never a value. A configuration mistake of
    this host (`SandboxConfigError`): every attempt here would fail alike, so the attempt
    is not retried (a worker where the variable was unset spent all `retries` in a
    fraction of a second)."""


def read_env_file(path: str) -> dict[str, str]:
    """The variables of an env file.

    Docker's `--env-file` rules (`KEY=VALUE` taken literally, `#` comments, blank lines,
    a bare `KEY` takes the host's value) and what shell-style files add: a leading
    `export`, a value inside matching quotes (taken literally between them). A problem
    names the file and line, never the line's text (it may be a pasted secret)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise EnvError(f"docker.env_file {path}: cannot read it: {why}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[7:].lstrip()
        key, sep, value = line.partition("=")
        if not ENV_NAME_RE.fullmatch(key):  # the line may be a bare secret: never quoted
            raise EnvError(f"docker.env_file {path}:{n}: not KEY=VALUE (a variable name first)")
        if not sep:
            if key not in os.environ:
                raise EnvError(
                    f"docker.env_file {path}:{n}: a bare name, and this host has no such "
                    "variable (write KEY=VALUE)"
                )
            out[key] = os.environ[key]
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def abs_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path inside the container, got {value!r}")
    return value


Memory = Annotated[str, AfterValidator(_memory_floor)]


def _image_name(value: str) -> str:
    """An image's name: `""` reached the engine as `NullResource: Resource ID was not
    provided`, a failed attempt for each retry, where the job file was the mistake."""
    if not value.strip() or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is no image name (e.g. worldtrace/debian:latest)")
    return value


@configclass
class DockerConfig:
    """How sandbox containers are started. Every limit has a floor: a job may raise a
    limit, never remove it (no `0`, `-1` or unlimited values)."""

    image: Annotated[str, AfterValidator(_image_name)] = "worldtrace/debian:latest"
    """Any local image; the set-up builds worldtrace/debian and worldtrace/busybox."""
    memory: Memory = "512m"
    """Memory (and swap) limit, e.g. 512m or 2g; at least 16m."""
    cpus: Annotated[float, Field(gt=0, le=64)] = 1.0
    """CPU share (fractions allowed)."""
    pids_limit: Annotated[int, Field(ge=16, le=65536)] = 128
    """Caps processes: a fork bomb stops here."""
    read_only: bool = False
    """Read-only root filesystem (a tmpfs stays writable at /tmp and the workdir, and at
    the swe kind's repository, which it copies in)."""
    workdir: Annotated[str, AfterValidator(abs_path)] = "/root"
    """Working directory in the container."""
    user: str | None = None
    """User the agent's processes run as: its shell, tools and the task's set-up
    (default: the image's USER). The container itself runs as root (`ROOT`), for the
    conditions' set-up."""
    env: tuple[Annotated[str, AfterValidator(_env_name)], ...] = ()
    """Names of environment variables passed from the collector's environment (the job
    store keeps names, never values)."""
    env_file: Annotated[str, AfterValidator(_host_file)] | None = None
    """A KEY=VALUE file (docker's env-file rules; `export` and quotes as in a shell file)
    read by the worker when the sandbox starts (values never stored); a relative path
    starts where `worldtrace` runs, as the job's other host paths."""
    step_timeout: Annotated[float, Field(gt=0, le=3600)] = 30.0
    """Seconds one step may take before it is cut off."""
    output_cap: Annotated[int, Field(ge=1024, le=256 << 20)] = 1 << 20
    """Bytes of output kept per step; the rest is dropped and the observation flagged."""
    warm: Annotated[int, Field(ge=0, le=16)] = 1
    """Containers kept started ahead of need."""
    tmpfs_size: Annotated[str, AfterValidator(_floor("tmpfs_size"))] = "64m"
    """Size of the tmpfs mounts of a read-only root."""

    def resolved_env(self) -> dict[str, str]:
        """The values handed to the container: named variables, then the env file (an
        EnvError when the file cannot be read or holds a line that is no variable)."""
        out = {name: os.environ[name] for name in self.env if name in os.environ}
        if self.env_file:
            out.update(read_env_file(self.env_file))
        return out

    def container_env(self) -> dict[str, str]:
        """`resolved_env`, refusing names this host does not set: the sandbox would run
        in another environment than the job says."""
        unset = [name for name in self.env if name not in os.environ]
        if unset:
            raise EnvError(f"docker.env names variables not set on this host: {', '.join(unset)}")
        return self.resolved_env()

    def env_problems(self) -> list[str]:
        """What starting a container here would refuse (for the check when a job loads)."""
        try:
            self.container_env()
        except EnvError as exc:
            return [str(exc)]
        return []

    def image_problems(self) -> list[str]:
        """Why this host's engine cannot start `image` (`ImageMissing`), for the check when
        a job loads: one look (~3 ms). Nothing when no engine answers (or docker's client
        is not installed): that may be mended by the time the job runs, and an attempt
        that meets it says so and is retried."""
        try:
            engine = client()
        except (SandboxError, ImportError):
            return []
        try:
            engine.images.get(self.image)
        except Exception as exc:  # docker's errors, or the socket's
            missing = _image_missing(self.image, exc)
            return [str(missing)] if missing is not None else []
        return []

    def summary(self) -> dict[str, Any]:
        """The limits recorded in a trajectory's environment.config."""
        return {
            "memory": self.memory,
            "cpus": self.cpus,
            "pids_limit": self.pids_limit,
            "read_only": self.read_only,
            "network": "none",
            "output_cap": self.output_cap,
            "step_timeout": self.step_timeout,
        }

    def run_kwargs(self, writable: Sequence[str] = ()) -> dict[str, Any]:
        """Keyword arguments of `containers.run` (conditions change a copy per episode);
        a read-only root gets a tmpfs at each of the `writable` paths too (`tmpfs_size`,
        as the workdir's)."""
        kw: dict[str, Any] = {
            "network_mode": "none",
            "hostname": HOSTNAME,
            "dns": [NAMESERVER],
            "mem_limit": self.memory,
            "memswap_limit": self.memory,
            "nano_cpus": int(self.cpus * 1e9),
            "pids_limit": self.pids_limit,
            "read_only": self.read_only,
            "working_dir": self.workdir,
            "environment": self.container_env(),
            "detach": True,
            "stdin_open": True,  # PID 1's idle `read` (`IDLE_COMMAND`)
            "log_config": dict(NO_LOGS),
            "cap_drop": ["NET_RAW", "SYS_ADMIN", "SYS_PTRACE", "MKNOD"],
            "security_opt": ["no-new-privileges"],
            "user": ROOT,  # the agent's user is named on its execs (`ContainerPool.user`)
        }
        if self.read_only:
            kw["tmpfs"] = self.tmpfs(writable)
        return kw

    def tmpfs(self, writable: Sequence[str] = ()) -> dict[str, str]:
        """The tmpfs mounts a read-only root keeps writable (`run_kwargs`): `/tmp`, the
        workdir and the `writable` paths. Apart from `run_kwargs`, which reads the host's
        environment (`container_env`), so that a job's load can ask it (`jobparse`)."""
        return {
            "/tmp": f"size={self.tmpfs_size}",
            self.workdir: f"size={self.tmpfs_size},exec",
            **{path: f"size={self.tmpfs_size},exec" for path in writable},
        }


_CLIENT: dict[int, Any] = {}
"""The process's docker client, by pid (a forked child makes its own: sockets are not
shared across processes)."""
_CLIENT_LOCK = threading.Lock()


def client():
    """The process's docker client, made (and the engine asked) once: each pool made its
    own, and each kept its connections (up to ~20 sockets) for the life of the process,
    so a worker running jobs of many configurations piled up descriptors (a test process
    held over 1,024 by ~100 pools, found 2026-12-06). A client's connection pool serves
    threads side by side, as one pool's warm starts and removals always shared it."""
    import docker

    with _CLIENT_LOCK:
        try:
            c = _CLIENT.get(os.getpid()) or docker.from_env()
            c.ping()  # each time: the engine may have gone since
        except Exception as exc:  # docker raises several types when no engine answers
            raise SandboxError(
                f"no docker engine answers ({exc}); run `make setup` or start dockerd"
            ) from exc
        if os.getpid() not in _CLIENT:
            _CLIENT.clear()  # a parent's, inherited by a fork: not ours to use
            _CLIENT[os.getpid()] = c
        return c


MOUNTER_IMAGE = "worldtrace/busybox:latest"
"""The image of the short-lived container that remounts a sandbox's tmpfs
(`remount_tmpfs`); infra/setup.sh builds it. Its busybox runs `nsenter` and `mount` as its
own applets (through /proc/self/exe), so no program of the sandbox runs with its rights."""


def remount_tmpfs(container, path: str, options: str) -> None:
    """Remount the tmpfs at `path` in `container` with `options` (`size=112k`,
    `nr_inodes=40`): a disk condition sizes the file system itself, so no file of ours
    fills it (condition_kinds.py).

    The sandbox has no CAP_SYS_ADMIN and must not get it; an exec gets no capability its
    container lacks (`docker exec --privileged` fails here: `unable to apply caps`). So a
    container of ours, sharing the sandbox's pid namespace, with CAP_SYS_ADMIN and for
    the time of one `mount`, enters the mount namespace of the sandbox's PID 1 and
    remounts (~0.3 s, once per episode, before the agent's first step). A failure is our
    set-up failing: SandboxError with `mount`'s reason."""
    import docker.errors

    cmd = ["nsenter", "-t", "1", "-m", "mount", "-o", f"remount,{options}", path]
    try:
        container.client.containers.run(
            MOUNTER_IMAGE,
            cmd,
            pid_mode=f"container:{container.id}",
            network_mode="none",
            cap_add=["SYS_ADMIN"],
            security_opt=["no-new-privileges"],
            user="0",
            labels=owner_labels(),
            remove=True,
            stdout=False,
            stderr=True,
        )
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(
            f"cannot remount {path}: the image {MOUNTER_IMAGE} is not on this machine "
            "(infra/setup.sh builds it)"
        ) from exc
    except docker.errors.ContainerError as exc:
        said = (exc.stderr or b"").decode("utf-8", errors="replace").strip()[-300:]
        raise SandboxError(f"cannot remount {path} with {options}: {said}") from exc


def update_limits(container, resources: dict[str, Any]) -> None:
    """Change the running `container`'s limits (the engine's container update: `PidsLimit`
    and the other `Resources` fields). docker-py's `update_container` names no
    `PidsLimit`, so this posts the engine's own request. A refusal is our set-up failing:
    SandboxError with the engine's reason (or the container's trouble)."""
    api = container.client.api
    url = f"{api.base_url}/v{api.api_version}/containers/{container.id}/update"
    try:
        r = api.post(url, json=resources, timeout=api.timeout)  # the client's own
    except Exception as exc:  # the engine's socket: no answer
        raise SandboxError(f"cannot set the limits {resources}: {exc}") from exc
    if r.status_code >= 400:
        check_running(container, f"the limits {resources} could not be set")
        said = r.text.strip()[-300:]
        raise SandboxError(f"cannot set the limits {resources}: {r.status_code} {said}")


# -- the pool ---------------------------------------------------------------------------
class ContainerPool:
    """Started containers waiting for an episode; refilled in the background."""

    def __init__(self, config: DockerConfig, docker_client=None, writable: Sequence[str] = ()):
        self.config = config
        self.writable = tuple(writable)
        """Paths a read-only root gets a tmpfs at (`DockerConfig.run_kwargs`)."""
        self.client = docker_client or client()
        self.pool_id = uuid.uuid4().hex[:12]
        self._ready: list[Any] = []
        self._lock = threading.Lock()
        self._filling = 0
        self._closed = False
        self._starting = 0
        self._started = threading.Condition(self._lock)
        """Notified when a start ends: `close` waits for those in flight."""
        self._removing: list[threading.Thread] = []
        self.facts: dict[str, Any] = {}
        """What sandboxes learned about the image (same for every container of the pool)."""
        self.user: str | None = None
        """The user the agent's processes run as (`docker.user`, else the image's USER;
        None: root), which every exec of the agent names: the container runs as root."""
        self._user_checked = False
        self._check_image()
        self.swept = sweep_orphans(self.client)
        """Containers of dead collectors this pool removed when it started."""
        atexit.register(self.close)
        self._refill()

    def _check_image(self) -> None:
        """Refuse an image this machine lacks (`ImageMissing`); learn the user its processes
        run as (`user`)."""
        try:
            image = self.client.images.get(self.config.image)
        except Exception as exc:
            missing = _image_missing(self.config.image, exc)
            if missing is None:
                raise
            raise missing from exc
        self.user = self.config.user or (image.attrs.get("Config") or {}).get("User") or None

    def _image_gone(self) -> ImageMissing | None:
        """`ImageMissing` when the image the pool started with has gone from this machine
        since (`docker rmi`): a start then fails on docker's pull of it (a 500), which read
        as the engine's trouble and was retried. Looked at only when a start failed."""
        try:
            self.client.images.get(self.config.image)
        except Exception as exc:
            return _image_missing(self.config.image, exc)
        return None

    def _start(self, run_kwargs: dict[str, Any] | None = None, episode: str | None = None):
        """Start a container, unless the pool is closed. `close` removes what it lists,
        and a container created after that would outlive the process (the exit kills the
        daemon thread starting it): so none starts once the pool is closed, `close` waits
        for the starts in flight, and a start that ends after `close` began removes its
        own container and raises."""
        with self._lock:
            if self._closed:
                raise SandboxError("the container pool is closed (the process exits)")
            self._starting += 1
        try:
            labels = {**owner_labels(), POOL_LABEL: self.pool_id, EPISODE_LABEL: episode or "pool"}
            c = self.client.containers.run(
                self.config.image,
                IDLE_COMMAND,
                name=container_name(episode),
                labels=labels,
                stop_signal=STOP_SIGNAL,
                **(run_kwargs if run_kwargs is not None else self.run_kwargs()),
            )
            if self._closed:
                self.release(c, wait=True)
                raise SandboxError("the container pool closed while the container started")
            c.reload()  # its first `StartedAt`, against which `execs.restarted` checks
            return c
        finally:
            with self._started:
                self._starting -= 1
                self._started.notify_all()

    def run_kwargs(self) -> dict[str, Any]:
        """How the pool starts its containers (`DockerConfig.run_kwargs`)."""
        return self.config.run_kwargs(self.writable)

    def _fill_one(self) -> None:
        try:
            c = self._start()
        except Exception:
            with self._lock:
                self._filling -= 1
            return
        with self._lock:
            self._filling -= 1
            closed = self._closed
            if not closed:
                self._ready.append(c)
        if closed:
            self.release(c, wait=True)

    def _refill(self) -> None:
        with self._lock:
            need = self.config.warm - len(self._ready) - self._filling
            self._filling += max(need, 0)
        for _ in range(max(need, 0)):
            threading.Thread(target=self._fill_one, daemon=True).start()

    def acquire(self, run_kwargs: dict[str, Any] | None = None, episode_id: str | None = None):
        """A running container for one episode: a warm one, or (when `run_kwargs` are given:
        an episode's start-time conditions, a bind mount) one started with them."""
        c = None
        if run_kwargs is None:
            c = self._take_warm()
            self._refill()
            if c is not None and episode_id:
                self._background(self._rename, c, episode_id)
        if c is None:
            try:
                c = self._start(run_kwargs, episode_id)
            except SandboxConfigError:  # the job's mistake (`EnvError`): said as it is
                raise
            except Exception as exc:
                if (gone := self._image_gone()) is not None:
                    raise gone from exc
                raise SandboxError(
                    f"cannot start a container from {self.config.image}: {exc}"
                ) from exc
        try:
            self._check_user(c)
            self._give_workdir(c)
        except SandboxError:
            self.release(c)
            raise
        return c

    def _give_workdir(self, container) -> None:
        """The working directory (the agent's `$HOME` in a terminal) becomes the agent's
        when it is not root, as `permission` hands it to its user: docker makes a workdir
        the image lacks as root, mode 755, and a read-only root's tmpfs there alike, so
        until 12-06 a `docker.user: nobody` agent could write nowhere but /tmp (`touch x`:
        Permission denied in its home; in /root, mode 700, not even `ls`). The directory
        only: what the image put in it keeps its owner, as under `docker run --user`. One
        the agent can enter and write already (/tmp, a home the image gave it) is left as
        it is."""
        if self.user is None or self.user.split(":")[0] in ("0", "root"):
            return
        user, workdir = shlex.quote(self.user), shlex.quote(self.config.workdir)
        usable = f"test -d {workdir} && test -w {workdir} && test -x {workdir}"
        probe = exec_capture(container, ["sh", "-c", usable], 30, 64, user=self.user, checked=True)
        if probe[0] == 0:
            return
        chown = ["sh", "-c", f"chown {user} {workdir} 2>&1"]  # checked: the status tells
        code, out, _, _ = exec_capture(container, chown, 30, 1 << 12, user=ROOT, checked=True)
        if code != 0:  # our set-up failing (the user was checked): the attempt's, retried
            check_running(container, "the workdir could not be given to the agent's user")
            raise SandboxError(
                f"cannot give the workdir {self.config.workdir} to the user {self.user}: "
                f"{out.strip()[-300:] or f'chown exit {code}'}"
            )

    def _check_user(self, container) -> None:
        """Refuse an agent's user the image lacks (SandboxConfigError: no retry adds it),
        asked once per pool (its containers are its image's). The engine names no reason
        for an exec whose user is unknown (exit 126, no output: `docker could not start
        the command 'sh'`); the container's start said it while the container ran as
        that user (`unable to find user ghost`). One that root's probe also fails in is
        the container's trouble, said as such (retried)."""
        if self.user is None or self._user_checked:
            return
        try:
            exec_capture(container, ["sh", "-c", ":"], 30, 64, user=self.user, checked=True)
        except SandboxError:  # root's raises where the user is not the trouble
            exec_capture(container, ["sh", "-c", ":"], 30, 64, user=ROOT, checked=True)
            named = "docker.user" if self.config.user else f"the image {self.config.image}'s USER"
            raise SandboxConfigError(
                f"{named} {self.user!r}: no process can run as it in the image "
                f"{self.config.image} (a user or group its /etc/passwd and /etc/group do not "
                "list): name one it has, or a numeric uid"
            ) from None
        self._user_checked = True

    def _take_warm(self):
        """The first ready container that still runs as the pool started it, or None.

        A warm container can die while it waits (`docker kill`, the OOM killer, the
        engine): handed out, the episode's first exec got the engine's `409 ... is not
        running` and its attempt failed for good. So each is looked at once before it is
        handed out (one inspect call, ~1 ms against a cold start's ~180 ms); a stopped,
        frozen or restarted one (a restart would later read as one under the episode) is
        removed in the background and the next one (or a cold start) is taken instead."""
        while True:
            with self._lock:
                if not self._ready:
                    return None
                c = self._ready.pop(0)
            trouble = not_running(c)
            if trouble is None:
                return c
            log.warning("warm container %s not handed out: %s", c.id[:12], trouble)
            self.release(c)

    @staticmethod
    def _rename(container, episode_id: str) -> None:
        try:
            container.rename(container_name(episode_id))
        except (
            Exception
        ) as exc:  # removed meanwhile: the name only helps people reading `docker ps`
            if not not_found_or_busy(exc):
                log.warning("cannot rename container %s: %s", container.id[:12], exc)

    def _background(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        with self._lock:
            self._removing = [x for x in self._removing if x.is_alive()] + [t]
        t.start()

    def release(self, container, wait: bool = False) -> None:
        """Remove the container (killing everything in it) and its volumes. Removal takes
        ~0.1 s, so it runs in the background unless `wait`; `close` waits for all of them."""

        def remove() -> None:
            with contextlib.suppress(Exception):  # already gone: nothing left to free
                remove_container(
                    self.client.api, container.id, our_volumes(container.attrs.get("Mounts"))
                )

        if wait:
            remove()
        else:
            self._background(remove)

    def _wait_for_starts(self, timeout: float) -> bool:
        """Wait until no start is in flight (False when `timeout` s passed first)."""
        with self._started:
            return self._started.wait_for(lambda: self._starting == 0, timeout=timeout)

    def close(self) -> None:
        """Remove every container of the pool (at exit too: `atexit`). Starts still in
        flight are waited for (at most `CLOSE_WAIT` s) before the pool's containers are
        listed: one created after the listing would be left running."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
        for c in ready:
            self.release(c, wait=True)
        for t in list(self._removing):
            t.join(timeout=CLOSE_WAIT)
        self._wait_for_starts(CLOSE_WAIT)
        leftover = self.client.api.containers(
            all=True, filters={"label": f"{POOL_LABEL}={self.pool_id}"}
        )
        for info in leftover:
            with contextlib.suppress(Exception):  # removed meanwhile
                remove_container(self.client.api, info["Id"], our_volumes(info.get("Mounts")))


_POOLS: dict[str, ContainerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(
    config: DockerConfig, warm: int | None = None, writable: Sequence[str] = ()
) -> ContainerPool:
    """One pool per configuration, `writable` paths (`ContainerPool.writable`) and
    environment values per process (`warm` overrides the config's). The values count: a
    warm container keeps those it was started with, and a job run after `MY_TOKEN` (or
    the env file) changed got one holding the old value, which its redaction, knowing
    only the new one, left in the observations."""
    if warm is not None:
        config = replace(config, warm=warm)
    try:
        values = json.dumps(config.resolved_env(), sort_keys=True)
    except EnvError as exc:  # the pool's start says it (`container_env`)
        values = str(exc)
    digest = hashlib.sha256(values.encode()).hexdigest()  # never the values themselves
    key = json.dumps([asdict(config), sorted(writable), digest], sort_keys=True)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool._closed:
            pool = _POOLS[key] = ContainerPool(config, writable=writable)
        return pool
