"""Collection: `collect` runs a job now, `worker` runs the queue, `scheduler` enqueues the
runs of scheduled jobs (`jobs ...`, in jobs.py, queues and inspects jobs)."""

from __future__ import annotations

import contextlib
import json
import math
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from worldtrace.collectors.jobstore import JOBS_ENV
from worldtrace.errors import main_thread_woken
from worldtrace.options import ConfigCommand, option_error, options_from

from . import EXIT_PROBLEMS, Seconds, store, store_path

EXIT_INTERRUPTED = 130
"""Exit status after a stop request (SIGINT/SIGTERM), as shells report Ctrl-C."""
EXIT_EPISODES_FAILED = 3
"""`collect`: the job ran, and at least one of its episodes failed for good (every
attempt failed); 1 stays for a run that could not happen (job file, store, machine)."""
jobs_option = click.option(
    "--jobs",
    "jobs_url",
    envvar=JOBS_ENV,
    metavar="URL",
    help="Job store: a SQLite file or postgresql://user@host:port/db "
    f"(default: the store's jobs.db, or ${JOBS_ENV}).",
)


QUICK_KINDS = ("docker", "terminal", "swe")
"""What a quick `--sandbox` run can describe: terminal keystrokes (`--keys`) or SWE tool
calls on a repository (`--tool`, `--repo`), in a docker container. The other kinds need
what only a job file says (an MCP server's command, a start page, a device)."""


