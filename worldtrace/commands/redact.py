"""Secrets: `redact --check` lists what a store, shards or an export still hold."""

from __future__ import annotations

import dataclasses
import os
import re
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
    from worldtrace.leaks import CannotCheck, Checker, files_under
    from worldtrace.schemas.parsing import ConfigError
    from worldtrace.schemas.redact import Redactor, active_config
    from worldtrace.schemas.redact_rules import CONFIG_ENV, SLOW_PLUGINS, RedactConfig

    try:
        cfg = RedactConfig.load(config_path) if config_path else active_config()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    cfg, lessened = audit_config(cfg)
    if lessened:
        source = (
            f"--config {config_path}"
            if config_path
            else f"${CONFIG_ENV} ({os.environ[CONFIG_ENV]})"
        )
        click.echo(
            f"note: the rules of {source} redact less ({'; '.join(lessened)}): checked with the "
            "built-in rules and the default plugins, without such an allow entry",
            err=True,
        )
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


def audit_config(cfg):
    """The rules `redact --check` audits with, and what `cfg` turned off that it turns back
    on: the audit certifies the data whatever rules collection used (2026-12-06, a hunt:
    `enabled: false` or `allow: [".*"]` in `$WORLDTRACE_REDACT_CONFIG` made it report `0
    secret(s) found`, exit 0, on a file holding a token). Redaction on, the built-in rules,
    the default detect-secrets plugins, and no allow entry that keeps a key of known shape
    (one of `example_secrets`, fresh random keys of every kind); an entry keeping one known
    value (`AKIAIOSFODNN7EXAMPLE`), extra patterns and extra plugins stay."""
    from worldtrace.schemas.redact_rules import DETECT_SECRETS_PLUGINS, example_secrets

    lessened = []
    if not cfg.enabled:
        lessened.append("enabled: false")
    if not cfg.builtin:
        lessened.append("builtin: false")
    missing = tuple(p for p in DETECT_SECRETS_PLUGINS if p not in cfg.detect_secrets)
    if missing:
        lessened.append(f"detect_secrets leaves out {len(missing)} default plugin(s)")
    keys = [v for seed in range(3) for v, _ in example_secrets(seed).values()]
    allow = []
    for entry in cfg.allow:
        rx = re.compile(entry)
        if any(rx.fullmatch(k) for k in keys):
            lessened.append(f"allow {entry!r} keeps keys of known shape")
        else:
            allow.append(entry)
    if not lessened:
        return cfg, []
    cfg = dataclasses.replace(
        cfg,
        enabled=True,
        builtin=True,
        detect_secrets=(*cfg.detect_secrets, *missing),
        allow=tuple(allow),
    )
    return cfg, lessened


COMMANDS = (redact,)
