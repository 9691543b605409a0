"""Every controllable condition: one small declared unit each (docs/conditions.md).

A condition is a configclass with a `kind` and up to three hooks:

- `start(kw, where)`: change the container's start options (a copy of the
  `containers.run` keyword arguments: tmpfs mounts, limits, mounts). A condition with
  this hook needs a container of its own: the warm pool's were started without it.
- `after(run, session, where)`: set the stage in the started container after the task's
  set-up, as root (`run(command)` raises when it fails; one that ran and failed fails
  alike on every attempt, so `Plan.after` makes it a SandboxConfigError; `run.container`
  is the container, for what no process inside may do), and say how the agent's
  processes run (`session.user`, `session.env`); it may return the condition as applied
  (corrupt_file's seeded offset), which is what the record says.
- `text(where)`: the sentence the initial state says ("the disk is full ...").

Two more declare what the load check needs (`conditions.mount_clashes`): `at(where)`
spells out defaults that depend on the sandbox (the disk kinds' path), and `writes(where)`
names the paths `after` writes, which no read-only mount may hold. Paths docker cannot
mount over, and a tmpfs that would hide the shell's programs, are refused by the fields'
own types (`MountPath`, `TmpfsPath`).

A limit a condition sets only tightens the job's own (`within`): `memory_low: 100g` under
a job's `memory: 256m` keeps 256m, and the record and the text say what was applied.

What the agent then meets is the environment's own answer: the kernel's ENOSPC, EROFS,
OOM kill, EAGAIN on fork; the shell's `command not found`. No file of ours stands in for a
condition: a full disk is a tmpfs sized to what it holds, not one a file of ours fills.
Two conditions live in what the agent can see and undo, as on a real machine:
`file_locked` is a process of ours holding the lock (root may kill it, `pkill -f`; any
user who may write the directory may remove the file and make it anew, unlocked), and
`clock` is libfaketime in the agent's environment (`LD_PRELOAD`, `FAKETIME`: `env -u
LD_PRELOAD date` says the real time, and a static program never saw the fake one). The
record of a condition is `{"kind": ..., **fields}`, the vocabulary shared with the MCP
fault proxy. The module is over 600 lines because it is that whole vocabulary, thirteen
small units and the checks of their options, in one place.
"""

from __future__ import annotations

import dataclasses
import mmap
import posixpath
import random
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Protocol

from pydantic import AfterValidator, BeforeValidator, Field
from worldtrace.schemas.parsing import configclass, to_mapping

from .base import SandboxConfigError
from .docker import DockerConfig, Memory, abs_path, memory_bytes, remount_tmpfs
from .execs import human
from .owners import ro_volume


class Run(Protocol):
    """Runs a shell command as root in the sandbox: its output (raises when it fails)."""

    container: Any
    """The sandbox's container, for what no process inside may do (`remount_tmpfs`)."""

    def __call__(self, command: str) -> str: ...


def _bytes_in(value: Any) -> Any:
    """`size: 0` or `user: 1000` as YAML writes them: a whole number as its digits."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _size(value: str) -> str:
    memory_bytes(value)
    return value


def _tmpfs_size(value: str) -> str:
    if memory_bytes(value) == 0:
        raise ValueError("a tmpfs of size 0 has no limit at all: give a size such as 16m")
    return value


Size = Annotated[str, BeforeValidator(_bytes_in), AfterValidator(_size)]
"""A byte size such as 0, 512k, 1m or 2g (a whole number is bytes)."""
TmpfsSize = Annotated[Size, AfterValidator(_tmpfs_size)]
"""The size of a disk kind's tmpfs: above 0."""


def _name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
        raise ValueError(f"not a command or user name: {value!r}")
    return value