class QuickKind(click.Choice):
    """`--sandbox`: one of QUICK_KINDS; another registered kind is pointed to a job file."""

    def __init__(self) -> None:
        super().__init__(QUICK_KINDS)

    def convert(self, value, param, ctx):
        from worldtrace.sandboxes.base import BUILTIN_KINDS, kinds

        if value not in self.choices and value in kinds():
            where = f"examples/{value}-*.yaml, " if value in BUILTIN_KINDS else ""
            self.fail(
                f"{value} episodes need a job file: worldtrace collect JOB.yaml "
                f"(see {where}docs/collect.md); a quick --sandbox run is "
                f"{', '.join(QUICK_KINDS)} only",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


COLLECT_EPILOG = """\b
Example:
  worldtrace collect --create examples/terminal-basics.yaml
  worldtrace collect examples/terminal-basics.yaml --resume terminal-basics-1a2b3c4d
  worldtrace collect --resume quick-terminal-1a2b3c4d   (publish what a killed run left)
  worldtrace collect --sandbox docker --keys 'ls -la\\n' --keys 'cat /etc/os-release\\n'
  worldtrace collect --sandbox docker --repo ./proj --tool 'bash:{"command": "ls"}' \\
      --tool 'bash:{"command": "git log --oneline -3"}'
"""


@click.command(cls=ConfigCommand, epilog=COLLECT_EPILOG)
@click.argument("job_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--sandbox",
    type=QuickKind(),
    help="Quick single run: docker means terminal (--keys), or swe with --repo (--tool). "
    "mcp, web and android need a JOB_FILE (examples/*.yaml).",
)
@options_from("worldtrace.sandboxes.docker:DockerConfig", include=("image",))
@click.option(
    "--repo", type=click.Path(exists=True, file_okay=False), help="Repository for the swe sandbox."
)
@click.option(
    "--task",
    "instruction",
    default="Quick run",
    show_default=True,
    help="Task instruction recorded with the episode.",
)
@click.option(
    "--keys",
    multiple=True,
    help="Terminal keystrokes, in order: \\n is Enter, \\t Tab, \\\\ one backslash; "
    "other text, other backslashes included, is typed as given. A key's name alone (C-c, "
    "C-d, Escape, Tab, Up, ...: docs/collect.md) sends that key.",
)
@click.option(
    "--tool",
    "tools",
    multiple=True,
    metavar="NAME:JSON",
    help='SWE tool call, e.g. bash:\'{"command": "ls"}\'.',
)
@click.option(
    "--duration",
    default=1.0,
    show_default=True,
    type=Seconds(min=0, max=math.inf, max_open=True),
    help="Seconds to wait for terminal output per step.",
)
@click.option(
    "--resume",
    "resume_id",
    metavar="JOB_ID",
    help="Finish job JOB_ID of JOB_FILE (a run that was interrupted or killed): publish "
    "the journals it left as they stand, run the episodes it did not finish. Without "
    "JOB_FILE (a killed quick --sandbox run has none): publish the journals only.",
)
@click.pass_context
def collect(
    ctx: click.Context, job_file, sandbox, image, repo, instruction, keys, tools, duration,
    resume_id,
) -> None:  # fmt: skip
    """Run episodes into raw shards: from a job file (see docs/collect.md) or a quick
    --sandbox run. Containers have no network, memory/cpu/pids limits, an output cap and
    a step timeout; every attempt, failed or not, is published as it ends, and a failed
    one is printed with its reason. A progress bar shows on a terminal (plain lines
    otherwise); Ctrl-C stops after the current step (exit 130) and prints how to finish
    the job (--resume). After a kill (-9, OOM), --resume JOB_ID alone publishes the
    journals the run left, a quick run's too. Exit status 3 when an episode failed for
    good (every attempt failed)."""
    from worldtrace.collectors.jobs import DamagedAttempt, JobBusy, resume_problem, run_job
    from worldtrace.collectors.jobspec import JobSpec
    from worldtrace.progress import CollectProgress, print_run
    from worldtrace.sandboxes.base import SandboxError
    from worldtrace.schemas.parsing import ConfigError

    calls = _tool_calls(tools)  # first: a malformed --tool is the mistake to name
    if job_file and sandbox:
        raise click.UsageError("give a JOB_FILE or --sandbox (not both)")
    if resume_id and sandbox:
        raise click.UsageError(
            "--resume JOB_ID finishes a job of a JOB_FILE; without one it publishes what a "
            f"stopped run left, a quick run's too: worldtrace collect --resume {resume_id} "
            "(not with --sandbox: the options of a quick run are not kept)"
        )
    if resume_id and not job_file:
        if keys or calls or repo:
            raise click.UsageError(
                "--keys, --tool and --repo make a quick run (--sandbox); --resume JOB_ID "
                "alone publishes what a stopped run left"
            )
        _publish_left(ctx, resume_id)
        return
    if not job_file and not sandbox:
        raise click.UsageError("give a JOB_FILE or --sandbox (not both)")
    if job_file:
        spec = load_job(ctx, job_file)
    else:
        try:
            spec = JobSpec.from_dict(
                _quick_job(sandbox, image, repo, instruction, keys, calls, duration)
            )
            # what load_job checks of a job file: a --repo overlapping the store is refused
            spec.check_store(store_path(ctx).root)
        except ConfigError as exc:  # said in the options the run was given
            raise click.ClickException(
                _quick_problems(exc, "--tool" if calls else "--keys")
            ) from None
        except (ValueError, json.JSONDecodeError) as exc:
            raise click.ClickException(str(exc)) from exc
    s = store(ctx, create=True)
    if resume_id and (why := resume_problem(s.raw, s.jobs_db, spec, job_file, resume_id)):
        raise click.ClickException(why)  # before the note below: the run it speaks of is none
    if job_file and spec.options.schedule is not None:  # said: it reads as a scheduled job
        click.echo(
            f"note: {job_file} has a schedule; collect runs the job once, now "
            f"(`worldtrace jobs submit {job_file}` registers it for `worldtrace scheduler`)",
            err=True,
        )
    stop = threading.Event()
    live = sys.stdout.isatty()
    hint = (lambda job_id: _resume_command(ctx, job_file, job_id)) if job_file else None
    with _on_signals(lambda: stop.set()) as taken, CollectProgress(live, hint) as progress:
        try:
            result = run_job(
                spec, s.raw, job_id=resume_id, stop=stop, on_event=_with_warnings(progress),
                quick=not job_file,
            )  # fmt: skip
        except (SandboxError, JobBusy, DamagedAttempt) as exc:
            raise click.ClickException(str(exc)) from exc
    _note_short(result.trajectories)  # before the summary: stderr ends on what failed
    print_run(result, listed=live, progress=progress, stopped_by=taken[0] if taken else None)
    if result.interrupted:  # 130 after Ctrl-C, 143 after SIGTERM, as every command
        sys.exit(128 + taken[0] if taken else EXIT_INTERRUPTED)
    if progress.failed_episodes:
        sys.exit(EXIT_EPISODES_FAILED)


def _publish_left(ctx: click.Context, job_id: str) -> None:
    """`collect --resume JOB_ID` without a job file: publish the journals a stopped run of
    the job left (`jobs.publish_left`), each said as a resume says it, then what is left
    and the command that runs it. A quick `--sandbox` run killed mid-episode had no other
    way to publish its journal (it has no job file, and its options are not kept)."""
    from worldtrace.collectors.jobs import DamagedAttempt, JobBusy, publish_left, resume_problem
    from worldtrace.collectors.recorder import CUT_SHORT
    from worldtrace.progress import print_run, trajectory_text

    s = store(ctx)  # a resume makes no store: a missing one is a mistyped --store
    if why := resume_problem(s.raw, s.jobs_db, None, None, job_id):
        raise click.ClickException(why)
    quick = False

    def on_event(event: str, **info) -> None:
        nonlocal quick
        if event == "job":  # once its published files read: a damaged one is said alone
            quick = info["quick"]
            click.echo(
                f"job {job_id}: publishing the journals its stopped run left (without a job "
                "file no episode runs)"
            )
        elif event == "warning":
            click.echo(f"warning: {info['reason']}", err=True)
        elif event == "recovered":
            click.echo(
                f"{info['episode']} attempt {info['attempt']}: "
                f"{trajectory_text(info['trajectory'])}  "
                "[published from the journal a stopped run left]"
            )

    try:
        result = publish_left(s.raw, job_id, on_event=on_event)
    except (JobBusy, DamagedAttempt) as exc:
        raise click.ClickException(str(exc)) from exc
    _note_short(result.trajectories)
    if result.trajectories:
        print_run(result, listed=False)
    else:
        click.echo(f"nothing to publish: job {job_id} has no attempt left unpublished")
    cut = [t for t in result.trajectories if t.outcome.error == CUT_SHORT]
    named = ", ".join(f"{t.source.episode_id} attempt {t.source.attempt}" for t in cut)
    if quick:
        if cut:
            click.echo(
                f"note: {named} was cut short when its run stopped (incomplete); a quick "
                "--sandbox run cannot run it again: run its command again for a whole "
                "episode (a new job)",
                err=True,
            )
    else:
        episodes = ", ".join(dict.fromkeys(t.source.episode_id for t in cut))
        again = f" ({episodes} again: cut short when the run stopped)" if cut else ""
        click.echo(
            f"to run what job {job_id} has left{again}: "
            f"{_resume_command(ctx, 'JOB_FILE', job_id)} (with the job file it ran from)",
            err=True,
        )


def _with_warnings(progress: Callable[..., None]) -> Callable[..., None]:
    """`run_job`'s events for `progress`; a `warning` (a journal it could not read and
    set aside) is one `warning:` line on stderr, as `worker` prints it."""

    def on_event(event: str, **info) -> None:
        if event == "warning":
            click.echo(f"warning: {info['reason']}", err=True)
        else:
            progress(event, **info)

    return on_event


def _note_short(trajectories: list) -> None:
    """Say which recorded trajectories `process` will filter for their length (fewer turns
    than its default `filters.min_turns`): a one-step quick run recorded fine, then was
    gone after `process` without a word. An attempt that failed, or one our stop cut short
    (a resume runs it again), is not one to keep anyway."""
    from worldtrace.collectors.recorder import CUT_SHORT
    from worldtrace.pipelines.filters import FilterConfig

    least = FilterConfig.min_turns
    short = [
        t
        for t in trajectories
        if len(t.turns) < least and t.outcome.status != "error" and t.outcome.error != CUT_SHORT
    ]
    if not short:
        return
    names = ", ".join(
        f"{t.source.episode_id} attempt {t.source.attempt} ({len(t.turns)} turns)"
        for t in short[:SHOWN_SHORT]
    ) + (f" and {len(short) - SHOWN_SHORT} more" if len(short) > SHOWN_SHORT else "")
    click.echo(
        f"note: {len(short)} trajectory(ies) with fewer than {least} turns, which "
        f"`worldtrace process` filters by default (filters.min_turns): {names}; record more "
        f"steps, or process with --set filters.min_turns={max(len(t.turns) for t in short)}",
        err=True,
    )


SHOWN_SHORT = 5
"""Short trajectories `_note_short` names at most."""


def _resume_command(ctx: click.Context, job_file: str, job_id: str) -> str:
    """The command line that finishes `job_id` (with the --store this one was given)."""
    import shlex

    from . import STORE_KEY

    given = ctx.find_root().ensure_object(dict).get(STORE_KEY)
    where = f" --store {shlex.quote(str(given))}" if given else ""
    return f"worldtrace{where} collect {shlex.quote(job_file)} --resume {shlex.quote(job_id)}"


def _tool_calls(tools: tuple[str, ...]) -> list[dict]:
    """`--tool NAME:JSON` values as tool-call actions; a usage error names a bad one."""
    actions = []
    for t in tools:
        name, _, args = t.partition(":")
        try:
            arguments = json.loads(args or "{}")
            problem = None if isinstance(arguments, dict) else f"got {type(arguments).__name__}"
        except json.JSONDecodeError as exc:
            problem = exc.msg
        if problem:
            raise click.BadParameter(
                f"{t!r}: the arguments after ':' must be a JSON object ({problem})",
                param_hint="--tool",
            )
        if not name.strip():
            raise click.BadParameter(f"{t!r}: no tool name before ':'", param_hint="--tool")
        actions.append({"tool": name.strip(), "arguments": arguments})
    return actions


QUICK_KEYS = {("sandbox", "repo"): "--repo", ("sandbox", "docker", "image"): "--image",
              ("tasks", 0, "instruction"): "--instruction"}  # fmt: skip
"""The options of a quick run by the key of the job file it stands for (`_quick_job`)."""


def _quick_problems(exc, actions: str) -> str:
    """A quick run's problems in the options it was given (`--tool 2: arguments: ...`), not
    in the keys of a job file the user never wrote (`tasks[0].actions[1].arguments`)."""
    from worldtrace.schemas.parsing import dotted

    said = []
    for p in exc.problems:
        path = tuple(p.path)
        if path[:3] == ("tasks", 0, "actions") and len(path) > 3:
            rest = f" {dotted(path[4:])}" if path[4:] and path[4:] != ("tool",) else ""
            said.append(f"{actions} {path[3] + 1}{rest}: {p.message}")
        else:
            said.append(f"{QUICK_KEYS.get(path, dotted(path))}: {p.message}")
    return "; ".join(said)


def _quick_job(sandbox, image, repo, instruction, keys, calls, duration) -> dict:
    """The job file a quick `--sandbox` run stands for; options that do not fit the
    kind are usage errors rather than silently left out."""
    kind = ("swe" if repo else "terminal") if sandbox == "docker" else sandbox
    if kind == "swe":
        if not repo:
            raise click.UsageError("--sandbox swe needs --repo DIR (the repository it works on)")
        if keys:
            raise click.UsageError("--keys is for the terminal sandbox; swe takes --tool")
        if not calls:
            raise click.UsageError("give the tool calls to run: --tool NAME:JSON (repeatable)")
        actions = calls
    else:
        if calls:
            raise click.UsageError(
                "--tool is for the swe sandbox: give --repo DIR too (the terminal takes --keys)"
            )
        if repo:
            raise click.UsageError("--repo is for the swe sandbox (--sandbox swe or docker)")
        if not keys:
            raise click.UsageError("give the keystrokes to send: --keys TEXT (repeatable)")
        actions = [{"keystrokes": typed_keys(k), "duration": duration} for k in keys]
    return {
        "name": f"quick-{kind}",
        "sandbox": {
            "kind": kind,
            "docker": {"image": image},
            **({"repo": str(Path(repo).absolute())} if kind == "swe" else {}),
        },
        "tasks": [{"id": "quick", "instruction": instruction, "actions": actions}],
    }


KEY_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}
"""What a backslash means in `--keys`: a shell quote cannot hold Enter or Tab. Only
these: `\\001` or `\\x03` typed into a command (printf, grep) stay as written, and
keys have names (`C-c`)."""


