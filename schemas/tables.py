"""The processed side tables (turns, clusters, rejects): one declared row each.

Like the trajectory record, each row is declared once as a dataclass and its Arrow
schema derived (`arrow.arrow_schema`); processing writes plain dicts with these keys,
the `turns`/`clusters`/`rejects` views read them. New columns go last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from .arrow import arrow_schema
from .records import TurnStats
from .spec import spec


@dataclass
class TurnRow:
    """One scored turn of a processed trajectory, flat for DuckDB."""

    trajectory_id: str | None = None
    origin_id: str | None = None
    domain: str | None = None
    turn_index: int | None = None
    action_kind: str | None = None
    tool_name: str | None = None
    action_chars: int | None = field(default=None, metadata=spec(arrow=pa.int64()))
    obs_chars: int | None = field(default=None, metadata=spec(arrow=pa.int64()))
    is_error: bool | None = None
    """`observation.is_error` or a non-zero exit code."""
    truncated: bool | None = None
    stats: TurnStats | None = field(default=None, metadata=spec(flatten=True))
    """One column per statistic (ol, nov, ...)."""
    category: str | None = None
    keep: float | None = None
    rule: str | None = None
    in_loss: bool | None = None
    """The per-turn keep draw under the run's seed put this turn in the loss."""
    perturbation: str | None = None
    """The turn's `perturbation` JSON, when a fault or condition shaped it."""


@dataclass
class ClusterRow:
    """Every trajectory that reached dedup, with its cluster."""

    trajectory_id: str | None = None
    origin_id: str | None = None
    source: str | None = None
    """Where the record was read (`file:row N`)."""
    domain: str | None = None
    cluster_id: str | None = None
    representative: bool | None = None
    role: str | None = None


@dataclass
class RejectRow:
    """What processing dropped, and why."""

    source_path: str | None = None
    record: str | None = None
    stage: str | None = None
    reason: str | None = None
    trajectory_id: str | None = None


TABLE_ROWS: dict[str, type] = {"turns": TurnRow, "clusters": ClusterRow, "rejects": RejectRow}
TURNS_SCHEMA = arrow_schema(TurnRow)
TURN_CORPUS_COLUMNS = pa.schema(
    [
        pa.field("_template", pa.uint64()),
        pa.field("_alt_from", pa.int64()),
        pa.field("_alt_category", pa.string()),
        pa.field("_alt_keep", pa.float64()),
        pa.field("_alt_rule", pa.string()),
        pa.field("_alt_in_loss", pa.bool_()),
    ]
)
"""Hidden columns of the stored `turns` files, after the `TurnRow` ones: the columns that
depend on corpus counts are filled at read time from them (views.py), so a new batch
never rewrites earlier files. `_template` is the observation's template key (joined with
processed/_index/templates.parquet); a policy that reads corpus counts stores the
decision that holds once the template's count reaches `_alt_from` (`_alt_*`; null:
the count never changes the decision). The stored `corpus_surprisal` is null then."""
TURN_CLUSTER = "_cluster"
"""Hidden column of the stored `turns` files, after the corpus ones: the cluster the turn's
trajectory represents (its `dedup.cluster_id`). A kept trajectory is the one
representative of its cluster, so (trajectory id, cluster) names it where the id alone
does not: with `dedup.exact=false` two processed trajectories share an id, and the
`trajectories` view gave both the turns of both (`schemas.views.trajectory_fix`). Null
in files written before it: `c<trajectory id>`, what exact dedup names the cluster of
every kept trajectory."""
STORED_TURNS_SCHEMA = pa.schema(
    [*TURNS_SCHEMA, *TURN_CORPUS_COLUMNS, pa.field(TURN_CLUSTER, pa.string())]
)
CLUSTERS_SCHEMA = arrow_schema(ClusterRow)
REJECTS_SCHEMA = arrow_schema(RejectRow)
