"""detect-secrets' plugin classes found by module (`redact_rules.PLUGIN_MODULES`): its
own registry imports every plugin module, ~15 ms of every run's start (KeywordDetector's
module compiles its regexes on import), for classes the rules leave out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from worldtrace.schemas.redact_rules import (
    DETECT_SECRETS_PLUGINS,
    PLUGIN_MODULES,
    SLOW_PLUGINS,
    detect_secrets_detectors,
    plugin_classes,
)

REGISTRY = {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}


def test_each_listed_module_holds_the_class_detect_secrets_registers():
    """A detect-secrets release that moved a class would be caught here, not only be
    slower (the registry is the fallback)."""
    assert {*DETECT_SECRETS_PLUGINS, *SLOW_PLUGINS} <= set(PLUGIN_MODULES)
    assert plugin_classes(tuple(PLUGIN_MODULES)) == {n: REGISTRY[n] for n in PLUGIN_MODULES}


def test_a_class_not_listed_is_found_in_the_registry_and_an_unknown_one_is_named():
    assert plugin_classes(("KeywordDetector",))["KeywordDetector"] is REGISTRY["KeywordDetector"]
    with pytest.raises(ValueError, match=r"unknown detect-secrets plugin\(s\): NoSuchDetector"):
        detect_secrets_detectors(("AWSKeyDetector", "NoSuchDetector"))


def test_the_default_rules_import_only_their_plugins_modules():
    """Beyond those detect-secrets imports itself (`plugins.base`, `private_key`): not
    KeywordDetector's, whose import compiles its regexes."""
    code = (
        "import json, sys\n"
        "plugins = lambda: sorted(m for m in sys.modules if m.startswith('detect_secrets.plugins.'))\n"
        "import detect_secrets.plugins.base\n"
        "own = plugins()\n"
        "from worldtrace.schemas.redact import redactor\n"
        "redactor().screen\n"
        "print(json.dumps([own, plugins()]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    own, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    added = {m.rsplit(".", 1)[1] for m in set(loaded) - set(own)}
    assert added == {PLUGIN_MODULES[n] for n in DETECT_SECRETS_PLUGINS}
    assert "detect_secrets.plugins.keyword" not in loaded