def typed_keys(text: str) -> str:
    """`--keys TEXT` as typed: `KEY_ESCAPES` read, everything else (non-ASCII too) kept."""
    return re.sub(r"\\(.)", lambda m: KEY_ESCAPES.get(m[1], m[0]), text)


@contextlib.contextmanager
def _on_signals(stop: Callable[[], None]) -> Iterator[list[int]]:
    """SIGINT/SIGTERM call `stop` (finish cleanly); a second one exits at once. Yields
    the list the first signal taken goes in (`collect` exits with its status)."""
    taken: list[int] = []

    def handler(signum, frame) -> None:
        if taken:
            raise SystemExit(128 + taken[0])
        taken.append(signum)
        stop()  # before the line: a caller may answer the line with the second signal
        click.echo(f"{signal.Signals(signum).name}: stopping after the current step", err=True)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with main_thread_woken(old):  # said when it comes, not when the step's wait ends
            yield taken
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def load_job(ctx: click.Context, job_file: str):
    """The job file, checked completely; every problem is one line on stderr (exit 1)."""
    from worldtrace.collectors.jobspec import JobSpec
    from worldtrace.schemas.parsing import ConfigError

    try:
        spec = JobSpec.load(job_file)
        try:
            spec.check_store(store_path(ctx).root)
        except ConfigError as exc:
            raise exc.located(None, job_file) from None
    except ConfigError as exc:
        for line in exc.render().splitlines():
            click.echo(line, err=True)
        sys.exit(EXIT_PROBLEMS)
    return spec


