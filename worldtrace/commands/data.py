"""Data coming in: `validate` checks records, `import` converts foreign trajectories."""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

import click

from worldtrace.options import ConfigCommand, RegistryChoice, options_from

from . import EXIT_PROBLEMS, progress_every_option, show_option, store

VALIDATE_EPILOG = """\b
Example:
  worldtrace validate worldtrace-data/raw/          (every shard under it)
  worldtrace validate records.jsonl -q || echo "problems above"
"""


@click.command(epilog=VALIDATE_EPILOG)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--quiet", "-q", is_flag=True, help="Print only the problems.")
def validate(paths: tuple[str, ...], quiet: bool) -> None:
    """Validate trajectory shards (Parquet) or JSONL of records; exit 1 if anything is invalid."""
    from worldtrace.output import LOWER_CASE, not_read_line
    from worldtrace.schemas.store import INPUT_SUFFIXES, Unread, check_files, input_files

    files, passed, skipped = [], _PassedOver(), []
    for p in paths:  # a walk passes over the files worldtrace writes beside trajectories
        found = input_files([p], skipped)
        files += passed.sift(found) if Path(p).is_dir() else found
    if passed and not quiet:
        click.echo(passed.line(), err=True)
    if skipped:  # said even with -q: records no check looked at
        click.echo(not_read_line("validate", skipped, paths, INPUT_SUFFIXES, LOWER_CASE), err=True)
    if not files and not passed:  # passing over a store's own files is not an error
        click.echo(f"no Parquet or JSONL files found under {', '.join(paths)}", err=True)
        sys.exit(EXIT_PROBLEMS)
    records = problems = unread = 0
    for f in files:
        single = _single(f)
        if single:  # not records to check, but one line saying what the file is
            problems += 1
            click.echo(single)
            continue
        try:
            for is_record, found in check_files([f], _foreign_line):
                records += is_record
                for p in found:
                    problems += 1
                    unread += len(p.rows) if isinstance(p, Unread) else 0
                    click.echo(str(p))
        except RecursionError:  # one file nested too deep to parse stops only itself
            problems += 1
            click.echo(
                f"{f}: <json>: nested too deeply to parse; the rest of the file is not checked"
            )
    if not quiet:  # records that did not read are said apart: they were not checked
        lost = f", {unread} record(s) not read" if unread else ""
        click.echo(
            f"{len(files)} file(s), {records} record(s), {problems} problem(s){lost}", err=True
        )
    sys.exit(EXIT_PROBLEMS if problems else 0)


def _single(f: Path) -> str | None:
    """The one line for a file that holds a foreign session or one JSON document
    (`importers.one_session`, `one_document`). A Parquet shard is neither: the importers
    and the redaction they load (~0.3 s of imports) are left out of a run that checks
    shards only."""
    from worldtrace.schemas import fields as F

    if f.name.endswith(F.SHARD_SUFFIX):
        return None
    from worldtrace.collectors.importers import one_document, one_session

    return one_session(f) or one_document(f)


def _foreign_line(f: Path, where: str, item: Any) -> str | None:
    """A JSONL line in a record format `import` reads: one line naming that import (as
    `one_document` says of a .json file), not a schema problem per field."""
    from worldtrace.schemas import fields as F

    if not f.name.lower().endswith(F.LINE_SUFFIXES) or not (fmt := _import_format(item)):
        return None
    return f"{where}: a record in the {fmt} format, not a worldtrace record: import it with `worldtrace import {f}`"


def _import_format(d: Any) -> str | None:
    """The record format `import --format auto` takes line `d` for (its `detect_record`s,
    which `detect_format` asks of a .json record); None for a record that is ours."""
    from worldtrace.collectors.importers import RECORD_FORMATS
    from worldtrace.schemas import fields as F

    if isinstance(d, dict) and d.get("schema_version") == F.SCHEMA_VERSION:
        return None  # ours: its problems are its own
    return next((m.NAME for m in RECORD_FORMATS.values() if m.detect_record(d)), None)


