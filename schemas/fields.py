"""Field names, enumerations and versions in one place.

Every module that touches a record refers to these names instead of writing the string,
so a rename is one edit and a typo is an ImportError instead of a silent miss.
"""

from __future__ import annotations

SCHEMA_VERSION = "worldtrace.trajectory/1"
TRAINING_SCHEMA_VERSION = "worldtrace.training/1"

# Domains of the recipe (Qwen-AgentWorld report, section 2.2).
DOMAINS = ("mcp", "search", "terminal", "swe", "android", "web", "os")
GUI_DOMAINS = frozenset({"android", "web", "os"})
TOOL_DOMAINS = frozenset({"mcp", "swe"})
FLAGGED_DOMAINS = frozenset({"mcp", "search", "swe", "web", "android"})
"""Domains whose collectors flag every failed step (`is_error`, exit codes): a collected
turn there without a flag succeeded. A terminal screen carries no exit code."""

SOURCE_KINDS = ("collector", "import", "synthetic")
"""Where a record came from: a collector's episode in a real environment, an import of a
foreign log, or the bundled generator (`collectors/synthetic.py`: test data, never an
environment's answer). Files written before `synthetic` existed mark the generator's
records by `environment.backend = "synthetic"` (kind `collector`)."""
SYNTHETIC = "synthetic"
SIMULATOR_MODEL = "WorldTrace Simulator"
"""The model the bundled Android device simulator reports (`sandboxes/android_sim`), which
the sandbox records in `environment.config`: its screens are worldtrace's own apps, so
what is collected from it tests the pipeline and is no real device's answer (export
counts it: `counts.simulated_trajectories`)."""
AWB_PROVENANCE = "worldtrace"
"""An AgentWorldBench export line's key for its trajectory id and whether it was
generated: imported again, a generated record stays synthetic."""
"""`source.kind` (and, in older files, `environment.backend`) of generated records."""
ACTION_KINDS = ("keystrokes", "tool_call", "command", "text", "gui")
OUTCOME_STATUSES = ("success", "failure", "error", "timeout", "incomplete", "unknown")

# Top-level trajectory fields.
SCHEMA_VERSION_F = "schema_version"
TRAJECTORY_ID = "trajectory_id"
DOMAIN = "domain"
SOURCE = "source"
ENVIRONMENT = "environment"
TASK = "task"
AGENT = "agent"
SYSTEM = "system"
TURNS = "turns"
OUTCOME = "outcome"
STARTED_AT = "started_at"
ENDED_AT = "ended_at"
METADATA = "metadata"
DEDUP = "dedup"
CONDITIONS = "conditions"
REDACTIONS = "redactions"

# The recipe's five system prompt parts, in order. The content hash and the renderer
# depend on exactly these, so adding a field to `records.System` must not change them
# (tests/schemas/test_declaration.py checks that `System` declares them in this order).
SYSTEM_FIELDS = (
    "task_description",
    "action_space",
    "initial_state",
    "demonstrations",
    "simulation_instruction",
)

# Per-record field-name tuples are derived from the declaration (records.py) on first
# use, so they never drift from it: `F.STATS_FIELDS` is the fields of `TurnStats`.
_DERIVED = {
    "SOURCE_FIELDS": "Source",
    "ENVIRONMENT_FIELDS": "Environment",
    "TASK_FIELDS": "Task",
    "AGENT_FIELDS": "Agent",
    "OUTCOME_FIELDS": "Outcome",
    "ACTION_FIELDS": "Action",
    "OBSERVATION_FIELDS": "Observation",
    "TURN_FIELDS": "Turn",
    "STATS_FIELDS": "TurnStats",
    "DEDUP_FIELDS": "Dedup",
}


def __getattr__(name: str) -> tuple[str, ...]:
    if name not in _DERIVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import dataclasses

    from . import records

    return tuple(f.name for f in dataclasses.fields(getattr(records, _DERIVED[name])))


# Turn categories of report Table 3 (policy agentworld-v1), then worldtrace's own
# (policy agentworld-v1+info: repeats found by conditional novelty, common templates).
TABLE3_CATEGORIES = (
    "echo",
    "boilerplate",
    "expansion",
    "retrieval",
    "action",
    "transform",
    "other",
)
CATEGORIES = (*TABLE3_CATEGORIES, "repeat", "common", "injected")
INJECTED_FAULTS = ("error", "timeout", "rate_limit", "truncate")
"""Kinds of a turn's `perturbation` whose observation our fault proxy made or cut
(sandboxes/mcp_proxy.py), not the environment: every policy decides such a turn
`injected` (keep `keep.injected`, 0 by default: context, never a target). A `latency`
perturbation only delays a real answer."""

# Store layout under the store root.
STORE_ENV = "WORLDTRACE_STORE"
DEFAULT_STORE = "worldtrace-data"
RAW_DIR = "raw"
PROCESSED_DIR = "processed"
EXPORT_DIR = "export"
JOBS_DB = "jobs.db"
PROCESSED_TABLES = ("trajectories", "turns", "clusters", "rejects")
PROCESS_MANIFEST = "manifest.json"
"""Under processed/: the last `worldtrace process` run (inputs, seconds, counters)."""
PROCESS_INDEX = "_index"
"""Under processed/: the incremental state of `worldtrace process` (segments, counts)."""
PROCESS_LOCK = ".process.lock"
"""Under processed/: held (flock) by the one `process` run writing the store."""
TEMPLATE_COUNTS_FILE = "templates.parquet"
"""Under processed/_index/: `key`, `count`: kept turns per observation template. The
views join it to fill the corpus-count columns at read time (docs/pipeline.md)."""
SURPRISAL_REFERENCE = 16
"""Occurrences at which a template's surprisal reaches 0 bits: past it a template is common
whatever the corpus size (it saturates there, which also bounds what a new batch changes)."""

SHARD_SUFFIX = ".parquet"
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".tgz")
"""Files no reader opens compressed: a walk that passes one over says to decompress it."""
LINE_SUFFIXES = (".jsonl", ".ndjson")
"""Files of one JSON record per line (any case: `UPPER.JSONL`)."""
LINE_RECORD_FORMATS = ("agentworldbench", "sharegpt", "openai", "openhands")
"""The import formats read one record per line from such a file: their records'
`source.origin_index` is the line - 1 (the session formats' is a conversation's number)."""
SESSION_FORMATS = ("claude-code", "codex", "gemini-cli")
"""The import formats that read a JSONL file whole, one event a line: their records are
conversations, `origin_index` a conversation's number. Every other format read from such a
file (worldtrace's own records too) has a record a line."""
SHARD_TARGET_BYTES = 128 * 1024 * 1024
SHARD_ROW_GROUP_ROWS = 1024


ARRIVAL_COLUMN = "_arrival"
"""A segment's column of each record's arrival (`pipelines.units.arrival_key`)."""
PROCESS_SEGMENTS = "segments"
"""The folder of `PROCESS_INDEX` holding each unit's segment (`pipelines.segments`)."""
UNIT_ORDER_KEY = b"worldtrace.unit_order"
"""Schema metadata of a processed unit's files: the arrival key (`units.arrival_key`) of
its unit's first record. A unit is a slice of one raw file in the file's order, so units
read in this order give the records in the order they came into the store, whatever the
cuts (workers, incremental runs) made the units: what the export reads them by."""
