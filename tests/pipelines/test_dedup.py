from __future__ import annotations

import glob
import itertools
import json
import tempfile

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to
from worldtrace.collectors.synthetic import build, near_duplicate_corpus
from worldtrace.pipelines.dedup import DedupConfig, Deduplicate, components


def test_components_span_buckets():
    # a~b meet in one bucket, b~c in another, d~e elsewhere: {a,b,c} is one cluster
    comps = components([("a", "b"), ("c", "b"), ("e", "d")])
    assert comps == {"a": "a", "b": "a", "c": "a", "d": "d", "e": "d"}
    assert components([]) == {}


def run_dedup(records, cfg=DedupConfig()):
    """Run the transform; read its outputs back from JSON lines files."""
    items = [(f"f.parquet:row {i}", r.to_dict()) for i, r in enumerate(records)]
    out_dir = tempfile.mkdtemp()
    with BeamPipeline() as p:
        out = p | beam.Create(items) | Deduplicate(cfg)
        kept = out.kept | "Ids" >> beam.Map(
            lambda r: json.dumps([r["trajectory_id"], r["dedup"]["cluster_id"]])
        )
        kept | "K" >> beam.io.WriteToText(f"{out_dir}/kept")
        (
            out.clusters
            | "C" >> beam.Map(json.dumps)
            | "CW" >> beam.io.WriteToText(f"{out_dir}/clusters")
        )

    def read(prefix):
        return [
            json.loads(line) for f in sorted(glob.glob(f"{out_dir}/{prefix}*")) for line in open(f)
        ]

    kept_ids = sorted(tuple(x) for x in read("kept"))
    return kept_ids, read("clusters")


def long_traj(seed_word: str, n: int = 8, tweak: str = ""):
    pairs = [
        (f"cat file_{i}.txt\n", f"{seed_word} line {i} " + " ".join(f"w{i}_{j}" for j in range(30)))
        for i in range(n)
    ]
    if tweak:
        pairs[3] = (pairs[3][0], pairs[3][1] + tweak)
    return build("terminal", pairs)


def test_exact_and_near_duplicates_collapse_to_one_representative():
    a = long_traj("alpha")
    a_copy = build(
        "terminal", [(t.action.text, t.observation.text) for t in a.turns], episode="other"
    )
    a_near = long_traj("alpha", tweak=" 1234")
    b = long_traj("bravo-unrelated-content")
    kept, clusters = run_dedup([a, a_copy, a_near, b])
    assert len(kept) == 2
    roles = sorted(r["role"] for r in clusters)
    assert roles == ["exact", "near", "representative", "singleton"]
    cluster_of = {r["source"]: r["cluster_id"] for r in clusters}
    assert len({cluster_of[f"f.parquet:row {i}"] for i in range(3)}) == 1
    assert sum(r["representative"] for r in clusters) == 2


def test_representative_is_deterministic():
    a, b = long_traj("alpha"), long_traj("alpha", tweak=" 99")
    k1, _ = run_dedup([a, b])
    k2, _ = run_dedup([b, a])
    assert k1 == k2


def test_dedup_can_be_switched_off():
    a = long_traj("alpha")
    kept, clusters = run_dedup([a, a], DedupConfig(exact=False, near=False))
    assert len(kept) == 2 and {r["role"] for r in clusters} == {"singleton"}


def test_assert_that_on_kept_ids():
    a, b = long_traj("alpha"), long_traj("zulu")
    items = [("x:row 0", a.to_dict()), ("x:row 1", a.to_dict()), ("x:row 2", b.to_dict())]
    with BeamPipeline() as p:
        out = p | beam.Create(items) | Deduplicate(DedupConfig())
        assert_that(
            out.kept | beam.Map(lambda r: r["trajectory_id"]),
            equal_to([a.trajectory_id, b.trajectory_id]),
        )


def test_quality_on_planted_near_duplicates():
    """Precision and recall of duplicate pairs on a corpus with known groups."""
    data, groups = near_duplicate_corpus(n_unique=400, n_groups=40, group_size=4, seed=5)
    _, clusters = run_dedup(data)
    by_cluster: dict[str, set[str]] = {}
    for r in clusters:
        by_cluster.setdefault(r["cluster_id"], set()).add(r["trajectory_id"])
    found = {
        frozenset(p) for c in by_cluster.values() for p in itertools.combinations(sorted(c), 2)
    }
    truth = {frozenset(p) for g in groups for p in itertools.combinations(sorted(g), 2)}
    tp = len(found & truth)
    precision, recall = tp / max(len(found), 1), tp / len(truth)
    print(
        f"dedup pairs: precision={precision:.3f} recall={recall:.3f} (found {len(found)}, true {len(truth)})"
    )
    assert precision >= 0.95
    assert recall >= 0.80
