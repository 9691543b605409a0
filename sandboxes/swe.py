"""SWE domain: a repository in a container and three tools.

- `read(path, start?, end?)`: the file with line numbers (`cat -n` style: a line ends at
  `\n` only, so a `\r` or a form feed stays in its line); a range that holds no line
  (start after end, or past the last line) is the tool's error;
- `edit(path, old, new)`: replace the one occurrence of `old` with `new` (or write the
  whole file with `content`), observed as the unified diff `diff -u` prints;
- `bash(command)`: a one-shot command (cwd = the repository) with its exit code, under
  the step timeout and the output cap (a command whose output passes the cap is killed
  with its process group: flagged `truncated`, not an error, exit code None; one that had
  ended by itself, its last output just past the cap, keeps its exit code).

The repository is copied into the container (default) or bind-mounted read-only, so an
episode never changes the host's copy. Files are read and written by processes in the
container, so a read-only mount or a full disk answers as it would anyone: `error: cannot
write pkg/x.py: Read-only file system` is an observation, not a failed attempt.

The repository is the agent's to break: when it is deleted, `bash` runs in `/` (as a shell
whose directory was removed under it still runs commands) and `read`/`edit` answer with
the file system's `No such file or directory`. `read` and `edit` answer under the same
output cap and step timeout as `bash`: a file over the cap (or an endless device) shows
its beginning flagged `truncated`, and so does a diff over it; a range is read where it
lies in the file (`LINES`), flagged only when its own lines pass the cap; a read that
hangs (a FIFO) is flagged `timed_out`.
When docker cannot start a process at all, the step raises SandboxError (execs.py), and
so does a container that stops under a step (killed from outside, its init OOM-killed)
or freezes under it (`docker pause`, a frozen cgroup: the command gets no answer past its
step timeout, `execs._Watch`): that step is no observation; the attempt fails with the
container's state. A command the
agent kills (`kill -9 $$`) or the kernel OOM-kills while the container runs on answers
exit 137 as usual.

`edit` changes only the bytes it replaces: a file that is not UTF-8 (Latin-1, binary)
keeps every other byte as it was (held with `surrogateescape`), and its diff shows those
bytes as U+FFFD, as `read` and `bash` show them; `old` matches text only, never such
bytes. An argument that cannot be written as UTF-8 (a lone surrogate) is the tool's error.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass

from .base import (
    SandboxConfigError,
    SandboxError,
    TaskSpec,
    ToolSpec,
    Unpicklable,
    integral_ints,
)
from .condition_kinds import within
from .conditions import Condition, Plan, Session, Where
from .docker import FORBIDDEN_HOST_PATHS, DockerConfig, memory_bytes, shared_pool
from .execs import (
    LONGEST_COMMAND,
    Room,
    command_bytes,
    copy_tree,
    exec_capture,
    exec_input,
    exec_streams,
    human,
    is_root,
    reason,
    root_runner,
    run_setup,
    shell_argv,
    trust_repository,
    write_file,
)

NO_SUCH_FILE = "No such file or directory"
TOO_LARGE = 3
READ = (
    's=$(stat -L -c %s -- "$1") || exit 1;'
    ' [ "$s" -gt "$2" ] && exit 3;'
    ' exec head -c "$(($2 + 1))" -- "$1"'
)
"""Print at most `$2 + 1` bytes of file `$1` (more than `$2` means it is over the limit);
exit 3 at once when the file (through links) is over `$2` bytes. Sizes are not trusted
beyond that (`/dev/zero` and `/proc` files say 0): `head` bounds what is sent, and the
caller tells an oversized file by the bytes it got."""
LINES = (
    'stat -L -- "$1" >/dev/null || exit 1;'
    ' tail -n "+$2" -- "$1" | head -n "$3" | head -c "$(($4 + 1))"'
)
"""Print at most `$3` lines of file `$1` from line `$2` on, and at most `$4 + 1` bytes of
them (more than `$4` means they are over the cap): `tail` skips lines by counting
newlines as it streams, so lines deep in a file cost no more than the first ones, and no
line is held whole (`/dev/zero` streams). `tail`'s failure is on stderr (the pipe's
status is `head`'s)."""
COUNT = (
    'n=$(wc -l < "$1") || exit 1;'
    ' [ -s "$1" ] && [ "$(tail -c 1 -- "$1" | wc -l)" -eq 0 ] && n=$((n + 1)); echo "$n"'
)
"""The number of lines of file `$1` as `lines_of` counts them (a last one without its
`\\n` counts)."""
LISTING = (
    "files() { git ls-files -z 2>/dev/null || find . -path ./.git -prune -o -type f -print0; };"
    ' files | tr -cd "\\000" | wc -c; files | LC_ALL=C sort -z'
)
"""The repository's files (git's when it is a git work tree, else every file outside
`.git`): their number on the first line, then the names, sorted, each ended by a NUL:
names as they are (spaces, newlines, UTF-8; git's `-z` quotes none)."""
LISTED = 200
"""Names of files the initial state shows, at most."""
TOOL_COMMANDS = {
    "find": "the initial listing",
    "tr": "the initial listing",
    "sort": "the initial listing",
    "wc": "the initial listing, read",
    "stat": "read, edit",
    "head": "read, edit",
    "tail": "read",
    "cat": "edit",
}
"""The programs the snippets above and `write_file` (`cat > "$1"`) run, each with the
tools that do: `missing_commands` may not remove them (`Where.needs`), or the agent would
meet our tools failing. git is not one: the listing falls back to `find` without it."""


