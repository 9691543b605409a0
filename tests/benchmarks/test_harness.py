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