def said_and(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return " and ".join(filter(None, (", ".join(items[:-1]), *items[-1:])))


def path_within(path: str, top: str) -> bool:
    """Whether `path` is `top` or lies below it."""
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


UNMOUNTABLE = ("/proc", "/sys", "/dev")
"""The engine's own file systems: docker mounts nothing on or below them."""
ENGINE_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")
"""Files the engine binds into every container (writable, as docs/conditions.md says)."""
HIDDEN = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""What a tmpfs may not cover (a tmpfs starts empty): the shell, its programs, libraries
and users, which the agent and the conditions' set-up run on."""
SYSTEM = (*HIDDEN[1:], "/etc/alternatives")
"""Nor may a tmpfs go below these (programs, libraries, the alternatives of awk, vi)."""
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""Where `missing_commands` removes commands (besides the image's PATH)."""


def normpath(path: str) -> str:
    """`path` normalized, a leading `//` as `/`: POSIX leaves `//usr` to the system (so
    `posixpath.normpath` keeps it), Linux reads it as `/usr`, docker refuses it. The
    checks judge the path the kernel sees."""
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _mountable(value: str) -> str:
    value = normpath(abs_path(value))
    if any(path_within(value, top) for top in UNMOUNTABLE) or value in ENGINE_FILES:
        raise ValueError(
            f"docker cannot mount over {value} (the engine's own /proc, /sys, /dev, "
            "/etc/hostname, /etc/hosts and /etc/resolv.conf)"
        )
    return value


def _tmpfs_path(value: str) -> str:
    value = _mountable(value)
    hidden = [top for top in HIDDEN if path_within(top, value)]
    hidden += [top for top in SYSTEM if path_within(value, top)]
    if hidden:
        raise ValueError(
            f"a tmpfs on {value} would hide the image's {hidden[0]} (a tmpfs starts empty), "
            "which the shell, its programs and the set-up need: give a path of the agent's "
            "files (the working directory, /data, /var/tmp)"
        )
    return value


REMOVE = r"""IFS=:
gone=
for c in "$@"; do
  for d in $PATH:{dirs}; do
    for f in "$d/$c"[0-9.-]* "$d/$c"; do
      [ -e "$f" ] || [ -L "$f" ] || continue
      v=${{f#"$d/$c"}}
      case "$v" in
        "" | [.-][0-9]*) ;;
        *) n=${{v%%[!0-9.]*}}
          case "$n" in
            [0-9]*.[0-9]*) ;;
            [0-9]*) [ "$f" -ef "$d/$c" ] || continue ;;
            *) continue ;;
          esac ;;
      esac
      gone="$gone$f
"
    done
  done
done
IFS='
'
set -f
[ -z "$gone" ] || rm -f -- $gone || exit 1
set +f
hash -r 2>/dev/null
for c in "$@"; do
  p=$(command -v "$c") && echo "left $c $p" && continue
  command -v bash >/dev/null && p=$(bash -c 'command -v "$1"' bash "$c") && echo "left $c $p"
done
true""".format(dirs=":".join(BIN_DIRS))
"""Remove commands `$@` from every PATH directory with their versioned names, then say
each that still runs (`left NAME ANSWER`, as sh or bash find it). A versioned name is the
name, then `.` or `-` and a digit (`python3.11` for python3, `gcc-12` for gcc), or a
number with a dot (`perl5.36.0`, `perl5.36-x86_64-linux-gnu` for perl; `python3.11` for
python), or a number alone when that name is a link to the command itself (`ping6`); a
command named by a name and a number is another command (`diff3`, `sha256sum`). The
names' own versions are looked at before anything goes (`-ef`); the directories are
split by the shell (`tr` may be one of the commands). One `rm` removes them all, `rm`
among them: until 12-06 each went by its own `rm`, so none was left to remove what came
after `rm`; and `hash -r` forgets where the shell ran `rm` from, which dash's `command -v
rm` answered with the file gone (`rm remains at /usr/bin/rm`)."""


SH_PROGRAMS = ("sh", "dash", "busybox")
"""Names `missing_commands` refuses: `sh` or what it commonly is (Debian's /bin/sh is
dash, busybox images' is busybox). Removed, `sh` no longer runs and nothing of the
sandbox does; `dash` was accepted until 12-06."""


def _removable(value: str) -> str:
    if value in (".", ".."):  # `$d/.` is the directory: until 12-06 it failed at reset
        raise ValueError(f"not a command name: {value!r} (a directory's name)")
    if value == "sh":
        raise ValueError(
            "sh cannot be removed: the sandbox runs the set-up and every command through it"
        )
    if value in SH_PROGRAMS:
        raise ValueError(
            f"{value} cannot be removed: it is what /bin/sh commonly is, and the sandbox "
            "runs the set-up and every command through sh"
        )
    return value


def _unprivileged(value: str) -> str:
    if value == "root" or (value.isdigit() and int(value) == 0):
        raise ValueError(
            "the user must be unprivileged, not root (uid 0): name another (nobody), or "
            "leave the condition out to run as root"
        )
    return value


Name = Annotated[str, AfterValidator(_name)]
AbsPath = Annotated[str, AfterValidator(abs_path)]
MountPath = Annotated[str, AfterValidator(_mountable)]
TmpfsPath = Annotated[str, AfterValidator(_tmpfs_path)]


def image_of(run: Run) -> str:
    """The image of the container `run` sets up (for messages)."""
    attrs = getattr(getattr(run, "container", None), "attrs", None) or {}
    return (attrs.get("Config") or {}).get("Image") or "the sandbox's image"


CLOCK_YEARS = 50
"""The largest `clock` offset, in years (of 365 days, as libfaketime counts them). Measured
on worldtrace/debian (12-06): within 1970-2106 `date`, python, perl, file times, tar and
git show the faked date alike; beyond, git's dates stop at 1970 and 2106, file times at
1901 and 2446 (ext4), python's at 1677 and 2262, and `date` printed the year -972 for
-3000y. 50 years either way stays within 1970-2106 until 2056 (the lower end for good)."""
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}


def _offset(value: str) -> str:
    if not re.fullmatch(r"[+-]\d+[smhdy]", value):
        raise ValueError(f"not a clock offset: {value!r} (write e.g. -3y, +2d, -90m)")
    if int(value[1:-1]) * _SECONDS[value[-1]] > CLOCK_YEARS * _SECONDS["y"]:
        raise ValueError(
            f"{value} is more than {CLOCK_YEARS} years ({CLOCK_YEARS * 365} days) off the real "
            "time: beyond that the programs disagree on the date (git's stop at 1970 and "
            "2106, file times at 1901, python's at 1677 and 2262)"
        )
    return value


@dataclass(frozen=True)
class Where:
    """The sandbox a condition changes."""

    workdir: str
    """The agent's working directory (terminal: the shell's; swe: the repository)."""
    binds: Mapping[str, str] = field(default_factory=dict)
    """Container paths the kind can bind read-only from the host (swe: the repository)."""
    mounted: Mapping[str, str] = field(default_factory=dict)
    """Container paths the kind mounts read-only at every start, each with what it mounts
    there (swe with `mount: true`: the repository): no condition's mount may go on or
    inside one, nor a write of a condition's set-up (`writes`)."""
    needs: Mapping[str, str] = field(default_factory=dict)
    """Commands the kind's own tools run, each with the tools that do (swe: its listing,
    `read`, `edit`): `missing_commands` may not remove them, as it may not remove sh."""
    writable: tuple[str, ...] | None = None
    """Under the job's read-only root (`docker.read_only: true`), the paths its tmpfs keep
    writable (/tmp, the working directory): a condition that must write elsewhere cannot
    be set up (`refused`). None: the root is writable (`conditions.rooted` sets it)."""
    full: tuple[str, ...] = ()
    """Paths the episode's disk conditions size (`Plan.text`): no other condition's text
    calls them writable."""
    memory: int | None = None
    """Bytes of the sandbox's memory limit (`docker.memory`), which a disk condition's
    tmpfs files count against (`conditions.memory_clashes`). None: unknown (`rooted` sets
    it)."""

    def read_only_at(self, path: str) -> bool:
        """Whether the job's read-only root holds `path` (outside its tmpfs)."""
        return self.writable is not None and not any(path_within(path, w) for w in self.writable)

    def root_said(self) -> str:
        """The job's read-only root, as a refusal names it."""
        kept = said_and(sorted(self.writable or ()))
        return (
            f"on the sandbox's read-only root (`docker.read_only: true`; only {kept} stay writable)"
        )


@dataclass
class Session:
    """How the agent's processes run in this episode (set by the conditions' `after`)."""

    user: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    """Commands removed (the terminal leaves them out of the installed tools)."""


class Condition:
    """Base of the condition kinds: no-op hooks and the record."""

    kind: ClassVar[str] = ""
    group: ClassVar[str] = ""
    """Conditions of one group exclude each other (default: the kind)."""
    order: ClassVar[int] = 50
    """`after` hooks run in this order: stage set-up first, disk fillers last."""
    shorthand: ClassVar[str | None] = None
    """The field a bare value fills (`memory_low: 64m`)."""

    def start(self, kw: dict[str, Any], where: Where) -> None:
        """Change the container's start options (only kinds that need a fresh container)."""

    def confine(self, resources: dict[str, Any]) -> None:
        """Set a limit of the agent's processes (a field of the engine's container update:
        `PidsLimit`, `NanoCpus`, `Memory`), applied once our reset's execs ran
        (`Plan.confine`): they are ours, not the agent's, and must not meet it."""

    def after(self, run: Run, session: Session, where: Where) -> Condition | None:
        """Set the stage in the started container, as root; the condition as applied when
        the set-up chose an option (corrupt_file's seeded offset), else None. A failure
        no retry mends (a user the image lacks) is a SandboxConfigError."""

    def text(self, where: Where) -> str:
        raise NotImplementedError

    def at(self, where: Where) -> Condition:
        """This condition with the defaults that depend on the sandbox spelled out (the
        disk kinds' `path`: the working directory), as it is recorded."""
        return self

    def writes(self, where: Where) -> tuple[tuple[str, str], ...]:
        """(path, what) that `after` writes as root: no read-only mount may hold them."""
        return ()

    def refused(self, where: Where) -> list[tuple[tuple, str]]:
        """(key path, why) of each option the sandbox `where` describes cannot honour
        (a command the SWE kind's tools run): refused at load, and at reset from code."""
        return []

    def within(self, docker: DockerConfig) -> Condition:
        """This condition as applied under the job's limits (a limit only tightens)."""
        return self

    @property
    def restarts(self) -> bool:
        """Whether the container must be started with this condition (no warm one)."""
        return type(self).start is not Condition.start

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, **to_mapping(self)}


