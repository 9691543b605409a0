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

SOURCE_KINDS = ("collector", "import")
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

# Nested fields.
SOURCE_FIELDS = ("kind", "name", "job_id", "episode_id", "attempt", "origin_format", "origin_id")
ENVIRONMENT_FIELDS = ("backend", "image", "server", "url", "device", "config")
TASK_FIELDS = ("task_id", "instruction")
AGENT_FIELDS = ("name", "model", "policy")
SYSTEM_FIELDS = (
    "task_description",
    "action_space",
    "initial_state",
    "demonstrations",
    "simulation_instruction",
)
OUTCOME_FIELDS = ("status", "reward", "error")
ACTION_FIELDS = ("kind", "text", "name", "arguments_json")
OBSERVATION_FIELDS = ("text", "is_error", "exit_code", "truncated", "state_json")
TURN_FIELDS = (
    "index",
    "action",
    "observation",
    "started_at",
    "duration_ms",
    "reasoning",
    "stats",
    "category",
    "keep",
    "rule",
)
STATS_FIELDS = (
    "ol",
    "nov",
    "jac",
    "r",
    "byte_entropy",
    "zlib_ratio",
    "cond_novelty",
    "corpus_surprisal",
)
DEDUP_FIELDS = ("exact_hash", "cluster_id", "representative")

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
CATEGORIES = (*TABLE3_CATEGORIES, "repeat", "common")

# Store layout under the store root.
STORE_ENV = "WORLDTRACE_STORE"
DEFAULT_STORE = "worldtrace-data"
RAW_DIR = "raw"
PROCESSED_DIR = "processed"
EXPORT_DIR = "export"
JOBS_DB = "jobs.db"
PROCESSED_TABLES = ("trajectories", "turns", "clusters", "rejects")

SHARD_SUFFIX = ".parquet"
SHARD_TARGET_BYTES = 128 * 1024 * 1024
SHARD_ROW_GROUP_ROWS = 1024
