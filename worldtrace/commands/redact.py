"""Secrets: `redact --check` lists what a store, shards or an export still hold."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import EXIT_PROBLEMS, show_option, store

REDACT_EPILOG = """\b
Example:
  worldtrace redact --check                         (the whole store)
  worldtrace redact --check worldtrace-data/export/parquet --all-plugins
"""


NOT_A_MODE = (
    "Redaction itself runs at collect, import and process (`worldtrace process` re-redacts "
    "raw data with the current rules); `redact --check` finds what is left"
)


class _Mode(click.Option):
    """The flag that names the command's one mode: required, and shown so (`[required]`,
    the usage line), its absence a usage error that says why."""

    def process_value(self, ctx: click.Context, value):
        try:
            return super().process_value(ctx, value)
        except click.MissingParameter as exc:
            exc.message = NOT_A_MODE
            raise


@click.command(epilog=REDACT_EPILOG, options_metavar="--check [OPTIONS]")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--check",
    cls=_Mode,
    is_flag=True,
    required=True,
    help="Scan and list findings (file, record, field, kind; never the secret); exit 1 if "
    "any. The only mode: nothing is redacted here.",
)
@click.option(
    "--tokenizer",
    type=click.Path(exists=True, dir_okay=False),
    help="tokenizer.json to decode training shards (default: the default tokenizer, when "
    "its sha256 is the one the export's manifest names).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Redaction rules (YAML of RedactConfig; default $WORLDTRACE_REDACT_CONFIG).",
)
@click.option(
    "--all-plugins", is_flag=True, help="Also the slower detect-secrets plugins (a wider net)."
)
@show_option(100, "Findings listed (all are counted).")
@click.pass_context
def redact(ctx: click.Context, paths, check, tokenizer, config_path, all_plugins, show) -> None:
    """Find secrets left in a store (default), shards or an export: trajectory Parquet,
    training shards decoded with the export's tokenizer, Megatron shards, JSONL, JSON and
    jobs.db. Redaction itself happens where data enters (collect, import) and when
    `worldtrace process` rewrites raw data with the current rules (docs/security.md)."""
    import dataclasses

    from worldtrace.leaks import CannotCheck, Checker, files_under
    from worldtrace.schemas.parsing import ConfigError
    from worldtrace.schemas.redact import Redactor, active_config
    from worldtrace.schemas.redact_rules import SLOW_PLUGINS, RedactConfig

    try:
        cfg = RedactConfig.load(config_path) if config_path else active_config()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if all_plugins:
        extra = tuple(p for p in SLOW_PLUGINS if p not in cfg.detect_secrets)
        cfg = dataclasses.replace(cfg, detect_secrets=(*cfg.detect_secrets, *extra))
    targets = list(paths) or [store(ctx).root]
    files = files_under(targets)
    checker = Checker(Redactor(cfg), tokenizer)
    found = problems = 0
    for f in files:
        try:
            for finding in checker.check(f):
                found += 1
                if found <= show:
                    click.echo(str(finding))
        except CannotCheck as exc:
            problems += 1
            click.echo(f"cannot check {exc}", err=True)
    if found > show:
        click.echo(f"... {found - show} more", err=True)
    click.echo(f"{found} secret(s) found in {len(files)} file(s)", err=True)
    if found or problems:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = (redact,)
