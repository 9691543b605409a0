"""Hunt 1205, F2: `validate` reports a record whose `trajectory_id` is not its content
hash; `process --input` took the same record without a word, while docs/cli.md said it
rejects the same lines with the same reasons.

The id is derived data: processing recomputes every id after its filters, so a stale one
loses nothing; the record is processed under its content hash and the id it was written
with stays in `metadata.raw_trajectory_id`. The docs now say so, and this pins both
sides."""

from __future__ import annotations

import json

from worldtrace.schemas import Store, read_table

from ..schemas.test_review_1203b import wt


def test_a_stale_id_is_a_validate_problem_and_processed_under_its_content_hash(
    tmp_path, wt_env, corpus
):
    good = json.loads(corpus[1].to_json())
    stale = {**json.loads(corpus[2].to_json()), "trajectory_id": "0" * 32}
    f = tmp_path / "records.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(stale) + "\n")
    r = wt(wt_env, "validate", str(f))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"{f}:line 2 ({'0' * 32}): trajectory_id: does not match the content hash "
        f"({corpus[2].trajectory_id})"
    ]
    r = wt(wt_env, "process", "--input", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    store = Store.at(wt_env["WORLDTRACE_STORE"])
    kept = read_table(store.table("trajectories")).to_pylist()
    ids = {t["trajectory_id"]: dict(t["metadata"])["raw_trajectory_id"] for t in kept}
    assert ids == {
        corpus[1].trajectory_id: corpus[1].trajectory_id,
        corpus[2].trajectory_id: "0" * 32,
    }
    assert not read_table(store.table("rejects")).num_rows
