"""`worldtrace import`: trajectories recorded elsewhere -> raw shards.

One module per format (mapping rules in each module's docstring and docs/importers.md).
Whole-file formats (SWE-agent, mini-swe-agent, ATIF) are detected on the parsed file,
record formats (OpenAI messages and benchmark result runs, ShareGPT, AgentWorldBench)
per record, so a JSONL file is streamed line by line and a broken line costs only
itself. A JSONL file of Claude Code events (a session) is told by its first lines and
read whole, one event a line (`claude_code`), and so are a Codex rollout (`codex`) and a
Gemini CLI session (`gemini_cli`; its older layout, one JSON document, is a whole-file
format); the files Claude Code keeps beside its sessions (a subagent's sidecar, a session
directory's other files, sessions-index.json) are its too, whatever their names
(`claude_code.owns`). worldtrace's own records (`native`) are told before any foreign
format and kept as given.
Every record is parsed under its own guard: a record that breaks a parser (too deep,
wrong shape, NaN) is a located problem, and the other records and files go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import socket
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from worldtrace.schemas import Trajectory, validate_dict
from worldtrace.schemas import fields as F
from worldtrace.schemas.arrow import TRAJECTORY_SCHEMA
from worldtrace.schemas.forkpool import fork_pool, result_of, submit
from worldtrace.schemas.forkpool import stop_workers as _stop_workers
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.redact import redact_record, redactor
from worldtrace.schemas.tempfiles import first_line, lock_holder, try_lock
from worldtrace.schemas.validate import LONE_SURROGATE, parse_json, suspects

from . import (
    agentworldbench,
    atif,
    claude_code,
    codex,
    gemini_cli,
    mini_swe_agent,
    native,
    openai,
    openhands,
    openhands_v1,
    reading,
    sharegpt,
    swe_agent,
)
from .common import (
    Document,
    ImportProblem,
    InvalidField,
    MissingField,
    file_cached,
    origin_path_of,
    origin_stem,
    plural,
    shown,
    too_deep_to_convert,
)
from .reading import (
    LOOKS_LIKE_JSONL,
    NOT_ONE_DOCUMENT,
    SNIFF_BYTES,
    TRUNCATED_FILE,
    cut_array,
    document_lines,
    jsonl_text_lines,
    parse_line,
    parses,
    read_document,
    surrogate_escapes,
)
from .sink import IMPORT_OPTIONS, Held, ImportWriteError, Sink, labels_of, present_keys, relabelled

# OpenHands is both: an event list is a whole file, an eval output a record. It is
# detected first: its test is strict (events with `action` xor `observation`), while
# SWE-agent takes any `trajectory` list (the GUI's download is `{trajectory: [...]}`).
# An OpenHands V1 (software-agent-sdk) conversation is told by its layout
# (`events/event-<index>-<id>.json` holding an event with a `kind`, base_state.json), which
# no other format's files have.
FILE_FORMATS = {
    m.NAME: m
    for m in (
        openhands,
        openhands_v1,
        swe_agent,
        mini_swe_agent,
        atif,
        gemini_cli.DOCUMENT,
        codex.DOCUMENT,
    )
}
RECORD_FORMATS = {m.NAME: m for m in (agentworldbench, sharegpt, openai, openhands)}
assert tuple(RECORD_FORMATS) == F.LINE_RECORD_FORMATS, "F.LINE_RECORD_FORMATS names them"
SESSION_FORMATS = {m.NAME: m for m in (claude_code, codex, gemini_cli)}
"""JSONL files read whole, one event a line (detected on their first lines, per file)."""
assert tuple(SESSION_FORMATS) == F.SESSION_FORMATS, "F.SESSION_FORMATS names them"
FORMATS = tuple(dict.fromkeys((*FILE_FORMATS, *RECORD_FORMATS, *SESSION_FORMATS, native.NAME)))
"""`native`: worldtrace's own records, told by their `schema_version` before any foreign
format is tried (a JSONL line, a .json record or list of records)."""
SUFFIXES = (".traj", ".json", ".jsonl", ".ndjson")
"""The files a walk reads, whatever the case of their names (`UPPER.JSON`); `.ndjson` is
JSONL. A walk names the others it passes over (`ImportReport.skipped`)."""
LINE_SUFFIXES = F.LINE_SUFFIXES
COMPRESSED = F.COMPRESSED_SUFFIXES
PROGRESS_EVERY = 1024
"""Records between two progress calls (besides one after every file)."""
BATCH_LINES = 128
"""JSONL lines a worker process converts per task: ~0.15 s of work, so the hand-offs
cost little beside it and the shard order stays the file's."""
PARALLEL_BYTES_PER_WORKER = 4 << 20
"""Input per worker process (`import_workers`; `ImportConfig.workers` says 4 MB): below
two workers' worth the records are converted in this process. Measured on 2 cores
(docs/importers.md#worker-processes), 2 workers vs this process alone: tau-bench-shaped
OpenAI records of 7.6 KB 1.0-1.24x at 4.6 MB, 1.2-1.4x at 8.4 MB, 1.34x at 22.8 MB;
600 SWE-agent runs (16 MB) 1.36-1.45x. This process reads the lines, hands them over
and writes the shards meanwhile."""
PROBLEMS_KEPT = 10_000
"""Problems kept for listing; all are counted (a million-record file with a warning on
every record would otherwise hold them all)."""