def shown(text: str) -> str:
    """Text held with `surrogateescape` as the agent sees it: bytes that are not UTF-8
    as U+FFFD, as `read` and `bash` show them."""
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def lines_of(text: str) -> list[str]:
    """The lines of `text`, each with its `\\n`, split where `cat -n`, `sed` and `diff`
    split them: at `\\n` alone (`str.splitlines` also splits at `\\r`, `\\f`, U+2028 ...)."""
    return io.StringIO(text, newline="\n").readlines()


def unified_diff(before: str, after: str, path: str) -> str:
    """`diff -u`'s text for the change: a last line without a newline is followed by
    `\\ No newline at end of file` (difflib would glue the next line to it)."""
    out = difflib.unified_diff(lines_of(before), lines_of(after), f"a/{path}", f"b/{path}")
    return "".join(x if x.endswith("\n") else f"{x}\n\\ No newline at end of file\n" for x in out)


def capped(text: str, cap: int) -> tuple[str, bool]:
    """(`text` cut at `cap` bytes of UTF-8, whether it was cut): the output cap as `bash`
    output meets it, flagged `truncated`; a character the cut splits is left out."""
    raw = text.encode()
    if len(raw) <= cap:
        return text, False
    return raw[:cap].decode("utf-8", errors="ignore"), True


def occurrences(text: str, old: str) -> int:
    """How many times `old` occurs in `text`, overlapping ones counted: `1.1` occurs twice
    in `1.1.1`, where `str.count` (which skips past each match) finds one, and an edit
    of "the one occurrence" changed the first of two."""
    if len(old) == 1:  # no occurrence can overlap another
        return text.count(old)
    count, at = 0, text.find(old)
    while at >= 0:
        count, at = count + 1, text.find(old, at + 1)
    return count


def timed_out_note(out: str, timeout: float) -> str:
    """What a step cut off by its timeout printed, then `[timed out after Ns]` on a line of
    its own (a newline added only where the output did not end one)."""
    sep = "\n" if out and not out.endswith("\n") else ""
    return f"{out}{sep}[timed out after {timeout:g}s]"