def _tmpfs(kw: dict[str, Any], path: str, options: str) -> None:
    kw["tmpfs"] = {**(kw.get("tmpfs") or {}), path: options}


def _used(run: Run, path: str, inodes: bool = False) -> int:
    """KiB (or inodes) used on the file system at `path`, as its `df` says (read here:
    the image's awk may be gone, e.g. under a tmpfs on /etc/alternatives)."""
    flag = "-Pi" if inodes else "-Pk"
    return int(run(f"df {flag} {shlex.quote(path)}").strip().splitlines()[-1].split()[2])


def _page_up(n: int) -> int:
    """Bytes rounded up to whole pages: what a tmpfs gives."""
    return -(-n // mmap.PAGESIZE) * mmap.PAGESIZE


class _Disk(Condition):
    """A small tmpfs on the working directory, shrunk after the task's set-up to what it
    holds plus the free space asked for. No file of ours fills it: the agent's `ls -a`
    and `du` show its own files, `df` agrees with them, and deleting what it sees frees
    what those took, no more."""

    group = "disk"
    order = 90
    size: str
    path: str | None

    def free_bytes(self) -> int:
        return 0

    def at(self, where):
        return self if self.path else dataclasses.replace(self, path=where.workdir)

    def start(self, kw, where):
        _tmpfs(kw, self.path or where.workdir, f"size={self.size},exec")

    def after(self, run, session, where):
        path = self.path or where.workdir
        free = -(-self.free_bytes() // 1024)  # KiB, rounded up (tmpfs: to whole pages)
        used = _used(run, path)
        size = min(used + free, memory_bytes(self.size) // 1024)
        if size:
            remount_tmpfs(run.container, path, f"size={size}k")
        else:  # empty and no space asked for: the smallest tmpfs is a page, so no file
            # may be made (every inode is used: the root's), and none is there to grow
            inodes = _used(run, path, inodes=True)
            remount_tmpfs(run.container, path, f"size=4k,nr_inodes={inodes}")
        if size - used < free:  # the set-up used what `size` left for `free` (2026-12-06)
            return self.left(max(size - used, 0))
        return None

    def left(self, kib: int) -> Condition:
        """This condition as it stands with `kib` KiB free (fewer than asked)."""
        return self


@configclass
class DiskFull(_Disk):
    """The disk is full: writes fail with `No space left on device`."""

    kind = "disk_full"
    size: TmpfsSize = "16m"
    """Size of the tmpfs while the task's set-up runs (then shrunk to what it holds)."""
    path: TmpfsPath | None = None
    """Where (default: the working directory)."""

    def text(self, where):
        return f"the disk is full: no space is left in {self.path or where.workdir}"


@configclass
class DiskLow(_Disk):
    """Little space left: a write over it fails with `No space left on device`."""

    kind = "disk_low"
    shorthand = "free"
    free: Size = "1m"
    """Space left free, e.g. 1m or 64k (a tmpfs gives whole pages: 2k becomes 4k, and
    the record and the initial state say 4k)."""
    size: TmpfsSize = "16m"
    """Size of the tmpfs while the task's set-up runs (then shrunk to what it holds)."""
    path: TmpfsPath | None = None
    """Where (default: the working directory)."""

    def __post_init__(self) -> None:
        if _page_up(memory_bytes(self.free)) >= memory_bytes(self.size):
            raise ValueError(f"free {self.free} must be below the tmpfs size {self.size}")

    def within(self, docker):
        """`free` as the tmpfs gives it: rounded up to whole pages."""
        free = _page_up(memory_bytes(self.free))
        if free == memory_bytes(self.free):
            return self
        return dataclasses.replace(self, free=f"{free >> 10}k")

    def free_bytes(self) -> int:
        return memory_bytes(self.free)

    def left(self, kib):
        return dataclasses.replace(self, free=f"{kib}k")

    def text(self, where):
        if not self.free_bytes():  # the task's set-up used the space `free` asked for
            return f"the disk is full: no space is left in {self.path or where.workdir}"
        return (
            f"the disk is nearly full: {human(memory_bytes(self.free))} free in "
            f"{self.path or where.workdir}"
        )


@configclass
class InodesLow(Condition):
    """No inodes left (or a few): files cannot be created though space remains."""

    kind = "inodes_low"
    group = "disk"
    order = 90
    shorthand = "free"
    free: Annotated[int, Field(ge=0, le=1 << 16)] = 0
    """Inodes left free."""
    inodes: Annotated[int, Field(ge=64, le=1 << 16)] = 2048
    """Inodes of the tmpfs (the task's set-up may use some before it is filled)."""
    size: TmpfsSize = "16m"
    path: TmpfsPath | None = None
    """Where (default: the working directory)."""

    def at(self, where):
        return self if self.path else dataclasses.replace(self, path=where.workdir)

    def start(self, kw, where):
        _tmpfs(kw, self.path or where.workdir, f"size={self.size},nr_inodes={self.inodes},exec")

    def after(self, run, session, where):  # as `_Disk`: no files of ours fill it
        path = self.path or where.workdir
        used = _used(run, path, inodes=True)
        inodes = min(used + self.free, self.inodes)
        remount_tmpfs(run.container, path, f"nr_inodes={inodes}")
        if inodes - used != self.free:  # the set-up used what `inodes` left for `free`
            return dataclasses.replace(self, free=inodes - used)
        return None

    def text(self, where):
        at, n = self.path or where.workdir, self.free
        if not n:
            return f"no inodes are left in {at}: new files cannot be created"
        one = n == 1
        return (
            f"only {n} {'inode is' if one else 'inodes are'} left in {at}: at most {n} more "
            f"{'file or directory' if one else 'files or directories'} can be created"
        )


@configclass
class ReadOnly(Condition):
    """Read-only paths: the image's content there, mounted read-only (`/`: the root)."""

    kind = "read_only"
    shorthand = "paths"
    paths: tuple[MountPath, ...] = ("/",)
    """Absolute paths of directories; `/` makes the root read-only (with a writable
    /tmp)."""

    def __post_init__(self) -> None:
        if not self.paths:  # not min_length: pydantic adds it to a refused path's error
            raise ValueError("paths: give at least one path")
        for i, path in enumerate(self.paths):
            for other in self.paths[:i]:
                if path == other:
                    raise ValueError(f"{path} is listed twice")
                if "/" not in (path, other) and (
                    path_within(path, other) or path_within(other, path)
                ):
                    inner, outer = (path, other) if path_within(path, other) else (other, path)
                    raise ValueError(
                        f"{inner} lies within {outer}, and docker cannot make a mount point "
                        f"in a read-only mount: {outer} alone covers it"
                    )

    def start(self, kw, where):
        volumes, mounts = dict(kw.get("volumes") or {}), list(kw.get("mounts") or [])
        for path in self.paths:
            if path == "/":  # the root, and what the kind binds from the host
                kw["read_only"] = True
                kw["tmpfs"] = {"/tmp": "size=64m", **(kw.get("tmpfs") or {})}
                for target, host in where.binds.items():
                    volumes[host] = {"bind": target, "mode": "ro"}
            elif path in where.binds:
                volumes[where.binds[path]] = {"bind": path, "mode": "ro"}
            else:
                mounts.append(ro_volume(path))
        if volumes:
            kw["volumes"] = volumes
        if mounts:
            kw["mounts"] = mounts

    def text(self, where):
        """The root's text names what stays writable (its /tmp, the job's own tmpfs under
        `docker.read_only`), but not a path a disk condition fills: until 12-06 a full /tmp
        was also said to `stay writable`."""
        if "/" not in self.paths:
            return f"the file system is read-only at {', '.join(self.paths)}"
        tmpfs = sorted({"/tmp", *(where.writable or ())} - set(where.binds))  # those: bound ro
        open_ = [p for p in tmpfs if p not in where.full]
        said = "the file system is read-only"
        if open_ != tmpfs:  # a disk condition says how the others stand
            said += f" but for {said_and(tmpfs)}"
        if open_:
            said += f" ({said_and(open_)} {'stays' if len(open_) == 1 else 'stay'} writable)"
        return said


@configclass
class MemoryLow(Condition):
    """Little memory: a process over the limit is killed by the kernel (exit 137)."""

    kind = "memory_low"
    shorthand = "limit"
    limit: Memory = "64m"
    """Memory (and swap) limit of the container."""

    def within(self, docker):
        if memory_bytes(self.limit) <= memory_bytes(docker.memory):
            return self
        return dataclasses.replace(self, limit=docker.memory)

    def confine(self, resources):
        """Not a start option: a task's set-up that needs more (an install, a build) was
        killed on every attempt, and the probe and the shell's start ran under it too."""
        resources["Memory"] = resources["MemorySwap"] = memory_bytes(self.limit)

    def text(self, where):
        return (
            f"memory is limited to {human(memory_bytes(self.limit))}: a process over it is killed"
        )


@configclass
class PidsLow(Condition):
    """Few processes: fork fails with `Resource temporarily unavailable` beyond the limit."""

    kind = "pids_low"
    shorthand = "limit"
    limit: Annotated[int, Field(ge=8, le=65536)] = 24
    """Processes (and threads) the container may hold at once."""

    def within(self, docker):
        return dataclasses.replace(self, limit=min(self.limit, docker.pids_limit))

    def confine(self, resources):
        """Not a start option: the reset's execs ran under it (the engine's runtime takes
        threads in the container to start each one, and failed now and then when few slots
        were left: `read init-p: connection reset by peer`), as did a task's set-up."""
        resources["PidsLimit"] = self.limit

    def text(self, where):
        return f"at most {self.limit} processes can run at once"


@configclass
class CpuSlow(Condition):
    """A slow CPU: a small share of one core."""

    kind = "cpu_slow"
    shorthand = "cpus"
    cpus: Annotated[float, Field(ge=0.01, le=1)] = 0.05
    """Share of one core."""

    def within(self, docker):
        return dataclasses.replace(self, cpus=min(self.cpus, docker.cpus))

    def confine(self, resources):
        """Not a start option: the reset ran under it, the task's set-up too (20 times
        slower at 0.05: one that takes 1 s ran past a 10 s step timeout, and the attempt
        failed), as did the image's probe and the shell's start."""
        resources["NanoCpus"] = int(self.cpus * 1e9)

    def text(self, where):
        return f"the CPU is slow: {self.cpus:g} of one core"


@configclass
class MissingCommands(Condition):
    """Commands absent: removed from every PATH directory (`command not found`)."""

    kind = "missing_commands"
    order = 95  # last: the others' set-up may use them (df, mount, chown)
    shorthand = "commands"
    commands: tuple[Annotated[str, AfterValidator(_name), AfterValidator(_removable)], ...] = (
        "git",
    )
    """Command names (not sh, nor dash or busybox: `SH_PROGRAMS`)."""

    def __post_init__(self) -> None:
        if not self.commands:  # not min_length: pydantic adds it to a refused name's error
            raise ValueError("commands: give at least one command")

    def after(self, run, session, where):
        out = run(f"set -- {' '.join(shlex.quote(c) for c in self.commands)}\n{REMOVE}")
        for line in out.splitlines():  # what still runs: the condition would not hold
            if not line.startswith("left "):
                continue
            c, _, answer = line.removeprefix("left ").partition(" ")
            if answer.startswith("/"):
                raise SandboxConfigError(
                    f"condition missing_commands: {c} remains at {answer} in the image "
                    f"{image_of(run)} after its removal"
                )
            raise SandboxConfigError(  # busybox sh runs its applets without the PATH
                f"condition missing_commands: {c} still runs in the image {image_of(run)} "
                f"with no file of it on the PATH (`command -v {c}` answers `{answer}`: a "
                "builtin of its shell, or an applet busybox runs itself), so it cannot be "
                "made missing"
            )
        session.missing.update(self.commands)

    def refused(self, where):
        if any(where.read_only_at(d) for d in BIN_DIRS):
            return [
                (
                    ("commands",),
                    f"missing_commands removes commands from the PATH's directories, "
                    f"{where.root_said()}",
                )
            ]
        return [
            (
                ("commands", i),
                f"{c} cannot be removed from this sandbox: its own tools run it "
                f"({where.needs[c]}), and the agent would meet them failing, not a missing "
                "command",
            )
            for i, c in enumerate(self.commands)
            if c in where.needs
        ]

    def writes(self, where):
        return tuple((d, f"removes commands from {d}") for d in BIN_DIRS)

    def text(self, where):
        return (
            "these commands are not on the PATH (removed with their versioned names): "
            + ", ".join(self.commands)
        )


@configclass
class Permission(Condition):
    """An unprivileged user: the working directory is theirs, the rest of the system root's."""

    kind = "permission"
    order = 70
    shorthand = "user"
    user: Annotated[
        str, BeforeValidator(_bytes_in), AfterValidator(_name), AfterValidator(_unprivileged)
    ] = "nobody"
    """User name (in the image's /etc/passwd) or numeric uid; not root, nor of its group
    (a uid the image does not list runs with the same number as its group)."""

    def after(self, run, session, where):
        u = shlex.quote(self.user)
        ids = run(f"id -u {u} 2>/dev/null && id -G {u} 2>/dev/null; true").split()
        user = self.user
        if not ids and self.user.isdigit():  # a uid the image does not list: docker would
            user, ids = f"{self.user}:{self.user}", [self.user, self.user]  # give it gid 0
        if not ids:  # no retry adds the user: the job's to fix
            raise SandboxConfigError(
                f"condition permission: the image {image_of(run)} has no user {self.user} "
                f"(not in its /etc/passwd): {_users_it_has(run)}"
            )
        if int(ids[0]) == 0:
            raise SandboxConfigError(
                f"condition permission: {self.user} is root (uid 0) in the image "
                f"{image_of(run)}, no unprivileged user"
            )
        if "0" in ids[1:]:
            raise SandboxConfigError(
                f"condition permission: {self.user} is in the root group (gid 0) in the image "
                f"{image_of(run)}, no unprivileged user"
            )
        run(f"chown -R {shlex.quote(user)} {shlex.quote(where.workdir)}")
        session.user = user

    def writes(self, where):
        return ((where.workdir, f"hands {where.workdir} to the user (chown -R)"),)

    def text(self, where):
        return (
            f"commands run as the unprivileged user {self.user}; {where.workdir} belongs to "
            "them, the rest of the system to root"
        )


USERS_SHOWN = 5
"""Users of the image a `permission` error names, at most."""


def _users_it_has(run: Run) -> str:
    """What to name instead of a user the image lacks: `nobody` where it has one, else its
    unprivileged users (neither uid nor gid 0). Until 12-06 the message said `nobody` on
    busybox, which has only root and `user`."""
    listed = run(
        "while IFS=: read -r n x u g rest; do"
        ' [ "$u" != 0 ] && [ "$g" != 0 ] && echo "$n"; done < /etc/passwd 2>/dev/null; true'
    ).split()
    if not listed:
        return "it lists no unprivileged user: give a numeric uid"
    if "nobody" in listed:  # the usual one, where it is
        listed = ["nobody"]
    names = ", ".join(listed[:USERS_SHOWN]) + (", ..." if len(listed) > USERS_SHOWN else "")
    return f"name one it has ({names}) or a numeric uid"


_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "y": "years"}


@configclass
class Clock(Condition):
    """A wrong clock, through libfaketime (the worldtrace/debian image has it): preloaded
    in the agent's environment (`LD_PRELOAD`, `FAKETIME`), which the agent can read and
    drop (`env -u LD_PRELOAD date` says the real time); the kernel's clock is the host's,
    which no container may set."""

    kind = "clock"
    order = 5
    shorthand = "offset"
    offset: Annotated[str, AfterValidator(_offset)] = "-3y"
    """Offset from the real time: -3y, +2d, -90m, +30s; at most 50 years (`CLOCK_YEARS`)."""

    def after(self, run, session, where):
        lib = run(
            "ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1"
            " 2>/dev/null | head -n 1"
        ).strip()
        if not lib:  # no retry installs it: the job's to fix
            raise SandboxConfigError(
                f"condition clock needs libfaketime in the image {image_of(run)} "
                "(worldtrace/debian has it; add Debian's faketime package to others)"
            )
        session.env.update(LD_PRELOAD=lib, FAKETIME=self.offset, FAKETIME_DONT_FAKE_MONOTONIC="1")

    def text(self, where):
        n, unit = int(self.offset[1:-1]), _UNITS[self.offset[-1]]
        unit = unit[:-1] if n == 1 else unit
        side = "behind" if self.offset[0] == "-" else "ahead of"
        return f"the system clock is {n} {unit} {side} the real time"


def _in(where: Where, path: str) -> str:
    return normpath(posixpath.join(where.workdir, path))


TRY_LOCK = (
    "import fcntl, sys\n"
    "try: fcntl.flock(open(sys.argv[1]), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "except BlockingIOError: sys.exit(1)\n"
    "except Exception: sys.exit(2)"
)
"""`flock -n FILE true` where the image has python3 and no flock: 0 while the file is
free, 1 once another process holds it, 2 when it cannot be tested (an uncaught error
would exit 1, read as "locked")."""


HOLD = (
    "import fcntl, os, signal, sys\n"
    "p = sys.argv[1]; rw = not os.stat(p).st_mode & 0o111\n"
    "try: f = open(p, 'r+b' if rw else 'rb')\n"
    "except OSError: rw, f = False, open(p, 'rb')\n"
    "fcntl.flock(f, fcntl.LOCK_EX); fcntl.lockf(f, fcntl.LOCK_EX if rw else fcntl.LOCK_SH)\n"
    "signal.pause()"
)
"""Hold file `$1` locked (flock's exclusive lock, and fcntl's as sqlite takes it) until
killed. A program's file is opened read-only, as `flock(1)` opens it: opened for writing
it could not be run (`Text file busy`, ETXTBSY), and one running could not be opened so;
fcntl's exclusive lock needs a file open for writing, so a read-only one holds fcntl's
shared lock (writers still wait) beside flock's exclusive one. So does a file that cannot
be opened for writing (a read-only mount)."""


@configclass
class FileLocked(Condition):
    """A file locked by another process (flock and fcntl locks, as apt or sqlite take).
    The holder is a process of ours the agent can see (`ps`), and undo as it could a real
    one: root may kill it (`pkill -f`), and any user who may write the directory may
    remove the file and make it anew (the lock holds the old file, not the name)."""

    kind = "file_locked"
    order = 20
    shorthand = "path"
    path: Annotated[str, Field(min_length=1)]
    """The file (relative to the working directory, or absolute); created when missing."""

    def after(self, run, session, where):
        """Make the file, start a process that locks it, and wait until the lock is held.
        Every step must hold: until 12-06 a file that could not be made (a read-only
        root, `/proc`) and a directory (which the holder cannot open) still said `locked`
        (flock's own error ended the wait at once), or waited out the step timeout. A
        failure says why on the set-up's output (a SandboxConfigError: `Plan.after`).
        A file that exists is not opened for writing (`HOLD`): until 12-06 a program's
        file (`/bin/dash`, `python3` itself) failed with `Text file busy`."""
        path = _in(where, self.path)
        p = shlex.quote(path)
        fail = f"echo {shlex.quote(f'file_locked: cannot lock {path}')}"
        run(  # the shell's own error says why the file cannot be made
            "command -v python3 >/dev/null || command -v flock >/dev/null ||"
            f" {{ {fail}: the image has neither python3 nor flock; exit 1; }};"
            f" if [ -d {p} ]; then {fail}: Is a directory; exit 1; fi;"
            f' [ -e {p} ] || {{ mkdir -p "$(dirname {p})" && : >> {p}; }} || exit 1;'
            f" if command -v python3 >/dev/null; then setsid python3 -c {shlex.quote(HOLD)} {p}"
            f" </dev/null >/dev/null 2>&1 & else setsid flock -x {p} sleep 2147483647"
            " </dev/null >/dev/null 2>&1 & fi; h=$!; i=0;"
            f" free() {{ if command -v flock >/dev/null; then flock -n {p} true; else"
            f" python3 -c {shlex.quote(TRY_LOCK)} {p}; fi; }};"
            " while free; r=$?; [ $r -ne 1 ]; do"
            f"  [ $r -eq 0 ] || {{ {fail}: the lock cannot be tested, exit $r; exit 1; }};"
            f"  kill -0 $h 2>/dev/null || {{ {fail}: its holder ended; exit 1; }};"
            f"  i=$((i+1)); [ $i -gt 1000 ] && {{ {fail}: not held after 10 s; exit 1; }};"
            "  sleep 0.01; done;"
            f" kill -0 $h 2>/dev/null || {{ {fail}: its holder ended; exit 1; }}"
        )

    def writes(self, where):
        path = _in(where, self.path)
        return ((path, f"creates and locks {path}"),)

    def text(self, where):
        return f"{_in(where, self.path)} is locked by another process"


@configclass
class CorruptFile(Condition):
    """A corrupted file: bytes overwritten with seeded random ones."""

    kind = "corrupt_file"
    order = 20
    shorthand = "path"
    path: Annotated[str, Field(min_length=1)]
    """The file (relative to the working directory, or absolute); it must exist."""
    bytes: Annotated[int, Field(ge=1, le=4096)] = 16
    """How many bytes are overwritten: at most what the file holds from `offset` on (it
    never grows; the record and the text say how many were)."""
    offset: Annotated[int | None, Field(ge=0)] = None
    """Where (default: a seeded random place in the file); below the file's size."""
    seed: int | None = None
    """Seed of the bytes and place (default: the episode's, set when sampled)."""

    def after(self, run, session, where):
        rng = random.Random(f"corrupt_file:{self.seed or 0}")
        data = "".join(f"\\{rng.randrange(256):03o}" for _ in range(self.bytes))
        frac = rng.randrange(1_000_000)
        path = _in(where, self.path)
        p, b = shlex.quote(path), self.bytes
        off = (
            str(self.offset)
            if self.offset is not None
            else f"$(( s > {b} ? (s - {b}) * {frac} / 1000000 : 0 ))"
        )
        out = run(  # `n`: the bytes from `off` to the end, at most `b`; errors said (`fail`)
            f"if [ -d {p} ]; then echo is=directory; exit 0; fi;"
            f" if [ ! -f {p} ]; then echo is=none; exit 0; fi;"
            f" if ! s=$( {{ wc -c < {p}; }} 2>&1 ); then printf 'fail read %s\\n' \"$s\";"
            " exit 0; fi;"
            f" off={off}; n=$(( s - off < {b} ? s - off : {b} )); if [ $n -le 0 ]; then"
            f" echo size=$s; exit 0; fi; if ! e=$(printf '{data}' | dd of={p} bs=1 seek=$off"
            f" count=$n conv=notrunc 2>&1); then printf 'fail overwrite %s\\n' \"$e\"; exit 0; fi;"
            " echo offset=$off bytes=$n"
        )
        if out.startswith("fail "):  # the command's own error (dd's), no retry mends it
            _, what, said = out.split(" ", 2)
            raise SandboxConfigError(
                f"condition corrupt_file: cannot {what} {path} in the image {image_of(run)}: "
                f"{(said.strip().splitlines() or ['no reason given'])[0]}"
            )
        if out.strip() == "is=directory":
            raise SandboxConfigError(
                f"condition corrupt_file: {path} is a directory after the task's set-up, no file"
            )
        got = dict(re.findall(r"(\w+)=(\d+)", out))
        if "size" in got:  # no retry makes the file longer: the job's to fix
            size = int(got["size"])
            raise SandboxConfigError(
                f"condition corrupt_file: {path} is empty after the task's set-up: it has no "
                "byte to overwrite"
                if not size
                else f"condition corrupt_file: offset {self.offset} is past the end of {path} "
                f"({size} bytes after the task's set-up): give an offset below {size}, or "
                "none (a seeded place)"
            )
        if "offset" not in got:  # no retry makes the file: the task's set-up must
            raise SandboxConfigError(
                f"condition corrupt_file: {path} is no file after the task's set-up "
                "(the set-up must make it)"
            )
        return dataclasses.replace(self, offset=int(got["offset"]), bytes=int(got["bytes"]))

    def writes(self, where):
        path = _in(where, self.path)
        return ((path, f"overwrites bytes in {path}"),)

    def refused(self, where):
        path = _in(where, self.path)
        if not where.read_only_at(path):
            return []
        return [(("path",), f"corrupt_file overwrites bytes in {path}, {where.root_said()}")]

    def text(self, where):
        n = f"{self.bytes} byte{'' if self.bytes == 1 else 's'}"
        return f"{_in(where, self.path)} is corrupted ({n} overwritten)"


@configclass
class Setup(Condition):
    """Anything else: shell commands run as root after the task's set-up, and what they do."""

    kind = "setup"
    order = 10
    commands: Annotated[tuple[str, ...], Field(min_length=1)]
    """Shell commands (as root, in the working directory)."""
    description: Annotated[str, Field(min_length=1)]
    """The condition they create, as the initial state says it."""

    def after(self, run, session, where):
        for cmd in self.commands:
            run(f"cd {shlex.quote(where.workdir)} && {cmd}")

    def text(self, where):
        return self.description


def within(conditions: Sequence[Condition], docker: DockerConfig) -> tuple[Condition, ...]:
    """The episode's conditions as applied under the job's limits (what is recorded)."""
    return tuple(c.within(docker) for c in conditions)


KINDS: dict[str, type[Condition]] = {
    c.kind: c
    for c in (
        DiskFull,
        DiskLow,
        InodesLow,
        ReadOnly,
        MemoryLow,
        PidsLow,
        CpuSlow,
        MissingCommands,
        Permission,
        Clock,
        FileLocked,
        CorruptFile,
        Setup,
    )
}
"""Condition kind -> class; the names of the shared vocabulary (docs/conditions.md)."""
