"""`make bench` is not run by CI, so its modules are checked here: each imports, is
either a `run(ctx)` module or a standalone JSON-line printer, and every name it imports
from worldtrace (often inside a function, run only in a benchmark process) exists."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))


def worldtrace_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from worldtrace... import name` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("worldtrace"):
            found += [(node.module, a.name) for a in node.names]
    return found


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports_resolve(name):
    module = importlib.import_module(f"benchmarks.{name}")
    assert hasattr(module, "run") or hasattr(module, "main"), name
    for mod, attr in worldtrace_imports(ROOT / "benchmarks" / f"{name}.py"):
        assert hasattr(importlib.import_module(mod), attr), f"{name}: {mod}.{attr} is gone"


def test_every_module_is_collected_by_make_bench():
    from benchmarks.run import modules

    assert modules() == [*[m for m in ("bench_process", "bench_export") if m in MODULES],
                         *[m for m in MODULES if m not in ("bench_process", "bench_export")]]  # fmt: skip
    assert len(MODULES) >= 10


def test_query_benchmark_builds_its_store_from_the_current_schema(tmp_path):
    """The query module writes turns by hand; a column added to the schema broke it."""
    from benchmarks.bench_query import query

    r = query(str(tmp_path), "4000")
    assert r["ours_ms"] > 0 and r["floor_ms"] > 0


def test_a_standalone_line_that_is_not_a_row_is_reported_not_fatal(tmp_path, monkeypatch):
    """bench_redact printed an indented JSON document: the whole table was lost."""
    import benchmarks.run as harness

    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_fake.py").write_text(
        "import json\n"
        "print('{')\n"
        "print(json.dumps({'name': 'x', 'ours': 2, 'baseline': 1, 'ratio': 2.0}))\n"
    )
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    rows = harness.standalone("bench_fake", [])
    assert rows[0][0] == "bench_fake: unreadable line"
    assert rows[1][:4] == ("fake: x", "2", "1", "2.000")


def test_redact_benchmark_prints_rows_the_harness_reads():
    from benchmarks.bench_redact import rows
    from benchmarks.run import ROW_KEYS

    m = {
        "speed": {"mb": 0.4, "mb_per_s": {"compiled (default rules)": 20.0,
                                          "detect-secrets analyze_line (same plugins)": 4.0}},
        "recall_planted": "600/600",
        "false_positives_synthetic": {"texts": 100, "mb": 0.1, "redactions": 1},
        "false_positives_docker": {"texts": 10, "mb": 0.01, "redactions": 0},
    }  # fmt: skip
    out = rows(m)
    assert all(r.keys() >= ROW_KEYS for r in out)
    assert out[0]["ratio"] == 5.0 and [r["ratio"] for r in out[1:]] == [0.99, 1.0]


def test_process_configurations_run_in_alternation_and_keep_their_fastest(monkeypatch):
    """Each configuration ran its repeats back to back, so a slow spell of the machine
    fell on one side of a ratio (2 workers vs 1 moved 1.58-1.78 between runs)."""
    import benchmarks.bench_process as bp

    monkeypatch.setattr(bp, "RUNS", 3)
    calls, times = [], {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 6.0, 4.0])}

    def config(name):
        return lambda: calls.append(name) or {"seconds": next(times[name])}

    out = bp.rounds({"a": config("a"), "b": config("b")}, reset=lambda: calls.append("reset"))
    assert calls == ["a", "b", "reset", "a", "b", "reset", "a", "b"]  # each round on the last
    assert out["a"] == {"seconds": 1.0, "range": [1.0, 3.0]}
    assert out["b"] == {"seconds": 4.0, "range": [4.0, 6.0]}


def test_independent_configurations_change_places_every_round(monkeypatch):
    """In one fixed order the 5k run always followed datatrove's, and on this VM a run
    right after datatrove's was ~0.1 s slower: the order runs forth and back."""
    import benchmarks.bench_process as bp

    monkeypatch.setattr(bp, "RUNS", 3)
    calls = []
    out = bp.rounds({n: lambda n=n: calls.append(n) or {"seconds": 1.0} for n in "abc"})
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert set(out) == {"a", "b", "c"}


