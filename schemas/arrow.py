"""The trajectory record as an explicit Arrow schema, and conversion both ways."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from . import fields as F
from .records import Trajectory, trajectory_from_dict

TS = pa.timestamp("us", tz="UTC")
STR = pa.string()


def _struct(names: Iterable[str], typ: pa.DataType = STR) -> pa.DataType:
    return pa.struct([pa.field(n, typ) for n in names])


ACTION_TYPE = pa.struct(
    [
        pa.field("kind", STR),
        pa.field("text", STR),
        pa.field("name", STR),
        pa.field("arguments_json", STR),
    ]
)
OBSERVATION_TYPE = pa.struct(
    [
        pa.field("text", STR),
        pa.field("is_error", pa.bool_()),
        pa.field("exit_code", pa.int32()),
        pa.field("truncated", pa.bool_()),
        pa.field("state_json", STR),
    ]
)
STATS_TYPE = _struct(F.STATS_FIELDS, pa.float64())
TURN_TYPE = pa.struct(
    [
        pa.field("index", pa.int32()),
        pa.field("action", ACTION_TYPE),
        pa.field("observation", OBSERVATION_TYPE),
        pa.field("started_at", TS),
        pa.field("duration_ms", pa.float64()),
        pa.field("reasoning", STR),
        pa.field("stats", STATS_TYPE),
        pa.field("category", STR),
        pa.field("keep", pa.float64()),
        pa.field("rule", STR),
    ]
)
SOURCE_TYPE = pa.struct(
    [
        pa.field("kind", STR),
        pa.field("name", STR),
        pa.field("job_id", STR),
        pa.field("episode_id", STR),
        pa.field("attempt", pa.int32()),
        pa.field("origin_format", STR),
        pa.field("origin_id", STR),
    ]
)
OUTCOME_TYPE = pa.struct(
    [pa.field("status", STR), pa.field("reward", pa.float64()), pa.field("error", STR)]
)
DEDUP_TYPE = pa.struct(
    [
        pa.field("exact_hash", STR),
        pa.field("cluster_id", STR),
        pa.field("representative", pa.bool_()),
    ]
)

TRAJECTORY_SCHEMA = pa.schema(
    [
        pa.field(F.SCHEMA_VERSION_F, STR, nullable=False),
        pa.field(F.TRAJECTORY_ID, STR, nullable=False),
        pa.field(F.DOMAIN, STR, nullable=False),
        pa.field(F.SOURCE, SOURCE_TYPE),
        pa.field(F.ENVIRONMENT, _struct(F.ENVIRONMENT_FIELDS)),
        pa.field(F.TASK, _struct(F.TASK_FIELDS)),
        pa.field(F.AGENT, _struct(F.AGENT_FIELDS)),
        pa.field(F.SYSTEM, _struct(F.SYSTEM_FIELDS)),
        pa.field(F.TURNS, pa.list_(TURN_TYPE)),
        pa.field(F.OUTCOME, OUTCOME_TYPE),
        pa.field(F.STARTED_AT, TS),
        pa.field(F.ENDED_AT, TS),
        pa.field(F.METADATA, pa.map_(STR, STR)),
        pa.field(F.DEDUP, DEDUP_TYPE),
    ],
    metadata={b"worldtrace.schema_version": F.SCHEMA_VERSION.encode()},
)


def _row(t: Trajectory) -> dict[str, Any]:
    d = t.to_dict()
    d[F.METADATA] = list((d.get(F.METADATA) or {}).items())
    return d


def to_table(records: Iterable[Trajectory]) -> pa.Table:
    rows = [_row(t) for t in records]
    return pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA)


def to_batch(records: Iterable[Trajectory]) -> pa.RecordBatch:
    rows = [_row(t) for t in records]
    return pa.RecordBatch.from_pylist(rows, schema=TRAJECTORY_SCHEMA)


def from_table(table: pa.Table | pa.RecordBatch) -> list[Trajectory]:
    return [trajectory_from_dict(r) for r in table.to_pylist()]
