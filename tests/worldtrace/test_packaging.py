"""The package as pip builds it: every data file the code reads is in the wheel, and the
build says nothing a new user would take for a fault (set-up installs it on every run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_holds_every_data_file_and_builds_without_warnings(tmp_path):
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    src = tmp_path / "src"  # a copy: the build's own `build/` stays out of the checkout
    for path in tracked:
        if (ROOT / path).is_file():
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, src / path)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    r = subprocess.run(
        [*cmd, "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "BuildBackendWarning" not in r.stderr, r.stderr
    (wheel,) = tmp_path.glob("worldtrace-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_of = {v: k for k, v in dirs["package-dir"].items()}
    data = [p for p in tracked if p.split("/", 1)[0] in package_of and not p.endswith(".py")]
    assert any(p.startswith("pipelines/prompts/") for p in data)
    for path in data:
        top, rest = path.split("/", 1)
        assert f"{package_of[top].replace('.', '/')}/{rest}" in names, path
