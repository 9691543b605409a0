"""The import rule of docs/design.md ("Imports follow the data flow"), checked on the
source: `schemas` imports nothing of ours, `sandboxes` only `schemas`, `collectors`
`sandboxes` and `schemas`, `pipelines` only `schemas`; imports inside functions count.
Found (a new user's walk through the docs, 1204f): `pipelines/filters.py` imported the
CAPTCHA check from `sandboxes`, and nothing said so."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "schemas": set(),
    "sandboxes": {"schemas"},
    "collectors": {"sandboxes", "schemas"},
    "pipelines": {"schemas"},
}


def imported(path: Path) -> list[str]:
    """Every absolute module name `path` imports, at any depth of its code."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_before_it(package):
    crossing = [
        f"{f.relative_to(ROOT)}: {m}"
        for f in sorted((ROOT / package).rglob("*.py"))
        for m in imported(f)
        if (parts := m.split("."))[0] == "worldtrace"
        and len(parts) > 1
        and parts[1] != package
        and parts[1] not in ALLOWED[package]
    ]
    assert crossing == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from worldtrace.sandboxes.web_spec import as_shown\n")
    assert imported(f) == ["worldtrace.sandboxes.web_spec"]
