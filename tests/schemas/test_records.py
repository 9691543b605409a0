from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
from worldtrace.schemas import (
    TRAJECTORY_SCHEMA,
    Action,
    Observation,
    Trajectory,
    Turn,
    from_table,
    to_table,
    trajectory_id,
)
from worldtrace.schemas.fields import SCHEMA_VERSION


def test_records_arrow_parquet_roundtrip(tmp_path, corpus):
    table = to_table(corpus)
    assert table.schema.equals(TRAJECTORY_SCHEMA)
    pq.write_table(table, tmp_path / "x.parquet", compression="zstd")
    back = from_table(pq.read_table(tmp_path / "x.parquet"))
    assert back == corpus


def test_json_roundtrip(corpus):
    for t in corpus[:10]:
        assert Trajectory.from_json(t.to_json()) == t


def test_schema_version_stamped(corpus):
    table = to_table(corpus)
    assert set(table.column("schema_version").to_pylist()) == {SCHEMA_VERSION}
    assert table.schema.metadata[b"worldtrace.schema_version"] == SCHEMA_VERSION.encode()


def _traj(obs: str = "hello", **kw) -> Trajectory:
    return Trajectory(
        domain="terminal",
        turns=[Turn(0, Action("keystrokes", "echo hello\n"), Observation(obs))],
        **kw,
    )


def test_hash_depends_on_content_not_provenance():
    from datetime import datetime, timezone

    a = _traj()
    b = _traj(started_at=datetime(2020, 1, 1, tzinfo=timezone.utc), metadata={"host": "x"})
    b.source.name = "other"
    assert trajectory_id(a) == trajectory_id(b)
    assert trajectory_id(a) != trajectory_id(_traj(obs="hello!"))
    c = _traj()
    c.system.task_description = "different task"
    assert trajectory_id(a) != trajectory_id(c)


def test_hash_stable_across_processes():
    """Same id in a fresh interpreter with a different hash seed: no reliance on hash()."""
    code = (
        "from worldtrace.schemas import *;"
        "t=Trajectory(domain='terminal',turns=[Turn(0,Action('keystrokes','echo hello\\n'),Observation('hello'))]);"
        "print(trajectory_id(t))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {trajectory_id(_traj())}
    # Pinned value: a change to the canonical form must be deliberate (and versioned).
    assert trajectory_id(_traj()) == PINNED_ID


PINNED_ID = "a8f7d6a4ae7ec71b1b82ca15fe1a4454"


def test_to_json_is_plain_json(corpus):
    d = json.loads(corpus[0].to_json())
    assert d["schema_version"] == SCHEMA_VERSION
    assert isinstance(d["turns"][0]["started_at"], str)
