"""Hunt 1205g: what processing stores beside a record's content, and generated records in
their older form.

1. `process --input` of a native record whose own `trajectory_id` is a secret kept it in
   `metadata.raw_trajectory_id` (added after the record was redacted; ids are skipped by
   the redactor as derived) and in `rejects.trajectory_id`; a file whose name holds a
   secret kept it in `rejects.source_path` and `clusters.source`. Only a reject's reason
   was redacted. A hex id stays as it is.
2. A generated record of the older form (`source.kind` collector, `environment.backend`
   synthetic) was imported without the `synthetic_source` warning and listed by `stats`
   under `collector`, real collector data, while export counts it synthetic
   (`records.is_synthetic`).

The real CLI on real files (the Beam pipeline behind `process`), nothing of ours mocked.
"""

from __future__ import annotations

import json
import random
import re

import duckdb
from worldtrace.collectors.synthetic import make_trajectory
from worldtrace.pipelines.export import is_synthetic
from worldtrace.schemas.hashing import trajectory_id
from worldtrace.schemas.records import to_jsonable

from ..schemas.test_review_1203b import wt

GITHUB = "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
SLACK = "xoxb-2234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"


def native(i: int, backend: str = "docker", **fields) -> dict:
    """A worldtrace record as a collector writes it (its content id), `fields` set over it."""
    d = to_jsonable(make_trajectory(random.Random(i), "terminal", i).to_dict())
    d["source"]["kind"], d["environment"]["backend"] = "collector", backend
    return {**d, **fields}


def query(env: dict, sql: str) -> list[dict]:
    r = wt(env, "query", "--format", "json", sql)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_a_raw_id_or_file_name_holding_a_secret_is_stored_redacted(tmp_path, wt_env):
    hex_id = "ab" * 16  # stale (not the content's), as a producer may write one
    trimmed = native(3, trajectory_id=GITHUB)
    trimmed["turns"][1]["action"].update(text="", name=None)  # a turn filter removes it
    recs = [
        native(1, trajectory_id=GITHUB),
        native(2, trajectory_id=GITHUB, domain="bogus"),  # rejected by validation
        trimmed,
        native(4, trajectory_id=hex_id),
        native(5, trajectory_id=hex_id, domain="bogus"),
    ]
    f = tmp_path / f"deploy-{SLACK}.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in recs))
    r = wt(wt_env, "process", "--input", str(f))
    assert r.returncode == 0, r.stdout + r.stderr

    kept = query(wt_env, "SELECT metadata['raw_trajectory_id'] AS raw FROM trajectories")
    assert sorted(k["raw"] for k in kept) == ["<secret:github_token>"] * 2 + [hex_id]
    rejects = query(wt_env, "SELECT trajectory_id, source_path, stage FROM rejects")
    assert sorted((x["stage"], x["trajectory_id"]) for x in rejects) == [
        ("turn_filter", "<secret:github_token>"),
        ("validate", "<secret:github_token>"),
        ("validate", hex_id),
    ]
    name = str(tmp_path / "deploy-<secret:slack_token>.jsonl")
    assert {x["source_path"] for x in rejects} == {name}
    # the record a reject is about is named as its cluster names it
    sources = {c["source"] for c in query(wt_env, "SELECT source FROM clusters")}
    assert sources == {f"{name}:line {n}" for n in (1, 3, 4)}
    said = json.dumps([kept, rejects, sorted(sources)]) + r.stdout + r.stderr
    assert GITHUB not in said and SLACK not in said
    ids = query(wt_env, "SELECT trajectory_id AS id FROM trajectories")
    assert {i["id"] for i in ids} >= {
        trajectory_id(native(1)),
        trajectory_id(native(4)),
    }  # our content ids, untouched


def test_generated_records_of_the_older_form_are_synthetic_for_import_and_stats(tmp_path, wt_env):
    older = [native(i, backend="synthetic") for i in (1, 2)]
    real = native(3)
    f = tmp_path / "records.jsonl"
    f.write_text(
        "".join(json.dumps({**d, "trajectory_id": trajectory_id(d)}) + "\n" for d in [*older, real])
    )
    r = wt(wt_env, "import", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"warning\s*│\s*synthetic_source\s*│\s*2\s*│", r.stdout), r.stdout
    warned = [x.split(": ", 1)[0] for x in r.stderr.splitlines() if "synthetic_source" in x]
    assert warned == [f"{f}:line 1", f"{f}:line 2"]
    r = wt(wt_env, "process")
    assert r.returncode == 0, r.stdout + r.stderr
    r = wt(wt_env, "stats", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(r.stdout)["sections"]["sources"]
    counts = {r["source_kind"]: (r["raw"], r["processed"]) for r in rows}
    assert counts == {"synthetic": (2, 2), "collector": (1, 1)}


def test_stats_source_kind_is_exports_predicate():
    """The SQL `stats` and `report` run says `synthetic` exactly where export's
    predicate does."""
    from worldtrace.summary import SOURCE_KIND  # here: the other tests run without it

    con = duckdb.connect()
    for kind in ("collector", "import", "synthetic"):
        for backend in ("docker", "synthetic", None):
            rec = {"source": {"kind": kind}, "environment": {"backend": backend}}
            got = con.execute(
                f"SELECT {SOURCE_KIND} FROM (SELECT $k AS source_kind, "
                "{'backend': $b} AS environment)",
                {"k": kind, "b": backend},
            ).fetchone()[0]
            assert (got == "synthetic") == is_synthetic(rec), rec
            assert got in (kind, "synthetic")
