"""Hunt 1206: a record whose `trajectory_id` is no string (a producer's number, a list, a
dict; a foreign Parquet shard's int64 column) stopped the whole `process` run with a
Python traceback (`TypeError ... [while running 'Process/Pass1/ParDo(_Pass1)']`, nothing
published), and `validate` called it `missing required field`. It is a reject naming the
file, the record and the field now, and the run goes on. Real CLI, real files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from worldtrace.schemas import ShardWriter

from ..schemas.test_review_1203b import wt
from .test_ids_synthetic_1205g import native, query

TYPE = "trajectory_id: wrong type: expected a string, got {}"


@pytest.mark.parametrize(("tid", "name"), [(12345, "int"), ([1, 2], "list"), ({"a": 1}, "dict")])
def test_a_jsonl_record_whose_id_is_no_string_is_a_reject_and_the_run_goes_on(
    tmp_path, wt_env, tid, name
):
    f = tmp_path / "mixed.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in [native(1), native(2, trajectory_id=tid), native(3)]))  # fmt: skip
    r = wt(wt_env, "process", "--input", str(f))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"rejected: {f}:line 2: validate: {TYPE.format(name)}" in r.stdout + r.stderr
    assert len(query(wt_env, "SELECT trajectory_id FROM trajectories")) == 2
    v = wt(wt_env, "validate", str(f))
    assert v.returncode == 1 and f"{f}:line 2: {TYPE.format(name)}" in v.stdout, v.stdout


def test_a_parquet_shard_whose_id_column_is_int64_is_rejected_by_row(tmp_path, wt_env, corpus):
    with ShardWriter(tmp_path / "shards") as w:
        w.write(corpus[:3])
    [path] = w.paths
    t = pq.read_table(path)
    i = t.schema.get_field_index("trajectory_id")
    t = t.set_column(i, "trajectory_id", pa.array(range(42, 45), pa.int64()))
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(t, foreign)
    r = wt(wt_env, "process", "--input", str(foreign))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"rejected: {foreign}:row 0: validate: {TYPE.format('int')}" in r.stdout + r.stderr
    v = wt(wt_env, "validate", str(foreign))
    assert f"{foreign}:row 2: {TYPE.format('int')}" in v.stdout, v.stdout
