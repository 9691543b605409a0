"""`worldtrace import`: trajectories recorded elsewhere -> raw shards.

One module per format (mapping rules in each module's docstring and docs/importers.md).
Whole-file formats (SWE-agent, mini-swe-agent, ATIF) are detected on the parsed file,
record formats (OpenAI messages, ShareGPT, AgentWorldBench) per record, so a JSONL file
is streamed line by line and a broken line costs only itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldtrace.schemas import ShardWriter, Trajectory, validate_dict
from worldtrace.schemas.redact import redact_trajectory

from . import agentworldbench, atif, mini_swe_agent, openai, sharegpt, swe_agent
from .common import ImportProblem, MissingField, origin_stem

FILE_FORMATS = {m.NAME: m for m in (swe_agent, mini_swe_agent, atif)}
RECORD_FORMATS = {m.NAME: m for m in (agentworldbench, sharegpt, openai)}
FORMATS = (*FILE_FORMATS, *RECORD_FORMATS)
SUFFIXES = (".traj", ".json", ".jsonl")


@dataclass
class ImportReport:
    files: int = 0
    imported: Counter[str] = field(default_factory=Counter)
    """Trajectories written, per format."""
    errors: Counter[str] = field(default_factory=Counter)
    """Records not imported, per error kind."""
    warnings: Counter[str] = field(default_factory=Counter)
    problems: list[ImportProblem] = field(default_factory=list)
    shards: list[Path] = field(default_factory=list)

    def add(self, p: ImportProblem) -> None:
        (self.errors if p.fatal else self.warnings)[p.kind] += 1
        self.problems.append(p)


def input_files(paths: Iterable[str | Path]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and f.name.endswith(SUFFIXES) and not f.name.startswith(".")
            )
        else:
            out.append(p)
    return out


def _record_format(d: Any, fmt: str) -> Any:
    if fmt != "auto":
        return RECORD_FORMATS.get(fmt)
    return next((m for m in RECORD_FORMATS.values() if m.detect_record(d)), None)


def _records(
    path: Path, d: Any, where: str, origin: str, fmt: str, domain: str | None
) -> Iterator[tuple[str, Any]]:
    mod = _record_format(d, fmt)
    if mod is None:
        yield (
            "?",
            ImportProblem(
                str(path),
                where,
                "unrecognized",
                "not a record of any known format" if fmt == "auto" else f"not a {fmt} record",
            ),
        )
        return
    if isinstance(d, dict) and d.get("id") is not None:
        origin = str(d["id"])
    try:
        for item in mod.parse_record(d, origin, domain):
            yield mod.NAME, item
    except (MissingField, KeyError, TypeError, AttributeError) as exc:
        yield (
            mod.NAME,
            ImportProblem(str(path), where, "missing_field", f"{type(exc).__name__}: {exc}"),
        )


def parse_file(
    path: Path, fmt: str = "auto", domain: str | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield (format, Trajectory | ImportProblem) for everything in one file."""
    if path.name.endswith(".jsonl") and fmt not in FILE_FORMATS:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield (
                        "?",
                        ImportProblem(
                            str(path),
                            f"line {n}",
                            "invalid_json",
                            f"{exc.msg} at column {exc.colno}",
                        ),
                    )
                    continue
                yield from _records(path, d, f"line {n}", f"{origin_stem(path)}:{n}", fmt, domain)
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        yield (
            "?",
            ImportProblem(
                str(path), f"line {exc.lineno}", "invalid_json", f"{exc.msg} at column {exc.colno}"
            ),
        )
        return
    mod = (
        FILE_FORMATS.get(fmt)
        if fmt != "auto"
        else next((m for m in FILE_FORMATS.values() if m.detect(path, data)), None)
    )
    if mod is not None:
        try:
            items = list(mod.parse(path, data, domain) if mod is atif else mod.parse(path, data))
        except (KeyError, TypeError, AttributeError) as exc:
            items = [ImportProblem(str(path), "", "missing_field", f"{type(exc).__name__}: {exc}")]
        for item in items:
            yield mod.NAME, item
        return
    records = data if isinstance(data, list) and data and not openai.detect_record(data) else [data]
    for n, d in enumerate(records):
        where = f"record {n}" if len(records) > 1 else ""
        origin = f"{origin_stem(path)}:{n}" if len(records) > 1 else origin_stem(path)
        yield from _records(path, d, where, origin, fmt, domain)


def import_paths(
    paths: Iterable[str | Path], output: str | Path, fmt: str = "auto", domain: str | None = None
) -> ImportReport:
    """Import every file under `paths` into raw shards under `output`."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    report = ImportReport()
    with ShardWriter(output, prefix="import") as writer:
        for path in input_files(paths):
            report.files += 1
            for name, item in parse_file(path, fmt, domain):
                if isinstance(item, ImportProblem):
                    report.add(item)
                    continue
                _accept(report, writer, path, name, item)
    report.shards = list(writer.paths)
    return report


def _accept(
    report: ImportReport, writer: ShardWriter, path: Path, name: str, t: Trajectory
) -> None:
    t = redact_trajectory(t)  # security: secrets in foreign files never reach a shard
    where = t.source.origin_id or ""
    if not t.turns:
        report.add(ImportProblem(str(path), where, "empty", "no (action, observation) pair found"))
        return
    problems = validate_dict(t.to_dict(), where)
    if problems:
        report.add(
            ImportProblem(
                str(path), where, "invalid", "; ".join(f"{p.field}: {p.message}" for p in problems)
            )
        )
        return
    writer.write(t)
    report.imported[name] += 1
