"""`worldtrace import`: trajectories recorded elsewhere -> raw shards.

One module per format (mapping rules in each module's docstring and docs/importers.md).
Whole-file formats (SWE-agent, mini-swe-agent, ATIF) are detected on the parsed file,
record formats (OpenAI messages and benchmark result runs, ShareGPT, AgentWorldBench)
per record, so a JSONL file is streamed line by line and a broken line costs only
itself. Every record is parsed under its own guard: a record that breaks a parser (too
deep, wrong shape, NaN) is a located problem, and the other records and files go on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldtrace.schemas import Trajectory, validate_dict
from worldtrace.schemas import fields as F
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.redact import redact_trajectory

from . import agentworldbench, atif, mini_swe_agent, openai, sharegpt, swe_agent
from .common import ImportProblem, MissingField, origin_stem
from .reading import jsonl_lines, read_json
from .sink import ImportWriteError, Sink, present_keys

FILE_FORMATS = {m.NAME: m for m in (swe_agent, mini_swe_agent, atif)}
RECORD_FORMATS = {m.NAME: m for m in (agentworldbench, sharegpt, openai)}
FORMATS = (*FILE_FORMATS, *RECORD_FORMATS)
SUFFIXES = (".traj", ".json", ".jsonl")
PROGRESS_EVERY = 1024
"""Records between two progress calls (besides one after every file)."""
PROBLEMS_KEPT = 10_000
"""Problems kept for listing; all are counted (a million-record file with a warning on
every record would otherwise hold them all)."""

__all__ = [
    "FORMATS",
    "ImportConfig",
    "ImportProblem",
    "ImportReport",
    "ImportWriteError",
    "import_paths",
    "parse_file",
]

Progress = Callable[[int, int], None]
"""progress(files_done, records_done), called after each file and every PROGRESS_EVERY records."""


@dataclass
class ImportConfig:
    """One import run."""

    format: str = "auto"
    """Input format; auto detects it per file (and per JSONL line) from content."""
    domain: str | None = None
    """Force the domain instead of inferring it."""
    max_observation_chars: int = 1 << 20
    """Observations longer than this are cut to it (observation.truncated, counted); 0 = no cap."""
    shard_bytes: int = F.SHARD_TARGET_BYTES
    """A shard is closed and a new one started past this size."""


@dataclass
class ImportReport:
    files: int = 0
    imported: Counter[str] = field(default_factory=Counter)
    """Trajectories written, per format."""
    present: Counter[str] = field(default_factory=Counter)
    """Trajectories already in the store from the same file and record, per format."""
    errors: Counter[str] = field(default_factory=Counter)
    """Records not imported, per error kind."""
    warnings: Counter[str] = field(default_factory=Counter)
    """Warnings per kind; `truncated_observation` counts the observations capped."""
    problems: list[ImportProblem] = field(default_factory=list)
    shards: list[Path] = field(default_factory=list)

    def add(self, p: ImportProblem) -> None:
        (self.errors if p.fatal else self.warnings)[p.kind] += 1
        if len(self.problems) < PROBLEMS_KEPT:
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


# (format, origin index, where, Trajectory | ImportProblem)
Item = tuple[str, int, str, Any]


def _guarded(
    path: Path, where: str, index: int, name: str, parse: Callable[[], Any]
) -> Iterator[Item]:
    """The items of one record (or whole-file trajectory); whatever breaks the parser
    becomes this record's problem."""
    try:
        items = list(parse())
    except (MissingField, KeyError) as exc:
        items = [ImportProblem(str(path), where, "missing_field", str(exc).strip("'\""))]
    except RecursionError:
        items = [ImportProblem(str(path), where, "too_deep", "nested too deeply to convert")]
    except Exception as exc:  # a record of a shape no parser expects: it alone is lost
        items = [ImportProblem(str(path), where, "invalid", f"{type(exc).__name__}: {exc}")]
    for item in items:
        yield (
            name,
            index,
            where,
            item.at(str(path), where) if isinstance(item, ImportProblem) else item,
        )


def _record(
    path: Path, d: Any, index: int, where: str, origin: str, cfg: ImportConfig
) -> Iterator[Item]:
    fmt = cfg.format
    if fmt != "auto":
        mod = RECORD_FORMATS.get(fmt)
    else:
        mod = next((m for m in RECORD_FORMATS.values() if m.detect_record(d)), None)
    if mod is None:
        msg = "not a record of any known format" if fmt == "auto" else f"not a {fmt} record"
        yield "?", index, where, ImportProblem(str(path), where, "unrecognized", msg)
        return
    if isinstance(d, dict) and d.get("id") is not None:
        origin = str(d["id"])
    yield from _guarded(
        path, where, index, mod.NAME, lambda: mod.parse_record(d, origin, cfg.domain)
    )