class _PassedOver:
    """The files a walk passes over, which hold no trajectories, by what holds them:

    - a store (a directory holding `raw/` or `processed/`) wherever the walk meets one (the
      directory given, one it is in, one inside it): its manifests, the processed tables
      other than `trajectories`, the run's index, its exports;
    - a processing run's output outside a store (`processed/` copied away), told by its
      manifest: the manifest and the tables other than `trajectories`;
    - an export written outside a store (`export -o DIR`), told by its content: a
      manifest worldtrace wrote (`importers.our_manifest`, as `import` tells them) and
      the shards an export manifest lists beside it.

    A file of such a name that is not one (a manifest of another program, a shard the
    manifest does not list) is checked."""

    STORE, PROCESSED, EXPORT = "store", "processed", "export"

    def __init__(self) -> None:
        self.held: dict[str, dict[Path, int]] = {
            self.STORE: {},
            self.PROCESSED: {},
            self.EXPORT: {},
        }
        """kind -> the directory that holds them (as walked) -> files passed over."""
        self._roots: dict[Path, Path | None] = {}
        self._runs: dict[Path, Path | None] = {}
        self._listed: dict[Path, frozenset[str]] = {}

    def __len__(self) -> int:
        return sum(n for held in self.held.values() for n in held.values())

    def sift(self, found: list[Path]) -> list[Path]:
        """`found` (a directory's walk) less the files passed over, which are counted."""
        kept = []
        for f in found:
            kind, holder = self._holder(f)
            if kind is None:
                kept.append(f)
            else:
                self.held[kind][holder] = self.held[kind].get(holder, 0) + 1
        return kept

    def _holder(self, f: Path) -> tuple[str | None, Path]:
        """Judged by where the file is and by the manifests beside it and above it, not
        by the file's target: a symlink's target may be elsewhere, or gone."""
        from worldtrace.schemas import fields as F

        where = f.parent.resolve()
        root = self._nearest(where, self._roots, _is_store)
        if root is not None:
            rel = (where / f.name).relative_to(root).parts
            if f.name == F.PROCESS_MANIFEST or rel[0] == F.EXPORT_DIR:
                return self.STORE, root
            if rel[0] == F.PROCESSED_DIR and _not_trajectories(rel[1:]):
                return self.STORE, root
            return None, f
        run = self._nearest(where, self._runs, _is_processed)
        if run is not None and _not_trajectories(rel := (where / f.name).relative_to(run).parts):
            return self.PROCESSED, f.parents[len(rel) - 1]  # as walked, for the line
        ours = f.name == F.PROCESS_MANIFEST and _our_manifest(f) is not None
        if ours or f.name in self._listed_in(where):  # an export's manifest, or its shard
            return self.EXPORT, f.parent
        return None, f

    @staticmethod
    def _nearest(d: Path, seen: dict[Path, Path | None], test) -> Path | None:
        """The nearest of `d` and its parents that passes `test` (cached in `seen`)."""
        if d not in seen:
            if test(d):
                seen[d] = d
            else:
                seen[d] = None if d.parent == d else _PassedOver._nearest(d.parent, seen, test)
        return seen[d]

    def _listed_in(self, d: Path) -> frozenset[str]:
        """The shards the export manifest in `d` lists (none when it has none of ours)."""
        from worldtrace.schemas import fields as F

        if d not in self._listed:
            m = _our_manifest(d / F.PROCESS_MANIFEST) or {}
            shards = m.get("shards") if "format" in m else None
            self._listed[d] = frozenset(
                s["path"]
                for s in (shards if isinstance(shards, list) else [])
                if isinstance(s, dict) and isinstance(s.get("path"), str)
            )
        return self._listed[d]

    def line(self) -> str:
        """One line: how many files of what were passed over, and how to check one."""
        whose, what = [], []
        if stores := self.held[self.STORE]:
            whose.append("the store" if len(stores) == 1 else f"{len(stores)} stores")
            what.append("manifests, processed turns, clusters and rejects, exports")
        if runs := self.held[self.PROCESSED]:
            whose.append(
                "processed data" if len(runs) == 1 else f"{len(runs)} runs' processed data"
            )
            what.append(
                f"a processing run's manifest and its tables other than trajectories: "
                f"{', '.join(map(str, runs))}"
            )
        if exports := _tops(self.held[self.EXPORT]):
            one = len(exports) == 1
            whose.append("an export" if one else f"{len(exports)} exports")
            what.append(
                f"manifests and the shards they list: {', '.join(map(str, exports))}; "
                "`worldtrace export --verify DIR` checks an export"
            )
        return (
            f"passed over {len(self)} file(s) of {' and '.join(whose)} that hold no "
            f"trajectories ({'; '.join(what)}); name one to check it"
        )