def job_store(
    ctx: click.Context,
    url: str | None,
    create: bool = False,
    new_db: bool | None = None,
    read_only: bool = False,
):
    """The job store of `url` (or the store's). `create`: the store may be made (with
    --create); `new_db` (default: as `create`): a job store at a path that does not exist
    may be made there; `read_only`: a command that only looks (`open_job_store`)."""
    from worldtrace.collectors.jobstore import open_job_store, shown_address, sqlite_path

    # a command that queues or runs jobs writes into the store (the episodes' raw shards,
    # the checks of a job against it) even when the job store is named apart
    local = store(ctx, create) if create or not url else None
    where = url or local.jobs_db
    shown = shown_address(where)  # error lines go to logs: never a password
    try:  # the address as `open_job_store` reads it (`sqlite://x.db`, `Sqlite:///x.db`)
        path = sqlite_path(where) if url else None
    except ValueError as exc:
        raise click.ClickException(f"cannot open the job store {shown}: {exc}") from None
    fresh = create if new_db is None else new_db
    if path is not None and not fresh and not path.exists():
        # a command that reads must not leave a new job store at a mistyped path; the
        # setting that named it is said, as for the store (`check $WORLDTRACE_STORE`)
        from click.core import ParameterSource

        env = ctx.get_parameter_source("jobs_url") is ParameterSource.ENVIRONMENT
        named = f"${JOBS_ENV}" if env else "--jobs"
        raise click.ClickException(
            f"no job store at {shown_address(path)}: check {named} (`jobs submit` and "
            "`worker` make one)"
        )
    try:
        return open_job_store(where, read_only=read_only)
    except Exception as exc:  # psycopg and sqlite3 raise their own types
        why = shown_address(str(exc))
        raise click.ClickException(f"cannot open the job store {shown}: {why}") from exc