def _items(path: Path, cfg: ImportConfig) -> Iterator[Item]:
    """Everything in one file: (format, origin index, where, Trajectory | ImportProblem)."""
    stem = origin_stem(path)
    if path.name.endswith(".jsonl") and cfg.format not in FILE_FORMATS:
        for n, d in jsonl_lines(path):
            if isinstance(d, ImportProblem):
                yield "?", max(n - 1, 0), d.where, d
            else:
                yield from _record(path, d, n - 1, f"line {n}", f"{stem}:{n}", cfg)
        return
    data = read_json(path)
    if isinstance(data, ImportProblem):
        yield "?", 0, data.where, data
        return
    if cfg.format != "auto":
        mod = FILE_FORMATS.get(cfg.format)
    else:
        mod = next((m for m in FILE_FORMATS.values() if m.detect(path, data)), None)
    if mod is not None:
        args = (path, data, cfg.domain) if mod is atif else (path, data)
        yield from _guarded(path, "", 0, mod.NAME, lambda: mod.parse(*args))
        return
    many = isinstance(data, list) and bool(data) and not openai.detect_record(data)
    for n, d in enumerate(data if many else [data]):
        where, origin = (f"record {n}", f"{stem}:{n}") if many else ("", stem)
        yield from _record(path, d, n, where, origin, cfg)


def _provenance(t: Trajectory, path: str, index: int) -> Trajectory:
    t.source.origin_path, t.source.origin_index = path, index
    return t


def parse_file(
    path: Path, fmt: str = "auto", domain: str | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield (format, Trajectory | ImportProblem) for everything in one file (no caps)."""
    origin_path = str(Path(path).resolve())
    for name, index, _, item in _items(Path(path), ImportConfig(format=fmt, domain=domain)):
        if isinstance(item, Trajectory):
            item = _provenance(item, origin_path, index).with_id()
        yield name, item


def cap_observations(t: Trajectory, limit: int) -> int:
    """Cut observations longer than `limit` characters; how many were cut."""
    cut = 0
    for turn in t.turns if limit > 0 else ():
        o = turn.observation
        if len(o.text) > limit:
            o.text, o.truncated = o.text[:limit], True
            cut += 1
    return cut


class _Run:
    """One import: the report, the sink, what is present; `accept` takes one trajectory."""

    def __init__(self, cfg: ImportConfig, output: Path, files: list[Path]):
        self.cfg, self.report = cfg, ImportReport()
        self.sink = Sink(output, cfg.shard_bytes)
        self.origins = {f: str(f.resolve()) for f in files}
        self.present = present_keys(output, self.origins.values())

    def accept(self, path: Path, name: str, index: int, where: str, t: Trajectory) -> None:
        report = self.report
        origin_path = self.origins[path]
        loc = where or t.source.origin_id or ""
        if not t.turns:
            report.add(
                ImportProblem(str(path), loc, "empty", "no (action, observation) pair found")
            )
            return
        _provenance(t, origin_path, index)
        t = redact_trajectory(t)  # security: secrets in foreign files never reach a shard
        cut = cap_observations(t, self.cfg.max_observation_chars)
        d = t.to_dict()  # once: hashing, validation and Arrow all read this dict
        d["trajectory_id"] = tid = trajectory_id(d)
        key = (tid, origin_path, index)
        if key in self.present:
            report.present[name] += 1
            return
        problems = validate_dict(d, loc, check_id=False)
        if problems:
            msg = "; ".join(f"{p.field}: {p.message}" for p in problems)
            report.add(ImportProblem(str(path), loc, "invalid", msg))
            return
        self.sink.add(d)
        self.present.add(key)
        report.imported[name] += 1
        if cut:
            report.warnings["truncated_observation"] += cut


def import_paths(
    paths: Iterable[str | Path],
    output: str | Path,
    config: ImportConfig | None = None,
    *,
    progress: Progress | None = None,
) -> ImportReport:
    """Import every file under `paths` into raw shards under `output`.

    Raises ImportWriteError when shards cannot be written (shards published before stay).
    """
    cfg = config or ImportConfig()
    if cfg.format != "auto" and cfg.format not in FORMATS:
        raise ValueError(f"unknown format {cfg.format!r} (known: {', '.join(FORMATS)})")
    files = input_files(paths)
    run = _Run(cfg, Path(output), files)
    report, records = run.report, 0
    try:
        for done, path in enumerate(files, 1):
            report.files += 1
            for name, index, where, item in _items(path, cfg):
                if isinstance(item, ImportProblem):
                    report.add(item)
                    records += item.fatal
                    continue
                records += 1
                try:
                    run.accept(path, name, index, where, item)
                except RecursionError:
                    report.add(
                        ImportProblem(str(path), where, "too_deep", "nested too deeply to convert")
                    )
                if progress and records % PROGRESS_EVERY == 0:
                    progress(done - 1, records)
            if progress:
                progress(done, records)
        report.shards = run.sink.close()
    except BaseException:
        run.sink.abort()
        raise
    return report