def _is_store(d: Path) -> bool:
    """A store's root: it holds `raw/` or `processed/`."""
    from worldtrace.schemas import fields as F

    return (d / F.RAW_DIR).is_dir() or (d / F.PROCESSED_DIR).is_dir()


def _is_processed(d: Path) -> bool:
    """A processing run's output: it holds the run's manifest (told by its content)."""
    from worldtrace.schemas import fields as F

    return "run_id" in (_our_manifest(d / F.PROCESS_MANIFEST) or {})


def _not_trajectories(rel: tuple[str, ...]) -> bool:
    """Whether a file at `rel` inside a processed directory is not in its `trajectories`
    table: the run's manifest and index, the turns, clusters and rejects tables."""
    return len(rel) < 2 or rel[0] != "trajectories"


def _our_manifest(path: Path) -> dict | None:
    """The manifest worldtrace wrote at `path` (an export's, with `format`, or a
    processing run's, with `run_id`), told by its content as `import` tells it; None for
    any other file."""
    from worldtrace.collectors.importers import our_manifest
    from worldtrace.schemas.validate import parse_json

    if not path.is_file() or not our_manifest(path):
        return None
    try:
        return parse_json(path.read_bytes().decode())
    except (OSError, ValueError):
        return None


def _tops(dirs: dict[Path, int]) -> list[Path]:
    """The directories of `dirs` that are in none of the others (an export, not its parts)."""
    return [d for d in dirs if not any(other in d.parents for other in dirs)]


IMPORT_EPILOG = """\b
Example:
  worldtrace import --create ~/runs/swe-agent/          (formats detected per file)
  worldtrace import --format atif --domain terminal trials/*.json --strict
"""


@click.command("import", cls=ConfigCommand, epilog=IMPORT_EPILOG)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=RegistryChoice("worldtrace.collectors.importers:FORMATS", first=("auto",)),
    help="Input format; auto detects it per file from content.",
)
@click.option(
    "--domain",
    type=RegistryChoice("worldtrace.schemas.fields:DOMAINS"),
    help="Force the domain instead of inferring it.",
)
@options_from(
    "worldtrace.collectors.importers:ImportConfig", include=["max_observation_chars", "workers"]
)
@click.option("--strict", is_flag=True, help="Exit 1 if any record could not be imported.")
@show_option(20, "Problems listed, errors first (all are counted).")
@progress_every_option
@click.pass_context
def import_(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    domain: str | None,
    max_observation_chars: int,
    workers: int,
    strict: bool,
    show: int,
    progress_every: float,
) -> None:
    """Import trajectories recorded elsewhere into raw shards (reasoning kept apart, never
    in the action): SWE-agent .traj, mini-swe-agent .traj.json, Harbor ATIF, OpenAI chat
    messages with tool calls or Anthropic Messages with tool_use blocks (format openai;
    also benchmark result files of runs with `traj`), ShareGPT with function calls or
    Hermes <tool_call> blocks, OpenHands event streams (saved trajectories, GUI downloads,
    eval output.jsonl, a file store's sessions: one trajectory each), OpenHands V1
    conversations (software-agent-sdk: <conversation>/base_state.json and
    events/event-*.json, one trajectory each), AgentWorldBench JSONL, Claude Code session
    transcripts (~/.claude/projects/*/<session>.jsonl: one trajectory per session), Codex
    CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl, and the TypeScript codex-cli's
    rollout-*.json: one trajectory per rollout), Gemini
    CLI sessions (~/.gemini/tmp/*/chats/session-*.json or .jsonl: one trajectory per
    session), and worldtrace's own records (JSONL that `worldtrace validate` passes; not
    from a file under the store's raw/, which `process` reads as it is). Directories are
    walked; formats are detected per file (and per JSONL line). Importing a file again adds
    only what is not there yet (same content from the same file and record); a record there
    imported with another --format, --domain or --max-observation-chars is not added again,
    and said (each record keeps its import options in metadata `import_options`)."""
    from worldtrace.errors import stop_says

    stop_says(lambda: "nothing was imported")  # until its block says what it left
    from worldtrace.collectors.importers import (
        ImportBusy,
        ImportConfig,
        ImportWorkerLost,
        ImportWriteError,
        import_paths,
        input_files,
    )
    from worldtrace.errors import interrupts
    from worldtrace.output import print_import_report
    from worldtrace.progress import StepProgress
    from worldtrace.schemas.config import SettingError
    from worldtrace.schemas.store import shard_files

    try:
        config = ImportConfig(
            format=fmt, domain=domain, max_observation_chars=max_observation_chars, workers=workers
        )
    except SettingError as exc:  # a value out of range: the option as typed
        raise click.BadParameter(exc.problem, param_hint=f"--{exc.key.replace('_', '-')}") from None
    skipped: list[Path] = []
    files = len(input_files(paths, skipped))
    if not files:  # the reason alone: no "0 file(s) -> DEST" line, no empty table
        for line in _not_read(paths, skipped, files):
            click.echo(line, err=True)
        sys.exit(EXIT_PROBLEMS)
    raw = store(ctx, create=True).raw
    dest = raw / "import"
    before = set(shard_files(dest))
    try:
        with (
            # SIGTERM keeps its default (the process ends at once; its workers with it,
            # `importers._pool`; the shard in progress is a hidden temp file the next
            # import sweeps). Ctrl-C stops the workers first (`importers._stop_workers`)
            interrupts(lambda: _import_kept(dest, before), signals=(signal.SIGINT,)),
            StepProgress("import", files, "file(s)", every=progress_every) as progress,
        ):
            report = import_paths(paths, dest, config, progress=progress, process_reads=raw)
    except (ImportWriteError, ImportWorkerLost, ImportBusy) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_PROBLEMS)
    print_import_report(report, dest, show)
    for line in _not_read(paths, report.skipped, report.files):
        click.echo(line, err=True)
    total = sum(report.imported.values()) + sum(report.present.values())
    if (strict and report.errors) or (not total and report.errors) or not report.files:
        sys.exit(EXIT_PROBLEMS)