WORKER_EPILOG = """\b
Example:
  worldtrace worker --concurrency 4
  WORLDTRACE_JOBS=postgresql://wt@127.0.0.1:5432/jobs worldtrace worker   (several hosts)
"""


@click.command(cls=ConfigCommand, epilog=WORKER_EPILOG)
@options_from("worldtrace.collectors.worker:WorkerConfig")
@jobs_option
@click.pass_context
def worker(ctx: click.Context, jobs_url: str | None, **config) -> None:
    """Run queued collection episodes, printing each start and end. Attempts of workers
    that died are ended and queued again, and their containers removed. SIGTERM or
    Ctrl-C gives the running episodes back to the queue and exits; exit status 1 when
    the worker itself failed (each failure ends its episode attempt with the reason)."""
    started: list = []  # a signal while the worker starts stops it before it claims
    stopping = threading.Event()

    def stop() -> None:
        stopping.set()
        for w in started:
            w.stop()

    with _on_signals(stop):  # before the imports: ~1 s in which SIGTERM would exit 143
        from worldtrace.collectors.worker import Worker, WorkerConfig
        from worldtrace.progress import worker_line
        from worldtrace.schemas.parsing import ConfigError, parse

        try:
            cfg = parse(WorkerConfig, config)
        except ConfigError as exc:
            raise option_error(exc) from None
        _check_heartbeat(cfg.heartbeat, cfg.lease)
        w = Worker(
            job_store(ctx, jobs_url, create=True),
            store(ctx, create=True).raw,
            cfg,
            on_event=worker_line,
        )
        started.append(w)
        if stopping.is_set():
            w.stop()
        stats = w.run()
    click.echo(
        f"worker {w.name}: {stats.run} episode attempt(s) run ({stats.failed} failed), "
        f"{stats.released} released, {stats.lost} lost, {len(stats.errors)} worker error(s)"
    )
    if stats.errors:
        sys.exit(EXIT_PROBLEMS)


