"""Registries of plugins (sandbox kinds, policies): builtins plus an entry-point group.

A pip-installed package adds a name under the group; it never replaces a builtin, so a
dependency cannot silently swap the terminal sandbox. Nothing is imported until a name
is loaded, so listing the registry stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata
from typing import Any


def entries(group: str, builtins: Mapping[str, str]) -> dict[str, str]:
    """Name -> "module:attr": the builtins, then what the group's entry points add."""
    found = dict(builtins)
    for ep in metadata.entry_points(group=group):
        found.setdefault(ep.name, ep.value)
    return found


def load_ref(ref: str) -> Any:
    """The object a "module:attr" reference names (imports the module)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)
