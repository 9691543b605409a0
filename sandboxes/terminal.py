"""Terminal domain: a persistent interactive shell on a pty inside a container.

Actions are keystrokes with an optional duration, as in the report
(`{"keystrokes": "ls -la\\n", "duration": 0.1}`); a whole action of `C-c`, `C-d`, `C-z`,
`C-l`, `Enter`, `Escape`, `Tab`, `Up`, `Down` sends that key. The shell runs with a real
TERM (xterm, 80x24 by default) and its output goes through a terminal emulator
(`screen.py`): the observation is the screen a person saw, from the echo of the keys to
the next prompt, after every redraw (a progress bar reads as its last state) and without
losing what scrolled off. The raw byte stream of the step is kept, capped, in the
observation's `state_json` (`raw`). A step returns as soon as a prompt is back, or after
`duration` seconds with what the screen shows so far (the command may still run: the
next keystrokes reach it). Output over the cap is dropped after a C-c. Queries a program
prints (cursor position, device attributes) are answered on its input as xterm answers
them (`screen.py`), never recorded as the agent's keys.

A prompt is known by a mark, not by its look: bash runs `PROMPT_COMMAND` before every
prompt whatever PS1 became (a venv's `(v) ...`, `PS1='$ '`), and ours prints an OSC
sequence the emulator swallows (and `raw` leaves out); the prompt's own text then
follows. The OSC holds a token drawn for each shell, so no file or other program can
print it. Where the shell marks its prompts, only the mark ends a step: a command's output
that merely looks like our PS1 (a saved session `cat`, a `printf`, an old mark) does not,
nor is the next action typed into the command still running (`_look_ends`). Shells without it
(busybox, dash) fall back to our PS1's look, and so does a bash whose step ended without
its mark on a screen showing our PS1 (an agent that unset `PROMPT_COMMAND`) until a mark
is seen again. A shell that exits (`exit`, `exec cmd`, C-d) ends the episode after a last
observation of what it printed (`ended` says so); a container that stopped under it is
the infrastructure failing (SandboxError with the container's state). So is a step whose
prompt did not come back because the container does not run normally (frozen by `docker
pause` or a frozen cgroup, stopped, restarting): only such a step costs a look at the
container's state (`execs.not_running`); no prompt from a running container (a command
still at work, a REPL, an editor) is the environment's answer as before.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import secrets
import select
import shlex
import time
from collections.abc import Sequence
from dataclasses import field
from typing import Annotated, Any

import docker.errors
from pydantic import BeforeValidator, Field
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.parsing import configclass
from worldtrace.schemas.tempfiles import first_line

from .base import SandboxConfigError, SandboxError, TaskSpec, ToolSpec, Unpicklable
from .condition_kinds import within
from .conditions import Condition, Plan, Session, Where
from .docker import DockerConfig, shared_pool
from .execs import (
    check_running,
    exec_capture,
    own_socket,
    raise_if_restarting,
    root_runner,
    run_setup,
    state_problem,
)
from .screen import Terminal

KEYS = {
    "C-c": b"\x03", "C-d": b"\x04", "C-z": b"\x1a", "C-l": b"\x0c", "C-u": b"\x15", "C-a": b"\x01",
    "C-e": b"\x05", "Enter": b"\r", "Escape": b"\x1b", "Tab": b"\t", "Up": b"\x1b[A", "Down": b"\x1b[B",
}  # fmt: skip
ANSI_RE = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]"
)
PROMPT = "user@sandbox:\\w$ "
"""Our PS1 where the shell expands `\\w` (bash, busybox ash): the cwd, $HOME as `~`."""
POSIX_PROMPT = "user@sandbox:${PWD}$ "
"""Our PS1 for dash, which leaves `\\w` as it is but expands parameters in PS1 (since
0.5.11): the cwd in full, the home directory too (`/root`, not bash's `~`). No parameter
expansion writes a `~` only under $HOME; a command substitution would, from a subshell
forked at every prompt, and where no process can start (`pids_low`, a fork bomb) dash
prints `Cannot fork` and its whole PS1 unexpanded (our code) instead. This one never
forks, runs nothing `set -x` would trace, and keeps `$?`."""
POSIX_PROMPT_SHELLS = frozenset({"dash"})
"""Programs (a shell's real file, symbolic links followed: Debian's /bin/sh) that get
`POSIX_PROMPT`; others get `PROMPT`."""
PROMPT_BYTES = b"user@sandbox:"
PROMPT_RE = re.compile(rb"user@sandbox:[^\n]*\$ $")
PROMPT_LINE_RE = re.compile(r"(?:^user@sandbox:.*|user@sandbox:[^\s@$]*)\$ $")
"""Our PS1 at the end of the cursor's line: the whole line, or after what a command printed
without a final newline (`printf nonl`: `nonluser@sandbox:~$ `), then with a directory of
no blank, `@` or `$` (the shape `pipelines.mask.PROMPT_REVERSED` reads ours by)."""
SHOWN_TOKEN = "wt-prompt"
"""What records show for a shell's mark token where the agent prints it (`echo
"$PROMPT_COMMAND"`, `declare -p`, `/proc/$$/environ`): the token is the session's secret,
and records read the same whatever it was."""
SETTLE = 0.05
"""Seconds of quiet after the prompt's text (which follows its mark) that end a step."""
MARK_WAIT = 1.0
"""Seconds the prompt's text may take to follow its mark (a slow CPU, an empty PS1)."""
OURS_WAIT = 5.0
"""The same where the last prompt was our PS1 (`TerminalSandbox._ours`), which is never
empty: only a command that emptied it makes the step wait this long, once."""
TYPING_SHARE = 0.9
"""The part of a step's timeout its keys may take to be typed (`_type`): the rest is the
reading's at least, so that what the shell printed is observed and the step, typing and
reading together, ends within `step_timeout`."""
SUBMIT = re.compile(rb"[\r\n\x0f]")
"""Keys that make readline run the line (Enter, C-j, C-o): without them, keys sent at the
prompt run no command, so a prompt's look can only be readline redrawing it (`C-l`, the
list a `Tab` shows), which bash does without its mark."""
DEFAULT_SHELL = ("/bin/bash", "--norc", "--noprofile", "-i")
FALLBACK_SHELL = ["/bin/sh", "-i"]


def prompt_mark(token: str) -> bytes:
    """Printed by `PROMPT_COMMAND` just before each prompt (an OSC the screen ignores). Its
    token is drawn for each shell (`secrets`), so no file or other program holds the mark:
    only the shell's own variable does, which an agent must read on purpose to forge it."""
    return f"\x1b]6973;{token}\x07".encode()


def mark_command(token: str) -> str:
    """`PROMPT_COMMAND`: the mark; unexported at the first prompt, so no child sees it. Its
    stderr goes nowhere, so an agent's `set -x` does not trace it into the observation.
    Under `set -v` bash echoes this text before running it, and it then prints the mark
    twice, so the echo is known (`verbose_echo`) from the agent printing the variable."""
    mark = f"printf '\\033]6973;{token}\\007'"
    return f"{{ export -n PROMPT_COMMAND; case $- in *v*) {mark};; esac; {mark}; }} 2>/dev/null"


def verbose_echo(token: str) -> bytes:
    """What bash under `set -v` writes before each prompt: our command's text and a newline
    (`\\r\\n` on the pty), then the mark twice (`mark_command`). Until 2026-12-06 every
    step after an agent's `set -v` ended with that text above the prompt, which a shell
    without our command never shows; `_recv` leaves it out (one mark stays)."""
    return mark_command(token).encode() + b"\r\n" + prompt_mark(token) * 2


def _settle(data: bytes, mark: bytes, text_wait: float = MARK_WAIT) -> float:
    """When a step whose last chunk holds the mark ends, unless more comes: `SETTLE` after
    text that follows the mark, else `text_wait` seconds for that text."""
    rest = data[data.rfind(mark) + len(mark) :]
    return time.monotonic() + (SETTLE if rest else text_wait)


class _Kept:
    """A step's raw bytes as recorded, at most `cap` of them: the shell's mark left out and
    its token shown as `SHOWN_TOKEN`, also where a read ends inside one (what may begin
    one is held back until the next read or `done`)."""

    def __init__(self, token: str, cap: int):
        self.mark, self.token, self.cap = prompt_mark(token), token.encode(), cap
        self.raw, self.received, self.held = bytearray(), 0, b""

    def add(self, data: bytes) -> None:
        data = (self.held + data).replace(self.mark, b"")
        cut = len(data)
        for start in range(max(len(data) - len(self.mark) + 1, 0), len(data)):
            if self.mark.startswith(data[start:]) or self.token.startswith(data[start:]):
                cut = start
                break
        self.held = data[cut:]
        self._keep(data[:cut])

    def _keep(self, data: bytes) -> None:
        data = data.replace(self.token, SHOWN_TOKEN.encode())
        self.received += len(data)
        self.raw += data[: max(self.cap - len(self.raw), 0)]

    def done(self) -> tuple[bytes, int]:
        """The bytes kept and the number received (marks left out)."""
        self._keep(self.held)
        self.held = b""
        return bytes(self.raw), self.received


INTERRUPTED = b"^C"
"""How the terminal answers a C-c, before the prompt it brings back: the line discipline
echoes it (echoctl) while a command runs, and bash's readline and busybox's line editor
print it when the C-c reaches them at the prompt."""
TRUNCATED = b"\r\n[output truncated]\r\n"
CUT_MARK = "\n" + TRUNCATED.decode().strip()
"""Where the screen's text was cut by `output_cap` (the prompt follows the mark)."""
CUT_RUN = 512
"""Characters of the run of non-blank ones that a cap's cut ends, at most, dropped with
it (`drop_cut_run`)."""
ANSWER_WAIT = 1.0
"""Seconds a C-c sent to stop a flood may go unanswered before it is sent again (the
last of `C_C_SENDS` is waited for 10 s)."""
C_C_SENDS = 4
PRINTING = 0.25
"""A step whose wait ended with output arriving in its last `PRINTING` seconds, or waiting
to be read (and no prompt), was cut by our clock, not ended by the environment: state
`still_printing`
(`pipelines.mask.COLLECTOR_CUTS`). A REPL's prompt or a quiet `sleep` is not."""
TOOLS = ("bash", "sh", "python3", "git", "curl", "vim", "nano", "gcc", "make", "pip3", "node")
ACTION_SPACE = [
    ToolSpec(
        "keystrokes",
        "Keys sent to the terminal (\\n is Enter); a whole action of C-c, C-d, C-z, C-l, "
        "C-u, C-a, C-e, Enter, Escape, Tab, Up or Down sends that key",
        {
            "type": "object",
            "properties": {
                "keystrokes": {"type": "string", "description": "the keys"},
                "duration": {
                    "type": "number",
                    "minimum": 0,
                    "description": "seconds to wait for output (default 1.0)",
                },
            },
            "required": ["keystrokes"],
            "additionalProperties": False,
        },
    )
]


def _command_line(value: Any) -> Any:
    """`shell: /bin/zsh` as the docs write it (a string, split as a shell splits it), or a
    list; either must name a program."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:  # an unclosed quote
            raise ValueError(f"cannot split {value!r} into a command line: {exc}") from None
    if isinstance(value, (list, tuple)) and (not value or value[0] == ""):
        raise ValueError("names no program: give a path or a name on the image's PATH")
    return tuple(value) if isinstance(value, list) else value  # `parse` is strict after this


@configclass
class TerminalConfig:
    """A terminal sandbox."""

    docker: DockerConfig = field(default_factory=DockerConfig)
    shell: Annotated[tuple[str, ...], BeforeValidator(_command_line)] = DEFAULT_SHELL
    """Interactive shell: a program (a path, or a name on the image's PATH) and its
    arguments, as a list or a string split as a shell splits it (`/bin/zsh`, `zsh -i`);
    with this default, images without bash fall back to /bin/sh -i. A shell named
    otherwise must be in the image: the attempt fails (SandboxConfigError, not retried)
    if it is not, rather than record another shell."""
    default_duration: Annotated[float, Field(gt=0, le=3600)] = 1.0
    """Seconds a step waits for output when the action does not say."""
    term: str = "xterm"
    """TERM of the shell (the emulator that renders the screen understands xterm)."""
    cols: Annotated[int, Field(ge=20, le=1000)] = 80
    """Screen width in columns."""
    rows: Annotated[int, Field(ge=5, le=500)] = 24
    """Screen height in lines (what scrolls off is still observed)."""
    raw_cap: Annotated[int, Field(ge=0, le=16 << 20)] = 64 << 10
    """Bytes of each step's raw terminal stream kept in the observation's state_json
    (`raw`, control bytes escaped; `raw_truncated` when cut); 0 keeps none."""


def drop_cut_run(head: str) -> str:
    """`head`, which a cap cut, without the run of non-blank characters the cut ends (at
    most `CUT_RUN` of them) and the blank before it. That run may be the start of a
    secret, which no rule recognises once cut; `Redactor.cut_tail` checks only a text's
    very end, and this cut lies before our mark and the prompt. The run was cut anyway:
    dropping it loses no whole word."""
    start = max(len(head) - CUT_RUN, 0)
    blank = _LAST_BLANK.search(head, start)
    return head[: blank.start()] if blank else head[:start]


_LAST_BLANK = re.compile(r"\s\S*\Z")


def parse_action(action: Action) -> tuple[bytes, float | None]:
    """Keystroke bytes and duration from an action (text or {"keystrokes", "duration"} JSON)."""
    keys, duration = action.text, None
    if action.arguments_json:
        args = json.loads(action.arguments_json)
        keys = args.get("keystrokes", keys)
        duration = args.get("duration")
    if keys in KEYS:
        return KEYS[keys], duration
    return keys.encode(), duration


def prompt_for(shell: str, programs: dict[str, str | None]) -> str:
    """Our PS1 for `shell`, a path or a name on the image's PATH: `POSIX_PROMPT` for the
    shells that do not expand `\\w` (by the file it names, `programs`: /bin/sh may be
    dash or busybox), else `PROMPT`."""
    program = programs.get(shell) or shell
    return POSIX_PROMPT if posixpath.basename(program) in POSIX_PROMPT_SHELLS else PROMPT


class _Closed(Exception):
    """The terminal's stream ended while the container runs on: the shell exited."""


def ready(sock, timeout: float, write: bool = False) -> tuple[bool, bool]:
    """(readable, writable) of `sock` within `timeout` seconds. By poll, not select,
    which raises `filedescriptor out of range` for a descriptor past 1023: a process that
    has run many episodes holds that many (found 2026-12-06: a test worker's 1,024th
    socket failed every later terminal reset). A hangup or error reads as readable, as
    select has it: the read then finds the end."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | (select.POLLOUT if write else 0))
    events = poller.poll(max(timeout, 0.0) * 1000)
    mask = events[0][1] if events else 0
    return bool(mask & (select.POLLIN | select.POLLHUP | select.POLLERR)), bool(
        mask & select.POLLOUT
    )


class TerminalSandbox(Unpicklable):
    kind = "terminal"
    domain = "terminal"
    config_class = TerminalConfig
    action_kinds = ("keystrokes",)
    accepts_conditions = True

    @classmethod
    def static_action_space(cls, config: TerminalConfig) -> list[ToolSpec]:
        return list(ACTION_SPACE)

    @classmethod
    def where(cls, config: TerminalConfig) -> Where:
        """What conditions change: the shell's working directory."""
        return Where(config.docker.workdir)

    def __init__(self, config: TerminalConfig | None = None):
        self.config = config or TerminalConfig()
        self.pool = shared_pool(self.config.docker)
        self.container = None
        self.term: Terminal | None = None
        self._sock = None
        self._last_output = 0.0  # when the shell last sent bytes (`PRINTING`)
        self._initial = ""
        self._conditions: list[dict[str, Any]] = []
        self._exec_id: str | None = None
        self._marks: bool | None = None
        """The shell marks its prompts (bash's `PROMPT_COMMAND`): None until its first
        prompt says; False where only the look tells a prompt (`_look_ends`)."""
        self._idle = False
        """The last step ended on a prompt and no keys that run a line were sent since."""
        self._ours = False
        """The last prompt showed our PS1's look: the next one's text follows its mark."""
        self._token = secrets.token_hex(8)
        """In bash's prompt mark, drawn again for each shell (`prompt_mark`)."""
        self._mark = prompt_mark(self._token)
        self._echo = verbose_echo(self._token)
        self.ended: str | None = None
        """Set when the shell exited in a step: the episode is over, and this says why."""
        self._early: list[bytes] = []
        """What the shell printed while a step's keys were typed (`_type`), read first."""
        self._early_size = 0
        self._answers = bytearray()
        """The terminal's answers to queries not yet written to the pty (`_feed`)."""

    # -- lifecycle ---------------------------------------------------------------
    def reset(
        self, task: TaskSpec, *, conditions: Sequence[Condition] = (), episode_id: str | None = None
    ) -> Observation:
        """A fresh container and shell for the task, under the episode's conditions."""
        self._release(wait=False)  # the last episode's container goes in the background
        self.ended = None
        d = self.config.docker
        plan = Plan(within(conditions, d), self.where(self.config))
        self.container = plan.acquire(self.pool, plan.run_kwargs(d.run_kwargs()), episode_id)
        user = self.pool.user  # the container runs as root: the agent's execs name it
        run_setup(self.container, task.setup, d.step_timeout, d.output_cap, d.workdir, None, user)
        facts = self._facts(after_setup=bool(task.setup))
        session = plan.after(root_runner(self.container, d.step_timeout, d.workdir))
        session.user = session.user or user  # a condition's (`permission`), else the agent's
        shell = self._shell(facts["shell"], session)
        self._open_shell(shell, session, prompt_for(shell[0], facts["programs"]))
        self._marks = None
        try:  # the first prompt by its mark or its look: no command ran before it
            bound = time.monotonic() + d.step_timeout  # the first prompt is ours: its text
            if not self._read_until_prompt(d.step_timeout, True, bound, d.step_timeout)[0]:
                check_running(self.container, f"no first prompt within {d.step_timeout:g}s")
        except _Closed as exc:
            raise SandboxError(f"the shell exited before its first prompt: {exc}") from None
        self._marks, self._idle = bool(self._marks), True
        self._ours = self._ours_shown()
        plan.confine(self.container)  # the shell started: what follows is the agent's
        screen = self._screen()  # what the shell printed first (ash: a banner)
        tools = [t for t in facts["tools"] if t not in session.missing]
        c = self.config
        self._initial = "\n".join(
            line
            for line in (
                f"OS: {facts['os']}",
                f"Installed tools: {' '.join(tools)}",
                f"Working directory: {d.workdir}",
                f"Terminal: {c.term}, {c.cols}x{c.rows}",
                f"Prompt: {self._screen(self.term.cursor_text())}",
                plan.text(),
            )
            if line
        )
        self._conditions = plan.records()
        return Observation(screen, state_json=json.dumps({"cwd": d.workdir}))

    def _facts(self, after_setup: bool) -> dict[str, Any]:
        """OS, installed tools and usable shell of this episode's container. Without a
        task set-up every container of the pool is its image's, so they are probed once
        per pool (before conditions remove anything: `session.missing` says what they
        take); after a set-up, which may remove bash or a tool or point /bin/sh elsewhere,
        they are probed in this container (one exec more). Until 12-06 the first episode's
        facts, after its own set-up, served the whole pool: every episode said `curl` was
        installed after one set-up removed it, and one without bash ran under dash (or
        failed every attempt, in the other order)."""
        shell = tuple(self.config.shell)
        key = f"terminal {shell[0]}"  # a pool may serve configs naming other shells
        facts = None if after_setup else self.pool.facts.get(key)
        if facts is None:
            facts = self._probe(shell)
            if not after_setup:
                self.pool.facts[key] = facts
        if facts["shell"] is None:  # only the default falls back: a named shell is asked for
            if shell != DEFAULT_SHELL:  # no retry finds it there: the job's to fix
                image = self.config.docker.image
                where = f"the image {image}"
                if after_setup:
                    where = f"the container after the task's set-up (image {image})"
                raise SandboxConfigError(
                    f"shell {shell[0]} is not in {where}"
                    " (TerminalConfig.shell: a path, or a name on its PATH)"
                )
            return {**facts, "shell": FALLBACK_SHELL}
        return facts

    def _probe(self, shell: tuple[str, ...]) -> dict[str, Any]:
        """The container's facts (`_facts`): one exec with an end mark, since the engine
        can lose a short exec's output."""
        tools = "; ".join(f"command -v {t} >/dev/null 2>&1 && echo tool={t}" for t in TOOLS)
        exe = shlex.quote(shell[0])
        probe = (
            f"{tools}; echo os=$(if [ -r /etc/os-release ]; then . /etc/os-release;"
            " echo $PRETTY_NAME; else uname -sr; fi);"
            f" case {exe} in */*) test -f {exe} && test -x {exe};;"
            f" *) command -v {exe} >/dev/null 2>&1;; esac && echo shell=ok;"
            f' echo real_shell=$(readlink -f "$(command -v {exe})" 2>/dev/null);'
            " echo real_sh=$(readlink -f /bin/sh 2>/dev/null); echo end"
        )
        for _ in range(3):
            out = exec_capture(  # checked: a probe without its `end` is run again
                self.container, ["sh", "-c", probe], 10, 1 << 14, user=self.pool.user, checked=True
            )[1]
            if out.endswith("end\n"):
                break
        else:
            raise SandboxError(f"cannot probe the image {self.config.docker.image}: {out!r}")
        found = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return {
            "tools": [x[5:] for x in out.splitlines() if x.startswith("tool=")],
            "os": found.get("os", "").strip() or "unknown",
            "shell": list(shell) if "shell" in found else None,
            "programs": {shell[0]: found.get("real_shell"), "/bin/sh": found.get("real_sh")},
        }

    def _shell(self, shell: list[str], session: Session) -> list[str]:
        """The shell to open: the default bash that `missing_commands` removed falls back to
        /bin/sh, as an image without bash does; a shell the job named must stay."""
        if posixpath.basename(shell[0]) not in session.missing:
            return shell
        if tuple(self.config.shell) == DEFAULT_SHELL:
            return FALLBACK_SHELL
        raise SandboxConfigError(
            f"shell {shell[0]} is removed by the condition missing_commands: the terminal "
            "cannot start it (leave it out of the commands, or name another shell)"
        )

    def _open_shell(self, shell: list[str], session: Session, prompt: str) -> None:
        api = self.container.client.api
        d, c = self.config.docker, self.config
        self._token = secrets.token_hex(8)  # a new shell, a new mark: the last one's is known
        self._mark, self._echo = prompt_mark(self._token), verbose_echo(self._token)
        # PAGER=cat: a pager (`git log`, `man`) would hold every step at its `:` prompt
        env = {"PS1": prompt, "TERM": c.term, "HOME": d.workdir, "PAGER": "cat", **session.env}
        if shell[0].endswith("bash"):  # others (busybox ash) have no PROMPT_COMMAND
            env["PROMPT_COMMAND"] = mark_command(self._token)
        # The pty gets its size before the shell starts: resized under a shell already at
        # its prompt (exec_resize can only follow exec_start), busybox's line editor
        # redraws the prompt, and that late prompt would end the first step before its keys.
        sized = f'stty rows {c.rows} cols {c.cols} 2>/dev/null; exec "$@"'
        try:
            ex = api.exec_create(
                self.container.id,
                ["sh", "-c", sized, "sh", *shell],
                stdin=True,
                tty=True,
                environment=env,
                workdir=d.workdir,
                user=session.user or "",
            )
            self._exec_id = ex["Id"]
            self._sock, ahead = own_socket(api.exec_start(ex["Id"], socket=True, tty=True))
            api.exec_resize(ex["Id"], height=c.rows, width=c.cols)
        except docker.errors.APIError as exc:  # the engine's, never the environment's answer
            check_running(self.container, "the shell could not start")
            raise SandboxError(f"the shell could not start: {first_line(exc)}") from None
        self._sock.setblocking(False)
        # what the shell printed first may have come with the engine's answer (`own_socket`)
        self._early, self._early_size = ([ahead] if ahead else []), len(ahead)
        self._answers = bytearray()
        self.term = Terminal(c.cols, c.rows)

    def _screen(self, text: str | None = None) -> str:
        """The observation (or `text` from the screen) as recorded: the shell's mark token
        shown as `SHOWN_TOKEN` where the agent printed it."""
        text = self.term.observation() if text is None else text
        return text.replace(self._token, SHOWN_TOKEN)

    def _ours_shown(self) -> bool:
        """Our PS1's look ends the cursor's line (`PROMPT_LINE_RE`)."""
        return PROMPT_LINE_RE.search(self.term.cursor_text()) is not None

    def close(self) -> None:
        """Free the container and wait until it is gone."""
        self._release(wait=True)

    def _release(self, wait: bool) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
        if self.container is not None:
            self.pool.release(self.container, wait=wait)
            self.container = None

    # -- steps -------------------------------------------------------------------
    def _pending(self) -> bool:
        """Output is waiting to be read (a flood outruns the screen it is fed to)."""
        return ready(self._sock, 0)[0]

    def _recv(self, wait: float) -> bytes:
        """The shell's next bytes, `set -v`'s echo of our command left out: a read that ends
        inside one (bash writes it and the marks apart) waits up to `SETTLE` for the rest."""
        data, echo = self._recv_raw(wait), self._echo
        while data:
            data = data.replace(echo, self._mark)
            start = data.rfind(echo[:1], max(len(data) - len(echo) + 1, 0))
            while start >= 0 and not echo.startswith(data[start:]):
                start = data.rfind(echo[:1], max(len(data) - len(echo) + 1, 0), start)
            if start < 0:
                return data
            try:
                more = self._recv_raw(SETTLE)
            except _Closed:
                return data  # the rest comes never: the close is seen on the next read
            if not more:
                return data
            data += more
        return data

    def _feed(self, data: bytes) -> None:
        """Show the shell's bytes, and answer the queries among them on the pty's input as
        a terminal does (`Terminal.answers`): a program waiting for its cursor position
        (`resize`, busybox's line editor after each prompt, prompt_toolkit) or device
        attributes (fish) waited out the step for it. What the pty does not take now (its
        input full of keys nobody reads) goes before the next keys (`_type`)."""
        self.term.feed(data)
        self._answers += self.term.answers()
        if self._answers:
            with contextlib.suppress(OSError):  # full: sent later; closed: found by reading
                del self._answers[: self._sock.send(self._answers)]

    def _untyped(self, view: memoryview, keys: int) -> int:
        """How many of the last `keys` bytes of `view` (the agent's, after our answers)
        are left; answers left are kept to send first."""
        if len(view) > keys:
            self._answers[:0] = view[: len(view) - keys]
        return min(len(view), keys)

    def _type(self, keys: bytes, until: float) -> int:
        """Write the keys to the shell until `until`: how many bytes were left untyped.
        The socket is non-blocking, and a long action (a 400 KB heredoc) fills the pty's
        input while the shell reads it: `sendall` raised EAGAIN, which was taken for the
        shell's exit (`the shell exited (status None)`, the episode a success). So keys go
        as the socket takes them, and what the shell prints meanwhile (the echo of the
        keys: a shell whose output nobody reads blocks, and reads no more keys) is kept
        for the step's reading (`_early`, read first and as any output: past one byte more
        than the output cap dropped, the reading then cuts and flags the output). Keys a
        program does not read in time (`sleep 60` before a long paste) are the agent's
        doing: the step ends without its prompt and says so (`keys_untyped`). A stream
        that ends while keys are typed (the shell exited) leaves what it printed to the
        reading, which then finds the end. Answers to queries the pty did not take yet
        (`_feed`) go first: the terminal wrote them before the keys were typed."""
        view = memoryview(bytes(self._answers) + keys)
        self._answers.clear()
        keep = max(self.config.docker.output_cap, self.config.raw_cap) + 1
        while view:
            left = until - time.monotonic()
            if left <= 0:
                return self._untyped(view, len(keys))
            r, w = ready(self._sock, left, write=True)
            try:
                if w:
                    view = view[self._sock.send(view) :]
                if r and view:
                    data = self._sock.recv(1 << 16)
                    if not data:
                        return self._untyped(view, len(keys))  # the end: found by the reading
                    if self._early_size < keep:
                        self._early.append(data)
                    self._early_size += len(data)
            except BlockingIOError:
                continue
            except OSError:  # EPIPE, ECONNRESET: the shell is gone, said by the reading
                return self._untyped(view, len(keys))
        return 0

    def _send_key(self, key: bytes) -> None:
        """Send one key (our C-c); a pty whose input is full takes it at the next send."""
        with contextlib.suppress(BlockingIOError):
            self._sock.send(key)

    def _recv_raw(self, wait: float) -> bytes:
        if self._early:  # printed while the keys were typed
            data = b"".join(self._early)
            self._early, self._early_size = [], 0
            return data
        if not ready(self._sock, wait)[0]:
            return b""
        try:
            data = self._sock.recv(1 << 16)
        except BlockingIOError:
            return b""
        if not data:
            raise _Closed(self._why_closed())
        return data

    def _why_closed(self) -> str:
        """Why the terminal's stream ended: the shell's own exit (the container runs on:
        `the shell exited (status N)`), or raises SandboxError when the container itself
        stopped or went away (killed from outside, the engine, our own shutdown) or was
        restarted (`execs.raise_if_restarting`: it runs on without the episode's shell).
        A shell killed by a signal may be the container's end that the engine has yet to record:
        its state is watched a moment longer then."""
        api = self.container.client.api
        code = None
        for _ in range(100):  # the engine records the exit a moment after the stream ends
            info = api.exec_inspect(self._exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                break
            time.sleep(0.01)  # polling the engine's state: there is no event to wait on
        for _ in range(20 if code is None or code > 128 else 1):
            try:
                state = api.inspect_container(self.container.id)["State"]
            except Exception as exc:  # docker.errors.NotFound and engine errors alike
                raise SandboxError(f"the terminal closed: the container is gone ({exc})") from exc
            raise_if_restarting(self.container, state)
            trouble = state_problem(state)
            if trouble:
                raise SandboxError(f"the terminal closed: {trouble}")
            time.sleep(0.05)  # as above: the container's end has no event we can wait on
        return f"the shell exited (status {code})"

    def _look_ends(self, keys: bytes) -> bool:
        """Whether our PS1's look may end the step these keys begin, not only the mark.
        Where the shell marks its prompts, the look alone ends a step only when no command
        can be running: the shell sat at its prompt and the keys run no line (readline's
        `C-l` or a `Tab` list redraw the prompt without the mark). Otherwise a command's
        output that looks like our PS1 would end the step while the command runs on, and
        the next action's keys would be typed into it."""
        return not self._marks or (self._idle and not SUBMIT.search(keys))

    def _read_until_prompt(
        self, duration: float, look: bool, bound: float, text_wait: float = MARK_WAIT
    ) -> tuple[bool, bool, bytes, int]:
        """Feed the screen for at most `duration` seconds or until a prompt is back:
        (prompt returned, truncated, the raw bytes kept, raw bytes received). The prompt
        is known by its mark, and by our PS1's look only if `look` (`_look_ends`). A bash
        whose step ends without its mark but on our PS1's look may have lost its
        `PROMPT_COMMAND` (an agent's `unset`): its later steps go by the look until a
        mark comes again.

        Output over the cap is dropped and a C-c sent; the step then ends at the prompt
        that follows the C-c's own answer (`^C`), not at the first prompt: a command that
        ended by itself before the C-c arrived printed a prompt already, and the C-c then
        answers on it with `^C` and a new prompt, which must not land in the next step
        (nor the C-c on its keys). Bash is racy around its prompt: hit by the C-c just
        before its readline takes over, it shows the prompt but keeps the interrupt and
        throws away the next keys it reads; hit while readline draws the prompt, it prints
        `^C` and the new prompt only once more keys come. So once the first C-c is
        answered a second one is sent at the prompt (where it clears such a kept
        interrupt, or just gets `^C` and a prompt), and a C-c unanswered for `ANSWER_WAIT`
        seconds is sent again (at most `C_C_SENDS` in all).

        The drain may outlast `duration`, never `bound` (the step timeout, counted from
        the step's start, its typing included): there the step ends as a
        wait does, without its prompt (a flood our C-c cannot stop, one that ignores
        SIGINT, held the step 13 s under a 5 s step timeout). After
        the C-c's prompt, output that keeps coming (a background job's flood, which no C-c
        reaches) ends the step `MARK_WAIT` seconds after that prompt's mark: readline has
        drawn the prompt by then, and waiting for quiet would wait for the flood to end.

        After a prompt's mark its text is waited for `text_wait` seconds, past `duration`
        (the command has ended), never past `bound`; what follows that text has the
        duration's end again (a background flood after the prompt). Where the prompt is
        ours that wait is longer than `MARK_WAIT`, which only an empty PS1 needs: a shell
        starved of CPU drew its prompt later, and the step ended without it, the next
        one's observation then beginning with it, or the reset's initial state (part of
        the trajectory's id) saying `Prompt: ` alone."""
        cap, raw_cap = self.config.docker.output_cap, self.config.raw_cap
        start = time.monotonic()
        deadline = given = min(start + duration, bound)
        drawn = 0.0  # draining: when the prompt after the C-c's answer is surely drawn
        mark, kept, size = self._mark, _Kept(self._token, raw_cap), 0
        truncated = prompted = mark_seen = False
        sent = answered = 0  # C-c sent after the cut, and their ^C seen
        tail = b""
        settle = None  # after the prompt's mark: when the prompt is surely drawn
        while True:
            if settle is not None and time.monotonic() >= settle:  # the prompt is drawn
                if truncated and answered < 2:  # a second C-c, at a prompt: clears an
                    settle, deadline = None, 0  # interrupt bash may still hold (see above)
                    continue
                if truncated:
                    at = tail.rfind(mark)
                    self._feed(TRUNCATED + (tail[at + len(mark) :] if at >= 0 else tail))
                return (True, truncated, *kept.done())
            now = time.monotonic()
            left = deadline - now
            if left <= 0 and truncated and sent < C_C_SENDS and now < bound:
                sent, tail = sent + 1, b""
                self._send_key(KEYS["C-c"])
                deadline = min(now + (ANSWER_WAIT if sent < C_C_SENDS else 10), bound)
                continue
            if left <= 0 or now >= bound:
                if truncated:
                    self._feed(TRUNCATED)
                elif self._marks and prompted and not mark_seen and self._ours_shown():
                    self._marks = False  # no mark, our PS1 at the cursor: the mark is gone
                return (False, truncated, *kept.done())
            data = self._recv(left if settle is None else min(left, settle - time.monotonic()))
            if not data:
                continue
            self._last_output = time.monotonic()
            kept.add(data)  # the mark is ours, not the terminal's
            seen, tail = tail + data, (tail + data)[-256:]
            if mark in seen[-len(data) - len(mark) :]:
                self._marks = mark_seen = True
            prompted = prompted or PROMPT_BYTES in seen[-len(data) - len(PROMPT_BYTES) :]
            if truncated:  # draining a flood after our C-c: see its answer, then the prompt
                while answered < sent and (at := seen.find(INTERRUPTED)) >= 0:
                    answered, seen = answered + 1, seen[at + len(INTERRUPTED) :]
                if answered < sent:  # a prompt before the ^C is not the C-c's answer:
                    tail = seen[-1:]  # the command ended by itself first (keep a "^")
                    continue
                tail = seen[-256:]
                if settle is not None:  # the prompt is still being drawn, or a background
                    settle = min(time.monotonic() + SETTLE, drawn)  # flood goes on
                    continue
                if mark in seen:  # wait for the prompt's text: readline has it then
                    settle, drawn = _settle(seen, mark), time.monotonic() + MARK_WAIT
                    deadline = max(deadline, min(drawn, bound))  # answered: no C-c more
                    continue
                if look and PROMPT_RE.search(ANSI_RE.sub(b"", tail)):
                    if answered < 2:  # a second C-c, at a prompt: clears an interrupt
                        deadline = 0  # bash may still hold (see the doc)
                        continue
                    self._feed(TRUNCATED + tail[tail.rfind(PROMPT_BYTES) :])
                    return (True, True, *kept.done())
                continue
            if size + len(data) > cap:
                self._feed(data[: cap - size])
                # the C-c is sent at the top of the loop; a prompt seen before is not its answer
                truncated, deadline, settle = True, 0, None
                continue
            size += len(data)
            self._feed(data)
            marked = settle is not None or mark in seen[-len(data) - len(mark) :]
            if marked and self._ours_shown():
                return (True, False, *kept.done())  # our own PS1, whole: nothing to wait
            if settle is not None:  # the prompt's text, after its mark: the wait for
                settle = time.monotonic() + SETTLE  # it is over (what follows, a flood,
                deadline = min(deadline, max(given, settle))  # has the step's duration)
                continue
            if mark in seen[-len(data) - len(mark) :]:  # the command ended: its prompt's
                settle = _settle(seen, mark, text_wait)  # text is waited for, past the
                deadline = max(deadline, min(settle, bound))  # duration if need be
                continue
            if look and prompted and self._ours_shown():
                return (True, False, *kept.done())

    def step(self, action: Action) -> Observation:
        if self._sock is None:
            raise SandboxError(f"step after {self.ended}" if self.ended else "step before reset")
        keys, duration = parse_action(action)
        duration = min(
            duration if duration is not None else self.config.default_duration,
            self.config.docker.step_timeout,
        )
        self.term.mark()
        look = self._look_ends(keys)
        started = self._last_output = time.monotonic()
        step_timeout = self.config.docker.step_timeout
        try:  # typing and reading share the step timeout; typing leaves the reading a part
            untyped = self._type(keys, started + step_timeout * TYPING_SHARE)
            prompt, truncated, raw, received = self._read_until_prompt(
                duration, look, started + step_timeout, OURS_WAIT if self._ours else MARK_WAIT
            )
        except (_Closed, OSError) as exc:  # the shell exited: its last words are the step's
            return self._shell_exited(exc, time.monotonic() - started)
        ended = time.monotonic()
        if prompt or SUBMIT.search(keys):  # keys that run no line leave the shell as it was
            self._idle = prompt
        if prompt:
            self._ours = self._ours_shown()
        if not prompt:  # no answer: the environment's, unless the container is not running
            check_running(self.container, f"no prompt within {duration:g}s")
        state: dict[str, Any] = {"prompt_returned": prompt, "waited_s": round(ended - started, 3)}
        if untyped:
            state["keys_untyped"] = untyped
        if (
            not prompt
            and not truncated
            and (ended - self._last_output < PRINTING or self._pending())
        ):
            state["still_printing"] = True
        if self.config.raw_cap:
            text = raw.decode("utf-8", errors="backslashreplace")
            if received > len(raw):
                text, state["raw_truncated"] = drop_cut_run(text), True
            state["raw"] = text
        text = self._screen()
        if truncated and (at := text.rfind(CUT_MARK)) >= 0:
            text = drop_cut_run(text[:at]) + text[at:]
        return Observation(text, truncated=truncated, state_json=json.dumps(state))

    def _shell_exited(self, exc: Exception, waited: float) -> Observation:
        """The step in which the shell ended: what the screen shows, and the episode ends.
        A closed socket on sending is asked the same question as one found on reading."""
        why = str(exc) if isinstance(exc, _Closed) else self._why_closed()
        self.ended = why
        self._sock.close()
        self._sock = None
        state = {"prompt_returned": False, "waited_s": round(waited, 3), "shell_exited": why}
        return Observation(self._screen(), state_json=json.dumps(state))

    def describe(self) -> dict[str, Any]:
        d = self.config.docker
        return {
            "backend": "docker",
            "image": d.image,
            "config": d.summary(),
            "action_space": [t.to_dict() for t in ACTION_SPACE],
            "initial_state": self._initial,
            "conditions": self._conditions,
        }
