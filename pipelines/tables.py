"""Arrow schemas of the processed side tables (turns, clusters, rejects)."""

from __future__ import annotations

import pyarrow as pa
from worldtrace.schemas import fields as F

TURNS_SCHEMA = pa.schema(
    [
        pa.field("trajectory_id", pa.string()),
        pa.field("origin_id", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("action_kind", pa.string()),
        pa.field("tool_name", pa.string()),
        pa.field("action_chars", pa.int64()),
        pa.field("obs_chars", pa.int64()),
        pa.field("is_error", pa.bool_()),
        pa.field("truncated", pa.bool_()),
        *[pa.field(n, pa.float64()) for n in F.STATS_FIELDS],
        pa.field("category", pa.string()),
        pa.field("keep", pa.float64()),
        pa.field("rule", pa.string()),
        pa.field("in_loss", pa.bool_()),
    ]
)
CLUSTERS_SCHEMA = pa.schema(
    [
        pa.field("trajectory_id", pa.string()),
        pa.field("origin_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("cluster_id", pa.string()),
        pa.field("representative", pa.bool_()),
        pa.field("role", pa.string()),
    ]
)
REJECTS_SCHEMA = pa.schema(
    [
        pa.field("source_path", pa.string()),
        pa.field("record", pa.string()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("trajectory_id", pa.string()),
    ]
)
