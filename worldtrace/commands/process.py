"""`process`: raw shards -> processed shards through the Beam pipeline."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import click

from worldtrace.options import ConfigCommand, options_from, typed_options

from . import progress_every_option, store, store_path


def _refuse_early(ctx: click.Context) -> None:
    """What refuses this run whatever its config says, said before the config's options
    load Beam (~2 s, 3-9 s under load, of waiting to hear it): a store that does not
    exist (without --input, which may make one with --create), or one another run writes
    or an export reads ("run again later")."""
    from worldtrace.schemas.publish import StoreBusy, refuse_busy

    if not ctx.params.get("inputs"):
        store(ctx)  # the one-line error of a missing store, as the run says it
    try:
        refuse_busy(store_path(ctx).processed)
    except StoreBusy as exc:
        raise click.ClickException(str(exc)) from exc


@click.command(
    cls=ConfigCommand,
    before_options=_refuse_early,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    epilog="\b\nExample:\n  worldtrace process\n"
    "  worldtrace process --rebuild --set dedup.threshold=0.7 --set filters.min_turns=3\n"
    "  worldtrace process --runner PortableRunner --job_endpoint=embed "
    "--environment_type=LOOPBACK",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    type=click.Path(exists=True),
    help="Raw shards or JSONL (default: the store's raw/). Repeatable.",
)
@options_from(
    "worldtrace.pipelines.process:ProcessConfig",
    # the store decides the output; the rest is set through --config/--set
    exclude=("output", "seed", "bytes_per_worker"),
    choices={"policy": "worldtrace.pipelines.mask:POLICIES"},
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML with ProcessConfig fields (filters, dedup, policy_settings, ...; not output: "
    "processed data goes to the store's processed/); options typed here and --set win over it.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. dedup.threshold=0.7, filters.min_turns=3, "
    "policy_settings.echo_ol=0.8 (checked against the setting's type and range): filters, "
    "dedup, policy, policy_settings, seed, workers, bytes_per_worker. What the run reads, "
    "where it writes and how it runs are the options --input, --store, --rebuild, --runner.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the run manifest as one JSON document."
)
@progress_every_option
@click.pass_context
def process(
    ctx: click.Context, inputs, config_file, overrides, as_json, progress_every, **options
) -> None:
    """Raw shards -> processed shards (Beam pipeline): validate, filter, dedup, statistics, mask.

    Any further --options are passed to Beam (e.g. --job_endpoint=embed
    --environment_type=LOOPBACK for the PortableRunner); one Beam does not define is
    refused on the local runner, and one close to an option here on every runner. Progress (units through pass 1
    and pass 2, records read) goes to stderr: a bar on a terminal, a line every
    --progress-every seconds otherwise. One run per store at a time: a second one fails at
    once and names the first.
    """
    from worldtrace.errors import stop_says

    # a stop before the run's block (imports, checks): the processed data as it was
    first = store_path(ctx).processed
    published = _published_run(first)
    stop_says(lambda: _process_kept(first, published))
    from worldtrace.output import print_accounting, print_json
    from worldtrace.pipelines.process import ProcessConfig, run
    from worldtrace.pipelines.runner import WorkerLost
    from worldtrace.progress import StepProgress
    from worldtrace.schemas.config import SettingError, load

    if config_file is None:  # the typed runner and Beam options, before the store is
        _check_beam_args(ctx, options.get("runner") or "DirectRunner", list(ctx.args))
    # with --input it writes a store's first data: --create may make it
    s = store(ctx, create=bool(inputs))
    # what was typed wins over a --config file (it silently beat --policy and --rebuild,
    # and the file's `inputs` and `beam_args` replaced --input and Beam's typed options)
    typed = {p.name: options[p.name] for p in typed_options(ctx) if p.name in options}
    if inputs:
        typed["inputs"] = list(inputs)
    _check_overrides(overrides, ProcessConfig)
    try:  # the defaults, then the file, then what was typed: options, then --set
        cfg = load(
            ProcessConfig(
                inputs=[str(s.raw)],
                output=str(s.processed),
                **{k: v for k, v in options.items() if k not in typed},
            ),
            config_file,
            unlisted=FILE_REFUSED,  # a key the file may not hold is no help in `known:`
        )
        # Beam's options: the file's, then the typed ones (Beam takes the last of each)
        typed["beam_args"] = [*cfg.beam_args, *ctx.args]
        cfg = load(dataclasses.replace(cfg, **typed), None, list(overrides))
    except SettingError as exc:  # a value its setting does not take: a usage error
        hint = _given_by(exc, overrides, options)
        raise click.BadParameter(str(exc), param_hint=hint) from None
    if cfg.output != str(s.processed):  # only a --config file gets here with another
        raise click.BadParameter(
            f"{config_file}: output: {NOT_SETTINGS['output']}", param_hint="--config"
        )
    if config_file is not None:  # the file's runner and Beam options are checked alike
        _check_beam_args(ctx, cfg.runner, cfg.beam_args, config_file)
    from worldtrace.output import LOWER_CASE, not_read_line
    from worldtrace.schemas.store import INPUT_SUFFIXES, input_files

    skipped: list[Path] = []  # what the run's walk will pass over, said, not in silence
    input_files(cfg.inputs, skipped)
    if skipped:
        click.echo(
            not_read_line("process", skipped, cfg.inputs, INPUT_SUFFIXES, LOWER_CASE), err=True
        )
    from worldtrace.errors import interrupts

    output = Path(cfg.output)
    before = _published_run(output)
    stopped = interrupts(lambda: _process_kept(output, before), hold=lambda: _publishing(output))
    with stopped:
        try:
            with StepProgress("process", 0, "unit steps", every=progress_every) as progress:
                manifest = run(cfg, progress=progress)
        except (KeyError, ValueError, FileNotFoundError, WorkerLost) as exc:
            raise click.ClickException(str(exc.args[0] if exc.args else exc)) from exc
        if as_json:
            print_json(manifest)
        else:
            print_accounting(manifest)


def _published_run(output: Path) -> str | None:
    """The run id of the processed data under `output` (its manifest), or None."""
    import json

    from worldtrace.schemas import fields as F

    try:
        return json.loads((output / F.PROCESS_MANIFEST).read_bytes()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def _publishing(output: Path) -> bool:
    """Whether this process is swapping its run's tables in (its publish journal is in
    `output`): an interrupt now would stop between two renames, and the run's directory,
    removed as the run unwinds, would take the tables not yet moved with it (the next
    roll-forward would then keep the earlier ones: tables of two runs). The stop waits
    the few renames out."""
    import json

    from worldtrace.schemas.publish import JOURNAL

    try:
        run = json.loads((output / JOURNAL).read_bytes()).get("run")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(run, str) and run.startswith(f".run-{os.getpid()}-")


def _process_kept(output: Path, before: str | None) -> str:
    """What an interrupted `process` left: the processed data as it was (a run publishes
    all its tables or none), or this run's, when the stop came as it published."""
    now = _published_run(output)
    if now != before and now is not None:
        return f"the run had published its tables when the stop came: {output} holds run {now}"
    return (
        f"nothing was published: {output} is as it was before this run (no table is "
        "half-written); run the same command again"
    )