__all__ = [
    "FORMATS",
    "ImportBusy",
    "ImportConfig",
    "ImportProblem",
    "ImportReport",
    "ImportWorkerLost",
    "ImportWriteError",
    "detect_format",
    "import_paths",
    "one_document",
    "one_session",
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
    workers: int = 0
    """Processes converting the records (parse, map, redact, validate; a JSONL file's
    lines in batches, any other file whole): 1 = this one; 0 = auto, one per 4 MB of
    input, at most one per core; at most 4 per core (`config.WORKERS_PER_CORE`). Forked
    from this process, so only while no other thread runs in it. The shards are the same
    either way."""

    def __post_init__(self) -> None:
        """Ranges: a negative cap was no cap, a negative worker count auto, in silence."""
        from worldtrace.schemas.config import check, max_workers

        check(self, "max_observation_chars", self.max_observation_chars >= 0,
              "an integer >= 0 (0: no cap)")  # fmt: skip
        most = max_workers()
        check(self, "workers", 0 <= self.workers <= most, f"0 (auto) to {most} (4 per core)")
        check(self, "shard_bytes", self.shard_bytes > 0, "a positive integer")


CONTENT_OPTIONS = ("format", "domain", "max_observation_chars")
"""The `ImportConfig` fields that shape what is stored (how the file is read, the domain,
the cap): those given other values than the defaults are recorded in each imported
record's metadata (`options_json`), so that a re-import with other values is told from a
changed file. The others (workers, shard size) change no record."""


def options_json(cfg: ImportConfig) -> str | None:
    """The `CONTENT_OPTIONS` of `cfg` that are not the defaults, as the JSON a record's
    metadata holds (`IMPORT_OPTIONS`: `{"max_observation_chars": 50}`); None when all are
    (no key: the defaults, as for a record imported before options were recorded)."""
    default = ImportConfig()
    given = {k: getattr(cfg, k) for k in CONTENT_OPTIONS if getattr(cfg, k) != getattr(default, k)}  # fmt: skip
    return json.dumps(given, sort_keys=True) if given else None


def _config_of(options: str | None) -> ImportConfig | None:
    """The config a record's `IMPORT_OPTIONS` says it was imported with (None: the
    defaults); None when it is not one this version can run (a format since renamed)."""
    try:
        given = parse_json(options) if options is not None else {}
        cfg = ImportConfig(**{k: given[k] for k in CONTENT_OPTIONS if k in given})
    except (ValueError, TypeError):
        return None
    return cfg if cfg.format == "auto" or cfg.format in FORMATS else None


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
    workers: int = 1
    """Processes that converted the records (`ImportConfig.workers`)."""
    skipped: list[Path] = field(default_factory=list)
    """Files of a walked directory not read: not of a suffix in `SUFFIXES`."""

    def add(self, p: ImportProblem) -> None:
        (self.errors if p.fatal else self.warnings)[p.kind] += 1
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(p)


def input_files(paths: Iterable[str | Path], skipped: list[Path] | None = None) -> list[Path]:
    """The files to read: directories walked (`walk`: links to directories followed,
    hidden files and directories passed over), less the files Claude Code keeps beside its
    sessions that hold no conversation (`claude_code.passed_over`); a file of an OpenHands
    file-store session (or of an OpenHands V1 conversation) named on its own stands for
    its session, once (read at the file that imports it, `openhands.session_entry`,
    `openhands_v1.session_entry`: its other files add nothing by themselves), and so does
    a Claude Code subagent's sidecar for its transcript, another file of a Claude Code
    session's directory for the session's transcript (`claude_code.entry`). A walked V1
    conversation is read at its entry alone: its event files are read once, by the
    conversation (`openhands_v1._load` reports those it cannot read), not once more each
    as a file of the walk (3,000 events: 0.57 -> 0.29 s; 0.25 s named at one of its
    files). A file named twice, or again through a link, is read once, at its first name:
    read again, its records were present but its warnings said twice. Walked files of
    other suffixes (not hidden ones) and worldtrace's own manifests (`our_manifest`) are
    added to `skipped`, to be said."""
    out: list[Path] = []
    sessions: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(walk(p))
            passed = {f for f in found if not _readable_suffix(f) or our_manifest(f)}
            walked = [f for f in found if f not in passed and not claude_code.passed_over(f)]
            if skipped is not None:
                skipped.extend(f for f in found if f in passed)
            for f, entry in zip(walked, openhands_v1.session_entries(walked), strict=True):
                if entry is None:  # a V1 conversation's files: read once, at its entry
                    out.append(f)
                elif entry not in sessions:
                    sessions.add(entry)
                    out.append(entry)
        elif (
            entry := openhands.session_entry(p)
            or openhands_v1.session_entry(p)
            or claude_code.entry(p)
        ) is None:
            out.append(p)
        elif entry not in sessions:
            sessions.add(entry)
            out.append(entry)
    return _once(out)


def walk(root: Path) -> Iterator[Path]:
    """The files under directory `root`, as a walk reads them: links to directories are
    followed (`rglob` passed over them: a run kept under a link was dropped in silence),
    each real directory once (a link back up ends there: no loop; a directory reached by
    two links is read at the first name, in name order); hidden files and directories
    (a name starting with `.`: `.ipynb_checkpoints/`, `.git/`) are passed over, below
    `root` (a hidden directory named on the command line is read)."""
    seen: set[tuple[int, int]] = set()
    for here, dirs, files in os.walk(root, followlinks=True):
        try:
            st = os.stat(here)
        except OSError:  # gone, or a link to nothing: nothing under it to read
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            f = Path(here) / name
            if not name.startswith(".") and f.is_file():
                yield f


def _once(files: list[Path]) -> list[Path]:
    """`files` without those another of them is (the same resolved path: its origin path)."""
    seen: set[Path] = set()
    out = []
    for f in files:
        if (real := f.resolve()) not in seen:
            seen.add(real)
            out.append(f)
    return out


MANIFEST_BYTES = 1 << 20
"""The most a manifest of ours takes (an export's or a processing run's: a few KB)."""


def our_manifest(path: Path) -> bool:
    """Whether `path` is a manifest worldtrace wrote beside what it holds (an export's
    or one of its parts', a processing run's), told by its content: a walk of an export
    imported back (AgentWorldBench JSONL) named each an unrecognized record. A foreign
    file of that name is read as any other."""
    if path.name != F.PROCESS_MANIFEST:
        return False
    try:
        if path.stat().st_size > MANIFEST_BYTES:
            return False
        data = parse_json(path.read_bytes().decode())
    except (OSError, ValueError):  # not UTF-8, not JSON, nested too deep: not ours
        return False
    if not isinstance(data, dict) or "schema_version" not in data:
        return False
    return {"format", "counts"} <= data.keys() or {"run_id", "layout"} <= data.keys()


def _readable_suffix(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def _lines_file(path: Path) -> bool:
    """Whether `path` is named as JSONL (`.jsonl`, `.ndjson`, any case)."""
    return path.name.lower().endswith(LINE_SUFFIXES)


# (format, origin index, where, Trajectory | ImportProblem)
Item = tuple[str, int, str, Any]

TOO_DEEP_FILE = "nested too deeply to convert (a value deeper than this call's stack can follow)"
"""A whole file's parser out of stack: the parser read the file, so no field is known."""


def _guarded(
    path: Path, where: str, index: int, name: str, parse: Callable[[], Any], record: Any = None
) -> Iterator[Item]:
    """The items of one record (or whole-file trajectory); whatever breaks the parser
    becomes this record's problem. `record`: what `parse` reads, when it is one record
    (its deepest field names a RecursionError; a whole file's parser reads the file)."""
    try:
        items = list(parse())
    except (MissingField, KeyError) as exc:
        items = [ImportProblem(str(path), where, "missing_field", str(exc).strip("'\""))]
    except InvalidField as exc:  # the message names the field
        items = [ImportProblem(str(path), where, "invalid", str(exc))]
    except RecursionError:  # records are read to `validate.JSON_DEPTH`: a deep caller
        why = too_deep_to_convert(record) if record is not None else TOO_DEEP_FILE
        items = [ImportProblem(str(path), where, "too_deep", why)]
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
    if fmt in ("auto", native.NAME) and native.detect_record(d):  # ours: kept as given
        parse = lambda: native.parse_record(d, path, index, cfg.domain)  # noqa: E731
        yield from _guarded(path, where, index, native.NAME, parse, d)
        return
    if fmt != "auto":
        mod = RECORD_FORMATS.get(fmt)
    else:
        mod = next((m for m in RECORD_FORMATS.values() if m.detect_record(d)), None)
    if mod is None:
        yield "?", index, where, _unrecognized(path, where, d, fmt)
        return
    if isinstance(d, dict) and d.get("id") is not None and str(d["id"]).strip():
        origin = str(d["id"])  # a blank id names nothing: the file and line do
    parse = lambda: mod.parse_record(d, origin, cfg.domain, path)  # noqa: E731
    yield from _guarded(path, where, index, mod.NAME, parse, d)


def _unrecognized(path: Path, where: str, d: Any, fmt: str) -> ImportProblem:
    """Why no format took the record. Detection asks for a format's whole signature (a
    list of messages with roles, not a `messages` key alone); a record that carries one
    format's own key but of the wrong shape is not imported on that weaker evidence, yet
    its problem names the field (`invalid`) instead of a bare `unrecognized`."""
    if fmt != "auto":
        return ImportProblem(str(path), where, "unrecognized", f"not a {fmt} record")
    version = d.get(F.SCHEMA_VERSION_F) if isinstance(d, dict) else None
    if isinstance(version, str) and version.startswith("worldtrace."):  # ours, a training row
        why = f"schema_version {shown(version)} is not a trajectory record's ({F.SCHEMA_VERSION})"
        return ImportProblem(str(path), where, "unrecognized", why)
    misses = [(m.NAME, *miss) for m in RECORD_FORMATS.values() if (miss := m.near_miss(d))]
    if len(misses) == 1:
        [(name, why, by)] = misses
        return ImportProblem(str(path), where, "invalid", f"{why} (taken for {name} by {by})")
    msg = "not a record of any known format"
    if misses:
        msg += "; " + "; ".join(f"as {name} (by {by}): {why}" for name, why, by in misses)
    return ImportProblem(str(path), where, "unrecognized", msg)


def _line_items(
    path: Path, stem: str, cfg: ImportConfig, n: int, line: str | ImportProblem
) -> Iterator[Item]:
    """Everything in line `n` of a JSONL file (`jsonl_text_lines`: a problem reading the
    file is its last "line")."""
    d = line if isinstance(line, ImportProblem) else parse_line(path, n, line)
    if isinstance(d, ImportProblem):
        yield "?", max(n - 1, 0), d.where, d
    elif (listed := _records_listed(d, cfg.format)) is not None:
        where = f"line {n}"
        yield "?", n - 1, where, ImportProblem(str(path), where, "unrecognized", listed)
    else:
        yield from _record(path, d, n - 1, f"line {n}", f"{stem}:{n}", cfg)


def _records_listed(d: Any, fmt: str) -> str | None:
    """Why a JSONL line that is a list of records is not read: a line is one record (its
    origin index and `line N` name one), unlike a `.json` list; None for any other line
    (a bare list of OpenAI messages is one record)."""
    if not isinstance(d, list) or not d:
        return None
    mods = list(RECORD_FORMATS.values()) if fmt == "auto" else [RECORD_FORMATS.get(fmt)]
    if any(m is not None and m.detect_record(d) for m in mods):
        return None
    name = next((m.NAME for x in d for m in mods if m is not None and m.detect_record(x)), None)
    if name is None:
        return None
    return (
        f"a list of {plural(len(d), name + ' record')} on one line: JSONL holds one record"
        " per line; write one record per line, or name the file .json (one record or a list)"
    )


def _by_line(path: Path, cfg: ImportConfig) -> bool:
    """Whether `path` is read line by line (a JSONL file of records): named as JSONL,
    unless it is one JSON document over several lines (`pretty_document`)."""
    return (
        _lines_file(path)
        and (cfg.format not in FILE_FORMATS or cfg.format in RECORD_FORMATS)
        and _session(path, cfg) is None
        and not pretty_document(path)
    )


@file_cached
def pretty_document(path: Path) -> bool:
    """Whether a file named as JSONL is one JSON document over several lines (pretty-
    printed: `validate` says so, `one_document`; `reading.document_lines`). Read whole as
    a `.json` file is, it imports (its lines, read as records, were each `invalid_json`)."""
    return document_lines(path) is not None


def _session(path: Path, cfg: ImportConfig) -> Any:
    """The session format `path` is read whole as (a Claude Code session, a Codex
    rollout or a Gemini CLI session: JSONL of its events), else None: with `--format
    claude-code` / `codex` / `gemini-cli` (any file), or (auto) a regular `.jsonl` file
    whose first lines are that format's (its `sniff`), or a file Claude Code keeps beside its sessions
    (`claude_code.owns`: it reports or passes over)."""
    if cfg.format in SESSION_FORMATS:
        return SESSION_FORMATS[cfg.format]
    if cfg.format != "auto":
        return None
    if claude_code.owns(path):
        return claude_code
    if not _lines_file(path) or not path.is_file():
        return None  # a pipe (a fifo named .jsonl) is read once, by line: a sniff took its lines
    return next((m for m in SESSION_FORMATS.values() if m.sniff(path)), None)


def _session_items(path: Path, cfg: ImportConfig, mod: Any) -> Iterator[Item]:
    """The items of a session file: each trajectory at its own origin index (the file's
    main conversation 0), problems where they are."""
    parse = lambda: mod.parse(path, cfg.domain)  # noqa: E731
    for name, _, where, item in _guarded(path, "", 0, mod.NAME, parse):
        index, item = item if isinstance(item, tuple) else (0, item)
        if isinstance(item, ImportProblem):
            item = item.at(str(path), where)
            where = item.where
        yield name, index, where, item


def _items(path: Path, cfg: ImportConfig) -> Iterator[Item]:
    """Everything in one file: (format, origin index, where, Trajectory | ImportProblem)."""
    stem = origin_stem(path)
    if (session := _session(path, cfg)) is not None:
        yield from _session_items(path, cfg, session)
        return
    if _by_line(path, cfg):
        for n, line in jsonl_text_lines(path):
            yield from _line_items(path, stem, cfg, n, line)
        return
    data, raw = read_document(path)
    if isinstance(data, ImportProblem) and (cut := _cut_records(path, data, raw, cfg)) is not None:
        yield from cut
        return
    if isinstance(data, ImportProblem):
        if data.message.startswith(LOOKS_LIKE_JSONL) and cfg.format in RECORD_FORMATS:
            # a record format asked for: JSONL whatever its name (a pipe, `x.log`), read
            # by line from what was read (a pipe cannot be read twice)
            for n, line in jsonl_text_lines(path, raw):
                yield from _line_items(path, stem, cfg, n, line)
            return
        if data.message.startswith(LOOKS_LIKE_JSONL):
            data = _jsonl_read_whole(data, path, cfg)
        yield "?", 0, data.where, data
        return
    if _lines_file(path) and pretty_document(path):  # one document named as JSONL
        yield from (_read_whole(raw, x) for x in _document_items(path, data, cfg, stem))
        return
    yield from _document_items(path, data, cfg, stem)


def _cut_records(
    path: Path, problem: ImportProblem, raw: bytes | None, cfg: ImportConfig
) -> list[Item] | None:
    """The items of a JSON list of records cut short at its end (`reading.cut_array`): its
    complete records, numbered as in the whole file, then `problem` saying which record
    the cut lost and where it starts; None for any other problem or file. A list that is
    one trajectory (its messages, or a whole-file format's) is not: its steps before the
    cut are not the run."""
    if problem.kind != "invalid_json" or not problem.message.endswith(TRUNCATED_FILE) or not raw:
        return None
    if cfg.format in FILE_FORMATS and cfg.format not in RECORD_FORMATS:
        return None  # a whole-file format asked for: the file is one trajectory
    got = cut_array(raw)
    if got is None:
        return None
    records, line, col = got
    if openai.bare_messages(records) or any(m.detect(path, records) for m in FILE_FORMATS.values()):  # fmt: skip
        return None
    n = len(records)
    items = list(_document_items(path, records, cfg, origin_stem(path)))
    why = (
        f"{problem.message}: record {n}, which starts at line {line} column {col}, and any"
        f" after it are lost; the {plural(n, 'record')} before it are imported"
    )
    return [*items, ("?", n, problem.where, dataclasses.replace(problem, message=why))]


def _read_whole(raw: bytes | None, item: Item) -> Item:
    """An item of a file named as JSONL read as one document (`pretty_document`): its
    `unrecognized` problem says how it was read, as `validate` says it (`one_document`)."""
    name, index, where, x = item
    if not isinstance(x, ImportProblem) or x.kind != "unrecognized":
        return item
    lines = len(reading.LINE_END.split((raw or b"").decode(errors="replace").rstrip("\r\n")))
    why = f"one JSON document over {lines} lines, not JSONL (one record per line), read whole: {x.message}"  # fmt: skip
    return name, index, where, dataclasses.replace(x, message=why)


def _document_items(path: Path, data: Any, cfg: ImportConfig, stem: str) -> Iterator[Item]:
    """Everything in a file read as one JSON document (`data`)."""
    if cfg.format != "auto":
        mod = FILE_FORMATS.get(cfg.format)
        if mod is not None and cfg.format in RECORD_FORMATS and not mod.detect(path, data):
            mod = None  # a file of that format's records (an OpenHands eval output)
    elif isinstance(data, dict | list) and _ours(data):
        mod = None  # worldtrace's records (`native`), a list or one
    else:
        mod = next((m for m in FILE_FORMATS.values() if m.detect(path, data)), None)
    if mod is not None:
        with_domain = mod in (atif, openhands, openhands_v1) or isinstance(mod, Document)
        args = (path, data, cfg.domain) if with_domain else (path, data)
        yield from _guarded(path, "", 0, mod.NAME, lambda: mod.parse(*args))
        return
    if (runs := openai.simulations(data)) is not None:  # tau2-bench's results
        for n, d in enumerate(runs):
            yield from _record(path, d, n, f"simulations[{n}]", f"{stem}:{n}", cfg)
        return
    many = isinstance(data, list) and bool(data) and not openai.bare_messages(data)
    for n, d in enumerate(data if many else [data]):
        where, origin = (f"record {n}", f"{stem}:{n}") if many else ("", stem)
        yield from _record(path, d, n, where, origin, cfg)


def _jsonl_read_whole(problem: ImportProblem, path: Path, cfg: ImportConfig) -> ImportProblem:
    """`read_json`'s problem for a JSONL file read as one document, saying why it was
    read whole (the format asked for, or the file's name) and how to read it by line."""
    looks = problem.message.removesuffix(NOT_ONE_DOCUMENT).replace("the file", "this file", 1)
    if cfg.format != "auto":
        records = ", ".join(RECORD_FORMATS)
        why = (
            f"--format {cfg.format} reads one JSON document per file, and {looks}: JSONL "
            f"records are read line by line with --format auto or a record format ({records})"
        )
    else:
        named = f"a {path.suffix} file" if path.suffix else "a file without a suffix"
        fix = f"name it {' or '.join(LINE_SUFFIXES)}"
        if not path.is_file():  # a pipe (`/dev/stdin`, `<(...)`) has no name to change
            fix = f"give its record format (--format {', '.join(RECORD_FORMATS)})"
        why = f"{named} is read as one JSON document, and {looks}: {fix} to read a record per line"
    return dataclasses.replace(problem, message=why)


def detect_format(path: Path, data: Any) -> str | None:
    """The format `import --format auto` takes the parsed file `data` for: a whole-file
    format (SWE-agent, mini-swe-agent, ATIF), else the record format of the record (of
    the first record of a list of records); None when no format takes it."""
    if isinstance(data, dict | list) and _ours(data):
        return native.NAME
    mod = next((m for m in FILE_FORMATS.values() if m.detect(path, data)), None)
    if mod is None and openai.simulations(data) is not None:
        return openai.NAME
    if mod is None:
        many = isinstance(data, list) and bool(data) and not openai.bare_messages(data)
        first = data[0] if many else data
        mod = next((m for m in RECORD_FORMATS.values() if m.detect_record(first)), None)
    return None if mod is None else mod.NAME


def one_document(path: Path) -> str | None:
    """One line for a file that is one JSON document where `validate` wants records: a
    non-.json file (read as JSONL, one record per line) whose first line is no JSON
    value but whose whole text is (pretty-printed, or a foreign trajectory such as a
    SWE-agent .traj), or a .json file in a format `worldtrace import` reads; None for
    everything else, which `check_files` checks (and reports) as before."""
    if path.name.endswith(F.SHARD_SUFFIX):
        return None
    try:
        if path.stat().st_size > SNIFF_BYTES:
            return None
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None  # check_files says why it cannot be read
    as_jsonl = not path.name.endswith(".json")
    lines = reading.LINE_END.split(text.rstrip("\r\n"))  # not splitlines: U+2028 is text
    first = next((line for line in lines if line.strip()), None)
    try:
        if as_jsonl and (first is None or parses(first)):
            return None  # JSONL: each line is checked
        data = parse_json(text)
    except ValueError:  # TooDeep too
        return None  # not JSON as a whole either: the line (or record) problems say where
    if isinstance(data, dict | list) and _ours(data):
        fmt = None
    else:
        fmt = detect_format(path, data)
    if not as_jsonl and fmt is None:
        return None  # a .json file of records (or of something else): checked as before
    do = f"import it with `worldtrace import {path}`"
    if not as_jsonl:
        return f"{path}: one JSON document in the {fmt} format, not worldtrace records: {do}"
    what = f"{path}: one JSON document over {len(lines)} lines, not JSONL (one record per line)"
    if fmt is not None:
        return f"{what}; it reads as the {fmt} format: {do}"
    return f"{what}: write one record per line, or name the file .json (one record or a list)"


def one_session(path: Path) -> str | None:
    """One line for a JSONL file `import` reads whole as a session (Claude Code, Codex,
    Gemini CLI; told by its first lines, `_session`), where `validate` would check each
    event as a record and print a schema problem per field; None for any other file."""
    if not _lines_file(path):
        return None
    mod = next((m for m in SESSION_FORMATS.values() if m.sniff(path)), None)
    if mod is None:
        return None
    return (
        f"{path}: a {mod.NAME} session (JSONL, one event a line), not worldtrace records: "
        f"import it with `worldtrace import {path}`"
    )


def _ours(data: dict[str, Any] | list[Any]) -> bool:
    """Whether `data` holds worldtrace records (their `schema_version`): validated, never
    taken for a foreign format."""
    records = data if isinstance(data, list) else [data]
    return any(isinstance(d, dict) and d.get("schema_version") == F.SCHEMA_VERSION for d in records)


def stored_path(origin_path: str) -> str:
    """An origin path as a record stores it (`source.origin_path`): redacted, as
    `convert` redacts every string of the record."""
    return redactor().text(origin_path)[0]


def _provenance(t: Trajectory, path: str, index: int) -> Trajectory:
    t.source.origin_path, t.source.origin_index = path, index
    return t


def parse_file(
    path: Path, fmt: str = "auto", domain: str | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield (format, Trajectory | ImportProblem) for everything in one file (no caps)."""
    origin_path = origin_path_of(Path(path))
    for name, index, _, item in _items(Path(path), ImportConfig(format=fmt, domain=domain)):
        if isinstance(item, Trajectory):
            item = _provenance(item, origin_path, index).with_id()
        yield name, item


def cap_observations(d: dict[str, Any], limit: int) -> int:
    """Cut the observations of a record dict longer than `limit` characters; how many
    were cut."""
    cut = 0
    for turn in d["turns"] if limit > 0 else ():
        o = turn["observation"]
        if len(o["text"]) > limit:
            o["text"], o["truncated"] = o["text"][:limit], True
            cut += 1
    return cut


class Converted(NamedTuple):
    """A trajectory made ready for the store (`convert`), before the store is consulted."""

    row: dict[str, Any] | None
    """The record dict, with its `trajectory_id`, until its task's rows are checked and
    made a batch (`checked`); None when `problem` says why not."""
    problem: ImportProblem | None
    """Why it is not imported whether or not the store has it (empty, too deep)."""
    invalid: str
    """Why the schema refuses it (checked after the store: a record already there is
    counted as present); "" when valid."""
    cut: int
    """Observations cut to `ImportConfig.max_observation_chars`."""
    loc: str
    """Where it is, for a problem: the line or record, else its origin id."""
    warning: ImportProblem | None = None
    """What was changed to store it (`lone_surrogate`)."""
    tid: str = ""
    """Its `trajectory_id` ("" with a `problem`)."""
    at: int = -1
    """Its row in its task's batch (`Part.rows`); -1: none (present in the store already,
    invalid, or a `problem`)."""
    earlier: str = ""
    """How the import options differ from those the store's record of this place was
    imported with, when only they make it differ (read with the earlier ones, it is that
    record; or it is, and `--domain` changed its domain): not stored again
    (`options_differ`); "" otherwise."""
    same_as: str = ""
    """The id of that record of the store (with `earlier`)."""
    relabelled: str = ""
    """How this record's labels differ from those of the record the store holds with its
    id at its place (`sink.relabelled`: a corrected reward, error flag, metadata), which
    the id leaves out; "" when they agree or it is not present."""


@dataclass(frozen=True, slots=True)
class Part:
    """What a task hands back (`convert_lines`, `convert_file`): its items in order, and
    the rows of the trajectories to store as one Arrow batch of the shard schema (each
    item's `Converted.at`). Arrow, not dicts, crosses the process boundary: ~12 us a
    record to pickle and unpickle, against ~56 us for the nested dicts, and this process
    writes the batch as it is."""

    items: list[Item]
    rows: pa.RecordBatch | None = None

    @property
    def size(self) -> int:
        """Rows written when every one is admitted."""
        return self.rows.num_rows if self.rows is not None else 0


def _mended(v: Any, at: str, found: list[str]) -> Any:
    """`v` with each lone UTF-16 surrogate (from a JSON `\\ud83d` escape: an emoji cut in
    two by a tool) replaced by U+FFFD, which UTF-8 can store (Parquet, the id's hash
    cannot take a surrogate); the field paths changed added to `found`."""
    if isinstance(v, str):
        if v.isascii() or not LONE_SURROGATE.search(v):
            return v
        found.append(at)
        return LONE_SURROGATE.sub("\ufffd", v)
    if isinstance(v, dict):
        return {_mended(k, at, found): _mended(x, f"{at}.{k}" if at else k, found) for k, x in v.items()}  # fmt: skip
    if isinstance(v, list):
        return [_mended(x, f"{at}[{i}]", found) for i, x in enumerate(v)]
    return v


def convert(
    path: Path,
    origin_path: str,
    index: int,
    where: str,
    t: Trajectory,
    cap: int,
    present: Collection[str] = (),
    mend: bool = True,
    options: str | None = None,
) -> Converted:
    """Everything `import` does to one trajectory before the store is consulted:
    provenance, redaction, the observation cap, the dict, its id and its validation
    (not of a record whose id is in `present`, the ids the store holds from this file
    and record: it is counted as present, whatever its validity). `mend`: whether its
    strings may hold a lone surrogate (`_mended`; `reading.surrogate_escapes`).
    `options`: the import's `options_json`, recorded in its metadata (`IMPORT_OPTIONS`;
    None: the defaults, no key)."""
    loc = where or t.source.origin_id or ""
    if not t.turns:
        problem = ImportProblem(str(path), loc, "empty", "no (action, observation) pair found")
        return Converted(None, problem, "", 0, loc)
    warning = None
    try:
        # once: redaction, hashing, validation and Arrow all read this dict (redacting
        # the dict, not the dataclasses, walks its strings in half the time)
        d = _provenance(t, origin_path, index).to_dict()
        found: list[str] = []
        d = _mended(d, "", found) if mend else d
        if found:
            why = (
                "a lone UTF-16 surrogate (half a character, e.g. an emoji cut in two) "
                f"replaced by U+FFFD in {', '.join(dict.fromkeys(found))}"
            )
            warning = ImportProblem(str(path), loc, "lone_surrogate", why, fatal=False)
        d = redact_record(d)  # security: secrets in foreign files never reach a shard
        meta = {k: v for k, v in (d[F.METADATA] or {}).items() if k != IMPORT_OPTIONS}
        d[F.METADATA] = {**meta, IMPORT_OPTIONS: options} if options is not None else meta
        cut = cap_observations(d, cap)
        d["trajectory_id"] = tid = trajectory_id(d)
    except RecursionError:  # as in `_guarded`
        problem = ImportProblem(str(path), where, "too_deep", too_deep_to_convert(t))
        return Converted(None, problem, "", 0, loc)
    if tid in present:  # counted as present; said when its labels changed (`relabelled`)
        held = present[tid] if isinstance(present, Mapping) else None
        labels = held.labels if isinstance(held, Held) else None
        changed = relabelled(labels, labels_of(d)) if labels is not None else ""
        return Converted(None, None, "", cut, loc, warning, tid, relabelled=changed)
    # validated with its task's other rows (`checked`)
    return Converted(d, None, "", cut, loc, warning, tid)


def checked(items: list[Item]) -> Part:
    """The rows of `items`' trajectories validated and made one batch of the shard schema
    (`Part`). The schema is checked by batch, as `process` checks a shard: the rows
    converted to Arrow at once (which checks every value's type and range) and screened
    by `validate.suspects`; only a row it flags is walked by `validate_dict`, which names
    each problem (the walk on every record was ~114 us of an import's ~880 us a record;
    conversion and screen ~56 us). A batch that Arrow refuses is checked row by row."""
    at = [i for i, (*_, c) in enumerate(items) if isinstance(c, Converted) and c.row is not None]
    rows = [items[i][3].row for i in at]
    if not rows:
        return Part(items)
    why: dict[int, str] = {}
    try:
        batch = pa.RecordBatch.from_pylist(rows, schema=TRAJECTORY_SCHEMA)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        batch = None  # Arrow names only the first value it refused; the walk names all
        for k, row in enumerate(rows):
            why[k] = _invalid(row, items[at[k]][3].loc) or _unstorable(row)
    else:
        for k in np.flatnonzero(suspects(batch)).tolist():
            why[k] = _invalid(rows[k], items[at[k]][3].loc)
    good = [k for k in range(len(rows)) if not why.get(k)]
    if batch is None:  # each is storable alone, so together
        batch = pa.RecordBatch.from_pylist([rows[k] for k in good], schema=TRAJECTORY_SCHEMA)
    elif len(good) < len(rows):
        batch = batch.take(pa.array(good, pa.int64()))
    out, n = list(items), 0
    for k, i in enumerate(at):
        name, index, where, c = items[i]
        if why.get(k):
            c = c._replace(row=None, invalid=why[k])
        else:
            c, n = c._replace(row=None, at=n), n + 1
        out[i] = (name, index, where, c)
    return Part(out, batch if good else None)


def _invalid(row: dict[str, Any], loc: str) -> str:
    """The schema's problems with `row`, one line ("" when valid). No lone surrogate is
    left to look for: strictly decoded text holds none, `_mended` mends escapes."""
    problems = validate_dict(row, loc, check_id=False, texts=False)
    return "; ".join(f"{p.field}: {p.message}" for p in problems)


def _unstorable(row: dict[str, Any]) -> str:
    """Why Arrow refuses a row the walk passed ("" when it takes it)."""
    try:
        pa.RecordBatch.from_pylist([row], schema=TRAJECTORY_SCHEMA)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        return f"<record>: not storable in the shard schema: {first_line(exc)}"
    return ""


def convert_lines(
    path: Path,
    origin_path: str,
    cfg: ImportConfig,
    lines: list[tuple[int, str | ImportProblem]],
    present: dict[int, dict[str, Held]],
) -> Part:
    """A batch of JSONL lines (number, text) -> their items, each trajectory `convert`ed
    (`present`: origin index -> what the store holds from there, `sink.present_keys`): the
    work a worker process does."""
    stem = origin_stem(path)

    def read(c: ImportConfig) -> Iterator[Item]:
        return (x for n, line in lines for x in _line_items(path, stem, c, n, line))

    return checked(_converted(path, origin_path, cfg, read(cfg), present, read))


def convert_file(
    path: Path, origin_path: str, cfg: ImportConfig, present: dict[int, dict[str, Held]]
) -> Part:
    """Everything in a file read whole (a SWE-agent, mini-swe-agent or ATIF trajectory, an
    OpenHands event list or conversation, a Claude Code, Codex or Gemini CLI session, a
    JSON file of records), each trajectory `convert`ed: a worker process's task."""
    read = functools.partial(_items, path)
    return checked(_converted(path, origin_path, cfg, read(cfg), present, read))


def _converted(
    path: Path,
    origin_path: str,
    cfg: ImportConfig,
    items: Iterable[Item],
    present: dict,
    read: Callable[[ImportConfig], Iterable[Item]] | None = None,
) -> list[Item]:
    """`items` `convert`ed; `read(config)`: the same input's items read with another
    config (`_earlier`), when it can be read again."""
    cap, out, escapes = cfg.max_observation_chars, [], surrogate_escapes()
    options, unheld = options_json(cfg), []
    for name, index, where, item in items:
        if isinstance(item, Trajectory):
            mend = surrogate_escapes() != escapes  # a text read since held an escape
            held = present.get(index) or {}
            c = convert(path, origin_path, index, where, item, cap, held, mend, options)
            if c.problem is None and c.tid in held:
                if moved := _domain_moved(held[c.tid], cfg, item.domain):
                    c = c._replace(earlier=moved, same_as=c.tid)
            elif c.problem is None and held:  # another record at a place the store holds
                unheld.append(len(out))
            item = c
        out.append((name, index, where, item))
    if unheld and read is not None:
        _earlier(out, unheld, present, cfg, read, path, origin_path)
    return out


def _domain_moved(held: Held, cfg: ImportConfig, domain: str) -> str:
    """How the options differ when the store holds this very record (the domain is not
    part of the id) in another domain than `--domain` now gives it; "" otherwise."""
    was = _config_of(held.options)
    if held.domain == domain or was is None or was.domain == cfg.domain:
        return ""  # the same, or not the options' doing (the inference changed)
    return f"--domain {_value('domain', was.domain, held.domain)} (this import: {_value('domain', cfg.domain, domain)})"  # fmt: skip


def _earlier(
    out: list[Item],
    unheld: list[int],
    present: dict,
    cfg: ImportConfig,
    read: Callable[[ImportConfig], Iterable[Item]],
    path: Path,
    origin_path: str,
) -> None:
    """Mark the items at `unheld` (positions in `out`: trajectories whose id the store does
    not hold at their place, though it holds another record there) that are that record
    read with other import options (`Converted.earlier`): their source did not change.
    The input is read again with each earlier import's options that could change the id
    (`--format`, the cap; not `--domain`): a re-import with the same ones reads it once.
    A pipe (`<stdin>`, `<pipe>`: `common.origin_path_of`) cannot be read again: its
    records are new beside the earlier ones, as a changed file's are."""
    if not origin_path.startswith("/"):
        return
    wanted: dict[str | None, set[int]] = {}  # earlier options -> the indices held with them
    for k in unheld:
        for h in present[out[k][1]].values():
            if (was := _config_of(h.options)) is not None and _reads_otherwise(was, cfg):
                wanted.setdefault(h.options, set()).add(out[k][1])
    ids: dict[str | None, dict[int, set[str]]] = {}  # options -> index -> ids read with them
    for options, indices in wanted.items():
        was, got = _config_of(options), ids.setdefault(options, {})
        for _, index, where, t in read(was):
            if isinstance(t, Trajectory) and index in indices:
                c = convert(path, origin_path, index, where, t, was.max_observation_chars)
                got.setdefault(index, set()).add(c.tid)
    for k in unheld:
        name, index, where, c = out[k]
        for tid, h in present[index].items():
            if h.options in ids and tid in ids[h.options].get(index, ()):
                diff = _differences(_config_of(h.options), cfg, h.domain, c)
                out[k] = (name, index, where, c._replace(row=None, earlier=diff, same_as=tid))
                break


def _reads_otherwise(was: ImportConfig, now: ImportConfig) -> bool:
    """Whether records read with `was` may have other ids than with `now`."""
    return (was.format, was.max_observation_chars) != (now.format, now.max_observation_chars)


OPTION_FLAGS = {"format": "--format", "domain": "--domain", "max_observation_chars": "--max-observation-chars"}  # fmt: skip


def _value(key: str, value: Any, domain: str | None = None) -> str:
    """An option's value as a problem says it."""
    if key == "domain" and value is None:
        return f"unset, inferred as {domain}" if domain else "unset"
    if key == "max_observation_chars" and value == 0:
        return "0 (no cap)"
    return str(value)


def _differences(was: ImportConfig, now: ImportConfig, held_domain: str, c: Converted) -> str:
    """The options `was` and `now` differ in, each with its two values: `--max-observation-chars
    50 (this import: 1048576)`."""
    new_domain = (c.row or {}).get(F.DOMAIN)
    out = []
    for key in CONTENT_OPTIONS:
        before, after = getattr(was, key), getattr(now, key)
        if before != after:
            flag = OPTION_FLAGS[key]
            shown_before = _value(key, before, held_domain)
            shown_after = _value(key, after, new_domain)
            out.append(f"{flag} {shown_before} (this import: {shown_after})")
    return "; ".join(out)


class ImportBusy(RuntimeError):
    """Another import is writing the same directory: both would read what is present
    before either wrote, and every record would be stored twice."""


IMPORT_LOCK = ".import.lock"
"""Held in the output directory for a whole import (hidden: no reader takes it for data),
removed when the import ends."""


@contextlib.contextmanager
def _held(output: Path) -> Iterator[None]:
    """The output directory's import lock, held for the block; ImportBusy naming the
    holder when another import has it (a holder that dies holds nothing). The file goes
    with its holder: whoever locked it while it was being removed finds it gone and tries
    again, so two imports never both hold one."""
    lock = output / IMPORT_LOCK
    try:
        output.mkdir(parents=True, exist_ok=True)
        while True:
            fh = try_lock(lock)
            if fh is None:
                holder = lock_holder(lock)
                raise ImportBusy(
                    f"{output}: another `worldtrace import` is writing here ({holder}); run"
                    " again when it has finished (the records it stores are then present)"
                )
            with contextlib.suppress(FileNotFoundError):
                if os.stat(lock).st_ino == os.fstat(fh.fileno()).st_ino:
                    break
            fh.close()  # the last holder removed it after we opened it
        fh.truncate(0)
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
    except OSError as exc:  # as the shards' writer says it: the reason, not the lock's path
        raise ImportWriteError(output, exc.strerror or first_line(exc), []) from exc
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        fh.close()


class ImportWorkerLost(RuntimeError):
    """A process converting records died (the out-of-memory killer, a crash)."""


def import_workers(cfg: ImportConfig, files: list[Path]) -> int:
    """Processes that convert the records (`ImportConfig.workers`): one per
    `PARALLEL_BYTES_PER_WORKER` of input, and no more than its tasks (a file read whole
    is one) or the cores."""
    if cfg.workers:
        return cfg.workers
    size = tasks = 0
    for f in files:
        with contextlib.suppress(OSError):  # an unreadable file is its own problem later
            n = f.stat().st_size
            size += n
            tasks += max(1, n // (BATCH_LINES << 10)) if _by_line(f, cfg) else 1
    return min(os.cpu_count() or 1, tasks, max(1, size // PARALLEL_BYTES_PER_WORKER))


def _pool(workers: int) -> ProcessPoolExecutor | None:
    """The import's worker processes (`forkpool.fork_pool`), or None: its records are
    then converted here."""
    return fork_pool(workers, warm=_warm)


def _warm() -> None:
    """Once before the fork, not in every worker: the redactor (~0.1 s: detect-secrets'
    plugins), and pandas, which pyarrow imports on a process's first `from_pylist`
    (~0.13 s)."""
    redactor()
    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401


OPTIONS_DIFFER = "options_differ"
"""Error kind: records the store holds from the same place of the same file, imported
with other options (`Converted.earlier`)."""
LABELS_CHANGED = "labels_changed"
"""Warning kind: a record the store holds whose labels (outcome, error flags, exit codes,
metadata: outside the id) this import reads otherwise (`sink.relabelled`)."""
READ_BY_PROCESS = "read_by_process"
"""Error kind: worldtrace records in a file `process` reads as it is (the store's raw/)."""
SHOWN_SHARDS = 3
_UNRECORDED = (
    "; or, if it was imported before 2026-12-05, which recorded no import options, "
    "with other --max-observation-chars or --format"
)


def _read_by_process(files: list[Path], reads: Path | None) -> set[Path]:
    """Those of `files` that `worldtrace process` reads as they are from `reads` (the
    store's raw/; `schemas.store.input_files`, as `freshness.raw_inputs` lists them):
    under it, or a file a link in it leads to."""
    if reads is None:
        return set()
    from worldtrace.schemas.store import input_files as process_inputs

    theirs = {p.resolve() for p in process_inputs([reads]) if not p.name.endswith(F.SHARD_SUFFIX)}
    return {f for f in files if f.resolve() in theirs}


class _Run:
    """One import: the report, the sink, what is present; `batches` converts the files'
    trajectories (in worker processes when there are), `admit` stores one."""

    def __init__(
        self,
        cfg: ImportConfig,
        output: Path,
        files: list[Path],
        pool=None,
        process_reads: Path | None = None,
    ):
        self.cfg, self.report, self.pool = cfg, ImportReport(), pool
        self.sink = Sink(output, cfg.shard_bytes)
        self.origins = {f: origin_path_of(f) for f in files}
        """file -> its origin path, as `convert` is given it"""
        self.stored = {f: stored_path(origin) for f, origin in self.origins.items()}
        """file -> its `source.origin_path` as the store holds it: redacted, as every
        string of a record is (`convert`), so a path holding a secret-shaped name
        (`out-ghp_...jsonl`) is found present by what the store has, not by its real name"""
        self.present = present_keys(output, self.stored.values())
        self.held: dict[str, dict[int, dict[str, Held]]] = {}
        """stored origin path -> origin index -> what the store holds from there, by id
        (what `convert` skips, and what `_earlier` reads again)."""
        for (tid, origin, index), held in self.present.items():
            self.held.setdefault(origin, {}).setdefault(index, {})[tid] = held
        self.options = options_json(cfg)
        self.read_by_process = _read_by_process(files, process_reads)
        """Files `process` reads records from as they are (`native` records there are not
        imported: they would be processed twice)."""
        self.refused: dict[Path, Counter[tuple[str, str]]] = {}
        """file -> (kind, how the options differ) -> records refused (`file_done`)."""
        self._shards: dict[tuple[Path, str], set[str]] = {}
        """(file, how the options differ) -> the shards holding the earlier records."""

    def batches(self, files: list[Path]) -> Iterator[tuple[Path, Part | None]]:
        """(file, its next items) in file order, each trajectory `convert`ed, then (file,
        None) when the file is done. With worker processes the tasks (a JSONL file's
        lines 128 at a time, any other file whole) are handed out ahead, across files, at
        most two per worker in flight: memory stays bounded however long the input."""
        try:
            yield from self._batches(files)
        except BrokenProcessPool as exc:  # from a result, or from handing out the next task
            raise ImportWorkerLost(
                "a process converting records died (the out-of-memory killer sends SIGKILL: "
                "see `dmesg`); shards written before it are kept, and importing the same "
                "files again adds only what is missing"
            ) from exc

    def _batches(self, files: list[Path]) -> Iterator[tuple[Path, Part | None]]:
        pending: deque = deque()  # (file, its items, None at its end, or a worker's Future)
        limit = 2 * self.report.workers if self.pool else 0
        for path, work in self._tasks(files):
            if isinstance(work, tuple):  # (function, arguments): a Part is done
                fn, args = work
                work = submit(self.pool, fn, *args) if self.pool else fn(*args)
            pending.append((path, work))
            while pending and (
                not isinstance(pending[0][1], Future)
                or sum(isinstance(w, Future) for _, w in pending) > limit
            ):
                yield self._next(pending)
        while pending:
            yield self._next(pending)

    def _next(self, pending: deque) -> tuple[Path, Part | None]:
        path, work = pending.popleft()
        return path, result_of(self.pool, work) if isinstance(work, Future) else work

    def _tasks(self, files: list[Path]) -> Iterator[tuple[Path, Any]]:
        """(file, work) in order, then (file, None) at its end; work: (function,
        arguments) to run in a worker process or here."""
        copies = claude_code.superseded(files) if self.cfg.format in ("auto", claude_code.NAME) else {}  # fmt: skip
        for path in files:
            origin = self.origins[path]
            held = self.held.get(self.stored[path], {})
            if path in copies:  # its conversation is in another file of the run
                yield path, Part([(claude_code.NAME, 0, "", claude_code.superseded_problem(path, copies[path]))])  # fmt: skip
                yield path, None
                continue
            if not _by_line(path, self.cfg):
                yield path, (convert_file, (path, origin, self.cfg, held))
                yield path, None
                continue
            batch: list[tuple[int, str | ImportProblem]] = []
            for n, line in jsonl_text_lines(path):  # a problem reading it comes last
                batch.append((n, line))
                if len(batch) >= BATCH_LINES:
                    yield path, self._lines_task(path, origin, held, batch)
                    batch = []
            if batch:
                yield path, self._lines_task(path, origin, held, batch)
            yield path, None

    def _lines_task(self, path: Path, origin: str, held: dict, batch: list) -> tuple:
        ids = {n - 1: held[n - 1] for n, _ in batch if n - 1 in held}
        return convert_lines, (path, origin, self.cfg, batch, ids)

    def file_done(self, path: Path) -> None:
        """One problem per file and kind for the records `admit` refused in bulk, each
        counted as an error: its place is the file, not each record."""
        for (kind, diff), n in self.refused.pop(path, Counter()).items():
            if kind == READ_BY_PROCESS:
                why = (
                    f"{plural(n, 'worldtrace record')} not imported: the file is under "
                    "the store's raw/, and `worldtrace process` reads the records there as "
                    "they are (imported too, each would be processed twice); to make shards "
                    "of it, move it out of raw/ and import it from there"
                )
            else:
                shards = sorted(self._shards.pop((path, diff), ()))
                named = ", ".join(shards[:SHOWN_SHARDS])
                named += f" and {len(shards) - SHOWN_SHARDS} more" if len(shards) > SHOWN_SHARDS else ""  # fmt: skip
                why = (
                    f"{plural(n, 'record')} not imported again: the store holds them as "
                    f"imported from this file with {diff}; the file did not change, only "
                    "the options, and a second copy would train on each twice. To store "
                    "them with this import's options instead, move the shard(s) holding "
                    f"them out of {self.sink.output} ({named}) and import their files "
                    "again, or import into a new store"
                )
            self.report.add(ImportProblem(str(path), "", kind, why))
            self.report.errors[kind] += n - 1

    def _relabelled(self, path: Path, c: Converted, shard: str) -> ImportProblem:
        """The warning for a record the store holds (same content, same place) whose labels
        this import reads otherwise (`Converted.relabelled`): present, the store keeping its
        own, and how to store these instead."""
        why = (
            f"changed outside its content since it was imported (as {c.tid}): {c.relabelled};"
            " counted as already present (the id is the content, which did not change), and"
            " the store keeps what it imported first. To store this import's values instead,"
            f" move the shard holding it out of {self.sink.output} ({shard}) and import its"
            " files again, or import into a new store"
        )
        return ImportProblem(str(path), c.loc, LABELS_CHANGED, why, fatal=False)

    def admit(self, path: Path, name: str, index: int, c: Converted) -> bool:
        """Count `c`'s outcome; True when it is to be stored (its row `c.at`)."""
        report = self.report
        if c.warning is not None:
            report.add(c.warning)
        if c.problem is not None:
            report.add(c.problem)
            return False
        if name == native.NAME and path in self.read_by_process:
            self.refused.setdefault(path, Counter())[(READ_BY_PROCESS, "")] += 1
            return False
        if c.earlier:  # the store has it, imported with other options
            self.refused.setdefault(path, Counter())[(OPTIONS_DIFFER, c.earlier)] += 1
            self._shards.setdefault((path, c.earlier), set()).add(
                self.present[(c.same_as, self.stored[path], index)].shard
            )
            return False
        key = (c.tid, self.stored[path], index)
        if key in self.present:
            report.present[name] += 1
            if c.relabelled:
                report.add(self._relabelled(path, c, self.present[key].shard))
            return False
        if c.invalid:
            report.add(ImportProblem(str(path), c.loc, "invalid", c.invalid))
            return False
        earlier = self.held.get(key[1], {}).get(index)
        if earlier:  # documented (a change is a new record), but never in silence
            report.add(
                ImportProblem(
                    str(path), c.loc, "record_changed",
                    f"changed since it was imported (as {', '.join(sorted(earlier))}"
                    f"{_UNRECORDED if any(h.options is None for h in earlier.values()) else ''}): "
                    "imported as new beside it; dedup keeps one only if they are near "
                    "duplicates", fatal=False,
                )
            )  # fmt: skip
        self.present[key] = Held(self.options, "", "")
        report.imported[name] += 1
        if c.cut:  # counted by observation, said once per record
            report.add(
                ImportProblem(
                    str(path), c.loc, "truncated_observation",
                    f"{c.cut} observation(s) longer than {self.cfg.max_observation_chars} "
                    "characters cut to it (observation.truncated; --max-observation-chars)",
                    fatal=False,
                )
            )  # fmt: skip
            report.warnings["truncated_observation"] += c.cut - 1
        return True


def import_paths(
    paths: Iterable[str | Path],
    output: str | Path,
    config: ImportConfig | None = None,
    *,
    progress: Progress | None = None,
    process_reads: str | Path | None = None,
) -> ImportReport:
    """Import every file under `paths` into raw shards under `output`. `process_reads`:
    the directory `worldtrace process` reads as it is (the store's raw/): worldtrace's own
    records in a file under it are not imported (`READ_BY_PROCESS`).

    Raises ImportWriteError when shards cannot be written and ImportWorkerLost when a
    worker process dies (shards published before stay).
    """
    cfg = config or ImportConfig()
    if cfg.format != "auto" and cfg.format not in FORMATS:
        raise ValueError(f"unknown format {cfg.format!r} (known: {', '.join(FORMATS)})")
    skipped: list[Path] = []
    files = input_files(paths, skipped)
    workers = import_workers(cfg, files)
    with _held(Path(output)):
        reads = Path(process_reads) if process_reads is not None else None
        return _import(cfg, files, skipped, workers, Path(output), progress, reads)


def _import(cfg, files, skipped, workers, output, progress, process_reads=None) -> ImportReport:
    """`import_paths` with the output's lock held."""
    pool = _pool(workers)
    if hasattr(progress, "begin"):  # a terminal's bar starts now, after the fork (`_pool`)
        progress.begin()
    run = _Run(cfg, output, files, pool, process_reads)
    report, records = run.report, 0
    report.skipped = skipped
    report.workers = workers if pool else 1
    try:
        for path, part in run.batches(files):
            if part is None:  # the file is done
                run.file_done(path)
                report.files += 1
                if progress:
                    progress(report.files, records)
                continue
            stored = []
            for name, index, _, item in part.items:
                if isinstance(item, ImportProblem):
                    report.add(item)
                    records += item.fatal
                    continue
                records += 1
                if run.admit(path, name, index, item):
                    stored.append(item.at)
                if progress and records % PROGRESS_EVERY == 0:
                    progress(report.files, records)
            if stored:
                run.sink.add(part.rows if len(stored) == part.size else part.rows.take(stored))
        report.shards = run.sink.close()
    except BaseException as exc:
        with contextlib.suppress(OSError):  # the first error is the one to report
            run.sink.abort()
        if pool is not None and isinstance(exc, KeyboardInterrupt):  # Ctrl-C, SIGTERM
            _stop_workers(pool)
        raise
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return report
