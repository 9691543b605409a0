"""Found (export hunt 12-06b): `--where` with a subquery over `trajectories`, the view the
docs tell users to count with, was refused as `Catalog Error: Table with name trajectories
does not exist!` (the condition reads one shard file at a time: the refusal is right, its
words were not); and a split export's top manifest left out the parts' `by_domain`,
`by_category` and Megatron's `eod_tokens`, which the docs say it adds up.

Real parts: the shared processed store (a real Beam run), real exports, real DuckDB."""

from __future__ import annotations

import json

import pytest

from .test_export import do_export


@pytest.mark.parametrize(
    "where",
    [
        "num_turns > (SELECT avg(num_turns) FROM trajectories)",
        "trajectory_id IN (SELECT trajectory_id FROM trajectories WHERE num_turns > 3)",
    ],
)
def test_a_subquery_over_the_view_is_refused_saying_why(tmp_path, processed, where):
    out = tmp_path / "e"
    with pytest.raises(ValueError) as err:
        do_export(processed, out, where=where)
    assert str(err.value) == (
        f"where {where!r}: a condition on each trajectory's own columns, read one shard file "
        "at a time, names no table or view (trajectories: a subquery over the store would "
        "see one file, its avg that file's): name the trajectories by their columns, or list "
        "their ids (trajectory_id IN ('a', 'b'), from `worldtrace query`)"
    )
    assert not out.exists()


def _added(values):
    if isinstance(values[0], dict):
        return {k: _added([v[k] for v in values if k in v]) for k in {k for v in values for k in v}}
    return sum(values)


@pytest.mark.parametrize("fmt", ["parquet", "megatron"])
def test_the_top_manifest_adds_up_every_count_of_the_parts(tmp_path, processed, fmt):
    out = tmp_path / "e"
    do_export(processed, out, format=fmt, split="test=0.3", where="domain = 'terminal'")
    top = json.loads((out / "manifest.json").read_text())
    parts = [json.loads((out / p / "manifest.json").read_text())["counts"] for p in top["parts"]]
    counted = ["by_domain", "by_category"] + (["eod_tokens"] if fmt == "megatron" else [])
    for key in counted:
        assert top["counts"][key] == _added([c[key] for c in parts]), key
    assert top["counts"]["by_domain"]["terminal"]["samples"] == top["counts"]["samples"]


def test_a_where_is_refused_before_the_tokenizer_is_loaded(tmp_path, processed):
    """The refusal comes first (a tokenizer load is ~1 s, and it can fail on its own): a
    bad condition with a tokenizer that does not load is said as the condition's."""
    from worldtrace.pipelines.export import ExportConfig, export

    cfg = ExportConfig(
        input=str(processed.table("trajectories")),
        output=str(tmp_path / "e"),
        tokenizer=str(tmp_path / "no-such-tokenizer.json"),
        where="no_such_column = 1",
    )
    with pytest.raises(ValueError, match=r"^where 'no_such_column = 1': .*no_such_column"):
        export(cfg)
    assert not (tmp_path / "e").exists()
