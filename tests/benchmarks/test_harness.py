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