def test_pass1_work_alone_times_the_units_after_a_warm_up_unit(tmp_path):
    """The machine's side-by-side row times pass 1's own work; the first unit (which
    compiles the redaction rules) is left out of the time and of the count."""
    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.mask import DEFAULT_POLICY, get_policy
    from worldtrace.pipelines.units import plan_run, process_unit
    from worldtrace.schemas.store import input_files

    from benchmarks.bench_process import make_corpus, pass1_units

    make_corpus(str(tmp_path), "1100")
    plan = plan_run([str(f) for f in input_files([tmp_path / "raw"])], 1)
    assert len(plan) == 2
    path, group, span, *_ = plan[1]
    args = (FilterConfig(), DedupConfig(), get_policy(DEFAULT_POLICY))
    second = process_unit(path, group, *args, span).segment.num_rows
    r = pass1_units(str(tmp_path), "1")
    assert r["records"] == second and 0 < second < 1024
    assert r["seconds"] > 0


def test_deflate_floor_reads_the_turns_of_the_units_it_is_given(tmp_path):
    """docs/benchmarks.md's deflate floor times the deflates of the turns of the first
    units, as many as the corpus holds there (one unit of 1,024 rows, not the corpus)."""
    import pyarrow.parquet as pq
    from worldtrace.schemas.store import input_files

    from benchmarks.bench_process import deflate_floor, make_corpus

    make_corpus(str(tmp_path), "1100")
    r = deflate_floor(str(tmp_path), "1")
    first = pq.ParquetFile(input_files([tmp_path / "raw"])[0]).read_row_group(0)
    turns = first.column("turns").to_pylist()
    assert r["trajectories"] == len(turns) < 1100
    assert r["turns_per_traj"] == round(sum(map(len, turns)) / len(turns), 2)
    assert all(r[k] > 0 for k in ("level6_us", "level1_us", "one_byte_call_us"))


def test_timeline_lists_a_runs_stages_and_leaves_beam_as_it_was(tmp_path):
    """`python -m benchmarks.timeline` (the per-stage times docs/benchmarks.md quotes) on
    a small corpus: every stage the runner fused, pass 1 and pass 2 among them, in order
    of start, within the run; Beam's methods are its own again afterwards."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from worldtrace.collectors.synthetic import near_duplicate_corpus
    from worldtrace.schemas import ShardWriter

    from benchmarks.timeline import timeline

    data, _ = near_duplicate_corpus(n_unique=40, n_groups=4, group_size=3, seed=1)
    with ShardWriter(tmp_path / "raw", row_group_rows=32) as w:
        w.write(data)
    execute = fn_runner.FnApiRunner._execute_bundle
    marks, total = timeline(str(tmp_path), workers=1)
    stages = [label for _, _, label in marks if label.startswith("stage: ")]
    assert len(stages) == 9  # in-process: no shuffle spreads the units
    assert "Pass1" in stages[0] and "FinalizeNew" in stages[-1]
    assert [m[0] for m in marks] == sorted(m[0] for m in marks)
    assert all(start >= 0 and start + seconds <= total for start, seconds, _ in marks)
    assert fn_runner.FnApiRunner._execute_bundle is execute
    assert (tmp_path / "processed" / "trajectories").is_dir()


def test_pass1_stages_lap_every_step_of_the_unit_and_change_nothing(tmp_path):
    """docs/benchmarks.md's table of where pass 1's time goes is laps taken inside
    `process_unit` itself: every step is timed, and a unit timed is the unit untimed."""
    from collections import Counter

    from worldtrace.pipelines.dedup import DedupConfig
    from worldtrace.pipelines.filters import FilterConfig
    from worldtrace.pipelines.mask import DEFAULT_POLICY, get_policy
    from worldtrace.pipelines.units import plan_run, process_unit
    from worldtrace.schemas.store import input_files

    from benchmarks.bench_process import make_corpus, pass1_stages

    make_corpus(str(tmp_path), "1100")
    path, group, span, *_ = plan_run([str(f) for f in input_files([tmp_path / "raw"])], 1)[1]
    args = (FilterConfig(), DedupConfig(), get_policy(DEFAULT_POLICY))
    laps: Counter = Counter()
    timed = process_unit(path, group, *args, span, arrival_ns=1, laps=laps)
    assert timed.segment.equals(process_unit(path, group, *args, span, arrival_ns=1).segment)
    steps = ["read + validate", "normalize, redact, filters, content id",
             "statistics + mask decision", "MinHash + band keys", "segment to Arrow"]  # fmt: skip
    assert list(laps) == steps and all(v > 0 for v in laps.values())
    r = pass1_stages(str(tmp_path), "1", "2")
    assert r["records"] == timed.segment.num_rows and list(r["us_per_trajectory"]) == steps
    assert r["total"] == round(sum(r["us_per_trajectory"].values()), 1)
