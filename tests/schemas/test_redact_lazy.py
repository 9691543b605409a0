"""Detector regexes compile on first search: a process whose records the batch screen
passes never compiles them (~0.2 s of every small `process` run and of each worker's
start), and the screen sees the same patterns and flags as before."""

from __future__ import annotations

import re
import subprocess
import sys

from worldtrace.schemas.redact_rules import (
    BUILTIN,
    LazyPattern,
    RedactConfig,
    builtin_detectors,
    detectors,
)

SCRIPT = """
import json
from worldtrace.schemas.redact import redactor
from worldtrace.schemas.redact_rules import LazyPattern
import pyarrow as pa

r = redactor()
flags = r.screen.rows(pa.record_batch({"text": ["ls -la", "cat notes.txt"]})).tolist()
lazy = [d.regex for d in r.detectors if isinstance(d.regex, LazyPattern)]
before = sum(p._compiled is not None for p in lazy)
out = r.text("token ghp_" + "a1B2" * 9)[0]
after = sum(p._compiled is not None for p in lazy)
print(json.dumps([len(lazy), before, after, [bool(f) for f in flags], out]))
"""


def test_a_redactor_compiles_no_detector_until_a_text_is_searched():
    """In a fresh process: building the redactor and screening clean records compiles
    none of its detector regexes; redacting a token compiles only the ones its gates
    let through, and finds it."""
    import json

    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    lazy, before, after, flags, out = json.loads(r.stdout.strip().splitlines()[-1])
    assert lazy == len(detectors(RedactConfig())) - len(RedactConfig().patterns) > 50
    assert before == 0 and flags == [False, False]
    assert 0 < after < 10
    assert out == "token <secret:github_token>"


def test_lazy_patterns_say_the_pattern_and_flags_of_the_compiled_ones():
    """The batch screen (and its cache key) reads `pattern` and `flags` only: they must
    be those `re.compile` gives, so the screen is the one it was."""
    for d in detectors(RedactConfig()):
        assert isinstance(d.regex, LazyPattern)
        rx = re.compile(d.regex.pattern, d.regex.flags)
        assert (d.regex.pattern, d.regex.flags) == (rx.pattern, rx.flags), d.kind
    for (_, source, *_), d in zip(BUILTIN, builtin_detectors(), strict=True):
        assert d.regex.flags == re.compile(source, re.M).flags  # no global inline flags
    p = LazyPattern(r"(?i:key)=(\w+)", re.M)
    assert p.groups == 1 and p.search("KEY=abc").group(1) == "abc"
