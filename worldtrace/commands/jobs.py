"""`jobs submit|list|show|cancel|retry|unschedule`: the job store from the command line.

Each command says what happened (a cancel of a finished job is not a cancel) and the
reading ones print one JSON document with `--json` (docs/cli.md).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from . import EXIT_PROBLEMS, Seconds
from .collect import job_store, jobs_option, load_job

JSON_HELP = "Print one JSON document on stdout instead (keys in docs/cli.md)."
MIN_INTERVAL, MAX_INTERVAL = 0.1, 86400.0
"""`jobs list --watch --interval`: seconds between refreshes; at most a day (`inf`
overflowed the sleep between them, after the first table)."""


class _Jobs(click.Group):
    """`jobs`: an option of a subcommand given before it (`jobs --jobs URL list`) is
    refused as click refuses any unknown option, with the order that works."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            fixed = _subcommand_first(self, given, exc.option_name)
            if fixed is None:
                raise
            raise click.NoSuchOption(
                exc.option_name,
                f"No such option {exc.option_name!r} for `jobs` itself: it is an option of "
                f"the subcommand, given after it: `{fixed}`.",
                ctx=ctx,
            ) from None


def _subcommand_first(group: click.Group, args: list[str], option: str) -> str | None:
    """`jobs SUB ARGS...` with what came before SUB moved after it, when SUB takes
    `option`; None when no subcommand that takes it follows."""
    import shlex

    at = next((i for i, a in enumerate(args) if a in group.commands), None)
    if at is None:
        return None
    sub = group.commands[args[at]]
    if not any(option in p.opts for p in sub.params if isinstance(p, click.Option)):
        return None
    return shlex.join(["jobs", args[at], *args[:at], *args[at + 1 :]])


@contextmanager
def _job_store_errors(js, doing: str = "read") -> Iterator[None]:
    """A SQLite job store that fails (damaged, locked: `jobstore_sql._advised` says what
    to do) is one line naming it: the guard of every command named the store's own
    `jobs.db`, which is not the file at fault under `--jobs OTHER.db`."""
    import sqlite3

    from worldtrace.collectors.jobstore import shown_address

    try:
        yield
    except sqlite3.Error as exc:
        where = shown_address(js.url)  # error lines go to logs: never a password
        raise click.ClickException(f"cannot {doing} the job store {where}: {exc}") from None


@click.group(
    cls=_Jobs,
    epilog="\b\nExample:\n  worldtrace jobs submit job.yaml && worldtrace worker --concurrency 2\n"
    "  worldtrace jobs list --json | jq -r '.jobs[] | select(.failed > 0) | .job_id'",
)
def jobs() -> None:
    """Collection jobs in the job store (the store's jobs.db, or --jobs URL after the
    subcommand: `jobs list --jobs URL`): submit, list, show, cancel, retry, unschedule.
    `worldtrace worker` runs what is queued."""


@jobs.command(
    "submit",
    epilog="\b\nExample:\n  worldtrace jobs submit --dry-run job.yaml   (check it, list the episodes)\n"
    "  worldtrace jobs submit job.yaml             (prints the job id)",
)
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--dry-run", is_flag=True, help="Check the file and print its episodes; queue nothing."
)
@jobs_option
@click.pass_context
def jobs_submit(ctx: click.Context, job_file: str, dry_run: bool, jobs_url: str | None) -> None:
    """Queue a job file (see docs/collect.md); prints the job id. A file with a
    `schedule` registers it instead (`worldtrace scheduler` enqueues its runs)."""
    from worldtrace.output import print_table, rows_table

    spec = load_job(ctx, job_file)
    if dry_run:
        replayed = _replayed_actions(ctx, spec)
        rows = [
            {"task": e.task.id, "episode": e.episode_id, "seed": e.seed,
             "actions": replayed.get(e.task.replay or "", len(e.task.actions))}
            for e in spec.expand()
        ]  # fmt: skip
        print_table(rows_table(rows, title=f"{spec.name}: {len(rows)} episode(s)"))
        s = spec.options.schedule
        if s is not None:
            click.echo(
                f"schedule: {f'cron {s.cron}' if s.cron else f'every {s.every}'}, "
                f"missed: {s.missed}, overlap: {s.overlap}"
            )
        return
    js = job_store(ctx, jobs_url, create=True)
    if spec.options.schedule is not None:
        from worldtrace.collectors.scheduler import register

        with _job_store_errors(js, "write"):
            before = next((r for r in js.schedules() if r["schedule_id"] == spec.name), None)
            due = register(js, spec)
        click.echo(f"schedule {spec.name}: {_registered(before, spec)}, next run due "
                   f"{due.isoformat(timespec='seconds')}")  # fmt: skip
        return
    with _job_store_errors(js, "write"):
        click.echo(js.submit(spec))


