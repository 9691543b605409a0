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
    return Store.at(tmp_path / "store")


@pytest.fixture
def corpus():
    return generate(SyntheticConfig(n=40, seed=3))


@pytest.fixture
def wt_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the installed `worldtrace` console script."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["WORLDTRACE_STORE"] = str(tmp_path / "store")
    return env
