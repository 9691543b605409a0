"""Shared fixtures: real temp stores and small generated corpora."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from worldtrace.collectors.synthetic import SyntheticConfig, generate
from worldtrace.schemas import Store

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty store that exists (reading commands refuse a store that does not)."""
    s = Store.at(tmp_path / "store")
    s.root.mkdir(parents=True)
    return s


@pytest.fixture
def corpus():
    return generate(SyntheticConfig(n=40, seed=3))


@pytest.fixture
def wt_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the installed `worldtrace` console script."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["WORLDTRACE_STORE"] = str(tmp_path / "store")
    (tmp_path / "store").mkdir(exist_ok=True)  # a store must exist (or be made with --create)
    return env


def _engine_error() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure means no usable engine
        return str(exc)
    return None


@pytest.fixture(scope="session")
def docker_engine():
    err = _engine_error()
    if err:
        pytest.skip(f"no docker engine answers ({err}); `make test` starts one via infra/setup.sh")
    import docker

    return docker.from_env()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small host repository for SWE sandboxes."""
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (r / "README.md").write_text("# calc\n")
    return r