def _replayed_actions(ctx: click.Context, spec) -> dict[str, int]:
    """Actions of the recording each replay task's prefix names (`load_job` checked that
    it names one): a replay task lists none of its own, and the dry run said `actions 0`."""
    from worldtrace.collectors.policies import find_replay, raw_trajectory_ids

    from . import store_path

    prefixes = {t.replay for t in spec.tasks if t.replay} if spec.policy.kind == "replay" else ()
    if not prefixes:
        return {}
    raw = store_path(ctx).raw
    ids = raw_trajectory_ids(raw)
    return {p: len(find_replay(raw, p, ids).turns) for p in prefixes}


def _registered(before: dict | None, spec) -> str:
    """What `jobs submit` did to the schedule of `spec`'s name: schedules are keyed by the
    job's name, so a job file of another job under a name in use replaced its schedule
    in silence (`registered`, as for a new one)."""
    if before is None:
        return "registered"
    if before["spec_json"] == spec.to_json():
        return "registered already, unchanged"
    was = f"cron {before['cron']}" if before["cron"] else f"every {before['every']}"
    return f"replaced the schedule registered before under this name (it was {was})"


@jobs.command(
    "list",
    epilog="\b\nExample:\n  worldtrace jobs list --watch --interval 5\n"
    "  worldtrace jobs list --json | jq -r '.jobs[] | select(.status == \"failed\") | .job_id'",
)
@click.option("--watch", is_flag=True, help="Keep the tables on screen, refreshed, until Ctrl-C.")
@click.option(
    "--interval", type=Seconds(min=MIN_INTERVAL, max=MAX_INTERVAL), default=2.0,
    show_default=True, help="Seconds between refreshes of --watch.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@jobs_option
@click.pass_context
def jobs_list(
    ctx: click.Context, watch: bool, interval: float, as_json: bool, jobs_url: str | None
) -> None:
    """Jobs with their status and episode counts, schedules with their next due time,
    and the workers that run."""
    from worldtrace.output import print_json, print_table
    from worldtrace.progress import jobs_document, jobs_view
    from worldtrace.progress import watch as watch_view

    if watch and as_json:
        raise click.UsageError("--watch and --json do not go together")
    js = job_store(ctx, jobs_url, read_only=True)
    with _job_store_errors(js):
        if as_json:
            print_json(jobs_document(js))
        elif watch:
            from worldtrace.errors import stop_answered, stop_says, stop_taken

            stop_says(lambda: "nothing was written")
            watch_view(js, interval)  # until Ctrl-C: its end, exit 0
            if stop_taken() == signal.SIGINT:
                stop_answered()
        else:
            print_table(jobs_view(js))


def _not_blank(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A blank id is a prefix of every job id: it names no job (it matched them all)."""
    if not value.strip():
        raise click.BadParameter("blank: give a job id or a prefix of one", ctx=ctx, param=param)
    return value


@jobs.command(
    "show",
    epilog="\b\nExample:\n  worldtrace jobs show j-5592    (a prefix of the id is enough)\n"
    "  worldtrace jobs show j-5592 --json | jq '.attempts[] | select(.status == \"failed\") | .error'",
)
@click.argument("job_id", callback=_not_blank)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@jobs_option
@click.pass_context
def jobs_show(ctx: click.Context, job_id: str, as_json: bool, jobs_url: str | None) -> None:
    """One job and every attempt of its episodes."""
    from worldtrace.output import job_document, print_job, print_json

    js = job_store(ctx, jobs_url, read_only=True)
    with _job_store_errors(js):
        job = _one_job(js, job_id)
    if as_json:
        print_json(job_document(job))
    else:
        print_job(job)


def _one_job(js, job_id: str) -> dict:
    """The job JOB_ID (or a prefix of it) names; a one-line error otherwise."""
    job = js.job(job_id)
    if job is not None:
        return job
    found = sorted(j["job_id"] for j in js.jobs() if j["job_id"].startswith(job_id))
    if not found:
        raise click.ClickException(
            f"no job matches {job_id!r} (`worldtrace jobs list` shows the ids)"
        )
    shown = ", ".join(found[:MAX_SHOWN]) + (
        f", ... {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    )
    raise click.ClickException(
        f"{job_id!r} matches {len(found)} jobs: {shown}; give more of the id"
    )


MAX_SHOWN = 5
"""Job ids an ambiguous prefix lists at most."""


FINISHED = ("succeeded", "failed", "partial")
"""Job statuses after which there is nothing to cancel."""


@jobs.command(
    "cancel",
    epilog="\b\nExample:\n  worldtrace jobs cancel j-5592 && worldtrace jobs retry j-5592",
)
@click.argument("job_id", callback=_not_blank)
@jobs_option
@click.pass_context
def jobs_cancel(ctx: click.Context, job_id: str, jobs_url: str | None) -> None:
    """Cancel a job: its queued episodes will not run (running ones finish). Says what
    happened: cancelled now, already cancelled, or already finished (nothing to cancel).

    Exit status: 0 when the job is cancelled now or was already; 1 when it had finished
    (nothing to cancel), or no job or several jobs match."""
    # looked up without making a job store: a mistyped id on a store without one left a
    # new, empty jobs.db behind its `no job matches` (as `retry` and `unschedule` did)
    looked = job_store(ctx, jobs_url, read_only=True)
    with _job_store_errors(looked):
        job = _one_job(looked, job_id)
    js = job_store(ctx, jobs_url)
    jid, before = job["job_id"], job["status"]
    if before == "cancelled":
        click.echo(f"{jid}: already cancelled; nothing to do")
        return
    if before in FINISHED:
        click.echo(f"{jid}: already finished ({before}); nothing to cancel", err=True)
        sys.exit(EXIT_PROBLEMS)
    with _job_store_errors(js, "write"):
        n = js.cancel(jid)
        now = _one_job(js, jid)
    after = now["status"]
    if after != "cancelled":  # it finished between our look and the cancel
        click.echo(f"{jid}: finished ({after}) before it could be cancelled", err=True)
        sys.exit(EXIT_PROBLEMS)
    running = sum(e["status"] == "running" for e in now["episode_rows"])
    click.echo(
        f"{jid}: cancelled ({before} before); {n} queued episode(s) dropped"
        + (f", {running} running episode(s) will finish" if running else "")
    )


@jobs.command(
    "retry",
    epilog="\b\nExample:\n  worldtrace jobs retry j-5592 && worldtrace worker",
)
@click.argument("job_id", callback=_not_blank)
@jobs_option
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: str, jobs_url: str | None) -> None:
    """Queue a new attempt of every failed or cancelled episode."""
    looked = job_store(ctx, jobs_url, read_only=True)
    with _job_store_errors(looked):
        jid = _one_job(looked, job_id)["job_id"]
    js = job_store(ctx, jobs_url)
    with _job_store_errors(js, "write"):
        n = js.retry(jid)
    click.echo(
        f"{jid}: {n} episode(s) queued again"
        if n
        else f"{jid}: nothing to retry (no failed or cancelled episode)"
    )


@jobs.command("unschedule", epilog="\b\nExample:\n  worldtrace jobs unschedule nightly-terminal")
@click.argument("name")
@jobs_option
@click.pass_context
def jobs_unschedule(ctx: click.Context, name: str, jobs_url: str | None) -> None:
    """Remove the schedule of job NAME (runs already queued stay)."""
    looked = job_store(ctx, jobs_url, read_only=True)
    with _job_store_errors(looked):
        known = {s["schedule_id"] for s in looked.schedules()}
    removed = False
    if name in known:
        js = job_store(ctx, jobs_url)
        with _job_store_errors(js, "write"):
            removed = js.remove_schedule(name)
    if not removed:
        raise click.ClickException(
            f"no schedule named {name!r} (`worldtrace jobs list` shows the schedules)"
        )
    click.echo(f"schedule {name}: removed")


COMMANDS = (jobs,)