def _check_beam_args(
    ctx: click.Context, runner: str, args: list[str], config_file: str | None = None
) -> None:
    """Refuse what the run would silently drop: an option close to one of this command's
    (`--polcy`, `--rebuid`), a runner Beam does not know, and on the local runner any
    option Beam does not define either (Beam discards it with a log line). Other runners
    get unknown options through: Dataflow, Flink and Spark hand them to their SDK
    workers or job server. `args` and `runner` as the run takes them: typed, or from
    `config_file` (said where it gave them: a file's were never checked)."""
    import difflib
    import logging

    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import create_runner

    from worldtrace.pipelines.runner import LOCAL_RUNNERS

    typed = {p.name for p in typed_options(ctx)}
    filed = f" (given in {config_file})"
    try:
        create_runner(runner)
    except ValueError as exc:
        said = str(exc) + ("" if config_file is None or "runner" in typed else filed)
        raise click.BadParameter(said, param_hint="--runner") from None
    except ImportError:  # a runner whose extras are missing: the run says so
        pass
    options = PipelineOptions(args)
    quiet = logging.getLogger("apache_beam.options.pipeline_options")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "Discarding unparseable args", said better below
    try:  # what Beam defines, and what it would keep were it told to keep all
        known = options.get_all_options()
        given = options.get_all_options(retain_unknown_options=True)
    finally:
        quiet.setLevel(level)
    flags = [a.partition("=")[0] for a in args if a.startswith("--")]
    written = {f.lstrip("-").replace("-", "_"): f for f in flags}  # Beam's name -> as given
    on_line = {a.partition("=")[0] for a in ctx.args}
    own = [o for p in ctx.command.params for o in p.opts if o.startswith("--")]
    for dest in sorted(set(given) - set(known)):
        name = written.get(dest, f"--{dest}")
        where = "" if config_file is None or name in on_line else filed
        near = difflib.get_close_matches(name, own, n=1, cutoff=0.75)
        if near and not where:
            raise click.NoSuchOption(name, possibilities=near, ctx=ctx)
        if near or runner in LOCAL_RUNNERS:
            raise click.UsageError(
                f"no such option: {name}{where} (neither a process option nor one of "
                "Beam's; the local runner would drop it)"
                if not near
                else f"no such option: {name}{where} (did you mean {near[0]}?)",
                ctx,
            )


NOT_SETTINGS = {
    "inputs": "not a setting: the files to read are --input PATH (default: the store's raw/)",
    "output": "not a setting: processed data goes to the store's processed/ (--store)",
    "rebuild": "not a setting: use --rebuild",
    "runner": "not a setting: use --runner",
    "beam_args": "not a setting: Beam's options go on the command line after the command's "
    "(e.g. --job_endpoint=embed)",
}
"""ProcessConfig fields that are no setting but what a run reads, where it writes and how
it runs: the command's options give them. `--set output=DIR` wrote the processed tables
outside the store (exit 0, the store's views unchanged). A `--config` file, a run's
recipe, may hold them all but `output`."""


FILE_REFUSED = ("output",)
"""The fields of ProcessConfig a `--config` file may not hold (`NOT_SETTINGS`)."""


def _check_overrides(overrides: tuple[str, ...], config: type) -> None:
    """Refuse a `--set` of a field of `config` (ProcessConfig) that is no setting
    (`NOT_SETTINGS`), naming the option that gives it; an unknown one lists the
    settings only."""
    settings = [f.name for f in dataclasses.fields(config) if f.name not in NOT_SETTINGS]
    for item in overrides:
        key, sep, value = item.partition("=")
        head = key.strip().partition(".")[0]
        if not sep or head in settings:
            continue  # `load` says what is wrong with it, if anything
        given = f"{key.strip()}={value}"
        why = NOT_SETTINGS.get(head) or f"unknown setting (known: {', '.join(settings)})"
        raise click.BadParameter(f"{given}: {why}", param_hint="--set")


def _given_by(exc, overrides: tuple[str, ...], options: dict) -> str:
    """The option that gave the setting `exc` (a SettingError) names."""
    if exc.source:
        return "--config"
    if exc.key in options and all(o.partition("=")[0].strip() != exc.key for o in overrides):
        return "--" + exc.key.replace("_", "-")
    return "--set"


COMMANDS = (process,)