def not_text(name: str, value: str) -> str | None:
    """The tool's error when an argument cannot be written as UTF-8 (a lone surrogate,
    which JSON's `\\ud800` can carry), else None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"error: `{name}` is not text (a lone surrogate: {exc.object[exc.start]!r})"
    return None


@dataclass
class _Read:
    """What reading a file in the container gave."""

    data: bytes | None = None
    """The content (at most the limit's bytes of it); None if not read."""
    why: str = ""
    """The system's reason when the read failed."""
    too_large: bool = False
    timed_out: bool = False


_STR = {"type": "string"}
ACTION_SPACE = [
    ToolSpec(
        "read",
        "Show a file with line numbers (cat -n style), optionally lines start..end",
        {
            "type": "object",
            "properties": {
                "path": {**_STR, "description": "file path, relative to the repository"},
                "start": {"type": "integer", "minimum": 1, "description": "first line (default 1)"},
                "end": {"type": "integer", "minimum": 1, "description": "last line (default: end)"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "edit",
        "Replace the single occurrence of `old` with `new` in a file, or write `content` to "
        "it; the answer is a unified diff",
        {
            "type": "object",
            "properties": {
                "path": {**_STR, "description": "file path, relative to the repository"},
                "old": {**_STR, "description": "text that occurs exactly once in the file"},
                "new": {**_STR, "description": "replacement for `old`"},
                "content": {**_STR, "description": "the whole new file (instead of old/new)"},
            },
            "required": ["path"],
            "oneOf": [{"required": ["old", "new"]}, {"required": ["content"]}],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "bash",
        "Run one shell command in the repository and return its output and exit code",
        {
            "type": "object",
            "properties": {"command": {**_STR, "description": "a shell command line"}},
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
]
TOOLS = {t.name: t for t in ACTION_SPACE}
IN_ARGV = {"read": ("path",), "edit": ("path",), "bash": ("command",)}
"""Each tool's arguments that reach a command line (a file's text goes by stdin)."""


def _nul_problem(tool: str, args: dict) -> str | None:
    """A NUL byte in what reaches a command line: no argument or file name can hold one
    (`execve` refuses it), and the engine's `exec /usr/bin/sh: invalid argument` was
    recorded as the command's answer."""
    for key in IN_ARGV[tool]:
        at = args.get(key, "").find("\x00")
        if at >= 0:
            return (
                f"{key} holds a NUL byte (\\x00) at position {at}: no command line or file name can"
            )
    return None


TOOL_NAMES = tuple(TOOLS)


def socket_below(root: str) -> str | None:
    """The first unix socket in directory `root` or any directory below it, or why the
    tree cannot be searched, or None. Symbolic links are not followed: the sandbox sees a
    link itself, which resolves inside the container. A socket anywhere in a bound
    repository lets the sandbox `connect()` to the host service behind it (a read-only
    mount does not stop that); until 12-06 only the top level was looked at. `os.scandir`
    types entries without a `stat` each (only what is no file, directory or link is
    stat'ed): 0.4 s for 55,000 files in 6,700 directories, 1.2 s for 128,000 in 16,000
    (cached by the kernel), at load and at each episode that binds the repository."""
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif not (e.is_file(follow_symlinks=False) or e.is_symlink()) and stat.S_ISSOCK(
                        e.stat(follow_symlinks=False).st_mode
                    ):
                        return f"{e.path} is a socket: a repository holding one is refused"
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            return f"{exc.filename or here} cannot be searched for sockets ({why}): refused"
    return None


def _safe_repo(value: str) -> str:
    """An existing host directory that exposes nothing of the host's system or sockets."""
    if not value:
        raise ValueError("must name the host directory of the repository")
    real = Path(value).expanduser().resolve()
    for bad in FORBIDDEN_HOST_PATHS:
        if real == Path(bad) or (bad != "/" and real.is_relative_to(bad)):
            raise ValueError(f"{value!r} resolves to {real}, under {bad}: refused for sandboxes")
    if not real.is_dir():  # a relative path starts where `worldtrace` runs: said in full
        where = f" ({real})" if str(real) != value else ""
        raise ValueError(f"{value!r}{where} is not a directory on this host")
    problem = socket_below(str(real))
    if problem:
        raise ValueError(problem)
    problem = git_link_problem(str(real))
    if problem:
        raise ValueError(problem)
    return str(real)


def git_link_problem(repo: str) -> str | None:
    """Why the host directory `repo` cannot be the sandbox's repository as it is, or None:
    its `.git` is a file (a worktree's or a submodule's, `gitdir: PATH`) naming a
    repository outside the directory. Neither a copy nor a bind mount takes that along,
    and git in the container answered every command with `fatal: not a git repository:
    /home/.../.git/worktrees/wt`, a host path in the recorded text. A `gitdir` inside the
    directory, written relative to it, holds in the container too."""
    link = Path(repo) / ".git"
    if not link.is_file():
        return None
    try:
        target = link.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        return f"{link} cannot be read ({exc.strerror})"
    gitdir = target.removeprefix("gitdir:").strip() if target.startswith("gitdir:") else ""
    if gitdir and not posixpath.isabs(gitdir):
        inside = Path(posixpath.normpath(posixpath.join(repo, gitdir)))
        if inside.is_relative_to(repo) and inside != Path(repo):
            return None
    return (
        f"{link} is a file, not a repository: {repo} is a git worktree or submodule whose "
        "repository lies outside it, which the sandbox cannot see; give a clone instead "
        f"(git clone {repo} DIR; commit first what the clone should hold)"
    )


@configclass
class SWEConfig:
    """A repository sandbox."""

    docker: DockerConfig = field(default_factory=DockerConfig)
    repo: Annotated[str, AfterValidator(_safe_repo)] = ""
    """Host directory of the repository (system paths and sockets are refused)."""
    repo_path: str = "/repo"
    """Where it appears in the container."""
    mount: bool = False
    """Bind-mount the repository read-only instead of copying it in."""
    edit_limit: Annotated[int, Field(ge=1024, le=256 << 20)] = 16 << 20
    """Largest file `edit` changes (bytes); a larger one gets a clear error."""


class SWESandbox(Unpicklable):
    kind = "swe"
    domain = "swe"
    config_class = SWEConfig
    action_kinds = ("tool_call",)

    @classmethod
    def static_action_space(cls, config: SWEConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    @classmethod
    def host_paths(cls, config: SWEConfig) -> list[str]:
        """Host paths the sandbox sees (checked against the store at submit)."""
        return [config.repo]

    accepts_conditions = True

    @classmethod
    def where(cls, config: SWEConfig) -> Where:
        """What conditions change: the repository (bound at every start with `mount: true`,
        so no tmpfs may go there; checked when the job loads)."""
        at = config.repo_path
        mounted = {at: "the repository read-only (`mount: true`; `mount: false` copies it in)"}
        mounted = mounted if config.mount else {}
        return Where(at, binds={at: config.repo}, mounted=mounted, needs=TOOL_COMMANDS)

    def __init__(self, config: SWEConfig):
        if not config.repo:
            raise SandboxError("SWEConfig.repo must name a host directory")
        self.config = config
        self._writable = () if config.mount else (config.repo_path,)
        """Where a read-only root needs a tmpfs: the repository is copied there."""
        # a bind mount is per container: mounted repositories never use warm containers
        self.pool = shared_pool(
            config.docker, warm=0 if config.mount else None, writable=self._writable
        )
        self.container = None
        self.session = Session()
        self._git_env: dict[str, str] = {}
        """Where the container's system gitconfig cannot say a bound repository is safe
        (a read-only root): the variables that say it to git (`trust_repository`)."""
        self._initial = ""
        self._conditions: list[dict[str, Any]] = []

    def reset(
        self, task: TaskSpec, *, conditions: Sequence[Condition] = (), episode_id: str | None = None
    ) -> Observation:
        """A fresh container with the repository, under the episode's conditions."""
        self._release(wait=False)  # the last episode's container goes in the background
        d, repo, at = self.config.docker, self.config.repo, self.config.repo_path
        plan = Plan(within(conditions, d), self.where(self.config))
        base = d.run_kwargs(self._writable)
        if self.config.mount:
            base.update(working_dir=at, volumes={repo: {"bind": at, "mode": "ro"}})
        kw = plan.run_kwargs(base)
        if kw is None and self.config.mount:
            kw = base
        if kw and repo in (kw.get("volumes") or {}):  # bound (a read_only condition):
            (kw.get("tmpfs") or {}).pop(at, None)  # not copied, and one mount per path
        bound = repo in ((kw or {}).get("volumes") or {})
        # a job queued before the load check, or a repository changed since
        problem = git_link_problem(repo) or (socket_below(repo) if bound else None)
        if problem:  # a copy takes no socket along (tarfile skips them)
            raise SandboxConfigError(f"sandbox.repo: {problem}")
        self.container = plan.acquire(self.pool, kw, episode_id)
        user = self.pool.user  # the container runs as root: the agent's execs name it
        if not bound:  # copied in, owned by the agent's user
            copy_tree(self.container, repo, at, d.step_timeout, user, self._room(kw or base, plan))
        # git trusts only its user's repositories: a bound one is the host's owner's, and
        # a copy for a non-root user sits in a root-owned `at` (`copy_tree`)
        self._git_env = {}
        if bound or not is_root(user):
            self._git_env = trust_repository(self.container, at, d.step_timeout)
        run_setup(self.container, task.setup, d.step_timeout, d.output_cap, at, self._git_env, user)
        self.session = plan.after(root_runner(self.container, d.step_timeout, at))
        self.session.user = self.session.user or user  # a condition's, else the agent's
        self._initial = self._listing()
        plan.confine(self.container)  # our execs ran: the steps are the agent's
        if plan.conditions:
            self._initial += "\n" + plan.text()
        self._conditions = plan.records()
        return Observation(self._initial, state_json=json.dumps({"cwd": at}))

    def _room(self, kw: dict[str, Any], plan: Plan) -> Room | None:
        """The tmpfs the repository is copied into in a container started with `kw`, or
        None (the image's own disk, or a tmpfs of no size): a read-only root's
        (`docker.tmpfs_size`), or a disk condition's at the repository (its `size`)."""
        at = self.config.repo_path
        options = ((kw.get("tmpfs") or {}).get(at) or "").split(",")
        size = next((o.removeprefix("size=") for o in options if o.startswith("size=")), "")
        try:
            room = memory_bytes(size)
        except ValueError:
            return None
        memory = memory_bytes(kw["mem_limit"]) if kw.get("mem_limit") else None
        setting = f"docker.tmpfs_size ({self.config.docker.tmpfs_size})"
        for c in reversed(plan.conditions):  # the last one's tmpfs is the one started
            if getattr(c, "group", "") == "disk" and posixpath.normpath(c.path or at) == at:
                setting = f"the {c.kind} condition's size ({c.size})"
                break
        return Room(room, setting, memory)

    def _listing(self) -> str:
        """`Repository at /repo (302 files, first 200 shown):` and the names (`LISTING`)."""
        at = self.config.repo_path
        _, out, _, _, _ = exec_streams(
            self.container,
            ["sh", "-c", LISTING],
            10,
            LISTED * 4096 + 64,
            at,
            self._git_env or None,
            self.pool.user,
        )
        count, _, names = out.partition(b"\n")
        listed = [
            f.decode("utf-8", errors="replace").removeprefix("./")
            for f in names.split(b"\0")[:-1][:LISTED]  # the last is cut, or empty
        ]
        total = int(count) if count.strip().isdigit() else len(listed)
        part = f", first {len(listed)} shown" if len(listed) < total else ""
        files = "file" if total == 1 else "files"
        return f"Repository at {at} ({total} {files}{part}):\n" + "\n".join(listed)

    def close(self) -> None:
        """Free the container and wait until it is gone."""
        self._release(wait=True)

    def _release(self, wait: bool) -> None:
        if self.container is not None:
            self.pool.release(self.container, wait=wait)
            self.container = None

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.config.repo_path, path))

    def _read(self, path: str, limit: int) -> _Read:
        """Read a file of at most `limit` bytes (`READ`). A process in the container reads,
        so every answer is the file system's own; the reason of a failure comes from the
        reader's stderr, never the content."""
        d = self.config.docker
        code, out, err, _, timed_out = exec_streams(
            self.container,
            ["sh", "-c", READ, "sh", self._path(path), str(limit)],
            d.step_timeout,
            limit + 1,
            user=self.session.user,
        )
        if timed_out:
            return _Read(timed_out=True)
        if code == TOO_LARGE or len(out) > limit:
            return _Read(too_large=True)
        if code != 0:
            return _Read(why=reason(err.decode("utf-8", errors="replace"), code))
        return _Read(out)

    def _lines(self, path: str, start: int, end: int | None) -> _Read:
        """Lines `start` to `end` (the last when None) of a file (`LINES`), at most the
        output cap's bytes of them (`too_large` when there were more)."""
        d, cap = self.config.docker, self.config.docker.output_cap
        count = cap + 1 if end is None else min(end - start + 1, cap + 1)  # no more fit
        code, out, err, _, timed_out = exec_streams(
            self.container,
            ["sh", "-c", LINES, "sh", self._path(path), str(start), str(count), str(cap)],
            d.step_timeout,
            cap + 1,
            user=self.session.user,
        )
        if timed_out:
            return _Read(timed_out=True)
        if not out and (code or err.strip()):  # `tail` failed: its stderr says why
            return _Read(why=reason(err.decode("utf-8", errors="replace"), code))
        return _Read(out[:cap], too_large=len(out) > cap)

    def _line_count(self, path: str) -> _Read:
        """The number of lines of a file (`COUNT`), as the text of `data`."""
        d = self.config.docker
        code, out, err, _, timed_out = exec_streams(
            self.container,
            ["sh", "-c", COUNT, "sh", self._path(path)],
            d.step_timeout,
            64,
            user=self.session.user,
        )
        if timed_out:
            return _Read(timed_out=True)
        if code != 0 or not out.strip().isdigit():
            return _Read(why=reason(err.decode("utf-8", errors="replace"), code))
        return _Read(out.strip())

    def _timed_out(self, text: str) -> Observation:
        """A step cut off by the step timeout, flagged as the bash tool flags it."""
        return Observation(
            timed_out_note(text, self.config.docker.step_timeout),
            exit_code=137,
            is_error=True,
            state_json=json.dumps({"timed_out": True}),
        )

    def step(self, action: Action) -> Observation:
        if self.container is None:
            raise SandboxError("step before reset")
        try:
            args = json.loads(action.arguments_json or "{}")
        except json.JSONDecodeError as exc:
            return Observation(f"error: arguments are not JSON: {exc.msg}", is_error=True)
        name = action.name
        if name not in TOOLS:
            return Observation(
                f"error: unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})", is_error=True
            )
        args = integral_ints(TOOLS[name].input_schema, args)  # `start: 10.0` is 10
        problem = TOOLS[name].check(args) or _nul_problem(name, args)
        if problem:  # the tool's own usage error, as a CLI would print it
            return Observation(f"error: {problem}", is_error=True)
        return getattr(self, f"_tool_{name}")(**args)

    def _tool_read(self, path: str, start: int = 1, end: int | None = None) -> Observation:
        if end is not None and start > end:  # an empty answer would say the lines are blank
            return Observation(f"error: start {start} is after end {end}", is_error=True,
                               exit_code=1)  # fmt: skip
        got = self._lines(path, start, end)
        if got.timed_out:
            return self._timed_out(f"error: cannot read {path}")
        if got.data is None:
            return Observation(f"error: cannot read {path}: {got.why}", is_error=True, exit_code=1)
        lines = [x.removesuffix("\n") for x in lines_of(got.data.decode("utf-8", "replace"))]
        if not lines and start > 1:  # past the last line, or an empty file (no error)
            count = self._line_count(path)
            if count.timed_out:
                return self._timed_out(f"error: cannot read {path}")
            if count.data is None:
                return Observation(
                    f"error: cannot read {path}: {count.why}", is_error=True, exit_code=1
                )
            if int(count.data):
                return Observation(
                    f"error: start {start} is past the last line of {path} ({int(count.data)})",
                    is_error=True, exit_code=1,
                )  # fmt: skip
        body = "\n".join(f"{start + i:6}\t{line}" for i, line in enumerate(lines))
        # line numbers count against the cap, as bash's output does
        body, truncated = capped(body, self.config.docker.output_cap)
        return Observation(body, truncated=truncated or got.too_large)

    def _tool_edit(
        self, path: str, old: str | None = None, new: str = "", content: str | None = None
    ) -> Observation:
        for name, value in (("old", old), ("new", new), ("content", content)):
            problem = not_text(name, value) if value is not None else None
            if problem:
                return Observation(problem, is_error=True)
        limit = self.config.edit_limit
        got = self._read(path, limit)
        if got.timed_out:
            return self._timed_out(f"error: cannot read {path}")
        if got.too_large:
            return Observation(
                f"error: {path} is too large to edit (over {human(limit)})", is_error=True
            )
        # bytes that are not UTF-8 are kept as they are (surrogateescape): only what the
        # edit replaces changes; the diff shows them as `read` does (U+FFFD)
        why = got.why
        before = None if got.data is None else got.data.decode("utf-8", "surrogateescape")
        if before is None and (content is None or why != NO_SUCH_FILE):
            gone = why == NO_SUCH_FILE
            msg = f"{path} does not exist" if gone else f"cannot read {path}: {why}"
            return Observation(f"error: {msg}", is_error=True)
        if content is not None:
            after = content
        else:
            count = occurrences(before, old) if old else 0
            if count != 1:
                found = f"found {count}"
                if not count and old and "\ufffd" in old and shown(before) != before:
                    found += (
                        "; U+FFFD stands for bytes that are not UTF-8, which `old` cannot match"
                    )
                return Observation(
                    f"error: `old` must occur exactly once in {path} ({found})", is_error=True
                )
            after = before.replace(old, new, 1)
        d = self.config.docker
        failed, timed_out = write_file(
            self.container,
            self._path(path),
            after.encode("utf-8", errors="surrogateescape"),
            d.step_timeout,
            self.session.user,
        )
        if timed_out:  # no undo: against a container this slow it would wait as long
            # again, twice (read back, write back), racing a write that may still run
            return self._timed_out(f"error: cannot write {path}; it may be left cut short")
        if failed:
            msg = f"error: cannot write {path}: {failed}{self._undo(path, before)}"
            return Observation(msg, is_error=True)
        diff, truncated = capped(
            shown(unified_diff(before or "", after, path)), self.config.docker.output_cap
        )
        return Observation(diff or "(no change)", truncated=truncated)

    def _undo(self, path: str, before: str | None) -> str:
        """After a write that failed: the file as it was, and "" to say so; else what it
        now holds. The write (`cat > FILE`) empties the file before it writes, so one that
        fails on a full disk leaves it cut: its old text is written back (it fits, in the
        pages its truncation freed), or a file the edit made is removed. A file that
        reads as before (the write could not open it: a read-only file system, no
        permission) is left alone. Until 12-06 the error hid a file cut to 12288 bytes."""
        d = self.config.docker
        now = self._read(path, self.config.edit_limit)
        old = None if before is None else before.encode("utf-8", errors="surrogateescape")
        if now.data == old and (old is not None or now.why == NO_SUCH_FILE):
            return ""
        if old is None:
            cmd, data = ["sh", "-c", 'rm -f -- "$1"', "sh", self._path(path)], b""
        else:
            cmd, data = ["sh", "-c", 'cat > "$1"', "sh", self._path(path)], old
        code, out, timed_out = exec_input(
            self.container, cmd, data, d.step_timeout, user=self.session.user
        )
        if code == 0:
            return ""
        why = "timed out" if timed_out else reason(out, code)
        if old is None:
            return f"; {path} was made and could not be removed ({why})"
        now = self._read(path, self.config.edit_limit)
        held = f"{len(now.data)} bytes" if now.data is not None else "what cannot be read"
        return f"; {path} is left changed, holding {held}: writing its old text back failed ({why})"

    def _tool_bash(self, command: str) -> Observation:
        d = self.config.docker
        size = command_bytes(command)
        if size > LONGEST_COMMAND:  # the tool's limit, as a CLI says its own
            return Observation(
                f"error: the command is {human(size)}: at most {human(LONGEST_COMMAND)} "
                "(write a long file with `edit`'s `content`)",
                is_error=True,
            )
        code, out, truncated, timed_out = exec_capture(
            self.container,
            shell_argv(command),
            d.step_timeout,
            d.output_cap,
            self.config.repo_path,
            env={**self._git_env, **self.session.env} or None,
            user=self.session.user,
            fallback=True,  # the agent may delete the repository: its shell still runs
        )
        if timed_out:
            out = timed_out_note(out, d.step_timeout)
        return Observation(
            out,
            exit_code=code,
            is_error=code is not None and code != 0,
            truncated=truncated,
            state_json=json.dumps({"timed_out": timed_out}),
        )

    def describe(self) -> dict[str, Any]:
        d = self.config.docker
        return {
            "backend": "docker",
            "image": d.image,
            "config": {**d.summary(), "repo": self.config.repo_path, "mount": self.config.mount},
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
            "conditions": self._conditions,
        }
