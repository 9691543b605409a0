"""Collection: `collect` runs a job now; `jobs ...` queues jobs and `worker` runs the queue."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from worldtrace.options import ConfigCommand, RegistryChoice, options_from

from . import EXIT_PROBLEMS, store


@click.command(cls=ConfigCommand)
@click.argument("job_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--sandbox",
    type=RegistryChoice("worldtrace.sandboxes.base:kinds", first=("docker",)),
    help="Quick single run: docker means terminal, or swe with --repo.",
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
    help="Terminal keystrokes, in order (\\n is Enter; C-c alone is Ctrl-C).",
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
    help="Seconds to wait for terminal output per step.",
)
@click.pass_context
def collect(
    ctx: click.Context, job_file, sandbox, image, repo, instruction, keys, tools, duration
) -> None:
    """Run episodes into raw shards: from a job file (see docs/collect.md) or a quick
    --sandbox run. Containers have no network, memory/cpu/pids limits, an output cap and
    a step timeout; every attempt, failed or not, is recorded."""
    from worldtrace.collectors.jobs import run_job
    from worldtrace.collectors.jobspec import JobSpec
    from worldtrace.output import print_collect_result
    from worldtrace.sandboxes.base import SandboxError

    if bool(job_file) == bool(sandbox):
        raise click.UsageError("give a JOB_FILE or --sandbox (not both)")
    try:
        if job_file:
            spec = JobSpec.load(job_file)
        else:
            spec = JobSpec.from_dict(
                _quick_job(sandbox, image, repo, instruction, keys, tools, duration)
            )
        result = run_job(spec, store(ctx, create=True).raw)
    except (ValueError, SandboxError, json.JSONDecodeError) as exc:
        raise click.ClickException(str(exc)) from exc
    print_collect_result(result)
    if result.trajectories and all(t.outcome.status == "error" for t in result.trajectories):
        sys.exit(EXIT_PROBLEMS)


def _quick_job(sandbox, image, repo, instruction, keys, tools, duration) -> dict:
    """The job file a quick `--sandbox` run stands for."""
    kind = ("swe" if repo else "terminal") if sandbox == "docker" else sandbox
    if kind == "swe":
        actions = []
        for t in tools:
            name, _, args = t.partition(":")
            try:
                arguments = json.loads(args or "{}")
            except json.JSONDecodeError as exc:
                raise click.BadParameter(
                    f"{t!r}: the arguments after ':' must be a JSON object ({exc.msg})",
                    param_hint="--tool",
                ) from None
            actions.append({"tool": name, "arguments": arguments})
    else:
        actions = [
            {"keystrokes": k.encode().decode("unicode_escape"), "duration": duration} for k in keys
        ]
    return {
        "name": f"quick-{kind}",
        "sandbox": {
            "kind": kind,
            "docker": {"image": image},
            **({"repo": str(Path(repo).absolute())} if kind == "swe" else {}),
        },
        "tasks": [{"id": "quick", "instruction": instruction, "actions": actions}],
    }


@click.group()
def jobs() -> None:
    """Collection jobs in the store's jobs.db: submit, list, show, cancel, retry.
    `worldtrace worker` runs what is queued."""


def _job_store(ctx: click.Context, create: bool = False):
    from worldtrace.collectors.queue import JobStore

    return JobStore(store(ctx, create).jobs_db)


@jobs.command("submit")
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def jobs_submit(ctx: click.Context, job_file: str) -> None:
    """Queue a job file (see docs/collect.md); prints the job id."""
    from worldtrace.collectors.jobspec import JobSpec

    try:
        spec = JobSpec.load(job_file)
    except (ValueError, TypeError) as exc:
        raise click.ClickException(f"{job_file}: {exc}") from exc
    click.echo(_job_store(ctx, create=True).submit(spec))


@jobs.command("list")
@click.pass_context
def jobs_list(ctx: click.Context) -> None:
    """List jobs with their status and episode counts."""
    from worldtrace.output import print_table, rows_table

    rows = _job_store(ctx).jobs()
    if not rows:
        click.echo("no jobs")
        return
    print_table(rows_table(rows))


@jobs.command("show")
@click.argument("job_id")
@click.pass_context
def jobs_show(ctx: click.Context, job_id: str) -> None:
    """One job and every attempt of its episodes."""
    from worldtrace.output import print_job

    job = _job_store(ctx).job(job_id)
    if job is None:
        raise click.ClickException(f"no single job matches {job_id!r}")
    print_job(job)


@jobs.command("cancel")
@click.argument("job_id")
@click.pass_context
def jobs_cancel(ctx: click.Context, job_id: str) -> None:
    """Cancel a job: its queued episodes will not run (running ones finish)."""
    n = _job_store(ctx).cancel(job_id)
    click.echo(f"{job_id}: cancelled, {n} queued episode(s) dropped from the queue")


@jobs.command("retry")
@click.argument("job_id")
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: str) -> None:
    """Queue a new attempt of every failed or cancelled episode."""
    n = _job_store(ctx).retry(job_id)
    click.echo(f"{job_id}: {n} episode(s) queued again")


@click.command()
@click.option(
    "--concurrency", default=1, show_default=True, help="Episodes run at once (one sandbox each)."
)
@click.option(
    "--forever",
    is_flag=True,
    help="Keep polling for new jobs instead of exiting when the queue is empty.",
)
@click.option(
    "--lease",
    default=120.0,
    show_default=True,
    help="Seconds without a heartbeat after which a running episode is requeued.",
)
@click.pass_context
def worker(ctx: click.Context, concurrency: int, forever: bool, lease: float) -> None:
    """Run queued collection episodes (resuming those of workers that died)."""
    from worldtrace.collectors.queue import Worker

    n = Worker(
        _job_store(ctx, create=True), store(ctx).raw, concurrency=concurrency, lease_s=lease
    ).run(forever=forever)
    click.echo(f"worker: {n} episode(s) run")


COMMANDS = (collect, jobs, worker)