def _check_heartbeat(heartbeat: float | None, lease: float) -> None:
    """A heartbeat must renew a lease before it expires: one at or past the lease lets
    another worker end a running attempt as lost and run it again (the work is wasted).
    Over half the lease, one late heartbeat does the same: a warning."""
    if heartbeat is None:
        return
    if heartbeat >= lease:
        raise click.UsageError(
            f"--heartbeat {heartbeat:g} must be shorter than --lease {lease:g}: leases "
            "would lapse between heartbeats and other workers take the running attempts"
        )
    if heartbeat > lease / 2:
        click.echo(
            f"warning: --heartbeat {heartbeat:g} is over half of --lease {lease:g}: one "
            "late heartbeat loses the lease (the default is a quarter of it)",
            err=True,
        )


@click.command(
    cls=ConfigCommand,
    epilog="\b\nExample:\n  worldtrace scheduler          (runs until Ctrl-C)\n"
    "  worldtrace scheduler --once   (from cron: enqueue what is due, exit)",
)
@options_from("worldtrace.collectors.scheduler:SchedulerConfig")
@click.option("--once", is_flag=True, help="Enqueue what is due now and exit.")
@jobs_option
@click.pass_context
def scheduler(ctx: click.Context, once: bool, jobs_url: str | None, **config) -> None:
    """Enqueue runs of scheduled jobs (`schedule:` in a job file, registered by `jobs
    submit`) when they are due; runs until Ctrl-C/SIGTERM."""
    stop = threading.Event()
    # before the imports and the job store: a SIGTERM in the first second ended the
    # scheduler with status 143 instead of the clean stop a supervisor expects
    with _on_signals(stop.set):
        from worldtrace.collectors.scheduler import Scheduler, SchedulerConfig
        from worldtrace.schemas.parsing import ConfigError, parse

        try:
            cfg = parse(SchedulerConfig, config)
        except ConfigError as exc:
            raise option_error(exc) from None
        skipped = lambda name, last: click.echo(  # noqa: E731
            f"skipped a run of {name}: its last run {last} has not ended (overlap: skip)"
        )
        problem = lambda name, why: click.echo(f"warning: schedule {name}: {why}", err=True)  # noqa: E731
        # a mistyped --jobs path (in a crontab) must not become a new, empty job store
        # that the scheduler then watches for ever: only `jobs submit` and `worker` make one
        s = Scheduler(
            job_store(ctx, jobs_url, create=True, new_db=False),
            config=cfg,
            on_skip=skipped,
            on_problem=problem,
        )
        announce = lambda job_id: click.echo(f"enqueued {job_id}")  # noqa: E731
        if once:
            for job_id in s.tick():
                announce(job_id)
            return
        if not stop.is_set():
            s.run(stop, on_enqueue=announce)


COMMANDS = (collect, worker, scheduler)