def _import_kept(dest: Path, before: set[Path]) -> str:
    """What an interrupted import left: the shards it published before the stop (each
    whole: the one in progress was a hidden temp file, removed), or nothing."""
    import pyarrow.parquet as pq

    from worldtrace.schemas.store import shard_files

    new = sorted(set(shard_files(dest)) - before)
    if not new:
        return (
            f"nothing was imported: {dest} is as it was (no shard is half-written); run the "
            "same import again"
        )
    rows = 0
    for p in new:
        with contextlib.suppress(OSError, ValueError):
            rows += pq.ParquetFile(p).metadata.num_rows
    return (
        f"{len(new)} shard(s) of {rows} record(s) published before the stop are kept under "
        f"{dest} (none is half-written); importing the same files again adds only what is "
        "missing"
    )


SHOWN_SKIPPED = 5


def _not_read(paths: tuple[str, ...], skipped: list, files: int) -> list[str]:
    """What the walk passed over (a few names; compressed ones said so) and, when nothing
    was read, why: a run must not end on an empty table alone."""
    from worldtrace.collectors.importers import SUFFIXES, our_manifest
    from worldtrace.output import not_read_line

    kinds = sorted(SUFFIXES)
    out, where = [], ", ".join(paths)
    ours = {f for f in skipped if our_manifest(f)}
    if ours:  # an export imported back: its manifests hold no trajectories
        named = sorted(ours)
        more = f" and {len(named) - SHOWN_SKIPPED} more" if len(named) > SHOWN_SKIPPED else ""
        out.append(
            f"import: passed over {len(named)} manifest(s) worldtrace wrote (an export's or a "
            f"processing run's; they hold no trajectories): "
            f"{', '.join(map(str, named[:SHOWN_SKIPPED]))}{more}"
        )
        skipped = [f for f in skipped if f not in ours]
    if skipped:
        out.append(not_read_line("import", skipped, paths, kinds))
    if not files:
        hold = "holds" if len(paths) == 1 else "hold"
        why = f"import: no file to import: {where} {hold} no {', '.join(kinds[:-1])} or {kinds[-1]} file"
        out.append(why + (f" ({len(skipped)} other file(s), listed above)" if skipped else ""))
    return out


COMMANDS = (validate, import_)
